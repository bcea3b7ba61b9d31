package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// wakeupsRate is the steady rate the wakeups section writes at: 500 lines a burst, 10 bursts a
// second, the rate the target is stated at.
const wakeupsRate = 5000

// wakeups measures what a steady log costs the agent in goroutine wakeups: the agent with its
// defaults follows a log written at wakeupsRate lines/s (the steady section's writer) with an
// execution trace on (KAFKATRAIL_EXECTRACE), and the trace is read back: every goroutine that
// went from waiting to runnable in the window counts, attributed to where it waited. The
// execution trace costs CPU, so the steady section's figures come from runs without it.
func (b *bench) wakeups() error {
	if b.prm.SteadySeconds < 10 {
		return fmt.Errorf("the wakeups section needs BENCH_STEADY_SECONDS ≥ 10, not %d", b.prm.SteadySeconds)
	}
	for rep := 1; rep <= b.prm.Runs; rep++ {
		if b.ctx.Err() != nil {
			return errStopped
		}
		r := b.steadyRun("agent", wakeupsRate, rep, true)
		b.record(r)
		logf("wakeups rep %d: %.1f a burst of %d lines (%v) %s", rep, r.Extra["wakeups_a_burst"],
			wakeupsRate/10, r.Extra["wakeups_by_place"], r.Error)
		b.pause()
	}
	return nil
}

// wakeupWindow is the part of the agent's execution trace that is counted: from 3 s after its
// first event (the agent started, the writer 1 s after it, 2 s to settle) for the writer's
// seconds less 5, well inside the writing on both ends.
func wakeupWindow(steadySeconds int) (from, length time.Duration) {
	return 3 * time.Second, time.Duration(steadySeconds-5) * time.Second
}

// wakeupCount is what countWakeups read from a trace.
type wakeupCount struct {
	Wakeups int            // goroutines made runnable from waiting in the window
	Created int            // goroutines started in the window (the tracer's left out)
	ByPlace map[string]int // wakeups by where the goroutine waited (placeOf)
}

// countWakeups reads an execution trace and counts, in [from, from+length) after its first
// event, the goroutines that went from waiting to runnable, each attributed to the place it
// waited at (the stack of its last transition to waiting).
func countWakeups(path string, from, length time.Duration) (wakeupCount, error) {
	c := wakeupCount{ByPlace: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	rd, err := trace.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return c, err
	}
	// waitedAt is where each goroutine last began to wait, startedAt where it started: the
	// place of a wait whose stack the trace does not give (a goroutine waiting when a new
	// generation of the trace began, which the trace states again without a stack).
	waitedAt := map[trace.GoID]string{}
	startedAt := map[trace.GoID]string{}
	var t0 trace.Time
	var last time.Duration
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, err
		}
		if t0 == 0 {
			t0 = ev.Time()
		}
		at := ev.Time().Sub(t0)
		last = at
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		fromState, to := st.Goroutine()
		in := at >= from && at < from+length
		switch {
		case fromState == trace.GoNotExist:
			place, ours := placeOf(st.Stack)
			startedAt[id] = place
			if in && ours {
				c.Created++
			}
		case to == trace.GoWaiting && fromState != trace.GoUndetermined:
			if place, _ := placeOf(st.Stack); place != "" {
				waitedAt[id] = place
			}
		case fromState == trace.GoWaiting && to == trace.GoRunnable && in:
			place := waitedAt[id]
			if place == "" {
				place = startedAt[id]
			}
			if place == tracerPlace {
				continue // the execution trace's own goroutines
			}
			if place == "" {
				place = "(unknown)"
			}
			c.Wakeups++
			c.ByPlace[place]++
		}
	}
	if last < from+length {
		return c, fmt.Errorf("the trace ends %v after its start, before the window's end (%v)", last.Round(time.Millisecond), from+length)
	}
	return c, nil
}

// tracerPlace is placeOf's name for the execution tracer's own goroutines and waits, which a run
// without the trace does not have: they are not counted.
const tracerPlace = "(tracer)"

// placeOf names where a goroutine waited (or started): the innermost frame of the project's own
// code (github.com/kafkatrail/kafkatrail/...), else the innermost frame outside the runtime,
// else the innermost frame; tracerPlace for the execution tracer's; "" for no stack. ours is
// false only for the tracer's.
func placeOf(s trace.Stack) (place string, ours bool) {
	var first, outside string
	for fr := range s.Frames() {
		name := fr.Func
		if strings.HasPrefix(name, "runtime.trace") || strings.HasPrefix(name, "runtime/trace.") ||
			strings.HasPrefix(name, "runtime.(*trace") {
			return tracerPlace, false
		}
		if first == "" {
			first = name
		}
		if place == "" && strings.HasPrefix(name, "github.com/kafkatrail/kafkatrail/") {
			place = shortFunc(name)
		}
		if outside == "" && !strings.HasPrefix(name, "runtime.") && !strings.HasPrefix(name, "internal/") &&
			!strings.HasPrefix(name, "sync.") && !strings.HasPrefix(name, "time.") {
			outside = name
		}
	}
	switch {
	case place != "":
	case outside != "":
		place = shortFunc(outside)
	case first != "":
		place = shortFunc(first)
	}
	return place, true
}

// shortFunc drops a function name's module path: "network.(*Selector).Poll".
func shortFunc(name string) string {
	name = strings.TrimPrefix(name, "github.com/kafkatrail/kafkatrail/")
	if i := strings.LastIndex(name, "/"); i >= 0 && !strings.Contains(name[:i], ".") {
		name = name[i+1:]
	}
	return name
}

