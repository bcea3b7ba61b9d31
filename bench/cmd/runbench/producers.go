package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// cell is one point of the producer matrix. A Defaults cell gives every tool its own defaults
// plus the same delivery guarantee (acks=all, idempotence), as users run them, and runs the
// agent with its default telemetry on; Batch and Comp do not apply.
type cell struct {
	Size     int
	Batch    int
	Comp     string
	Defaults bool
}

func (c cell) ID() string {
	if c.Defaults {
		return fmt.Sprintf("%dB-defaults", c.Size)
	}
	return fmt.Sprintf("%dB-b%s-%s", c.Size, kib(c.Batch), c.Comp)
}

// defaultsCell is the headline cell: every tool with its own defaults.
const defaultsCell = "100B-defaults"

// guaranteeProps is the delivery guarantee every tool is given in a Defaults cell, in the
// words librdkafka and the Java client share.
var guaranteeProps = []string{"acks=all", "enable.idempotence=true"}

func kib(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%1024 == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.Itoa(n)
}

// javaProps are the settings every tool gets, by their Java names.
func (b *bench) javaProps(c cell) []string {
	if c.Defaults {
		return guaranteeProps
	}
	return append(sharedProps(c),
		"max.request.size="+strconv.Itoa(b.prm.MaxRequestBytes),
		"buffer.memory="+strconv.Itoa(b.prm.BufferMemory),
	)
}

// sharedProps are the settings that librdkafka and the Java client name alike.
func sharedProps(c cell) []string {
	return []string{
		"acks=all",
		"enable.idempotence=true",
		"linger.ms=5",
		"batch.size=" + strconv.Itoa(c.Batch),
		"compression.type=" + c.Comp,
	}
}

// rdkafkaProps are the same settings in librdkafka's words (kcat, omkafka). librdkafka caps a
// batch by batch.num.messages (default 10000) and message.max.bytes (the request size) as well
// as batch.size; the first is raised out of the way, the second set to max.request.size.
// buffer.memory becomes queue.buffering.max.kbytes, with the message-count cap raised.
func (b *bench) rdkafkaProps(c cell) []string {
	if c.Defaults {
		return guaranteeProps
	}
	return append(sharedProps(c),
		"message.max.bytes="+strconv.Itoa(b.prm.MaxRequestBytes),
		"batch.num.messages=1000000",
		"queue.buffering.max.kbytes="+strconv.Itoa(b.prm.BufferMemory>>10),
		"queue.buffering.max.messages=10000000",
	)
}

var producerTools = []string{"agent", "kcat", "kgo", "producer-perf"}

func (b *bench) cells() []cell {
	var cs []cell
	for _, s := range b.prm.Sizes {
		cs = append(cs, cell{Size: s, Defaults: true})
	}
	for _, s := range b.prm.Sizes {
		for _, bt := range b.prm.Batches {
			for _, c := range b.prm.Compressions {
				cs = append(cs, cell{Size: s, Batch: bt, Comp: c})
			}
		}
	}
	return cs
}

// producers runs the matrix: for each repetition, for each cell, each tool in turn.
func (b *bench) producers() error {
	cells := b.cells()
	files := map[int]string{}
	for _, s := range b.prm.Sizes {
		f, err := b.dataFile(b.prm.Records, s)
		if err != nil {
			return err
		}
		files[s] = f
	}
	b.warm()
	tools := producerToolsOn(b)
	total := b.prm.Runs * len(cells) * len(tools)
	i := 0
	for rep := 1; rep <= b.prm.Runs; rep++ {
		for _, c := range cells {
			// Each repetition starts with the next tool: the first run after the warm-up was
			// slow whichever tool made it (the broker's JIT is still compiling), so no tool
			// should always be the one that pays.
			for k := range tools {
				tool := tools[(k+rep-1)%len(tools)]
				if b.ctx.Err() != nil {
					return errStopped
				}
				i++
				r := b.producerRun(tool, c, rep, files[c.Size])
				b.record(r)
				logf("[%d/%d] producers rep %d %s %-13s %s", i, total, rep, c.ID(), tool, r.brief())
				b.pause()
			}
		}
	}
	return nil
}

// producerToolsOn lists the producer tools this invocation runs, in producerTools' order.
func producerToolsOn(b *bench) []string {
	var tools []string
	for _, t := range producerTools {
		if b.toolOn(t) {
			tools = append(tools, t)
		}
	}
	return tools
}

