package telemetry

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkotlptrace "go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
	"github.com/kafkatrail/kafkatrail/producer"
)

// captureClient keeps what the SDK's OTLP exporter would upload: its own transform of spans
// into protobuf structs, the oracle the encoder is compared with.
type captureClient struct{ got []*tracepb.ResourceSpans }

func (*captureClient) Start(context.Context) error { return nil }
func (*captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = rs
	return nil
}

// sdkRequest is the ExportTraceServiceRequest the SDK's exporter makes of spans.
func sdkRequest(t testing.TB, spans []RecordSpan, res *resource.Resource) *colltrace.ExportTraceServiceRequest {
	t.Helper()
	c := &captureClient{}
	if err := sdkotlptrace.NewUnstarted(c).ExportSpans(context.Background(), readOnlySpans(spans, res)); err != nil {
		t.Fatal(err)
	}
	return &colltrace.ExportTraceServiceRequest{ResourceSpans: c.got}
}

// decodeRequest decodes the encoder's bytes with the generated OTLP types, and lines them up
// with the SDK's: scopes in name order (the SDK groups through a map), an unset status as the
// SDK writes it (present and empty), links without trace state (the SDK drops it).
func decodeRequest(t testing.TB, b []byte) *colltrace.ExportTraceServiceRequest {
	t.Helper()
	var req colltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("our request does not decode: %v", err)
	}
	return &req
}

func normalize(req *colltrace.ExportTraceServiceRequest, dropLinkState bool) {
	for _, rs := range req.ResourceSpans {
		slices.SortStableFunc(rs.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
			return strings.Compare(a.Scope.GetName(), b.Scope.GetName())
		})
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if s.Status == nil {
					s.Status = &tracepb.Status{}
				}
				for _, l := range s.Links {
					if dropLinkState {
						l.TraceState = ""
					}
				}
			}
		}
	}
}

var (
	testTraceID = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	testSpanID  = trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
)

// allTypes is one attribute of each type the attribute package has.
func allTypes() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("s", "value"),
		attribute.String("empty", ""),
		attribute.Bool("t", true),
		attribute.Bool("f", false),
		attribute.Int64("i", -42),
		attribute.Int64("zero", 0),
		attribute.Int64("max", math.MaxInt64),
		attribute.Float64("d", 3.25),
		attribute.Float64("nan", math.NaN()),
		attribute.BoolSlice("bs", []bool{true, false}),
		attribute.Int64Slice("is", []int64{1, -1, 1 << 40}),
		attribute.Float64Slice("ds", []float64{0, -1.5}),
		attribute.StringSlice("ss", []string{"a", "", "ccc"}),
		attribute.StringSlice("nos", nil),
		attribute.ByteSlice("bytes", []byte{0, 1, 255}),
		attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(7), attribute.SliceValue(attribute.BoolValue(true))),
		attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Int("n", 1))),
		{Key: "emptyvalue"},
	}
}

