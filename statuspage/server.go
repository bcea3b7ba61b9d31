// Package statuspage is the agent's own HTTP page (--http HOST:PORT): /healthz, /readyz,
// /metrics (the agent's OpenTelemetry metrics in the Prometheus text format, from a registry of
// its own), /api/status and /api/traces (JSON), and / — a page that polls them every second and
// shows throughput, each file's lag, the requests in flight per broker and the waterfall of the
// most recent sampled records, so a user sees traces with no trace backend at hand.
//
// The Server is built before telemetry (New listens at once, so a taken port is reported
// before anything starts): its SpanProcessor and MetricReader go into telemetry.Config, then
// Start gives it the running agent's sources.
package statuspage

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/telemetry"

	"github.com/kafkatrail/kafkatrail/internal/version"
)

//go:embed page.html
var pageHTML []byte

// Config configures a Server.
type Config struct {
	// Addr is the listen address, HOST:PORT (port 0: any free port; see Server.Addr).
	Addr string
	// Info describes the agent on the page.
	Info Info
	// TraceCapacity is how many recent traces are kept; zero means DefaultTraceCapacity.
	TraceCapacity int
	// Log receives the server's errors; nil discards them.
	Log *slog.Logger
	// MetricProducer, when set, adds its metrics to /metrics: the agent's telemetry.Histograms
	// (the per-record latency histograms), which the meter provider does not hold.
	MetricProducer sdkmetric.Producer
}

// Info is the agent's description on the page and in /api/status.
type Info struct {
	Version string `json:"version"`
	// Build is the whole build identity (commit, date, Go): Version is its Version.
	Build    version.Info `json:"build"`
	Mode     string       `json:"mode"` // "tail" or "stdin"
	Topic    string       `json:"topic"`
	Brokers  []string     `json:"brokers"`
	Tail     []string     `json:"tail,omitempty"`
	Sampling string       `json:"sampling"` // how records are sampled for tracing, in words
}

// Sources are the running agent's numbers, read on every request. Each must be safe to call
// from any goroutine; a nil one shows as empty.
type Sources struct {
	Counters func() Counters
	Files    func() []File
	Topics   func() Routing
	Producer func() telemetry.ProducerStatus
	// RateLimit is the agent's --max-lines-per-second / --max-bytes-per-second and the time
	// reading spent paused by them.
	RateLimit func() RateLimit
	// Delivery is what became of the lines Kafka did not take at the first try: sent again,
	// dead-lettered, or holding the agent stopped.
	Delivery func() Delivery
	// Inputs is each of the agent's inputs: its source and its lines by outcome.
	Inputs func() []Input
	// Telemetry is the agent's own telemetry export (telemetry.Provider.Status).
	Telemetry func() telemetry.TelemetryStatus
	// ClientInstanceID is the client instance id the broker assigned for client metrics
	// (KIP-714), "" until it did.
	ClientInstanceID func() string
}

// Telemetry is /api/status's account of the agent's own telemetry: each OTLP export's health
// and the spans dropped because the export queue was full.
type Telemetry struct {
	Exports      []Export `json:"exports"`
	SpansDropped int64    `json:"spans_dropped"`
}

// Export is one signal's OTLP export.
type Export struct {
	Signal   string `json:"signal"` // traces, metrics
	Endpoint string `json:"endpoint,omitempty"`
	OK       bool   `json:"ok"` // the last export worked (or none failed yet)
	Exports  int    `json:"exports"`
	// FailingSeconds is how long exports have failed, FailedExports how many since.
	FailingSeconds float64 `json:"failing_seconds,omitempty"`
	FailedExports  int     `json:"failed_exports,omitempty"`
	LastError      string  `json:"last_error,omitempty"` // kept once exports work again
}

