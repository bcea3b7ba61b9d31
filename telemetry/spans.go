package telemetry

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
	"github.com/kafkatrail/kafkatrail/producer"
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
	start time.Time
	// written is the record's Record.Written (zero: not known), the start of its read stage.
	written time.Time
	// appended is written under the partition deque's lock (or by Send, for a record that
	// failed there) before the sender can see the record, and read when it completes.
	appended time.Time

	topic string
	sc    trace.SpanContext // the send span's
	// headers and traceparent hold the record's headers with its traceparent (and tracestate)
	// when it had few (the agent's are source.host and source.path): StartSend's headers then
	// live in the token, not in two allocations of their own.
	headers     [4]producer.Header
	traceparent [traceparentLen]byte

	// Direct path.
	parent trace.SpanContext // the log line's, when it carried one
	extra  sendExtra
	// kind is the send span's: PRODUCER when its context is the record's creation context,
	// CLIENT when the record carries one of its own or its context never reached the record
	// (a slow record, traced at its callback). links holds that creation context, if any.
	kind  trace.SpanKind
	links []trace.Link

	// Tracer path.
	ctx  context.Context // the send span's: its children's parent
	span trace.Span
}

var _ accumulator.RecordTrace = (*recordTrace)(nil)

// newRecordTrace starts a record's trace at start: its send span, of kind and with links, has
// a context that is a child of parent (the log line's span, or invalid) in trace traceID, or,
// on the tracer path, what the tracer makes of ctx. Its tracestate is state, or the parent's
// when state is empty. It returns nil when the tracer records nothing.
func (o *ProducerObserver) newRecordTrace(ctx context.Context, parent trace.SpanContext, traceID trace.TraceID,
	state trace.TraceState, topic string, start time.Time, extra sendExtra, kind trace.SpanKind, links []trace.Link,
) *recordTrace {
	if o.sink != nil {
		if parent.IsValid() {
			traceID = parent.TraceID()
		}
		if state.Len() == 0 {
			state = parent.TraceState()
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: newSpanID(),
			TraceFlags: trace.FlagsSampled, TraceState: state})
		return &recordTrace{o: o,
			start: start, topic: topic, sc: sc, parent: parent, extra: extra, kind: kind, links: links}
	}
	ta := o.topic(topic)
	spanCtx, span := o.tracer.Start(markDecided(ctx, state), ta.sendName, trace.WithSpanKind(kind), trace.WithTimestamp(start),
		trace.WithAttributes(o.sendAttrs(ta, &extra)...), trace.WithLinks(links...))
	if !span.SpanContext().IsValid() || !span.IsRecording() {
		// A provider that records nothing (a no-op one, or a sampler that overrode ours).
		span.End()
		return nil
	}
	return &recordTrace{o: o, ctx: spanCtx, start: start, topic: topic, sc: span.SpanContext(), span: span, kind: kind, links: links}
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

// RecordDone records the record's latency with its send span's context (the histograms keep
// its trace id as an exemplar), and hands the record, complete, to the span processors: as a
// TracedRecord, values copied from its batch, to those that take one (Setup's exporter,
// which makes and encodes the spans on its own goroutine), and as finished spans (made here,
// by TracedRecord.appendSpans) to the others. On the tracer path the stage spans are started
// with the tracer, as children of the send span started at Send, which ends here.
func (t *recordTrace) RecordDone(b *accumulator.ProducerBatch, md accumulator.RecordMetadata, err error, callbacksStart, callbackEnd time.Time) {
	o := t.o
	ta := o.topic(t.topic) // the batch's topic too
	var pa *partitionAttrs
	if b != nil {
		pa = o.partition(ta, b.TopicPartition.Partition, b.Node)
		// The record's end-to-end latency, recorded with its span context so the histogram
		// keeps the trace id as an exemplar: a dashboard's outlier links to this trace.
		// (BatchDone records the untraced records; one that failed in Send, Appended.)
		op := pa.opOK
		if err != nil {
			op = pa.failure(o, ErrorType(err)).op
		}
		op.record(t.sc, callbackEnd.Sub(t.start))
		if !t.written.IsZero() {
			ta.read.record(t.sc, max(t.start.Sub(t.written), 0))
			if err == nil {
				ta.age.record(t.sc, max(callbacksStart.Sub(t.written), 0))
			}
		}
	}
	r := tracedRecordPool.Get().(*TracedRecord)
	t.complete(r, b, ta, pa, md, err, callbacksStart, callbackEnd)
	if t.span != nil {
		t.endWithTracer(r)
	} else {
		o.sink.onEndTracedRecord(r)
	}
	*r = TracedRecord{}
	tracedRecordPool.Put(r)
}

