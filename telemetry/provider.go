// Package telemetry is kafkatrail's OpenTelemetry integration: tracer and meter providers
// configured from the standard OTEL_* environment variables, the span and metric vocabulary
// (names.go), the producer observer that turns the producer's stage timestamps into spans and
// metrics, the agent's metrics, and a slog handler that stamps records with the current trace.
//
// A sampled record's trace is a `send {topic}` span with six contiguous children (append,
// drain, doSend, completedSend, completedReceive, callback), one set of the request stages per
// attempt. The decision is made once per record at Send; an unsampled record allocates nothing
// for tracing. Exporting never blocks the producer: spans go through a bounded queue (drops are
// counted) and metrics are aggregated in memory and read by the exporter's own goroutine.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
	"github.com/kafkatrail/kafkatrail/producer"
)

// Defaults of Config.
const (
	DefaultShutdownTimeout = 5 * time.Second
	DefaultSpanQueueSize   = 4096
)

// Config configures Setup. The zero value is usable: everything else comes from the standard
// OpenTelemetry environment variables (OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER,
// OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG, OTEL_METRIC_EXPORT_INTERVAL, OTEL_BSP_*).
type Config struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME is not set (the environment wins, as
	// in every OpenTelemetry SDK); empty means DefaultServiceName.
	ServiceName string
	// ServiceVersion is service.version, when not empty.
	ServiceVersion string
	// SampleRatio, when set, is the share of records traced (parent-based: a record whose log
	// line carried a sampled trace context is always traced), and overrides
	// OTEL_TRACES_SAMPLER. Set it only when the user gave --trace-sample-ratio; nil means
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG if set, else DefaultSampleRatio.
	SampleRatio *float64
	// SlowerThan traces every record slower than it end to end, whatever the sampling said
	// (see ObserverConfig.SlowerThan; SlowerThanP99 follows the moving p99). Zero: off. It keeps
	// tracing on even when the sampler alone would trace nothing (always_off).
	SlowerThan time.Duration
	// BatchStages exports a batch's stages once per batch attempt (ObserverConfig.BatchStages).
	BatchStages bool
	// TraceHeader is the record header a traced record's context is written to; empty means
	// DefaultTraceHeader.
	TraceHeader string
	// ClientID is messaging.client.id on send spans.
	ClientID string
	// SpanQueueSize bounds the spans waiting for export or being exported; beyond it spans
	// are dropped and counted (kafkatrail.telemetry.spans.dropped). Zero means
	// OTEL_BSP_MAX_QUEUE_SIZE if set, else DefaultSpanQueueSize.
	SpanQueueSize int
	// ShutdownTimeout bounds Shutdown when its context has no earlier deadline. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// ErrorLogger, when set, receives OpenTelemetry's own errors (an export that failed, a
	// backend that is down) as warnings, instead of the standard log package's stderr. It is
	// installed process-wide (otel.SetErrorHandler).
	ErrorLogger *slog.Logger
	// ExtraSpanProcessor, when set, receives every span too, beside the exporter that
	// OTEL_TRACES_EXPORTER chose; tracing stays on for it even when that says none. It is
	// called on the goroutine that ends the span (the producer's sender): it must not block.
	// The agent's status page keeps the last traces with one.
	ExtraSpanProcessor sdktrace.SpanProcessor
	// ExtraMetricReader, when set, reads the metrics too, beside the reader that
	// OTEL_METRICS_EXPORTER chose (even none). The agent's status page serves /metrics with one.
	// Build it with the producer Histograms (sdkmetric.WithProducer, otelprom.WithProducer):
	// the per-record latency histograms reach readers only that way.
	ExtraMetricReader sdkmetric.Reader
	// Histograms aggregates the latency histograms recorded once per record (see Histograms);
	// nil means Setup makes one. Give it when ExtraMetricReader must be built first.
	Histograms *Histograms
	// Env is the OpenTelemetry environment (ReadEnv); nil means Setup reads the process's.
	Env *Env
}