// Input is one of the agent's inputs in /api/status.
type Input struct {
	Name string `json:"name"`
	// Source is "stdin", or the input's tail patterns.
	Source            string  `json:"source"`
	Files             int     `json:"files"`
	Topic             string  `json:"topic"`
	LinesRead         int64   `json:"lines_read"`
	LinesSent         int64   `json:"lines_sent"`
	LinesAcked        int64   `json:"lines_acked"`
	LinesFailed       int64   `json:"lines_failed"`
	LinesDeadLettered int64   `json:"lines_dead_lettered"`
	LinesNotIncluded  int64   `json:"lines_not_included"` // left out by include-lines
	LinesExcluded     int64   `json:"lines_excluded"`     // left out by exclude-lines
	Stopped           string  `json:"stopped,omitempty"`  // why its sending stopped
	StoppedSeconds    float64 `json:"stopped_seconds,omitempty"`
	// RatePausedSeconds is the time its own rate limit paused it (absent: it has none).
	RatePausedSeconds *float64 `json:"rate_paused_seconds,omitempty"`
}

// Delivery is /api/status's account of the lines Kafka did not take at the first try.
type Delivery struct {
	// Stopped says why sending stopped (a refusal about the configuration or the cluster, not
	// a line: an ACL, authentication, a missing topic; or a full dead-letter file): reading
	// pauses, /readyz is not ready, and sending resumes by itself once a line is delivered.
	// With several inputs, only the input StoppedInput names is stopped (the first, when
	// several are); the others' lines go on.
	Stopped         string            `json:"stopped,omitempty"`
	StoppedSeconds  float64           `json:"stopped_seconds,omitempty"`
	StoppedInput    string            `json:"stopped_input,omitempty"`
	Waiting         int64             `json:"waiting"` // lines waiting to be sent again or dead-lettered
	Resent          int64             `json:"resent"`
	DeadLettered    int64             `json:"dead_lettered"`
	DeadLetters     []DeadLetterCount `json:"dead_letters"`
	DeadLetterTopic string            `json:"dead_letter_topic,omitempty"`
	DeadLetterFile  string            `json:"dead_letter_file"`
}

// DeadLetterCount is the dead letters of one reason kept at one destination (topic or file).
type DeadLetterCount struct {
	Reason      string `json:"reason"`
	Destination string `json:"destination"`
	Lines       int64  `json:"lines"`
}

// RateLimit is the agent's rate limit in /api/status; zero limits: none.
type RateLimit struct {
	LinesPerSecond int `json:"lines_per_second"`
	BytesPerSecond int `json:"bytes_per_second"`
	// PausedSeconds is the total time lines waited for the limit (concurrent waits each count).
	PausedSeconds float64 `json:"paused_seconds"`
}

// Routing is where lines go: one row per topic (one with a plain --topic, at most max-topics
// and the fallback with a template) and the lines the template could not route.
type Routing struct {
	Topics []Topic `json:"topics"`
	// Unrouted counts, by reason (missing, illegal_name, max_topics), the lines the topic
	// template gave no topic of their own: they went to the fallback topic, or failed.
	Unrouted map[string]int64 `json:"unrouted,omitempty"`
}

// Topic is one topic's line counts.
type Topic struct {
	Topic       string `json:"topic"`
	LinesSent   int64  `json:"lines_sent"`
	LinesAcked  int64  `json:"lines_acked"`
	LinesFailed int64  `json:"lines_failed"`
	// LinesDeadLettered are the lines the topic refused for good, kept in a dead-letter
	// destination.
	LinesDeadLettered int64 `json:"lines_dead_lettered"`
	// InFlight is LinesSent less the acknowledged, failed and dead-lettered ones.
	InFlight int64 `json:"in_flight"`
}