// addWakeups reads a wakeups run's trace into the run's extras: wakeups_a_burst and
// wakeups_by_place (each place's wakeups a burst, the largest first).
func addWakeups(r *Run, path string, steadySeconds, rate int) {
	from, length := wakeupWindow(steadySeconds)
	c, err := countWakeups(path, from, length)
	if err != nil {
		r.Error = "execution trace: " + err.Error()
		return
	}
	bursts := length.Seconds() * 10 // the writer's 10 bursts a second
	r.Extra["wakeups_a_burst"] = float64(c.Wakeups) / bursts
	r.Extra["goroutines_started_a_burst"] = float64(c.Created) / bursts
	places := make([]string, 0, len(c.ByPlace))
	for p := range c.ByPlace {
		places = append(places, p)
	}
	sort.Slice(places, func(i, j int) bool {
		if c.ByPlace[places[i]] != c.ByPlace[places[j]] {
			return c.ByPlace[places[i]] > c.ByPlace[places[j]]
		}
		return places[i] < places[j]
	})
	// Places below one wakeup in 20 bursts are summed as "(other)".
	by := make([]map[string]any, 0, len(places))
	var other float64
	for _, p := range places {
		if v := float64(c.ByPlace[p]) / bursts; v >= 0.05 {
			by = append(by, map[string]any{"place": p, "a_burst": v})
		} else {
			other += v
		}
	}
	if other > 0 {
		by = append(by, map[string]any{"place": "(other)", "a_burst": other})
	}
	r.Extra["wakeups_by_place"] = by
}

// execTracePath is where a wakeups run's agent writes its execution trace: not beside the log,
// whose directory the agent watches, or the trace's own writes would wake the watch.
func execTracePath(dir string) string { return filepath.Join(dir, "trace", "agent.trace") }

// wakeupsRuns are the good runs of the wakeups section.
func (r *Report) wakeupsRuns() []Run {
	var runs []Run
	for _, run := range r.Runs {
		if run.Section == "wakeups" && run.OK {
			if _, ok := run.Extra["wakeups_a_burst"].(float64); ok {
				runs = append(runs, run)
			}
		}
	}
	return runs
}

// wakeupsMedian is the median wakeups a burst of the good runs, and how many there were.
func (r *Report) wakeupsMedian() (float64, int) {
	runs := r.wakeupsRuns()
	xs := make([]float64, 0, len(runs))
	for _, run := range runs {
		xs = append(xs, run.Extra["wakeups_a_burst"].(float64))
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return median(xs), len(xs)
}

// wakeupsTarget writes the section's target line: at most 6 wakeups a burst of 500 lines.
func (r *Report) wakeupsTarget(w func(string, ...any)) {
	m, n := r.wakeupsMedian()
	if n == 0 {
		return
	}
	w("| a steady log at %d lines/s (bursts of %d lines), the agent with its defaults: ≤ 6 goroutine wakeups a burst | %.1f %s |\n",
		wakeupsRate, wakeupsRate/10, m, map[bool]string{true: "✅", false: "❌"}[m <= 6])
}

// writeWakeups writes the wakeups section: the median wakeups a burst and, from the median
// run, where the goroutines waited.
func (r *Report) writeWakeups(w func(string, ...any)) {
	runs := r.wakeupsRuns()
	if len(runs) == 0 {
		return
	}
	m, _ := r.wakeupsMedian()
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].Extra["wakeups_a_burst"].(float64) < runs[j].Extra["wakeups_a_burst"].(float64)
	})
	mid := runs[len(runs)/2]
	from, length := wakeupWindow(r.Params.SteadySeconds)
	w("## Wakeups: what a burst of lines costs in goroutines woken\n\n")
	w("The steady section's writer at %d lines/s (10 bursts of %d lines a second, for %d s), followed by the agent with its defaults (telemetry on, exported to `otlpsink`) with an execution trace on (`KAFKATRAIL_EXECTRACE`), read back with golang.org/x/exp/trace (bench/cmd/runbench/wakeups.go): every goroutine that went from waiting to runnable between %v and %v after the trace's start (the writer writing throughout) counts, divided by the bursts in that window, and is attributed to where it waited (the innermost function of the agent's own code on its stack). The execution tracer's own goroutines are left out; its cost is why the steady section's CPU comes from runs without it. Each wakeup is a trip through the scheduler, and at a steady rate they, not the lines, decide the CPU.\n\n",
		wakeupsRate, wakeupsRate/10, r.Params.SteadySeconds, from, from+length)
	w("**%.1f wakeups a burst** (median of %d runs; goroutines started: %.2f a burst). Where they waited, in the median run:\n\n", m, len(runs),
		mid.Extra["goroutines_started_a_burst"])
	w("| waited in | wakeups a burst |\n|---|--:|\n")
	if by, ok := mid.Extra["wakeups_by_place"].([]map[string]any); ok {
		for _, p := range by {
			w("| `%v` | %.2f |\n", p["place"], p["a_burst"])
		}
	} else if by, ok := mid.Extra["wakeups_by_place"].([]any); ok { // read back from the JSON
		for _, e := range by {
			if p, ok := e.(map[string]any); ok {
				w("| `%v` | %.2f |\n", p["place"], p["a_burst"])
			}
		}
	}
	w("\n")
}
