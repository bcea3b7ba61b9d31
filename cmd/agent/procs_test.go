package main

import "testing"

// TestProcsGovernor: the agent goes to one P after procsQuietIntervals quiet intervals in a
// row (a busier one in between starts the count again), back to the default at the first busy
// one, and stays where it is in between.
func TestProcsGovernor(t *testing.T) {
	var calls []string
	g := &procsGovernor{
		set:     func(n int) int { calls = append(calls, "one"); return 2 },
		restore: func() { calls = append(calls, "default") },
	}
	feed := func(cores ...float64) {
		for _, c := range cores {
			g.observe(c)
		}
	}
	feed(0.1, 0.1, 0.1, 0.1, 0.4) // four quiet, then a middling one: the count starts again
	feed(0.1, 0.1, 0.1, 0.1)
	if len(calls) != 0 {
		t.Fatalf("after four quiet intervals in a row: %v", calls)
	}
	feed(0.05)
	if len(calls) != 1 || calls[0] != "one" || !g.one {
		t.Fatalf("after five quiet intervals: %v", calls)
	}
	feed(0.4, 0.5, 0.1) // between the thresholds: stays on one P
	if len(calls) != 1 {
		t.Fatalf("a middling load changed it: %v", calls)
	}
	feed(0.9)
	if len(calls) != 2 || calls[1] != "default" || g.one {
		t.Fatalf("a busy interval on one P: %v", calls)
	}
	feed(0.4, 0.4, 0.4, 0.4, 0.4, 0.4)
	if len(calls) != 2 {
		t.Fatalf("a middling load on the default went to one P: %v", calls)
	}
}
