package main

import (
	"fmt"
	"sort"
	"strings"
)

// Run is one measured run of one tool.
type Run struct {
	Section           string          `json:"section"` // producers, file, tracing
	Tool              string          `json:"tool"`
	Cell              string          `json:"cell"`
	Rep               int             `json:"rep"`
	Topic             string          `json:"topic,omitempty"`
	OK                bool            `json:"ok"`
	Error             string          `json:"error,omitempty"`
	Records           int64           `json:"records"`
	InKafka           int64           `json:"records_in_kafka"`
	Bytes             int64           `json:"payload_bytes"`
	WallSec           float64         `json:"wall_s"`
	RecordsPerSec     float64         `json:"records_per_s"`
	MiBPerSec         float64         `json:"mib_per_s"`
	CPUUserSec        float64         `json:"cpu_user_s"`
	CPUSysSec         float64         `json:"cpu_sys_s"`
	CPUSec            float64         `json:"cpu_s"`
	MaxRSSMiB         float64         `json:"peak_rss_mib"`
	BrokerCPUSec      float64         `json:"broker_cpu_s"`
	Latency           *Latency        `json:"latency_ms,omitempty"`
	ToolRecordsPerSec float64         `json:"tool_reported_records_per_s,omitempty"`
	Partitions        map[int32]int64 `json:"partition_end_offsets,omitempty"`
	Extra             map[string]any  `json:"extra,omitempty"`
}

// Summary is the median of a tool's successful runs in one cell.
type Summary struct {
	Section           string   `json:"section"`
	Tool              string   `json:"tool"`
	Cell              string   `json:"cell"`
	Runs              int      `json:"runs"`
	OK                int      `json:"ok"`
	RecordsPerSec     float64  `json:"records_per_s"`
	MiBPerSec         float64  `json:"mib_per_s"`
	WallSec           float64  `json:"wall_s"`
	CPUSec            float64  `json:"cpu_s"`
	CPUMicrosPerRec   float64  `json:"cpu_us_per_record"`
	MaxRSSMiB         float64  `json:"peak_rss_mib"`
	BrokerCPUSec      float64  `json:"broker_cpu_s"`
	P50               *float64 `json:"p50_ms,omitempty"`
	P99               *float64 `json:"p99_ms,omitempty"`
	P999              *float64 `json:"p99_9_ms,omitempty"`
	ToolRecordsPerSec *float64 `json:"tool_reported_records_per_s,omitempty"`
	Spans             *float64 `json:"spans_exported,omitempty"`
	TraceBytes        *float64 `json:"trace_bytes,omitempty"` // the export requests' size, uncompressed
	Errors            []string `json:"errors,omitempty"`
}

// Ratio is our agent's records/s over another tool's, both medians of the same invocation;
// PerRep are the ratios within each repetition (alternating runs: the closest pairs).
type Ratio struct {
	Section string    `json:"section"`
	Cell    string    `json:"cell"`
	Of      string    `json:"of"`
	Over    string    `json:"over"`
	Ratio   float64   `json:"ratio"`
	PerRep  []float64 `json:"per_rep,omitempty"`
	Target  float64   `json:"target,omitempty"`
	Met     *bool     `json:"met,omitempty"`
}

// Report is everything one `make bench` measured.
type Report struct {
	Started      string  `json:"started"`
	Finished     string  `json:"finished"`
	DurationSec  float64 `json:"duration_s"`
	MakeBenchSec float64 `json:"make_bench_s,omitempty"` // the whole make bench: installs, builds, broker start

	Params     Params            `json:"params"`
	Env        map[string]string `json:"environment"`
	InProgress bool              `json:"in_progress,omitempty"` // written while the runs go on
	Notes      []string          `json:"notes,omitempty"`
	Summaries  []Summary         `json:"summaries"`
	Ratios     []Ratio           `json:"ratios"`
	Memory     []MemoryResult    `json:"memory,omitempty"`
	Latency    []LatencyResult   `json:"latency,omitempty"`
	Release    *ReleaseSizes     `json:"release,omitempty"` // dist/ of make release, when there is one
	Runs       []Run             `json:"runs"`
}

type key struct{ section, tool, cell string }

func summarize(r *Report) {
	r.Summaries = nil
	r.Ratios = nil
	groups := map[key][]Run{}
	var order []key
	for _, run := range r.Runs {
		k := key{run.Section, run.Tool, run.Cell}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	for _, k := range order {
		runs := groups[k]
		s := Summary{Section: k.section, Tool: k.tool, Cell: k.cell, Runs: len(runs)}
		var rps, mibs, wall, cpu, rss, bcpu, p50, p99, p999, own, spans, traceBytes []float64
		var recs int64
		for _, run := range runs {
			if !run.OK {
				s.Errors = append(s.Errors, fmt.Sprintf("rep %d: %s", run.Rep, run.Error))
				continue
			}
			s.OK++
			recs = run.Records
			rps = append(rps, run.RecordsPerSec)
			mibs = append(mibs, run.MiBPerSec)
			wall = append(wall, run.WallSec)
			cpu = append(cpu, run.CPUSec)
			rss = append(rss, run.MaxRSSMiB)
			bcpu = append(bcpu, run.BrokerCPUSec)
			if run.Latency != nil {
				p50 = append(p50, run.Latency.P50)
				p99 = append(p99, run.Latency.P99)
				p999 = append(p999, run.Latency.P999)
			}
			if run.ToolRecordsPerSec > 0 {
				own = append(own, run.ToolRecordsPerSec)
			}
			if v, ok := run.Extra["spans_exported"]; ok {
				spans = append(spans, toFloat(v))
			}
			if v, ok := run.Extra["trace_bytes"]; ok {
				traceBytes = append(traceBytes, toFloat(v))
			}
		}
		if s.OK > 0 {
			s.RecordsPerSec, s.MiBPerSec, s.WallSec = median(rps), median(mibs), median(wall)
			s.CPUSec, s.MaxRSSMiB, s.BrokerCPUSec = median(cpu), median(rss), median(bcpu)
			if recs > 0 {
				s.CPUMicrosPerRec = s.CPUSec / float64(recs) * 1e6
			}
			opt := func(xs []float64) *float64 {
				if len(xs) == 0 {
					return nil
				}
				m := median(xs)
				return &m
			}
			s.P50, s.P99, s.P999, s.ToolRecordsPerSec, s.Spans = opt(p50), opt(p99), opt(p999), opt(own), opt(spans)
			s.TraceBytes = opt(traceBytes)
		}
		r.Summaries = append(r.Summaries, s)
	}

	find := r.summary
	// perRep pairs the records/s of the runs side picks (0: the numerator, 1: the denominator,
	// -1: neither) repetition by repetition, and returns the ratios of the repetitions where both
	// ran.
	perRep := func(side func(Run) int) []float64 {
		byRep := map[int][2]float64{}
		for _, run := range r.Runs {
			if i := side(run); run.OK && i >= 0 {
				v := byRep[run.Rep]
				v[i] = run.RecordsPerSec
				byRep[run.Rep] = v
			}
		}
		var reps []int
		for rep := range byRep {
			reps = append(reps, rep)
		}
		sort.Ints(reps)
		var out []float64
		for _, rep := range reps {
			if v := byRep[rep]; v[0] > 0 && v[1] > 0 {
				out = append(out, v[0]/v[1])
			}
		}
		return out
	}
	// add appends q, the ratio of summary a over summary b (per repetition: side), with its
	// target, if both ran.
	add := func(q Ratio, a, b *Summary, side func(Run) int, target float64) {
		if a == nil || b == nil || a.OK == 0 || b.OK == 0 {
			return
		}
		q.Ratio, q.PerRep, q.Target = a.RecordsPerSec/b.RecordsPerSec, perRep(side), target
		if target > 0 {
			met := q.Ratio >= target
			q.Met = &met
		}
		r.Ratios = append(r.Ratios, q)
	}
	addRatio := func(section, cell, of, over string, target float64) {
		add(Ratio{Section: section, Cell: cell, Of: of, Over: over}, find(section, of, cell), find(section, over, cell),
			func(run Run) int {
				switch {
				case run.Section != section || run.Cell != cell:
					return -1
				case run.Tool == of:
					return 0
				case run.Tool == over:
					return 1
				}
				return -1
			}, target)
	}
	seenCell := map[string]bool{}
	for _, s := range r.Summaries {
		if s.Section != "producers" || seenCell[s.Cell] {
			continue
		}
		seenCell[s.Cell] = true
		for _, other := range producerTools[1:] {
			target := 0.0
			if s.Cell == defaultsCell {
				switch other {
				case "kgo":
					target = 1.2
				case "kcat":
					target = 1.5
				}
			}
			if s.Cell == headlineCell {
				switch other {
				case "kgo":
					target = 1.0
				case "kcat":
					target = 1.3
				}
			}
			addRatio("producers", s.Cell, "agent", other, target)
		}
	}
	for _, s := range r.Summaries {
		if s.Section == "file" && s.Tool == "agent" {
			for _, other := range fileTools[1:] {
				target := 0.0
				switch other {
				case "kcat":
					target = 1.2
				case "otelcol":
					target = 2.5
				case "agent-eos", "agent-otel", "agent-cri", "agent-filters", "agent-redact-regexp", threeInputs, threeAgents:
					continue // below: the cost of exactly-once, telemetry and container framing, over agent
				case "agent-defaults", "kcat-defaults":
					continue // below: each with its own defaults
				}
				addRatio("file", s.Cell, "agent", other, target)
			}
			addRatio("file", s.Cell, "agent-cri", "agent", 0.9)
			addRatio("file", s.Cell, "agent-filters", "agent", 0.8)
			addRatio("file", s.Cell, "agent-redact-regexp", "agent", 0)
			addRatio("file", s.Cell, "agent-eos", "agent", 0)
			addRatio("file", s.Cell, "agent-otel", "agent", 0)
			addRatio("file", s.Cell, "agent-otel", "kcat", 0)
			addRatio("file", s.Cell, "agent-defaults", "kcat-defaults", 1.2)
		}
	}
	// Tracing: each mode over telemetry off (the cost is 1 - ratio).
	addRatio2 := func(of string, target float64) {
		add(Ratio{Section: "tracing", Cell: of, Of: of, Over: tracingBase},
			find("tracing", "agent", of), find("tracing", "agent", tracingBase),
			func(run Run) int {
				switch {
				case run.Section != "tracing":
					return -1
				case run.Cell == of:
					return 0
				case run.Cell == tracingBase:
					return 1
				}
				return -1
			}, target)
	}
	addRatio2("metrics only", 0)
	addRatio2("sampled 1 %", 0.95)
	addRatio2("1 % + slower than p99", 0.9)
	addRatio2("1 %, stages per batch", 0.95)
	addRatio2("sampled 100 %", 0.5)
	addRatio2("100 %, stages per batch", 0.5)
}

const headlineCell = "100B-b16KiB-none"

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
}

