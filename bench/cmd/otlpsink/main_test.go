package main

import (
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestCountItems: the protowire walk counts what decoding would, across resources and scopes.
func TestCountItems(t *testing.T) {
	req := &coltrace.ExportTraceServiceRequest{}
	want := 0
	for r := range 3 {
		rs := &tracepb.ResourceSpans{SchemaUrl: "s"}
		for s := range r + 1 {
			ss := &tracepb.ScopeSpans{SchemaUrl: "s"}
			for range 5 * (s + 1) {
				ss.Spans = append(ss.Spans, &tracepb.Span{Name: "n", TraceId: make([]byte, 16), SpanId: make([]byte, 8)})
				want++
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := countItems(b)
	if err != nil || got != int64(want) {
		t.Fatalf("countItems = %d, %v; want %d", got, err, want)
	}
	if _, err := countItems(b[:len(b)-3]); err == nil {
		t.Error("a truncated request was counted without an error")
	}
}
