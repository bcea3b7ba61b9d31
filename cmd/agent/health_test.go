package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// closedPort is a port on 127.0.0.1 that nothing listens on (it was free a moment ago).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return port
}

// waitHealth runs `agent health args...` until it exits with want, or fails the test at the
// deadline.
func waitHealth(t *testing.T, a *runningAgent, want int, env []string, args ...string) result {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := runAgent(t, nil, 30*time.Second, env, append([]string{"health"}, args...)...)
		if r.code == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent health %v: exit %d, want %d; stderr: %s\nthe agent's log:\n%s", args, r.code, want, r.stderr, a.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHealth: `agent health` is the image's health check (no shell, no curl in it). It finds
// the page where the running agent serves it (flag, config file, environment), exits 0 while
// the agent is alive, 1 when it is not, and with --ready 1 while no broker has answered.
func TestHealth(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topic := kafkatest.NewTopic(t, 1)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app.log")
	if err := os.WriteFile(logFile, []byte("one line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := closedPort(t)
	addr := "127.0.0.1:" + port
	cfgFile := filepath.Join(dir, "agent.yaml")
	cfg := "brokers: " + bootstrap + "\ntopic: " + topic + "\nhttp: " + addr + "\nstate-dir: " + filepath.Join(dir, "state") + "\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	if r := runAgent(t, nil, 30*time.Second, nil, "health", "--http", addr); r.code != exitFailed || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("no agent running: exit %d, want 1 naming the refused connection; stderr: %s", r.code, r.stderr)
	}
	if r := runAgent(t, nil, 30*time.Second, nil, "health"); r.code != exitFailed || !strings.Contains(r.stderr, "page is off") {
		t.Fatalf("no address anywhere: exit %d, want 1 (never 2: a HEALTHCHECK reserves it) saying the page is off; stderr: %s", r.code, r.stderr)
	}

	a := startAgent(t, nil, "--config", cfgFile, "--tail", logFile, "--start-at", "beginning")
	r := waitHealth(t, a, exitOK, nil, "--config", cfgFile)
	if !strings.Contains(r.stdout, "http://"+addr+"/healthz: ok") {
		t.Errorf("stdout %q, want the answer of %s/healthz", r.stdout, addr)
	}
	waitHealth(t, a, exitOK, nil, "--config", cfgFile, "--ready")
	waitHealth(t, a, exitOK, []string{"KAFKATRAIL_HTTP=" + addr})
	waitHealth(t, a, exitOK, nil, "--http", addr, "--ready")
	a.stop(time.Minute)
	if r := runAgent(t, nil, 30*time.Second, nil, "health", "--config", cfgFile); r.code != exitFailed {
		t.Errorf("after the agent stopped: exit %d, want 1; stderr: %s", r.code, r.stderr)
	}

	// Alive but not ready: no broker has answered.
	port2 := closedPort(t)
	b := startAgent(t, nil, "--brokers", "127.0.0.1:"+closedPort(t), "--topic", topic, "--tail", logFile,
		"--http", "127.0.0.1:"+port2, "--state-dir", filepath.Join(dir, "state2"))
	waitHealth(t, b, exitOK, nil, "--http", "127.0.0.1:"+port2)
	if r := runAgent(t, nil, 30*time.Second, nil, "health", "--http", "127.0.0.1:"+port2, "--ready"); r.code != exitFailed || !strings.Contains(r.stderr, "503") {
		t.Errorf("no broker: health --ready exit %d, want 1 with the page's 503; stderr: %s", r.code, r.stderr)
	}
	b.stop(time.Minute)
}

func TestHealthURL(t *testing.T) {
	for _, c := range []struct {
		addr  string
		ready bool
		want  string
	}{
		{"127.0.0.1:8686", false, "http://127.0.0.1:8686/healthz"},
		{"0.0.0.0:8686", true, "http://127.0.0.1:8686/readyz"},
		{":8686", false, "http://127.0.0.1:8686/healthz"},
		{"[::]:8686", false, "http://[::1]:8686/healthz"},
		{"agent.local:9000", false, "http://agent.local:9000/healthz"},
	} {
		if got, err := healthURL(c.addr, c.ready); err != nil || got != c.want {
			t.Errorf("healthURL(%q, %v) = %q, %v; want %q", c.addr, c.ready, got, err, c.want)
		}
	}
	if _, err := healthURL("8686", false); err == nil {
		t.Error("healthURL(\"8686\"): no error")
	}
}