// Counters are the agent's totals since it started.
type Counters struct {
	LinesRead int64 `json:"lines_read"`
	BytesRead int64 `json:"bytes_read"`
	// LinesAcked are the lines Kafka acknowledged (with --exactly-once: whose transaction
	// committed); LinesFailed those lost; LinesDeadLettered those refused for good and kept in a
	// dead-letter destination; LinesResent the times a line was sent again.
	LinesAcked        int64 `json:"lines_acked"`
	LinesFailed       int64 `json:"lines_failed"`
	LinesDeadLettered int64 `json:"lines_dead_lettered"`
	LinesResent       int64 `json:"lines_resent"`
	// Lines that --format and --timestamp-field fell back on (linerecord.EncodingStats).
	TimestampFallbacks int64 `json:"timestamp_fallbacks,omitempty"`
	MergeFallbacks     int64 `json:"merge_fallbacks,omitempty"`
	MessagesCut        int64 `json:"messages_cut,omitempty"`
}

// File is one followed file.
type File struct {
	// Input is the agent's input that follows the file, when it has several (a file two
	// inputs follow is two Files).
	Input      string `json:"input,omitempty"`
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	ReadOffset int64  `json:"read_offset"`
	Committed  int64  `json:"committed"`
	// Unread is Size - ReadOffset: bytes the agent has not read yet (kafkatrail.agent.file.behind).
	Unread int64 `json:"unread"`
	// CheckpointLag is ReadOffset - Committed: bytes read but not yet acknowledged and
	// checkpointed (kafkatrail.agent.checkpoint.lag).
	CheckpointLag int64 `json:"checkpoint_lag"`
	// OldestUnackedSeconds is how long ago the oldest line not yet acknowledged was read, 0
	// when none is waiting (kafkatrail.agent.file.oldest_unacked.age): it rises through an
	// outage, when nothing is acknowledged.
	OldestUnackedSeconds float64 `json:"oldest_unacked_seconds"`
	InFlight             int     `json:"in_flight"`
	LinesRead            uint64  `json:"lines_read"`
	LinesAcked           uint64  `json:"lines_acked"`
	LinesFailed          uint64  `json:"lines_failed"`
	// LinesDeadLettered is the file's lines Kafka refused for good, kept in the dead-letter
	// topic or file (not in LinesAcked; the checkpoint moved past them).
	LinesDeadLettered uint64 `json:"lines_dead_lettered"`
	Gone              bool   `json:"gone,omitempty"`
	// ContainerFormat is the container runtime's framing taken off its lines (cri, docker; auto
	// until its first line decided), empty when none; LinesJoined and LinesMalformed are its
	// lines written in pieces and joined, and those not in the format (sent as they are).
	ContainerFormat string `json:"container_format,omitempty"`
	LinesJoined     uint64 `json:"lines_joined,omitempty"`
	LinesMalformed  uint64 `json:"lines_malformed,omitempty"`
}

// Server serves the page. Build it with New, hand SpanProcessor and MetricReader to telemetry,
// then Start; Shutdown stops it.
type Server struct {
	cfg      Config
	log      *slog.Logger
	ln       net.Listener
	srv      *http.Server
	ring     *Ring
	reader   *otelprom.Exporter
	registry *prometheus.Registry
	started  time.Time

	src      atomic.Pointer[Sources]
	running  atomic.Bool // Start was called
	stopping atomic.Bool // the agent is shutting down: not ready
	served   chan struct{}

	mu      sync.Mutex
	samples []sample // the last rateWindow+1 counter samples, one a second
	stop    chan struct{}
	sampled chan struct{}
	once    sync.Once
}

type sample struct {
	at  time.Time
	c   Counters
	age telemetry.AgeHistogram // the producer's record ages so far
}

// rateWindow is how many one-second samples the throughput history keeps.
const rateWindow = 60

