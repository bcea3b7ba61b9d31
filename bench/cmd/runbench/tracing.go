package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tracingModes: telemetry off (no trace or metric pipeline: OTEL_TRACES_EXPORTER=none and
// OTEL_METRICS_EXPORTER=none, so the agent installs no observer at all), metrics only
// (OTEL_TRACES_EXPORTER=none), and 1 % (the agent's default) and 100 % sampled. Spans and
// metrics go over OTLP/gRPC to otlpsink on 127.0.0.1 (a backend that only counts), so the
// sampled runs pay for span creation, the export queue and the export. "telemetry off" is
// the base every mode's cost is measured against: the default telemetry's whole cost is the
// "sampled 1 %" row's.
//
// "1 % + slower than p99" adds --trace-slower-than p99 (issue 8): every record slower than the
// moving p99 is traced too, about another 1 % of the records. The "stages per batch" modes add
// --trace-batch-stages per-batch: a batch's stages exported once per batch attempt.
// The 100 % modes are last: tracing() keeps them at the end of every repetition.
var tracingModes = []struct {
	name        string
	ratio       float64
	slowerThan  string
	noMetrics   bool
	batchStages bool
}{{"telemetry off", 0, "", true, false}, {"metrics only", 0, "", false, false}, {"sampled 1 %", 0.01, "", false, false},
	{"1 % + slower than p99", 0.01, "p99", false, false}, {"1 %, stages per batch", 0.01, "", false, true},
	{"sampled 100 %", 1, "", false, false}, {"100 %, stages per batch", 1, "", false, true}}

// slowModes is how many modes at the end of tracingModes are the 100 % ones.
const slowModes = 2

// tracingBase is the mode the others are measured against.
const tracingBase = "telemetry off"

func (b *bench) tracing() error {
	if b.p.otlpsink == "" {
		return fmt.Errorf("--otlpsink is required for the tracing section")
	}
	c := cell{Size: 100, Batch: 16384, Comp: "none"}
	data, err := b.dataFile(b.prm.TracingRecords, c.Size)
	if err != nil {
		return err
	}
	if !b.traceFlag {
		b.report.Notes = append(b.report.Notes, "The agent has no --trace-sample-ratio flag in this build: the tracing "+
			"runs set OTEL_TRACES_SAMPLER=parentbased_traceidratio and OTEL_TRACES_SAMPLER_ARG instead.")
	}
	b.warm()
	total := b.prm.Runs * len(tracingModes)
	i := 0
	for rep := 1; rep <= b.prm.Runs; rep++ {
		// Each repetition starts with the next of the fast modes, as the producers section does
		// with its tools, and ends with the 100 % run: the run after the warm-up and the one
		// after a 100 % run (20 s of spans, then its topic's deletion) are the slow ones, and no
		// mode should always be the one that pays.
		fast := len(tracingModes) - slowModes
		for k := range tracingModes {
			m := tracingModes[k]
			if k < fast {
				m = tracingModes[(k+rep-1)%fast]
			} else {
				m = tracingModes[fast+(k-fast+rep-1)%slowModes] // which 100 % run goes first alternates
			}
			if b.ctx.Err() != nil {
				return errStopped
			}
			i++
			r := b.tracingRun(m.name, m.ratio, m.slowerThan, m.noMetrics, m.batchStages, c, rep, data)
			b.record(r)
			logf("[%d/%d] tracing rep %d %-13s %s spans=%v", i, total, rep, m.name, r.brief(), r.Extra["spans_exported"])
			b.pause()
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startSink starts otlpsink, the OTLP receiver that only counts, on a free port, and waits
// until it accepts connections.
func (b *bench) startSink() (*proc, int, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	sink, err := startProc("otlpsink", exec.Command(b.p.otlpsink, "--listen", "127.0.0.1:"+strconv.Itoa(port)))
	if err != nil {
		return nil, 0, err
	}
	if err := waitFor(b.ctx, 10*time.Second, 20*time.Millisecond, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			conn.Close()
			return true, nil
		}
		return sink.exited(), nil
	}); err != nil || sink.exited() {
		_ = sink.stop(5 * time.Second)
		return nil, 0, fmt.Errorf("otlpsink did not start: %v %v", err, sink.exitErr())
	}
	return sink, port, nil
}

// sinkEnv is the agent's environment exporting traces (as the agent's defaults sample them)
// and metrics over OTLP/gRPC to an otlpsink on port.
// exportToSink starts an otlpsink and points cmd's telemetry at it (sinkEnv); stop stops it.
func (b *bench) exportToSink(cmd *exec.Cmd) (stop func(), err error) {
	sink, port, err := b.startSink()
	if err != nil {
		return nil, err
	}
	cmd.Env = sinkEnv(port)
	return func() { sink.stop(5 * time.Second) }, nil
}

func sinkEnv(port int) []string {
	return append(cleanEnv(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:"+strconv.Itoa(port),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_METRICS_EXPORTER=otlp",
		"OTEL_LOGS_EXPORTER=none",
	)
}

func (b *bench) tracingRun(mode string, ratio float64, slowerThan string, noMetrics, batchStages bool, c cell, rep int, data string) Run {
	r := Run{Section: "tracing", Tool: "agent", Cell: mode, Rep: rep, Records: int64(b.prm.TracingRecords),
		Bytes: int64(b.prm.TracingRecords) * int64(c.Size), Extra: map[string]any{}}
	sink, port, err := b.startSink()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer sink.stop(5 * time.Second)

	r.Topic = b.topicName("t", "agent", strings.ReplaceAll(mode, " ", ""), rep)
	if !b.createTopic(&r) {
		return r
	}
	defer b.deleteTopic(r.Topic)
	args := withProps(agentArgs(b.p.bootstrap, r.Topic), b.javaProps(c))
	env := sinkEnv(port)
	if noMetrics {
		env = append(env, "OTEL_METRICS_EXPORTER=none")
	}
	if ratio == 0 {
		env = append(env, "OTEL_TRACES_EXPORTER=none")
	} else {
		env = append(env, "OTEL_TRACES_EXPORTER=otlp")
		if b.traceFlag {
			args = append(args, "--trace-sample-ratio", strconv.FormatFloat(ratio, 'f', -1, 64))
		} else {
			env = append(env, "OTEL_TRACES_SAMPLER=parentbased_traceidratio",
				"OTEL_TRACES_SAMPLER_ARG="+strconv.FormatFloat(ratio, 'f', -1, 64))
		}
	}
	if slowerThan != "" {
		args = append(args, "--trace-slower-than", slowerThan)
	}
	if batchStages {
		args = append(args, "--trace-batch-stages", "per-batch")
	}
	cmd, err := stdinCommand(data, b.p.agent, args...)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer cmd.Stdin.(*os.File).Close()
	// The agent's own CPU profile splits its CPU into what tracing and metrics take
	// (cpusplit.go); profiling at 100 Hz costs every mode alike.
	prof := filepath.Join(b.p.work, "cpu-"+r.Topic+".prof")
	cmd.Env = append(env, "KAFKATRAIL_CPUPROFILE="+prof)
	if _, ok := b.runToEnd(&r, "agent", cmd); !ok {
		return r
	}
	if split, err := cpuSplit(prof); err == nil {
		r.Extra["cpu_split_s"] = split
		_ = os.Remove(prof)
	} else {
		logf("tracing: no CPU split: %v", err)
	}
	r.InKafka, _ = b.adm.count(b.ctx, r.Topic)
	if r.Error == "" && r.InKafka != r.Records {
		r.Error = fmt.Sprintf("%d records in the topic, want %d", r.InKafka, r.Records)
	}
	_ = sink.stop(5 * time.Second)
	var counts map[string]int64
	sc := bufio.NewScanner(strings.NewReader(sink.stdout.String()))
	for sc.Scan() {
		_ = json.Unmarshal(sc.Bytes(), &counts)
	}
	r.Extra["spans_exported"] = counts["spans"]
	r.Extra["trace_bytes"] = counts["trace_bytes"]
	r.Extra["metric_exports"] = counts["metric_requests"]
	r.Extra["sink_cpu_s"] = sink.usage.CPUSec()
	r.OK = r.Error == ""
	r.rates()
	return r
}
