package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// fakeAgent is a Sources whose numbers a test sets.
type fakeAgent struct {
	mu       sync.Mutex
	counters Counters
	files    []File
	routing  Routing
	producer telemetry.ProducerStatus
	limit    RateLimit
}

func (f *fakeAgent) sources() Sources {
	return Sources{
		Counters:  func() Counters { f.mu.Lock(); defer f.mu.Unlock(); return f.counters },
		Files:     func() []File { f.mu.Lock(); defer f.mu.Unlock(); return f.files },
		Topics:    func() Routing { f.mu.Lock(); defer f.mu.Unlock(); return f.routing },
		Producer:  func() telemetry.ProducerStatus { f.mu.Lock(); defer f.mu.Unlock(); return f.producer },
		RateLimit: func() RateLimit { f.mu.Lock(); defer f.mu.Unlock(); return f.limit },
	}
}

func newTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Addr: "127.0.0.1:0", Info: Info{Version: "test", Mode: "tail", Topic: "logs",
		Brokers: []string{"127.0.0.1:9092"}, Sampling: "100% of records"}, TraceCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseAtCleanup(t, 5*time.Second, s.Shutdown)
	return s
}

func get(t *testing.T, h http.Handler, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String(), rec.Header()
}

func readyProducer(now time.Time) telemetry.ProducerStatus {
	return telemetry.ProducerStatus{MetadataAt: now.Add(-2 * time.Second), Nodes: []telemetry.NodeStatus{
		{ID: -1, Addr: "127.0.0.1:9092", State: "DISCONNECTED"},
		{ID: 1, Addr: "127.0.0.1:9092", State: "READY", InFlight: 3},
	}}
}

func TestHealthzAndReadyz(t *testing.T) {
	s := newTestServer(t)
	h := s.Handler()
	if code, body, _ := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body, _ := get(t, h, "/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz before Start: %d %q", code, body)
	}
	fa := &fakeAgent{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx, fa.sources())
	if code, body, _ := get(t, h, "/readyz"); code != 503 || body != "not ready: no broker contacted yet\n" {
		t.Fatalf("/readyz with no broker: %d %q", code, body)
	}
	fa.mu.Lock()
	fa.producer = readyProducer(time.Now())
	fa.mu.Unlock()
	code, body, _ := get(t, h, "/readyz")
	if code != 200 || !strings.HasPrefix(body, "ready: connected to node 1 (127.0.0.1:9092); metadata 2s old") {
		t.Fatalf("/readyz when connected: %d %q", code, body)
	}
	cancel() // the agent begins to shut down
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body, _ := get(t, h, "/readyz")
		if code == 503 && strings.Contains(body, "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the agent's context ended: %d %q", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReadinessReasons(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name  string
		ps    telemetry.ProducerStatus
		ready bool
		want  string
	}{
		{"nothing yet", telemetry.ProducerStatus{}, false, "no broker contacted yet"},
		{"refused", telemetry.ProducerStatus{Nodes: []telemetry.NodeStatus{
			{ID: -1, Addr: "127.0.0.1:1", State: "DISCONNECTED", LastError: "connection refused"}}},
			false, "no metadata from a broker yet (node -1 (127.0.0.1:1) DISCONNECTED: connection refused)"},
		{"metadata, then the broker went away", telemetry.ProducerStatus{MetadataAt: now, Nodes: []telemetry.NodeStatus{
			{ID: 1, Addr: "b1:9092", State: "CONNECTING"}}},
			false, "not connected to any broker (node 1 (b1:9092) CONNECTING)"},
		{"connected", readyProducer(now), true, "connected to node 1 (127.0.0.1:9092); metadata 2s old"},
	} {
		ready, reason := readiness(tc.ps, now)
		if ready != tc.ready || reason != tc.want {
			t.Errorf("%s: %v %q, want %v %q", tc.name, ready, reason, tc.ready, tc.want)
		}
	}
}

func TestMetricsInPrometheusFormat(t *testing.T) {
	s := newTestServer(t)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.MetricReader()))
	defer mp.Shutdown(context.Background())
	c, err := mp.Meter("test").Int64Counter("kafkatrail.agent.lines.read", metric.WithUnit("{line}"))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 42)
	code, body, hdr := get(t, s.Handler(), "/metrics")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(body, "kafkatrail_agent_lines_read_total") || !strings.Contains(body, " 42") {
		t.Fatalf("/metrics does not show the counter:\n%s", body)
	}
}

