package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// cpuPart is one share of the agent's CPU profile in the tracing section: the samples whose
// stack holds one of its functions (the first part in cpuParts that matches takes a sample).
type cpuPart struct {
	name  string
	funcs []string // function names as pprof has them, matched by prefix
	// without excludes the samples that also hold one of these (they go to a later part).
	without []string
}

// cpuParts splits the agent's CPU between the producer and what telemetry adds, by where the
// telemetry package spends it: the sampling decision every record pays, the work of a traced
// record (its start at Send, its spans at completion, their export), the OTLP/gRPC transport's
// own goroutines, the metrics every record and batch pays in every mode, and the garbage
// collector.
var cpuParts = []cpuPart{
	{name: "traced: start", funcs: []string{
		"github.com/kafkatrail/kafkatrail/telemetry.(*ProducerObserver).newRecordTrace",
		"github.com/kafkatrail/kafkatrail/telemetry.injectTraceContext",
		"github.com/kafkatrail/kafkatrail/telemetry.appendTraceContext",
		"github.com/kafkatrail/kafkatrail/telemetry.appendTraceparent",
		"github.com/kafkatrail/kafkatrail/telemetry.(*ProducerObserver).creationContext",
	}},
	{name: "decision", funcs: []string{"github.com/kafkatrail/kafkatrail/telemetry.(*ProducerObserver).StartSend"}},
	// A traced record's spans are made from its TracedRecord on the export goroutine: those
	// samples are spans', not the export's.
	{name: "traced: spans", funcs: []string{
		"github.com/kafkatrail/kafkatrail/telemetry.(*recordTrace).RecordDone",
		"github.com/kafkatrail/kafkatrail/telemetry.(*slowTracer)",
		"github.com/kafkatrail/kafkatrail/telemetry.(*TracedRecord)",
	}},
	{name: "traced: export", funcs: []string{"github.com/kafkatrail/kafkatrail/telemetry.(*exportProcessor)"}},
	// gRPC writes and reads on goroutines of its own (the transport's writer and reader), off the
	// stacks of the export that handed it the request: spans' and metrics' alike.
	{name: "OTLP transport", funcs: []string{
		"google.golang.org/grpc",
		"golang.org/x/net/http2",
	}},
	{name: "metrics", funcs: []string{
		"github.com/kafkatrail/kafkatrail/telemetry.(*ProducerObserver)",
		"go.opentelemetry.io/otel/sdk/metric",
		"go.opentelemetry.io/otel/exporters/otlp/otlpmetric",
	}},
	{name: "GC", funcs: []string{"runtime.gcBgMarkWorker"}},
}

// fileCPUParts splits the agent's CPU on the file path by stage of a line's way, innermost
// first (a line's Send runs inside the splitter's Feed, inside the follower's read; its
// acknowledgement inside the sender's loop): telemetry wherever it runs, the checkpoint
// writes, the acknowledgement tracking (the callback's bookkeeping: the file's ack ring, the
// read-ahead budget), the record's building (envelope, headers), Send (partitioning and the
// accumulator's append), the sender (drain, batch framing, the network), the split into lines,
// the read itself (read and stat syscalls), and the garbage collector.
var fileCPUParts = []cpuPart{
	{name: "telemetry", funcs: []string{
		"github.com/kafkatrail/kafkatrail/telemetry.",
		"go.opentelemetry.io/",
	}},
	{name: "checkpoint", funcs: []string{
		"github.com/kafkatrail/kafkatrail/filetail.(*checkpointStore)",
		"github.com/kafkatrail/kafkatrail/filetail.(*Tailer).SaveCheckpoints",
		"github.com/kafkatrail/kafkatrail/filetail.(*Tailer).Snapshot",
	}},
	{name: "ack tracking", funcs: []string{
		"github.com/kafkatrail/kafkatrail/agent.(*Agent).lineDelivered",
		"github.com/kafkatrail/kafkatrail/filetail.(*File)",
		"github.com/kafkatrail/kafkatrail/filetail.(*ackTracker)",
		"github.com/kafkatrail/kafkatrail/agent.(*readAhead)",
	}},
	{name: "build", funcs: []string{"github.com/kafkatrail/kafkatrail/agent.(*recordBuilder)"}},
	{name: "Send", funcs: []string{"github.com/kafkatrail/kafkatrail/producer.(*Producer).Send"}},
	{name: "sender", funcs: []string{
		"github.com/kafkatrail/kafkatrail/producer.(*Sender)",
		"github.com/kafkatrail/kafkatrail/network.",
	}},
	{name: "split", funcs: []string{"github.com/kafkatrail/kafkatrail/filetail.(*Splitter)"}},
	{name: "read", funcs: []string{
		"github.com/kafkatrail/kafkatrail/filetail.(*follower).readAvailable",
		"github.com/kafkatrail/kafkatrail/filetail.(*follower).follow",
	}},
	{name: "GC", funcs: []string{"runtime.gcBgMarkWorker"}},
}

// fileCPUPartNames are fileCPUParts' names in the report's order, then "rest".
func fileCPUPartNames() []string {
	return []string{"read", "split", "build", "Send", "ack tracking", "checkpoint", "sender", "telemetry", "GC", "rest"}
}

// cpuSplit reads a CPU profile and returns the seconds of each part of cpuParts, and "rest"
// (the producer, the agent, the runtime's own) and "total".
func cpuSplit(path string) (map[string]float64, error) { return cpuSplitBy(path, cpuParts) }

// cpuSplitBy is cpuSplit with parts of the caller's.
func cpuSplitBy(path string, parts []cpuPart) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("%s: no cpu/nanoseconds samples", path)
	}
	out := map[string]float64{}
	for _, s := range p.Sample {
		sec := float64(s.Value[idx]) / 1e9
		out["total"] += sec
		part := "rest"
		for _, c := range parts {
			if onStack(s, c.funcs) {
				part = c.name
				break
			}
		}
		out[part] += sec
	}
	return out, nil
}

func onStack(s *profile.Sample, funcs []string) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			for _, f := range funcs {
				if strings.HasPrefix(l.Function.Name, f) {
					return true
				}
			}
		}
	}
	return false
}

// cpuPartNames are the parts in the report's order.
func cpuPartNames() []string {
	names := []string{"decision", "traced: start", "traced: spans", "traced: export", "OTLP transport", "metrics", "GC", "rest"}
	return names
}

// splitOf reads a run's split back (a map of float64 when made here, of any from JSON).
func splitOf(run Run) map[string]float64 {
	switch v := run.Extra["cpu_split_s"].(type) {
	case map[string]float64:
		return v
	case map[string]any:
		out := map[string]float64{}
		for k, x := range v {
			if f, ok := x.(float64); ok {
				out[k] = f
			}
		}
		return out
	}
	return nil
}

// medianSplit is the median, part by part, of the ok runs' splits of one cell.
func medianSplit(runs []Run) (map[string]float64, int) { return medianSplitOf(runs, cpuPartNames()) }

// medianSplitOf is medianSplit over the parts named.
func medianSplitOf(runs []Run, names []string) (map[string]float64, int) {
	by := map[string][]float64{}
	n := 0
	for _, run := range runs {
		s := splitOf(run)
		if !run.OK || s == nil {
			continue
		}
		n++
		for _, k := range append(names, "total") {
			by[k] = append(by[k], s[k])
		}
	}
	out := map[string]float64{}
	for k, v := range by {
		sort.Float64s(v)
		out[k] = v[len(v)/2]
		if len(v)%2 == 0 {
			out[k] = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
	}
	return out, n
}
