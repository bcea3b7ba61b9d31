package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The stages of a record's trace, in order (telemetry/names.go).
var stageSpans = []string{"append", "drain", "doSend", "completedSend", "completedReceive", "callback"}

// TestAgentTracesInJaeger runs the agent on a few hundred lines from stdin against the real
// broker, every record sampled, traces exported over OTLP/gRPC to Jaeger, and waits until
// Jaeger's HTTP API has a trace whose `send {topic}` span has exactly the six stage children,
// in order, tiling the parent, and the messaging conventions' attributes.
func TestAgentTracesInJaeger(t *testing.T) {
	testAgentTracesInJaeger(t, "kafkatrail-agent", nil)
}

// TestAgentTracesInJaegerHTTPGzip is TestAgentTracesInJaeger with the traces exported over
// OTLP/HTTP (http/protobuf), gzip-compressed, to Jaeger's OTLP/HTTP receiver.
func TestAgentTracesInJaegerHTTPGzip(t *testing.T) {
	testAgentTracesInJaeger(t, "kafkatrail-agent-http", map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL":    "http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT":    backend(t, "JAEGER_OTLP_HTTP_ENDPOINT"),
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	})
}

func testAgentTracesInJaeger(t *testing.T, service string, env map[string]string) {
	const lines = 300
	agentEnv := map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}
	maps.Copy(agentEnv, env)
	topic, jaegerURL := runTracingAgent(t, "agent (traces)", "e2e-traces", service, nil,
		agentEnv, lines, func(i int) string { return fmt.Sprintf(`{"msg":"e2e trace line %d","n":%d}`, i, i) })

	ctx := context.Background()
	op := "send " + topic
	var last []string
	err := poll(ctx, 30*time.Second, 300*time.Millisecond, func() (bool, error) {
		var r jaegerTraces
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"50"}, "lookback": {"1h"}}
		if err := getJSON(ctx, jaegerURL, "/api/traces", q, &r); err != nil {
			return false, err
		}
		if len(r.Data) == 0 {
			var s struct {
				Data []string `json:"data"`
			}
			_ = getJSON(ctx, jaegerURL, "/api/services", nil, &s)
			return false, fmt.Errorf("no trace with operation %q of service %q (services: %v)", op, service, s.Data)
		}
		last = last[:0]
		for _, tr := range r.Data {
			problem := checkSendTrace(tr, op)
			if problem == "" {
				problem = checkSendConventions(tr, op)
			}
			if problem == "" {
				t.Logf("trace %s: %q with its read stage, its six stages and the conventions' attributes (%d traces found)", tr.TraceID, op, len(r.Data))
				return true, nil
			}
			last = append(last, tr.TraceID+": "+problem)
		}
		return false, fmt.Errorf("%d traces, none with exactly the six stages under %q:\n  %s", len(r.Data), op, strings.Join(last, "\n  "))
	})
	if err != nil {
		t.Fatalf("Jaeger (%s): %v", jaegerURL, err)
	}
}

// checkSendConventions returns "" if the trace's span op is a PRODUCER span with the
// messaging conventions' attributes (the leader's address, the partition, the cluster id), as
// Jaeger keeps them; else what is missing.
func checkSendConventions(tr jaegerTrace, op string) string {
	for _, s := range tr.Spans {
		if s.OperationName != op {
			continue
		}
		tags := map[string]any{}
		for _, tg := range s.Tags {
			tags[tg.Key] = tg.Value
		}
		if k := tags["span.kind"]; k != "producer" {
			return fmt.Sprintf("span.kind %v, want producer", k)
		}
		for _, k := range []string{"messaging.system", "messaging.destination.name", "messaging.destination.partition.id",
			"server.address", "server.port", "network.peer.address", "network.peer.port", "messaging.kafka.cluster.id", "messaging.kafka.offset"} {
			if _, ok := tags[k]; !ok {
				return fmt.Sprintf("no %s among the send span's tags %v", k, tags)
			}
		}
		return ""
	}
	return fmt.Sprintf("no %q span", op)
}

