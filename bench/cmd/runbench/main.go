// Command runbench is the benchmark harness behind `make bench` (scripts/bench.sh builds it and
// runs it under scripts/kafka/with-broker.sh). It measures, against one real Kafka broker and in
// alternating runs within one invocation:
//
//   - producers: our agent (stdin), kcat -P -l, the franz-go program (bench/kgoprod) and Kafka's
//     ProducerPerformance, over a matrix of record size, batch.size and compression;
//   - file: the agent tailing a file, kcat -P -l (the baseline), the OpenTelemetry Collector
//     (filelog receiver, kafka exporter) and rsyslog (imfile, omkafka);
//   - tracing: the agent with telemetry off, metrics only, sampled at 1 % (its default) and at 100 %;
//   - steady: the agent with its defaults, tail -F | kcat -P, the OpenTelemetry Collector and
//     rsyslog on a log written at 1k, 5k and 50k lines/s, their CPU a minute and their RSS;
//   - wakeups: the agent on the steady log at 5k lines/s with an execution trace, its goroutine
//     wakeups a burst of lines and where they waited;
//   - memory: the agent tailing a growing file with the broker stopped, its RSS over time.
//
// It writes docs/benchmarks.json (every run, the medians, the ratios) and docs/benchmarks.md
// (rendered from the JSON; `runbench --render docs/benchmarks.json` renders it again).
//
// Settings come from the environment (see params below and docs/benchmarks.md): BENCH_RUNS,
// BENCH_RECORDS, BENCH_FILE_LINES, BENCH_SECTIONS, BENCH_MEMORY_SECONDS, ...
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// params are the benchmark's knobs, from the environment.
type Params struct {
	Runs            int      `json:"runs"`
	Records         int      `json:"records"`
	TracingRecords  int      `json:"tracing_records"`
	FileLines       int      `json:"file_lines"`
	FileLineSize    int      `json:"file_line_size"`
	Sections        []string `json:"sections"`
	Tools           []string `json:"tools,omitempty"`
	Sizes           []int    `json:"record_sizes"`
	Batches         []int    `json:"batch_sizes"`
	Compressions    []string `json:"compressions"`
	Partitions      int32    `json:"partitions"`
	MemorySeconds   int      `json:"memory_seconds"`
	MemoryBuffers   []int64  `json:"memory_buffer_memory"`
	MemoryRate      int      `json:"memory_lines_per_s"`
	Latencies       []int    `json:"latencies_ms"`
	LatencyRate     int      `json:"latency_writer_lines_per_s"`
	LatencySeconds  int      `json:"latency_writer_seconds"`
	SteadyRates     []int    `json:"steady_lines_per_s,omitempty"`
	SteadySeconds   int      `json:"steady_seconds,omitempty"`
	RunTimeoutSec   int      `json:"run_timeout_s"`
	PauseSec        float64  `json:"pause_s"`
	MaxRequestBytes int      `json:"max_request_size"`
	BufferMemory    int      `json:"buffer_memory"`
	WarmupRecords   int      `json:"warmup_records"`
}

type paths struct {
	agent, kgoprod, kcat, otelcol, otlpsink, rsyslogd, brokerSh string
	dist                                                        string
	bootstrap, work, out                                        string
}

func envInt(name string, def int) int {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
		if err != nil {
			fatalf("%s=%q: want an integer", name, v)
		}
		return n
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fatalf("%s=%q: want a number", name, v)
		}
		return n
	}
	return def
}

