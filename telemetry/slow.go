package telemetry

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/accumulator"
)

// Slow-record tracing. Every record keeps its Send time and its append time in its batch, and
// every batch its attempts' stage timestamps (accumulator.Config.TraceAtCompletion), so the
// decision to trace a record can wait until its callback: a record whose Send-to-acknowledgement
// latency exceeds the threshold gets the same six-stage trace a head-sampled record gets, with
// explicit timestamps, whatever the sampler said at Send. Its send span carries
// kafkatrail.trace.reason=slow and the threshold. Unlike a head-sampled record's, its trace
// context is not in the record's headers: the record had left before anyone knew.

const (
	// DefaultSlowTracesPerSecond caps the slow records traced per second. When a broker stalls,
	// every record in flight comes back slow at once; past the cap they are not traced (the
	// first ones of each second show the stall as well as all of them would).
	DefaultSlowTracesPerSecond = 1000

	// p99Window is how often the moving p99 is recomputed; p99MinCount is how many latencies a
	// window needs before its p99 is trusted. After each window the counts are halved, so the
	// threshold follows the recent latencies and remembers the older ones with decaying weight.
	p99Window   = time.Second
	p99MinCount = 1000
)

// SlowerThanP99 is ObserverConfig.SlowerThan's value for a threshold that follows the moving
// p99 of the end-to-end latency.
const SlowerThanP99 = time.Duration(-1)

// slowTracer decides which completed records are slow and traces them. BatchDone calls it with
// the batch's records; it may run on the sender goroutine or on one completing a batch in
// Close, so its state is under a mutex (taken once per batch).
type slowTracer struct {
	o *ProducerObserver

	mu        sync.Mutex
	threshold time.Duration // records slower than this are traced; MaxInt64 until known
	follow    bool          // the threshold follows the moving p99
	hist      latencyHistogram
	windowEnd time.Time
	budget    traceBudget // slow traces a second
}

func newSlowTracer(o *ProducerObserver, slowerThan time.Duration) *slowTracer {
	s := &slowTracer{o: o, threshold: slowerThan, budget: traceBudget{perSecond: DefaultSlowTracesPerSecond}}
	if slowerThan == SlowerThanP99 {
		s.follow = true
		s.threshold = math.MaxInt64
	}
	return s
}

// Threshold returns the current threshold, MaxInt64 while the moving p99 is not known yet.
func (s *slowTracer) Threshold() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threshold
}

