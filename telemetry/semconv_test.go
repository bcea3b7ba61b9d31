package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// Tests of what the OpenTelemetry messaging and Kafka conventions ask of the spans and metrics
// (docs/telemetry.md lists them against the conventions' version).

// topicSampler samples the send spans of one topic only, deciding by what a user's sampler
// can see at creation: the span name and the messaging.destination.name attribute. It keeps
// the parameters it was called with.
type topicSampler struct {
	topic string
	mu    sync.Mutex
	seen  []sdktrace.SamplingParameters
}

func (s *topicSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	s.seen = append(s.seen, p)
	s.mu.Unlock()
	var dest string
	for _, kv := range p.Attributes {
		if kv.Key == AttrMessagingDestinationName {
			dest = kv.Value.AsString()
		}
	}
	if p.Name == SpanSendPrefix+s.topic && dest == s.topic {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s *topicSampler) Description() string { return "topicSampler" }

// TestSamplerSeesTopicAtCreation: a user's sampler gets the span name `send {topic}`, the kind
// and the sampling-relevant attributes of the conventions in StartSend's SamplingParameters,
// so it can trace one topic and not another.
func TestSamplerSeesTopicAtCreation(t *testing.T) {
	for _, viaTracer := range []bool{false, true} {
		s := &topicSampler{topic: "orders"}
		h := newHarnessVia(t, s, ObserverConfig{}, viaTracer)
		c := newKfake(t, "orders", "other")
		p := newProducer(t, c.ListenAddrs(), h.obs, nil)
		for _, topic := range []string{"other", "orders", "other"} {
			if o := sendOne(t, p, context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
				t.Fatal(o.err)
			}
		}
		recordTraceOf(t, h, "send orders") // exactly one
		if n := sendSpans(h); n != 1 {
			t.Fatalf("via tracer %v: %d send spans, want the orders record's only", viaTracer, n)
		}
		s.mu.Lock()
		var other *sdktrace.SamplingParameters
		for i := range s.seen {
			if s.seen[i].Name == "send other" {
				other = &s.seen[i]
			}
		}
		s.mu.Unlock()
		if other == nil {
			t.Fatalf("via tracer %v: the sampler never saw `send other`", viaTracer)
		}
		if other.Kind != trace.SpanKindProducer {
			t.Fatalf("sampler saw kind %v, want PRODUCER", other.Kind)
		}
		got := map[attribute.Key]string{}
		for _, kv := range other.Attributes {
			got[kv.Key] = kv.Value.Emit()
		}
		for k, want := range map[attribute.Key]string{
			AttrMessagingSystem:          "kafka",
			AttrMessagingOperationName:   "send",
			AttrMessagingOperationType:   "send",
			AttrMessagingDestinationName: "other",
			AttrMessagingClientID:        "kafkatrail-test",
		} {
			if got[k] != want {
				t.Fatalf("via tracer %v: sampler saw %s=%q, want %q (all: %v)", viaTracer, k, got[k], want, got)
			}
		}
	}
}

// TestMessagingMetricsCarryPartitionAndLeader: both messaging metrics carry the partition and
// the leader's advertised address; sent.messages counts the attempted records only, so not one
// that failed in Send (records.failed has it).
func TestMessagingMetricsCarryPartitionAndLeader(t *testing.T) {
	h := newHarness(t, nil) // tracing off: the metrics do not depend on it
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for i := 0; i < 3; i++ {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	// A record too large fails in Send: never attempted, so not in sent.messages; records.failed
	// and the operation duration have it, with its error.type, without partition or leader.
	big := &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: make([]byte, 2<<20)}
	if o := sendOne(t, p, context.Background(), big); o.err == nil {
		t.Fatal("a record larger than max.request.size was sent")
	}
	host, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	want := []attribute.KeyValue{
		attribute.String(AttrMessagingSystem, "kafka"),
		attribute.String(AttrMessagingOperationName, "send"),
		attribute.String(AttrMessagingDestinationName, "orders"),
		attribute.String(AttrMessagingPartitionID, "0"),
		attribute.String(AttrServerAddress, host),
		attribute.Int(AttrServerPort, mustAtoi(t, port)),
	}
	got := collect(t, h)
	if n := sumOf(got[MetricSentMessages], want...); n != 3 {
		t.Fatalf("%s with partition and leader = %d, want 3; points %+v", MetricSentMessages, n, got[MetricSentMessages].Data)
	}
	if n := sumOf(got[MetricSentMessages], attribute.String(AttrMessagingDestinationName, "orders"),
		attribute.String(AttrErrorType, ErrorTypeRecordTooLarge)); n != 0 {
		t.Fatalf("%s with error.type %s = %d, want 0: the record never left Send", MetricSentMessages, ErrorTypeRecordTooLarge, n)
	}
	if n := sumOf(got[MetricRecordsFailed], attribute.String(AttrErrorType, ErrorTypeRecordTooLarge)); n != 1 {
		t.Fatalf("%s = %d, want the failed record counted there as well", MetricRecordsFailed, n)
	}
	var okCount uint64
	for _, dp := range got[MetricOperationDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		matches := true
		for _, kv := range append(want, attribute.String(AttrMessagingOperationType, "send")) {
			if v, ok := dp.Attributes.Value(kv.Key); !ok || v != kv.Value {
				matches = false
			}
		}
		if matches {
			if _, failed := dp.Attributes.Value(AttrErrorType); !failed {
				okCount += dp.Count
			}
		}
	}
	if okCount != 3 {
		t.Fatalf("%s: %d acknowledged records with partition and leader, want 3", MetricOperationDuration, okCount)
	}
	// The stage metric's attribute is namespaced.
	for _, dp := range got[MetricStageDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		if _, ok := dp.Attributes.Value("stage"); ok {
			t.Fatalf("%s still has a bare stage attribute: %v", MetricStageDuration, dp.Attributes.ToSlice())
		}
		if _, ok := dp.Attributes.Value("kafkatrail.stage"); !ok {
			t.Fatalf("%s point without kafkatrail.stage: %v", MetricStageDuration, dp.Attributes.ToSlice())
		}
	}
}

// TestKeyAttribute: a keyed record's span has messaging.kafka.message.key in string form; a
// key without a string form (not UTF-8) and a null key leave it out.
func TestKeyAttribute(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "a", "b", "c")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for topic, key := range map[string][]byte{"a": []byte("user-42"), "b": {0xff, 0xfe}, "c": nil} {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Key: key, Value: []byte("v")}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	a, _ := recordTraceOf(t, h, "send a")
	wantAttr(t, a, AttrMessagingKafkaKey, "user-42")
	for _, name := range []string{"send b", "send c"} {
		s, _ := recordTraceOf(t, h, name)
		if v, ok := attrOf(s, AttrMessagingKafkaKey); ok {
			t.Fatalf("%s has %s=%v, want none", name, AttrMessagingKafkaKey, v)
		}
	}
}