// testSpans covers what a span can hold: a record's stages and send span (remote parent,
// trace state, an error status), a span with links and events of the tracer path under a scope
// of its own, every attribute type.
func testSpans() []RecordSpan {
	base := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()
	send := trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	scope := &instrumentation.Scope{Name: "other", Version: "v1.2.3", SchemaURL: "https://example.com/schema",
		Attributes: attribute.NewSet(attribute.String("scope.attr", "x"))}
	return []RecordSpan{
		{TraceID: testTraceID, SpanID: testSpanID, ParentSpanID: send, Flags: trace.FlagsSampled, TraceState: "a=1,b=2",
			Name: SpanAppend, Kind: trace.SpanKindInternal, Start: base, End: base + 1000},
		{TraceID: testTraceID, SpanID: trace.SpanID{2}, ParentSpanID: send, Flags: trace.FlagsSampled, TraceState: "a=1,b=2",
			Name: SpanCompletedReceive, Kind: trace.SpanKindInternal, Start: base + 1000, End: base + 5000,
			Attributes: []attribute.KeyValue{attribute.Int(AttrAttempt, 1), attribute.String(AttrErrorType, "timeout")},
			Status:     codes.Error, StatusMessage: "request timed out"},
		{TraceID: testTraceID, SpanID: send, ParentSpanID: trace.SpanID{7}, ParentRemote: true, Flags: trace.FlagsSampled,
			TraceState: "a=1,b=2", Name: "send orders", Kind: trace.SpanKindProducer, Start: base, End: base + 6000,
			Attributes: allTypes(), Status: codes.Error, StatusMessage: "failed"},
		{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{3}, Flags: trace.FlagsSampled, Name: "slow", Kind: trace.SpanKindClient,
			Start: base, End: base + 10, Attributes: []attribute.KeyValue{attribute.String("k", "v")},
			Links: []RecordLink{
				{TraceID: testTraceID, SpanID: trace.SpanID{7}, TraceState: "c=3", Flags: trace.FlagsSampled, Remote: true,
					Attributes: []attribute.KeyValue{attribute.String("link.attr", "y")}},
				{TraceID: trace.TraceID{4}, SpanID: trace.SpanID{4}},
			}},
		{TraceID: trace.TraceID{5}, SpanID: trace.SpanID{5}, Flags: trace.FlagsSampled, Name: "connect", Kind: trace.SpanKindClient,
			Start: base, End: base + 20, Scope: scope, Status: codes.Ok,
			Events: []sdktrace.Event{{Name: "exception", Time: time.Unix(0, base+5), DroppedAttributeCount: 2,
				Attributes: []attribute.KeyValue{attribute.String("exception.message", "boom")}}},
			DroppedAttributes: 1, DroppedEvents: 2, DroppedLinks: 3},
		{TraceID: trace.TraceID{6}, SpanID: trace.SpanID{6}, Flags: trace.FlagsSampled, Name: "Metadata", Kind: trace.SpanKindClient,
			Start: base, End: base + 30, Scope: scope},
	}
}

// TestTraceEncoderMatchesSDK: the encoder's request, decoded by the generated OTLP types, is
// the one the SDK's OTLP exporter makes of the same spans, field for field (proto.Equal),
// for every attribute type, links, events, statuses, scopes and the resource.
func TestTraceEncoderMatchesSDK(t *testing.T) {
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "kafkatrail-test"), attribute.Int("n", 3))
	spans := testSpans()
	enc := otlptrace.NewTraceEncoder(res)
	got := decodeRequest(t, enc.Encode(spans))
	want := sdkRequest(t, spans, res)
	normalize(got, true)
	normalize(want, false)
	if !proto.Equal(got, want) {
		t.Fatalf("encoded request differs from the SDK's:\n got %v\nwant %v", got, want)
	}
	// The link's trace state, which the SDK does not write, is ours.
	got = decodeRequest(t, enc.Encode(spans))
	if s := got.ResourceSpans[0].ScopeSpans[0].Spans[3]; s.Links[0].TraceState != "c=3" {
		t.Fatalf("link trace state %q, want c=3", s.Links[0].TraceState)
	}
	// Records' spans are in the scope kafkatrail names.
	if n := got.ResourceSpans[0].ScopeSpans[0].Scope.GetName(); n != InstrumentationName {
		t.Fatalf("first scope %q, want %q", n, InstrumentationName)
	}
	if n := len(got.ResourceSpans[0].ScopeSpans); n != 2 {
		t.Fatalf("%d scopes, want 2", n)
	}
}

// TestTraceEncoderAttributeTypes: each attribute type alone, as a table, decodes to the SDK's
// AnyValue for it.
func TestTraceEncoderAttributeTypes(t *testing.T) {
	enc := otlptrace.NewTraceEncoder(resource.Empty())
	for _, kv := range allTypes() {
		t.Run(string(kv.Key), func(t *testing.T) {
			spans := []RecordSpan{{TraceID: testTraceID, SpanID: testSpanID, Flags: trace.FlagsSampled, Name: "s",
				Attributes: []attribute.KeyValue{kv}}}
			got, want := decodeRequest(t, enc.Encode(spans)), sdkRequest(t, spans, resource.Empty())
			normalize(got, true)
			normalize(want, false)
			g := got.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes
			w := want.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes
			if len(g) != 1 || !proto.Equal(g[0], w[0]) {
				t.Fatalf("attribute %s: got %v, want %v", kv.Key, g, w)
			}
		})
	}
}