// Ratio returns a pointer to r, for Config.SampleRatio.
func Ratio(r float64) *float64 { return &r }

// Provider holds the configured tracer and meter providers and the producer observer built on
// them. Shutdown flushes and stops them.
type Provider struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	sdkTP     *sdktrace.TracerProvider // nil when traces are off
	sdkMP     *sdkmetric.MeterProvider // nil when metrics are off
	spans     *exportProcessor
	health    []*exportHealth // the OTLP exports', traces first
	observer  *ProducerObserver
	agent     *AgentMetrics
	res       *lateResource // what kafkatrail's own OTLP exporters export with
	shutdownT time.Duration

	shutdownOnce sync.Once
	shutdownErr  error
}

// TelemetryStatus is the state of the agent's own telemetry export, for the status page.
type TelemetryStatus struct {
	// Exports are the OTLP exports kafkatrail watches (its own exporters: traces, and metrics
	// unless autoexport builds their reader), traces first.
	Exports []ExportStatus
	// SpansDropped counts the spans dropped because the export queue was full
	// (kafkatrail.telemetry.spans.dropped).
	SpansDropped int64
}

// Status returns the state of the exports and the spans dropped so far. Safe for concurrent
// use; a nil Provider has none.
func (p *Provider) Status() TelemetryStatus {
	var st TelemetryStatus
	if p == nil {
		return st
	}
	for _, h := range p.health {
		st.Exports = append(st.Exports, h.status())
	}
	if p.spans != nil {
		st.SpansDropped = p.spans.dropped.Load()
	}
	return st
}

// WatchClientInstance reports id(), the client instance id the broker assigned the producer
// for its client metrics (KIP-714; "" until it did), so the broker's client metrics can be
// joined with the agent's telemetry: as the resource attribute kafkatrail.client.instance.id
// of everything kafkatrail's own OTLP exporters send once the id is known (traces, and
// metrics unless autoexport builds their reader), and as the info metric
// kafkatrail.producer.client.instance for every metric reader (a Prometheus scrape included),
// since the SDK's providers fix their resource before the id arrives.
func (p *Provider) WatchClientInstance(id func() string) error {
	if p == nil {
		return nil
	}
	if p.res != nil {
		p.res.watch(id)
	}
	if p.sdkMP == nil {
		return nil
	}
	meter := p.sdkMP.Meter(InstrumentationName)
	g, err := meter.Int64ObservableGauge(MetricClientInstance, metric.WithUnit("{instance}"),
		metric.WithDescription("1 with the client instance id the broker assigned (KIP-714)."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if v := id(); v != "" {
			o.ObserveInt64(g, 1, metric.WithAttributes(attribute.String(AttrClientInstanceID, v)))
		}
		return nil
	}, g)
	return err
}

