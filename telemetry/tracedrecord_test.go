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
// attribute lists and links once an export returns. release, when set, holds every export until closed.
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
		s.Attributes, s.Links = slices.Clone(s.Attributes), slices.Clone(s.Links)
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

// TestBatchStagesExportedOncePerBatchAttempt: with BatchStages, the records of a batch retried
// once export its stages once: the first record to complete has all eleven of its spans
// (append, two attempts of four stages, the callback, the send span), each other record its
// append, callback and send span, which links to the first record's two doSend spans, one per
// request, by their ids in its trace; their callback starts where the batch's stages ended. The
// sender goroutine's processors (the page's form) still get every stage of every record.
func TestBatchStagesExportedOncePerBatchAttempt(t *testing.T) {
	exp := &capturingExporter{}
	ep := newExportProcessor(exp, 1<<12, exportOptions{batch: 1 << 11, delay: time.Hour, timeout: time.Minute}, nil)
	defer ep.Shutdown(context.Background())
	h := newHarnessWith(t, sdktrace.AlwaysSample(), ObserverConfig{BatchStages: true})
	h.obs.sink = newRecordSink(nil, fanOutProcessor{ep, h.spans})

	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, func(cfg *producer.Config) { cfg.LingerMs = 300 })
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("warm")}); o.err != nil {
		t.Fatal(o.err)
	}
	var faults atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		faults.Add(1)
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true // once: not kept
	})
	outcomes := make([]*outcome, 3)
	for i := range outcomes {
		outcomes[i] = newOutcome()
		if err := p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, outcomes[i].callback); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range outcomes {
		o.wait(t)
		if o.err != nil {
			t.Fatalf("record %d: %v", i, o.err)
		}
		if o.md.Offset != outcomes[0].md.Offset+int64(i) {
			t.Fatalf("record %d at offset %d, record 0 at %d: not one batch", i, o.md.Offset, outcomes[0].md.Offset)
		}
	}
	if faults.Load() != 1 {
		t.Fatalf("%d produce requests refused, want 1", faults.Load())
	}
	if err := p.Flush(context.Background()); err != nil { // the batch completed: its traces too
		t.Fatal(err)
	}
	if err := ep.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	byTrace := map[[16]byte][]RecordSpan{}
	var order [][16]byte // traces in export order: the owner's first
	for _, s := range exp.captured() {
		if _, ok := byTrace[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	if len(order) != 4 {
		t.Fatalf("spans of %d traces exported, want 4 (the warm-up record and the batch's three)", len(order))
	}
	names := func(spans []RecordSpan) (out []string) {
		for _, s := range spans {
			out = append(out, s.Name)
		}
		return out
	}
	owner := byTrace[order[1]]
	wantOwner := []string{SpanAppend, SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive,
		SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, SpanCallback, "send orders"}
	if got := names(owner); !slices.Equal(got, wantOwner) {
		t.Fatalf("the first record's spans: %v, want %v", got, wantOwner)
	}
	doSends := map[[8]byte]RecordSpan{}
	for _, s := range owner {
		if s.Name == SpanDoSend {
			doSends[s.SpanID] = s
		}
	}
	for _, tid := range order[2:] {
		spans := byTrace[tid]
		if got, want := names(spans), []string{SpanAppend, SpanCallback, "send orders"}; !slices.Equal(got, want) {
			t.Fatalf("a later record's spans: %v, want %v", got, want)
		}
		send, callback := spans[2], spans[1]
		if len(send.Links) != 2 {
			t.Fatalf("send span links %+v, want two: the owner's doSend of each attempt", send.Links)
		}
		for i, l := range send.Links {
			d, ok := doSends[l.SpanID]
			if !ok || l.TraceID != order[1] || l.Flags != owner[0].Flags {
				t.Fatalf("link %d to %s/%s: not a doSend of the first record's trace %x", i, l.TraceID, l.SpanID, order[1])
			}
			if d.SpanID != owner[2+4*i].SpanID {
				t.Fatalf("link %d goes to the doSend of another attempt", i)
			}
			if len(l.Attributes) != 1 || l.Attributes[0] != attribute.String(AttrTraceLink, TraceLinkBatch) {
				t.Fatalf("link %d attributes %v", i, l.Attributes)
			}
		}
		if lastReceive := owner[8]; callback.Start < lastReceive.End {
			t.Fatalf("callback starts at %d, before the batch's last completedReceive ended (%d)", callback.Start, lastReceive.End)
		}
		if callback.End > send.End || spans[0].Start != send.Start {
			t.Fatalf("stages outside their send span: %+v in %+v", spans[:2], send)
		}
	}
	// The spans made on the sender goroutine, for processors that take them: every record has
	// every stage.
	full := map[[16]byte]int{}
	for _, s := range h.spans.Ended() {
		full[s.SpanContext().TraceID()]++
	}
	for _, tid := range order[1:] {
		if full[tid] != len(wantOwner) {
			t.Fatalf("trace %x: %d spans for the sender goroutine's processors, want %d", tid, full[tid], len(wantOwner))
		}
	}
}