// TestSlowRecordSpanIsClientLinkedToLine: a slow record's span, made at its callback, is CLIENT
// (its context never reached the record) and links to the context the record carries in its
// trace header, the log line's.
func TestSlowRecordSpanIsClientLinkedToLine(t *testing.T) {
	h := newSlowHarness(t, time.Nanosecond) // every record is slow
	c := newKfake(t, "slow")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	const line = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" // unsampled: only the slow path traces it
	ctx := ContextWithLineTrace(context.Background(), []byte(line))
	if o := sendOne(t, p, ctx, &producer.Record{Topic: "slow", Partition: producer.PartitionAny, Value: []byte("v"),
		Headers: []producer.Header{{Key: "other", Value: []byte("x")}, {Key: DefaultTraceHeader, Value: []byte(line)}}}); o.err != nil {
		t.Fatal(o.err)
	}
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "slow", Partition: producer.PartitionAny, Value: []byte("w")}); o.err != nil {
		t.Fatal(o.err)
	}
	var linked, unlinked int
	for _, s := range h.spans.Ended() {
		if s.Name() != "send slow" {
			continue
		}
		if s.SpanKind() != trace.SpanKindClient {
			t.Fatalf("slow record's span kind %v, want CLIENT", s.SpanKind())
		}
		wantAttr(t, s, AttrTraceReason, TraceReasonSlow)
		switch l := s.Links(); {
		case len(l) == 0:
			unlinked++
		case len(l) == 1 && l[0].SpanContext.SpanID().String() == "00f067aa0ba902b7" &&
			l[0].SpanContext.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736":
			linked++
		default:
			t.Fatalf("slow span links %+v, want the line's context", l)
		}
	}
	if linked != 1 || unlinked != 1 {
		t.Fatalf("%d slow spans linked to the line and %d without a link, want 1 and 1", linked, unlinked)
	}
}

// TestMetadataSpanAttributes: Metadata spans carry messaging.system and the address of the
// broker they went to; metadata responses give the observer the cluster id.
func TestMetadataSpanAttributes(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	host, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	var n int
	for _, s := range h.spans.Ended() {
		if s.Name() != SpanMetadata && s.Name() != SpanConnect {
			continue
		}
		n++
		wantAttr(t, s, AttrMessagingSystem, "kafka")
		wantAttr(t, s, AttrServerAddress, host)
		wantAttr(t, s, AttrServerPort, int64(mustAtoi(t, port)))
	}
	if n < 2 {
		t.Fatalf("%d Metadata and connect spans, want at least one of each", n)
	}
	if id := h.obs.clusterID.Load(); id == nil || id.Value.AsString() != "kfake" {
		t.Fatalf("cluster id %v, want kfake's", id)
	}
}