// Setup builds the providers the way every OpenTelemetry SDK does, from the environment:
//
//   - OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER: otlp (the default), console, none, and
//     for metrics prometheus (a scrape endpoint on OTEL_EXPORTER_PROMETHEUS_HOST:PORT,
//     default localhost:9464). They are go.opentelemetry.io/contrib/exporters/autoexport's, but for
//     OTLP traces: kafkatrail's own exporter (internal/otlptrace) encodes spans straight to OTLP.
//   - OTLP goes over gRPC unless OTEL_EXPORTER_OTLP_PROTOCOL (or the _TRACES_ / _METRICS_
//     variant) says http/protobuf; endpoint, headers, TLS, compression (gzip) and timeout come
//     from the OTEL_EXPORTER_OTLP_* variables.
//   - service.name: OTEL_SERVICE_NAME, else cfg.ServiceName, else "kafkatrail-agent";
//     OTEL_RESOURCE_ATTRIBUTES adds attributes.
//   - Sampling: see Config.SampleRatio.
//
// An exporter that cannot reach its backend never blocks or slows the producer: span export
// runs behind a bounded queue, metric export on the reader's goroutine.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	p := &Provider{shutdownT: cfg.ShutdownTimeout}
	if l := cfg.ErrorLogger; l != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			var reported *reportedError
			if errors.As(err, &reported) {
				return // a failed export: exportHealth logged what needs saying
			}
			l.Warn("telemetry", "error", err)
		}))
	}
	if p.shutdownT <= 0 {
		p.shutdownT = DefaultShutdownTimeout
	}
	env := ReadEnv(os.Getenv)
	if cfg.Env != nil {
		env = *cfg.Env
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.res = newLateResource(res)
	sampler, tracing, err := samplerFromConfig(cfg.SampleRatio, env)
	if err != nil {
		return nil, err
	}
	if cfg.SlowerThan > 0 || cfg.SlowerThan == SlowerThanP99 {
		tracing = true // slow records are traced even when the sampler traces nothing
	}

	// Metrics first: the span processor counts its drops with them.
	hist := cfg.Histograms
	if hist == nil {
		hist = NewHistograms()
	}
	hist.setExemplarFilter(env.ExemplarFilter)
	reader, ownHist, metricHealth, err := newMetricReader(ctx, hist, p.res, cfg.ErrorLogger, env)
	if err != nil {
		return nil, fmt.Errorf("telemetry: metrics exporter: %w", err)
	}
	p.mp = metricnoop.NewMeterProvider()
	var readers []sdkmetric.Option
	if reader != nil && !autoexport.IsNoneMetricReader(reader) {
		readers = append(readers, sdkmetric.WithReader(reader))
	}
	if cfg.ExtraMetricReader != nil {
		readers = append(readers, sdkmetric.WithReader(cfg.ExtraMetricReader))
	}
	if len(readers) > 0 {
		p.sdkMP = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		p.mp = p.sdkMP
	}
	meter := p.mp.Meter(InstrumentationName)
	dropped, err := meter.Int64Counter(MetricSpansDropped, metric.WithUnit("{span}"),
		metric.WithDescription("Spans dropped because the export queue was full."))
	if err != nil {
		return nil, errors.Join(err, p.shutdownNow())
	}

	p.tp = tracenoop.NewTracerProvider()
	if tracing {
		exp, err := newSpanExporter(ctx, res, env)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: traces exporter: %w", err), p.shutdownNow())
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(ProviderSampler(sampler))}
		if exp != nil {
			endpoint := ""
			if o, ok := exp.(*otlptrace.Exporter); ok {
				endpoint = o.Endpoint()
				o.FollowResource(p.res.current)
			}
			h := newExportHealth(cfg.ErrorLogger, "traces", endpoint)
			if h != nil {
				p.health = append(p.health, h)
			}
			exp = withSpanHealth(exp, h)
			size := cfg.SpanQueueSize
			if size <= 0 {
				size = env.BSPMaxQueueSize
			}
			if size <= 0 {
				size = DefaultSpanQueueSize
			}
			p.spans = newExportProcessor(exp, size, exportOptionsOf(env), dropped)
			opts = append(opts, sdktrace.WithSpanProcessor(p.spans))
		}
		if cfg.ExtraSpanProcessor != nil {
			opts = append(opts, sdktrace.WithSpanProcessor(cfg.ExtraSpanProcessor))
		}
		if p.spans == nil && cfg.ExtraSpanProcessor == nil {
			tracing = false
		} else {
			p.sdkTP = sdktrace.NewTracerProvider(opts...)
			p.tp = p.sdkTP
		}
	}
	if !tracing {
		sampler = nil
	}
	if metricHealth != nil {
		p.health = append(p.health, metricHealth)
	}
	ocfg := ObserverConfig{Sampler: sampler, TraceHeader: cfg.TraceHeader, ClientID: cfg.ClientID, SlowerThan: cfg.SlowerThan,
		BatchStages: cfg.BatchStages}
	if p.sdkMP != nil && ownHist {
		ocfg.Histograms = hist
	}
	if tracing {
		// Records' spans skip the tracer and go straight to what its provider feeds.
		var procs []sdktrace.SpanProcessor
		if p.spans != nil {
			procs = append(procs, p.spans)
		}
		if cfg.ExtraSpanProcessor != nil {
			procs = append(procs, cfg.ExtraSpanProcessor)
		}
		ocfg.SpanProcessor, ocfg.Resource = fanOut(procs), res
	}
	p.observer, err = NewProducerObserver(p.tp, p.mp, ocfg)
	if err != nil {
		return nil, errors.Join(err, p.shutdownNow())
	}
	p.agent, err = NewAgentMetrics(p.mp)
	if err != nil {
		return nil, errors.Join(err, p.shutdownNow())
	}
	return p, nil
}