func envList(name, def string) []string {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		v = def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func envInts(name, def string) []int {
	var out []int
	for _, s := range envList(name, def) {
		n, err := strconv.Atoi(s)
		if err != nil {
			fatalf("%s: %q is not an integer", name, s)
		}
		out = append(out, n)
	}
	return out
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "runbench: "+format+"\n", args...)
	os.Exit(2)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "runbench %s: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func main() {
	var p paths
	render := flag.String("render", "", "only render FILE.json (a previous run) into Markdown next to it")
	flag.StringVar(&p.agent, "agent", "", "the agent binary (make agent)")
	flag.StringVar(&p.kgoprod, "kgoprod", "", "the kgoprod binary (bench/kgoprod)")
	flag.StringVar(&p.kcat, "kcat", "kcat", "kcat")
	flag.StringVar(&p.otelcol, "otelcol", "", "the OpenTelemetry Collector built by scripts/bench.sh (empty: skip it, saying why)")
	flag.StringVar(&p.otlpsink, "otlpsink", "", "the otlpsink binary (bench/cmd/otlpsink)")
	flag.StringVar(&p.rsyslogd, "rsyslogd", "/usr/sbin/rsyslogd", "rsyslogd (Debian's rsyslog with rsyslog-kafka)")
	flag.StringVar(&p.brokerSh, "broker-sh", "", "scripts/kafka/broker.sh (java tools; stopping the broker for the memory section)")
	flag.StringVar(&p.out, "out", "docs", "directory for benchmarks.md and benchmarks.json")
	flag.StringVar(&p.dist, "dist", "", "make release's dist/ directory: its artifacts' sizes go in the report (empty: none)")
	flag.StringVar(&p.work, "work", "", "scratch directory for data files and state (default: a new /tmp/kafkatrail-bench.*; removed at the end)")
	skipNote := flag.String("otelcol-missing", "", "why the collector is missing, if it is")
	splitFile := flag.String("cpusplit-file", "", "only print the file path's CPU split (seconds by part) of the agent's CPU profile FILE")
	flag.Parse()

	if *splitFile != "" {
		split, err := cpuSplitBy(*splitFile, fileCPUParts)
		if err != nil {
			fatalf("%v", err)
		}
		for _, k := range append(fileCPUPartNames(), "total") {
			fmt.Printf("%-13s %6.3f s\n", k, split[k])
		}
		return
	}

	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			fatalf("%v", err)
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			fatalf("%s: %v", *render, err)
		}
		md := filepath.Join(filepath.Dir(*render), "benchmarks.md")
		if err := os.WriteFile(md, []byte(renderMarkdown(&r)), 0o644); err != nil {
			fatalf("%v", err)
		}
		logf("wrote %s", md)
		return
	}

	prm := Params{
		Runs:            envInt("BENCH_RUNS", envInt("N", 3)),
		Records:         envInt("BENCH_RECORDS", 2_000_000),
		FileLines:       envInt("BENCH_FILE_LINES", 3_000_000),
		FileLineSize:    envInt("BENCH_FILE_LINE_SIZE", 100),
		Sections:        envList("BENCH_SECTIONS", "producers,file,tracing,steady,wakeups,latency,memory"),
		Tools:           envList("BENCH_TOOLS", ""),
		Sizes:           envInts("BENCH_SIZES", "100,1024"),
		Batches:         envInts("BENCH_BATCHES", "16384,1048576"),
		Compressions:    envList("BENCH_COMPRESSIONS", "none,lz4"),
		Partitions:      int32(envInt("BENCH_PARTITIONS", 6)),
		MemorySeconds:   envInt("BENCH_MEMORY_SECONDS", 60),
		MemoryRate:      envInt("BENCH_MEMORY_RATE", 50_000),
		Latencies:       envInts("BENCH_LATENCIES", "100,500"),
		LatencyRate:     envInt("BENCH_LATENCY_RATE", 50_000),
		LatencySeconds:  envInt("BENCH_LATENCY_SECONDS", 20),
		SteadyRates:     envInts("BENCH_STEADY_RATES", "1000,5000,50000"),
		SteadySeconds:   envInt("BENCH_STEADY_SECONDS", 30),
		RunTimeoutSec:   envInt("BENCH_RUN_TIMEOUT", 900),
		PauseSec:        envFloat("BENCH_PAUSE", 1),
		WarmupRecords:   envInt("BENCH_WARMUP", 1_000_000),
		MaxRequestBytes: 1 << 20,
		BufferMemory:    32 << 20,
	}
	// The tracing runs are longer than the producers': a few per cent between modes must stand
	// out of the start and the completion poll.
	prm.TracingRecords = envInt("BENCH_TRACING_RECORDS", 3*prm.Records)
	for _, s := range envInts("BENCH_MEMORY_BUFFERS", "33554432,8388608") {
		prm.MemoryBuffers = append(prm.MemoryBuffers, int64(s))
	}
	if prm.Runs < 1 || prm.Records < 1 || prm.FileLines < 1 || prm.TracingRecords < 1 {
		fatalf("BENCH_RUNS, BENCH_RECORDS, BENCH_TRACING_RECORDS and BENCH_FILE_LINES must be positive")
	}
	p.bootstrap = os.Getenv("KAFKA_BOOTSTRAP")
	if p.bootstrap == "" {
		fatalf("KAFKA_BOOTSTRAP is not set: run under scripts/kafka/with-broker.sh (make bench does)")
	}
	if p.agent == "" || p.kgoprod == "" || p.brokerSh == "" {
		fatalf("--agent, --kgoprod and --broker-sh are required (scripts/bench.sh passes them)")
	}
	if p.work == "" {
		d, err := os.MkdirTemp("", "kafkatrail-bench.")
		if err != nil {
			fatalf("%v", err)
		}
		p.work = d
		defer os.RemoveAll(d)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		<-ctx.Done()
		close(interrupted)
	}()

	b := &bench{p: p, prm: prm, ctx: ctx, rng: rand.New(rand.NewPCG(1, 2))}
	b.report = &Report{Params: prm, Started: time.Now().UTC().Format(time.RFC3339)}
	if os.Getenv("BENCH_MERGE") == "1" {
		if err := b.loadKept(); err != nil {
			fatalf("BENCH_MERGE=1: %v", err)
		}
	}
	if *skipNote != "" {
		b.otelMissing = *skipNote
	}
	if err := b.run(); err != nil {
		logf("error: %v", err)
		b.report.Notes = append(b.report.Notes, "The run stopped early: "+err.Error())
	}
	if p.dist != "" {
		rs, err := readRelease(p.dist, p.agent)
		if err != nil {
			b.report.Notes = append(b.report.Notes, "Release sizes not read: "+err.Error())
		}
		b.report.Release = rs
	}
	b.report.DurationSec = time.Since(b.t0).Seconds()
	if t0, err := strconv.ParseInt(os.Getenv("BENCH_T0"), 10, 64); err == nil && t0 > 0 {
		b.report.MakeBenchSec = float64(time.Now().Unix() - t0)
	}
	if err := b.write(); err != nil {
		fatalf("writing the report: %v", err)
	}
	if ctx.Err() != nil {
		os.Exit(130)
	}
}