// TestTraceEncoderNoAllocations: once its buffer has grown, encoding a batch of records'
// spans allocates nothing.
func TestTraceEncoderNoAllocations(t *testing.T) {
	spans := benchRecordSpans(100)
	enc := otlptrace.NewTraceEncoder(resource.Default())
	enc.Encode(spans)
	if n := testing.AllocsPerRun(20, func() { enc.Encode(spans) }); n != 0 {
		t.Fatalf("%v allocations per encoding, want 0", n)
	}
}

// FuzzTraceEncoder: spans with attributes made from the fuzzer's bytes (every scalar and
// slice type) encode to what the SDK's exporter makes of them.
func FuzzTraceEncoder(f *testing.F) {
	f.Add([]byte("hello"), int64(-1), 2.5, true, "k")
	f.Add([]byte{}, int64(0), 0.0, false, "")
	f.Add([]byte{0xff, 0xfe}, int64(math.MinInt64), math.Inf(-1), true, "\x00é")
	f.Fuzz(func(t *testing.T, raw []byte, i int64, d float64, b bool, s string) {
		n := len(raw)
		if n > 0 {
			n = int(raw[0])
		}
		mk := func(str, s string) []RecordSpan {
			attrs := []attribute.KeyValue{
				attribute.String(s, str), attribute.Int64("i", i), attribute.Float64("d", d), attribute.Bool("b", b),
				attribute.StringSlice("ss", []string{str, s}), attribute.Int64Slice("is", []int64{i, -i}),
				attribute.Float64Slice("ds", []float64{d}), attribute.BoolSlice("bs", []bool{b, !b}),
				attribute.ByteSlice("raw", raw),
			}
			attrs = attrs[:n%len(attrs)+1]
			return []RecordSpan{{TraceID: testTraceID, SpanID: testSpanID, Flags: trace.FlagsSampled, Name: s,
				Start: i, End: i, Attributes: attrs, StatusMessage: str, Status: codes.Error}}
		}
		// Strings that are not UTF-8 go out with U+FFFD in place of each bad sequence: the
		// SDK's request, which could not be marshalled at all, is compared with them so.
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		got := decodeRequest(t, otlptrace.NewTraceEncoder(resource.Empty()).Encode(mk(string(raw), s)))
		want := sdkRequest(t, mk(valid(string(raw)), valid(s)), resource.Empty())
		normalize(got, true)
		normalize(want, false)
		if !proto.Equal(got, want) {
			t.Fatalf("got %v\nwant %v", got, want)
		}
	})
}

