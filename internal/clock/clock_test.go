package clock

import (
	"testing"
	"time"
)

// The clock follows time.Now: a reading lies between two time.Now readings taken around it, in
// wall time and in monotonic time.
func TestNowBetweenTimeNow(t *testing.T) {
	var c Clock
	for i := range 10000 {
		before := time.Now()
		got := c.Now()
		after := time.Now()
		if got.Sub(before) < 0 || after.Sub(got) < 0 {
			t.Fatalf("reading %d: monotonic %v not within [%v, %v]", i, got, before, after)
		}
		// Wall time: the base was taken by time.Now at most rebaseEvery ago, so the only error
		// is the monotonic clock's drift against the wall clock since then.
		if w := got.Round(0); w.Before(before.Round(0).Add(-time.Millisecond)) || w.After(after.Round(0).Add(time.Millisecond)) {
			t.Fatalf("reading %d: wall %v not within [%v, %v] ±1ms", i, w, before.Round(0), after.Round(0))
		}
	}
}

// Readings never go backwards, across a rebase too.
func TestNowMonotonic(t *testing.T) {
	var c Clock
	prev := c.Now()
	first := prev
	deadline := time.Now().Add(3 * rebaseEvery)
	for n := 0; time.Now().Before(deadline); n++ {
		got := c.Now()
		if got.Before(prev) {
			t.Fatalf("reading %d went back: %v after %v", n, got, prev)
		}
		prev = got
	}
	if prev.Sub(first) < 2*rebaseEvery {
		t.Fatalf("the clock advanced %v over %v of reading", prev.Sub(first), 3*rebaseEvery)
	}
}

func BenchmarkClockNow(b *testing.B) {
	var c Clock
	for b.Loop() {
		_ = c.Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now()
	}
}