type bench struct {
	p           paths
	prm         Params
	ctx         context.Context
	adm         *admin
	rng         *rand.Rand
	report      *Report
	t0          time.Time
	seq         int
	brokerPID   int
	traceFlag   bool
	otelMissing string
	warmed      bool
	// kept is what BENCH_MERGE=1 keeps of the previous report: the runs of the sections not
	// measured again, and where they came from.
	kept *keptReport
}

// keptReport is the part of a previous report that a merged one carries on.
type keptReport struct {
	runs     []Run
	memory   []MemoryResult
	latency  []LatencyResult
	sections []string
	started  string
	commit   string
}

// loadKept reads the previous report in the output directory and keeps its runs of the
// sections this invocation does not measure.
func (b *bench) loadKept() error {
	data, err := os.ReadFile(filepath.Join(b.p.out, "benchmarks.json"))
	if err != nil {
		return err
	}
	var old Report
	if err := json.Unmarshal(data, &old); err != nil {
		return err
	}
	k := &keptReport{started: old.Started, commit: old.Env["git_commit"]}
	seen := map[string]bool{}
	for _, r := range old.Runs {
		if !b.has(r.Section) {
			k.runs = append(k.runs, r)
			if !seen[r.Section] {
				seen[r.Section] = true
				k.sections = append(k.sections, r.Section)
			}
		}
	}
	if !b.has("memory") && len(old.Memory) > 0 {
		k.memory = old.Memory
		k.sections = append(k.sections, "memory")
	}
	if !b.has("latency") && len(old.Latency) > 0 {
		k.latency = old.Latency
		k.sections = append(k.sections, "latency")
	}
	b.kept = k
	return nil
}

