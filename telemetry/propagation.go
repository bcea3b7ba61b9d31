package telemetry

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// traceparentLen is the length of a version 00 W3C traceparent: 00-{32 hex}-{16 hex}-{2 hex}.
const traceparentLen = 55

// ContextWithLineTrace returns ctx carrying the trace context of a log line, given as a W3C
// traceparent ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), as a remote parent:
// a record sent with the returned context gets a `send` span that is a child of the line's
// span, and is sampled when the line's context is (parent-based sampling). An empty or invalid
// traceparent returns ctx unchanged, so the sampler decides alone.
func ContextWithLineTrace(ctx context.Context, traceparent []byte) context.Context {
	sc, ok := parseTraceparent(traceparent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// parseTraceparent reads a W3C traceparent. Versions other than 00 are read by their 00
// prefix, as the specification asks; all-zero ids and version ff are invalid.
func parseTraceparent(tp []byte) (trace.SpanContext, bool) {
	if len(tp) < traceparentLen || (len(tp) > traceparentLen && tp[traceparentLen] != '-') ||
		tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var version [1]byte
	if _, err := hex.Decode(version[:], tp[0:2]); err != nil || version[0] == 0xff ||
		(version[0] == 0 && len(tp) != traceparentLen) {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	if !decodeLowerHex(cfg.TraceID[:], tp[3:35]) || !decodeLowerHex(cfg.SpanID[:], tp[36:52]) ||
		!decodeLowerHex(flags[:], tp[53:55]) {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// decodeLowerHex decodes src into dst, accepting only lowercase hex as W3C requires.
func decodeLowerHex(dst, src []byte) bool {
	for _, c := range src {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, src)
	return err == nil
}

// formatTraceparent writes sc as a version 00 traceparent.
func formatTraceparent(sc trace.SpanContext) []byte {
	return appendTraceparent(make([]byte, 0, traceparentLen), sc)
}

// appendTraceparent appends sc's traceparent to b.
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(sc.TraceFlags())})
}

// TraceStateHeader is the record header that carries a traced record's W3C tracestate beside
// its trace context, when it has one: the sampling probability (`ot=th:…`) of a record the
// agent's sampler picked, so that a consumer continuing the trace knows it.
const TraceStateHeader = "tracestate"

// injectTraceContext returns a copy of headers with key set to sc's traceparent, and
// TraceStateHeader to its tracestate when it has one. StartSend calls it only when no valid
// context is there; a header of either name (an invalid context) is replaced rather than
// duplicated. headers belongs to the caller and is not modified.
func injectTraceContext(headers []producer.Header, key string, sc trace.SpanContext) []producer.Header {
	return appendTraceContext(make([]producer.Header, 0, len(headers)+2), headers, key, formatTraceparent(sc), traceStateValue(sc))
}

// traceStateValue is sc's tracestate as a header value; nil when it has none.
func traceStateValue(sc trace.SpanContext) []byte {
	if ts := sc.TraceState(); ts.Len() > 0 {
		return []byte(ts.String())
	}
	return nil
}

// appendTraceContext appends headers to out, with key set to traceparent and TraceStateHeader
// to tracestate unless it is nil (replacing headers of those names, as injectTraceContext does).
func appendTraceContext(out, headers []producer.Header, key string, traceparent, tracestate []byte) []producer.Header {
	for _, h := range headers {
		if h.Key != key && (tracestate == nil || h.Key != TraceStateHeader) {
			out = append(out, h)
		}
	}
	out = append(out, producer.Header{Key: key, Value: traceparent})
	if tracestate != nil {
		out = append(out, producer.Header{Key: TraceStateHeader, Value: tracestate})
	}
	return out
}
