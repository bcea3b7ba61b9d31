package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/tools/internal/dashq"
)

// TestDashboardQueriesReturnData runs the agent in several scenarios at once against the
// real broker, with metrics pushed over OTLP/HTTP (gzip) to Prometheus every second and traces to
// Jaeger, then runs every PromQL query of every dashboard in dashboards/ (Grafana's
// variables set to "All") and asserts that each returns data, that every label_values
// variable has values, that every Jaeger search finds traces, and that the latency
// exemplars point at traces Jaeger has. A query with a zero fallback (what a healthy agent
// reads, TestDashboardQueriesHealthy) must return data without it too: the faults move the
// panel's own series.
//
// The scenarios make every panel meaningful, including the ones that only move when
// something goes wrong:
//   - tail: follows a file (lag, checkpoint lag, files watched) with long lines split, and
//     idles past connections.max.idle.ms before it stops (connection closes);
//   - truncate, drop: stdin with long lines truncated, dropped;
//   - container: stdin in a container runtime's CRI framing, with lines written in pieces
//     (joined) and lines that are not CRI (malformed);
//   - retries: the topic is deleted mid-stream, so produce requests are retried
//     (UNKNOWN_TOPIC_OR_PARTITION) and the waiting batches exhaust a small buffer.memory;
//   - unreachable: a bootstrap address where nothing listens (connection failures, metadata
//     timeouts);
//   - spans: an export queue of 8 spans under 2,000 traced records a second (spans dropped);
//   - deadletter: stdin with lines over the topic's max.message.bytes among short ones (the
//     broker refuses them for good: dead-lettered to the dead-letter file);
//   - resend: a followed file whose topic is deleted mid-stream: its records expire
//     (delivery.timeout.ms) and the agent sends the lines again until the topic is back.
func TestDashboardQueriesReturnData(t *testing.T) {
	bootstrap := backend(t, "KAFKA_BOOTSTRAP")
	jaegerURL, jaegerOTLP, promURL, promOTLP := observability(t)
	ctx := context.Background()
	const service = "kafkatrail-agent"
	agentBinary(t) // build before the clock starts

	env := func(instance string) map[string]string {
		return dashboardAgentEnv(service, "e2e-"+instance, jaegerOTLP, promOTLP)
	}
	longLine := strings.Repeat("x", 1000)
	line := func(i int) string {
		if i%10 == 5 {
			return fmt.Sprintf("long line %d %s", i, longLine)
		}
		return fmt.Sprintf(`{"msg":"e2e dashboard line %d","n":%d}`, i, i)
	}
	common := func(topic string) []string {
		return []string{"--brokers", bootstrap, "--topic", topic, "--state-dir", t.TempDir(), "--log-format", "text"}
	}

	// The retries scenario's topic exists before the agent starts, so that deleting it
	// mid-stream is what the producer meets. (Kafka 4.4 accepts acks=all on a topic with
	// replication factor 1 and min.insync.replicas=2, so NOT_ENOUGH_REPLICAS cannot be had
	// from the single test broker.)
	retryTopic := uniqueName("e2e-dash-retries")
	createTopic(t, bootstrap, retryTopic, nil)
	resendTopic := uniqueName("e2e-dash-resend")
	createTopic(t, bootstrap, resendTopic, nil)
	dlTopic, small := uniqueName("e2e-dash-deadletter"), "2000"
	createTopic(t, bootstrap, dlTopic, map[string]*string{"max.message.bytes": &small})

	var wg sync.WaitGroup
	results := make(chan string, 10)
	start := func(name string, wantExit []int, f func() (*agentRun, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f()
			if err != nil {
				results <- fmt.Sprintf("%s: %v", name, err)
				return
			}
			code := r.wait(90 * time.Second)
			for _, c := range wantExit {
				if c == code {
					t.Logf("scenario %s: agent exited %d as expected", name, code)
					return
				}
			}
			results <- fmt.Sprintf("%s: agent exited %d, want one of %v; its output:\n%s", name, code, wantExit, r.output())
		}()
	}
	// feed writes n lines to w, spread over d.
	feed := func(w interface{ Write([]byte) (int, error) }, n int, d time.Duration) error {
		for i := 0; i < n; i++ {
			if _, err := fmt.Fprintln(w, line(i)); err != nil {
				return err
			}
			time.Sleep(d / time.Duration(n))
		}
		return nil
	}

	// tail: a file followed from the beginning, written for 4 s, then SIGTERM.
	start("tail", []int{0}, func() (*agentRun, error) {
		dir := t.TempDir()
		path := filepath.Join(dir, "app.log")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r := startAgent(t, "tail", append(common(uniqueName("e2e-dash-tail")), "--tail", path, "--start-at", "beginning",
			"--long-lines", "split", "--max-line-bytes", "300", "--partial-line-idle", "500ms",
			"-X", "connections.max.idle.ms=1000"), env("tail"), false)
		if err := feed(f, 400, 4*time.Second); err != nil {
			return r, err
		}
		time.Sleep(4 * time.Second) // idle: the connection expires (connections.max.idle.ms)
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		return r, nil
	})
	for _, policy := range []string{"truncate", "drop"} {
		policy := policy
		start(policy, []int{0}, func() (*agentRun, error) {
			r := startAgent(t, policy, append(common(uniqueName("e2e-dash-"+policy)), "--stdin",
				"--long-lines", policy, "--max-line-bytes", "300"), env(policy), true)
			err := feed(r.stdin, 200, 3*time.Second)
			time.Sleep(time.Second)
			r.stdin.Close()
			return r, err
		})
	}
	// spans: an export queue far too small for the records traced (always_on): spans are
	// dropped (kafkatrail.telemetry.spans.dropped), the records are not.
	start("spans", []int{0}, func() (*agentRun, error) {
		e := env("spans")
		e["OTEL_BSP_MAX_QUEUE_SIZE"] = "8"
		r := startAgent(t, "spans", append(common(uniqueName("e2e-dash-spans")), "--stdin"), e, true)
		err := feed(r.stdin, 2000, time.Second)
		time.Sleep(time.Second)
		r.stdin.Close()
		return r, err
	})
	start("container", []int{0}, func() (*agentRun, error) {
		r := startAgent(t, "container", append(common(uniqueName("e2e-dash-container")), "--stdin",
			"--container-format", "cri"), env("container"), true)
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			ts := time.Now().UTC().Format(time.RFC3339Nano)
			switch {
			case i%25 == 7:
				_, err = fmt.Fprintf(r.stdin, "not a CRI line %d\n", i)
			case i%10 == 3:
				_, err = fmt.Fprintf(r.stdin, "%s stdout P first half of %d, \n%s stdout F its second half\n", ts, i, ts)
			default:
				_, err = fmt.Fprintf(r.stdin, "%s stderr F %s\n", ts, line(i))
			}
			time.Sleep(15 * time.Millisecond)
		}
		time.Sleep(time.Second)
		r.stdin.Close()
		return r, err
	})
	start("retries", []int{0, 1}, func() (*agentRun, error) {
		// The topic is deleted while records flow: produce requests get
		// UNKNOWN_TOPIC_OR_PARTITION (retriable) until the metadata shows the topic gone and
		// it is created again; meanwhile batches hold the small buffer.memory and Sends give
		// up after max.block.ms. Success or failure both do; retries must happen.
		r := startAgent(t, "retries", append(common(retryTopic), "--stdin",
			"-X", "linger.ms=0", "-X", "retry.backoff.ms=100",
			"-X", "request.timeout.ms=2000", "-X", "delivery.timeout.ms=6000",
			"-X", "batch.size=16384", "-X", "buffer.memory=65536", "-X", "max.block.ms=300",
			"--shutdown-timeout", "20s"), env("retries"), true)
		payload := strings.Repeat("r", 500)
		var err error
		for i := 0; i < 600 && err == nil; i++ {
			if i == 150 {
				deleteTopic(t, bootstrap, retryTopic)
			}
			_, err = fmt.Fprintf(r.stdin, "retry line %d %s\n", i, payload)
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		r.stdin.Close()
		return r, err
	})
	// deadletter: a line over the topic's max.message.bytes is refused by the broker for good
	// (MESSAGE_TOO_LARGE): it goes to the dead-letter file, and stdin's run exits 3
	// (dead-lettered, none lost).
	start("deadletter", []int{3}, func() (*agentRun, error) {
		r := startAgent(t, "deadletter", append(common(dlTopic), "--stdin", "-X", "linger.ms=0"), env("deadletter"), true)
		big := strings.Repeat("d", 3000)
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			if i%50 == 25 {
				_, err = fmt.Fprintf(r.stdin, "too large %d %s\n", i, big)
			} else {
				_, err = fmt.Fprintln(r.stdin, line(i))
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second)
		r.stdin.Close()
		return r, err
	})
	// resend: the followed file's topic is deleted while lines flow (and not created again by
	// the agent: allow.auto.create.topics=false); the records waiting for it expire after
	// delivery.timeout.ms and the agent sends their lines again (a file's line is never lost)
	// until the topic is back, created again 4 s after the deletion.
	start("resend", []int{0, 1}, func() (*agentRun, error) {
		path := filepath.Join(t.TempDir(), "app.log")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r := startAgent(t, "resend", append(common(resendTopic), "--tail", path, "--start-at", "beginning",
			"-X", "linger.ms=0", "-X", "retry.backoff.ms=100", "-X", "request.timeout.ms=1000", "-X", "delivery.timeout.ms=2000",
			"-X", "allow.auto.create.topics=false", "--shutdown-timeout", "20s"), env("resend"), false)
		var deleted time.Time
		for i := 0; i < 400 && err == nil; i++ {
			if i == 100 {
				deleteTopic(t, bootstrap, resendTopic)
				deleted = time.Now()
			}
			_, err = fmt.Fprintf(f, "resend line %d\n", i)
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return r, err
		}
		time.Sleep(time.Until(deleted.Add(4 * time.Second))) // past delivery.timeout.ms: lines expired
		if err := recreateTopic(bootstrap, resendTopic); err != nil {
			return r, err
		}
		time.Sleep(4 * time.Second) // the lines sent again reach the topic
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		return r, nil
	})
	start("unreachable", []int{1}, func() (*agentRun, error) {
		r := startAgent(t, "unreachable", []string{"--brokers", closedAddr(t), "--topic", uniqueName("e2e-dash-unreachable"),
			"--state-dir", t.TempDir(), "--log-format", "text", "--stdin",
			"-X", "max.block.ms=1500", "-X", "reconnect.backoff.ms=100", "-X", "reconnect.backoff.max.ms=200",
			"--shutdown-timeout", "3s"}, env("unreachable"), true)
		err := feed(r.stdin, 5, 3*time.Second)
		r.stdin.Close()
		return r, err
	})
	wg.Wait()
	close(results)
	for r := range results {
		t.Errorf("scenario %s", r)
	}

	queries, err := dashq.Load("../../dashboards")
	if err != nil {
		t.Fatal(err)
	}
	// The job is this test's service: the healthy agents of TestDashboardQueriesHealthy push to
	// the same Prometheus under a job of their own.
	vars := dashq.Vars{RateInterval: "2m", Values: map[string]string{"service": service, "job": service}}
	var checks []dashCheck
	for _, q := range queries {
		// The faults must move every panel's own series: a query's zero fallback (the 0 a
		// healthy agent reads) does not count here.
		checks = append(checks, dashCheck{q: q, vars: vars, own: true})
	}
	if failed := runDashChecks(ctx, checks, jaegerURL, promURL, 20*time.Second); len(failed) > 0 {
		t.Errorf("%d of %d dashboard queries return nothing:\n  %s\nmetric names Prometheus has for job %q: %s",
			len(failed), len(checks), strings.Join(failed, "\n  "), service, strings.Join(metricNames(ctx, promURL, service), " "))
	} else {
		t.Logf("all %d dashboard queries returned data", len(queries))
	}

	t.Run("exemplars", func(t *testing.T) {
		// A latency histogram's exemplar is a sampled record's trace, which Jaeger has: the
		// end-to-end latency's and every stage's.
		var ids []string
		for _, sel := range []string{
			fmt.Sprintf(`{__name__="messaging_client_operation_duration_seconds_bucket", job=%q}`, service),
			fmt.Sprintf(`{__name__="kafkatrail_producer_stage_duration_seconds_bucket", kafkatrail_stage="append", job=%q}`, service),
			fmt.Sprintf(`{__name__="kafkatrail_producer_stage_duration_seconds_bucket", kafkatrail_stage="completedReceive", job=%q}`, service),
		} {
			got, err := promExemplarTraceIDs(ctx, promURL, sel, 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Errorf("no exemplars with a trace_id on %s: its latency panels have no trace links", sel)
			}
			ids = append(ids, got...)
		}
		if len(ids) == 0 {
			t.FailNow()
		}
		rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		var found bool
		for _, id := range ids[:min(len(ids), 10)] {
			var r jaegerTraces
			if err := getJSON(ctx, jaegerURL, "/api/traces/"+id, nil, &r); err == nil && len(r.Data) == 1 {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%d exemplars, none of 10 trace ids tried is in Jaeger (e.g. %s)", len(ids), ids[0])
		}
	})
}

// dashboardAgentEnv is the environment of an agent whose metrics the dashboards read: service
// and instance name it (job and instance in Prometheus), metrics are pushed every second over
// OTLP/HTTP with gzip to Prometheus, every trace goes to Jaeger over OTLP/gRPC.
func dashboardAgentEnv(service, instance, jaegerOTLP, promOTLP string) map[string]string {
	return map[string]string{
		"OTEL_SERVICE_NAME":                   service,
		"OTEL_RESOURCE_ATTRIBUTES":            "service.instance.id=" + instance,
		"OTEL_METRICS_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
		// The signal-specific endpoint is used as is: nothing is appended to it.
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": promOTLP,
		// gzip, which Prometheus's OTLP receiver takes (Content-Encoding: gzip).
		"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "gzip",
		"OTEL_METRIC_EXPORT_INTERVAL":            "1000",
		"OTEL_TRACES_EXPORTER":                   "otlp",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":     "grpc",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":     jaegerOTLP,
		"OTEL_TRACES_SAMPLER":                    "always_on",
	}
}

// dashCheck is one dashboard query to run with the given variables.
type dashCheck struct {
	q    dashq.Query
	vars dashq.Vars
	// own: a PromQL query with a zero fallback (dashq.OwnSeries) must return data without it
	// too, the panel's own series.
	own bool
	// prefix names the check in a failure (e.g. the agent instance it selects).
	prefix string
}

// runDashChecks runs every check, again every second until each passes or the deadline
// passes (the last pushes may still be arriving), and returns one sorted line per check that
// did not pass, saying why.
func runDashChecks(ctx context.Context, checks []dashCheck, jaegerURL, promURL string, deadline time.Duration) []string {
	pending := map[int]string{}
	for i := range checks {
		pending[i] = ""
	}
	_ = poll(ctx, deadline, time.Second, func() (bool, error) {
		for i := range pending {
			if why := checks[i].run(ctx, jaegerURL, promURL); why == "" {
				delete(pending, i)
			} else {
				pending[i] = why
			}
		}
		return len(pending) == 0, nil
	})
	var lines []string
	for i, why := range pending {
		lines = append(lines, fmt.Sprintf("%s%s: %s", checks[i].prefix, checks[i].q, why))
	}
	sort.Strings(lines)
	return lines
}

// run runs the check once: "" if it passed, else why not.
func (c dashCheck) run(ctx context.Context, jaegerURL, promURL string) string {
	q, vars := c.q, c.vars
	switch {
	case q.Type == "jaeger":
		return jaegerSearchFinds(ctx, jaegerURL, vars.Substitute(q.Service), vars.Substitute(q.Operation))
	case q.VarLabel != "":
		return labelHasValues(ctx, promURL, vars.Substitute(q.VarSelector), q.VarLabel)
	}
	expr := vars.Substitute(q.Expr)
	if why := promHasData(ctx, promURL, expr); why != "" {
		return why
	}
	if !c.own {
		return ""
	}
	own, ok, err := dashq.OwnSeries(expr)
	if err != nil {
		return err.Error()
	}
	if !ok {
		return ""
	}
	if why := promHasData(ctx, promURL, own); why != "" {
		return "only its zero fallback answers; its own series: " + why
	}
	return ""
}

// promHasData runs an instant query: "" if it returned at least one series, else why not.
func promHasData(ctx context.Context, promURL, expr string) string {
	n, err := promQuery(ctx, promURL, expr)
	switch {
	case err != nil:
		return err.Error()
	case n == 0:
		return "no data: " + expr
	}
	return ""
}

func jaegerSearchFinds(ctx context.Context, base, service, operation string) string {
	q := url.Values{"service": {service}, "limit": {"20"}, "lookback": {"1h"}}
	if operation != "" {
		q.Set("operation", operation)
	}
	var r jaegerTraces
	if err := getJSON(ctx, base, "/api/traces", q, &r); err != nil {
		return err.Error()
	}
	if len(r.Data) == 0 {
		return fmt.Sprintf("Jaeger search service=%q operation=%q finds no trace", service, operation)
	}
	return ""
}

func labelHasValues(ctx context.Context, base, selector, label string) string {
	var r struct {
		Status string              `json:"status"`
		Data   []map[string]string `json:"data"`
	}
	if err := getJSON(ctx, base, "/api/v1/series", url.Values{"match[]": {selector},
		"start": {fmt.Sprint(time.Now().Add(-time.Hour).Unix())}}, &r); err != nil {
		return err.Error()
	}
	for _, s := range r.Data {
		if s[label] != "" {
			return ""
		}
	}
	return fmt.Sprintf("label_values(%s, %s): no values (%d series)", selector, label, len(r.Data))
}

// metricNames lists the metric names Prometheus has for the job (for failure messages).
func metricNames(ctx context.Context, base, job string) []string {
	var r struct {
		Data []string `json:"data"`
	}
	_ = getJSON(ctx, base, "/api/v1/label/__name__/values", url.Values{"match[]": {fmt.Sprintf(`{job=%q}`, job)}}, &r)
	return r.Data
}

func createTopic(t *testing.T, bootstrap, topic string, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
}

// closedAddr is a 127.0.0.1 address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// recreateTopic creates topic again after a deletion, asking until the broker has finished
// deleting it (TOPIC_ALREADY_EXISTS meanwhile), for up to 30 s.
func recreateTopic(bootstrap, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create topic %s again: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func deleteTopic(t *testing.T, bootstrap, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topic)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Errorf("delete topic %s: %v", topic, err)
	}
}
