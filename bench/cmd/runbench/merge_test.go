package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeKeepsOtherSections: BENCH_MERGE=1 keeps the previous report's runs of the sections
// not measured again, drops its runs of those that were, and says so at the top.
func TestMergeKeepsOtherSections(t *testing.T) {
	out := t.TempDir()
	old := Report{Started: "2026-01-01T00:00:00Z", Env: map[string]string{"git_commit": "abc123"},
		Runs:   []Run{{Section: "producers", Tool: "agent", Cell: "c1", OK: true}, {Section: "tracing", Tool: "agent", Cell: "metrics only", OK: true, Rep: 1}},
		Memory: []MemoryResult{{}}}
	js, _ := json.Marshal(old)
	if err := os.WriteFile(filepath.Join(out, "benchmarks.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{p: paths{out: out}, prm: Params{Sections: []string{"tracing"}, Runs: 1, Records: 1, TracingRecords: 1, FileLines: 1}}
	b.report = &Report{Params: b.prm, Env: map[string]string{"git_commit": "def456"}}
	if err := b.loadKept(); err != nil {
		t.Fatal(err)
	}
	b.report.Runs = []Run{{Section: "tracing", Tool: "agent", Cell: "metrics only", OK: true, Rep: 2}}
	if err := b.write(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	var secs []string
	for _, r := range got.Runs {
		secs = append(secs, r.Section)
		if r.Section == "tracing" && r.Rep != 2 {
			t.Fatal("the old tracing run was kept")
		}
	}
	if strings.Join(secs, ",") != "producers,tracing" || len(got.Memory) != 1 {
		t.Fatalf("sections %v, %d memory results; want producers,tracing and the old memory", secs, len(got.Memory))
	}
	md, _ := os.ReadFile(filepath.Join(out, "benchmarks.md"))
	if !strings.Contains(string(md), "kept from the run started 2026-01-01T00:00:00Z at commit `abc123`") {
		t.Fatal("the report does not say what it kept")
	}
}
