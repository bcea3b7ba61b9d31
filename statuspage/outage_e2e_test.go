package statuspage_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"

	"github.com/kafkatrail/kafkatrail/internal/grpctest"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// TestOldestUnackedDuringAnOutage: an agent tails a file written at 100 lines/s into an
// in-process kfake broker that stops answering produce requests for 30 s (requests hang, as on
// a hung broker; metadata still answers). No line is acknowledged meanwhile, so the line age
// at acknowledgement records nothing; the oldest unacknowledged line's age in /api/status reads
// about 10 s at 10 s into the outage and about 30 s at 30 s, the page shows it in its Files
// table (headless Chromium), and it falls back to below a second once the broker answers again.
func TestOldestUnackedDuringAnOutage(t *testing.T) {
	chromium := findChromium(t)
	c := kfakeBroker(t, "outage")
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	path := filepath.Join(dir, "app.log")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stopWriting := make(chan struct{})
	written := make(chan struct{})
	go func() {
		defer close(written)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopWriting:
				return
			case <-tick.C:
				fmt.Fprintf(w, "line %d\n", i)
			}
		}
	}()
	defer func() { close(stopWriting); <-written }()

	ag := startPageAgent(t, bin, dir, "--tail", path, "--brokers", c.ListenAddrs()[0], "--topic", "outage",
		"--state-dir", filepath.Join(dir, "state"), "--start-at", "beginning", "-X", "request.timeout.ms=3000")
	file := func() statuspage.File {
		var st statuspage.Status
		getJSON(t, ag.base+"/api/status", &st)
		if len(st.Files) != 1 {
			t.Fatalf("/api/status has %d files, want 1", len(st.Files))
		}
		return st.Files[0]
	}
	waitFor(t, 30*time.Second, "lines acknowledged, none waiting long", ag.logTail, func() bool {
		f := file()
		return f.LinesAcked > 100 && f.OldestUnackedSeconds < 1
	})

	var down atomic.Bool
	down.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// Handled with no response: the request hangs until request.timeout.ms, as on a
		// broker that stopped answering. Once down is false, the broker produces as usual.
		return nil, nil, down.Load()
	})
	began := time.Now()
	acked := file().LinesAcked
	at := func(d time.Duration, lo, hi float64) statuspage.File {
		t.Helper()
		time.Sleep(time.Until(began.Add(d)))
		f := file()
		if f.OldestUnackedSeconds < lo || f.OldestUnackedSeconds > hi {
			t.Errorf("%v into the outage: oldest_unacked_seconds %.2f, want %.0f-%.0f", d, f.OldestUnackedSeconds, lo, hi)
		}
		return f
	}
	at(10*time.Second, 9, 12)
	f := at(30*time.Second, 29, 32)
	// A request answered just as the outage began may add a handful; nothing after.
	if f.LinesAcked > acked+200 {
		t.Errorf("%d lines acknowledged during the outage", f.LinesAcked-acked)
	}
	dom := runChromium(t, chromium, "--dump-dom", ag.base+"/")
	if shot := os.Getenv("KAFKATRAIL_OUTAGE_SCREENSHOT"); shot != "" {
		// The page during the outage, for a person to look at.
		runChromium(t, chromium, "--screenshot="+shot, "--window-size=1280,1100", "--hide-scrollbars", ag.base+"/")
		t.Logf("screenshot during the outage: %s", shot)
	}
	cell := regexp.MustCompile(`<td class="oldest warn"[^>]*>([^<]*)</td>`).FindStringSubmatch(dom)
	if cell == nil || !strings.HasSuffix(cell[1], " s") {
		t.Errorf("the page's Files table shows no oldest unacknowledged age in warning: %v", cell)
	} else if secs := strings.TrimSuffix(cell[1], " s"); secs < "29" || len(secs) != 2 {
		t.Errorf("the page shows the oldest unacknowledged line %q old, want about 30 s", cell[1])
	}

	down.Store(false)
	back := time.Now()
	waitFor(t, 30*time.Second, "the oldest unacknowledged age back below a second", ag.logTail, func() bool {
		return file().OldestUnackedSeconds < 1
	})
	t.Logf("outage of %v: the age fell back below 1 s %v after the broker answered again",
		back.Sub(began).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
	ag.stop()
}

