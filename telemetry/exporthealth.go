package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
)

// exportHealth follows one signal's exports (traces or metrics) and says in the log when they
// begin to fail and when they work again. An exporter with no collector to talk to fails at
// every export, every OTEL_BSP_SCHEDULE_DELAY or OTEL_METRIC_EXPORT_INTERVAL: logging each
// failure would bury the agent's own lines under one warning every few seconds. So the first
// failure of a run of them is a warning that says how to turn export off, the others are at
// debug, and the first export that works again is one info line with how long it failed.
//
// Safe for concurrent use (each signal exports on its own goroutine; a flush may export from
// the caller's).
type exportHealth struct {
	log      *slog.Logger
	signal   string // "traces" or "metrics"
	endpoint string // where the exporter sends, "" when it is not a network exporter
	off      string // the variable that turns this signal's export off
	now      func() time.Time

	mu           sync.Mutex
	failingSince time.Time // zero while exports work
	failures     int       // exports failed since failingSince
	exports      int       // exports done, failed or not
	lastErr      string    // the last failed export's error, kept after it works again
}

// ExportStatus is one signal's OTLP export as the status page shows it (Provider.Status).
type ExportStatus struct {
	Signal   string // "traces" or "metrics"
	Endpoint string // where it sends; "" when not known
	// Exports counts the exports done, failed or not; FailedExports those failed since
	// FailingSince, zero while exports work.
	Exports       int
	FailingSince  time.Time
	FailedExports int
	LastError     string // the last failure's error, kept once exports work again
}

// status is h's ExportStatus.
func (h *exportHealth) status() ExportStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ExportStatus{Signal: h.signal, Endpoint: h.endpoint, Exports: h.exports,
		FailingSince: h.failingSince, FailedExports: h.failures, LastError: h.lastErr}
}

// newExportHealth returns the health of signal's exports to endpoint, logged on log; nil when
// log is nil (errors then go to otel.Handle, one by one, as before).
func newExportHealth(log *slog.Logger, signal, endpoint string) *exportHealth {
	if log == nil {
		return nil
	}
	off := "OTEL_TRACES_EXPORTER=none"
	if signal == "metrics" {
		off = "OTEL_METRICS_EXPORTER=none"
	}
	return &exportHealth{log: log, signal: signal, endpoint: endpoint, off: off, now: time.Now}
}

// reportedError is an export's error that exportHealth has already logged (or decided not to
// log again). It goes on to otel.Handle as before (the metric reader hands every failed
// export's error to it); Setup's error handler passes it over.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// done takes an export's outcome and returns its error, marked as reported.
func (h *exportHealth) done(err error) error {
	if h == nil {
		return err
	}
	now := h.now()
	h.mu.Lock()
	first := err != nil && h.failingSince.IsZero()
	recovered := err == nil && !h.failingSince.IsZero()
	since, failures := h.failingSince, h.failures
	h.exports++
	if err != nil {
		h.lastErr = err.Error()
	}
	switch {
	case first:
		h.failingSince, h.failures = now, 1
	case err != nil:
		h.failures++
	case recovered:
		h.failingSince, h.failures = time.Time{}, 0
	}
	h.mu.Unlock()

	to := ""
	if h.endpoint != "" {
		to = " to " + h.endpoint
	}
	switch {
	case first:
		h.log.Warn(fmt.Sprintf("telemetry: exporting %s%s fails: %v; logged once, not again until it works "+
			"(no collector? set %s to turn this export off)", h.signal, to, err, h.off),
			"signal", h.signal, "endpoint", h.endpoint, "error", err.Error())
	case err != nil:
		h.log.Debug(fmt.Sprintf("telemetry: exporting %s failed again", h.signal), "signal", h.signal,
			"endpoint", h.endpoint, "error", err.Error(), "failed_exports", failures+1)
	case recovered:
		d := now.Sub(since)
		h.log.Info(fmt.Sprintf("telemetry: exporting %s%s works again after %s (%d exports failed)",
			h.signal, to, roundDuration(d), failures), "signal", h.signal, "endpoint", h.endpoint,
			"failed_for", d, "failed_exports", failures)
	}
	if err != nil {
		return &reportedError{err: err}
	}
	return nil
}

// roundDuration shows a time span as a person reads it: tenths of a second, or milliseconds
// under a second.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// healthSpanExporter tells an exportHealth every span export's outcome.
type healthSpanExporter struct {
	spanExporter
	h *exportHealth
}

func (e healthSpanExporter) Export(ctx context.Context, spans []RecordSpan) error {
	return e.h.done(e.spanExporter.Export(ctx, spans))
}

// withSpanHealth returns exp reporting to h, or exp itself without h.
func withSpanHealth(exp spanExporter, h *exportHealth) spanExporter {
	if h == nil {
		return exp
	}
	return healthSpanExporter{spanExporter: exp, h: h}
}

// healthMetricExporter tells an exportHealth every metric export's outcome; the rest of the
// exporter (temporality, aggregation, flush, shutdown) is the wrapped one's.
type healthMetricExporter struct {
	sdkmetric.Exporter
	h *exportHealth
}

func (e healthMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	return e.h.done(e.Exporter.Export(ctx, rm))
}

// withMetricHealth returns exp reporting to h, or exp itself without h.
func withMetricHealth(exp sdkmetric.Exporter, h *exportHealth) sdkmetric.Exporter {
	if h == nil {
		return exp
	}
	return healthMetricExporter{Exporter: exp, h: h}
}

// ownOTLPMetrics reports whether Setup builds the OTLP metric exporter itself, and over which
// protocol: always when OTLP goes over gRPC by kafkatrail's default (otlpOverGRPC), and for a
// protocol the user chose unless OTEL_METRICS_PRODUCERS names producers (only autoexport's
// registry knows them). An exporter of its own lets exportHealth see every export's outcome;
// autoexport's reader hands only the failures to otel.Handle.
func ownOTLPMetrics(env Env) (protocol string, ok bool) {
	if env.otlpOverGRPC(env.MetricsExporter, env.MetricsProtocol) {
		return otlptrace.ProtocolGRPC, true
	}
	if exporter := env.MetricsExporter; exporter != "" && exporter != "otlp" {
		return "", false
	}
	if env.MetricsProducers != "" {
		return "", false
	}
	protocol = cmp.Or(env.MetricsProtocol, env.Protocol)
	switch protocol {
	case otlptrace.ProtocolGRPC, otlptrace.ProtocolHTTP:
		return protocol, true
	}
	return "", false // autoexport says what is wrong with it
}

// newOTLPMetricExporter builds the SDK's OTLP metric exporter for protocol, configured by the
// OTEL_EXPORTER_OTLP_(METRICS_)* variables as autoexport's would be.
func newOTLPMetricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	if protocol == otlptrace.ProtocolHTTP {
		return otlpmetrichttp.New(ctx)
	}
	return otlpmetricgrpc.New(ctx)
}

// otlpMetricsEndpoint is where the OTLP metric exporter sends, for the log: the variable as
// the user gave it, else the protocol's default.
func otlpMetricsEndpoint(env Env, protocol string) string {
	if v := cmp.Or(env.MetricsEndpoint, env.Endpoint); v != "" {
		return v
	}
	if protocol == otlptrace.ProtocolHTTP {
		return otlptrace.DefaultHTTPHost
	}
	return otlptrace.DefaultGRPCHost
}