// newResource describes this process: service.name (OTEL_SERVICE_NAME wins over the config),
// OTEL_RESOURCE_ATTRIBUTES, the SDK and the host.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// Later detectors override earlier ones: the environment has the last word.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(),
		resource.WithHost(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// A partial resource (say, a malformed OTEL_RESOURCE_ATTRIBUTES entry) is still usable.
	return res, nil
}

// newSpanExporter builds the exporter OTEL_TRACES_EXPORTER asks for: kafkatrail's own OTLP
// exporter (internal/otlptrace) for otlp, the default; autoexport's for the others (console), or
// nil for none.
func newSpanExporter(ctx context.Context, res *resource.Resource, env Env) (spanExporter, error) {
	switch env.TracesExporter {
	case "", "otlp":
		return otlptrace.ExporterFromEnv(res, env.lookup)
	case "none":
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, err
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return sdkExporter{exp: exp, res: res}, nil
}

// newMetricReader builds the reader OTEL_METRICS_EXPORTER asks for, with hist as a producer
// (nil for none). ownHist is false when the exporter wants base2 exponential histograms
// (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION), which hist cannot give: the
// observer then records into the SDK's instruments, at their cost, and every histogram of an
// export is of one kind. A delta exporter (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE)
// gets hist as deltas (ProducerFor).
// An OTLP exporter built here reports its exports' health on log (see ownOTLPMetrics) and
// exports with res's current resource.
func newMetricReader(ctx context.Context, hist *Histograms, res *lateResource, log *slog.Logger, env Env) (r sdkmetric.Reader, ownHist bool, health *exportHealth, err error) {
	if env.MetricsExporter == "none" {
		return nil, true, nil, nil
	}
	if protocol, ok := ownOTLPMetrics(env); ok {
		exp, err := newOTLPMetricExporter(ctx, protocol)
		if err != nil {
			return nil, false, nil, err
		}
		if _, exponential := exp.Aggregation(sdkmetric.InstrumentKindHistogram).(sdkmetric.AggregationBase2ExponentialHistogram); exponential {
			ownHist = false
		} else {
			ownHist = true
		}
		health = newExportHealth(log, "metrics", otlpMetricsEndpoint(env, protocol))
		exp = withLateResource(withMetricHealth(exp, health), res)
		return sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(hist.ProducerFor(exp.Temporality(sdkmetric.InstrumentKindHistogram)))), ownHist, health, nil
	}
	// autoexport takes its readers' producers from a process-wide registry, by the names in
	// OTEL_METRICS_PRODUCERS, or the fallback when that is unset: kafkatrail's is both, and is
	// added to a list the user set.
	autoexportMu.Lock()
	defer autoexportMu.Unlock()
	autoexportHist.Store(hist)
	// autoexport reads OTEL_METRICS_PRODUCERS from the process environment itself.
	if list := env.MetricsProducers; list != "" &&
		!slices.Contains(strings.Split(list, ","), autoexportProducer) {
		if err := os.Setenv(metricsProducersEnv, list+","+autoexportProducer); err != nil {
			return nil, false, nil, err
		}
	}
	// autoexport's readers (prometheus, console) read cumulative explicit-bucket histograms.
	r, err = autoexport.NewMetricReader(ctx)
	return r, true, nil, err
}