var tracedRecordPool = sync.Pool{New: func() any { return new(TracedRecord) }}

// TracedRecord is a traced record once it completed: what its spans are made of, as values
// copied from its token and its batch (whose attempt history is not kept: batches are
// reused), times in Unix nanoseconds (0: not reached). It is what the sender goroutine hands to
// a TracedRecordProcessor; Spans makes the spans. A copy is as good as the original.
type TracedRecord struct {
	o         *ProducerObserver
	ta        *topicAttrs
	pa        *partitionAttrs     // the batch's partition and leader; nil: no batch (failed in Send)
	clusterID *attribute.KeyValue // nil: not known yet
	sc        trace.SpanContext   // the send span's
	parent    trace.SpanContext   // the log line's, when it carried one
	kind      trace.SpanKind
	links     []trace.Link
	extra     sendExtra

	start, written, appended    int64
	callbacksStart, callbackEnd int64
	// batchDrained is the batch's latest drain; requeued says its last attempt was retried
	// (or none was made), so the record was queued or in flight again when it completed.
	batchDrained int64
	requeued     bool
	partition    int32 // -1: none
	offset       int64 // -1: none
	err          error
	// attempts are the batch's attempts, the first two in place, more (rare) in an allocation.
	nAttempts int
	first     [2]attemptStamp
	more      []attemptStamp
	// stageBase is the span id of the record's first stage; stage i's is stageBase+i, so a
	// record of the same batch attempt can link to them (batchOwner) without a table of ids.
	stageBase uint64
	// owner, when set, is the record of the same batch whose trace carries the batch's stages
	// (ObserverConfig.BatchStages): this record's export leaves them out and links to them.
	owner batchOwner
	spans int // how many spans the export makes (appendSpans with linked)
}

// batchOwner is the traced record whose trace carries its batch's stages (drain, doSend,
// completedSend, completedReceive of every attempt, and the drain after the last) when the
// observer emits them once per batch attempt: the first traced record of the batch to
// complete. Every other traced record of the batch links its send span to the owner's doSend
// spans, one link an attempt.
type batchOwner struct {
	sc trace.SpanContext // the owner's send span's; invalid: no owner (this record is its own)
	// firstDrain is the span id of the owner's first drain stage; attempt i's doSend is
	// firstDrain+4i+1 (layout's order).
	firstDrain uint64
}

// batchKey tells one batch's completion from another's: batches are pooled, so the same
// pointer comes back, but never with the same last request.
type batchKey struct {
	b           *accumulator.ProducerBatch
	attempts    int
	node, corr  int32
	lastDrained int64
}

// attemptStamp is one attempt of a record's batch, as its stage spans need it.
type attemptStamp struct {
	drained, queued, written, received int64
	err                                error
	req                                requestKey
}

