package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/tools/internal/dashq"
)

// TestDashboardQueriesHealthy runs two healthy agents against the real broker, nothing
// injected: one tails a file, one reads stdin, short lines only. With their metrics pushed to
// Prometheus every second, it runs every query of every dashboard for each agent alone (its
// instance selected, the other variables at "All") while they run, and fails naming each query
// that returns nothing: a user of a healthy system must read 0 on the panels of what did not
// happen (failed and retried records, connection closes and failures, truncated, split and
// dropped lines), not "No data". The two agents cover both label variants of the per-file
// panels: log.file.path for a file, kafkatrail.input="stdin" for standard input.
func TestDashboardQueriesHealthy(t *testing.T) {
	bootstrap := backend(t, "KAFKA_BOOTSTRAP")
	jaegerURL, jaegerOTLP, promURL, promOTLP := observability(t)
	ctx := context.Background()
	// A job of its own: no other test's faults can answer a query here.
	service := uniqueName("kafkatrail-healthy")
	agentBinary(t) // build before the clock starts

	common := func(name string) []string {
		return []string{"--brokers", bootstrap, "--topic", uniqueName("e2e-healthy-" + name),
			"--state-dir", t.TempDir(), "--log-format", "text"}
	}
	instance := func(name string) string { return "e2e-healthy-" + name }
	env := func(name string) map[string]string {
		return dashboardAgentEnv(service, instance(name), jaegerOTLP, promOTLP)
	}

	path := filepath.Join(t.TempDir(), "app.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tail := startAgent(t, "tail", append(common("tail"), "--tail", path, "--start-at", "beginning"), env("tail"), false)
	stdin := startAgent(t, "stdin", append(common("stdin"), "--stdin"), env("stdin"), true)
	for i := 0; i < 200; i++ {
		line := fmt.Sprintf(`{"msg":"e2e healthy line %d","n":%d}`+"\n", i, i)
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		if _, err := stdin.stdin.Write([]byte(line)); err != nil {
			t.Fatalf("stdin agent: %v; its output:\n%s", err, stdin.output())
		}
		time.Sleep(10 * time.Millisecond)
	}

	queries, err := dashq.Load("../../dashboards")
	if err != nil {
		t.Fatal(err)
	}
	var checks []dashCheck
	for _, name := range []string{"tail", "stdin"} {
		vars := dashq.Vars{RateInterval: "2m", Values: map[string]string{
			"job": service, "service": service, "instance": instance(name)}}
		for _, q := range queries {
			checks = append(checks, dashCheck{q: q, vars: vars, prefix: "instance " + instance(name) + ": "})
		}
	}
	failed := runDashChecks(ctx, checks, jaegerURL, promURL, 25*time.Second)

	// The agents were healthy: each exits 0 once its input ends (SIGTERM for the tail, EOF
	// for stdin), every line delivered.
	_ = tail.cmd.Process.Signal(syscall.SIGTERM)
	stdin.stdin.Close()
	for _, r := range []*agentRun{tail, stdin} {
		if code := r.wait(30 * time.Second); code != 0 {
			t.Errorf("%s: a healthy agent exited %d; its output:\n%s", r.name, code, r.output())
		}
	}

	if len(failed) > 0 {
		t.Errorf("%d of %d dashboard queries return nothing on a healthy agent (the panel reads \"No data\", not 0):\n  %s\n"+
			"metric names Prometheus has for job %q: %s",
			len(failed), len(checks), strings.Join(failed, "\n  "), service, strings.Join(metricNames(ctx, promURL, service), " "))
		return
	}
	// Which panels a zero fallback answered: what a healthy agent reads as 0 (for the log).
	var zeros []string
	for _, c := range checks[:len(queries)] {
		if c.q.Type != "prometheus" || c.q.VarLabel != "" {
			continue
		}
		own, ok, err := dashq.OwnSeries(c.vars.Substitute(c.q.Expr))
		if err == nil && ok && promHasData(ctx, promURL, own) != "" {
			zeros = append(zeros, c.q.String())
		}
	}
	t.Logf("all %d dashboard queries returned data for each healthy agent; %d read 0 through their zero fallback: %s",
		len(queries), len(zeros), strings.Join(zeros, "; "))
}