// batchDone traces the batch's untraced records slower than the threshold and feeds the moving
// p99. It reports, through traced, which records it traced: their end-to-end latency was
// recorded in their span's context (an exemplar) and the caller must not record it again.
func (s *slowTracer) batchDone(b *accumulator.ProducerBatch, err error, callbacksStart, callbacksEnd time.Time, traced func(i int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Nanoseconds, not times: every record is measured, few are traced.
	end := callbacksEnd.UnixNano()
	i := -1
	for sent, isTraced := range b.SentNanos() {
		i++
		d := time.Duration(end - sent)
		if s.follow {
			s.hist.add(d)
		}
		if isTraced || d <= s.threshold || !s.budget.take(callbacksEnd) {
			continue
		}
		if s.trace(b, i, b.UntracedTiming(i), err, callbacksStart, callbacksEnd) {
			traced(i)
		}
	}
	if s.follow {
		if s.windowEnd.IsZero() {
			s.windowEnd = callbacksEnd.Add(p99Window)
		} else if callbacksEnd.After(s.windowEnd) {
			if s.hist.total >= p99MinCount {
				s.threshold = s.hist.quantile(0.99)
			}
			s.hist.decay()
			s.windowEnd = callbacksEnd.Add(p99Window)
		}
	}
}

// trace traces record i of the batch, slow, after the fact (traceAfter).
func (s *slowTracer) trace(b *accumulator.ProducerBatch, i int, r accumulator.RecordTiming, err error, callbacksStart, callbacksEnd time.Time) bool {
	return s.o.traceAfter(b, i, r, sendExtra{reason: TraceReasonSlow, threshold: s.threshold.Seconds()}, err, callbacksStart, callbacksEnd)
}

// DefaultErrorTracesPerSecond caps the failed records traced at their callback a second
// (ObserverConfig.ErrorTracesPerSecond): when a topic is refused, every record fails; the first
// ones of each second show the refusal as well as all of them would.
const DefaultErrorTracesPerSecond = 10

// traceBudget is a per-second allowance of traces. Safe for concurrent use; a nil budget
// allows none.
type traceBudget struct {
	mu        sync.Mutex
	perSecond int
	left      int
	until     time.Time
}

// take spends one trace of the second now falls in, false when none is left.
func (tb *traceBudget) take(now time.Time) bool {
	if tb == nil {
		return false
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if !now.Before(tb.until) {
		tb.left, tb.until = tb.perSecond, now.Add(time.Second)
	}
	if tb.left == 0 {
		return false
	}
	tb.left--
	return true
}

// traceFailed traces the failed batch's records that no trace covers yet (not sampled at Send,
// not traced slow: skip), within the error budget, with kafkatrail.trace.reason=error; traced
// hears of each.
func (o *ProducerObserver) traceFailed(b *accumulator.ProducerBatch, err error, callbacksStart, callbacksEnd time.Time,
	skip map[int]bool, traced func(i int)) {
	i := -1
	for _, isTraced := range b.SentNanos() {
		i++
		if isTraced || skip[i] {
			continue
		}
		if !o.errs.take(callbacksEnd) {
			return
		}
		if o.traceAfter(b, i, b.UntracedTiming(i), sendExtra{reason: TraceReasonError}, err, callbacksStart, callbacksEnd) {
			traced(i)
		}
	}
}

// traceAfter builds record r, the batch's i-th, trace after the fact: its send span from Send
// to its callback, and the stage children from the timestamps its batch kept (the append stage
// is instant, and the attempts absent, unless the producer keeps them for slow-record tracing).
// The span is CLIENT, not PRODUCER: its context never reached the record, so it is not the
// record's creation context. When the record carries one of its own (the log line's, in the
// trace header), the span links to it, read back from the batch.
func (o *ProducerObserver) traceAfter(b *accumulator.ProducerBatch, i int, r accumulator.RecordTiming, extra sendExtra,
	err error, callbacksStart, callbacksEnd time.Time) bool {
	topic := b.TopicPartition.Topic
	var links []trace.Link
	if sc, ok := parseTraceparent(b.RecordHeader(i, o.header)); ok {
		links = []trace.Link{{SpanContext: sc}}
	}
	t := o.newRecordTrace(context.Background(), trace.SpanContext{}, newTraceID(), trace.TraceState{}, topic, r.Sent, extra,
		trace.SpanKindClient, links)
	if t == nil {
		return false
	}
	t.appended, t.written = r.Appended, r.Written
	if t.appended.IsZero() {
		t.appended = r.Sent // not stamped: the append shows as instant rather than as the whole wait
	}
	md := accumulator.RecordMetadata{Topic: topic, Partition: b.TopicPartition.Partition, Offset: r.Offset}
	// The record's own callback ended somewhere in [callbacksStart, callbacksEnd]; the batch's
	// end is the bound known for every record.
	t.RecordDone(b, md, err, callbacksStart, callbacksEnd)
	return true
}

// latencyHistogram counts latencies in log-linear buckets: 8 per power of two of microseconds,
// so a quantile is known to within 12.5 %.
type latencyHistogram struct {
	counts [latencyBuckets]float64
	total  float64
}

const latencyBuckets = 8 + 8*61

func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 8 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // 3 or more
	return (e-2)*8 + int((us>>(e-3))&7)
}

// bucketUpper is the smallest latency above bucket i.
func bucketUpper(i int) time.Duration {
	if i < 8 {
		return time.Duration(i+1) * time.Microsecond
	}
	e, m := i/8+2, i%8
	return time.Duration(uint64(8+m+1)<<(e-3)) * time.Microsecond
}

func (h *latencyHistogram) add(d time.Duration) {
	h.counts[latencyBucket(d)]++
	h.total++
}

// quantile returns the upper bound of the bucket holding quantile q: at least a share q of the
// latencies counted are at or below it.
func (h *latencyHistogram) quantile(q float64) time.Duration {
	want := q * h.total
	var sum float64
	for i, c := range h.counts {
		sum += c
		if sum >= want && c > 0 {
			return bucketUpper(i)
		}
	}
	return math.MaxInt64
}

// decay halves every count: the next window's latencies weigh as much as all the older ones.
func (h *latencyHistogram) decay() {
	for i := range h.counts {
		h.counts[i] /= 2
	}
	h.total /= 2
}
