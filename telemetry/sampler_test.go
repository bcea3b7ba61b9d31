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

// TestRootCountdownIsACoinPerRecord: the countdown's picks must be what independent coins
// would give, not merely the right share: the gaps between picks have the geometric
// distribution's mean 1/p and variance (1-p)/p², and about a share p of them are 1 (a fixed
// period, or a uniform gap, of the same mean fails both).
func TestRootCountdownIsACoinPerRecord(t *testing.T) {
	for _, p := range []float64{0.01, 0.3} {
		c := newRootCountdown(p)
		var gaps []float64
		last := 0
		for i := 1; len(gaps) < 20_000; i++ {
			if c.next() {
				gaps = append(gaps, float64(i-last))
				last = i
			}
		}
		var sum, ones float64
		for _, g := range gaps {
			sum += g
			if g == 1 {
				ones++
			}
		}
		n := float64(len(gaps))
		mean := sum / n
		var ss float64
		for _, g := range gaps {
			ss += (g - mean) * (g - mean)
		}
		variance := ss / (n - 1)
		wantMean, wantVar := 1/p, (1-p)/(p*p)
		// The mean of n gaps has standard deviation sqrt(var/n); allow 5 of them.
		if d := math.Abs(mean - wantMean); d > 5*math.Sqrt(wantVar/n) {
			t.Errorf("p=%v: mean gap %.3f, want %.3f", p, mean, wantMean)
		}
		if r := variance / wantVar; r < 0.9 || r > 1.1 {
			t.Errorf("p=%v: gap variance %.1f, want %.1f (geometric)", p, variance, wantVar)
		}
		if sigma := math.Sqrt(n * p * (1 - p)); math.Abs(ones-p*n) > 5*sigma {
			t.Errorf("p=%v: %v gaps of 1 in %v, want %.0f ± %.0f", p, ones, n, p*n, 5*sigma)
		}
	}
	if c := newRootCountdown(1); !c.next() || !c.next() {
		t.Error("p=1: a record not picked")
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