// checkSendTrace returns "" if the trace has a span named op whose children are a read stage
// ending at its start and exactly the six stages, in start order, adding up to the parent's
// duration; else what is wrong.
func checkSendTrace(tr jaegerTrace, op string) string {
	var send *jaegerSpan
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == op {
			send = &tr.Spans[i]
			break
		}
	}
	if send == nil {
		return fmt.Sprintf("no %q span", op)
	}
	var kids []jaegerSpan
	var read *jaegerSpan
	for i, s := range tr.Spans {
		switch {
		case s.parent() != send.SpanID:
		case s.OperationName == "read" && read == nil:
			read = &tr.Spans[i]
		default:
			kids = append(kids, s)
		}
	}
	// Every agent line knows when it was written: a read child ends where the send span
	// starts (Jaeger keeps microseconds: allow rounding), outside the six that tile it.
	if read == nil {
		return fmt.Sprintf("no read child of %q", op)
	}
	if d := read.StartTime + read.Duration - send.StartTime; d < -1 || d > 1 {
		return fmt.Sprintf("read ends %dµs from the send span's start, want at it", d)
	}
	// Jaeger keeps microseconds: a stage shorter than that starts with the next one, so ties go
	// to the one that ends first; stages that start and end in the same microsecond (append,
	// drain and doSend of a record appended to a batch that is drained at once) cannot be
	// ordered from what Jaeger keeps, and are taken in stage order.
	stageIndex := func(name string) int { return slices.Index(stageSpans, name) }
	sort.SliceStable(kids, func(i, j int) bool {
		if kids[i].StartTime != kids[j].StartTime {
			return kids[i].StartTime < kids[j].StartTime
		}
		if kids[i].Duration != kids[j].Duration {
			return kids[i].Duration < kids[j].Duration
		}
		return stageIndex(kids[i].OperationName) < stageIndex(kids[j].OperationName)
	})
	var names []string
	var sum int64
	for _, k := range kids {
		names = append(names, k.OperationName)
		sum += k.Duration
	}
	if strings.Join(names, ",") != strings.Join(stageSpans, ",") {
		var got []string
		for _, k := range kids {
			got = append(got, fmt.Sprintf("%s@%d+%dµs", k.OperationName, k.StartTime-send.StartTime, k.Duration))
		}
		return fmt.Sprintf("children of %q: %v, want %v", op, got, stageSpans)
	}
	// Contiguous stages add up to the parent; Jaeger keeps microseconds, so allow rounding.
	if d := send.Duration - sum; d < -10 || d > 10 {
		return fmt.Sprintf("stage durations add up to %dµs, the send span lasts %dµs", sum, send.Duration)
	}
	return ""
}

// TestAgentSlowTracesInJaeger runs the agent with head sampling at 0 and a latency threshold of
// 1µs, which every record passes: each record's trace is built when its callback ran, marked
// kafkatrail.trace.reason=slow, and Jaeger must have it with the six stages.
func TestAgentSlowTracesInJaeger(t *testing.T) {
	const service = "kafkatrail-agent-slow"
	const lines = 50
	topic, jaegerURL := runTracingAgent(t, "agent (slow traces)", "e2e-slow", service,
		[]string{"--trace-sample-ratio", "0", "--trace-slower-than", "1us"}, nil,
		lines, func(i int) string { return fmt.Sprintf("e2e slow line %d", i) })

	ctx := context.Background()
	op := "send " + topic
	err := poll(ctx, 30*time.Second, 300*time.Millisecond, func() (bool, error) {
		var r jaegerTraces
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"100"}, "lookback": {"1h"},
			"tags": {`{"kafkatrail.trace.reason":"slow"}`}}
		if err := getJSON(ctx, jaegerURL, "/api/traces", q, &r); err != nil {
			return false, err
		}
		if len(r.Data) < lines {
			return false, fmt.Errorf("%d traces tagged kafkatrail.trace.reason=slow, want all %d lines'", len(r.Data), lines)
		}
		for _, tr := range r.Data {
			if problem := checkSendTrace(tr, op); problem != "" {
				return false, fmt.Errorf("trace %s: %s", tr.TraceID, problem)
			}
		}
		t.Logf("%d slow-record traces in Jaeger, each with its read stage and six stages", len(r.Data))
		return true, nil
	})
	if err != nil {
		t.Fatalf("Jaeger (%s): %v", jaegerURL, err)
	}
}

