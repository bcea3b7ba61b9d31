package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/accumulator"
)

// recordTrace is a traced record's token: its `send {topic}` span's identity, the moment Send
// was called and the moment the record went into its batch. Every span of the record is made
// when the record completes (RecordDone), from the timestamps its batch kept, with explicit
// start and end times.
//
// With a span processor (ObserverConfig.SpanProcessor, which Setup gives) the spans are built
// directly as finished RecordSpans and handed to it: no SDK span lives while the record is in
// flight, and Setup's exporter encodes them straight to OTLP. Without one they
// go through the tracer: the send span is started at Send, its children at completion.
type recordTrace struct {
	o     *ProducerObserver
	ctx   context.Context // carries the send span's context: exemplars, and the tracer's children
	start time.Time
	// written is the record's Record.Written (zero: not known), the start of its read stage.
	written time.Time
	// appended is written under the partition deque's lock (or by Send, for a record that
	// failed there) before the sender can see the record, and read when it completes.
	appended time.Time

	// Direct path.
	topic  string
	sc     trace.SpanContext // the send span's
	parent trace.SpanContext // the log line's, when it carried one
	extra  sendExtra
	// kind is the send span's: PRODUCER when its context is the record's creation context,
	// CLIENT when the record carries one of its own or its context never reached the record
	// (a slow record, traced at its callback). links holds that creation context, if any.
	kind  trace.SpanKind
	links []trace.Link

	// Tracer path.
	span trace.Span
}

var _ accumulator.RecordTrace = (*recordTrace)(nil)

// maxEndAttrs is how many attributes RecordDone adds to the send span at most: its scratch
// list has room for them.
const maxEndAttrs = 6

// newRecordTrace starts a record's trace at start: its send span, of kind and with links, has
// a context that is a child of parent (the log line's span, or invalid) in trace traceID, or,
// on the tracer path, what the tracer makes of ctx. It returns nil when the tracer records
// nothing.
func (o *ProducerObserver) newRecordTrace(ctx context.Context, parent trace.SpanContext, traceID trace.TraceID,
	topic string, start time.Time, extra sendExtra, kind trace.SpanKind, links []trace.Link,
) *recordTrace {
	if o.sink != nil {
		if parent.IsValid() {
			traceID = parent.TraceID()
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: newSpanID(),
			TraceFlags: trace.FlagsSampled, TraceState: parent.TraceState()})
		return &recordTrace{o: o, ctx: trace.ContextWithSpanContext(context.Background(), sc),
			start: start, topic: topic, sc: sc, parent: parent, extra: extra, kind: kind, links: links}
	}
	ta := o.topic(topic)
	spanCtx, span := o.tracer.Start(markDecided(ctx), ta.sendName, trace.WithSpanKind(kind), trace.WithTimestamp(start),
		trace.WithAttributes(o.sendAttrs(ta, &extra, 0)...), trace.WithLinks(links...))
	if !span.SpanContext().IsValid() || !span.IsRecording() {
		// A provider that records nothing (a no-op one, or a sampler that overrode ours).
		span.End()
		return nil
	}
	return &recordTrace{o: o, ctx: spanCtx, start: start, sc: span.SpanContext(), span: span, kind: kind, links: links}
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

// Appended notes when the record went into its batch: the end of the append stage.
func (t *recordTrace) Appended(_ *accumulator.ProducerBatch, at time.Time) { t.appended = at }

