// Package otlptrace is the agent's own OTLP trace pipeline: spans as plain data (Span), their
// encoding straight to OTLP protobuf (TraceEncoder), and the exporter that sends the requests
// over gRPC or HTTP, configured from the OTEL_EXPORTER_OTLP_* variables as the SDK's OTLP
// trace exporters are (Exporter, ConfigFromEnv). The telemetry package makes the spans.
package otlptrace

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// RecordsScope is the instrumentation scope of the spans whose Scope is nil: the producer's
// records' (telemetry.InstrumentationName).
const RecordsScope = "github.com/kafkatrail/kafkatrail"

// Span is one finished span as the direct path builds it: plain data, encoded straight
// to OTLP (TraceEncoder) with no SDK span, read-only span or protobuf struct in between. A traced
// record's spans are known in full when it completes, so they are made finished, all at once.
// Spans of the tracer path (connections, Metadata) are converted to it on their way to the
// same exporter.
type Span struct {
	TraceID      trace.TraceID
	SpanID       trace.SpanID
	ParentSpanID trace.SpanID // zero: a root span
	// ParentRemote is set when the parent came from another process (a log line's context).
	ParentRemote bool
	Flags        trace.TraceFlags
	TraceState   string // W3C tracestate, as it goes on the wire
	Name         string
	Kind         trace.SpanKind
	Start, End   int64 // Unix nanoseconds
	// Attributes go out as given, in order; a receiver may keep the slice: it is not written
	// after the span is handed over.
	Attributes []attribute.KeyValue
	Links      []Link
	Events     []sdktrace.Event // the tracer path's only
	Status     codes.Code
	// StatusMessage is the status description (only an Error status carries one).
	StatusMessage string
	// Scope is the instrumentation scope; nil means RecordsScope's, the records' own.
	Scope *instrumentation.Scope
	// Dropped counts of the tracer path's spans (limits of its SDK).
	DroppedAttributes, DroppedEvents, DroppedLinks int

	// Encoded, when set, is the OTLP encoding of Attributes[:Encoded.n], made once for an
	// attribute list that many spans share (a topic's, an attempt's, a request's): the encoder
	// copies it instead of encoding those attributes again. Only the producer's spans have one.
	Encoded *AttrBlock
}

// AttrBlock is an attribute list encoded as a Span's attributes field (repeated KeyValue 9).
type AttrBlock struct {
	n int // how many attributes it encodes, from the start of the list
	b []byte
}

// NewAttrBlock encodes attrs, which must never change afterwards.
func NewAttrBlock(attrs []attribute.KeyValue) *AttrBlock {
	return &AttrBlock{n: len(attrs), b: appendAttrs(make([]byte, 0, attrsSize(fSpanAttributes, attrs)), fSpanAttributes, attrs)}
}

// Link is a link from a Span to another span.
type Link struct {
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	TraceState string
	Flags      trace.TraceFlags
	Remote     bool
	Attributes []attribute.KeyValue
}