// TestTelemetryExportOnThePage: an agent whose OTLP exports go to a port where no collector
// listens says so in /api/status (each signal failing, for how long, with the error) and on
// the page's line about its own telemetry.
func TestTelemetryExportOnThePage(t *testing.T) {
	chromium := findChromium(t)
	c := kfakeBroker(t, "export")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("a line\n", 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := startPageAgentEnv(t, bin, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + closed,
		"OTEL_METRIC_EXPORT_INTERVAL=200", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_EXPORTER_OTLP_TIMEOUT=300"},
		"--tail", path, "--brokers", c.ListenAddrs()[0], "--topic", "export", "--start-at", "beginning",
		"--state-dir", filepath.Join(dir, "state"), "--trace-sample-ratio", "1")
	var tel *statuspage.Telemetry
	waitFor(t, 30*time.Second, "both exports failing in /api/status", ag.logTail, func() bool {
		var st statuspage.Status
		getJSON(t, ag.base+"/api/status", &st)
		tel = st.Telemetry
		if tel == nil || len(tel.Exports) != 2 {
			return false
		}
		for _, e := range tel.Exports {
			if e.OK || e.FailedExports < 2 {
				return false
			}
		}
		return true
	})
	for i, signal := range []string{"traces", "metrics"} {
		if e := tel.Exports[i]; e.Signal != signal || !strings.Contains(e.Endpoint, closed) || e.LastError == "" || e.FailingSeconds <= 0 {
			t.Errorf("export %d: %+v, want %s failing to %s with its error", i, e, signal, closed)
		}
	}
	dom := runChromium(t, chromium, "--dump-dom", ag.base+"/")
	line := regexp.MustCompile(`<div id="export"[^>]*>(.*?)</div>`).FindStringSubmatch(dom)
	if line == nil || strings.Count(line[1], "failing for") != 2 || !strings.Contains(line[1], "spans dropped") {
		t.Errorf("the page's telemetry line %v, want both signals failing and the spans dropped", line)
	}
	ag.stop()
}

// TestDestinationTemplateInTraces: an agent whose --topic is a template names each topic's
// template on its records' send spans (messaging.destination.template): /api/traces shows it
// for a line routed to logs-api by logs-{service}.
func TestDestinationTemplateInTraces(t *testing.T) {
	c := kfakeBroker(t, "logs-api")
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte(strings.Repeat(`{"service":"api","msg":"hello"}`+"\n", 5)), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := startPageAgent(t, bin, dir, "--tail", path, "--brokers", c.ListenAddrs()[0], "--topic", "logs-{service}",
		"--format", "json", "--start-at", "beginning", "--state-dir", filepath.Join(dir, "state"), "--trace-sample-ratio", "1")
	var traces []statuspage.Trace
	waitFor(t, 30*time.Second, "a trace of logs-api in /api/traces", ag.logTail, func() bool {
		var tb struct {
			Traces []statuspage.Trace `json:"traces"`
		}
		getJSON(t, ag.base+"/api/traces", &tb)
		traces = tb.Traces
		return len(traces) > 0
	})
	if tr := traces[0]; tr.Topic != "logs-api" || tr.Template != "logs-{service}" {
		t.Fatalf("trace of topic %q with template %q, want logs-api from logs-{service}", tr.Topic, tr.Template)
	}
	ag.stop()
}

// TestClientInstanceIDOnThePage: on a broker that takes client metrics (KIP-714), the client
// instance id it assigns the agent's producer is in /api/status and on the page's telemetry
// line, and it becomes a resource attribute (kafkatrail.client.instance.id) of the traces and
// metrics the agent exports over OTLP from then on: the broker labels this client's pushed
// metrics with the same id (TestRealBrokerTelemetryPush checks the producer's id is the
// broker's label), so the two can be joined.
func TestClientInstanceIDOnThePage(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	if os.Getenv("KAFKA_CLIENT_TELEMETRY_FILE") == "" {
		t.Fatal("the broker has no client telemetry receiver (KAFKA_CLIENT_TELEMETRY_FILE unset): `make test` starts it with one; by hand, start it with KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN=1 scripts/kafka/broker.sh start")
	}
	chromium := findChromium(t)
	coll := &resourceCollector{}
	addr := grpctest.Serve(t, func(srv *grpc.Server) {
		colltrace.RegisterTraceServiceServer(srv, coll)
		collmetrics.RegisterMetricsServiceServer(srv, metricsResources{c: coll})
	})
	topic := kafkatest.NewTopic(t, 1)
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte("one line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := startPageAgentEnv(t, bin, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + addr, "OTEL_METRIC_EXPORT_INTERVAL=500"},
		"--tail", path, "--brokers", bootstrap, "--topic", topic, "--start-at", "beginning",
		"--state-dir", filepath.Join(dir, "state"), "--trace-sample-ratio", "1")
	var st statuspage.Status
	waitFor(t, 30*time.Second, "a client instance id in /api/status", ag.logTail, func() bool {
		getJSON(t, ag.base+"/api/status", &st)
		return st.ClientInstanceID != ""
	})
	if !strings.Contains(ag.logTail(), st.ClientInstanceID) {
		t.Errorf("the agent's log does not name client instance %s (its subscription line)", st.ClientInstanceID)
	}
	dom := runChromium(t, chromium, "--dump-dom", ag.base+"/")
	if !strings.Contains(dom, "client instance "+st.ClientInstanceID) {
		t.Errorf("the page does not show client instance %s", st.ClientInstanceID)
	}
	// A line written now is traced (ratio 1) and exported after the id arrived.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("a line after the id\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, 30*time.Second, "traces and metrics exported with the client instance id in their resource", ag.logTail, func() bool {
		return coll.has("traces", st.ClientInstanceID) && coll.has("metrics", st.ClientInstanceID)
	})
	for _, id := range coll.ids() {
		if id != "" && id != st.ClientInstanceID {
			t.Errorf("an export's resource names client instance %q, the agent's is %q", id, st.ClientInstanceID)
		}
	}
	ag.stop()
}

