package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Attribute keys the log handler adds.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// LogHandler wraps a slog.Handler: a record logged with a context that carries a span (say
// logger.InfoContext(ctx, ...) inside a traced operation) gets trace_id and span_id attributes,
// so logs and traces join in the backend. Records without one pass through untouched.
type LogHandler struct {
	next slog.Handler
}

// NewLogHandler returns h wrapped so that records carry the current trace.
func NewLogHandler(h slog.Handler) *LogHandler { return &LogHandler{next: h} }

// Enabled reports whether the wrapped handler handles level.
func (h *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds trace_id and span_id when ctx carries a valid span context. They are added at
// the record's top level unless the handler was grouped with WithGroup, in which case they
// land in the group, like every attribute added after it.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// Clone: the record's attributes may share storage with the caller's copy.
		r = r.Clone()
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns the wrapped handler with attrs, still adding the trace.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns the wrapped handler with the group, still adding the trace.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name)}
}
