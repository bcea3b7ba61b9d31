package statuspage

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/telemetry"
)

// DefaultTraceCapacity is how many traces a Ring keeps when NewRing is given no capacity.
const DefaultTraceCapacity = 32

// maxPending bounds the stage spans waiting for their send span to end. The producer ends a
// record's stages and then its send span in one go, so a few suffice; the bound only matters
// if a send span never ends.
const maxPending = 256

// Trace is one sampled record's `send {topic}` span and its stage spans, as the page draws it.
type Trace struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	Name    string `json:"name"`
	Topic   string `json:"topic"`
	// Template is the --topic template the topic's name came from (messaging.destination.template).
	Template  string    `json:"template,omitempty"`
	Partition string    `json:"partition,omitempty"`
	Offset    *int64    `json:"offset,omitempty"`
	Start     time.Time `json:"start"`
	// DurationUS is the send span's length in microseconds: Send called to callback returned.
	DurationUS float64 `json:"duration_us"`
	Error      string  `json:"error,omitempty"`
	// Request identifies the produce request of the record's last attempt ("node/correlation
	// id"): records with the same one went to the broker together and share their timings
	// after append.
	Request string `json:"request,omitempty"`
	// Stages are the child spans in time order: read (when the line's written time is known:
	// it ends at Start, so its StartUS is negative), append, then drain, doSend, completedSend
	// and completedReceive per attempt, then callback.
	Stages []Stage `json:"stages"`
}

