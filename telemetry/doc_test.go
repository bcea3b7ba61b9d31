package telemetry

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const docPath = "../docs/telemetry.md"

// renderDoc writes docs/telemetry.md from the vocabulary in names.go, so the document cannot
// drift from what the code emits.
func renderDoc() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Telemetry: spans, metrics and logs\n\n")
	p("<!-- Generated from telemetry/names.go by `KAFKATRAIL_UPDATE_DOCS=1 go test ./telemetry/ -run Doc`; a test fails when it is stale. -->\n\n")
	p("kafkatrail exports OpenTelemetry traces and metrics, configured by the standard `OTEL_*` environment\n")
	p("variables (`OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`: `otlp` (default), `console`, `none`, and\n")
	p("`prometheus` for metrics; OTLP over gRPC unless `OTEL_EXPORTER_OTLP_PROTOCOL` or its `_TRACES_`/`_METRICS_`\n")
	p("variant says `http/protobuf`; `OTEL_EXPORTER_OTLP_ENDPOINT`, headers, TLS; `OTEL_SERVICE_NAME` (default\n")
	p("`%s`); `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_METRIC_EXPORT_INTERVAL`).\n\n", DefaultServiceName)
	p("## Sampling\n\n")
	p("A record is traced when the sampler says so at `Send`: parent-based with a ratio of %v by default;\n", DefaultSampleRatio)
	p("`--trace-sample-ratio` sets the ratio; otherwise `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` are honoured\n")
	p("(`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`,\n")
	p("`parentbased_traceidratio`). A log line that carries a W3C trace context makes the record's `send` span its\n")
	p("child, and a sampled line is always traced. An unsampled record allocates nothing for tracing.\n")
	p("A traced record carries its `send` span's context in the `%s` header (configurable), so a consumer\n", DefaultTraceHeader)
	p("continues the trace. Spans are exported behind a bounded queue (%d spans by default); when it is full,\n", DefaultSpanQueueSize)
	p("spans are dropped and counted in `%s`, and the producer never waits.\n\n", MetricSpansDropped)
	p("### Slow records\n\n")
	p("`--trace-slower-than DURATION` (or `p99`) also traces every record whose `Send`-to-acknowledgement latency\n")
	p("exceeds the threshold, whatever the sampler said: every record keeps its `Send` and append times in its batch\n")
	p("and every batch its attempts' stage timestamps, so the decision waits until the callback, and the trace is built\n")
	p("then with the recorded times (the same six stages). `p99` follows the moving p99 of that latency: recomputed\n")
	p("every second once 1000 latencies are in, the older ones weighing half as much after each second; nothing is\n")
	p("traced as slow until then. At most %d slow records are traced a second (when a broker stalls, every record\n", DefaultSlowTracesPerSecond)
	p("in flight is slow at once). The `send` span says why it was kept: `%s` is `%s` (head sampling)\n", AttrTraceReason, TraceReasonSampled)
	p("or `%s`, with `%s` (seconds). A slow record's trace context is not in its headers: it had left\n", TraceReasonSlow, AttrTraceThreshold)
	p("before anyone knew. The cost: one clock read per record at append, the attempts kept per batch.\n\n")
	p("## Spans\n\n")
	p("A traced record's trace is a `%s{topic}` span (kind PRODUCER) whose children tile it, so their\n", SpanSendPrefix)
	p("durations add up to the record's latency:\n\n")
	p("| span | from | to |\n|---|---|---|\n")
	for _, r := range [][3]string{
		{SpanAppend, "Send called", "record in a batch (waits for metadata and buffer memory)"},
		{SpanDrain, "record in a batch", "batch drained for a node (linger, readiness, retry backoff)"},
		{SpanDoSend, "drained", "request queued for the socket"},
		{SpanCompletedSend, "queued", "last byte written to the socket"},
		{SpanCompletedReceive, "written", "response read and matched to the request"},
		{SpanCallback, "response matched", "the record's callback returned"},
	} {
		p("| `%s` | %s | %s |\n", r[0], r[1], r[2])
	}
	p("\n`%s`, `%s`, `%s` and `%s` repeat for every attempt of a retried batch, each with `%s`.\n",
		SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, AttrAttempt)
	p("An attempt's `%s` carries its request's `%s`, `%s`, `%s`, `%s`, `%s` (the `%s` and `%s`\n",
		SpanDoSend, AttrNodeID, AttrMessagingBatchCount, AttrBatchBytes, AttrCorrelationID, AttrAPIVersion, SpanCompletedSend, SpanCompletedReceive)
	p("after it are the same request's; every attribute is paid for in each export); a failed attempt's `%s`\n", SpanCompletedReceive)
	p("has `%s` (the Kafka error's name, e.g. `NOT_LEADER_OR_FOLLOWER`) and an error status. The `send` span has\n", AttrErrorType)
	p("`%s`, `%s`, `%s`, `%s`, `%s`, `%s`, `%s`,\n", AttrMessagingSystem, AttrMessagingOperationName, AttrMessagingOperationType,
		AttrMessagingDestinationName, AttrMessagingPartitionID, AttrMessagingKafkaOffset, AttrMessagingClientID)
	p("`%s`, and `%s` when the record failed.\n\n", AttrTraceReason, AttrErrorType)
	p("Connection-level spans (kind CLIENT, roots of their own traces, recorded whenever tracing is on): `%s` from\n", SpanConnect)
	p("the attempt to READY with children `%s`, `%s`, `%s` and `%s` for the steps taken; and `%s`\n",
		SpanDial, SpanTLSHandshake, SpanSASLAuthenticate, SpanAPIVersions, SpanMetadata)
	p("for every metadata request.\n\n")
	p("## Metrics\n\n")
	p("Prometheus names follow the OTLP translation: dots become underscores, the unit becomes a suffix\n")
	p("(`s` -> `_seconds`, `By` -> `_bytes`) and counters end in `_total`; e.g. `%s` is\n", MetricStageDuration)
	p("`kafkatrail_producer_stage_duration_seconds_bucket{stage=\"drain\"}`.\n\n")
	b.WriteString(metricsTable())
	p("\n## Logs\n\n")
	p("Log records written with a context inside a span carry `%s` and `%s`.\n", LogKeyTraceID, LogKeySpanID)
	return b.String()
}

