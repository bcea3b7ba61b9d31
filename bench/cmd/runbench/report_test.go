package main

import (
	"strings"
	"testing"
)

func TestParsePerfLastLine(t *testing.T) {
	out := `1 records sent, 0.2 records/sec (0.00 MB/sec), 12.0 ms avg latency, 12.0 ms max latency.
2000000 records sent, 467289.7 records/sec (44.56 MB/sec), 43.91 ms avg latency, 310.00 ms max latency, 38 ms 50th, 86 ms 95th, 114 ms 99th, 145 ms 99.9th.
`
	r := Run{Records: 2000000}
	if err := r.parsePerf(out); err != nil {
		t.Fatal(err)
	}
	if r.ToolRecordsPerSec != 467289.7 || r.Latency.P50 != 38 || r.Latency.P99 != 114 || r.Latency.P999 != 145 || r.Latency.Max != 310 {
		t.Fatalf("parsed %+v %+v", r, *r.Latency)
	}
	if err := (&Run{Records: 5}).parsePerf(out); err == nil {
		t.Fatal("a count that differs from --num-records must fail the run")
	}
	if err := (&Run{Records: 5}).parsePerf("Exception in thread main"); err == nil {
		t.Fatal("no summary line must fail the run")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSummarizeRatiosAndTargets(t *testing.T) {
	r := &Report{Params: Params{Runs: 2, Records: 10, FileLines: 10}, Env: map[string]string{}}
	add := func(tool string, rep int, rps float64, ok bool) {
		r.Runs = append(r.Runs, Run{Section: "producers", Tool: tool, Cell: headlineCell, Rep: rep, OK: ok, Records: 10,
			RecordsPerSec: rps, CPUSec: 1})
	}
	add("agent", 1, 200, true)
	add("kgo", 1, 100, true)
	add("kcat", 1, 100, true)
	add("agent", 2, 300, true)
	add("kgo", 2, 400, true)
	add("kcat", 2, 1, false) // failed: left out of the median
	summarize(r)
	got := map[string]Ratio{}
	for _, q := range r.Ratios {
		got[q.Over] = q
	}
	if q := got["kgo"]; q.Ratio != 250.0/250.0 || len(q.PerRep) != 2 || q.PerRep[0] != 2 || q.PerRep[1] != 0.75 || q.Met == nil || !*q.Met {
		t.Errorf("agent/kgo = %+v", q)
	}
	if q := got["kcat"]; q.Ratio != 2.5 || len(q.PerRep) != 1 || !*q.Met {
		t.Errorf("agent/kcat = %+v", q)
	}
	md := renderMarkdown(r)
	for _, want := range []string{"agent ≥ 1.0x kgo", "**1.00x** (0.75-2.00) ✅", "rep 2: ", "A quick run"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "at 1000 lines/s steady") {
		t.Error("a target line for a rate without a peer's runs")
	}
	if t.Failed() {
		t.Log(md)
	}
}

// TestSteadyReport: the steady section's table takes the median CPU a minute of each tool's
// good runs (per minute of writing) and their ratios, and each rate's targets are judged on them.
func TestSteadyReport(t *testing.T) {
	r := &Report{Params: Params{Runs: 2, FileLineSize: 100, SteadySeconds: 30}, Env: map[string]string{}}
	add := func(tool string, rate, rep int, cpu float64, ok bool) {
		r.Runs = append(r.Runs, Run{Section: "steady", Tool: tool, Cell: steadyCell(rate), Rep: rep, OK: ok, CPUSec: cpu,
			Extra: map[string]any{"writer_s": 30.0}})
	}
	add("agent", 5000, 1, 0.30, true)  // 0.60 s a minute
	add("agent", 5000, 2, 0.40, true)  // 0.80
	add("kcat", 5000, 1, 0.25, true)   // 0.50
	add("kcat", 5000, 2, 9, false)     // failed: left out
	add("otelcol", 5000, 1, 0.6, true) // 1.20
	add("rsyslog", 5000, 1, 0.5, true) // 1.00
	add("agent", 1000, 1, 0.5, true)   // 1.00: no peer at 1000, no target line
	for i := range r.Runs {
		if r.Runs[i].Tool == "agent" {
			r.Runs[i].Extra["rss_steady_mib"], r.Runs[i].Extra["rss_steady_file_mib"] = 20.0+float64(i), 8.0
			if r.Runs[i].Cell == steadyCell(1000) {
				r.Runs[i].Extra["rss_idle_mib"], r.Runs[i].Extra["rss_idle_file_mib"] = 12.5, 5.0
			}
		}
	}
	summarize(r)
	md := renderMarkdown(r)
	for _, want := range []string{"| 5000 lines/s | 0.70 s | 0.50 s | 1.20 s | 1.00 s | 1.40x | 0.70x |",
		"| 1000 lines/s | 1.00 s | – | – | – | – | – |",
		"at 5000 lines/s steady, the agent with its defaults uses ≤ 1.5x the CPU of `tail -F \\| kcat -P` (idempotent) | 1.40x (0.70 against 0.50 CPU s a minute) ✅",
		"≤ 1.0x the CPU of Debian's rsyslog (imfile → omkafka, acks=all) | 0.70x (0.70 against 1.00 CPU s a minute) ✅",
		"| idle, 10 s after its start | 12.5 (5.0) | – | – | – |", "| writing 5000 lines/s | 20.5 (8.0) | – | – | – |",
		"RSS ≤ 25 MiB | 12.5 MiB ✅"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "at 1000 lines/s steady") {
		t.Error("a target line for a rate without a peer's runs")
	}
	if t.Failed() {
		t.Log(md)
	}
}