// benchRecordSpans returns n traced records' seven spans with the attributes the producer gives
// them (one attempt).
func benchRecordSpans(n int) []RecordSpan {
	base := time.Now().UnixNano()
	out := make([]RecordSpan, 0, 7*n)
	sendAttrs := []attribute.KeyValue{
		attribute.String(AttrMessagingSystem, "kafka"), attribute.String(AttrMessagingOperationName, "send"),
		attribute.String(AttrMessagingOperationType, "send"), attribute.String(AttrMessagingDestinationName, "orders"),
		attribute.String(AttrMessagingClientID, "kafkatrail-agent"), attribute.String(AttrTraceReason, TraceReasonSampled),
		attribute.String(AttrMessagingPartitionID, "3"), attribute.Int64(AttrMessagingKafkaOffset, 123456789),
	}
	// As the producer's: the topic's five and the stages' lists encoded once (attrList).
	topicEnc := otlptrace.NewAttrBlock(sendAttrs[:5])
	attempt := sharedAttempts[0]
	doSendKVs := []attribute.KeyValue{attribute.Int(AttrAttempt, 1), attribute.Int(AttrNodeID, 1),
		attribute.Int(AttrMessagingBatchCount, 100), attribute.Int(AttrBatchBytes, 16384),
		attribute.Int(AttrCorrelationID, 4242), attribute.Int(AttrAPIVersion, 11)}
	doSend := attrList{kvs: doSendKVs, enc: otlptrace.NewAttrBlock(doSendKVs)}
	for r := range n {
		tid := newTraceID()
		send := newSpanID()
		at := base + int64(r)*1000
		for i, st := range []struct {
			name  string
			attrs attrList
		}{{SpanAppend, attrList{}}, {SpanDrain, attempt}, {SpanDoSend, doSend}, {SpanCompletedSend, attempt},
			{SpanCompletedReceive, attempt}, {SpanCallback, attrList{}}} {
			out = append(out, RecordSpan{TraceID: tid, SpanID: newSpanID(), ParentSpanID: send, Flags: trace.FlagsSampled,
				Name: st.name, Kind: trace.SpanKindInternal, Start: at + int64(i)*100, End: at + int64(i+1)*100,
				Attributes: st.attrs.kvs, Encoded: st.attrs.enc})
		}
		out = append(out, RecordSpan{TraceID: tid, SpanID: send, Flags: trace.FlagsSampled, Name: "send orders",
			Kind: trace.SpanKindProducer, Start: at, End: at + 600, Attributes: sendAttrs, Encoded: topicEnc})
	}
	return out
}

// BenchmarkTraceEncoder measures encoding records' spans, 100 records to a request, per record.
func BenchmarkTraceEncoder(b *testing.B) {
	spans := benchRecordSpans(100)
	enc := otlptrace.NewTraceEncoder(resource.Default())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 100 {
		enc.Encode(spans)
	}
}

// spanCapture keeps copies of the Spans a producer's observer hands over.
type spanCapture struct {
	discardProcessor
	mu    sync.Mutex
	spans []RecordSpan
}

func (c *spanCapture) OnEndRecordSpans(spans []RecordSpan) {
	c.mu.Lock()
	c.spans = append(c.spans, spans...)
	c.mu.Unlock()
}

// TestRecordSpansEncodedBlocks: the producer's spans carry their shared attribute lists
// already encoded (a topic's, an attempt's, a request's, also under an added error.type), and
// the request made with those blocks is byte for byte the one made from the attributes alone.
func TestRecordSpansEncodedBlocks(t *testing.T) {
	capture := &spanCapture{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(ProviderSampler(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := NewProducerObserver(tp, noopmetric.NewMeterProvider(), ObserverConfig{Sampler: sdktrace.AlwaysSample(),
		SpanProcessor: capture, ClientID: "kafkatrail-test"})
	if err != nil {
		t.Fatal(err)
	}
	c := newKfake(t, "orders")
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true // once: a retry, a failed attempt
	})
	p := newProducer(t, c.ListenAddrs(), obs, nil)
	for range 3 {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny,
			Key: []byte("k"), Value: []byte("v")}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	capture.mu.Lock()
	spans := slices.Clone(capture.spans)
	capture.mu.Unlock()
	withBlocks := 0
	for _, s := range spans {
		if s.Encoded != nil {
			withBlocks++
		}
	}
	if len(spans) < 3*7 || withBlocks < len(spans)/2 {
		t.Fatalf("%d of %d spans have encoded attributes", withBlocks, len(spans))
	}
	enc := otlptrace.NewTraceEncoder(resource.Default())
	got := slices.Clone(enc.Encode(spans))
	plain := slices.Clone(spans)
	for i := range plain {
		plain[i].Encoded = nil
	}
	if want := enc.Encode(plain); !bytes.Equal(got, want) {
		t.Fatalf("with blocks the request differs (%d bytes, %d without)", len(got), len(want))
	}
	// And it is the SDK's request, too.
	g, w := decodeRequest(t, got), sdkRequest(t, plain, resource.Default())
	normalize(g, true)
	normalize(w, false)
	if !proto.Equal(g, w) {
		t.Fatalf("encoded request differs from the SDK's:\n got %v\nwant %v", g, w)
	}
}