// metricsTable lists every metric: name, kind, unit, attributes, meaning. docs/telemetry.md and
// the README carry it.
func metricsTable() string {
	var b strings.Builder
	b.WriteString("| name | kind | unit | attributes | meaning |\n|---|---|---|---|---|\n")
	for _, m := range Metrics {
		attrs := make([]string, len(m.Attrs))
		for i, a := range m.Attrs {
			attrs[i] = "`" + a + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s |\n", m.Name, m.Kind, m.Unit, strings.Join(attrs, ", "), m.Doc)
	}
	return b.String()
}

const (
	readmePath        = "../README.md"
	readmeMetricsFrom = "<!-- BEGIN METRICS (generated: KAFKATRAIL_UPDATE_DOCS=1 go test ./telemetry/ -run Doc) -->\n"
	readmeMetricsTo   = "<!-- END METRICS -->"
)

// TestReadmeMetricsAreCurrent fails when the README's metrics table differs from names.go.
func TestDocReadmeMetricsAreCurrent(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, readmeMetricsFrom), strings.Index(readme, readmeMetricsTo)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the metrics markers")
	}
	want := metricsTable()
	if readme[i+len(readmeMetricsFrom):j] == want {
		return
	}
	if os.Getenv("KAFKATRAIL_UPDATE_DOCS") != "" {
		if err := os.WriteFile(readmePath, []byte(readme[:i+len(readmeMetricsFrom)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's metrics table is stale: run KAFKATRAIL_UPDATE_DOCS=1 go test ./telemetry/ -run Doc")
}

// TestDocIsCurrent fails when docs/telemetry.md differs from what names.go generates.
// Regenerate with KAFKATRAIL_UPDATE_DOCS=1.
func TestDocIsCurrent(t *testing.T) {
	want := renderDoc()
	if os.Getenv("KAFKATRAIL_UPDATE_DOCS") != "" {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(docPath)
	if err != nil || string(got) != want {
		t.Fatal("docs/telemetry.md is stale: run KAFKATRAIL_UPDATE_DOCS=1 go test ./telemetry/ -run Doc")
	}
}
