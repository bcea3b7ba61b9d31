package telemetry

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// TestStartSendRootsAtTheRatio checks the observer's own decision for roots against the SDK
// sampler it stands for: the share of sampled records is the ratio (within five standard
// deviations), every sampled trace id is one TraceIDRatioBased at that ratio samples too (a
// downstream sampler of the ratio agrees), and its high half is random.
func TestStartSendRootsAtTheRatio(t *testing.T) {
	const p, n = 0.3, 20_000
	h := newHarness(t, newParentRatio(p))
	sdk := sdktrace.TraceIDRatioBased(p)
	r := &producer.Record{Topic: "orders", Value: []byte("v")}
	sampled := 0
	highs := map[uint64]bool{}
	for range n {
		rt, _ := h.obs.StartSend(t.Context(), r, time.Now())
		tr, ok := rt.(*recordTrace)
		if !ok || tr == nil {
			continue
		}
		sampled++
		id := tr.sc.TraceID()
		if d := sdk.ShouldSample(sdktrace.SamplingParameters{TraceID: id}).Decision; d != sdktrace.RecordAndSample {
			t.Fatalf("TraceIDRatioBased(%v) does not sample %s", p, id)
		}
		highs[binary.BigEndian.Uint64(id[:8])] = true
	}
	if sigma := math.Sqrt(n * p * (1 - p)); math.Abs(float64(sampled)-p*n) > 5*sigma {
		t.Errorf("%d of %d sampled, want %.0f ± %.0f", sampled, n, p*n, 5*sigma)
	}
	if delete(highs, 0); len(highs) < sampled-1 {
		t.Errorf("high halves of %d trace ids: %d distinct non-zero", sampled, len(highs))
	}
}

// TestStartSendRootTraceIDs checks that a sampled root record's trace uses all 128 bits.
func TestStartSendRootTraceIDs(t *testing.T) {
	h := newHarness(t, newParentRatio(1))
	r := &producer.Record{Topic: "orders", Value: []byte("v")}
	seen := map[trace.TraceID]bool{}
	for range 50 {
		rt, _ := h.obs.StartSend(t.Context(), r, time.Now())
		tr, ok := rt.(*recordTrace)
		if !ok || tr == nil {
			t.Fatal("ratio 1: record not traced")
		}
		id := tr.sc.TraceID()
		if binary.BigEndian.Uint64(id[:8]) == 0 {
			t.Fatalf("trace id %s: upper 64 bits zero", id)
		}
		seen[id] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct trace ids of 50", len(seen))
	}
}