// RecordDone makes the stage spans and ends the send span. The children tile the parent:
// each starts where the previous one ended, so their durations add up to the parent's.
//
//	append [Send, in batch] then, per attempt, drain [.., drained] doSend [.., queued]
//	completedSend [.., written] completedReceive [.., received]; callback [.., callback returned]
//
// Each end is stamped where it happens (accumulator.Attempt says by whom): drained is the
// sender iteration that drained the batch, queued the framed request handed to its connection
// (doSend: closing the batch, building and encoding the request), written the return of the
// writer goroutine's write of its last byte, received the reader goroutine's read of the
// response's last byte; so callback holds the sender's taking the response up to the
// record's callback returning.
//
// A record that completed without an answer to its last drain (delivery timeout, close) gets
// a drain up to then, or, if a request carrying it was still in flight, a drain to that
// request's drain and a completedReceive that ends in the failure. A record that failed in
// Send has only append and callback. The network client keeps drained <= queued <= written
// <= received; a stage that would still end before it starts (a wall clock stepped between
// two readings) is clamped to zero length rather than overlap its neighbour.
func (t *recordTrace) RecordDone(b *accumulator.ProducerBatch, md accumulator.RecordMetadata, err error, callbacksStart, callbackEnd time.Time) {
	// Wall-clock times only (Round(0) drops the monotonic reading): some timestamps come from a
	// batch's records as Unix nanoseconds, and durations mixing the two kinds would not add up.
	scratch := recordScratchPool.Get().(*recordScratch)
	tr := tiler{at: t.start.Round(0), stages: scratch.stages[:0]}
	if w := t.written.Round(0); !w.IsZero() {
		// The one stage outside the send span: the line waited before Send was called.
		// A written time after Send (a line's own timestamp ahead of this clock) makes it empty.
		if w.Before(tr.at) {
			tr.at = w
		}
		tr.child(SpanRead, t.start, nil)
	}
	appended := t.appended
	if appended.IsZero() {
		appended = callbacksStart
	}
	tr.child(SpanAppend, appended, nil)
	if b != nil {
		hist := b.AttemptHistory()
		for i, a := range hist {
			attempt := attemptAttrs(i + 1)
			tr.childList(SpanDrain, a.Drained, nil, attempt)
			// The request's attributes go on its doSend span only: the two stages after it
			// belong to the same request (the same attempt), and every attribute is paid for
			// again in each export (BenchmarkSendTracing/100%+export: ~30 µs a record with the
			// three stages repeating them and the send span's partition, ~20 without).
			tr.childList(SpanDoSend, a.Queued, nil, t.o.requestAttrs(i+1, &a))
			tr.childList(SpanCompletedSend, a.Written, nil, attempt)
			tr.childList(SpanCompletedReceive, a.Received, a.Err, attempt)
		}
		// b.Attempts counts re-enqueues: as many as the history means the last attempt was
		// retried, so the record was queued (or in flight again) when it completed.
		if len(hist) == 0 || b.Attempts >= len(hist) {
			attempt := attemptAttrs(len(hist) + 1)
			var lastDrain time.Time
			if len(hist) > 0 {
				lastDrain = hist[len(hist)-1].Drained
			}
			if b.Drained.After(lastDrain) {
				tr.childList(SpanDrain, b.Drained, nil, attempt)
				tr.childList(SpanCompletedReceive, callbacksStart, err, attempt)
			} else {
				tr.childList(SpanDrain, callbacksStart, nil, attempt)
			}
		}
	}
	tr.child(SpanCallback, callbackEnd, nil)

	// What is known only once the record is in a batch: its partition, the leader the batch
	// went to (server.address, server.port: the broker's advertised address), its offset, and
	// the cluster id (a producer's first record is sent before any metadata response). The
	// direct path makes the span here, so they are there when it is made.
	end := scratch.end[:0]
	if id := t.o.clusterID.Load(); id != nil {
		end = append(end, *id)
	}
	if md.Partition >= 0 {
		end = append(end, attribute.String(AttrMessagingPartitionID, strconv.Itoa(int(md.Partition))))
	}
	var pa *partitionAttrs
	if b != nil {
		pa = t.o.partition(t.o.topic(b.TopicPartition.Topic), b.TopicPartition.Partition, b.Node)
		if pa.addr != nil {
			end = append(end, pa.addr.kvs[:]...)
		}
	}
	if md.Offset >= 0 {
		end = append(end, attribute.Int64(AttrMessagingKafkaOffset, md.Offset))
	}
	if err != nil {
		end = append(end, attribute.String(AttrErrorType, ErrorType(err)))
	}
	if b != nil {
		// The record's end-to-end latency, recorded in its span's context so the histogram
		// keeps the trace id as an exemplar: a dashboard's outlier links to this trace.
		// (BatchDone records the untraced records; one that failed in Send, Appended.)
		op := pa.opOK
		if err != nil {
			op = pa.failure(t.o, ErrorType(err)).op
		}
		op.record(t.ctx, callbackEnd.Sub(t.start))
		if !t.written.IsZero() {
			ta := t.o.topic(b.TopicPartition.Topic)
			ta.read.record(t.ctx, max(t.start.Sub(t.written), 0))
			if err == nil {
				ta.age.record(t.ctx, max(callbacksStart.Sub(t.written), 0))
			}
		}
	}
	// The send span ends with the callback stage, never before its start.
	if t.span != nil {
		t.emitWithTracer(tr.stages, end, err, tr.at)
	} else {
		t.emit(tr.stages, end, err, tr.at)
	}
	clear(tr.stages)
	clear(end)
	scratch.stages, scratch.end = tr.stages[:0], end[:0]
	recordScratchPool.Put(scratch)
}