func (b *bench) has(section string) bool {
	for _, s := range b.prm.Sections {
		if s == section {
			return true
		}
	}
	return false
}

// toolOn says whether BENCH_TOOLS (default: all) lists tool.
func (b *bench) toolOn(tool string) bool {
	if len(b.prm.Tools) == 0 {
		return true
	}
	for _, t := range b.prm.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

func (b *bench) run() error {
	b.t0 = time.Now()
	var err error
	b.adm, err = newAdmin(b.p.bootstrap)
	if err != nil {
		return err
	}
	defer b.adm.close()
	b.brokerPID = brokerPID()
	b.report.Env = b.environment()
	help, _ := exec.Command(b.p.agent, "--help").CombinedOutput()
	b.traceFlag = strings.Contains(string(help), "--trace-sample-ratio")
	b.report.Env["agent_trace_sample_ratio_flag"] = strconv.FormatBool(b.traceFlag)

	for _, sec := range []struct {
		name string
		run  func() error
	}{
		{"producers", b.producers},
		{"file", b.fileSection},
		{"tracing", b.tracing},
		{"steady", b.steady},
		{"wakeups", b.wakeups},
		{"latency", b.latency}, // its own broker, behind a toxiproxy
		{"memory", b.memory},   // last: it stops the broker
	} {
		if !b.has(sec.name) {
			continue
		}
		if err := sec.run(); err != nil {
			return err
		}
	}
	return nil
}

// brokerPID reads the test broker's PID (scripts/kafka/broker.sh's pid file), 0 if unknown.
func brokerPID() int {
	state := os.Getenv("KAFKATRAIL_STATE")
	if state == "" {
		state = "/tmp/kafkatrail-kafka"
	}
	b, err := os.ReadFile(filepath.Join(state, "broker.pid"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (b *bench) brokerCPU() float64 {
	if b.brokerPID == 0 {
		return 0
	}
	s, err := cpuSeconds(b.brokerPID)
	if err != nil {
		return 0
	}
	return s
}

// topicName returns a new topic name for one run.
func (b *bench) topicName(section, tool, cell string, rep int) string {
	b.seq++
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
				return r
			}
			return '-'
		}, s)
	}
	return clean(fmt.Sprintf("bench-%s-%s-%s-r%d-%d-%d", section, tool, cell, rep, b.seq, time.Now().Unix()%100000))
}

func (b *bench) pause() {
	if b.prm.PauseSec > 0 {
		select {
		case <-b.ctx.Done():
		case <-time.After(time.Duration(b.prm.PauseSec * float64(time.Second))):
		}
	}
}

