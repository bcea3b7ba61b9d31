package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestExponentialBackoffRanges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	b := New(50*time.Millisecond, 2, time.Second, 0.2, rnd)
	tests := []struct {
		attempts int
		term     time.Duration // before jitter
	}{
		{0, 50 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second}, // 1600ms, capped
		{30, time.Second},
	}
	for _, tt := range tests {
		lo, hi := time.Duration(float64(tt.term)*0.8), time.Duration(float64(tt.term)*1.2)
		hi = min(hi, time.Second)
		if tt.attempts >= 5 {
			// The term stops growing at max, jitter applies to max and the result is capped.
			lo = 800 * time.Millisecond
		}
		seenLow, seenHigh := false, false
		for range 2000 {
			d := b.Backoff(tt.attempts)
			if d < lo || d > hi {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.attempts, d, lo, hi)
			}
			mid := (lo + hi) / 2
			seenLow = seenLow || d < mid
			seenHigh = seenHigh || d > mid
		}
		if tt.attempts < 5 && (!seenLow || !seenHigh) {
			t.Fatalf("backoff(%d) shows no jitter", tt.attempts)
		}
	}
}

func TestExponentialBackoffWithoutRoom(t *testing.T) {
	// max <= initial: the Java class returns initial, without jitter.
	b := New(time.Second, 2, time.Second, 0.2, rand.New(rand.NewPCG(1, 1)))
	for i := range 5 {
		if d := b.Backoff(i); d != time.Second {
			t.Fatalf("backoff(%d) = %v", i, d)
		}
	}
}