func (r *TracedRecord) attempt(i int) *attemptStamp {
	if i < len(r.first) {
		return &r.first[i]
	}
	return &r.more[i-len(r.first)]
}

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// complete fills r with the record's trace and its outcome.
func (t *recordTrace) complete(r *TracedRecord, b *accumulator.ProducerBatch, ta *topicAttrs, pa *partitionAttrs, md accumulator.RecordMetadata,
	err error, callbacksStart, callbackEnd time.Time,
) {
	*r = TracedRecord{o: t.o, ta: ta, pa: pa, clusterID: t.o.clusterID.Load(), sc: t.sc, parent: t.parent,
		kind: t.kind, links: t.links, extra: t.extra,
		start: nanos(t.start), written: nanos(t.written), appended: nanos(t.appended),
		callbacksStart: nanos(callbacksStart), callbackEnd: nanos(callbackEnd),
		partition: md.Partition, offset: md.Offset, err: err, stageBase: newStageBase()}
	r.spans = 3 // append, callback, send
	if r.written != 0 {
		r.spans++ // read
	}
	if b == nil {
		return
	}
	hist := b.AttemptHistory()
	r.nAttempts = len(hist)
	if len(hist) > len(r.first) {
		r.more = make([]attemptStamp, len(hist)-len(r.first))
	}
	for i := range hist {
		a := &hist[i]
		*r.attempt(i) = attemptStamp{drained: nanos(a.Drained), queued: nanos(a.Queued), written: nanos(a.Written),
			received: nanos(a.Received), err: a.Err,
			req: requestKey{attempt: i + 1, node: a.Node, correlation: a.CorrelationID, records: a.Records, bytes: a.Bytes, version: a.APIVersion}}
	}
	batchSpans := 4 * len(hist)
	r.batchDrained = nanos(b.Drained)
	// b.Attempts counts re-enqueues: as many as the history means the last attempt was
	// retried, so the record was queued (or in flight again) when it completed.
	if r.requeued = len(hist) == 0 || b.Attempts >= len(hist); r.requeued {
		batchSpans++ // a drain
		if r.batchDrained > r.lastDrain() {
			batchSpans++ // and the completedReceive of the request in flight
		}
	}
	r.spans += batchSpans
	if t.o.batchStages && len(hist) > 0 {
		last := &hist[len(hist)-1]
		key := batchKey{b: b, attempts: len(hist), node: last.Node, corr: last.CorrelationID, lastDrained: r.batchDrained}
		if owner, ok := t.o.batchOwnerOf(key, r); ok {
			r.owner = owner
			r.spans -= batchSpans
		}
	}
}

// batchOwnerOf returns the owner of the stages of batch key when a traced record of the batch
// completed before r; else r becomes their owner and it returns false. A batch's records
// complete one after the other (BatchDone), so the last batch seen is the only one to keep.
func (o *ProducerObserver) batchOwnerOf(key batchKey, r *TracedRecord) (batchOwner, bool) {
	o.lastBatchMu.Lock()
	defer o.lastBatchMu.Unlock()
	if o.lastBatch == key {
		return o.lastBatchOwner, true
	}
	first := uint64(1) // the append
	if r.written != 0 {
		first++ // the read before it
	}
	o.lastBatch, o.lastBatchOwner = key, batchOwner{sc: r.sc, firstDrain: r.stageBase + first}
	return batchOwner{}, false
}

// newStageBase returns the span id of a record's first stage: the ids of the stages after it
// follow it, none of them zero.
func newStageBase() uint64 {
	for {
		if id := rand.Uint64(); id != 0 && id < math.MaxUint64-stageIDRoom {
			return id
		}
	}
}

// stageIDRoom is how many ids newStageBase leaves after a base: four stages an attempt, far
// more than the attempts delivery.timeout.ms allows.
const stageIDRoom = 1 << 24

// lastDrain is the last attempt's drain, 0 without one.
func (r *TracedRecord) lastDrain() int64 {
	if r.nAttempts == 0 {
		return 0
	}
	return r.attempt(r.nAttempts - 1).drained
}

// layout lays the record's stage spans out in stages and returns them with the send span's
// end. The children tile the parent: each starts where the previous one ended, so their
// durations add up to the parent's.
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
//
// With linked, the batch's stages are left out (another record's trace has them: r.owner):
// the callback then starts where the batch's stages ended, after a gap.
//
// The doSend attribute lists come from arena when it is set (the export goroutine's), else
// from the observer's shared one.
func (r *TracedRecord) layout(stages []stage, arena *spanArena, linked bool) ([]stage, int64) {
	tr := tiler{at: r.start, stages: stages}
	if r.written != 0 {
		// The one stage outside the send span: the line waited before Send was called.
		// A written time after Send (a line's own timestamp ahead of this clock) makes it empty.
		tr.at = min(r.written, tr.at)
		tr = tr.child(SpanRead, r.start, nil, attrList{})
	}
	appended := r.appended
	if appended == 0 {
		appended = r.callbacksStart
	}
	tr = tr.child(SpanAppend, appended, nil, attrList{})
	if linked {
		tr.at = max(tr.at, r.callbacksStart)
	} else if r.pa != nil {
		for i := range r.nAttempts {
			at := r.attempt(i)
			attempt := attemptAttrs(i + 1)
			tr = tr.child(SpanDrain, at.drained, nil, attempt)
			// The request's attributes go on its doSend span only: the two stages after it
			// belong to the same request (the same attempt), and every attribute is paid for
			// again in each export (BenchmarkSendTracing/100%+export measures it).
			var req attrList
			if arena != nil {
				req = arena.requestAttrs(at.req)
			} else {
				req = r.o.requestAttrs(at.req)
			}
			tr = tr.child(SpanDoSend, at.queued, nil, req)
			tr = tr.child(SpanCompletedSend, at.written, nil, attempt)
			tr = tr.child(SpanCompletedReceive, at.received, at.err, attempt)
		}
		if r.requeued {
			attempt := attemptAttrs(r.nAttempts + 1)
			if r.batchDrained > r.lastDrain() {
				tr = tr.child(SpanDrain, r.batchDrained, nil, attempt)
				tr = tr.child(SpanCompletedReceive, r.callbacksStart, r.err, attempt)
			} else {
				tr = tr.child(SpanDrain, r.callbacksStart, nil, attempt)
			}
		}
	}
	tr = tr.child(SpanCallback, r.callbackEnd, nil, attrList{})
	// The send span ends with the callback stage, never before its start.
	return tr.stages, tr.at
}

