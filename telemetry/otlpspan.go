package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
)

// attrList is an attribute list with its encoding, when it has one.
type attrList struct {
	kvs []attribute.KeyValue
	enc *otlptrace.AttrBlock
}

// RecordSpan is one finished span as the direct path builds it: plain data, encoded straight
// to OTLP with no SDK span, read-only span or protobuf struct in between (internal/otlptrace).
type RecordSpan = otlptrace.Span

// RecordLink is a link from a RecordSpan to another span.
type RecordLink = otlptrace.Link

// RecordSpanProcessor is a span processor that takes a traced record's spans as RecordSpans,
// in one call, instead of as SDK read-only spans: Setup's exporter and the status page's ring
// are ones. Processors that are not get read-only views of the same spans. The slice (not
// the attribute slices inside its spans) is reused once the call returns: copy what is kept.
// It runs on the goroutine that completes the record (the producer's sender) and must not block.
type RecordSpanProcessor interface {
	OnEndRecordSpans(spans []RecordSpan)
}

// TracedRecordProcessor is a span processor that takes a traced record whole, as values, and
// makes its spans (TracedRecord.Spans) when and where it chooses: Setup's exporter makes them
// on its export goroutine, the status page's ring when the page is read. It runs on the
// goroutine that completes the record (the producer's sender), must not block, and must copy
// the record (*r): it is reused once the call returns.
type TracedRecordProcessor interface {
	OnEndTracedRecord(r *TracedRecord)
}

// recordSink hands a traced record to processors: whole to those that take one, as
// RecordSpans to those that take them, as read-only views of the same spans (made once for
// all of them) to the others.
type recordSink struct {
	records []TracedRecordProcessor
	direct  []RecordSpanProcessor
	sdk     []sdktrace.SpanProcessor
	res     *resource.Resource
}

// newRecordSink returns the sink for procs (a fanOut's are taken apart), or nil for none.
func newRecordSink(res *resource.Resource, procs ...sdktrace.SpanProcessor) *recordSink {
	s := &recordSink{res: res}
	var add func(procs []sdktrace.SpanProcessor)
	add = func(procs []sdktrace.SpanProcessor) {
		for _, p := range procs {
			switch p := p.(type) {
			case nil:
			case fanOutProcessor:
				add(p)
			case TracedRecordProcessor:
				s.records = append(s.records, p)
			case RecordSpanProcessor:
				s.direct = append(s.direct, p)
			default:
				s.sdk = append(s.sdk, p)
			}
		}
	}
	add(procs)
	if len(s.records) == 0 && len(s.direct) == 0 && len(s.sdk) == 0 {
		return nil
	}
	return s
}

// onEndTracedRecord hands record r to every processor, making its spans for those that take
// spans.
func (s *recordSink) onEndTracedRecord(r *TracedRecord) {
	for _, p := range s.records {
		p.OnEndTracedRecord(r)
	}
	if len(s.direct) == 0 && len(s.sdk) == 0 {
		return
	}
	ps := recordSpansPool.Get().(*[]RecordSpan)
	spans := r.appendSpans((*ps)[:0], nil, false) // no arena: the processors may keep the attribute lists
	s.OnEndRecordSpans(spans)
	clear(spans)
	*ps = spans[:0]
	recordSpansPool.Put(ps)
}

// OnEndRecordSpans hands spans to every processor that takes spans.
func (s *recordSink) OnEndRecordSpans(spans []RecordSpan) {
	for _, p := range s.direct {
		p.OnEndRecordSpans(spans)
	}
	if len(s.sdk) > 0 {
		ro := readOnlySpans(spans, s.res)
		for _, p := range s.sdk {
			for _, r := range ro {
				p.OnEnd(r)
			}
		}
	}
}

