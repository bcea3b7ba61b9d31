package telemetry

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
	"github.com/kafkatrail/kafkatrail/network"
	"github.com/kafkatrail/kafkatrail/producer"
)

// ProducerObserver implements producer.Observer with OpenTelemetry: the lifecycle spans of
// sampled records, connection-level spans, and the producer's metrics. It is safe for
// concurrent use. Build one with NewProducerObserver, or let Setup build it (Provider.Observer).
// Give it to one producer: the per-node gauges (in-flight requests, connection states) are
// keyed by broker node id, which two producers would share.
type ProducerObserver struct {
	tracer   trace.Tracer
	sampler  sdktrace.Sampler // nil: tracing is off, StartSend returns at once
	ratio    *parentRatio     // the sampler, when it is the default kind: StartSend decides roots
	slow     *slowTracer      // nil unless ObserverConfig.SlowerThan
	errs     *traceBudget     // failed records traced at their callback; nil when tracing is off
	sink     *recordSink      // nil: records' spans go through the tracer
	header   string
	clientID string
	m        *instruments

	topics     sync.Map                   // topic -> *topicAttrs
	templates  sync.Map                   // topic -> the template its name came from (SetDestinationTemplate)
	lastTopic  atomic.Pointer[topicAttrs] // the last one looked up: most producers send to one topic
	partitions sync.Map                   // partitionKey -> *partitionAttrs
	nodes      sync.Map                   // int32 -> *nodeAttrs
	// clusterID is messaging.kafka.cluster.id, from the latest metadata response that had one.
	clusterID atomic.Pointer[attribute.KeyValue]
	// lastRequest is the last doSend attribute list made (requestAttrs).
	lastRequest atomic.Pointer[requestAttrs]
	// batchStages: a batch's stages go in the trace of its first traced record only
	// (ObserverConfig.BatchStages); lastBatch is the last batch seen with it (batchOwnerOf).
	batchStages    bool
	lastBatchMu    sync.Mutex
	lastBatch      batchKey
	lastBatchOwner batchOwner
	// spanless is the last context StartSend found without a span in it. A producer is mostly
	// handed one context over and over (the agent's run context), and looking for a span in it
	// walks its whole chain of parents every time (~30 ns a record, at any sampling ratio);
	// contexts are immutable, so the answer for one context never changes.
	spanless atomic.Pointer[spanlessContext]

	// Gauge state. inFlight and metadataAt are written on the sender goroutine and read by the
	// metric reader; conn and pools change rarely and take a mutex.
	inFlight   sync.Map // int32 -> *atomic.Int64
	metadataAt atomic.Int64
	conn       connections
	poolsMu    sync.Mutex
	pools      map[*accumulator.BufferPool]struct{}
}

var _ producer.Observer = (*ProducerObserver)(nil)

// ObserverConfig configures a ProducerObserver.
type ObserverConfig struct {
	// Sampler decides which records are traced (and the connection spans' roots). Nil turns
	// tracing off: no record is traced and no span is started; metrics still flow. The tracer
	// provider's own sampler should be ProviderSampler(Sampler), as Setup arranges.
	Sampler sdktrace.Sampler
	// TraceHeader is the record header that carries a traced record's trace context;
	// empty means DefaultTraceHeader ("traceparent"). A valid context already there (say, the
	// log line's own) is the record's creation context and is kept: the send span then links
	// to it (see StartSend).
	TraceHeader string
	// ClientID is messaging.client.id on the send spans (the producer's client.id).
	ClientID string
	// SpanProcessor, when set, receives the spans of traced records directly, built finished
	// from the recorded timestamps (no SDK span lives while a record is in flight): as
	// RecordSpans when it is a RecordSpanProcessor, else as read-only views of them; Resource
	// is theirs. Setup sets both to what the tracer provider has. Without it, records' spans
	// go through the tracer.
	SpanProcessor sdktrace.SpanProcessor
	Resource      *resource.Resource
	// SlowerThan, when positive, traces every record whose Send-to-acknowledgement latency
	// exceeds it, whatever Sampler said at Send (at most DefaultSlowTracesPerSecond a second);
	// SlowerThanP99 follows the moving p99 of that latency instead. It needs tracing on (a
	// Sampler): with none it does nothing. It costs a clock read per record at append.
	SlowerThan time.Duration
	// ErrorTracesPerSecond caps the failed records traced at their callback, whatever Sampler
	// said at Send (kafkatrail.trace.reason=error): a fast failure (RECORD_TOO_LARGE, an
	// authorization refusal, an unknown topic) is never slow, so without it a 1 % sample
	// would rarely show one. 0 means DefaultErrorTracesPerSecond; negative, none. It needs
	// tracing on (a Sampler).
	ErrorTracesPerSecond int
	// Histograms, when set, aggregates the latency histograms recorded once per record (the
	// append stage and the send duration) instead of mp: far cheaper, but only readers built
	// with sdkmetric.WithProducer(Histograms) export them. Setup arranges both. Without it,
	// they are mp's instruments like every other.
	Histograms *Histograms
	// BatchStages exports a batch's stages (drain, doSend, completedSend, completedReceive)
	// once per batch attempt, in the trace of the batch's first traced record to complete; the
	// send span of every other traced record of the batch links to that trace's doSend spans
	// (kafkatrail.trace.link=batch), and its own trace has read, append and callback. Off,
	// every traced record's trace has all its stages. It applies to what the span processors
	// that take TracedRecords export (Setup's OTLP exporter); the status page's waterfall
	// always has every stage.
	BatchStages bool
}