func (r Run) brief() string {
	if !r.OK {
		return "FAILED: " + r.Error
	}
	s := fmt.Sprintf("%9.0f rec/s %7.1f MiB/s  wall %6.2fs  cpu %6.2fs  rss %6.1f MiB  broker cpu %5.1fs",
		r.RecordsPerSec, r.MiBPerSec, r.WallSec, r.CPUSec, r.MaxRSSMiB, r.BrokerCPUSec)
	if r.Latency != nil {
		s += fmt.Sprintf("  p50/p99/p99.9 %g/%g/%g ms (own %.0f rec/s)", r.Latency.P50, r.Latency.P99, r.Latency.P999, r.ToolRecordsPerSec)
	}
	return s
}

// producerCommand builds the command line of one tool for one cell.
func (b *bench) producerCommand(tool string, c cell, data, topic string, n int) (*exec.Cmd, error) {
	switch tool {
	case "agent":
		args := agentArgs(b.p.bootstrap, topic)
		if c.Defaults {
			args = []string{"--brokers", b.p.bootstrap, "--topic", topic, "--log-level", "warn"}
		}
		cmd, err := stdinCommand(data, b.p.agent, withProps(args, b.javaProps(c))...)
		if err != nil {
			return nil, err
		}
		cmd.Env = agentEnv() // producerRun gives a Defaults cell's agent its telemetry
		return cmd, nil
	case "kgo":
		return stdinCommand(data, b.p.kgoprod, withProps([]string{"--brokers", b.p.bootstrap, "--topic", topic, "-q"}, b.javaProps(c))...)
	case "kcat":
		return exec.Command(b.p.kcat, withProps([]string{"-P", "-b", b.p.bootstrap, "-t", topic, "-l", data, "-q"}, b.rdkafkaProps(c))...), nil
	case "producer-perf":
		args := []string{"java", "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
			"--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(c.Size), "--throughput", "-1",
			"--producer-props", "bootstrap.servers=" + b.p.bootstrap}
		args = append(args, b.javaProps(c)...)
		return exec.Command(b.p.brokerSh, args...), nil
	}
	return nil, fmt.Errorf("unknown tool %q", tool)
}

func (b *bench) producerRun(tool string, c cell, rep int, data string) Run {
	r := Run{Section: "producers", Tool: tool, Cell: c.ID(), Rep: rep, Records: int64(b.prm.Records),
		Bytes: int64(b.prm.Records) * int64(c.Size)}
	r.Topic = b.topicName("p", tool, c.ID(), rep)
	if !b.createTopic(&r) {
		return r
	}
	defer b.deleteTopic(r.Topic)
	cmd, err := b.producerCommand(tool, c, data, r.Topic, b.prm.Records)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if f, ok := cmd.Stdin.(*os.File); ok {
		defer f.Close()
	}
	if tool == "agent" && c.Defaults {
		stop, err := b.exportToSink(cmd)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		defer stop()
	}
	p, ok := b.runToEnd(&r, tool, cmd)
	if !ok {
		return r
	}
	r.InKafka, err = b.adm.count(b.ctx, r.Topic)
	if err != nil && r.Error == "" {
		r.Error = "counting records: " + err.Error()
	}
	r.Partitions = b.adm.perPartition(b.ctx, r.Topic)
	if r.Error == "" && r.InKafka != r.Records {
		r.Error = fmt.Sprintf("%d records in the topic, want %d", r.InKafka, r.Records)
	}
	if tool == "producer-perf" {
		if err := r.parsePerf(p.stdout.String()); err != nil && r.Error == "" {
			r.Error = err.Error()
		}
	}
	r.OK = r.Error == ""
	r.rates()
	return r
}

// agentArgs are the agent's arguments common to every run: no headers, warnings only.
func agentArgs(bootstrap, topic string) []string {
	return []string{"--brokers", bootstrap, "--topic", topic, "--header-host=", "--header-path=", "--log-level", "warn"}
}

// withProps appends "-X key=value" to args for each of props.
func withProps(args, props []string) []string {
	for _, kv := range props {
		args = append(args, "-X", kv)
	}
	return args
}

// stdinCommand is the command name args with the file data as its standard input (the caller
// closes it: cmd.Stdin).
func stdinCommand(data, name string, args ...string) (*exec.Cmd, error) {
	f, err := os.Open(data)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = f
	return cmd, nil
}

// createTopic creates r.Topic; on failure it records the error in r and returns false.
func (b *bench) createTopic(r *Run) bool {
	if err := b.adm.createTopic(b.ctx, r.Topic, b.prm.Partitions); err != nil {
		r.Error = err.Error()
		return false
	}
	return true
}