// dataFile returns a file of n lines of size random upper-case letters each (plus '\n'), made
// once per (n, size) in the work directory. ProducerPerformance's own generator makes the same
// kind of payload (random letters A-Z), so lz4 finds about as little to compress in both.
func (b *bench) dataFile(n, size int) (string, error) {
	path := filepath.Join(b.p.work, fmt.Sprintf("data-%d-x%d.txt", n, size))
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(n)*int64(size+1) {
		return path, nil
	}
	t0 := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const chunkLines = 4096
	buf := make([]byte, chunkLines*(size+1))
	src := rand.NewChaCha8([32]byte{byte(size), byte(n), byte(n >> 8), byte(n >> 16)})
	for left := n; left > 0; {
		k := min(left, chunkLines)
		chunk := buf[:k*(size+1)]
		_, _ = src.Read(chunk)
		for i := range chunk {
			chunk[i] = 'A' + chunk[i]%26
		}
		for j := 1; j <= k; j++ {
			chunk[j*(size+1)-1] = '\n'
		}
		if _, err := f.Write(chunk); err != nil {
			return "", err
		}
		left -= k
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	logf("made %s (%d lines of %d bytes) in %v", path, n, size, time.Since(t0).Round(time.Millisecond))
	return path, nil
}

// agentEnv is the agent's environment outside the tracing section: telemetry export off
// (nothing listens on the OTLP default localhost:4317 here).
func agentEnv(extra ...string) []string {
	env := cleanEnv()
	env = append(env, "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	return append(env, extra...)
}

// cleanEnv is this process's environment without OTEL_* and the agent's KAFKATRAIL_* (and
// deprecated AGENT_*) variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "KAFKATRAIL_") || strings.HasPrefix(kv, "AGENT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// record adds a run to the report and rewrites the report files, so that an interrupted or
// stopped invocation leaves what it measured so far.
func (b *bench) record(r Run) {
	b.report.Runs = append(b.report.Runs, r)
	b.checkpoint()
}

func (b *bench) checkpoint() {
	b.report.DurationSec = time.Since(b.t0).Seconds()
	b.report.InProgress = true
	if err := b.write(); err != nil {
		logf("writing the report: %v", err)
	}
	b.report.InProgress = false
}

func (b *bench) write() error {
	b.report.Finished = time.Now().UTC().Format(time.RFC3339)
	rep := b.report
	if k := b.kept; k != nil && len(k.sections) > 0 {
		merged := *b.report
		merged.Runs = append(slices.Clone(k.runs), b.report.Runs...)
		if len(merged.Memory) == 0 {
			merged.Memory = k.memory
		}
		if len(merged.Latency) == 0 {
			merged.Latency = k.latency
		}
		merged.Notes = append(slices.Clone(b.report.Notes), fmt.Sprintf("Merged (BENCH_MERGE=1): %s measured in this run; %s "+
			"kept from the run started %s at commit `%s`.", strings.Join(b.prm.Sections, ", "), strings.Join(k.sections, ", "), k.started, k.commit))
		rep = &merged
	}
	summarize(rep)
	if err := os.MkdirAll(b.p.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jp := filepath.Join(b.p.out, "benchmarks.json")
	if err := os.WriteFile(jp, append(js, '\n'), 0o644); err != nil {
		return err
	}
	mp := filepath.Join(b.p.out, "benchmarks.md")
	if err := os.WriteFile(mp, []byte(renderMarkdown(rep)), 0o644); err != nil {
		return err
	}
	if !b.report.InProgress {
		logf("wrote %s and %s (%.0f s in all)", mp, jp, b.report.DurationSec)
	}
	return nil
}

// environment describes the machine and the versions of everything measured.
func (b *bench) environment() map[string]string {
	env := map[string]string{}
	out := func(name string, args ...string) string {
		o, err := exec.Command(name, args...).CombinedOutput()
		if err != nil && len(o) == 0 {
			return ""
		}
		return strings.TrimSpace(string(o))
	}
	first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return strings.TrimSpace(l) }
	if c, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(c), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, v, _ := strings.Cut(l, ":")
				env["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	env["cores"] = out("nproc")
	if m, err := os.ReadFile("/proc/meminfo"); err == nil {
		env["memory"] = strings.Join(strings.Fields(first(string(m)))[1:], " ")
	}
	env["kernel"] = out("uname", "-r")
	env["go"] = out("go", "version")
	env["agent"] = first(out(b.p.agent, "version"))
	env["git_commit"] = out("git", "rev-parse", "--short=12", "HEAD")
	if s := out("git", "status", "--porcelain", "--untracked-files=no"); s != "" {
		env["git_dirty"] = "yes (uncommitted changes in the work tree)"
	}
	env["kcat"] = first(out(b.p.kcat, "-V"))
	for _, l := range strings.Split(out(b.p.kcat, "-V"), "\n") {
		if strings.Contains(l, "librdkafka") {
			env["kcat"] = strings.TrimSpace(first(out(b.p.kcat, "-V")) + "; " + strings.TrimSpace(l))
		}
	}
	env["java"] = first(out("java", "-version"))
	env["kafka"] = "Apache Kafka 4.4.0 (scripts/kafka/broker.sh: single node, KRaft, -Xms512m -Xmx1g)"
	env["franz_go"] = "github.com/twmb/franz-go v1.22.3 (bench/go.mod)"
	if b.p.otelcol != "" {
		env["otelcol"] = first(out(b.p.otelcol, "--version"))
	}
	env["rsyslogd"] = first(out(b.p.rsyslogd, "-v"))
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		env["loadavg_at_start"] = strings.TrimSpace(string(la))
	}
	return env
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var errStopped = errors.New("interrupted")