func TestStatusJSON(t *testing.T) {
	s := newTestServer(t)
	fa := &fakeAgent{
		files: []File{{Input: "errors", Path: "/var/log/app.log", Size: 1000, ReadOffset: 900, Committed: 600, Unread: 100, CheckpointLag: 300, InFlight: 7, LinesRead: 90, LinesAcked: 60}},
		routing: Routing{Topics: []Topic{{Topic: "logs-api", LinesSent: 10, LinesAcked: 8, LinesFailed: 1, InFlight: 1}},
			Unrouted: map[string]int64{"missing": 3}},
	}
	fa.producer = readyProducer(time.Now())
	fa.limit = RateLimit{LinesPerSecond: 500, PausedSeconds: 2.5}
	src := fa.sources()
	s.src.Store(&src) // as Start does, without its once-a-second sampling: the test samples
	// Two samples a second apart: 500 lines read and 400 acknowledged in that second.
	t0 := time.Now()
	fa.mu.Lock()
	fa.counters = Counters{LinesRead: 1000, BytesRead: 100000, LinesAcked: 900}
	fa.mu.Unlock()
	s.sample(t0.Add(10 * time.Second))
	fa.mu.Lock()
	fa.counters = Counters{LinesRead: 1500, BytesRead: 150000, LinesAcked: 1300, LinesFailed: 2}
	fa.mu.Unlock()
	s.sample(t0.Add(11 * time.Second))

	code, body, hdr := get(t, s.Handler(), "/api/status")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("/api/status: %d %s", code, hdr.Get("Content-Type"))
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.Info.Topic != "logs" || st.Info.Version != "test" {
		t.Errorf("status %+v", st)
	}
	if st.Rates.LinesRead != 500 || st.Rates.LinesAcked != 400 || st.Rates.BytesRead != 50000 {
		t.Errorf("rates %+v, want 500 read, 400 acked, 50000 bytes per second", st.Rates)
	}
	if st.Totals.LinesAcked != 1300 || st.Totals.LinesFailed != 2 {
		t.Errorf("totals %+v", st.Totals)
	}
	if len(st.History) == 0 || st.History[len(st.History)-1].LinesAcked != 400 {
		t.Errorf("history %+v", st.History)
	}
	if len(st.Files) != 1 || st.Files[0].CheckpointLag != 300 || st.Files[0].Unread != 100 || st.Files[0].Input != "errors" {
		t.Errorf("files %+v", st.Files)
	}
	if r := st.Routing; len(r.Topics) != 1 || r.Topics[0] != fa.routing.Topics[0] || r.Unrouted["missing"] != 3 {
		t.Errorf("routing %+v", r)
	}
	if !strings.Contains(body, `"routing":{"topics":[{"topic":"logs-api","lines_sent":10,"lines_acked":8,"lines_failed":1,"lines_dead_lettered":0,"in_flight":1}],"unrouted":{"missing":3}}`) {
		t.Errorf("/api/status routing JSON: %s", body)
	}
	if len(st.Brokers) != 2 || st.Brokers[1].InFlight != 3 || st.Brokers[1].State != "READY" {
		t.Errorf("brokers %+v", st.Brokers)
	}
	if st.RateLimit != fa.limit {
		t.Errorf("rate limit %+v, want %+v", st.RateLimit, fa.limit)
	}
	if st.MetadataAgeSeconds < 1.5 || st.MetadataAgeSeconds > 30 {
		t.Errorf("metadata age %v", st.MetadataAgeSeconds)
	}
	// The history keeps a minute.
	for i := 0; i < 100; i++ {
		s.sample(t0.Add(time.Duration(12+i) * time.Second))
	}
	if st := s.StatusNow(); len(st.History) != rateWindow {
		t.Errorf("history of %d points, want %d", len(st.History), rateWindow)
	}
}

