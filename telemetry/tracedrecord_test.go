package telemetry

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// capturingExporter keeps deep copies of the spans it is given: the processor reuses their
// attribute lists once an export returns. release, when set, holds every export until closed.
type capturingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	spans   []RecordSpan
	calls   []int // each export's span count
}

func (e *capturingExporter) Export(ctx context.Context, spans []RecordSpan) error {
	if e.release != nil {
		select {
		case <-e.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, len(spans))
	for _, s := range spans {
		s.Attributes = slices.Clone(s.Attributes)
		e.spans = append(e.spans, s)
	}
	return nil
}

func (*capturingExporter) Shutdown(context.Context) error { return nil }

func (e *capturingExporter) captured() []RecordSpan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.spans)
}

// TestTracedRecordsExportedAsProcessorsSeeThem: a traced record handed to the exporter whole,
// its spans made on the export goroutine (in a reused arena), exports the same spans as a
// processor that takes spans gets from the sender goroutine: names, parents, kinds, times,
// attributes and status, for a record retried once (an error stage, two attempts), records
// after it whose spans reuse the arena, and three records of one request (sharing its list).
func TestTracedRecordsExportedAsProcessorsSeeThem(t *testing.T) {
	exp := &capturingExporter{}
	ep := newExportProcessor(exp, 1<<12, exportOptions{batch: 1 << 11, delay: time.Hour, timeout: time.Minute}, nil)
	defer ep.Shutdown(context.Background())
	h := newHarnessWith(t, sdktrace.AlwaysSample(), ObserverConfig{})
	sink := newRecordSink(nil, fanOutProcessor{ep, h.spans})
	if len(sink.records) != 1 || len(sink.sdk) != 1 {
		t.Fatalf("sink: %d taking records, %d SDK processors; want the exporter and the recorder", len(sink.records), len(sink.sdk))
	}
	h.obs.sink = sink

	c := newKfake(t, "orders")
	var faults atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		faults.Add(1)
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true // once: not kept
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for i, key := range []string{"k1", "k2", "k3"} {
		o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Key: []byte(key), Value: []byte("v")})
		if o.err != nil {
			t.Fatalf("record %d: %v", i, o.err)
		}
	}
	// Three records in one request: the second and third share the first's doSend list.
	outcomes := make([]*outcome, 3)
	for i := range outcomes {
		outcomes[i] = newOutcome()
		_ = p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, outcomes[i].callback)
	}
	for _, o := range outcomes {
		o.wait(t)
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ep.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := exp.captured()
	traces := map[[16]byte]bool{}
	for _, g := range got {
		traces[g.TraceID] = true
	}
	var want []sdktrace.ReadOnlySpan // the records' spans: not the connections' or Metadata's
	for _, s := range h.spans.Ended() {
		if traces[s.SpanContext().TraceID()] {
			want = append(want, s)
		}
	}
	if n := 7 + 4 + 7 + 7 + 3*7; len(got) != len(want) || len(got) != n {
		t.Fatalf("exported %d spans, the recorder got %d; want %d", len(got), len(want), n)
	}
	correlations := map[int64]int{}
	for _, g := range got {
		if g.Name == SpanDoSend {
			for _, kv := range g.Attributes {
				if kv.Key == AttrCorrelationID {
					correlations[kv.Value.AsInt64()]++
				}
			}
		}
	}
	if len(correlations) != 5 {
		t.Fatalf("doSend spans of %d requests (%v), want 5: one per record sent alone, twice for the retried one, one for the three together", len(correlations), correlations)
	}
	byID := map[[8]byte]sdktrace.ReadOnlySpan{}
	for _, s := range want {
		byID[s.SpanContext().SpanID()] = s
	}
	for _, g := range got {
		w, ok := byID[g.SpanID]
		if !ok {
			// Stage span ids are drawn where the spans are made: match stages by parent and name.
			for _, s := range want {
				if s.Parent().SpanID() == g.ParentSpanID && s.Name() == g.Name && s.StartTime().UnixNano() == g.Start {
					w, ok = s, true
				}
			}
		}
		if !ok {
			t.Fatalf("exported span %s (parent %s) not among the recorder's", g.Name, g.ParentSpanID)
		}
		if w.SpanContext().TraceID() != g.TraceID || w.Parent().SpanID() != g.ParentSpanID || w.SpanKind() != g.Kind ||
			w.StartTime().UnixNano() != g.Start || w.EndTime().UnixNano() != g.End || w.Status().Code != g.Status ||
			w.Status().Description != g.StatusMessage {
			t.Errorf("span %s: exported %+v, recorder %v %v %v..%v %v", g.Name, g, w.Parent().SpanID(), w.SpanKind(), w.StartTime(), w.EndTime(), w.Status())
		}
		if !slices.EqualFunc(g.Attributes, w.Attributes(), func(a, b attribute.KeyValue) bool { return a == b }) {
			t.Errorf("span %s: exported attributes %v, recorder %v", g.Name, g.Attributes, w.Attributes())
		}
	}
}

// TestTracedRecordDroppedWhole: with the exporter stuck, a record whose spans do not fit in
// what the processor holds is dropped whole, every one of its spans counted, never in part.
func TestTracedRecordDroppedWhole(t *testing.T) {
	exp := &capturingExporter{release: make(chan struct{})}
	const limit = 10 // one record of 7 spans fits; a second does not
	ep := newExportProcessor(exp, limit, exportOptions{batch: limit, delay: time.Hour, timeout: time.Minute}, nil)
	h := newHarnessWith(t, sdktrace.AlwaysSample(), ObserverConfig{})
	h.obs.sink = newRecordSink(nil, ep)
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for i := range 3 {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
			t.Fatalf("record %d: %v", i, o.err)
		}
	}
	if got := ep.Dropped(); got != 14 {
		t.Fatalf("%d spans dropped, want 14: two records of 7, whole", got)
	}
	close(exp.release)
	if err := ep.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(exp.captured()); got != 7 {
		t.Fatalf("%d spans exported, want the 7 of the record that fitted", got)
	}
}

// TestTracedRecordsExportedABatchAtATime: the records' spans are made and exported a batch at a
// time, and a record's spans are never split between two requests when they fit in one.
func TestTracedRecordsExportedABatchAtATime(t *testing.T) {
	exp := &capturingExporter{}
	const batch = 10 // a record of 7 spans fits; two do not
	ep := newExportProcessor(exp, 1<<12, exportOptions{batch: batch, delay: time.Hour, timeout: time.Minute}, nil)
	h := newHarnessWith(t, sdktrace.AlwaysSample(), ObserverConfig{})
	h.obs.sink = newRecordSink(nil, ep)
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for i := range 5 {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
			t.Fatalf("record %d: %v", i, o.err)
		}
	}
	if err := ep.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if !slices.Equal(exp.calls, []int{7, 7, 7, 7, 7}) {
		t.Fatalf("exports of %v spans, want 5 of 7: one record each", exp.calls)
	}
}
