// Package e2e runs kafkatrail against real backends: a real Kafka broker, Jaeger v2 and
// Prometheus 3 (built from tools/go.mod by scripts/tools.sh). Run them with
//
//	make test-e2e
//
// which starts the broker (scripts/kafka/with-broker.sh) and Jaeger and Prometheus
// (scripts/with-observability.sh), exports their addresses, and runs `go test ./...` here.
// Without that environment every test fails with a message saying so (under -short they skip).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// backend returns the value of an environment variable that the e2e wrapper scripts export,
// or fails the test saying how to run it.
func backend(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if testing.Short() {
		t.Skipf("%s not set: end-to-end test skipped under -short", name)
	}
	t.Fatalf("%s is not set: Jaeger, Prometheus and the Kafka broker are not running; run `make test-e2e` "+
		"(or: scripts/kafka/with-broker.sh scripts/with-observability.sh sh -c 'cd tools && go test ./e2e/')", name)
	return ""
}

// observability returns the backends' addresses (backend): Jaeger's query URL and OTLP/gRPC
// endpoint, Prometheus's URL and OTLP metrics endpoint.
func observability(t *testing.T) (jaegerURL, jaegerOTLP, promURL, promOTLP string) {
	t.Helper()
	return backend(t, "JAEGER_QUERY_URL"), backend(t, "JAEGER_OTLP_GRPC_ENDPOINT"),
		backend(t, "PROMETHEUS_URL"), backend(t, "PROMETHEUS_OTLP_METRICS_ENDPOINT")
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// getJSON GETs base+path with the query, decodes the JSON answer into v.
func getJSON(ctx context.Context, base, path string, query url.Values, v any) error {
	u := strings.TrimRight(base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, truncate(string(body), 500))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", u, err, truncate(string(body), 500))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// poll calls f every interval until it returns true or the deadline passes; it returns the
// last error f reported (for the failure message).
func poll(ctx context.Context, deadline time.Duration, interval time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var last error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("condition not met")
			}
			return fmt.Errorf("after %v: %w", deadline, last)
		case <-time.After(interval):
		}
	}
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// agentBinary builds cmd/agent from the root module once per test binary.
func agentBinary(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kafkatrail-e2e-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, "agent")
		root, err := filepath.Abs("../..")
		if err != nil {
			agentErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", agentPath, "./cmd/agent")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			agentErr = fmt.Errorf("go build ./cmd/agent (in %s): %v\n%s", root, err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// agentRun is one run of the agent binary.
type agentRun struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

// startAgent starts the agent with args and extra environment (added to this process's,
// less any OTEL_* variable of the caller). With stdin true, lines are written by the caller
// through run.stdin.
func startAgent(t *testing.T, name string, args []string, env map[string]string, stdin bool) *agentRun {
	t.Helper()
	bin := agentBinary(t)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "KAFKATRAIL_") && !strings.HasPrefix(kv, "AGENT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	r := &agentRun{t: t, name: name, cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: r.stderr}
	cmd.Stdout = cmd.Stderr
	if stdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		r.stdin = w
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start agent: %v", name, err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait waits for the agent to exit (at most d), returning its exit code.
func (r *agentRun) wait(d time.Duration) int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		_ = r.cmd.Process.Kill()
		<-r.done
		// Errorf, not Fatalf: wait may run on a goroutine of the test's own.
		r.t.Errorf("%s: agent did not exit within %v; its output:\n%s", r.name, d, r.output())
		return -1
	}
	if r.err == nil {
		return 0
	}
	if ee, ok := r.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	r.t.Errorf("%s: %v", r.name, r.err)
	return -1
}

func (r *agentRun) output() string {
	lw := r.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return truncate(r.stderr.String(), 8000)
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}