// TestAgentBatchStagesInJaeger runs the agent with --trace-batch-stages per-batch, every record
// sampled: Jaeger must have a record's trace whose send span has only its read, append and
// callback stages and links (FOLLOWS_FROM) to a doSend in another trace, and that trace must
// have the six stages, the doSend among them.
func TestAgentBatchStagesInJaeger(t *testing.T) {
	const service = "kafkatrail-agent-batch-stages"
	topic, jaegerURL := runTracingAgent(t, "agent (batch stages)", "e2e-batch-stages", service,
		[]string{"--trace-batch-stages", "per-batch"}, map[string]string{"OTEL_TRACES_SAMPLER": "always_on"},
		300, func(i int) string { return fmt.Sprintf("e2e batch stages line %d", i) })

	ctx := context.Background()
	op := "send " + topic
	err := poll(ctx, 30*time.Second, 300*time.Millisecond, func() (bool, error) {
		var r jaegerTraces
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"50"}, "lookback": {"1h"}}
		if err := getJSON(ctx, jaegerURL, "/api/traces", q, &r); err != nil {
			return false, err
		}
		var last []string
		for _, tr := range r.Data {
			linked, problem := checkLinkedSendTrace(tr, op)
			if problem == "" {
				var owner jaegerTraces
				if err := getJSON(ctx, jaegerURL, "/api/traces/"+linked.TraceID, nil, &owner); err != nil {
					return false, err
				}
				problem = "the linked trace " + linked.TraceID + " is not in Jaeger"
				if len(owner.Data) == 1 {
					problem = checkSendTrace(owner.Data[0], op)
					if problem == "" && !slices.ContainsFunc(owner.Data[0].Spans, func(s jaegerSpan) bool {
						return s.SpanID == linked.SpanID && s.OperationName == "doSend"
					}) {
						problem = "the linked span " + linked.SpanID + " is not a doSend of trace " + linked.TraceID
					}
				}
				if problem == "" {
					t.Logf("trace %s: read, append and callback, linked to doSend %s of trace %s, which has the six stages",
						tr.TraceID, linked.SpanID, linked.TraceID)
					return true, nil
				}
			}
			last = append(last, tr.TraceID+": "+problem)
		}
		return false, fmt.Errorf("%d traces, none linked to its batch's stages:\n  %s", len(r.Data), strings.Join(last, "\n  "))
	})
	if err != nil {
		t.Fatalf("Jaeger (%s): %v", jaegerURL, err)
	}
}

// jaegerRef is a span reference: a trace and a span in it.
type jaegerRef struct{ TraceID, SpanID string }

// checkLinkedSendTrace returns the span that the send span op of tr links to (FOLLOWS_FROM, in
// another trace) when op's children are exactly read, append and callback; else what is wrong.
func checkLinkedSendTrace(tr jaegerTrace, op string) (jaegerRef, string) {
	var send *jaegerSpan
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == op {
			send = &tr.Spans[i]
		}
	}
	if send == nil {
		return jaegerRef{}, fmt.Sprintf("no %q span", op)
	}
	var kids []string
	for _, s := range tr.Spans {
		if s.parent() == send.SpanID {
			kids = append(kids, s.OperationName)
		}
	}
	slices.Sort(kids)
	if want := []string{"append", "callback", "read"}; !slices.Equal(kids, want) {
		return jaegerRef{}, fmt.Sprintf("children %v, want %v", kids, want)
	}
	for _, r := range send.References {
		if r.RefType == "FOLLOWS_FROM" && r.TraceID != tr.TraceID {
			return jaegerRef{r.TraceID, r.SpanID}, ""
		}
	}
	return jaegerRef{}, "no link to another trace"
}

