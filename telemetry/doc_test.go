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
	conv := "https://github.com/open-telemetry/semantic-conventions/blob/v" + SemconvVersion + "/docs/messaging/"
	p("# Telemetry: spans, metrics and logs\n\n")
	p("<!-- Generated from telemetry/names.go by `KAFKATRAIL_UPDATE_DOCS=1 go test ./telemetry/ -run Doc`; a test fails when it is stale. -->\n\n")
	p("kafkatrail exports OpenTelemetry traces and metrics, configured by the standard `OTEL_*` environment\n")
	p("variables (`OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`: `otlp` (default), `console`, `none`, and\n")
	p("`prometheus` for metrics; OTLP over gRPC unless `OTEL_EXPORTER_OTLP_PROTOCOL` or its `_TRACES_`/`_METRICS_`\n")
	p("variant says `http/protobuf`; `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` compresses either; `OTEL_EXPORTER_OTLP_ENDPOINT`,\n")
	p("headers, TLS; `OTEL_SERVICE_NAME` (default `%s`); `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_METRIC_EXPORT_INTERVAL`).\n", DefaultServiceName)
	p("Both protocols, with gzip, are tested end to end against a real Jaeger (traces) and a real Prometheus\n")
	p("(metrics; its OTLP receiver takes http/protobuf only).\n\n")

	p("## Semantic conventions\n\n")
	p("Spans and metrics follow the OpenTelemetry semantic conventions **v%s**: [messaging spans](%smessaging-spans.md),\n", SemconvVersion, conv)
	p("[messaging metrics](%smessaging-metrics.md) and [Kafka](%skafka.md) (all of them still *Development*\n", conv, conv)
	p("there). Their names are used wherever the conventions have one; everything of kafkatrail's own is `kafkatrail.*`.\n")
	p("The tables below give, for every attribute, the conventions' requirement level (`-` where the attribute is\n")
	p("kafkatrail's) and when kafkatrail sets it.\n\n")

	p("## Sampling\n\n")
	p("A record is traced when the sampler says so at `Send`: parent-based with a ratio of %v by default;\n", DefaultSampleRatio)
	p("`--trace-sample-ratio` sets the ratio; otherwise `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` are honoured\n")
	p("(`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`,\n")
	p("`parentbased_traceidratio`). An unsampled record allocates nothing for tracing. A sampler of one's own\n")
	p("(`ObserverConfig.Sampler`) gets, in its `SamplingParameters`, the span name `%s{topic}`, its kind, and the\n", SpanSendPrefix)
	p("attributes the conventions call sampling-relevant that are known at `Send`: `%s`, `%s`, `%s`, `%s`\n",
		AttrMessagingSystem, AttrMessagingOperationName, AttrMessagingOperationType, AttrMessagingDestinationName)
	p("(and `%s`), so it can sample by topic. `%s` and `%s`/`%s` are not among them:\n", AttrMessagingClientID, AttrMessagingPartitionID, AttrServerAddress, AttrServerPort)
	p("the partitioner picks the partition, hence its leader, after the decision; the span has them when it is made.\n\n")
	p("A record the ratio sampler picks (the default, `--trace-sample-ratio`, `parentbased_traceidratio`) says so in\n")
	p("its tracestate, as OpenTelemetry's consistent probability sampling defines it: `ot=th:T;rv:R`, the rejection\n")
	p("threshold of the ratio (`th:c` for 1/4, `th:fd70a3d70a3d71` for the default 1 %%) and an explicit randomness\n")
	p("value that threshold keeps, on every span of its trace and in a `%s` record header beside its trace\n", TraceStateHeader)
	p("context. A collector computes each span's adjusted count from it (1/ratio: 100 for the default), and a\n")
	p("consistent sampler downstream keeps or drops the whole trace alike. The randomness is explicit because the\n")
	p("trace id is drawn so that TraceIDRatioBased at the same ratio keeps it too, which leaves its low 56 bits\n")
	p("not uniform. Traces kept for another reason (slow, failed) have no threshold: their adjusted count is\n")
	p("unknown; a record of a log line's own trace context keeps that context's tracestate (the line's\n")
	p("`traceparent` carries none). The e2e tests read Jaeger's copy with the Collector's own parser\n")
	p("(`pkg/sampling`).\n\n")
	p("Spans are exported behind a bounded queue (%d spans by default); when it is full, spans are dropped and\n", DefaultSpanQueueSize)
	p("counted in `%s`, and the producer never waits.\n\n", MetricSpansDropped)

	p("## Span export\n\n")
	p("A traced record's spans are known in full when it completes (its stage timestamps). The producer's sender goroutine\n")
	p("then only copies those timestamps and the record's outcome into one value queued for export; the export goroutine\n")
	p("builds the spans from it as plain `RecordSpan`s, not SDK spans, and encodes them straight into an OTLP `ExportTraceServiceRequest` with\n")
	p("protowire (`TraceEncoder`: lengths computed first, one reused buffer, no allocation once grown; the attribute\n")
	p("lists many spans share, a topic's, an attempt's, a request's, encoded once). kafkatrail's\n")
	p("own exporter sends each batch as one request, over gRPC (`/opentelemetry.proto.collector.trace.v1.TraceService/Export`)\n")
	p("or http/protobuf (`POST .../v1/traces`), gzip-compressed when `OTEL_EXPORTER_OTLP_COMPRESSION` (or the `_TRACES_`\n")
	p("variant) is `gzip`. It reads `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, `PROTOCOL`, `HEADERS`, `TIMEOUT`, `INSECURE`\n")
	p("and `CERTIFICATE` by the SDK exporters' rules, retries the codes they retry within the export timeout, and reports a\n")
	p("partial success as an error; `http/json` is refused at start. Connection and Metadata spans, made by the SDK's\n")
	p("tracer, go out through the same exporter. A span processor of one's own (not a `RecordSpanProcessor`) gets\n")
	p("read-only views of the records' spans. The candidates (the SDK's exporter, the Collector's pdata, protowire) are\n")
	p("compared per traced record in `bench/otlpenc` (`cd bench && go test -bench . ./otlpenc/`).\n\n")
	p("An export that fails (no collector listening, a collector that refuses) is logged once per signal, at warn, with\n")
	p("the variable that turns that export off (`OTEL_TRACES_EXPORTER=none`, `OTEL_METRICS_EXPORTER=none`); the exports\n")
	p("that fail after it are logged at debug, and the first that works again is one info line with how long exports\n")
	p("failed and how many. The OTLP metric exporter (gRPC, or http/protobuf when a protocol says so) is built by\n")
	p("kafkatrail rather than by autoexport for this, unless `OTEL_METRICS_PRODUCERS` names producers, which only\n")
	p("autoexport knows: then every failed metric export is a warning, as the SDK reports it.\n\n")

	p("## A log line's own trace context: the creation context\n\n")
	p("A line that carries a W3C trace context (a `traceparent` field, or `trace_id` and `span_id` JSON fields)\n")
	p("is sent with it in the `%s` header (the agent's `--trace-header`), and that context is the record's\n", DefaultTraceHeader)
	p("*creation context* in the conventions' terms (\"Context propagation\", \"Producer spans\"): a custom creation\n")
	p("context, which is not modified. So:\n\n")
	p("- the header the record carries is the line's `traceparent`, byte for byte, whether the record was sampled or\n")
	p("  not: a consumer sees the line's span as its parent either way;\n")
	p("- a sampled record's `send` span is the line span's child (the line's sampled flag decides, parent-based)\n")
	p("  and of kind **CLIENT**, not PRODUCER, since its context is not the creation context; it links to the\n")
	p("  line's context, as the conventions say a send span links to the creation context;\n")
	p("- a record without one (no `%s` header with a valid context) gets its `send` span's context injected into\n", DefaultTraceHeader)
	p("  the header, and the span is **PRODUCER**: its context is the creation context.\n\n")
	p("The same rule holds for any producer user: a record that already has a valid `%s` header keeps it and\n", DefaultTraceHeader)
	p("its send span links to it.\n\n")

	p("### Slow records\n\n")
	p("`--trace-slower-than DURATION` (or `p99`) also traces every record whose `Send`-to-acknowledgement latency\n")
	p("exceeds the threshold, whatever the sampler said: every record keeps its `Send` and append times in its batch\n")
	p("and every batch its attempts' stage timestamps, so the decision waits until the callback, and the trace is built\n")
	p("then with the recorded times (the same six stages). `p99` follows the moving p99 of that latency: recomputed\n")
	p("every second once 1000 latencies are in, the older ones weighing half as much after each second; nothing is\n")
	p("traced as slow until then. At most %d slow records are traced a second (when a broker stalls, every record\n", DefaultSlowTracesPerSecond)
	p("in flight is slow at once). The `send` span says why it was kept: `%s` is `%s` (head sampling)\n", AttrTraceReason, TraceReasonSampled)
	p("or `%s`, with `%s` (seconds). A slow record's span is made after the record left, so its context\n", TraceReasonSlow, AttrTraceThreshold)
	p("is in no header: it is a root of kind **CLIENT** (never the creation context), and it links to the context\n")
	p("the record carries in its `%s` header when there is one (the line's), read back from the batch.\n", DefaultTraceHeader)
	p("It has no `%s` (the key is not kept). The cost: one clock read per record at append, the attempts kept per batch.\n\n", AttrMessagingKafkaKey)

	p("### Failed records\n\n")
	p("A fast failure is never slow, and a 1 %% sample rarely holds one: every failed record that no trace covers yet\n")
	p("(not sampled at `Send`, not traced as slow) is traced at its callback, or when `Send` fails, whatever the\n")
	p("sampler said: `%s` is `%s`, the span has the record's `%s` and an Error status; at most %d such records\n", AttrTraceReason, TraceReasonError, AttrErrorType, DefaultErrorTracesPerSecond)
	p("a second (ObserverConfig.ErrorTracesPerSecond; when a topic is refused, every record fails). Built after the\n")
	p("fact like a slow record's (a CLIENT root that links to the line's context), from what its batch kept: without\n")
	p("`--trace-slower-than` the batch keeps no attempts, so the span has its append and callback children only.\n\n")

	p("### A batch's stages once per batch\n\n")
	p("`--trace-batch-stages per-batch` exports `%s`, `%s`, `%s` and `%s`, which\n", SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive)
	p("belong to a batch attempt, once: in the trace of the batch's first traced record to complete. Every other\n")
	p("traced record of the batch has `%s`, `%s` and `%s` as children of its `send` span, and the\n", SpanRead, SpanAppend, SpanCallback)
	p("`send` span links to that trace's `%s` of each attempt, the link carrying\n", SpanDoSend)
	p("`%s=%s`. This is the conventions' batch pattern turned around (a batch span\n", AttrTraceLink, TraceLinkBatch)
	p("linking to its messages' contexts): here a record's span links to the batch's, since each record keeps\n")
	p("a trace of its own. The default, `per-record`, gives every traced record all its stages.\n\n")

	p("## Spans\n\n")
	p("| span | kind | conventions | what |\n|---|---|---|---|\n")
	p("| `%s{topic}` | PRODUCER, or CLIENT (see above) | Kafka \"Send span (producer)\" / \"(client)\" | one record's send, `Send` called to its callback returned |\n", SpanSendPrefix)
	p("| `%s`, `%s`, `%s`, `%s`, `%s`, `%s`, `%s` | INTERNAL | - (kafkatrail's) | the send span's children, below |\n",
		SpanRead, SpanAppend, SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, SpanCallback)
	p("| `%s` | CLIENT | - | a connection attempt to READY, children `%s`, `%s`, `%s`, `%s` for the steps taken |\n",
		SpanConnect, SpanDial, SpanTLSHandshake, SpanSASLAuthenticate, SpanAPIVersions)
	p("| `%s` | CLIENT | - | one metadata request, queued to answered |\n\n", SpanMetadata)
	p("The send span's children tile it, so their durations add up to the record's latency:\n\n")
	p("| span | from | to |\n|---|---|---|\n")
	for _, r := range [][3]string{
		{SpanAppend, "Send called", "record in a batch (waits for metadata and buffer memory)"},
		{SpanDrain, "record in a batch", "batch drained for a node (linger, readiness, retry backoff)"},
		{SpanDoSend, "drained", "request framed and handed to its connection (batch closed and compressed, request built and encoded)"},
		{SpanCompletedSend, "handed to the connection", "the write of its last byte to the socket returned (stamped by the connection's writer)"},
		{SpanCompletedReceive, "written", "the response's last byte read (stamped by the connection's reader): the broker's time and the network's"},
		{SpanCallback, "response read", "the record's callback returned (the sender taking the response, the batch's callbacks up to this record's)"},
	} {
		p("| `%s` | %s | %s |\n", r[0], r[1], r[2])
	}
	p("\nBefore them, when the record's `Record.Written` is known (every agent line's), a `%s` child covers the wait\n", SpanRead)
	p("before `Send`: from when the line was written (its `--timestamp-field`, else its file's modification time at\n")
	p("the stat before the read that completed it, else, for stdin, that read's time) to `Send` called. It is the one\n")
	p("child outside its parent: it ends where the send span starts, so the send span keeps its meaning (and\n")
	p("`%s` its value). A file's modification time is the last write before the read, so for lines\n", MetricOperationDuration)
	p("read from a backlog it is later than their own write: their `%s` and age are lower bounds. A written time after\n", SpanRead)
	p("`Send` (a line's own timestamp ahead of this clock) makes the stage empty. `%s` holds the same\n", MetricRecordAge)
	p("record's age at acknowledgement: written to the sender taking the broker's response, for every acknowledged record with a written time.\n")
	p("\nEach boundary is a clock reading by what saw it happen: Send and the accumulator (called, in a batch), the\n")
	p("sender's iteration (drained), the network client (handed to the connection), the connection's writer and reader\n")
	p("goroutines (written, read), the callbacks' loop (returned); never a later poll's time, so a stage does not read\n")
	p("zero, or take its neighbour's time, because its end was reported late.\n\n")
	p("`%s`, `%s`, `%s` and `%s` repeat for every attempt of a retried batch, each with `%s`.\n",
		SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, AttrAttempt)
	p("An attempt's `%s` carries its request's `%s`, `%s`, `%s`, `%s`, `%s` (the `%s` and `%s`\n",
		SpanDoSend, AttrNodeID, AttrMessagingBatchCount, AttrBatchBytes, AttrCorrelationID, AttrAPIVersion, SpanCompletedSend, SpanCompletedReceive)
	p("after it are the same request's; every attribute is paid for in each export); a failed attempt's `%s`\n", SpanCompletedReceive)
	p("has `%s` (the Kafka error's name, e.g. `NOT_LEADER_OR_FOLLOWER`) and an error status whose description is\n", AttrErrorType)
	p("the error's message without that name (the conventions: NOT RECOMMENDED to repeat `%s` there).\n\n", AttrErrorType)

	p("### The send span's attributes\n\n")
	p("The direct path (Setup's) makes the span when the record completes, so every attribute is there when it is\n")
	p("made; with a tracer provider of one's own the span starts at `Send` with the first group and gets the rest at its end.\n\n")
	p("| attribute | conventions | value |\n|---|---|---|\n")
	for _, r := range [][3]string{
		{AttrMessagingOperationName, "Required", "`send`; at creation"},
		{AttrMessagingSystem, "Required", "`kafka`; at creation"},
		{AttrMessagingOperationType, "Conditionally Required", "`send`; at creation"},
		{AttrMessagingDestinationName, "Conditionally Required", "the topic; at creation"},
		{AttrMessagingDestinationTemplate, "Conditionally Required (if available)", "the agent's --topic template, for a topic a template named (logs-{service}); on the two metrics too"},
		{AttrMessagingClientID, "Recommended", "the producer's `client.id`; at creation"},
		{AttrMessagingKafkaTombstone, "Conditionally Required (if true)", "`true` for a record with a null value; at creation"},
		{AttrMessagingKafkaKey, "Recommended (single message)", "the key, for a keyed record whose key is valid UTF-8 (the conventions: no attribute for a null key, nor for one without an unambiguous string form); at creation"},
		{AttrMessagingPartitionID, "Recommended", "the partition, as a string"},
		{AttrServerAddress, "Recommended", "the partition leader's advertised host, from the metadata responses, for the node the batch was drained for"},
		{AttrServerPort, "Recommended", "the leader's advertised port"},
		{AttrNetworkPeerAddress, "Recommended", "the IP the leader's connection reached (its advertised name resolved); also on `connect` spans"},
		{AttrNetworkPeerPort, "Recommended (if network.peer.address is set)", "the port the leader's connection reached"},
		{AttrMessagingKafkaClusterID, "Recommended", "the cluster id of the latest metadata response that had one (a record completes after its topic's metadata arrived, so every record that reached a batch has it)"},
		{AttrMessagingKafkaOffset, "Recommended (single message)", "the record's offset, once acknowledged"},
		{AttrErrorType, "Conditionally Required (on failure)", "the Kafka error's name, or one of kafkatrail's (`DELIVERY_TIMEOUT`, ...); with an error status"},
		{AttrTraceReason, "-", "`sampled`, `slow` or `error`"},
		{AttrTraceThreshold, "-", "slow records: the threshold, s"},
	} {
		p("| `%s` | %s | %s |\n", r[0], r[1], r[2])
	}
	p("\nNot set: `messaging.message.id` (Kafka records have none), `messaging.destination.template` (the agent's\n")
	p("`--topic` template is not passed to the producer), `messaging.message.conversation_id`, `network.peer.*`,\n")
	p("and the Opt-In `messaging.message.body.size` and `messaging.message.envelope.size`. `%s` is on the\n", AttrMessagingBatchCount)
	p("attempt's `%s`, the span of the request that carried the batch.\n\n", SpanDoSend)

	p("### Connection spans' attributes\n\n")
	p("| span | attributes |\n|---|---|\n")
	p("| `%s` | `%s`=`kafka`, `%s`, `%s` (the address dialled: a bootstrap server's, or a broker's advertised one), `%s`, `%s` when SASL, `%s` on failure |\n",
		SpanConnect, AttrMessagingSystem, AttrServerAddress, AttrServerPort, AttrNodeID, AttrSASLMechanism, AttrErrorType)
	p("| `%s` | `%s`=`kafka`, `%s`, `%s` (the connection's address), `%s`, `%s`, `%s`, `%s` on failure |\n",
		SpanMetadata, AttrMessagingSystem, AttrServerAddress, AttrServerPort, AttrNodeID, AttrCorrelationID, AttrAPIVersion, AttrErrorType)
	p("| `%s` | `%s`, `%s` |\n\n", SpanAPIVersions, AttrCorrelationID, AttrAPIVersion)

	p("## Metrics\n\n")
	p("The conventions' two producer metrics are `%s` (histogram, s: `Send` called to the callback\n", MetricOperationDuration)
	p("returned, per record) and `%s` (counter: every record the producer attempted, acknowledged or\n", MetricSentMessages)
	p("not; `%s` on the ones that failed, so acknowledged records are the series without it; a record that failed in\n", AttrErrorType)
	p("`Send` or expired before it was ever in a request was not attempted and is not counted, as the conventions\n")
	p("require). Both carry `%s`,\n", AttrMessagingSystem)
	p("`%s`, `%s`, `%s` and the leader's `%s` and `%s` (the conventions: Required,\n", AttrMessagingOperationName, AttrMessagingDestinationName, AttrMessagingPartitionID, AttrServerAddress, AttrServerPort)
	p("Conditionally Required, Recommended, Conditionally Required \"if available\", Recommended); the duration also has\n")
	p("`%s`. A record that failed in `Send`, before it had a partition, has neither partition nor server (its duration\n", AttrMessagingOperationType)
	p("is recorded). Their\n")
	p("series are one per (topic, partition, leader, error.type): their attribute sets are built once per (topic,\n")
	p("partition, leader) and cached, so the measurements of a batch allocate nothing; a leader that moves starts new\n")
	p("series. `%s` counts the failed records again (the dashboards' error panels read it).\n\n", MetricRecordsFailed)
	p("Prometheus names follow the OTLP translation: dots become underscores, the unit becomes a suffix\n")
	p("(`s` -> `_seconds`, `By` -> `_bytes`) and counters end in `_total`; e.g. `%s` is\n", MetricStageDuration)
	p("`kafkatrail_producer_stage_duration_seconds_bucket{%s=\"drain\"}`. The agent's per-file metrics carry\n", strings.ReplaceAll(AttrStage, ".", "_"))
	p("`%s`; lines read from standard input have `%s=\"stdin\"` instead (no file path).\n\n", AttrLogFilePath, AttrInput)
	b.WriteString(metricsTable())
	p("\n## Metrics pushed to the broker (KIP-714)\n\n")
	p("Apart from OTLP, the producer pushes the Java producer's own metrics (`org.apache.kafka.producer.*`, named as\n")
	p("the Java client's telemetry names them) to the brokers when the cluster operator subscribes to them\n")
	p("(`enable.metrics.push`, default true, as in Java); the README's \"Metrics pushed to the broker (KIP-714)\" lists\n")
	p("the names and the protocol. These are not the semantic conventions' names: they are what a Kafka operator's\n")
	p("broker-side receiver expects from any client. The broker assigns the producer a client instance id and\n")
	p("labels the pushes with it (`client_instance_id`); from then on it is the resource attribute `%s` of\n", AttrClientInstanceID)
	p("what kafkatrail's own OTLP exporters send (traces, and metrics unless autoexport builds their reader), and\n")
	p("`%s` carries it for every reader, so the broker's view of the client joins the agent's own.\n", MetricClientInstance)
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