// NewProducerObserver returns an observer that records spans with tp and metrics with mp.
func NewProducerObserver(tp trace.TracerProvider, mp metric.MeterProvider, cfg ObserverConfig) (*ProducerObserver, error) {
	o := &ProducerObserver{
		tracer:   tp.Tracer(InstrumentationName),
		sampler:  cfg.Sampler,
		header:   cfg.TraceHeader,
		clientID: cfg.ClientID,
		pools:    map[*accumulator.BufferPool]struct{}{},

		batchStages: cfg.BatchStages,
	}
	if pr, ok := cfg.Sampler.(parentRatio); ok {
		o.ratio = &pr
	}
	if cfg.SpanProcessor != nil {
		res := cfg.Resource
		if res == nil {
			res = resource.Empty()
		}
		o.sink = newRecordSink(res, cfg.SpanProcessor)
	}
	if o.header == "" {
		o.header = DefaultTraceHeader
	}
	if o.sampler != nil && (cfg.SlowerThan > 0 || cfg.SlowerThan == SlowerThanP99) {
		o.slow = newSlowTracer(o, cfg.SlowerThan)
	}
	if o.sampler != nil && cfg.ErrorTracesPerSecond >= 0 {
		n := cfg.ErrorTracesPerSecond
		if n == 0 {
			n = DefaultErrorTracesPerSecond
		}
		o.errs = &traceBudget{perSecond: n}
	}
	o.conn.states = map[int32]network.ConnectionState{}
	o.conn.pending = map[int32]*pendingConnect{}
	o.conn.addrs = map[int32]string{}
	o.conn.lastErr = map[int32]string{}
	m, err := newInstruments(mp.Meter(InstrumentationName), o, cfg.Histograms)
	if err != nil {
		return nil, err
	}
	o.m = m
	return o, nil
}

// StartSend decides whether the record is traced. The decision runs the sampler on the
// context's span (the log line's, when it carried one) or on a fresh random trace id, before
// any span exists: an unsampled record returns here having allocated nothing. The sampler sees
// what the conventions call sampling-relevant at creation: the span name `send {topic}`, its
// kind, and messaging.system, messaging.operation.name and .type, messaging.destination.name
// (and messaging.client.id). The partition and its leader (server.address) are not known yet:
// the partitioner picks them after Send. A sampled record gets its `send {topic}` span,
// started at now.
//
// The span's context is the record's creation context and goes into its trace header (the
// span is PRODUCER), unless the record already carries a valid one there, a custom creation
// context (the agent's log line's): that is left as it is, so a consumer sees the same parent
// whether the record was sampled or not, and the send span, which is then only the transport
// operation, is CLIENT and links to it (the conventions' "Producer spans").
func (o *ProducerObserver) StartSend(ctx context.Context, r *producer.Record, now time.Time) (accumulator.RecordTrace, []producer.Header) {
	if o.sampler == nil {
		return nil, r.Headers
	}
	// The common case first, kept small: the context is the one last found without a span (the
	// agent's run context), so the record is a root, and no span context is looked up or
	// copied; sampleRoot decides, and 99 records in 100 go no further.
	if o.ratio != nil && o.knownSpanless(ctx) {
		lo, ok := o.ratio.sampleRoot()
		if !ok {
			return nil, r.Headers
		}
		return o.startSend(ctx, r, now, true, lo)
	}
	return o.startSend(ctx, r, now, false, 0)
}