func TestStatusJSONWithoutSources(t *testing.T) {
	s := newTestServer(t)
	_, body, _ := get(t, s.Handler(), "/api/status")
	// Empty lists, not null: the page iterates them.
	for _, want := range []string{`"files":[]`, `"brokers":[]`, `"history":[]`, `"ready":false`, `"metadata_age_seconds":-1`, `"routing":{"topics":[]}`,
		`"rate_limit":{"lines_per_second":0,"bytes_per_second":0,"paused_seconds":0}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/api/status lacks %s: %s", want, body)
		}
	}
}

func TestTracesJSON(t *testing.T) {
	s := newTestServer(t)
	h := s.Handler()
	_, body, _ := get(t, h, "/api/traces")
	if !strings.Contains(body, `"traces":[]`) || !strings.Contains(body, `"capacity":4`) {
		t.Fatalf("empty /api/traces: %s", body)
	}
	tr := newTracer(t, s.Ring())
	for i := 0; i < 6; i++ {
		fakeSend(tr, "logs", time.Now(), time.Millisecond, "1", int64(i))
	}
	code, body, _ := get(t, h, "/api/traces?limit=2")
	var tb TracesBody
	if err := json.Unmarshal([]byte(body), &tb); code != 200 || err != nil {
		t.Fatalf("%d %v: %s", code, err, body)
	}
	if tb.Seen != 6 || tb.Capacity != 4 || len(tb.Traces) != 2 || *tb.Traces[0].Offset != 5 || len(tb.Traces[0].Stages) != 6 {
		t.Fatalf("/api/traces?limit=2: %+v", tb)
	}
	if code, _, _ := get(t, h, "/api/traces?limit=x"); code != 400 {
		t.Errorf("bad limit: %d, want 400", code)
	}
}

func TestPageAndRoutes(t *testing.T) {
	s := newTestServer(t)
	h := s.Handler()
	code, body, hdr := get(t, h, "/")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %s", code, hdr.Get("Content-Type"))
	}
	for _, want := range []string{"<title>kafkatrail agent</title>", "/api/status", "/api/traces", `"data-stage"`, `"data-topic"`, "setInterval(tick, 1000)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if code, _, _ := get(t, h, "/nope"); code != 404 {
		t.Errorf("/nope: %d, want 404", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/readyz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d, want 405", rec.Code)
	}
}

// TestServeAndShutdown: the server listens at New (a taken port fails there), serves after
// Start, and Shutdown closes the port.
func TestServeAndShutdown(t *testing.T) {
	s := newTestServer(t)
	if _, err := New(Config{Addr: s.Addr()}); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second server on %s: %v, want address already in use", s.Addr(), err)
	}
	s.Start(context.Background(), (&fakeAgent{}).sources())
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Fatalf("GET /healthz: %d %q", resp.StatusCode, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("still listening after Shutdown")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}

	// A server never started releases its port too.
	s2 := newTestServer(t)
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s2.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("an unstarted server still listens after Shutdown")
	}
}

// TestStoppedSendingIsNotReady: while the agent's sending is stopped (a refusal about the
// configuration), /readyz says so with the cause even though a broker is connected, and
// /api/status carries the delivery block: the stop, the lines sent again, the dead letters.
func TestStoppedSendingIsNotReady(t *testing.T) {
	s := newTestServer(t)
	h := s.Handler()
	fa := &fakeAgent{producer: readyProducer(time.Now())}
	src := fa.sources()
	var stopped atomic.Pointer[string]
	src.Delivery = func() Delivery {
		d := Delivery{Resent: 7, DeadLettered: 2, DeadLetterFile: "/state/dead-letters.jsonl",
			DeadLetters: []DeadLetterCount{{Reason: "too_large", Destination: "file", Lines: 2}}}
		if p := stopped.Load(); p != nil {
			d.Stopped, d.StoppedSeconds = *p, 3
		}
		return d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx, src)
	if code, body, _ := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz while sending: %d %q", code, body)
	}
	cause := "TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics"
	stopped.Store(&cause)
	if code, body, _ := get(t, h, "/readyz"); code != 503 || body != "not ready: sending stopped: "+cause+"\n" {
		t.Fatalf("/readyz while stopped: %d %q", code, body)
	}
	code, body, _ := get(t, h, "/api/status")
	if code != 200 {
		t.Fatalf("/api/status: %d", code)
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if d := st.Delivery; d.Stopped != cause || d.Resent != 7 || d.DeadLettered != 2 || len(d.DeadLetters) != 1 || st.Ready {
		t.Errorf("status %+v, delivery %+v", st.Ready, d)
	}
}