// runTracingAgent runs the agent on lines lines from stdin (line(i) is line i, without its
// newline) to a new topic named after topicPrefix, which it returns with Jaeger's query URL, its traces exported over OTLP/gRPC to jaegerOTLP as service and its metrics
// off, with args added to its flags and env to its environment (a key in env wins), and fails
// the test unless the agent exits 0 within 60 s.
func runTracingAgent(t *testing.T, name, topicPrefix, service string, args []string,
	env map[string]string, lines int, line func(i int) string) (topic, jaegerURL string) {
	t.Helper()
	bootstrap := backend(t, "KAFKA_BOOTSTRAP")
	jaegerURL = backend(t, "JAEGER_QUERY_URL")
	jaegerOTLP := backend(t, "JAEGER_OTLP_GRPC_ENDPOINT")
	topic = uniqueName(topicPrefix)
	agentEnv := map[string]string{
		"OTEL_SERVICE_NAME":           service,
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT": jaegerOTLP,
		"OTEL_METRICS_EXPORTER":       "none",
	}
	maps.Copy(agentEnv, env)
	run := startAgent(t, name, append([]string{"--brokers", bootstrap, "--topic", topic, "--stdin",
		"--state-dir", t.TempDir(), "--log-format", "text"}, args...), agentEnv, true)
	for i := 0; i < lines; i++ {
		if _, err := fmt.Fprintln(run.stdin, line(i)); err != nil {
			t.Fatalf("writing to the agent: %v\n%s", err, run.output())
		}
	}
	run.stdin.Close()
	if code := run.wait(60 * time.Second); code != 0 {
		t.Fatalf("agent exited %d; its output:\n%s", code, run.output())
	}
	return topic, jaegerURL
}

// TestAgentErrorTracesInJaeger runs the agent with head sampling at 0 on a topic whose
// max.message.bytes refuses one of its lines: the refused record is never slow and never
// sampled, yet Jaeger must have its trace, marked kafkatrail.trace.reason=error, with the
// broker's error as error.type and an error status; the lines Kafka took leave none.
func TestAgentErrorTracesInJaeger(t *testing.T) {
	const service = "kafkatrail-agent-errors"
	bootstrap := backend(t, "KAFKA_BOOTSTRAP")
	jaegerURL := backend(t, "JAEGER_QUERY_URL")
	jaegerOTLP := backend(t, "JAEGER_OTLP_GRPC_ENDPOINT")
	topic := uniqueName("e2e-errors")
	maxBytes := "2000"
	createTopic(t, bootstrap, topic, map[string]*string{"max.message.bytes": &maxBytes})
	run := startAgent(t, "agent (error traces)", []string{"--brokers", bootstrap, "--topic", topic, "--stdin",
		"--state-dir", t.TempDir(), "--log-format", "text", "--trace-sample-ratio", "0"}, map[string]string{
		"OTEL_SERVICE_NAME": service, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT": jaegerOTLP, "OTEL_METRICS_EXPORTER": "none",
	}, true)
	for i := range 20 {
		line := fmt.Sprintf("e2e error line %d", i)
		if i == 10 {
			line += " " + strings.Repeat("x", 5000) // above max.message.bytes: MESSAGE_TOO_LARGE
		}
		if _, err := fmt.Fprintln(run.stdin, line); err != nil {
			t.Fatalf("writing to the agent: %v\n%s", err, run.output())
		}
	}
	run.stdin.Close()
	// stdin: the refused line is a dead letter, the others delivered (exit 3).
	if code := run.wait(60 * time.Second); code != 3 {
		t.Fatalf("agent exited %d, want 3 (one line dead-lettered); its output:\n%s", code, run.output())
	}
	ctx := context.Background()
	op := "send " + topic
	err := poll(ctx, 30*time.Second, 300*time.Millisecond, func() (bool, error) {
		var r jaegerTraces
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"100"}, "lookback": {"1h"}}
		if err := getJSON(ctx, jaegerURL, "/api/traces", q, &r); err != nil {
			return false, err
		}
		if len(r.Data) != 1 {
			return false, fmt.Errorf("%d traces of %q, want the refused record's only", len(r.Data), op)
		}
		for _, s := range r.Data[0].Spans {
			if s.OperationName != op {
				continue
			}
			tags := map[string]string{}
			for _, tag := range s.Tags {
				tags[tag.Key] = fmt.Sprint(tag.Value)
			}
			if tags["kafkatrail.trace.reason"] != "error" || tags["error.type"] != "MESSAGE_TOO_LARGE" || tags["otel.status_code"] != "ERROR" {
				return false, fmt.Errorf("the send span's tags %v, want kafkatrail.trace.reason=error, error.type=MESSAGE_TOO_LARGE, an error status", tags)
			}
			t.Logf("trace %s: the refused record's send span, kafkatrail.trace.reason=error, error.type=MESSAGE_TOO_LARGE, status %q",
				r.Data[0].TraceID, tags["otel.status_description"])
			return true, nil
		}
		return false, fmt.Errorf("trace %s has no %q span", r.Data[0].TraceID, op)
	})
	if err != nil {
		t.Fatal(err)
	}
}