// TestMetadataSeenKeepsAddresses: a broker's address follows the metadata responses, and the
// partition series built for the old address are not reused for the new one.
func TestMetadataSeenKeepsAddresses(t *testing.T) {
	h := newHarness(t, nil)
	o := h.obs
	resp := kmsg.NewPtrMetadataResponse()
	id := "cluster-1"
	resp.ClusterID = &id
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "b1.example", Port: 9092}}
	o.metadataSeen(resp)
	ta := o.topic("t")
	first := o.partition(ta, 3, 1)
	if first.addr == nil || first.addr.host != "b1.example" || first.addr.port != 9092 {
		t.Fatalf("address %+v, want b1.example:9092", first.addr)
	}
	if again := o.partition(ta, 3, 1); again != first {
		t.Fatal("the partition's attributes were built again for the same leader")
	}
	o.metadataSeen(resp) // unchanged: the same address, the same attributes
	if again := o.partition(ta, 3, 1); again != first {
		t.Fatal("an unchanged metadata response rebuilt the partition's attributes")
	}
	resp.Brokers[0].Host = "b1-moved.example"
	o.metadataSeen(resp)
	moved := o.partition(ta, 3, 1)
	if moved == first || moved.addr.host != "b1-moved.example" {
		t.Fatalf("after the broker moved: %+v, want the new address", moved.addr)
	}
	if unknown := o.partition(ta, 3, 7); unknown.addr != nil {
		t.Fatalf("a node no metadata named has address %+v", unknown.addr)
	}
	if got := o.clusterID.Load().Value.AsString(); got != id {
		t.Fatalf("cluster id %q, want %q", got, id)
	}
}

// BenchmarkPartitionAttrs is the lookup BatchDone and RecordDone make once per batch (per
// traced record) for the messaging metrics' attributes: it must not allocate.
//
//	go test -run '^$' -bench PartitionAttrs -benchmem ./telemetry/
func BenchmarkPartitionAttrs(b *testing.B) {
	h := newHarness(b, nil)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9092}}
	h.obs.metadataSeen(resp)
	ta := h.obs.topic("bench")
	h.obs.partition(ta, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		if h.obs.partition(ta, 0, 1).addr == nil {
			b.Fatal("no address")
		}
	}
}

// TestDestinationTemplate: a topic named by a template (SetDestinationTemplate, which the agent
// calls when its --topic template names a topic first) has messaging.destination.template on
// its send spans and on both messaging metrics; another topic has none.
func TestDestinationTemplate(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "logs-api", "plain")
	h.obs.SetDestinationTemplate("logs-api", "logs-{service}")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for _, topic := range []string{"logs-api", "plain"} {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	parent, _ := recordTraceOf(t, h, "send logs-api")
	wantAttr(t, parent, AttrMessagingDestinationTemplate, "logs-{service}")
	plain, _ := recordTraceOf(t, h, "send plain")
	if v, ok := attrOf(plain, AttrMessagingDestinationTemplate); ok {
		t.Errorf("a plain topic's span has %s=%v", AttrMessagingDestinationTemplate, v.AsInterface())
	}
	got := collect(t, h)
	tmpl := attribute.String(AttrMessagingDestinationTemplate, "logs-{service}")
	if n := sumOf(got[MetricSentMessages], attribute.String(AttrMessagingDestinationName, "logs-api"), tmpl); n != 1 {
		t.Errorf("%s with the template = %d, want 1", MetricSentMessages, n)
	}
	var withTemplate uint64
	for _, dp := range got[MetricOperationDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		if v, ok := dp.Attributes.Value(AttrMessagingDestinationTemplate); ok && v.AsString() == "logs-{service}" {
			withTemplate += dp.Count
		}
	}
	if withTemplate != 1 {
		t.Errorf("%s points with the template: %d records, want 1", MetricOperationDuration, withTemplate)
	}
}

// TestNetworkPeerOnSpans: a record's send span names where the leader's connection went
// (network.peer.address and network.peer.port: the advertised name resolved), as does the
// connect span.
func TestNetworkPeerOnSpans(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	host, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	parent, _ := recordTraceOf(t, h, "send orders")
	wantAttr(t, parent, AttrNetworkPeerAddress, host)
	wantAttr(t, parent, AttrNetworkPeerPort, int64(mustAtoi(t, port)))
	found := false
	for _, s := range h.spans.Ended() {
		if s.Name() == SpanConnect {
			if v, ok := attrOf(s, AttrNetworkPeerAddress); ok && v.AsString() == host {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no %s span with %s=%s", SpanConnect, AttrNetworkPeerAddress, host)
	}
}
