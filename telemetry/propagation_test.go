package telemetry

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

func TestTraceparentParsing(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true, true}, // a later version, read as 00
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false, false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false, false},
		{"", false, false},
	} {
		ctx := ContextWithLineTrace(context.Background(), []byte(tc.in))
		sc := trace.SpanContextFromContext(ctx)
		if sc.IsValid() != tc.ok || (tc.ok && (sc.IsSampled() != tc.sampled || !sc.IsRemote())) {
			t.Errorf("%q: valid %v sampled %v remote %v; want valid %v sampled %v", tc.in, sc.IsValid(), sc.IsSampled(), sc.IsRemote(), tc.ok, tc.sampled)
		}
		if tc.ok && tc.in[:2] == "00" {
			if got := string(formatTraceparent(sc)); got != tc.in {
				t.Errorf("format(parse(%q)) = %q", tc.in, got)
			}
		}
	}
}

func TestInjectDoesNotTouchTheCallersHeaders(t *testing.T) {
	sc, _ := parseTraceparent([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	in := make([]producer.Header, 2, 8) // spare capacity an append would write into
	in[0] = producer.Header{Key: "traceparent", Value: []byte("line")}
	in[1] = producer.Header{Key: "a", Value: []byte("b")}
	out := injectTraceContext(in, "traceparent", sc)
	if string(in[0].Value) != "line" || len(in) != 2 || in[:3][2].Key != "" {
		t.Fatalf("caller's headers changed: %v", in[:3])
	}
	if len(out) != 2 || out[0].Key != "a" || out[1].Key != "traceparent" || len(out[1].Value) != traceparentLen {
		t.Fatalf("injected headers %v", out)
	}
}

// TestTracedSendHeaders: a traced record's headers are its own, in order, with its traceparent
// (its send span's context) last; the caller's slice is not touched; and with up to two headers
// of its own (the agent's source.host and source.path) StartSend allocates only the record's
// token.
func TestTracedSendHeaders(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	for n := range 5 {
		var in []producer.Header
		for i := range n {
			in = append(in, producer.Header{Key: fmt.Sprint("h", i), Value: []byte("v")})
		}
		r := &producer.Record{Topic: "orders", Value: []byte("v"), Headers: in}
		rt, out := h.obs.StartSend(context.Background(), r, time.Now())
		if rt == nil {
			t.Fatal("record not traced under always_on")
		}
		if len(r.Headers) != n || (n > 0 && &r.Headers[0] != &in[0]) {
			t.Fatalf("%d headers: the record's headers changed", n)
		}
		if len(out) != n+1 || out[n].Key != "traceparent" {
			t.Fatalf("%d headers: out %v", n, out)
		}
		for i := range n {
			if out[i].Key != in[i].Key {
				t.Fatalf("%d headers: out %v", n, out)
			}
		}
		if sc, ok := parseTraceparent(out[n].Value); !ok || sc.SpanID() != traceSpan(rt).SpanID() || sc.TraceID() != traceSpan(rt).TraceID() {
			t.Fatalf("%d headers: traceparent %q, send span %v", n, out[n].Value, traceSpan(rt))
		}
		allocs := testing.AllocsPerRun(100, func() { h.obs.StartSend(context.Background(), r, time.Now()) })
		if want := 1.0; n <= 2 && allocs != want {
			t.Errorf("%d headers: %v allocations a traced StartSend, want %v (the token)", n, allocs, want)
		}
	}
}