// New builds the server and listens on cfg.Addr; it serves only after Start.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	// The agent's metrics as Prometheus names them (see telemetry/names.go). The registry is the
	// page's own, so the exporter that OTEL_METRICS_EXPORTER=prometheus may start does not clash.
	opts := []otelprom.Option{otelprom.WithRegisterer(reg)}
	if cfg.MetricProducer != nil {
		opts = append(opts, otelprom.WithProducer(cfg.MetricProducer))
	}
	reader, err := otelprom.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("status page: prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = reader.Shutdown(context.Background())
		return nil, fmt.Errorf("status page: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Log,
		ln:       ln,
		ring:     NewRing(cfg.TraceCapacity),
		reader:   reader,
		registry: reg,
		started:  time.Now(),
		served:   make(chan struct{}),
		stop:     make(chan struct{}),
		sampled:  make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Addr returns the address the server listens on (with the port chosen for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SpanProcessor returns the processor that keeps recent traces: telemetry.Config.ExtraSpanProcessor.
func (s *Server) SpanProcessor() sdktrace.SpanProcessor { return s.ring }

// MetricReader returns the reader behind /metrics: telemetry.Config.ExtraMetricReader.
func (s *Server) MetricReader() sdkmetric.Reader { return s.reader }

// Ring returns the kept traces.
func (s *Server) Ring() *Ring { return s.ring }

// Start serves the page from src. When ctx ends (the agent began to shut down), /readyz says
// so; the page goes on serving until Shutdown.
func (s *Server) Start(ctx context.Context, src Sources) {
	s.src.Store(&src)
	s.running.Store(true)
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("status page stopped", "error", err)
		}
	}()
	go func() {
		defer close(s.sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		s.sample(time.Now())
		for {
			select {
			case <-ctx.Done():
				s.stopping.Store(true)
				ctx = context.Background() // keep sampling until Shutdown
			case <-s.stop:
				return
			case now := <-t.C:
				s.sample(now)
			}
		}
	}()
}

// Shutdown stops serving, waiting for requests in progress until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.stopping.Store(true)
		if !s.running.Load() {
			err = s.ln.Close()
			return
		}
		close(s.stop)
		err = s.srv.Shutdown(ctx)
		<-s.sampled
		select {
		case <-s.served:
		case <-ctx.Done():
		}
	})
	return err
}

// sample records the counters at now for the throughput.
func (s *Server) sample(now time.Time) {
	c := s.counters()
	var age telemetry.AgeHistogram
	if p := s.sources().Producer; p != nil {
		age = p().RecordAge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, sample{at: now, c: c, age: age})
	if len(s.samples) > rateWindow+1 {
		s.samples = append(s.samples[:0], s.samples[len(s.samples)-rateWindow-1:]...)
	}
}

func (s *Server) sources() Sources {
	if p := s.src.Load(); p != nil {
		return *p
	}
	return Sources{}
}

func (s *Server) counters() Counters {
	if f := s.sources().Counters; f != nil {
		return f()
	}
	return Counters{}
}

// Handler returns the page's routes (for tests; the server serves it).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /api/traces", s.traces)
	return mux
}

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(pageHTML)
}

// Readiness says whether the agent can ship lines: it has had a metadata response from a
// broker and a connection to one is READY. reason explains either way.
func (s *Server) Readiness() (ready bool, reason string) {
	if s.stopping.Load() {
		return false, "shutting down"
	}
	get := s.sources().Producer
	if get == nil {
		return false, "starting"
	}
	if d := s.sources().Delivery; d != nil {
		if st := d(); st.Stopped != "" {
			if st.StoppedInput != "" {
				return false, "sending stopped for input " + st.StoppedInput + ": " + st.Stopped
			}
			return false, "sending stopped: " + st.Stopped
		}
	}
	return readiness(get(), time.Now())
}

func readiness(ps telemetry.ProducerStatus, now time.Time) (bool, string) {
	var ready []string
	var problems []string
	for _, n := range ps.Nodes {
		if n.Ready() {
			ready = append(ready, nodeName(n))
			continue
		}
		p := nodeName(n) + " " + n.State
		if n.LastError != "" {
			p += ": " + n.LastError
		}
		problems = append(problems, p)
	}
	detail := ""
	if len(problems) > 0 {
		detail = " (" + strings.Join(problems, "; ") + ")"
	}
	switch {
	case ps.MetadataAt.IsZero() && len(ps.Nodes) == 0:
		return false, "no broker contacted yet"
	case ps.MetadataAt.IsZero():
		return false, "no metadata from a broker yet" + detail
	case len(ready) == 0:
		return false, "not connected to any broker" + detail
	}
	return true, fmt.Sprintf("connected to %s; metadata %s old", strings.Join(ready, ", "),
		now.Sub(ps.MetadataAt).Round(100*time.Millisecond))
}