var toolNames = map[string]string{
	"agent":               "kafkatrail agent",
	"agent-eos":           "kafkatrail agent --exactly-once",
	"agent-otel":          "kafkatrail agent, default telemetry on",
	"agent-cri":           "kafkatrail agent, CRI-framed lines (--container-format cri)",
	"agent-filters":       "kafkatrail agent, one --exclude-lines and one --redact rule",
	"agent-redact-regexp": "kafkatrail agent, one --redact rule without a literal part",
	threeInputs:           "kafkatrail agent, the file three times: three inputs in one agent",
	threeAgents:           "kafkatrail agent, the file three times: three agents",
	"agent-defaults":      "kafkatrail agent, its defaults (default telemetry on)",
	"kcat-defaults":       "kcat -P, librdkafka's defaults (acks=all, idempotence)",
	"kcat":                "kcat -P (librdkafka)",
	"kgo":                 "kgoprod (franz-go kgo)",
	"producer-perf":       "ProducerPerformance (Java)",
	"otelcol":             "OpenTelemetry Collector",
	"rsyslog":             "rsyslog imfile+omkafka",
}

func toolName(t string) string {
	if n, ok := toolNames[t]; ok {
		return n
	}
	return t
}

func fnum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10000:
		return groupThousands(fmt.Sprintf("%.0f", v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func groupThousands(s string) string {
	n := len(s)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (n-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func optNum(p *float64) string {
	if p == nil {
		return ""
	}
	return fnum(*p)
}

func ratioText(q Ratio) string {
	s := fmt.Sprintf("**%.2fx**", q.Ratio)
	if len(q.PerRep) > 1 {
		lo, hi := q.PerRep[0], q.PerRep[0]
		for _, v := range q.PerRep {
			lo, hi = min(lo, v), max(hi, v)
		}
		s += fmt.Sprintf(" (%.2f-%.2f)", lo, hi)
	}
	if q.Met != nil {
		if *q.Met {
			s += fmt.Sprintf(" ✅ target ≥ %.2gx", q.Target)
		} else {
			s += fmt.Sprintf(" ❌ target ≥ %.2gx", q.Target)
		}
	}
	return s
}

func (r *Report) ratio(section, cell, of, over string) *Ratio {
	for i := range r.Ratios {
		q := &r.Ratios[i]
		if q.Section == section && q.Cell == cell && q.Of == of && q.Over == over {
			return q
		}
	}
	return nil
}

func (r *Report) summary(section, tool, cell string) *Summary {
	for i := range r.Summaries {
		s := &r.Summaries[i]
		if s.Section == section && s.Tool == tool && s.Cell == cell {
			return s
		}
	}
	return nil
}

func (r *Report) cells(section string) []string {
	return r.distinct(section, func(s Summary) string { return s.Cell })
}

func (r *Report) tools(section string) []string {
	return r.distinct(section, func(s Summary) string { return s.Tool })
}

// distinct returns the values of field over the section's summaries, each once, in order.
func (r *Report) distinct(section string, field func(Summary) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range r.Summaries {
		if v := field(s); s.Section == section && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func cellTitle(id string) string {
	// "100B-b16KiB-none" -> "100 B records, batch.size 16 KiB, compression none"
	parts := strings.Split(id, "-")
	if len(parts) == 2 && parts[1] == "defaults" {
		return fmt.Sprintf("%s B records, each tool with its own defaults (acks=all and idempotence set), the agent's default telemetry on", strings.TrimSuffix(parts[0], "B"))
	}
	if len(parts) != 3 {
		return id
	}
	size := strings.TrimSuffix(parts[0], "B")
	if size == "1024" {
		size = "1 Ki"
	} else {
		size += " "
	}
	batch := strings.TrimPrefix(parts[1], "b")
	batch = strings.Replace(strings.Replace(batch, "KiB", " KiB", 1), "MiB", " MiB", 1)
	return fmt.Sprintf("%sB records, batch.size %s, compression %s", size, batch, parts[2])
}

// toolRows writes the table row of each tool of section that ran in cell: the tool's name, then
// failed (the cells between the name and the runs column) when no run succeeded, else cells(its
// summary), then "ok/runs".
func (r *Report) toolRows(w func(string, ...any), section, cell, failed string, cells func(*Summary) string) {
	for _, t := range r.tools(section) {
		s := r.summary(section, t, cell)
		if s == nil {
			continue
		}
		if s.OK == 0 {
			w("| %s | %s | 0/%d |\n", toolName(t), failed, s.Runs)
			continue
		}
		w("| %s | %s | %d/%d |\n", toolName(t), cells(s), s.OK, s.Runs)
	}
}

// agentOver writes the line under a cell's table with the agent's rate (what: "records/s")
// over each of others' that has a ratio in cell.
func (r *Report) agentOver(w func(string, ...any), section, cell, what string, others []string) {
	w("\nagent's %s over:", what)
	for _, other := range others {
		if q := r.ratio(section, cell, "agent", other); q != nil {
			w(" %s %s;", toolName(other), ratioText(*q))
		}
	}
	w("\n\n")
}

func renderMarkdown(r *Report) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p := r.Params
	w("# Benchmarks\n\n")
	w("Generated by `make bench` (`scripts/bench.sh`, `bench/cmd/runbench`) from [`benchmarks.json`](benchmarks.json): do not edit by hand. ")
	w("Run from %s to %s (%.1f min of measuring", r.Started, r.Finished, r.DurationSec/60)
	if r.MakeBenchSec > 0 {
		w("; %.1f min for the whole `make bench`, checks, builds and broker start included", r.MakeBenchSec/60)
	}
	w("), at commit `%s`%s.\n\n", r.Env["git_commit"], map[bool]string{true: " with uncommitted changes", false: ""}[r.Env["git_dirty"] != ""])
	if r.InProgress {
		w("> **Incomplete**: written while `make bench` was still running (or it was stopped before the end); sections and repetitions not listed were not measured.\n\n")
	}
	for _, n := range r.Notes {
		if strings.HasPrefix(n, "Merged (BENCH_MERGE=1)") {
			w("> **%s**\n\n", n) // the header's commit and times are only this run's
		}
	}
	quick := p.Records < 2_000_000 || p.Runs < 3 || p.FileLines < 1_000_000
	if quick {
		w("> **A quick run**, not the full benchmark: %d records per producer run (full: 2,000,000), %d lines in the file path (full: 1,000,000), %d repetition(s) (full: 3). Ratios from short runs are noisy.\n\n",
			p.Records, p.FileLines, p.Runs)
	}
	if p.WarmupRecords > 0 {
		w("Before the first measured run, %s records go through kgoprod (without and with lz4, not measured) to warm the fresh broker JVM up. ", groupThousands(fmt.Sprint(p.WarmupRecords)))
	}
	w("Every figure is the **median of %d alternating runs** (each repetition runs every cell and every tool in turn, starting one tool later than the repetition before, so a slow minute of the machine, or the first run after the warm-up, hits all tools alike). ", p.Runs)
	w("Ratios compare tools **within this invocation** only; absolute figures depend on the machine (%s cores, %s; the broker shares them: see *Method*). ", r.Env["cores"], r.Env["cpu"])
	w("records/s and MiB/s are wall-clock: from the tool's start to its exit (stdin/generator runs) or until the topic holds every line (file path); MiB is 2^20 bytes of record values.\n\n")

	// Headline.
	w("## The issue's targets\n\n")
	w("| target | measured |\n|---|---|\n")
	if q := r.ratio("producers", defaultsCell, "agent", "kgo"); q != nil {
		w("| records/s, 100 B, each tool with its defaults plus acks=all and idempotence, the agent's default telemetry on: agent ≥ 1.2x kgo | %s |\n", ratioText(*q))
	}
	if q := r.ratio("producers", defaultsCell, "agent", "kcat"); q != nil {
		w("| records/s, 100 B, each tool with its defaults plus acks=all and idempotence, the agent's default telemetry on: agent ≥ 1.5x kcat | %s |\n", ratioText(*q))
	}
	if q := r.ratio("producers", headlineCell, "agent", "kgo"); q != nil {
		w("| records/s, 100 B, no compression, batch 16 KiB: agent ≥ 1.0x kgo | %s |\n", ratioText(*q))
	}
	if q := r.ratio("producers", headlineCell, "agent", "kcat"); q != nil {
		w("| records/s, 100 B, no compression, batch 16 KiB: agent ≥ 1.3x kcat | %s |\n", ratioText(*q))
	}
	for _, c := range r.cells("file") {
		if q := r.ratio("file", c, "agent", "kcat"); q != nil {
			w("| file path lines/s: agent ≥ 1.2x `kcat -P -l` | %s |\n", ratioText(*q))
		}
		if q := r.ratio("file", c, "agent-defaults", "kcat-defaults"); q != nil {
			w("| file path lines/s, each with its defaults (the agent's telemetry on; librdkafka's, acks=all, idempotence): agent ≥ 1.2x `kcat -P -l` | %s |\n", ratioText(*q))
		}
		if a, k := r.summary("file", "agent-defaults", c), r.summary("file", "kcat-defaults", c); a != nil && k != nil && a.OK > 0 && k.OK > 0 {
			mark := "✅"
			if a.CPUMicrosPerRec > k.CPUMicrosPerRec {
				mark = "❌"
			}
			w("| file path CPU per line, each with its defaults: agent ≤ kcat's | %.2f µs against %.2f µs (%.2fx) %s |\n",
				a.CPUMicrosPerRec, k.CPUMicrosPerRec, a.CPUMicrosPerRec/k.CPUMicrosPerRec, mark)
		}
		if s := r.summary("file", "agent-defaults", c); s != nil && s.OK > 0 {
			mark := "✅"
			if s.MaxRSSMiB*1.048576 > 32 {
				mark = "❌"
			}
			w("| file path peak RSS, the agent with its defaults (telemetry on): ≤ 32 MB | %.1f MiB (%.1f MB) %s |\n", s.MaxRSSMiB, s.MaxRSSMiB*1.048576, mark)
		}
		if q := r.ratio("file", c, "agent", "otelcol"); q != nil {
			w("| file path lines/s: agent ≥ 2.5x the OpenTelemetry Collector | %s |\n", ratioText(*q))
		}
		if s := r.summary("file", "agent", c); s != nil && s.OK > 0 {
			mark := "✅"
			if s.MaxRSSMiB*1.048576 >= 40 {
				mark = "❌"
			}
			w("| file path: agent peak RSS < 40 MB | %.1f MiB (%.1f MB) %s |\n", s.MaxRSSMiB, s.MaxRSSMiB*1.048576, mark)
		}
		if one, three := r.summary("file", threeInputs, c), r.summary("file", threeAgents, c); one != nil && three != nil && one.OK > 0 && three.OK > 0 {
			mark := "✅"
			if one.CPUSec >= three.CPUSec || one.MaxRSSMiB >= three.MaxRSSMiB {
				mark = "❌"
			}
			w("| three logs: one agent with three inputs uses less CPU and memory than three agents | CPU %.2f s against %.2f s (%.2fx), peak RSS %.1f MiB against %.1f MiB (%.2fx) %s |\n",
				one.CPUSec, three.CPUSec, one.CPUSec/three.CPUSec, one.MaxRSSMiB, three.MaxRSSMiB, one.MaxRSSMiB/three.MaxRSSMiB, mark)
		}
	}
	for _, l := range r.Latency {
		if l.Config == "defaults" && l.LatencyMs == 100 && l.Error == "" {
			w("| 100 ms from the broker (toxiproxy), default settings: the agent keeps up with a %d lines/s writer | acknowledged %s lines/s, at most %s lines behind, drained %.2f s after the writer %s |\n",
				l.WriterRate, fnum(l.AckedRate), fnum(float64(l.MaxBehindLines)), l.DrainSeconds, map[bool]string{true: "✅", false: "❌"}[l.keptUp()])
		}
	}
	// The telemetry's CPU over telemetry off's, per record (the runs send the same records).
	if off := r.summary("tracing", "agent", tracingBase); off != nil && off.OK > 0 && off.CPUMicrosPerRec > 0 {
		for _, t := range []struct {
			mode, what string
			limit      float64
		}{
			{"sampled 1 %", "the default telemetry (metrics and 1 % of records traced, exported) uses ≤ 1.05x the CPU of telemetry off", 1.05},
			{"1 % + slower than p99", "1 % sampled plus every record slower than the moving p99: ≤ 1.10x the CPU of telemetry off", 1.10},
		} {
			if s := r.summary("tracing", "agent", t.mode); s != nil && s.OK > 0 {
				q := s.CPUMicrosPerRec / off.CPUMicrosPerRec
				w("| %s | %.3fx (%.2f against %.2f µs a record) %s |\n", t.what, q, s.CPUMicrosPerRec, off.CPUMicrosPerRec, map[bool]string{true: "✅", false: "❌"}[q <= t.limit])
			}
		}
	}
	r.steadyTarget(w)
	r.wakeupsTarget(w)
	for _, mode := range []string{"sampled 100 %", "100 %, stages per batch"} {
		if q := r.ratio("tracing", mode, mode, tracingBase); q != nil {
			w("| %s keeps ≥ 0.5 of the telemetry-off throughput | %.3f %s |\n", mode, q.Ratio, map[bool]string{true: "✅", false: "❌"}[q.Ratio >= 0.5])
		}
	}
	for _, m := range r.Memory {
		if m.BrokerDownAtStart || m.Error != "" {
			continue
		}
		w("| broker stopped, growing file: RSS stays under buffer.memory + a constant | peak %.1f MiB with buffer.memory %d MiB: constant %.1f MiB |\n",
			m.PeakRSSMiB, m.BufferMemory>>20, m.OverBufferMiB)
	}
	w("\n")

	// Producers.
	if cells := r.cells("producers"); len(cells) > 0 {
		w("## Producers: %s records per run, stdin (or the tool's own generator) to Kafka\n\n", groupThousands(fmt.Sprint(p.Records)))
		w("The *defaults* cells give each tool only acks=all and enable.idempotence=true, everything else its own defaults, and run the agent with its default telemetry on (metrics and 1 %% of the records traced, exported to otlpsink) and its headers: that is how users run them. ")
		w("The other cells give all tools acks=all, enable.idempotence=true, linger.ms=5, the batch.size and compression of the cell, max.request.size %d, buffer.memory %d MiB (see *Method* for each tool's spelling), the agent without telemetry or headers: like for like. ", p.MaxRequestBytes, p.BufferMemory>>20)
		w("Topics are created before each run with %d partitions, deleted after it. Latency is Send-to-acknowledgement as ProducerPerformance reports it (the other tools do not report it). ", p.Partitions)
		w("ProducerPerformance's records/s here includes its JVM start, like every other tool's; its own figure (from its first send) is in the *own* column.\n\n")
		for _, c := range cells {
			w("### %s\n\n", cellTitle(c))
			w("| tool | records/s | MiB/s | p50 ms | p99 ms | p99.9 ms | CPU s | CPU µs/record | peak RSS MiB | broker CPU s | own records/s | runs ok |\n")
			w("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
			r.toolRows(w, "producers", c, "failed | | | | | | | | |", func(s *Summary) string {
				return fmt.Sprintf("%s | %s | %s | %s | %s | %s | %s | %s | %s | %s", fnum(s.RecordsPerSec), fnum(s.MiBPerSec),
					optNum(s.P50), optNum(s.P99), optNum(s.P999), fnum(s.CPUSec), fnum(s.CPUMicrosPerRec), fnum(s.MaxRSSMiB),
					fnum(s.BrokerCPUSec), optNum(s.ToolRecordsPerSec))
			})
			r.agentOver(w, "producers", c, "records/s", producerTools[1:])
		}
		w("### All ratios (agent records/s over the other tool's; in brackets the lowest and highest ratio within one repetition)\n\n")
		w("| cell | over kcat | over kgo | over ProducerPerformance |\n|---|---|---|---|\n")
		for _, c := range cells {
			w("| %s |", c)
			for _, other := range producerTools[1:] {
				if q := r.ratio("producers", c, "agent", other); q != nil {
					w(" %s |", ratioText(*q))
				} else {
					w(" |")
				}
			}
			w("\n")
		}
		w("\n")
	}

	// File path.
	if cells := r.cells("file"); len(cells) > 0 {
		for _, c := range cells {
			w("## The file path: %s, until every line is in Kafka\n\n", c)
			w("Each tool reads the same file from its beginning into a new %d-partition topic with acks=all (idempotence on where the tool has it); a run ends when the topic's end offsets add up to the line count (polled every 50 ms; the agent's checkpoint must also reach the file's size), then the tool is stopped by its PID (`kcat -P -l` exits by itself). CPU is getrusage's for the whole process life, peak RSS the highest VmHWM sampled every 10 ms.\n\n", p.Partitions)
			w("| tool | lines/s | MiB/s | CPU s | CPU µs/line | peak RSS MiB | broker CPU s | runs ok |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
			r.toolRows(w, "file", c, "failed (see below) | | | | |", func(s *Summary) string {
				return fmt.Sprintf("%s | %s | %s | %s | %s | %s", fnum(s.RecordsPerSec), fnum(s.MiBPerSec), fnum(s.CPUSec),
					fnum(s.CPUMicrosPerRec), fnum(s.MaxRSSMiB), fnum(s.BrokerCPUSec))
			})
			r.agentOver(w, "file", c, "lines/s", fileTools[1:])
			if q := r.ratio("file", c, "agent-defaults", "kcat-defaults"); q != nil {
				w("**Each with its own defaults**, as users run them (*agent-defaults*: no producer setting, its source.host and source.path headers, metrics and traces of 1 %% of the lines exported over OTLP/gRPC to otlpsink; *kcat-defaults*: librdkafka's defaults, batch.size 1,000,000 among them, with acks=all and idempotence): agent over kcat %s lines/s", ratioText(*q))
				if a, k := r.summary("file", "agent-defaults", c), r.summary("file", "kcat-defaults", c); a != nil && k != nil && a.OK > 0 && k.OK > 0 {
					w(", at %.2fx its CPU per line (%.2f µs against %.2f)", a.CPUMicrosPerRec/k.CPUMicrosPerRec, a.CPUMicrosPerRec, k.CPUMicrosPerRec)
				}
				w(". The rows above them give every tool the cell's settings (like for like).\n\n")
			}
			if q := r.ratio("file", c, "agent-otel", "kcat"); q != nil {
				w("With its default telemetry on and the cell's settings (*agent-otel*: metrics, and traces of 1 %% of the lines, exported over OTLP/gRPC to otlpsink), over kcat: %s lines/s", ratioText(*q))
				if q := r.ratio("file", c, "agent-otel", "agent"); q != nil {
					w("; over the agent without: %s", ratioText(*q))
				}
				w(".\n\n")
			}
			if q := r.ratio("file", c, "agent-eos", "agent"); q != nil {
				w("Exactly-once (`--exactly-once`, a transaction committed every second) over at-least-once: %s lines/s.\n\n", ratioText(*q))
			}
			if q := r.ratio("file", c, "agent-cri", "agent"); q != nil {
				w("Container logs (*agent-cri*: the same lines as containerd frames them, `<time> stdout F <line>`, read with `--container-format cri`: the framing taken off, the runtime's time as the record's timestamp) over the raw file: %s lines/s", ratioText(*q))
				if a, raw := r.summary("file", "agent-cri", c), r.summary("file", "agent", c); a != nil && raw != nil && a.OK > 0 && raw.OK > 0 {
					w("; CPU %s µs a line against %s", fnum(a.CPUMicrosPerRec), fnum(raw.CPUMicrosPerRec))
				}
				w(".\n\n")
			}
			for _, f := range []struct{ tool, what string }{
				{"agent-filters", fmt.Sprintf("*agent-filters*: `--exclude-lines '%s'` and `--redact '%s'`, which match no line and have a literal part each, so a substring search answers them; target ≥ 0.8x", benchExcludeLines, benchRedact)},
				{"agent-redact-regexp", fmt.Sprintf("*agent-redact-regexp*: `--redact '%s'`, which matches no line but has no literal part, so Go's regexp runs on every line", benchRedactRegexp)},
			} {
				if q := r.ratio("file", c, f.tool, "agent"); q != nil {
					w("Filters and redaction (%s) over the agent without them: %s lines/s", f.what, ratioText(*q))
					if a, raw := r.summary("file", f.tool, c), r.summary("file", "agent", c); a != nil && raw != nil && a.OK > 0 && raw.OK > 0 {
						w("; CPU %s µs a line against %s", fnum(a.CPUMicrosPerRec), fnum(raw.CPUMicrosPerRec))
					}
					w(".\n\n")
				}
			}
			if one, three := r.summary("file", threeInputs, c), r.summary("file", threeAgents, c); one != nil && three != nil && one.OK > 0 && three.OK > 0 {
				w("Three logs on one host (*%s*: one agent whose configuration has three inputs, each following the file into a topic of its own; *%s*: three agents, each following it into its topic; each run ships the file three times): one agent uses %.2fx the CPU (%.2f s against %.2f s) and %.2fx the memory (peak RSS %.1f MiB against the three agents' %.1f MiB, the sum of each one's peak) of three, at %.2fx their lines/s.\n\n",
					threeInputs, threeAgents, one.CPUSec/three.CPUSec, one.CPUSec, three.CPUSec, one.MaxRSSMiB/three.MaxRSSMiB, one.MaxRSSMiB, three.MaxRSSMiB, one.RecordsPerSec/three.RecordsPerSec)
			}
			r.writeFileCPUSplit(w, c)
			r.writeFileRSSSplit(w, c)
		}
	}

	// Tracing.
	if cells := r.cells("tracing"); len(cells) > 0 {
		w("## Tracing cost: the agent, %s records of 100 B, batch 16 KiB, no compression\n\n", groupThousands(fmt.Sprint(p.TracingRecords)))
		if r.Env["agent_trace_sample_ratio_flag"] == "true" {
			w("Sampling set with `--trace-sample-ratio`. ")
		} else {
			w("This agent build has no `--trace-sample-ratio` flag: sampling set with `OTEL_TRACES_SAMPLER=parentbased_traceidratio` and `OTEL_TRACES_SAMPLER_ARG`. ")
		}
		w("*Telemetry off* is `OTEL_TRACES_EXPORTER=none` and `OTEL_METRICS_EXPORTER=none`: no pipeline at all, so the agent installs no observer; it is the base of the ratios, and *sampled 1 %%* is the agent's default telemetry. *Metrics only* is `OTEL_TRACES_EXPORTER=none`. Metrics and spans go over OTLP/gRPC to `otlpsink` on 127.0.0.1, a receiver that only counts (its CPU is not the agent's), so the sampled runs pay the real cost of making, batching and exporting spans. `1 %% + slower than p99` adds `--trace-slower-than p99`: records slower than the moving p99 of the end-to-end latency are traced too (about another 1 %%).\n\n")
		w("*OTLP bytes* are the trace export requests' size as the receiver got them (uncompressed), a span and a traced record; the latter only for the head-sampled modes below 100 %%, where the queue keeps every span and the traced records are the ratio's share.\n\n")
		w("| mode | records/s | relative to off | CPU s | CPU µs/record | CPU / off | peak RSS MiB | spans exported | OTLP bytes a span | a traced record | runs ok |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		off := r.summary("tracing", "agent", tracingBase)
		for _, c := range cells {
			s := r.summary("tracing", "agent", c)
			if s == nil {
				continue
			}
			if s.OK == 0 {
				w("| %s | failed | | | | | | | | | 0/%d |\n", c, s.Runs)
				continue
			}
			rel, cpuRel := "", ""
			if off != nil && off.OK > 0 {
				rel = fmt.Sprintf("%.3f", s.RecordsPerSec/off.RecordsPerSec)
				if off.CPUMicrosPerRec > 0 {
					cpuRel = fmt.Sprintf("%.3f", s.CPUMicrosPerRec/off.CPUMicrosPerRec)
				}
			}
			perSpan, perTraced := "", ""
			if s.TraceBytes != nil && s.Spans != nil && *s.Spans > 0 {
				perSpan = fmt.Sprintf("%.0f", *s.TraceBytes / *s.Spans)
				for _, m := range tracingModes {
					if m.name == c && m.ratio > 0 && m.ratio < 1 && m.slowerThan == "" {
						perTraced = fmt.Sprintf("%.0f", *s.TraceBytes/(m.ratio*float64(p.TracingRecords)))
					}
				}
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n", c, fnum(s.RecordsPerSec), rel, fnum(s.CPUSec), fnum(s.CPUMicrosPerRec),
				cpuRel, fnum(s.MaxRSSMiB), optNum(s.Spans), perSpan, perTraced, s.OK, s.Runs)
		}
		w("\n")
		r.writeCPUSplit(w, cells, p.TracingRecords)
		if s := r.summary("tracing", "agent", "sampled 100 %"); s != nil && s.Spans != nil && *s.Spans == 0 {
			w("> **No span reached the sink even at 100 %%**: this agent build does not trace (telemetry not wired into `cmd/agent` yet), so the three modes measure the same thing.\n\n")
		}
	}

	r.writeSteady(w)
	r.writeWakeups(w)

	// Latency.
	if len(r.Latency) > 0 {
		w("## A broker far away: the agent tails a steady log through a toxiproxy that delays every response\n\n")
		w("A writer appends %d-byte lines at %d lines/s for %d s to a new file that the agent tails from the beginning, into a new %d-partition topic. The section has a broker of its own whose advertised port is an in-process toxiproxy's (so every connection, metadata included, goes through it), with a `latency` toxic on the responses (downstream). *Defaults* is the agent with no producer setting (batch.size 64 KiB, linger.ms 5, buffer.memory 8 MiB, the read-ahead sized from the partitions); *batch.size=16384* adds the Java client's batch.size, which the agent's default replaces. *behind* is the most lines written and not yet acknowledged (checkpointed), sampled every second; *drain* the time from the writer's last line to the checkpoint at the file's end: about a round trip when the agent kept up. A partition ships at most one batch per request and a connection has at most 5 requests in flight, so batch.size x 5 x partitions per round trip is the producer's ceiling.\n\n",
			p.FileLineSize, p.LatencyRate, p.LatencySeconds, p.Partitions)
		w("| latency | agent | lines written | acknowledged lines/s while writing | most lines behind | drain s | kept up |\n|--:|---|--:|--:|--:|--:|---|\n")
		for _, l := range r.Latency {
			if l.Error != "" {
				w("| %d ms | %s | failed: %s | | | | |\n", l.LatencyMs, l.Config, l.Error)
				continue
			}
			w("| %d ms | %s | %s | %s | %s | %s | %s |\n", l.LatencyMs, l.Config, fnum(float64(l.LinesWritten)), fnum(l.AckedRate),
				fnum(float64(l.MaxBehindLines)), fnum(l.DrainSeconds), map[bool]string{true: "yes", false: "no"}[l.keptUp()])
		}
		w("\n")
	}

	// Memory.
	if len(r.Memory) > 0 {
		w("## Memory: the agent tails a growing file while the broker is stopped\n\n")
		w("A writer appends %d-byte lines at %d lines/s to a new file that the agent tails from the beginning. The section has a broker of its own (same scripts/kafka/broker.sh, its state in the work directory, free ports), so that stopping it cannot touch any other broker. With that broker up, the agent ships until more than 4 MB are acknowledged; then `broker.sh stop` stops the broker and the agent's RSS (VmRSS) is sampled every second for %d s while the file keeps growing (the broker is resumed on its data before the next buffer.memory, and stopped at the end).\n\n",
			p.FileLineSize, p.MemoryRate, p.MemorySeconds)
		w("| buffer.memory | broker | RSS before stop MiB | peak RSS MiB | peak − buffer.memory MiB | final RSS MiB | maxrss MiB (whole life) | file written MB | checkpoint at stop MB | note |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, m := range r.Memory {
			br := "stopped after 4 MB"
			if m.BrokerDownAtStart {
				br = "down from the start"
			}
			w("| %d MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.BufferMemory>>20, br, fnum(m.RSSBeforeStopMiB), fnum(m.PeakRSSMiB),
				fnum(m.OverBufferMiB), fnum(m.FinalRSSMiB), fnum(m.MaxRSSMiB), fnum(float64(m.FileBytes)/1e6), fnum(float64(max(m.CheckpointAtStop, 0))/1e6), m.Error)
		}
		var ok []MemoryResult
		for _, m := range r.Memory {
			if m.Error == "" && !m.BrokerDownAtStart && m.PeakRSSMiB > 0 {
				ok = append(ok, m)
			}
		}
		if len(ok) >= 2 {
			lo, hi := ok[0], ok[0]
			for _, m := range ok {
				if m.BufferMemory < lo.BufferMemory {
					lo = m
				}
				if m.BufferMemory > hi.BufferMemory {
					hi = m
				}
			}
			if hi.BufferMemory > lo.BufferMemory {
				slope := (hi.PeakRSSMiB - lo.PeakRSSMiB) / (float64(hi.BufferMemory-lo.BufferMemory) / (1 << 20))
				icpt := lo.PeakRSSMiB - slope*float64(lo.BufferMemory)/(1<<20)
				w("\nThrough the two points: peak RSS ≈ **%.2f × buffer.memory + %.1f MiB**", slope, icpt)
				if slope > 1.2 {
					w(" — it grows faster than buffer.memory itself, so \"buffer.memory plus a constant\" does not hold at these settings: each MiB of buffer.memory costs %.1f MiB of RSS", slope)
				}
				w(".\n")
			}
		}
		w("\n")
	}

	r.writeRelease(w)

	// Notes and failures.
	var fails []string
	for _, s := range r.Summaries {
		for _, e := range s.Errors {
			fails = append(fails, fmt.Sprintf("- %s / %s / %s: %s", s.Section, toolName(s.Tool), s.Cell, e))
		}
	}
	if len(r.Notes) > 0 || len(fails) > 0 {
		w("## Notes and failed runs\n\n")
		for _, n := range r.Notes {
			w("- %s\n", n)
		}
		for _, f := range fails {
			w("%s\n", f)
		}
		w("\n")
	}

	w("%s", methodText)

	w("## Environment\n\n")
	var keys []string
	for k := range r.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w("- %s: `%s`\n", k, r.Env[k])
	}
	w("- parameters: %d repetitions, %d records per producer run, %d per tracing run, %d file lines, sizes %v, batch.size %v, compression %v, %d partitions\n",
		p.Runs, p.Records, p.TracingRecords, p.FileLines, p.Sizes, p.Batches, p.Compressions, p.Partitions)
	return b.String()
}

const methodText = "## Method\n\n" +
	"```sh\n" +
	"make bench                                   # full: 3 repetitions, 2M records per producer run, 6M per tracing run, 3M file lines\n" +
	"BENCH_RECORDS=200000 BENCH_RUNS=1 make bench   # a quick run\n" +
	"BENCH_SECTIONS=file BENCH_FILE_LINES=10000000 BENCH_MERGE=1 make bench  # the file path's 10M-line form\n" +
	"BENCH_SECTIONS=producers,tracing make bench  # only some sections (producers, file, tracing, steady, wakeups, latency, memory)\n" +
	"BENCH_SECTIONS=tracing BENCH_MERGE=1 make bench  # measure one section again, keep the others' runs from docs/benchmarks.json\n" +
	"```\n\n" +
	"Other knobs: `BENCH_SIZES` (100,1024), `BENCH_BATCHES` (16384,1048576), `BENCH_COMPRESSIONS` (none,lz4), `BENCH_PARTITIONS` (6), `BENCH_TRACING_RECORDS` (3 × BENCH_RECORDS), " +
	"`BENCH_MEMORY_SECONDS` (60), `BENCH_MEMORY_BUFFERS` (33554432,8388608), `BENCH_MEMORY_RATE` (50000 lines/s), " +
	"`BENCH_LATENCIES` (100,500 ms), `BENCH_LATENCY_RATE` (50000 lines/s), `BENCH_LATENCY_SECONDS` (20), `BENCH_STEADY_RATES` (1000,5000,50000 lines/s), `BENCH_STEADY_SECONDS` (30), `BENCH_PAUSE` (1 s between runs), " +
	"`BENCH_RUN_TIMEOUT` (900 s), `BENCH_WARMUP` (1000000 records through kgoprod before the first measured run; 0: none), `BENCH_TOOLS` (all; e.g. agent,kgo), `BENCH_OUT` (docs). `make bench` installs what is missing (scripts/deps.sh: kcat, Java, Kafka 4.4.0; " +
	"rsyslog and rsyslog-kafka from Debian), builds the agent as `make agent` does (`CGO_ENABLED=0 go build -trimpath ./cmd/agent`: static, no -race), the bench module's programs, and the " +
	"OpenTelemetry Collector (once, ~3-4 min, cached in `${KAFKATRAIL_CACHE:-~/.cache/kafkatrail}/bin`), then runs everything under " +
	"`scripts/kafka/with-broker.sh` (one fresh broker for the whole invocation) and writes this file and `benchmarks.json`.\n\n" +
	"**Data.** Stdin tools and the file path read a file of lines of random upper-case letters (A-Z), the same kind of payload " +
	"ProducerPerformance generates itself (`--record-size`), so lz4 finds little to compress for every tool alike; real logs compress far better. " +
	"Each line is one record: the value is the line without its newline, no key, no headers.\n\n" +
	"**The tools and their settings.**\n\n" +
	"- *kafkatrail agent*: `agent --brokers B --topic T --header-host= --header-path= -X acks=all -X enable.idempotence=true -X linger.ms=5 " +
	"-X batch.size=S -X compression.type=C -X max.request.size=1048576 -X buffer.memory=33554432 < file`; the two header flags turn off the " +
	"source.host/source.path headers it adds by default (no other tool sends headers). Telemetry export off (`OTEL_TRACES_EXPORTER=none`, " +
	"`OTEL_METRICS_EXPORTER=none`) except in the tracing section. File path: `--tail FILE --start-at beginning --state-dir DIR`.\n" +
	"- *kcat* (Debian's, librdkafka): `kcat -P -b B -t T -l FILE -q -X acks=all -X enable.idempotence=true -X linger.ms=5 -X batch.size=S " +
	"-X compression.type=C -X message.max.bytes=1048576 -X batch.num.messages=1000000 -X queue.buffering.max.kbytes=32768 " +
	"-X queue.buffering.max.messages=10000000`. librdkafka also ends a batch at batch.num.messages (default 10000, which a 1 MiB batch of " +
	"100 B records would hit) and bounds a request by message.max.bytes: the first is raised out of the way, the second set to max.request.size; " +
	"its buffer is bounded in bytes like buffer.memory. Partitioning: librdkafka's default (sticky for keyless records).\n" +
	"- *kgoprod* (`bench/kgoprod`, franz-go v1.22.3): the same `-X` properties mapped onto kgo options (RequiredAcks(AllISRAcks), idempotent " +
	"writes (kgo's default; up to 5 requests in flight), ProducerLinger(5ms), ProducerBatchMaxBytes(S), ProducerBatchCompression(C), " +
	"BrokerMaxWriteBytes(1 MiB) for max.request.size (kgo's own default, in the defaults cells, is 100 MiB), " +
	"MaxBufferedBytes(32 MiB), MaxBufferedRecords(1<<20)); values are copied into 1 MiB slabs and records taken from slices, so the program " +
	"adds little of its own per record.\n" +
	"- *ProducerPerformance* (kafka-tools 4.4.0, `scripts/kafka/broker.sh java org.apache.kafka.tools.ProducerPerformance`, -Xmx512m): " +
	"`--num-records N --record-size S --throughput -1 --producer-props bootstrap.servers=B acks=all enable.idempotence=true linger.ms=5 " +
	"batch.size=S compression.type=C max.request.size=1048576 buffer.memory=33554432`; its last line gives the latency percentiles.\n" +
	"- *OpenTelemetry Collector* (built with the OpenTelemetry Collector Builder v0.165.0 from `bench/otelcol/builder-config.yaml`: " +
	"filelog receiver, kafka exporter, file_storage): filelog `start_at: beginning` with its offsets in file_storage; kafka exporter " +
	"`required_acks: -1` (franz-go, idempotent), `linger: 5ms`, `logs.encoding: raw` (one record per line; the string body is sent JSON-quoted, " +
	"so each record is 2 bytes longer), `sending_queue.block_on_overflow: true` (without it the exporter drops lines when its queue is full " +
	"instead of slowing the receiver), its own telemetry off (no port opened).\n" +
	"- *rsyslog* (Debian's rsyslogd 8.2302 with rsyslog-kafka): `rsyslogd -n -f CONF -i PIDFILE` with its own work directory; imfile " +
	"(inotify) into omkafka with the same librdkafka properties as kcat (`confParam`) and `request.required.acks=-1` (`topicConfParam`), " +
	"template `%msg%` (the line only), `partitions.auto=\"on\"`. No network input is loaded: nothing listens.\n\n" +
	"**Measurement.** Each tool runs as a child process in its own process group; wall time is from its start to its exit (or until the topic " +
	"holds every line); CPU seconds are user+system from getrusage of the waited-for child (for " +
	"ProducerPerformance that is the JVM, which `broker.sh java` execs); peak RSS is the highest VmHWM of the child's /proc status, sampled " +
	"every 10 ms (getrusage's ru_maxrss of a child started with CLONE_VM, as Go starts them, includes the harness's own RSS: it put a floor " +
	"of about 40 MiB under every tool until 2026-11-30). Broker CPU is the broker JVM's utime+stime over the run. Every run is " +
	"checked: the topic's end offsets must add up to exactly the records sent (no loss, no duplicates), else the run counts as failed and is " +
	"left out of the medians. Everything listens on 127.0.0.1 and every process is stopped by its PID.\n\n" +
	"**Caveats.** The broker, the tool under test and the harness share the machine's cores, so a tool's own CPU use slows the broker: " +
	"CPU µs/record is the fairer figure of a tool's cost, records/s of what this machine delivers end to end. Other work on the machine " +
	"(see loadavg_at_start) adds noise; the alternation spreads it over all tools, and the per-repetition ratio ranges show how much.\n\n"

// writeFileCPUSplit writes where the agent's CPU went on the file path, stage by stage of a
// line's way (fileCPUParts), in ns a line, beside kcat's whole CPU per line.
func (r *Report) writeFileCPUSplit(w func(string, ...any), cell string) {
	parts := fileCPUPartNames()
	type row struct {
		tool  string
		split map[string]float64
	}
	var rows []row
	for _, tool := range []string{"agent", "agent-cri", "agent-otel", "agent-eos", "agent-filters", "agent-redact-regexp", "agent-defaults"} {
		var runs []Run
		for _, run := range r.Runs {
			if run.Section == "file" && run.Cell == cell && run.Tool == tool {
				runs = append(runs, run)
			}
		}
		if m, n := medianSplitOf(runs, parts); n > 0 {
			rows = append(rows, row{tool, m})
		}
	}
	lines := r.Params.FileLines
	if len(rows) == 0 || lines <= 0 {
		return
	}
	w("Where the agent's CPU goes on the file path, from its own CPU profile of each run (`KAFKATRAIL_CPUPROFILE`, 100 Hz; bench/cmd/runbench/cpusplit.go names the functions of each part), in ns a line, median of the runs: *read* the reads and stats of the file, *split* cutting lines, *build* the record (envelope, headers), *Send* partitioning and the accumulator's append, *ack tracking* the callback's bookkeeping (the file's acknowledgement ring, the read-ahead budget), *checkpoint* its writes, *sender* draining, framing and the network, *telemetry* metrics and spans wherever they run, *rest* the runtime and everything else. The profile's total is a little under getrusage's CPU (the profiler misses short bursts).\n\n")
	w("| tool |")
	for _, p := range parts {
		w(" %s |", p)
	}
	w(" total |")
	if k := r.summary("file", "kcat", cell); k != nil && k.OK > 0 {
		w(" kcat's CPU a line |")
	}
	w("\n|---|")
	for range parts {
		w("--:|")
	}
	w("--:|")
	k := r.summary("file", "kcat", cell)
	if k != nil && k.OK > 0 {
		w("--:|")
	}
	w("\n")
	ns := func(sec float64) float64 { return sec * 1e9 / float64(lines) }
	for _, rw := range rows {
		w("| %s |", toolName(rw.tool))
		for _, p := range parts {
			w(" %.0f |", ns(rw.split[p]))
		}
		w(" %.0f |", ns(rw.split["total"]))
		if k != nil && k.OK > 0 {
			w(" %.0f |", k.CPUMicrosPerRec*1000)
		}
		w("\n")
	}
	w("\n")
}

// writeFileRSSSplit writes what each tool's peak RSS on the file path was made of: the
// anonymous memory (heap, stacks, the runtime's) and the file-backed pages (the program's own
// code and read-only tables, and its shared libraries, mapped from disk), medians of the runs.
func (r *Report) writeFileRSSSplit(w func(string, ...any), cell string) {
	type row struct {
		tool       string
		anon, file float64
	}
	var rows []row
	for _, tool := range fileTools {
		var anon, file []float64
		for _, run := range r.Runs {
			if run.Section != "file" || run.Cell != cell || run.Tool != tool || !run.OK {
				continue
			}
			a, aok := run.Extra["rss_anon_mib"].(float64)
			f, fok := run.Extra["rss_file_mib"].(float64)
			if aok && fok {
				anon, file = append(anon, a), append(file, f)
			}
		}
		if len(anon) > 0 {
			rows = append(rows, row{tool, median(anon), median(file)})
		}
	}
	if len(rows) == 0 {
		return
	}
	w("What the peak RSS is made of, at the sample with the highest VmRSS (RssAnon and RssFile of /proc/PID/status, median of the runs): *anonymous* is the heap, the stacks and the runtime's own; *file-backed* the pages mapped from the program's file and its libraries: its code and read-only tables, which the kernel maps in around every page the program touches, whatever the workload.\n\n")
	w("| tool | anonymous MiB | file-backed MiB |\n|---|--:|--:|\n")
	for _, rw := range rows {
		w("| %s | %s | %s |\n", toolName(rw.tool), fnum(rw.anon), fnum(rw.file))
	}
	w("\n")
}

// writeCPUSplit writes where the agent's CPU went in each tracing mode, from its CPU profiles
// (cpusplit.go), in ns a record, and what a traced record costs.
func (r *Report) writeCPUSplit(w func(string, ...any), cells []string, records int) {
	splits := map[string]map[string]float64{}
	for _, c := range cells {
		var runs []Run
		for _, run := range r.Runs {
			if run.Section == "tracing" && run.Cell == c {
				runs = append(runs, run)
			}
		}
		if m, n := medianSplit(runs); n > 0 {
			splits[c] = m
		}
	}
	if len(splits) == 0 || records <= 0 {
		return
	}
	parts := cpuPartNames()
	w("Where the agent's CPU goes, from its own CPU profile of each run (`KAFKATRAIL_CPUPROFILE`; bench/cmd/runbench/cpusplit.go names the functions of each part), in ns a record, median of the runs: *decision* is the sampling decision every record pays (StartSend), *traced* the work of the traced records only (their start at Send, their spans built at completion, their export), *OTLP transport* gRPC's own writer and reader goroutines (spans' requests and the metrics' alike), *metrics* what every record and batch pays in every mode, *rest* the producer and the agent themselves. *µs a traced record* is the three traced parts and the transport's CPU beyond the off mode's over the traced records (spans exported / 8: a line's read stage, the six and the send span; or the mode's share of the records when spans were dropped).\n\n")
	w("| mode |")
	for _, p := range parts {
		w(" %s |", p)
	}
	w(" total | over off | µs a traced record |\n|---|")
	for range parts {
		w("--:|")
	}
	w("--:|--:|--:|\n")
	ns := func(sec float64) float64 { return sec * 1e9 / float64(records) }
	off := splits[tracingBase]
	for _, c := range cells {
		m := splits[c]
		if m == nil {
			continue
		}
		w("| %s |", c)
		for _, p := range parts {
			w(" %.0f |", ns(m[p]))
		}
		over := ""
		if off != nil && c != tracingBase {
			over = fmt.Sprintf("%+.0f", ns(m["total"]-off["total"]))
		}
		perTraced := ""
		if s := r.summary("tracing", "agent", c); s != nil && s.Spans != nil && *s.Spans > 0 {
			traced := tracedRecords(c, s, records)
			transport := m["OTLP transport"]
			if off != nil {
				transport = max(0, transport-off["OTLP transport"])
			}
			perTraced = fmt.Sprintf("%.1f", (m["traced: start"]+m["traced: spans"]+m["traced: export"]+transport)*1e6/traced)
		}
		w(" %.0f | %s | %s |\n", ns(m["total"]), over, perTraced)
	}
	w("\n")
}

// tracedRecords is how many records a tracing mode traced: those whose spans were exported
// (eight a record; fewer with its batch's stages elsewhere), or at least the mode's share of
// all, the share a bounded queue that dropped spans (at 100 %) hides.
func tracedRecords(mode string, s *Summary, records int) float64 {
	var traced float64
	if s.Spans != nil {
		traced = *s.Spans / 8
	}
	for _, m := range tracingModes {
		if m.name == mode {
			traced = max(traced, m.ratio*float64(records))
		}
	}
	return traced
}

// steadyCPU is the median CPU a minute of a tool's successful steady runs at one rate, and how
// many there were.
func (r *Report) steadyCPU(tool, cell string) (float64, int) {
	var xs []float64
	for _, run := range r.Runs {
		if run.Section == "steady" && run.Tool == tool && run.Cell == cell && run.OK {
			xs = append(xs, cpuPerMinute(run))
		}
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return median(xs), len(xs)
}

// writeSteady writes the steady section: each tool's CPU a minute at each rate, and the agent's
// over tail -F | kcat's.
func (r *Report) writeSteady(w func(string, ...any)) {
	cells := r.cells("steady")
	if len(cells) == 0 {
		return
	}
	w("## A log written at a steady rate: CPU a minute\n\n")
	w("A writer appends lines of %d B to one file in 10 bursts a second for %d s; each tool follows it from its start and sends every line to a topic of 6 partitions. The figure is the CPU (user and system, of every process of the tool) used from the writer's first line to the last line in Kafka, per minute of writing: median of the runs. The tools start a second before the writer; their start and exit are left out. `tail -F | kcat -P` keeps the last few hundred bytes it read until its input ends: each run waits until no line arrives for 10 s, stops the tools, then counts; every line must be in Kafka. *kafkatrail agent* runs with its defaults, telemetry on (OTLP metrics and 1 %% of the records traced, exported to `otlpsink`, whose CPU is not counted). *tail -F | kcat -P* is `tail -F -n +1 FILE | kcat -P -X enable.idempotence=true` (librdkafka's defaults; acks=all is one), both processes counted. *OpenTelemetry Collector* is the filelog receiver to the kafka exporter with its defaults and `required_acks: -1`. *rsyslog* is Debian's rsyslogd with imfile (inotify) to omkafka, librdkafka's defaults plus `enable.idempotence=true` and `request.required.acks=-1`: the shipper many hosts already run.\n\n",
		r.Params.FileLineSize, r.Params.SteadySeconds)
	w("| rate | kafkatrail agent, defaults | tail -F \\| kcat -P | OpenTelemetry Collector | rsyslog imfile+omkafka | agent / kcat | agent / rsyslog |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range cells {
		agent, na := r.steadyCPU("agent", c)
		kcat, nk := r.steadyCPU("kcat", c)
		otel, no := r.steadyCPU("otelcol", c)
		rsys, nr := r.steadyCPU("rsyslog", c)
		cell := func(v float64, n int) string {
			if n == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f s", v)
		}
		ratio := func(of float64, n int) string {
			if na == 0 || n == 0 || of <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.2fx", agent/of)
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", c, cell(agent, na), cell(kcat, nk), cell(otel, no), cell(rsys, nr),
			ratio(kcat, nk), ratio(rsys, nr))
	}
	w("\n")
	r.writeSteadyRSS(w, cells)
}

// steadyRSS is the median of a steady extra (rss_steady_mib, ...) over a tool's good runs at
// one rate, and how many runs had it.
func (r *Report) steadyRSS(tool, cell, key string) (float64, int) {
	var xs []float64
	for _, run := range r.Runs {
		if run.Section == "steady" && run.Tool == tool && run.Cell == cell && run.OK {
			if v, ok := run.Extra[key].(float64); ok {
				xs = append(xs, v)
			}
		}
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return median(xs), len(xs)
}

// idleCell is the steady rate whose runs sampled the idle RSS (the first rate run).
func (r *Report) idleCell() (string, bool) {
	for _, run := range r.Runs {
		if _, ok := run.Extra["rss_idle_mib"]; ok && run.Section == "steady" {
			return run.Cell, true
		}
	}
	return "", false
}

// writeSteadyRSS writes the steady runs' RSS: idle (before the first rate's writer started) and
// at the end of each rate's writing, each tool's processes summed, file-backed part in brackets.
func (r *Report) writeSteadyRSS(w func(string, ...any), cells []string) {
	type row struct{ name, cell, when string }
	var rows []row
	if c, ok := r.idleCell(); ok {
		rows = append(rows, row{"idle, %.0f s after its start", c, "idle"})
	}
	for _, c := range cells {
		rows = append(rows, row{"writing " + c, c, "steady"})
	}
	var lines []string
	for _, rw := range rows {
		line := "| " + rw.name + " |"
		if rw.when == "idle" {
			line = fmt.Sprintf("| "+rw.name+" |", steadyIdle.Seconds())
		}
		seen := false
		for _, tool := range steadyTools {
			v, n := r.steadyRSS(tool, rw.cell, "rss_"+rw.when+"_mib")
			f, _ := r.steadyRSS(tool, rw.cell, "rss_"+rw.when+"_file_mib")
			if n == 0 {
				line += " – |"
				continue
			}
			seen = true
			line += fmt.Sprintf(" %.1f (%.1f) |", v, f)
		}
		if seen {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return
	}
	w("The same runs' RSS in MiB (VmRSS of each of the tool's processes, summed; in brackets the file-backed part, RssFile: the program's own pages): *idle* just before the first rate's writer starts, %.0f s after the tool's start, nothing written yet; *writing* at the writer's last burst. Median of the runs.\n\n", steadyIdle.Seconds())
	w("| RSS MiB | kafkatrail agent, defaults | tail -F \\| kcat -P | OpenTelemetry Collector | rsyslog imfile+omkafka |\n|---|--:|--:|--:|--:|\n")
	for _, l := range lines {
		w("%s\n", l)
	}
	w("\n")
}

// steadyTarget writes the steady section's target lines, for the rates measured: the agent with
// its defaults at most 1.5x the CPU of tail -F | kcat -P and at most rsyslog's.
func (r *Report) steadyTarget(w func(string, ...any)) {
	cells := r.cells("steady")
	if c, ok := r.idleCell(); ok {
		if v, n := r.steadyRSS("agent", c, "rss_idle_mib"); n > 0 {
			w("| the agent idle (with its defaults, started %.0f s ago, nothing to ship): RSS ≤ 25 MiB | %.1f MiB %s |\n",
				steadyIdle.Seconds(), v, map[bool]string{true: "✅", false: "❌"}[v <= 25])
		}
	}
	for _, c := range cells {
		agent, na := r.steadyCPU("agent", c)
		if na == 0 {
			continue
		}
		for _, peer := range []struct {
			tool, name string
			max        float64
		}{{"kcat", "`tail -F \\| kcat -P` (idempotent)", 1.5}, {"rsyslog", "Debian's rsyslog (imfile → omkafka, acks=all)", 1.0}} {
			v, n := r.steadyCPU(peer.tool, c)
			if n == 0 || v == 0 {
				continue
			}
			q := agent / v
			w("| at %s steady, the agent with its defaults uses ≤ %.1fx the CPU of %s | %.2fx (%.2f against %.2f CPU s a minute) %s |\n",
				c, peer.max, peer.name, q, agent, v, map[bool]string{true: "✅", false: "❌"}[q <= peer.max])
		}
	}
}
