package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// agentBin is the agent built once for the package's tests: they run it as users do.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kafkatrail-agent-test")
	if err != nil {
		panic(err)
	}
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-race", "-o", agentBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runAgent runs the agent binary with args, stdin from in, and a clean environment (testkit.AgentEnv)
// plus env. It fails the test if the agent outlives timeout.
func runAgent(t *testing.T, in io.Reader, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentBin, args...)
	cmd.Stdin = in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(testkit.AgentEnv(), env...)
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("agent still running after %v; stderr:\n%s", timeout, tail(r.stderr))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// numberedLines writes n lines "line-<i> <padding>" of about size bytes each.
func numberedLines(n, size int) *bytes.Buffer {
	var b bytes.Buffer
	pad := strings.Repeat("p", max(size-16, 0))
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "line-%09d %s\n", i, pad)
	}
	return &b
}

// kcatValues reads every record of topic with kcat and returns the values.
func kcatValues(t *testing.T, bootstrap, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	var vals []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		vals = append(vals, sc.Text())
	}
	return vals
}

// checkEveryLineOnce asserts that values hold line-0..line-(n-1), each exactly once.
func checkEveryLineOnce(t *testing.T, values []string, n int) {
	t.Helper()
	seen := make([]int, n)
	for _, v := range values {
		f := strings.Fields(v)
		if len(f) == 0 || !strings.HasPrefix(f[0], "line-") {
			t.Fatalf("unexpected record %.60q", v)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(f[0], "line-"))
		if err != nil || i < 0 || i >= n {
			t.Fatalf("unexpected record %.60q", v)
		}
		seen[i]++
	}
	lost, dup := 0, 0
	for _, c := range seen {
		if c == 0 {
			lost++
		}
		if c > 1 {
			dup += c - 1
		}
	}
	if lost > 0 || dup > 0 {
		t.Fatalf("%d of %d lines lost, %d duplicated", lost, n, dup)
	}
}

func TestStdinMillionLinesAllAcknowledged(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topic := kafkatest.NewTopic(t, 6)
	const n = 1_000_000
	in := numberedLines(n, 100)
	r := runAgent(t, in, 5*time.Minute, nil, "--brokers", bootstrap, "--topic", topic, "--log-level", "warn")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, tail(r.stderr))
	}
	t.Logf("%d lines through stdin in %v: %.0f lines/s", n, r.took, n/r.took.Seconds())
	if strings.Contains(r.stderr, "\r") {
		t.Fatal("a progress line was drawn although stderr is not a terminal")
	}
	checkEveryLineOnce(t, kcatValues(t, bootstrap, topic), n)
}

func TestBadConfigurationExitsTwoNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfg, []byte("topic: t\nbrokers: [127.0.0.1:9092]\nlong-lines: fold\nproducer:\n  lingr.ms: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"file", nil, []string{"--config", cfg}, []string{"producer.lingr.ms"}},
		{"value", nil, []string{"--topic", "t", "--brokers", "127.0.0.1:9092", "--long-lines", "fold"}, []string{"long-lines"}},
		{"env", []string{"KAFKATRAIL_MAX_LINE_BYTES=many"}, []string{"--topic", "t", "--brokers", "127.0.0.1:9092"}, []string{"max-line-bytes"}},
		{"producer", nil, []string{"--topic", "t", "--brokers", "127.0.0.1:9092", "-X", "acks=1"}, []string{"enable.idempotence=true requires acks=all"}},
		{"flag", nil, []string{"--no-such-flag"}, []string{"no-such-flag"}},
		{"http", nil, []string{"--topic", "t", "--brokers", "127.0.0.1:9092", "--http", "localhost"}, []string{"http: want HOST:PORT"}},
		{"http in use", nil, []string{"--topic", "t", "--brokers", "127.0.0.1:9092", "--http", busyAddr(t)}, []string{"--http", "address already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgent(t, strings.NewReader(""), 30*time.Second, tc.env, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("stderr does not name %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

// busyAddr returns a loopback address something listens on until the test ends.
func busyAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

func TestCheckPrintsConfigWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	body := "topic: t\nbrokers: [127.0.0.1:9094]\nproducer:\n  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: SCRAM-SHA-256\n  sasl.username: alice\n  sasl.password: very-secret-words\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, nil, 30*time.Second, nil, "check", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("check exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "very-secret-words") {
		t.Fatal("agent check printed the SASL password")
	}
	if !strings.Contains(r.stdout, "configuration OK") || !strings.Contains(r.stdout, "producer.sasl.mechanism=SCRAM-SHA-256") {
		t.Fatalf("check output:\n%s", r.stdout)
	}
	if v := runAgent(t, nil, 30*time.Second, nil, "version"); v.code != 0 || !strings.Contains(v.stdout, "kafkatrail agent") {
		t.Fatalf("version: %d %q", v.code, v.stdout)
	}
}

// The example configuration in configs/ must stay valid.
func TestExampleConfigPassesCheck(t *testing.T) {
	r := runAgent(t, nil, 30*time.Second, nil, "check", "--config", "../../configs/agent.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "configuration OK") {
		t.Fatalf("configs/agent.yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