// recordScratch is what RecordDone lays a record's stages and its send span's last attributes
// out in: the spans are built from them (their values copied), so nothing keeps them after.
type recordScratch struct {
	stages []stage
	end    []attribute.KeyValue
}

var recordScratchPool = sync.Pool{New: func() any {
	return &recordScratch{stages: make([]stage, 0, 8), end: make([]attribute.KeyValue, 0, maxEndAttrs)} // one attempt: 6 stages
}}

// requestAttrs returns the attributes of attempt n's doSend, a's request's, with their
// encoding. Every record of a batch attempt has the same ones, so the last list made is kept
// and shared (read only, as sharedAttempts): a batch's records complete one after the other.
// The list is reused only when every value it holds is the same.
func (o *ProducerObserver) requestAttrs(n int, a *accumulator.Attempt) attrList {
	key := requestKey{attempt: n, node: a.Node, correlation: a.CorrelationID, records: a.Records, bytes: a.Bytes, version: a.APIVersion}
	if last := o.lastRequest.Load(); last != nil && last.key == key {
		return last.attrs
	}
	kvs := []attribute.KeyValue{attribute.Int(AttrAttempt, n),
		attribute.Int(AttrNodeID, int(a.Node)),
		attribute.Int(AttrMessagingBatchCount, a.Records),
		attribute.Int(AttrBatchBytes, a.Bytes),
		attribute.Int(AttrCorrelationID, int(a.CorrelationID)),
		attribute.Int(AttrAPIVersion, int(a.APIVersion))}
	r := &requestAttrs{key: key, attrs: attrList{kvs: kvs, enc: newAttrBlock(kvs)}}
	o.lastRequest.Store(r)
	return r.attrs
}

// requestKey is every value a doSend's attributes hold.
type requestKey struct {
	attempt, records, bytes int
	node, correlation       int32
	version                 int16
}

// requestAttrs is a doSend's attribute list with the values it was made from.
type requestAttrs struct {
	key   requestKey
	attrs attrList
}

// recordSpansPool holds the slices a record's spans are built in: the processors copy what
// they keep, so one slice serves record after record.
var recordSpansPool = sync.Pool{New: func() any { s := make([]RecordSpan, 0, 8); return &s }}

// emit hands the record's spans, finished, to the span processors, all at once: the stages,
// then the send span.
func (t *recordTrace) emit(stages []stage, endAttrs []attribute.KeyValue, err error, end time.Time) {
	ps := recordSpansPool.Get().(*[]RecordSpan)
	spans := (*ps)[:0]
	traceID, flags, sendID := t.sc.TraceID(), t.sc.TraceFlags(), t.sc.SpanID()
	var state string
	if ts := t.sc.TraceState(); ts.Len() > 0 {
		state = ts.String()
	}
	for _, s := range stages {
		spans = append(spans, RecordSpan{
			TraceID: traceID, SpanID: newSpanID(), ParentSpanID: sendID, Flags: flags, TraceState: state,
			Name: s.name, Kind: trace.SpanKindInternal, Start: s.start.UnixNano(), End: s.end.UnixNano(),
			Attributes: s.attrs, encoded: s.enc,
		})
		if s.err != nil {
			rs := &spans[len(spans)-1]
			rs.Attributes = append(rs.Attributes[:len(rs.Attributes):len(rs.Attributes)], attribute.String(AttrErrorType, ErrorType(s.err)))
			rs.Status, rs.StatusMessage = codes.Error, s.err.Error()
		}
	}
	// The send span's attributes start with its topic's (sendAttrs), encoded once for them.
	ta := t.o.topic(t.topic)
	send := RecordSpan{
		TraceID: traceID, SpanID: sendID, ParentSpanID: t.parent.SpanID(), ParentRemote: t.parent.IsRemote(),
		Flags: flags, TraceState: state, Name: ta.sendName, Kind: t.kind, Links: recordLinks(t.links),
		Start: t.start.Round(0).UnixNano(), End: end.UnixNano(), Attributes: append(t.o.sendAttrs(ta, &t.extra, len(endAttrs)), endAttrs...),
		encoded: ta.spanEnc,
	}
	if err != nil {
		send.Status, send.StatusMessage = codes.Error, err.Error()
	}
	spans = append(spans, send)
	t.o.sink.OnEndRecordSpans(spans)
	clear(spans) // the attribute slices belong to the processors now
	*ps = spans[:0]
	recordSpansPool.Put(ps)
}

