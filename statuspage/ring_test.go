package statuspage

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

var sixStages = []string{telemetry.SpanAppend, telemetry.SpanDrain, telemetry.SpanDoSend,
	telemetry.SpanCompletedSend, telemetry.SpanCompletedReceive, telemetry.SpanCallback}

func newTracer(t *testing.T, r *Ring) trace.Tracer {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test")
}

// fakeSend records a send span starting at start with the six stages, each d long, the way the
// producer's observer does: children first, each ended before the next starts, then the parent.
func fakeSend(tr trace.Tracer, topic string, start time.Time, d time.Duration, partition string, offset int64) {
	ctx, send := tr.Start(context.Background(), telemetry.SpanSendPrefix+topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(start), trace.WithAttributes(attribute.String(telemetry.AttrMessagingDestinationName, topic)))
	at := start
	for i, name := range sixStages {
		var attrs []attribute.KeyValue
		if i >= 1 && i <= 4 {
			attrs = append(attrs, attribute.Int(telemetry.AttrAttempt, 1))
		}
		if i == 2 { // doSend carries its request's attributes, as the observer makes it
			attrs = append(attrs, attribute.Int(telemetry.AttrNodeID, 0), attribute.Int(telemetry.AttrCorrelationID, 7))
		}
		_, s := tr.Start(ctx, name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
		at = at.Add(d)
		s.End(trace.WithTimestamp(at))
	}
	send.SetAttributes(attribute.String(telemetry.AttrMessagingPartitionID, partition), attribute.Int64(telemetry.AttrMessagingKafkaOffset, offset))
	send.End(trace.WithTimestamp(at))
}

func TestRingKeepsTheWaterfall(t *testing.T) {
	r := NewRing(4)
	tr := newTracer(t, r)
	start := time.Unix(1700000000, 0)
	fakeSend(tr, "logs", start, time.Millisecond, "2", 41)

	got, total := r.Traces(0)
	if total != 1 || len(got) != 1 {
		t.Fatalf("%d traces (%d in all), want 1", len(got), total)
	}
	tc := got[0]
	if tc.Name != "send logs" || tc.Topic != "logs" || tc.Partition != "2" || tc.Offset == nil || *tc.Offset != 41 ||
		!tc.Start.Equal(start) || tc.DurationUS != 6000 || tc.Error != "" || len(tc.TraceID) != 32 || tc.Request != "0/7" {
		t.Fatalf("trace %+v", tc)
	}
	if len(tc.Stages) != 6 {
		t.Fatalf("%d stages, want 6: %+v", len(tc.Stages), tc.Stages)
	}
	for i, s := range tc.Stages {
		if s.Name != sixStages[i] || s.StartUS != float64(1000*i) || s.DurationUS != 1000 {
			t.Errorf("stage %d: %+v, want %s at +%dµs for 1000µs", i, s, sixStages[i], 1000*i)
		}
	}
	for _, s := range tc.Stages[2:5] { // completedSend and completedReceive: doSend's node
		if s.Attempt != 1 || s.Node == nil || *s.Node != 0 {
			t.Errorf("%s %+v: want attempt 1 on node 0", s.Name, s)
		}
	}
	if s := tc.Stages[0]; s.Attempt != 0 || s.Node != nil {
		t.Errorf("append %+v: want no attempt or node", s)
	}
}

func TestRingIsBoundedAndNewestFirst(t *testing.T) {
	r := NewRing(3)
	tr := newTracer(t, r)
	for i := 0; i < 7; i++ {
		fakeSend(tr, fmt.Sprint("t", i), time.Now(), time.Microsecond, "0", int64(i))
	}
	got, total := r.Traces(0)
	if total != 7 || len(got) != 3 {
		t.Fatalf("%d traces kept, %d seen; want 3 of 7", len(got), total)
	}
	for i, want := range []string{"t6", "t5", "t4"} {
		if got[i].Topic != want {
			t.Errorf("trace %d is %s, want %s (newest first)", i, got[i].Topic, want)
		}
	}
	if got, _ := r.Traces(2); len(got) != 2 || got[0].Topic != "t6" {
		t.Errorf("Traces(2) = %d traces starting with %v", len(got), got)
	}
	if r.Capacity() != 3 || NewRing(0).Capacity() != DefaultTraceCapacity {
		t.Error("capacity")
	}
}

func TestRingIgnoresOtherSpansAndBoundsOrphans(t *testing.T) {
	r := NewRing(2)
	tr := newTracer(t, r)
	// Connection spans: a connect root with a dial child, and a Metadata root.
	ctx, c := tr.Start(context.Background(), telemetry.SpanConnect, trace.WithSpanKind(trace.SpanKindClient))
	_, d := tr.Start(ctx, telemetry.SpanDial)
	d.End()
	c.End()
	_, m := tr.Start(context.Background(), telemetry.SpanMetadata, trace.WithSpanKind(trace.SpanKindClient))
	m.End()
	// Stage spans whose send span never ends (a thousand records still in flight, say).
	for i := 0; i < 1000; i++ {
		ctx, send := tr.Start(context.Background(), "send x", trace.WithSpanKind(trace.SpanKindProducer))
		_, s := tr.Start(ctx, telemetry.SpanAppend)
		s.End()
		_ = send // never ended
	}
	if got, total := r.Traces(0); len(got) != 0 || total != 0 {
		t.Fatalf("kept %d traces: %+v", total, got)
	}
	r.mu.Lock()
	n := len(r.pending)
	r.mu.Unlock()
	if n > maxPending {
		t.Fatalf("%d send spans pending, want at most %d", n, maxPending)
	}
	// Unsampled spans are not kept.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(r))
	defer tp.Shutdown(context.Background())
	fakeSend(tp.Tracer("x"), "unsampled", time.Now(), time.Microsecond, "0", 1)
	if _, total := r.Traces(0); total != 0 {
		t.Fatal("an unsampled trace was kept")
	}
}

func TestRingKeepsErrors(t *testing.T) {
	r := NewRing(2)
	tr := newTracer(t, r)
	ctx, send := tr.Start(context.Background(), "send x", trace.WithSpanKind(trace.SpanKindProducer))
	_, s := tr.Start(ctx, telemetry.SpanCompletedReceive)
	s.SetAttributes(attribute.String(telemetry.AttrErrorType, "NOT_LEADER_OR_FOLLOWER"))
	s.SetStatus(codes.Error, "not leader")
	s.End()
	send.SetStatus(codes.Error, "delivery timed out")
	send.End()
	got, _ := r.Traces(1)
	if len(got) != 1 || got[0].Error != "delivery timed out" || len(got[0].Stages) != 1 || got[0].Stages[0].Error != "NOT_LEADER_OR_FOLLOWER" {
		t.Fatalf("%+v", got)
	}
}

// sendThroughKfake sends n records to "orders" on an in-process kfake broker through a producer
// observed by obs, one at a time, and closes the producer: the spans are made after the
// callback, and Close waits for them.
func sendThroughKfake(t *testing.T, obs *telemetry.ProducerObserver, n int) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := producer.DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	p, err := producer.New(cfg, producer.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		done := make(chan error, 1)
		_ = p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")},
			func(_ producer.RecordMetadata, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRingWithTheProducerObserver: a record traced by the real observer through a producer (an
// in-process kfake broker) arrives in the ring with its six stages tiling the send span.
func TestRingWithTheProducerObserver(t *testing.T) {
	r := NewRing(8)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(telemetry.ProviderSampler(sdktrace.AlwaysSample())), sdktrace.WithSpanProcessor(r))
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	obs, err := telemetry.NewProducerObserver(tp, mp, telemetry.ObserverConfig{Sampler: sdktrace.AlwaysSample()})
	if err != nil {
		t.Fatal(err)
	}
	sendThroughKfake(t, obs, 1)
	got, _ := r.Traces(0)
	if len(got) != 1 {
		t.Fatalf("%d traces, want 1", len(got))
	}
	tc := got[0]
	if tc.Topic != "orders" || tc.Partition != "0" || tc.Offset == nil || tc.Request == "" {
		t.Errorf("trace %+v", tc)
	}
	if len(tc.Stages) != 6 {
		t.Fatalf("stages %+v, want six", tc.Stages)
	}
	end := 0.0
	for i, s := range tc.Stages {
		if s.Name != sixStages[i] {
			t.Errorf("stage %d is %s, want %s", i, s.Name, sixStages[i])
		}
		if diff := s.StartUS - end; diff < -0.001 || diff > 0.001 {
			t.Errorf("stage %s starts at %vµs, the previous ended at %vµs: stages must tile", s.Name, s.StartUS, end)
		}
		end = s.StartUS + s.DurationUS
	}
	if diff := end - tc.DurationUS; diff < -0.001 || diff > 0.001 {
		t.Errorf("stages end at %vµs, the send span at %vµs", end, tc.DurationUS)
	}
}

// TestRingTakesRecordSpans: a record's spans handed over as telemetry.RecordSpans, the way the
// producer's observer hands them, make the same trace as the same spans ended as SDK spans.
func TestRingTakesRecordSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	fakeSend(tp.Tracer("test"), "logs", time.Unix(1700000000, 0), time.Millisecond, "2", 41)

	viaSDK, direct := NewRing(4), NewRing(4)
	var spans []telemetry.RecordSpan
	for _, s := range rec.Ended() {
		viaSDK.OnEnd(s)
		st := s.Status()
		spans = append(spans, telemetry.RecordSpan{TraceID: s.SpanContext().TraceID(), SpanID: s.SpanContext().SpanID(),
			ParentSpanID: s.Parent().SpanID(), Flags: s.SpanContext().TraceFlags(), Name: s.Name(), Kind: s.SpanKind(),
			Start: s.StartTime().UnixNano(), End: s.EndTime().UnixNano(), Attributes: s.Attributes(),
			Status: st.Code, StatusMessage: st.Description})
	}
	direct.OnEndRecordSpans(spans)
	want, _ := viaSDK.Traces(0)
	got, total := direct.Traces(0)
	if total != 1 || len(want) != 1 {
		t.Fatalf("%d traces from RecordSpans, %d from SDK spans: want 1 each", total, len(want))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from RecordSpans %+v\nfrom SDK spans %+v", got[0], want[0])
	}
	if len(got[0].Stages) != 6 {
		t.Fatalf("%d stages, want 6", len(got[0].Stages))
	}
	// One span a call: the stages wait in the pending map for their send span.
	apart := NewRing(4)
	for i := range spans {
		apart.OnEndRecordSpans(spans[i : i+1])
	}
	if got, _ := apart.Traces(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("from RecordSpans one at a time %+v\nfrom SDK spans %+v", got, want)
	}
}

// TestRingKeepsClientSendSpans: a send span is CLIENT when the record carries its own creation
// context or was traced only at its callback; the page keeps those traces too.
func TestRingKeepsClientSendSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	fakeSend(tp.Tracer("test"), "logs", time.Unix(1700000000, 0), time.Millisecond, "2", 41)
	var spans []telemetry.RecordSpan
	for _, s := range rec.Ended() {
		kind := s.SpanKind()
		if kind == trace.SpanKindProducer {
			kind = trace.SpanKindClient
		}
		spans = append(spans, telemetry.RecordSpan{TraceID: s.SpanContext().TraceID(), SpanID: s.SpanContext().SpanID(),
			ParentSpanID: s.Parent().SpanID(), Flags: s.SpanContext().TraceFlags(), Name: s.Name(), Kind: kind,
			Start: s.StartTime().UnixNano(), End: s.EndTime().UnixNano(), Attributes: s.Attributes()})
	}
	r := NewRing(4)
	r.OnEndRecordSpans(spans)
	if got, total := r.Traces(0); total != 1 || len(got) != 1 || len(got[0].Stages) != 6 {
		t.Fatalf("CLIENT send span: %d traces kept (%+v), want 1 with 6 stages", total, got)
	}
}

// bothRings hands a traced record to lazy whole and to eager as the spans it makes.
type bothRings struct {
	sdktrace.SpanProcessor
	lazy, eager *Ring
}

func (b bothRings) OnEndTracedRecord(r *telemetry.TracedRecord) {
	b.lazy.OnEndTracedRecord(r)
	b.eager.OnEndRecordSpans(r.Spans(nil))
}

// TestRingTakesTracedRecords: a record handed to the ring whole (its trace made when the page
// reads it) shows as the same trace as its spans handed over at once, and reading again gives
// the same.
func TestRingTakesTracedRecords(t *testing.T) {
	lazy, eager := NewRing(4), NewRing(4)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(telemetry.ProviderSampler(sdktrace.AlwaysSample())))
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	obs, err := telemetry.NewProducerObserver(tp, mp, telemetry.ObserverConfig{Sampler: sdktrace.AlwaysSample(),
		SpanProcessor: bothRings{SpanProcessor: lazy, lazy: lazy, eager: eager}})
	if err != nil {
		t.Fatal(err)
	}
	sendThroughKfake(t, obs, 2)
	want, _ := eager.Traces(0)
	got, total := lazy.Traces(0)
	if total != 2 || len(want) != 2 || len(want[0].Stages) != 6 {
		t.Fatalf("%d traces kept whole (total %d), %d from spans with %d stages: want 2, 2 with 6", len(got), total, len(want), len(want[0].Stages))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept whole %+v\nfrom spans %+v", got, want)
	}
	if again, _ := lazy.Traces(1); !reflect.DeepEqual(again, want[:1]) {
		t.Fatalf("read again %+v, want %+v", again, want[:1])
	}
}