func nodeName(n telemetry.NodeStatus) string {
	name := "node " + strconv.Itoa(int(n.ID))
	if n.Addr != "" {
		name += " (" + n.Addr + ")"
	}
	return name
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	ok, reason := s.Readiness()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", reason)
		return
	}
	fmt.Fprintln(w, "ready:", reason)
}

// Status is the body of /api/status.
type Status struct {
	Now           time.Time   `json:"now"`
	UptimeSeconds float64     `json:"uptime_seconds"`
	Info          Info        `json:"info"`
	Ready         bool        `json:"ready"`
	ReadyReason   string      `json:"ready_reason"`
	Totals        Counters    `json:"totals"`
	Rates         Rates       `json:"rates"`
	History       []RatePoint `json:"history"` // acknowledged lines per second, oldest first
	Files         []File      `json:"files"`
	RateLimit     RateLimit   `json:"rate_limit"`
	// Routing is the per-topic table: lines sent, acknowledged and failed by topic.
	Routing Routing `json:"routing"`
	// MetadataAgeSeconds is the time since the last metadata response; -1 before the first.
	MetadataAgeSeconds float64  `json:"metadata_age_seconds"`
	Brokers            []Broker `json:"brokers"`
	TracesSeen         uint64   `json:"traces_seen"`
	// LineAge is how old lines were when Kafka acknowledged them, over the last minute (the
	// throughput history's window); nil when none was acknowledged in it.
	LineAge *LineAge `json:"line_age,omitempty"`
	// Delivery: lines sent again, dead letters, and why sending stopped, if it did.
	Delivery Delivery `json:"delivery"`
	// Inputs is each of the agent's inputs (the flags' alone is "default").
	Inputs []Input `json:"inputs"`
	// Telemetry is the agent's own telemetry export; absent when it has none.
	Telemetry *Telemetry `json:"telemetry,omitempty"`
	// ClientInstanceID is the client instance id the broker assigned the producer for its
	// client metrics (KIP-714): the broker's metrics of this client carry it.
	ClientInstanceID string `json:"client_instance_id,omitempty"`
}

// LineAge summarises kafkatrail.producer.record.age over a window: a line's age at
// acknowledgement, from when it was written (its timestamp field, else its file's modification
// time at read, else stdin's read) to the broker's acknowledgement.
type LineAge struct {
	WindowSeconds float64 `json:"window_seconds"`
	Count         uint64  `json:"count"`
	P50Seconds    float64 `json:"p50_seconds"`
	P99Seconds    float64 `json:"p99_seconds"`
	MeanSeconds   float64 `json:"mean_seconds"`
}

// Rates are per-second rates over the last sampling interval (about a second).
type Rates struct {
	LinesRead  float64 `json:"lines_read"`
	BytesRead  float64 `json:"bytes_read"`
	LinesAcked float64 `json:"lines_acked"`
}

// RatePoint is one second of the throughput history.
type RatePoint struct {
	At         time.Time `json:"at"`
	LinesAcked float64   `json:"lines_acked"`
	LinesRead  float64   `json:"lines_read"`
}

// Broker is one broker node in /api/status.
type Broker struct {
	ID        int32  `json:"id"`
	Addr      string `json:"addr"`
	State     string `json:"state"`
	InFlight  int64  `json:"in_flight"`
	LastError string `json:"last_error,omitempty"`
}