// recordLinks converts the send span's links (its creation context, when the record carries
// one) for a RecordSpan.
func recordLinks(links []trace.Link) []RecordLink {
	if len(links) == 0 {
		return nil
	}
	out := make([]RecordLink, len(links))
	for i, l := range links {
		sc := l.SpanContext
		out[i] = RecordLink{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: sc.TraceFlags(),
			Remote: sc.IsRemote(), Attributes: l.Attributes}
		if ts := sc.TraceState(); ts.Len() > 0 {
			out[i].TraceState = ts.String()
		}
	}
	return out
}

// emitWithTracer makes the stage spans with the tracer, as children of the send span started
// at Send, and ends that.
func (t *recordTrace) emitWithTracer(stages []stage, endAttrs []attribute.KeyValue, err error, end time.Time) {
	startStages(t.o.tracer, t.ctx, stages)
	t.span.SetAttributes(endAttrs...)
	if err != nil {
		t.span.SetStatus(codes.Error, err.Error())
	}
	t.span.End(trace.WithTimestamp(end))
}

// startStages makes each stage a span with tracer, a child of the span in ctx.
func startStages(tracer trace.Tracer, ctx context.Context, stages []stage) {
	for _, s := range stages {
		_, sp := tracer.Start(ctx, s.name, trace.WithTimestamp(s.start), trace.WithAttributes(s.attrs...))
		if s.err != nil {
			sp.SetAttributes(attribute.String(AttrErrorType, ErrorType(s.err)))
			sp.SetStatus(codes.Error, s.err.Error())
		}
		sp.End(trace.WithTimestamp(s.end))
	}
}

// sharedAttempts are the attribute lists of the first attempts' stages, made and encoded once:
// a stage's attributes are only read (a stage that adds error.type copies them first).
var sharedAttempts = func() (l [8]attrList) {
	for i := range l {
		kvs := []attribute.KeyValue{attribute.Int(AttrAttempt, i+1)}
		l[i] = attrList{kvs: kvs, enc: newAttrBlock(kvs)}
	}
	return l
}()

// attemptAttrs returns the attributes of attempt n's drain, completedSend and completedReceive.
func attemptAttrs(n int) attrList {
	if n-1 < len(sharedAttempts) {
		return sharedAttempts[n-1]
	}
	return attrList{kvs: []attribute.KeyValue{attribute.Int(AttrAttempt, n)}}
}

// stage is one child span of a record's send span.
type stage struct {
	name       string
	start, end time.Time
	err        error
	attrs      []attribute.KeyValue
	enc        *attrBlock // attrs' encoding, when they are a shared list (attrList)
}

// tiler lays out consecutive stages: each starts where the previous ended.
type tiler struct {
	at     time.Time
	stages []stage
}

// child adds a stage from the current position to end (clamped: never before the position,
// and a zero end, a stage not reached, makes it zero length), with error.type and an error
// status when err is set.
func (t *tiler) child(name string, end time.Time, err error, attrs ...attribute.KeyValue) {
	t.childList(name, end, err, attrList{kvs: attrs})
}

// childList is child with an attribute list that may carry its encoding.
func (t *tiler) childList(name string, end time.Time, err error, attrs attrList) {
	end = end.Round(0)
	if end.IsZero() || end.Before(t.at) {
		end = t.at
	}
	t.stages = append(t.stages, stage{name: name, start: t.at, end: end, err: err, attrs: attrs.kvs, enc: attrs.enc})
	t.at = end
}