// recordSpanOf converts a span of the tracer path (an SDK read-only span) into a RecordSpan.
func recordSpanOf(s sdktrace.ReadOnlySpan) RecordSpan {
	sc, parent := s.SpanContext(), s.Parent()
	scope := s.InstrumentationScope()
	st := s.Status()
	r := RecordSpan{
		TraceID: sc.TraceID(), SpanID: sc.SpanID(), ParentSpanID: parent.SpanID(), ParentRemote: parent.IsRemote(),
		Flags: sc.TraceFlags(), TraceState: sc.TraceState().String(), Name: s.Name(), Kind: s.SpanKind(),
		Start: unixNanos(s.StartTime()), End: unixNanos(s.EndTime()), Attributes: s.Attributes(),
		Events: s.Events(), Status: st.Code, StatusMessage: st.Description,
		DroppedAttributes: s.DroppedAttributes(), DroppedEvents: s.DroppedEvents(), DroppedLinks: s.DroppedLinks(),
	}
	if scope.Name != InstrumentationName || scope.Version != "" || scope.SchemaURL != "" || scope.Attributes.Len() > 0 {
		r.Scope = &scope // the records' own scope stays nil: their spans share a ScopeSpans
	}
	if ls := s.Links(); len(ls) > 0 {
		r.Links = make([]RecordLink, len(ls))
		for i, l := range ls {
			r.Links[i] = RecordLink{TraceID: l.SpanContext.TraceID(), SpanID: l.SpanContext.SpanID(),
				TraceState: l.SpanContext.TraceState().String(), Flags: l.SpanContext.TraceFlags(),
				Remote: l.SpanContext.IsRemote(), Attributes: l.Attributes}
		}
	}
	return r
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// readOnlyRecordSpan shows a RecordSpan as an SDK read-only span, for the processors and
// exporters that take only those (a user's ExtraSpanProcessor, the console exporter).
// Embedding the interface (nil) supplies its unexported method; every other one is defined.
type readOnlyRecordSpan struct {
	sdktrace.ReadOnlySpan
	s   RecordSpan
	res *resource.Resource
}

// readOnlySpans converts spans, for a processor or exporter that takes only SDK spans.
func readOnlySpans(spans []RecordSpan, res *resource.Resource) []sdktrace.ReadOnlySpan {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i := range spans {
		out[i] = &readOnlyRecordSpan{s: spans[i], res: res}
	}
	return out
}

func (r *readOnlyRecordSpan) Name() string { return r.s.Name }

func (r *readOnlyRecordSpan) SpanContext() trace.SpanContext {
	return r.context(r.s.TraceID, r.s.SpanID, r.s.Flags, r.s.TraceState, false)
}

func (r *readOnlyRecordSpan) Parent() trace.SpanContext {
	if !r.s.ParentSpanID.IsValid() {
		return trace.SpanContext{}
	}
	return r.context(r.s.TraceID, r.s.ParentSpanID, r.s.Flags, r.s.TraceState, r.s.ParentRemote)
}

func (*readOnlyRecordSpan) context(tid trace.TraceID, sid trace.SpanID, f trace.TraceFlags, ts string, remote bool) trace.SpanContext {
	state, _ := trace.ParseTraceState(ts)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: f, TraceState: state, Remote: remote})
}

func (r *readOnlyRecordSpan) SpanKind() trace.SpanKind { return r.s.Kind }

func (r *readOnlyRecordSpan) StartTime() time.Time { return time.Unix(0, r.s.Start) }

func (r *readOnlyRecordSpan) EndTime() time.Time { return time.Unix(0, r.s.End) }

func (r *readOnlyRecordSpan) Attributes() []attribute.KeyValue { return r.s.Attributes }

func (r *readOnlyRecordSpan) Links() []sdktrace.Link {
	if len(r.s.Links) == 0 {
		return nil
	}
	out := make([]sdktrace.Link, len(r.s.Links))
	for i, l := range r.s.Links {
		out[i] = sdktrace.Link{SpanContext: r.context(l.TraceID, l.SpanID, l.Flags, l.TraceState, l.Remote), Attributes: l.Attributes}
	}
	return out
}

func (r *readOnlyRecordSpan) Events() []sdktrace.Event { return r.s.Events }

func (r *readOnlyRecordSpan) Status() sdktrace.Status {
	return sdktrace.Status{Code: r.s.Status, Description: r.s.StatusMessage}
}

func (r *readOnlyRecordSpan) InstrumentationScope() instrumentation.Scope {
	if r.s.Scope != nil {
		return *r.s.Scope
	}
	return instrumentation.Scope{Name: InstrumentationName}
}

//nolint:staticcheck // the interface still has it
func (r *readOnlyRecordSpan) InstrumentationLibrary() instrumentation.Library {
	return r.InstrumentationScope()
}

func (r *readOnlyRecordSpan) Resource() *resource.Resource { return r.res }

func (r *readOnlyRecordSpan) DroppedAttributes() int { return r.s.DroppedAttributes }

func (r *readOnlyRecordSpan) DroppedLinks() int { return r.s.DroppedLinks }

func (r *readOnlyRecordSpan) DroppedEvents() int { return r.s.DroppedEvents }

// ChildSpanCount is not kept: nothing exports it.
func (r *readOnlyRecordSpan) ChildSpanCount() int { return 0 }

// TraceEncoder encodes RecordSpans as OTLP ExportTraceServiceRequests, as Setup's exporter
// sends them (internal/otlptrace). It is exported for the bench module's comparison of
// encoders, and for anyone with RecordSpans to send.
type TraceEncoder = otlptrace.TraceEncoder

// NewTraceEncoder returns an encoder of spans of res (the process's resource, written once).
func NewTraceEncoder(res *resource.Resource) *TraceEncoder { return otlptrace.NewTraceEncoder(res) }