// appendEndAttrs appends what is known of the send span only once the record is in a batch:
// its partition, the leader the batch went to (server.address, server.port: the broker's
// advertised address), its offset, and the cluster id (a producer's first record is sent
// before any metadata response); and its error.type.
func (r *TracedRecord) appendEndAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if r.clusterID != nil {
		attrs = append(attrs, *r.clusterID)
	}
	if r.partition >= 0 {
		attrs = append(attrs, attribute.String(AttrMessagingPartitionID, strconv.Itoa(int(r.partition))))
	}
	if r.pa != nil && r.pa.addr != nil {
		attrs = append(attrs, r.pa.addr.kvs[:]...)
		attrs = append(attrs, r.pa.addr.peerKVs...)
	}
	if r.offset >= 0 {
		attrs = append(attrs, attribute.Int64(AttrMessagingKafkaOffset, r.offset))
	}
	if r.err != nil {
		attrs = append(attrs, attribute.String(AttrErrorType, ErrorType(r.err)))
	}
	return attrs
}

// appendSpans appends the record's spans to spans, finished: the stages, then the send span.
// Their attribute lists that are not shared ones go in arena, when it is set (the export
// goroutine's, reused once the spans are encoded); with a nil arena every record's lists are
// its own, for processors that keep them. With export, a record whose batch's stages another
// record's trace carries (r.owner) leaves them out and links to that record's doSend spans:
// the form the export sends; without, every record has all its stages (the page's waterfall).
func (r *TracedRecord) appendSpans(spans []RecordSpan, arena *spanArena, export bool) []RecordSpan {
	linked := export && r.owner.sc.IsValid()
	var buf [12]stage
	stages, end := r.layout(buf[:0], arena, linked)
	var kvs []attribute.KeyValue // the record's own lists, without an arena
	if arena != nil {
		kvs = arena.kvs
	}
	traceID, flags, sendID := r.sc.TraceID(), r.sc.TraceFlags(), r.sc.SpanID()
	var state string
	if ts := r.sc.TraceState(); ts.Len() > 0 {
		state = ts.String()
	}
	for i, s := range stages {
		var id trace.SpanID
		binary.BigEndian.PutUint64(id[:], r.stageBase+uint64(i))
		rs := RecordSpan{
			TraceID: traceID, SpanID: id, ParentSpanID: sendID, Flags: flags, TraceState: state,
			Name: s.name, Kind: trace.SpanKindInternal, Start: s.start, End: s.end,
			Attributes: s.attrs.kvs, Encoded: s.attrs.enc,
		}
		if s.err != nil {
			from := len(kvs)
			kvs = append(append(kvs, s.attrs.kvs...), attribute.String(AttrErrorType, ErrorType(s.err)))
			rs.Attributes = kvs[from:len(kvs):len(kvs)]
			rs.Status, rs.StatusMessage = codes.Error, StatusDescription(s.err)
		}
		spans = append(spans, rs)
	}
	// The send span's attributes start with its topic's (sendAttrs), encoded once for them.
	from := len(kvs)
	if kvs == nil {
		kvs = make([]attribute.KeyValue, 0, len(r.ta.spanAttrs)+r.extra.count()+maxEndAttrs)
	}
	kvs = r.appendEndAttrs(r.o.appendSendAttrs(kvs, r.ta, &r.extra))
	var links []RecordLink
	if linked {
		links = r.appendOwnerLinks(arena)
	} else {
		links = recordLinks(nil, r.links)
	}
	send := RecordSpan{
		TraceID: traceID, SpanID: sendID, ParentSpanID: r.parent.SpanID(), ParentRemote: r.parent.IsRemote(),
		Flags: flags, TraceState: state, Name: r.ta.sendName, Kind: r.kind, Links: links,
		Start: r.start, End: end, Attributes: kvs[from:len(kvs):len(kvs)], Encoded: r.ta.spanEnc,
	}
	if r.err != nil {
		send.Status, send.StatusMessage = codes.Error, StatusDescription(r.err)
	}
	if arena != nil {
		arena.kvs = kvs
	}
	return append(spans, send)
}

