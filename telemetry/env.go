package telemetry

import (
	"cmp"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
)

// Env is the OpenTelemetry environment telemetry reads itself, read once, in one place, as the
// SDK's envconfig reads its own: Setup takes it (Config.Env) and hands each part it builds
// what that part needs; nothing else in telemetry reads an OTEL_* variable. The SDK's resource
// detector (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) and autoexport's exporters (console,
// prometheus, and OTLP metrics over a protocol a user chose) read theirs as they always do.
type Env struct {
	// TracesExporter and MetricsExporter are OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER.
	TracesExporter, MetricsExporter string
	// Protocol, TracesProtocol and MetricsProtocol are OTEL_EXPORTER_OTLP_PROTOCOL and its
	// per-signal forms.
	Protocol, TracesProtocol, MetricsProtocol string
	// Endpoint, TracesEndpoint and MetricsEndpoint are OTEL_EXPORTER_OTLP_ENDPOINT and its
	// per-signal forms.
	Endpoint, TracesEndpoint, MetricsEndpoint string
	// MetricsProducers is OTEL_METRICS_PRODUCERS.
	MetricsProducers string
	// Sampler and SamplerArg are OTEL_TRACES_SAMPLER (lower case) and OTEL_TRACES_SAMPLER_ARG.
	Sampler, SamplerArg string
	// ExemplarFilter is OTEL_METRICS_EXEMPLAR_FILTER (lower case).
	ExemplarFilter string
	// The batch span processor's OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
	// 0 when unset or not a positive integer, and OTEL_BSP_SCHEDULE_DELAY and
	// OTEL_BSP_EXPORT_TIMEOUT (milliseconds), 0 likewise.
	BSPMaxQueueSize, BSPMaxExportBatchSize int
	BSPScheduleDelay, BSPExportTimeout     time.Duration

	// getenv is where the values came from, for the OTLP trace exporter's own variables
	// (headers, certificates, timeouts: otlptrace.ConfigFromEnv); nil: none set.
	getenv func(string) string
}

// ReadEnv reads the environment through getenv (os.Getenv, or a test's map).
func ReadEnv(getenv func(string) string) Env {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	positive := func(k string) int {
		n, err := strconv.Atoi(get(k))
		if err != nil || n <= 0 {
			return 0
		}
		return n
	}
	return Env{
		TracesExporter: get("OTEL_TRACES_EXPORTER"), MetricsExporter: get("OTEL_METRICS_EXPORTER"),
		Protocol: get("OTEL_EXPORTER_OTLP_PROTOCOL"), TracesProtocol: get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
		MetricsProtocol: get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"),
		Endpoint:        get("OTEL_EXPORTER_OTLP_ENDPOINT"), TracesEndpoint: get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
		MetricsEndpoint:  get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
		MetricsProducers: get(metricsProducersEnv),
		Sampler:          strings.ToLower(get("OTEL_TRACES_SAMPLER")), SamplerArg: get("OTEL_TRACES_SAMPLER_ARG"),
		ExemplarFilter:  strings.ToLower(get("OTEL_METRICS_EXEMPLAR_FILTER")),
		BSPMaxQueueSize: positive("OTEL_BSP_MAX_QUEUE_SIZE"), BSPMaxExportBatchSize: positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
		BSPScheduleDelay: time.Duration(positive("OTEL_BSP_SCHEDULE_DELAY")) * time.Millisecond,
		BSPExportTimeout: time.Duration(positive("OTEL_BSP_EXPORT_TIMEOUT")) * time.Millisecond,
		getenv:           getenv,
	}
}

// lookup reads a variable Env does not hold (the OTLP trace exporter's own).
func (e Env) lookup(k string) string {
	if e.getenv == nil {
		return ""
	}
	return e.getenv(k)
}

// otlpOverGRPC reports whether a signal's exporter is OTLP with no protocol chosen: the
// specification's default is http/protobuf, which autoexport follows, but kafkatrail's is gRPC.
func (e Env) otlpOverGRPC(exporter, protocol string) bool {
	return (exporter == "" || exporter == "otlp") && protocol == "" && e.Protocol == ""
}

// OTLPEndpoints lists the host:port of the OTLP endpoints traces and metrics are exported to
// (each signal's, in that order; none for a signal not exported over OTLP): where the agent
// looks for a collector before it waits for the last export at exit.
func (e Env) OTLPEndpoints() []string {
	var out []string
	for _, s := range []struct{ exporter, protocol, endpoint string }{
		{e.TracesExporter, e.TracesProtocol, e.TracesEndpoint},
		{e.MetricsExporter, e.MetricsProtocol, e.MetricsEndpoint},
	} {
		if s.exporter != "" && s.exporter != "otlp" {
			continue
		}
		port := "4317"
		if strings.HasPrefix(cmp.Or(s.protocol, e.Protocol, otlptrace.ProtocolGRPC), "http") {
			port = "4318"
		}
		ep := cmp.Or(s.endpoint, e.Endpoint, "http://localhost:"+port)
		if !strings.Contains(ep, "://") {
			ep = "http://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || u.Hostname() == "" {
			continue
		}
		p := u.Port()
		if p == "" {
			p = port
			if u.Scheme == "https" {
				p = "443"
			}
		}
		out = append(out, net.JoinHostPort(u.Hostname(), p))
	}
	return out
}

// SamplingDescription says how records are sampled when ratio (the agent's
// --trace-sample-ratio; nil: not given) and the environment are as given, for the status page.
func (e Env) SamplingDescription(ratio *float64) string {
	switch {
	case ratio != nil:
		return strconv.FormatFloat(100**ratio, 'g', 4, 64) + "% of records (--trace-sample-ratio)"
	case e.Sampler != "":
		s := "OTEL_TRACES_SAMPLER=" + e.Sampler
		if e.SamplerArg != "" {
			s += " " + e.SamplerArg
		}
		return s
	}
	return strconv.FormatFloat(100*DefaultSampleRatio, 'g', 4, 64) + "% of records (the default)"
}