// startSend is StartSend past the common case: known, a root its sampler picked with the low
// half of its trace id lo; else the record's span context and sampler decide.
func (o *ProducerObserver) startSend(ctx context.Context, r *producer.Record, now time.Time, known bool, lo uint64) (accumulator.RecordTrace, []producer.Header) {
	var traceID trace.TraceID
	var psc trace.SpanContext
	root := known
	if !root {
		psc = o.spanContext(ctx)
		root = o.ratio != nil && !psc.IsValid()
		if root {
			var ok bool
			if lo, ok = o.ratio.sampleRoot(); !ok {
				return nil, r.Headers
			}
		}
	}
	var ta *topicAttrs
	var created trace.SpanContext
	var state trace.TraceState
	var stateHeader []byte // state's header value, when the sampler made state
	if root {
		// A root under the default kind of sampler, picked: the low half of the trace id is the
		// number sampleRoot drew (TraceIDRatioBased's decision is a function of it).
		binary.BigEndian.PutUint64(traceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(traceID[8:], lo)
		if !traceID.IsValid() {
			traceID[0] = 1 // all zeros is the invalid id; the high half does not change the decision
		}
		ta, created = o.topic(r.Topic), o.creationContext(r.Headers)
		state, stateHeader = o.ratio.traceState()
	} else {
		ta, created = o.topic(r.Topic), o.creationContext(r.Headers)
		p := sdktrace.SamplingParameters{ParentContext: ctx, Name: ta.sendName, Kind: sendKind(created),
			Attributes: ta.spanAttrs}
		if psc.IsValid() {
			p.TraceID = psc.TraceID()
		} else {
			binary.BigEndian.PutUint64(p.TraceID[:8], rand.Uint64())
			binary.BigEndian.PutUint64(p.TraceID[8:], rand.Uint64())
		}
		if o.sampler.ShouldSample(p).Decision != sdktrace.RecordAndSample {
			return nil, r.Headers
		}
		traceID = p.TraceID
	}
	extra := sendExtra{tombstone: r.Value == nil, reason: TraceReasonSampled}
	if r.Key != nil && utf8.Valid(r.Key) {
		// The conventions want the key's string form, and none when it has no unambiguous one:
		// a key that is not UTF-8 is left out rather than mangled.
		extra.key, extra.hasKey = string(r.Key), true
	}
	var links []trace.Link
	if created.IsValid() {
		links = []trace.Link{{SpanContext: created}}
	}
	// The trace id the sampler decided on is the trace's (a ratio sampler's decision is a
	// function of it).
	t := o.newRecordTrace(ctx, psc, traceID, state, r.Topic, now, extra, sendKind(created), links)
	if t == nil {
		return nil, r.Headers
	}
	t.written = r.Written
	if created.IsValid() {
		return t, r.Headers
	}
	tracestate := stateHeader
	if !root {
		tracestate = traceStateValue(t.sc)
	}
	if len(r.Headers)+1+min(len(tracestate), 1) <= len(t.headers) {
		// The common case (a log line has a few headers, or none): the headers live in the
		// token, which lives until the record completes, long after the producer copied them
		// into its batch.
		return t, appendTraceContext(t.headers[:0], r.Headers, o.header, appendTraceparent(t.traceparent[:0], t.sc), tracestate)
	}
	return t, injectTraceContext(r.Headers, o.header, t.sc)
}

// sendKind is the send span's kind: PRODUCER when its context is the record's creation
// context, CLIENT when the record carries one of its own (created).
func sendKind(created trace.SpanContext) trace.SpanKind {
	if created.IsValid() {
		return trace.SpanKindClient
	}
	return trace.SpanKindProducer
}

// creationContext returns the valid trace context in headers' trace header, if there is one.
func (o *ProducerObserver) creationContext(headers []producer.Header) trace.SpanContext {
	for _, h := range headers {
		if h.Key == o.header {
			sc, _ := parseTraceparent(h.Value)
			return sc
		}
	}
	return trace.SpanContext{}
}

// spanlessContext is a context known to hold no valid span context.
type spanlessContext struct{ ctx context.Context }

// knownSpanless reports whether ctx is the last context spanContext found without a span.
func (o *ProducerObserver) knownSpanless(ctx context.Context) bool {
	sl := o.spanless.Load()
	return sl != nil && sl.ctx == ctx
}

// spanContext is trace.SpanContextFromContext(ctx), remembering the last context that had none.
func (o *ProducerObserver) spanContext(ctx context.Context) trace.SpanContext {
	// Comparing interfaces panics when they hold the same uncomparable type: only a context of
	// a comparable type is remembered, so a context equal in type to it is comparable too.
	if sl := o.spanless.Load(); sl != nil && sl.ctx == ctx {
		return trace.SpanContext{}
	}
	psc := trace.SpanContextFromContext(ctx)
	if !psc.IsValid() && ctx != nil && reflect.TypeOf(ctx).Comparable() {
		o.spanless.Store(&spanlessContext{ctx})
	}
	return psc
}

// sendExtra is what a record's send span has among its attributes besides its topic's: kept
// as values, not as an attribute list, while the record is in flight (a list made at Send
// would be held for every traced record the buffer holds, at 100 % sampling several times the
// records' own bytes), and laid out when the record completes.
type sendExtra struct {
	tombstone bool
	hasKey    bool
	key       string  // messaging.kafka.message.key, when hasKey
	reason    string  // kafkatrail.trace.reason
	threshold float64 // kafkatrail.trace.threshold, seconds, for a slow record's; 0: none
}

func (x *sendExtra) count() int {
	n := 1 // the reason
	if x.tombstone {
		n++
	}
	if x.hasKey {
		n++
	}
	if x.threshold > 0 {
		n++
	}
	return n
}

// sendAttrs returns the send span's attributes known at Send (appendSendAttrs), in a new slice.
func (o *ProducerObserver) sendAttrs(t *topicAttrs, x *sendExtra) []attribute.KeyValue {
	return o.appendSendAttrs(make([]attribute.KeyValue, 0, len(t.spanAttrs)+x.count()), t, x)
}

// appendSendAttrs appends the send span's attributes known at Send: its topic's (t.spanAttrs,
// first, so that their encoding is shared), then x's.
func (o *ProducerObserver) appendSendAttrs(attrs []attribute.KeyValue, t *topicAttrs, x *sendExtra) []attribute.KeyValue {
	attrs = append(attrs, t.spanAttrs...)
	if x.tombstone {
		attrs = append(attrs, attribute.Bool(AttrMessagingKafkaTombstone, true))
	}
	if x.hasKey {
		attrs = append(attrs, attribute.String(AttrMessagingKafkaKey, x.key))
	}
	attrs = append(attrs, attribute.String(AttrTraceReason, x.reason))
	if x.threshold > 0 {
		attrs = append(attrs, attribute.Float64(AttrTraceThreshold, x.threshold))
	}
	return attrs
}

// TracesAtCompletion reports whether the observer may trace a record when it completes (a
// latency threshold is set): the producer then has the accumulator keep every record's append
// time and every batch's attempts.
func (o *ProducerObserver) TracesAtCompletion() bool { return o.slow != nil }

// SlowThreshold returns the latency above which a completed record is traced: the fixed
// threshold, the current moving p99, or 0 when slow-record tracing is off (or the p99 is not
// known yet).
func (o *ProducerObserver) SlowThreshold() time.Duration {
	if o.slow == nil {
		return 0
	}
	if t := o.slow.Threshold(); t != math.MaxInt64 {
		return t
	}
	return 0
}

// Appended records the append stage of every record, and counts a record that Send failed.
// A traced record's append is recorded in its span's context, so the histogram keeps its
// trace id as an exemplar. An untraced append that was not timed (end zero, or Send's start
// under --trace-slower-than: it did not wait) counts as 0 s, one atomic add.
func (o *ProducerObserver) Appended(topic string, rt accumulator.RecordTrace, start, end time.Time, err error) {
	ta := o.topic(topic)
	if err == nil && rt == nil && !end.After(start) {
		ta.stage[stageIndexAppend].recordUntimed()
		return
	}
	d := end.Sub(start)
	ta.stage[stageIndexAppend].record(traceSpan(rt), d)
	if err != nil {
		// The record failed before it had a partition or a leader: its series have neither. It
		// was never attempted, so messaging.client.sent.messages leaves it out (the
		// conventions: it MUST NOT count messages created but not sent); records.failed has it.
		et := ErrorType(err)
		f := o.partition(ta, -1, -1).failure(o, et)
		o.m.failed.Add(context.Background(), 1, metric.WithAttributes(ta.dest, attribute.String(AttrErrorType, et)))
		f.op.record(trace.SpanContext{}, d)
		if rt == nil && o.errs.take(end) {
			// An untraced record that failed in Send: its trace is its send span (and the
			// append stage), with the error, made now.
			if t := o.newRecordTrace(context.Background(), trace.SpanContext{}, newTraceID(), trace.TraceState{}, topic, start,
				sendExtra{reason: TraceReasonError}, trace.SpanKindClient, nil); t != nil {
				t.appended = end
				t.RecordDone(nil, accumulator.RecordMetadata{Topic: topic, Partition: -1, Offset: -1}, err, end, end)
			}
		}
	}
}

// AttemptDone records the stages of one produce attempt of a batch, the batch's shape on its
// first attempt, and the records a retry sends again.
func (o *ProducerObserver) AttemptDone(b *accumulator.ProducerBatch, a accumulator.Attempt, retry bool) {
	// A batch holding a sampled record records its stages in that record's span context:
	// the stage histograms' exemplars then link to a trace that shows the stage.
	sc := traceSpan(b.FirstTrace())
	ctx := context.Background() // the SDK's instruments take the span context in a context
	if sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	ta := o.topic(a.TopicPartition.Topic)
	queued := a.Drained.Sub(a.Enqueued)
	ta.stage[stageIndexDrain].record(sc, queued)
	o.m.queueTime.Record(ctx, seconds(queued), ta.destOpt)
	ta.stage[stageIndexDoSend].record(sc, a.Queued.Sub(a.Drained))
	written := a.Written
	if !written.IsZero() {
		ta.stage[stageIndexCompletedSend].record(sc, written.Sub(a.Queued))
	} else {
		written = a.Queued
	}
	ta.stage[stageIndexCompletedReceive].record(sc, a.Received.Sub(written))
	if a.Number == 1 {
		codecOpt := ta.codecOption(b.Codec().String())
		o.m.batchSize.Record(ctx, int64(a.Bytes), codecOpt)
		o.m.batchRecords.Record(ctx, int64(a.Records), ta.destOpt)
		if a.UncompressedBytes > 0 {
			o.m.compression.Record(ctx, float64(a.Bytes)/float64(a.UncompressedBytes), codecOpt)
		}
	}
	if retry {
		o.m.retried.Add(ctx, int64(a.Records), metric.WithAttributes(ta.dest, attribute.String(AttrErrorType, ErrorType(a.Err))))
	}
}

// BatchDone records the callback stage of a completed batch, and for each of its records the
// end-to-end latency and whether it was sent or failed.
func (o *ProducerObserver) BatchDone(b *accumulator.ProducerBatch, err error, callbacksStart, callbacksEnd time.Time) {
	ctx := context.Background()
	ta := o.topic(b.TopicPartition.Topic)
	ta.stage[stageIndexCallback].record(trace.SpanContext{}, callbacksEnd.Sub(callbacksStart))
	n := int64(b.RecordCount())
	pa := o.partition(ta, b.TopicPartition.Partition, b.Node)
	op := pa.opOK
	if err == nil {
		o.m.sent.Add(ctx, n, pa.sentOpt)
	} else {
		// Every record the producer attempted counts in messaging.client.sent.messages, a failed
		// one with its error.type; a batch that failed before it was ever drained into a request
		// (it expired queued) was not attempted, and the conventions say the counter MUST NOT
		// have it. kafkatrail.producer.records.failed counts every failed record.
		et := ErrorType(err)
		f := pa.failure(o, et)
		if !b.Drained.IsZero() {
			o.m.sent.Add(ctx, n, f.sentOpt)
		}
		o.m.failed.Add(ctx, n, metric.WithAttributes(ta.dest, attribute.String(AttrErrorType, et)))
		op = f.op
	}
	var slowTraced map[int]bool // traced here, at the callback: slow, or failed
	markTraced := func(i int) {
		if slowTraced == nil {
			slowTraced = map[int]bool{}
		}
		slowTraced[i] = true
	}
	if o.slow != nil {
		o.slow.batchDone(b, err, callbacksStart, callbacksEnd, markTraced)
	}
	if err != nil && o.errs != nil {
		o.traceFailed(b, err, callbacksStart, callbacksEnd, slowTraced, markTraced)
	}
	// The batch's untraced records go in together: one atomic add per bucket, not per record.
	own, _ := op.(*histSeries)
	var local durationBatch
	if own != nil {
		local = own.newBatch()
	}
	var written writtenBatch
	end := callbacksEnd.UnixNano()
	i := -1
	for sent, traced := range b.SentNanos() {
		i++
		if traced || slowTraced[i] {
			continue // recorded by its recordTrace, in its span's context: an exemplar
		}
		if own != nil {
			local.add(end - sent)
		} else {
			op.record(trace.SpanContext{}, time.Duration(end-sent))
		}
		if w := b.WrittenNanos(i); w != 0 {
			written.add(ta, w, sent, callbacksStart.UnixNano(), err == nil)
		}
	}
	if own != nil {
		own.addBatch(&local)
	}
	written.done()
}

// writtenBatch gathers a batch's read stages (Record.Written to Send) and ages at
// acknowledgement (Record.Written to the response taken: callbacks start), to add them to
// their series at once, as BatchDone does the latencies. Series of the SDK's take each
// measurement as it comes.
type writtenBatch struct {
	read, age   *histSeries // nil before the first measurement, and when the series are the SDK's
	readB, ageB durationBatch
	started     bool
}

func (w *writtenBatch) add(ta *topicAttrs, written, sent, acked int64, ok bool) {
	if !w.started {
		w.started = true
		w.read, _ = ta.read.(*histSeries)
		w.age, _ = ta.age.(*histSeries)
		if w.read != nil {
			w.readB = w.read.newBatch()
		}
		if w.age != nil {
			w.ageB = w.age.newBatch()
		}
	}
	read := max(sent-written, 0) // a line's own timestamp ahead of the clock reads as no wait
	if w.read != nil {
		w.readB.add(read)
	} else {
		ta.read.record(trace.SpanContext{}, time.Duration(read))
	}
	if !ok {
		return // an age at acknowledgement only for records acknowledged
	}
	age := max(acked-written, 0)
	if w.age != nil {
		w.ageB.add(age)
	} else {
		ta.age.record(trace.SpanContext{}, time.Duration(age))
	}
}

func (w *writtenBatch) done() {
	if w.read != nil {
		w.read.addBatch(&w.readB)
	}
	if w.age != nil {
		w.age.addBatch(&w.ageB)
	}
}

// ProducerStarted adds pool to the buffer gauges until the producer stops.
func (o *ProducerObserver) ProducerStarted(pool *accumulator.BufferPool) (stopped func()) {
	o.poolsMu.Lock()
	o.pools[pool] = struct{}{}
	o.poolsMu.Unlock()
	return func() {
		o.poolsMu.Lock()
		delete(o.pools, pool)
		o.poolsMu.Unlock()
	}
}

// InFlightRequests keeps node's in-flight count for the gauge.
func (o *ProducerObserver) InFlightRequests(node int32, count int) {
	v, ok := o.inFlight.Load(node)
	if !ok {
		v, _ = o.inFlight.LoadOrStore(node, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(int64(count))
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// traceSpan is the span context of a traced record's send span, invalid for nil.
func traceSpan(rt accumulator.RecordTrace) trace.SpanContext {
	if t, ok := rt.(*recordTrace); ok && t != nil {
		return t.sc
	}
	return trace.SpanContext{}
}

// Indexes of the stages in topicAttrs.stage, in lifecycle order.
const (
	stageIndexAppend = iota
	stageIndexDrain
	stageIndexDoSend
	stageIndexCompletedSend
	stageIndexCompletedReceive
	stageIndexCallback
	stageCount
)

var stageNames = [stageCount]string{StageAppend, StageDrain, StageDoSend, StageCompletedSend, StageCompletedReceive, StageCallback}

// topicAttrs are a topic's attribute sets and latency series, built once so that the
// per-record and per-batch measurements allocate nothing and look nothing up.
type topicAttrs struct {
	name     string
	sendName string // the send span's: "send " + topic
	dest     attribute.KeyValue
	template attribute.KeyValue // messaging.destination.template; not Valid when none
	destOpt  metric.MeasurementOption
	// spanAttrs are the send span's attributes known at Send, the sampler's: shared, never
	// modified (sendAttrs copies them).
	spanAttrs []attribute.KeyValue
	spanEnc   *otlptrace.AttrBlock       // spanAttrs encoded, for every send span's
	stage     [stageCount]durationSeries // each stage's duration
	read      durationSeries             // the read stage's (Record.Written to Send), beside them
	age       durationSeries             // kafkatrail.producer.record.age
	// codec is the attribute set of the topic with its batches' compression, made once per
	// codec rather than once per batch (a producer has one).
	codec atomic.Pointer[codecAttrs]
	// parts is each partition's latest metric attributes, by partition id, for the lookup
	// once per batch; partsMu serialises its (rare) copy-on-write updates.
	parts   atomic.Pointer[[]*partitionAttrs]
	partsMu sync.Mutex
}

// codecAttrs is a topic's measurement option with a compression codec.
type codecAttrs struct {
	codec string
	opt   metric.MeasurementOption
}

// codecOption returns the measurement option of the topic's destination and codec.
func (t *topicAttrs) codecOption(codec string) metric.MeasurementOption {
	if c := t.codec.Load(); c != nil && c.codec == codec {
		return c.opt
	}
	c := &codecAttrs{codec: codec, opt: metric.WithAttributeSet(attribute.NewSet(t.dest, attribute.String(AttrCompression, codec)))}
	t.codec.Store(c)
	return c.opt
}

func (t *topicAttrs) opAttrs() []attribute.KeyValue {
	kvs := []attribute.KeyValue{
		attribute.String(AttrMessagingSystem, messagingSystemKafka),
		attribute.String(AttrMessagingOperationName, messagingOperationSend),
		attribute.String(AttrMessagingOperationType, messagingOperationSend),
		t.dest,
	}
	if t.template.Valid() {
		kvs = append(kvs, t.template)
	}
	return kvs
}

// SetDestinationTemplate says that topic's name came from template (the agent's --topic
// template): its send spans and messaging metrics carry messaging.destination.template, which
// the conventions require where the destination name is such a template's. Call it before the
// topic's first record; a topic already seen starts new series.
func (o *ProducerObserver) SetDestinationTemplate(topic, template string) {
	o.templates.Store(topic, template)
	if v, ok := o.topics.LoadAndDelete(topic); ok {
		o.lastTopic.CompareAndSwap(v.(*topicAttrs), nil)
		o.partitions.Range(func(k, _ any) bool {
			if k.(partitionKey).topic == topic {
				o.partitions.Delete(k)
			}
			return true
		})
	}
}

func (o *ProducerObserver) topic(topic string) *topicAttrs {
	if t := o.lastTopic.Load(); t != nil && t.name == topic {
		return t
	}
	if v, ok := o.topics.Load(topic); ok {
		t := v.(*topicAttrs)
		o.lastTopic.Store(t)
		return t
	}
	t := &topicAttrs{name: topic, sendName: SpanSendPrefix + topic, dest: attribute.String(AttrMessagingDestinationName, topic)}
	if v, ok := o.templates.Load(topic); ok {
		t.template = attribute.String(AttrMessagingDestinationTemplate, v.(string))
	}
	t.destOpt = metric.WithAttributeSet(attribute.NewSet(t.dest))
	t.spanAttrs = t.opAttrs()
	if o.clientID != "" {
		t.spanAttrs = append(t.spanAttrs, attribute.String(AttrMessagingClientID, o.clientID))
	}
	t.spanEnc = otlptrace.NewAttrBlock(t.spanAttrs)
	for i, s := range stageNames {
		t.stage[i] = o.m.stage.series(attribute.NewSet(attribute.String(AttrStage, s), t.dest))
	}
	t.read = o.m.stage.series(attribute.NewSet(attribute.String(AttrStage, StageRead), t.dest))
	t.age = o.m.age.series(attribute.NewSet(t.dest))
	v, _ := o.topics.LoadOrStore(topic, t)
	return v.(*topicAttrs)
}