// appendOwnerLinks returns the links of a record whose batch's stages are in its owner's
// trace: its own (its creation context), then one to the owner's doSend of each attempt, in
// arena's links when it is set.
func (r *TracedRecord) appendOwnerLinks(arena *spanArena) []RecordLink {
	var links []RecordLink
	if arena != nil {
		links = arena.links
	}
	from := len(links)
	links = recordLinks(links, r.links)
	o := r.owner.sc
	var state string
	if ts := o.TraceState(); ts.Len() > 0 {
		state = ts.String()
	}
	for i := range r.nAttempts {
		l := RecordLink{TraceID: o.TraceID(), Flags: o.TraceFlags(), TraceState: state, Attributes: batchLinkAttrs}
		binary.BigEndian.PutUint64(l.SpanID[:], r.owner.firstDrain+4*uint64(i)+1)
		links = append(links, l)
	}
	if arena != nil {
		arena.links = links
	}
	return links[from:len(links):len(links)]
}

// batchLinkAttrs mark a link from a record's send span to the doSend of its batch in another
// record's trace.
var batchLinkAttrs = []attribute.KeyValue{attribute.String(AttrTraceLink, TraceLinkBatch)}

// spanArena is where the export goroutine makes records' spans: their attribute lists in kvs,
// reused from export to export, and the doSend list of the last request seen.
type spanArena struct {
	links []RecordLink
	kvs   []attribute.KeyValue
	// req is the list of request reqKey, made shared (encoded once) when a second record of
	// the request follows the first, as at high sampling ratios; a record alone in its request
	// (the common case at 1 %) gets its list in kvs, and nothing is allocated for it.
	reqKey requestKey
	reqSet bool
	req    attrList
}

// requestAttrs returns the doSend attribute list of request key.
func (a *spanArena) requestAttrs(key requestKey) attrList {
	if a.reqSet && a.reqKey == key {
		if a.req.enc == nil {
			kvs := appendRequestAttrs(nil, key)
			a.req = attrList{kvs: kvs, enc: otlptrace.NewAttrBlock(kvs)}
		}
		return a.req
	}
	a.reqKey, a.reqSet, a.req = key, true, attrList{}
	from := len(a.kvs)
	a.kvs = appendRequestAttrs(a.kvs, key)
	return attrList{kvs: a.kvs[from:len(a.kvs):len(a.kvs)]}
}

// reset empties the arena for the next export, keeping its storage.
func (a *spanArena) reset() {
	clear(a.kvs)
	a.kvs = a.kvs[:0]
	clear(a.links)
	a.links = a.links[:0]
	a.reqSet, a.req = false, attrList{}
}

// Spans appends the record's spans to dst, finished: its stages, then its send span. Their
// attribute lists are their own (or shared ones, never written): they may be kept. Safe for
// concurrent use, on any goroutine.
func (r *TracedRecord) Spans(dst []RecordSpan) []RecordSpan { return r.appendSpans(dst, nil, false) }

// maxEndAttrs is how many attributes appendEndAttrs adds at most.
const maxEndAttrs = 8

// endWithTracer makes the stage spans with the tracer, as children of the send span started
// at Send, and ends that.
func (t *recordTrace) endWithTracer(r *TracedRecord) {
	var buf [12]stage
	stages, end := r.layout(buf[:0], nil, false)
	startStages(t.o.tracer, t.ctx, stages)
	var attrs [maxEndAttrs]attribute.KeyValue
	t.span.SetAttributes(r.appendEndAttrs(attrs[:0])...)
	if r.err != nil {
		t.span.SetStatus(codes.Error, StatusDescription(r.err))
	}
	t.span.End(trace.WithTimestamp(time.Unix(0, end)))
}