// StatusNow builds /api/status's body.
func (s *Server) StatusNow() Status {
	now := time.Now()
	src := s.sources()
	st := Status{Now: now, UptimeSeconds: now.Sub(s.started).Seconds(), Info: s.cfg.Info,
		Files: []File{}, Brokers: []Broker{}, History: []RatePoint{}, MetadataAgeSeconds: -1, Routing: Routing{Topics: []Topic{}},
		Inputs: []Input{}}
	st.Ready, st.ReadyReason = s.Readiness()
	st.Totals = s.counters()
	st.Delivery.DeadLetters = []DeadLetterCount{}
	if d := src.Delivery; d != nil {
		st.Delivery = d()
	}
	s.mu.Lock()
	for i := 1; i < len(s.samples); i++ {
		a, b := s.samples[i-1], s.samples[i]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		p := RatePoint{At: b.at, LinesAcked: float64(b.c.LinesAcked-a.c.LinesAcked) / dt,
			LinesRead: float64(b.c.LinesRead-a.c.LinesRead) / dt}
		st.History = append(st.History, p)
		if i == len(s.samples)-1 {
			st.Rates = Rates{LinesRead: p.LinesRead, LinesAcked: p.LinesAcked,
				BytesRead: float64(b.c.BytesRead-a.c.BytesRead) / dt}
		}
	}
	if n := len(s.samples); n >= 2 {
		first, last := s.samples[0], s.samples[n-1]
		if d := last.age.Since(first.age); d.Count > 0 {
			st.LineAge = &LineAge{WindowSeconds: last.at.Sub(first.at).Seconds(), Count: d.Count,
				P50Seconds: d.Quantile(0.5), P99Seconds: d.Quantile(0.99), MeanSeconds: d.Sum / float64(d.Count)}
		}
	}
	s.mu.Unlock()
	if src.Files != nil {
		st.Files = append(st.Files, src.Files()...)
	}
	if src.RateLimit != nil {
		st.RateLimit = src.RateLimit()
	}
	if src.Inputs != nil {
		st.Inputs = append(st.Inputs, src.Inputs()...)
	}
	if src.ClientInstanceID != nil {
		st.ClientInstanceID = src.ClientInstanceID()
	}
	if src.Telemetry != nil {
		ts := src.Telemetry()
		t := &Telemetry{Exports: []Export{}, SpansDropped: ts.SpansDropped}
		for _, e := range ts.Exports {
			x := Export{Signal: e.Signal, Endpoint: e.Endpoint, OK: e.FailingSince.IsZero(), Exports: e.Exports,
				FailedExports: e.FailedExports, LastError: e.LastError}
			if !x.OK {
				x.FailingSeconds = now.Sub(e.FailingSince).Seconds()
			}
			t.Exports = append(t.Exports, x)
		}
		st.Telemetry = t
	}
	if src.Topics != nil {
		st.Routing = src.Topics()
		if st.Routing.Topics == nil {
			st.Routing.Topics = []Topic{}
		}
	}
	if src.Producer != nil {
		ps := src.Producer()
		if !ps.MetadataAt.IsZero() {
			st.MetadataAgeSeconds = now.Sub(ps.MetadataAt).Seconds()
		}
		for _, n := range ps.Nodes {
			st.Brokers = append(st.Brokers, Broker{ID: n.ID, Addr: n.Addr, State: n.State, InFlight: n.InFlight, LastError: n.LastError})
		}
	}
	_, st.TracesSeen = s.ring.Traces(0)
	return st
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.StatusNow())
}

// TracesBody is the body of /api/traces.
type TracesBody struct {
	Capacity int     `json:"capacity"`
	Seen     uint64  `json:"seen"`
	Traces   []Trace `json:"traces"` // the most recent first
}

func (s *Server) traces(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "limit: want a number >= 0", http.StatusBadRequest)
			return
		}
		limit = n
	}
	ts, seen := s.ring.Traces(limit)
	if ts == nil {
		ts = []Trace{}
	}
	writeJSON(w, TracesBody{Capacity: s.ring.Capacity(), Seen: seen, Traces: ts})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