// deleteTopic deletes a run's topic, logging a failure.
func (b *bench) deleteTopic(topic string) {
	if err := b.adm.deleteTopic(b.ctx, topic); err != nil {
		logf("delete topic %s: %v", topic, err)
	}
}

// runToEnd runs cmd (tool names it) until it exits or the run timeout passes, and records in r
// its resource use, the broker's CPU time meanwhile and its failure, if any. It returns false
// (the error in r) if cmd did not start.
func (b *bench) runToEnd(r *Run, tool string, cmd *exec.Cmd) (*proc, bool) {
	cpu0 := b.brokerCPU()
	p, err := startProc(tool, cmd)
	if err != nil {
		r.Error = err.Error()
		return nil, false
	}
	werr := p.wait(time.Duration(b.prm.RunTimeoutSec) * time.Second)
	r.BrokerCPUSec = b.brokerCPU() - cpu0
	r.setUsage(p)
	if werr != nil {
		r.Error = werr.Error()
	} else if err := p.exitErr(); err != nil {
		r.Error = err.Error()
	}
	return p, true
}

func (r *Run) setUsage(p *proc) {
	r.WallSec = p.wall().Seconds()
	r.CPUUserSec = p.usage.UserSec
	r.CPUSysSec = p.usage.SysSec
	r.CPUSec = p.usage.CPUSec()
	r.MaxRSSMiB = float64(p.usage.MaxRSSKiB) / 1024
}

func (r *Run) rates() {
	if r.WallSec > 0 {
		r.RecordsPerSec = float64(r.Records) / r.WallSec
		r.MiBPerSec = float64(r.Bytes) / r.WallSec / (1 << 20)
	}
}

// ProducerPerformance's last line (Kafka 4.x):
// "2000000 records sent, 467289.7 records/sec (44.56 MB/sec), 43.91 ms avg latency, 310.00 ms max
// latency, 38 ms 50th, 86 ms 95th, 114 ms 99th, 145 ms 99.9th."
var perfRE = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th`)

func (r *Run) parsePerf(out string) error {
	m := perfRE.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return fmt.Errorf("no summary line in ProducerPerformance's output: %s", lastLines(out, 3))
	}
	last := m[len(m)-1]
	f := func(i int) float64 { v, _ := strconv.ParseFloat(last[i], 64); return v }
	if int64(f(1)) != r.Records {
		return fmt.Errorf("ProducerPerformance sent %s records, want %d", last[1], r.Records)
	}
	r.ToolRecordsPerSec = f(2)
	r.Latency = &Latency{Avg: f(4), Max: f(5), P50: f(6), P95: f(7), P99: f(8), P999: f(9)}
	return nil
}

// Latency is Send-to-acknowledgement latency in milliseconds, as a tool reports it.
type Latency struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Avg  float64 `json:"avg"`
	Max  float64 `json:"max"`
}

var _ = strings.TrimSpace

// warm runs kgoprod (unrecorded) into a scratch topic, without and with lz4, before the first
// measured run: a fresh broker JVM interprets its produce path until the JIT has compiled it,
// and measured runs on a cold broker were several times slower (and cost the broker several
// times the CPU) than the same runs minutes later. BENCH_WARMUP=0 turns it off.
func (b *bench) warm() {
	if b.warmed || b.prm.WarmupRecords <= 0 {
		return
	}
	b.warmed = true
	data, err := b.dataFile(b.prm.WarmupRecords, 100)
	if err != nil {
		logf("warm-up: %v", err)
		return
	}
	for _, comp := range []string{"none", "lz4"} {
		c := cell{Size: 100, Batch: 16384, Comp: comp}
		topic := b.topicName("w", "kgo", c.ID(), 0)
		if err := b.adm.createTopic(b.ctx, topic, b.prm.Partitions); err != nil {
			logf("warm-up: %v", err)
			return
		}
		cmd, err := b.producerCommand("kgo", c, data, topic, b.prm.WarmupRecords)
		if err == nil {
			var p *proc
			if p, err = startProc("warm-up", cmd); err == nil {
				err = p.wait(time.Duration(b.prm.RunTimeoutSec) * time.Second)
				logf("warm-up: %d records of 100 B, %s, in %.1f s (broker JIT warm-up; not measured) %v", b.prm.WarmupRecords, comp, p.wall().Seconds(), errOrEmpty(err))
			}
			if f, ok := cmd.Stdin.(*os.File); ok {
				f.Close()
			}
		}
		_ = b.adm.deleteTopic(b.ctx, topic)
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