// recordSpansPool holds the slices a record's spans are built in for the processors that take
// spans: they copy what they keep, so one slice serves record after record.
var recordSpansPool = sync.Pool{New: func() any { s := make([]RecordSpan, 0, 8); return &s }}

// recordLinks appends the send span's links (its creation context, when the record carries
// one), converted for a RecordSpan, to out.
func recordLinks(out []RecordLink, links []trace.Link) []RecordLink {
	for _, l := range links {
		sc := l.SpanContext
		rl := RecordLink{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: sc.TraceFlags(),
			Remote: sc.IsRemote(), Attributes: l.Attributes}
		if ts := sc.TraceState(); ts.Len() > 0 {
			rl.TraceState = ts.String()
		}
		out = append(out, rl)
	}
	return out
}

// startStages makes each stage a span with tracer, a child of the span in ctx.
func startStages(tracer trace.Tracer, ctx context.Context, stages []stage) {
	for _, s := range stages {
		_, sp := tracer.Start(ctx, s.name, trace.WithTimestamp(time.Unix(0, s.start)), trace.WithAttributes(s.attrs.kvs...))
		if s.err != nil {
			sp.SetAttributes(attribute.String(AttrErrorType, ErrorType(s.err)))
			sp.SetStatus(codes.Error, StatusDescription(s.err))
		}
		sp.End(trace.WithTimestamp(time.Unix(0, s.end)))
	}
}

// requestAttrs returns the attributes of a doSend, the request's, with their encoding. Every
// record of a batch attempt has the same ones, so the last list made is kept and shared (read
// only, as sharedAttempts): a batch's records are exported one after the other. The list is
// reused only when every value it holds is the same.
func (o *ProducerObserver) requestAttrs(key requestKey) attrList {
	if last := o.lastRequest.Load(); last != nil && last.key == key {
		return last.attrs
	}
	kvs := appendRequestAttrs(make([]attribute.KeyValue, 0, requestAttrCount), key)
	r := &requestAttrs{key: key, attrs: attrList{kvs: kvs, enc: otlptrace.NewAttrBlock(kvs)}}
	o.lastRequest.Store(r)
	return r.attrs
}

// requestAttrCount is how many attributes a doSend has.
const requestAttrCount = 6

// appendRequestAttrs appends the attributes of a doSend of request key.
func appendRequestAttrs(kvs []attribute.KeyValue, key requestKey) []attribute.KeyValue {
	return append(kvs, attribute.Int(AttrAttempt, key.attempt),
		attribute.Int(AttrNodeID, int(key.node)),
		attribute.Int(AttrMessagingBatchCount, key.records),
		attribute.Int(AttrBatchBytes, key.bytes),
		attribute.Int(AttrCorrelationID, int(key.correlation)),
		attribute.Int(AttrAPIVersion, int(key.version)))
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

// sharedAttempts are the attribute lists of the first attempts' stages, made and encoded once:
// a stage's attributes are only read (a stage that adds error.type copies them first).
var sharedAttempts = func() (l [8]attrList) {
	for i := range l {
		kvs := []attribute.KeyValue{attribute.Int(AttrAttempt, i+1)}
		l[i] = attrList{kvs: kvs, enc: otlptrace.NewAttrBlock(kvs)}
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

// stage is one child span of a span whose stages tile it (a record's send span, a connect),
// its times in Unix nanoseconds.
type stage struct {
	name       string
	start, end int64
	err        error
	attrs      attrList
}

// tiler lays out consecutive stages: each starts where the previous ended.
type tiler struct {
	at     int64
	stages []stage
}

// child adds a stage from the current position to end (clamped: never before the position,
// and a zero end, a stage not reached, makes it zero length), with error.type and an error
// status when err is set.
// It takes and returns the tiler by value: a slice stored through a pointer would escape, and a
// record's stages are laid out in an array on the stack.
func (t tiler) child(name string, end int64, err error, attrs attrList) tiler {
	if end == 0 || end < t.at {
		end = t.at
	}
	t.stages = append(t.stages, stage{name: name, start: t.at, end: end, err: err, attrs: attrs})
	t.at = end
	return t
}