// Stage is one child span of a Trace.
type Stage struct {
	Name string `json:"name"`
	// StartUS is the stage's start in microseconds after its trace's start (before it, negative,
	// for read); DurationUS its length.
	StartUS    float64 `json:"start_us"`
	DurationUS float64 `json:"duration_us"`
	Attempt    int     `json:"attempt,omitempty"`
	Node       *int64  `json:"node,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Ring is an OpenTelemetry span processor that keeps the last sampled record traces in memory,
// for the status page (the producer hands it records' spans as telemetry.RecordSpans; spans
// of the tracer path come as SDK spans): a bounded ring of `send {topic}` spans with their stage children. Other
// spans (connect, Metadata) are ignored. OnEnd runs on the goroutine that ends the span (the
// producer's sender) and takes a mutex for a few field copies; nothing in it blocks.
type Ring struct {
	mu      sync.Mutex
	traces  []ringEntry // ring buffer; next is the slot of the next trace
	next    int
	full    bool
	total   uint64
	pending map[trace.SpanID][]pendingStage // stage spans by their parent (send) span id
}

// ringEntry is one kept trace: made, or a traced record kept whole (lazy) whose trace is made
// when the page is first read, off the producer's sender goroutine.
type ringEntry struct {
	t    Trace
	rec  telemetry.TracedRecord
	lazy bool
}

type pendingStage struct {
	stage       Stage
	start, end  time.Time
	correlation int64 // -1: not a request stage
}

var (
	_ sdktrace.SpanProcessor          = (*Ring)(nil)
	_ telemetry.RecordSpanProcessor   = (*Ring)(nil)
	_ telemetry.TracedRecordProcessor = (*Ring)(nil)
)

// NewRing returns a ring of the last capacity traces (DefaultTraceCapacity when not positive).
func NewRing(capacity int) *Ring {
	if capacity <= 0 {
		capacity = DefaultTraceCapacity
	}
	return &Ring{traces: make([]ringEntry, capacity), pending: map[trace.SpanID][]pendingStage{}}
}

var stageNames = map[string]bool{
	telemetry.SpanRead: true, telemetry.SpanAppend: true, telemetry.SpanDrain: true, telemetry.SpanDoSend: true,
	telemetry.SpanCompletedSend: true, telemetry.SpanCompletedReceive: true, telemetry.SpanCallback: true,
}

// OnStart does nothing: only ended spans are kept.
func (r *Ring) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps a stage span until its send span ends, then the whole trace.
func (r *Ring) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	st := s.Status()
	r.keep(ringSpan{name: s.Name(), kind: s.SpanKind(), traceID: s.SpanContext().TraceID(), spanID: s.SpanContext().SpanID(),
		parent: s.Parent().SpanID(), start: s.StartTime(), end: s.EndTime(), attrs: s.Attributes(),
		status: st.Code, statusMessage: st.Description, sampled: true})
}

// OnEndTracedRecord keeps a traced record whole, a copy of its values, under one lock: its
// trace is made from it (TracedRecord.Spans) when the page first reads it, so the producer's
// sender goroutine makes no span for the page (telemetry.TracedRecordProcessor).
func (r *Ring) OnEndTracedRecord(rec *telemetry.TracedRecord) {
	r.mu.Lock()
	r.traces[r.next] = ringEntry{rec: *rec, lazy: true}
	r.advance()
	r.mu.Unlock()
}

// OnEndRecordSpans keeps a traced record's spans as the producer builds them: the stages,
// then the send span (telemetry.RecordSpanProcessor). No read-only span is made for the page,
// and a record handed over whole (its stages before its send span, as the observer does)
// skips the pending map: one lock for the trace.
func (r *Ring) OnEndRecordSpans(spans []telemetry.RecordSpan) {
	if t, ok := traceOfRecord(spans); ok {
		r.keepTrace(t)
		return
	}
	for i := range spans {
		if s := ringSpanOf(&spans[i]); s.sampled {
			r.keep(s)
		}
	}
}

// traceOfRecord makes the trace of one record's spans handed over whole: its stages, then its
// send span. ok is false for spans that are not that.
func traceOfRecord(spans []telemetry.RecordSpan) (t Trace, ok bool) {
	n := len(spans)
	if n <= 1 {
		return Trace{}, false
	}
	send := ringSpanOf(&spans[n-1])
	if !isSend(send) || !send.sampled {
		return Trace{}, false
	}
	for i := range spans[:n-1] {
		if spans[i].ParentSpanID != send.spanID || !stageNames[spans[i].Name] {
			return Trace{}, false
		}
	}
	var buf [maxRecordStages]pendingStage
	stages := buf[:0] // beyond it (a record retried three times or more), in an allocation
	for i := range spans[:n-1] {
		stages = append(stages, stageOf(ringSpanOf(&spans[i])))
	}
	return buildTrace(send, stages), true
}

// maxRecordStages is how many stages a record's trace is laid out in without an allocation
// (three attempts').
const maxRecordStages = 16

func ringSpanOf(s *telemetry.RecordSpan) ringSpan {
	return ringSpan{name: s.Name, kind: s.Kind, traceID: s.TraceID, spanID: s.SpanID, parent: s.ParentSpanID,
		start: time.Unix(0, s.Start), end: time.Unix(0, s.End), attrs: s.Attributes,
		status: s.Status, statusMessage: s.StatusMessage, sampled: s.Flags.IsSampled()}
}

// ringSpan is what the ring reads of a span, whichever way it came.
type ringSpan struct {
	name          string
	kind          trace.SpanKind
	traceID       trace.TraceID
	spanID        trace.SpanID
	parent        trace.SpanID // zero: a root
	start, end    time.Time
	attrs         []attribute.KeyValue
	status        codes.Code
	statusMessage string
	sampled       bool
}

// isSend reports whether s is a record's send span. It is PRODUCER, or CLIENT when the record
// carries its own creation context (a log line's) or was traced only at its callback (a slow
// record): the page shows them all.
func isSend(s ringSpan) bool {
	return (s.kind == trace.SpanKindProducer || s.kind == trace.SpanKindClient) && strings.HasPrefix(s.name, telemetry.SpanSendPrefix)
}

// stageOf reads a stage span.
func stageOf(s ringSpan) pendingStage {
	st := pendingStage{stage: Stage{Name: s.name}, start: s.start, end: s.end, correlation: -1}
	for _, kv := range s.attrs {
		switch kv.Key {
		case telemetry.AttrAttempt:
			st.stage.Attempt = int(kv.Value.AsInt64())
		case telemetry.AttrNodeID:
			n := kv.Value.AsInt64()
			st.stage.Node = &n
		case telemetry.AttrCorrelationID:
			st.correlation = kv.Value.AsInt64()
		case telemetry.AttrErrorType:
			st.stage.Error = kv.Value.Emit()
		}
	}
	if st.stage.Error == "" && s.status == codes.Error {
		st.stage.Error = s.statusMessage
	}
	return st
}

// keep holds a stage span until its send span comes, then keeps the whole trace.
func (r *Ring) keep(s ringSpan) {
	switch {
	case stageNames[s.name] && s.parent.IsValid():
		st := stageOf(s)
		r.mu.Lock()
		if _, ok := r.pending[s.parent]; !ok && len(r.pending) >= maxPending {
			clear(r.pending) // send spans that never ended: forget them
		}
		r.pending[s.parent] = append(r.pending[s.parent], st)
		r.mu.Unlock()
	case isSend(s):
		r.mu.Lock()
		stages := r.pending[s.spanID]
		delete(r.pending, s.spanID)
		r.mu.Unlock()
		r.add(s, stages)
	}
}

// add keeps the trace of send span s with its stages (not kept: they are copied).
func (r *Ring) add(s ringSpan, stages []pendingStage) { r.keepTrace(buildTrace(s, stages)) }

// buildTrace makes the trace of send span s with its stages (not kept: they are copied).
func buildTrace(s ringSpan, stages []pendingStage) Trace {
	t := Trace{
		TraceID:    s.traceID.String(),
		SpanID:     s.spanID.String(),
		Name:       s.name,
		Topic:      strings.TrimPrefix(s.name, telemetry.SpanSendPrefix),
		Start:      s.start,
		DurationUS: micros(s.end.Sub(s.start)),
	}
	for _, kv := range s.attrs {
		switch kv.Key {
		case telemetry.AttrMessagingDestinationName:
			t.Topic = kv.Value.AsString()
		case telemetry.AttrMessagingDestinationTemplate:
			t.Template = kv.Value.AsString()
		case telemetry.AttrMessagingPartitionID:
			t.Partition = kv.Value.Emit()
		case telemetry.AttrMessagingKafkaOffset:
			o := kv.Value.AsInt64()
			t.Offset = &o
		case telemetry.AttrErrorType:
			t.Error = kv.Value.Emit()
		}
	}
	if t.Error == "" && s.status == codes.Error {
		t.Error = s.statusMessage
	}
	t.Stages = make([]Stage, len(stages))
	var request Stage // the last doSend: its node is also its attempt's later stages'
	for i, st := range stages {
		st.stage.StartUS = micros(st.start.Sub(t.Start))
		st.stage.DurationUS = micros(st.end.Sub(st.start))
		if st.stage.Node != nil {
			request = st.stage
		} else if (st.stage.Name == telemetry.SpanCompletedSend || st.stage.Name == telemetry.SpanCompletedReceive) &&
			request.Node != nil && st.stage.Attempt == request.Attempt {
			st.stage.Node = request.Node
		}
		t.Stages[i] = st.stage
		if st.correlation >= 0 && st.stage.Node != nil {
			t.Request = strconv.FormatInt(*st.stage.Node, 10) + "/" + strconv.FormatInt(st.correlation, 10)
		}
	}
	return t
}

// keepTrace keeps t in the ring.
func (r *Ring) keepTrace(t Trace) {
	r.mu.Lock()
	r.traces[r.next] = ringEntry{t: t}
	r.advance()
	r.mu.Unlock()
}

// advance moves to the next slot, counting the trace just kept. r.mu is held.
func (r *Ring) advance() {
	r.next++
	if r.next == len(r.traces) {
		r.next, r.full = 0, true
	}
	r.total++
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Traces returns up to limit of the kept traces, the most recent first (all of them when limit
// is not positive), and how many traces the ring has seen in all.
func (r *Ring) Traces(limit int) (traces []Trace, total uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.traces)
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Trace, 0, limit)
	var spans []telemetry.RecordSpan
	for i := 0; i < limit; i++ {
		e := &r.traces[(r.next-1-i+len(r.traces))%len(r.traces)]
		if e.lazy {
			// A record kept whole: its trace is made now, once.
			spans = e.rec.Spans(spans[:0])
			t, _ := traceOfRecord(spans) // an empty trace if not a record's spans, which cannot happen
			clear(spans)
			*e = ringEntry{t: t}
		}
		if e.t.TraceID == "" {
			continue
		}
		out = append(out, e.t) // Stages are never modified once kept: sharing is safe
	}
	return out, r.total
}

// Capacity returns how many traces the ring keeps.
func (r *Ring) Capacity() int { return len(r.traces) }

// ForceFlush does nothing: the ring exports nowhere.
func (r *Ring) ForceFlush(context.Context) error { return nil }

// Shutdown does nothing: the kept traces stay readable.
func (r *Ring) Shutdown(context.Context) error { return nil }
