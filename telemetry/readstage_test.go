package telemetry

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// A traced record whose Record.Written is known has a read span before its six stages: from
// Written to Send, ending where the send span starts; the send span itself still starts at
// Send. The read stage and the record's age at acknowledgement go to their histograms in the
// span's context.
func TestTraceReadStage(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testTraceReadStage(t, newHarness(t, sdktrace.AlwaysSample())) })
	t.Run("via tracer", func(t *testing.T) {
		testTraceReadStage(t, newHarnessVia(t, sdktrace.AlwaysSample(), ObserverConfig{}, true))
	})
}

func testTraceReadStage(t *testing.T, h *harness) {
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	const waited = 300 * time.Millisecond
	written := time.Now().Add(-waited)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny,
		Value: []byte("v"), Written: written}); o.err != nil {
		t.Fatal(o.err)
	}
	parent, children := recordTraceOf(t, h, "send orders")
	if got, want := spanNames(children), []string{"read", "append", "drain", "doSend", "completedSend", "completedReceive", "callback"}; !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	read := children[0]
	if !read.StartTime().Equal(time.Unix(0, written.UnixNano())) || !read.EndTime().Equal(parent.StartTime()) {
		t.Fatalf("read %v - %v, want %v - the send span's start %v", read.StartTime(), read.EndTime(), written, parent.StartTime())
	}
	if d := read.EndTime().Sub(read.StartTime()); d < waited {
		t.Fatalf("read lasts %v, want at least %v", d, waited)
	}
	checkTiling(t, parent, children[1:])

	dest := attribute.String(AttrMessagingDestinationName, "orders")
	rp := histogramPoint(t, h.reader, MetricStageDuration, attribute.NewSet(attribute.String(AttrStage, StageRead), dest))
	ap := histogramPoint(t, h.reader, MetricRecordAge, attribute.NewSet(dest))
	if rp.Count != 1 || rp.Sum < waited.Seconds() || ap.Count != 1 || ap.Sum < rp.Sum {
		t.Fatalf("read stage: %d records, %.3f s; age: %d records, %.3f s; want 1 each, read >= %v, age >= read",
			rp.Count, rp.Sum, ap.Count, ap.Sum, waited)
	}
	if id := parent.SpanContext().TraceID(); len(ap.Exemplars) != 1 || !bytes.Equal(ap.Exemplars[0].TraceID, id[:]) {
		t.Fatalf("age exemplars %+v, want the record's trace", ap.Exemplars)
	}
}

// Untraced records are counted per batch: the read stage for every record with a Written
// time, the age only for those acknowledged; records without one are in neither.
func TestReadStageAndAgeOfUntracedRecords(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	c := newKfake(t, "orders", "denied")
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if producesTo(r, "denied") {
			return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
		}
		return nil, nil, false
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	written := time.Now().Add(-2 * time.Second)
	for _, r := range []*producer.Record{
		{Topic: "orders", Value: []byte("a"), Written: written},
		{Topic: "orders", Value: []byte("b"), Written: written.Add(time.Second)},
		{Topic: "orders", Value: []byte("c")}, // no Written: neither histogram
		{Topic: "denied", Value: []byte("d"), Written: written},
	} {
		r.Partition = producer.PartitionAny
		o := sendOne(t, p, context.Background(), r)
		if (o.err != nil) != (r.Topic == "denied") {
			t.Fatalf("record to %s: %v", r.Topic, o.err)
		}
	}
	stage := func(topic string) attribute.Set {
		return attribute.NewSet(attribute.String(AttrStage, StageRead), attribute.String(AttrMessagingDestinationName, topic))
	}
	rp := histogramPoint(t, h.reader, MetricStageDuration, stage("orders"))
	ap := histogramPoint(t, h.reader, MetricRecordAge, attribute.NewSet(attribute.String(AttrMessagingDestinationName, "orders")))
	if rp.Count != 2 || rp.Sum < 3 || ap.Count != 2 || ap.Sum < rp.Sum {
		t.Fatalf("orders: read stage %d records %.3f s, age %d records %.3f s; want 2 and 2, read >= 3 s (2 s + 1 s), age >= read",
			rp.Count, rp.Sum, ap.Count, ap.Sum)
	}
	if min, ok := ap.Min.Value(); !ok || min < 1 {
		t.Fatalf("orders: youngest age %v, want >= 1 s", ap.Min)
	}
	if dp := histogramPoint(t, h.reader, MetricStageDuration, stage("denied")); dp.Count != 1 {
		t.Fatalf("denied: read stage of %d records, want 1 (counted though it failed)", dp.Count)
	}
	if hs := h.obs.Status().RecordAge; hs.Count != 2 || hs.Quantile(0.5) < 1 {
		t.Fatalf("Status().RecordAge: %d records, p50 %.3f s; want 2, >= 1 s", hs.Count, hs.Quantile(0.5))
	}
}

func TestAgeHistogramQuantileAndSince(t *testing.T) {
	h := AgeHistogram{Bounds: []float64{1, 2, 4}, Counts: []uint64{0, 10, 0, 0}, Count: 10, Sum: 15}
	if q := h.Quantile(0.5); q != 1.5 {
		t.Fatalf("p50 of 10 in (1, 2] = %v, want 1.5 (linear within the bucket)", q)
	}
	later := AgeHistogram{Bounds: h.Bounds, Counts: []uint64{0, 10, 0, 5}, Count: 15, Sum: 65}
	d := later.Since(h)
	if d.Count != 5 || d.Sum != 50 || d.Quantile(0.99) != 4 {
		t.Fatalf("since: %+v, p99 %v; want 5 above the last bound, answered by it (4)", d, d.Quantile(0.99))
	}
	if q := (AgeHistogram{}).Quantile(0.5); q == q {
		t.Fatalf("empty: %v, want NaN", q)
	}
}