// resourceCollector is an OTLP/gRPC receiver that keeps, per signal, the
// kafkatrail.client.instance.id of every resource it received ("" for none).
type resourceCollector struct {
	colltrace.UnimplementedTraceServiceServer
	mu   sync.Mutex
	seen map[string][]string // signal: ids
}

func (c *resourceCollector) note(signal string, attrs []*commonpb.KeyValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string][]string{}
	}
	id := ""
	for _, kv := range attrs {
		if kv.Key == "kafkatrail.client.instance.id" {
			id = kv.Value.GetStringValue()
		}
	}
	c.seen[signal] = append(c.seen[signal], id)
}

func (c *resourceCollector) has(signal, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.seen[signal], id)
}

func (c *resourceCollector) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(slices.Clone(c.seen["traces"]), c.seen["metrics"]...)
}

func (c *resourceCollector) Export(_ context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.ResourceSpans {
		c.note("traces", rs.GetResource().GetAttributes())
	}
	return &colltrace.ExportTraceServiceResponse{}, nil
}

// metricsResources is resourceCollector's metrics service (both services' methods are Export).
type metricsResources struct {
	collmetrics.UnimplementedMetricsServiceServer
	c *resourceCollector
}

func (m metricsResources) Export(_ context.Context, req *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	for _, rm := range req.ResourceMetrics {
		m.c.note("metrics", rm.GetResource().GetAttributes())
	}
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// kfakeBroker is an in-process one-broker kfake cluster with topics, closed when the test ends.
func kfakeBroker(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