const (
	metricsProducersEnv = "OTEL_METRICS_PRODUCERS"
	autoexportProducer  = "kafkatrail"
)

// autoexportHist is the Histograms of the Setup that is building autoexport's reader;
// autoexportMu keeps two Setups from building theirs at once.
var (
	autoexportMu   sync.Mutex
	autoexportHist atomic.Pointer[Histograms]
)

func init() {
	factory := func(context.Context) (sdkmetric.Producer, error) {
		if h := autoexportHist.Load(); h != nil {
			return h, nil
		}
		return NewHistograms(), nil // autoexport called outside Setup: nothing of ours to add
	}
	autoexport.RegisterMetricProducer(autoexportProducer, factory)
	autoexport.WithFallbackMetricProducer(factory)
}

// TracerProvider returns the tracer provider (a no-op one when traces are off), for spans of
// the caller's own.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// MeterProvider returns the meter provider (a no-op one when metrics are off).
func (p *Provider) MeterProvider() metric.MeterProvider { return p.mp }

// Observer returns the producer observer: lifecycle spans and producer metrics.
func (p *Provider) Observer() *ProducerObserver { return p.observer }

// ProducerOption installs the observer in a producer: producer.New(cfg, p.ProducerOption()).
// When neither spans nor metrics go anywhere (both exporters none, no extra processor or
// reader), it installs none: nothing would read what the observer records, and without one a
// record costs a clock read and four observer calls less.
func (p *Provider) ProducerOption() producer.Option {
	if p.sdkMP == nil && p.sdkTP == nil {
		return producer.WithObserver(nil)
	}
	return producer.WithObserver(p.observer)
}

// Agent returns the agent's file and line metrics.
func (p *Provider) Agent() *AgentMetrics { return p.agent }

// Logger wraps h so that records logged with a context inside a span carry trace_id and span_id.
func (p *Provider) Logger(h slog.Handler) slog.Handler { return NewLogHandler(h) }

// Shutdown exports what is buffered (spans queued, the last metrics) and stops the exporters,
// within ctx's deadline or ShutdownTimeout, whichever comes first. Call it after the producer
// has closed, so the last records' traces are in. It is safe to call more than once.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, p.shutdownT)
		defer cancel()
		var errs []error
		// Traces first: their drops are counted in the metrics exported last.
		if p.sdkTP != nil {
			errs = append(errs, p.sdkTP.Shutdown(ctx))
		}
		if p.sdkMP != nil {
			errs = append(errs, p.sdkMP.Shutdown(ctx))
		}
		p.shutdownErr = errors.Join(errs...)
	})
	return p.shutdownErr
}

// shutdownNow releases what Setup built before it failed.
func (p *Provider) shutdownNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.shutdownT)
	defer cancel()
	return p.Shutdown(ctx)
}

// SpansDropped returns how many spans were dropped because the export queue was full.
func (p *Provider) SpansDropped() int64 {
	if p.spans == nil {
		return 0
	}
	return p.spans.Dropped()
}

// fanOut hands ended spans to each of procs. The observer takes it apart (newRecordSink): each
// processor gets a record's spans in the way it takes them.
func fanOut(procs []sdktrace.SpanProcessor) sdktrace.SpanProcessor {
	if len(procs) == 1 {
		return procs[0]
	}
	return fanOutProcessor(procs)
}

type fanOutProcessor []sdktrace.SpanProcessor

func (f fanOutProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	for _, p := range f {
		p.OnStart(ctx, s)
	}
}

func (f fanOutProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, p := range f {
		p.OnEnd(s)
	}
}

func (f fanOutProcessor) Shutdown(ctx context.Context) error {
	var errs []error
	for _, p := range f {
		errs = append(errs, p.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

func (f fanOutProcessor) ForceFlush(ctx context.Context) error {
	var errs []error
	for _, p := range f {
		errs = append(errs, p.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}
