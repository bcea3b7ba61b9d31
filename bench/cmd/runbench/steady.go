package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/procstat"
)

// steadyTools are the steady section's: the agent with its defaults (telemetry on: metrics and
// 1 % of records traced, exported to otlpsink), `tail -F | kcat -P` with librdkafka's defaults
// plus idempotence (acks=all is librdkafka's default already), and the OpenTelemetry
// Collector's filelog receiver to its kafka exporter with its defaults plus required_acks -1, and
// Debian's rsyslog (imfile to omkafka, librdkafka's defaults plus idempotence and acks=all): the
// shipper many hosts already run.
var steadyTools = []string{"agent", "kcat", "otelcol", "rsyslog"}

// steady measures what a tool costs where hosts live: a log written at a steady rate, in 10
// bursts a second, for BENCH_STEADY_SECONDS; the figure is the tool's CPU a minute. Each rate
// runs the tools in turn, in an order that moves by one every repetition.
func (b *bench) steady() error {
	for rep := 1; rep <= b.prm.Runs; rep++ {
		for _, rate := range b.prm.SteadyRates {
			for k := range steadyTools {
				tool := steadyTools[(k+rep-1)%len(steadyTools)]
				if !b.toolOn(tool) {
					continue
				}
				if b.ctx.Err() != nil {
					return errStopped
				}
				r := b.steadyRun(tool, rate, rep, false)
				b.record(r)
				logf("steady %d lines/s rep %d %-8s cpu %.2f s (%.2f s a minute) %s", rate, rep, tool, r.CPUSec,
					cpuPerMinute(r), r.Error)
				b.pause()
			}
		}
	}
	return nil
}

// cpuPerMinute is a steady run's CPU a minute of writing: its CPU from the writer's start to
// its last line in Kafka over the writer's seconds, the same window for every tool.
func cpuPerMinute(r Run) float64 {
	secs, _ := r.Extra["writer_s"].(float64)
	if secs <= 0 {
		return 0
	}
	return r.CPUSec * 60 / secs
}

// steadyCell is the cell name of a rate.
func steadyCell(rate int) string { return fmt.Sprintf("%d lines/s", rate) }

// steadyRun runs one tool on a log written at rate lines/s. With execTrace (the agent only), the
// run is the wakeups section's: the agent writes an execution trace, read back by addWakeups.
func (b *bench) steadyRun(tool string, rate, rep int, execTrace bool) Run {
	secs := b.prm.SteadySeconds
	section := "steady"
	if execTrace {
		section = "wakeups"
	}
	r := Run{Section: section, Tool: tool, Cell: steadyCell(rate), Rep: rep, Records: int64(rate * secs),
		Bytes: int64(rate*secs) * int64(b.prm.FileLineSize), Extra: map[string]any{"writer_s": float64(secs)}}
	if tool == "otelcol" && b.p.otelcol == "" {
		r.Error = "not run: " + b.otelMissing
		return r
	}
	r.Topic = b.topicName(section[:1], tool, fmt.Sprint(rate), rep)
	dir := filepath.Join(b.p.work, r.Topic)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	if !b.createTopic(&r) {
		return r
	}
	defer b.deleteTopic(r.Topic)
	file := filepath.Join(dir, "app.log")
	f, err := os.Create(file)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer f.Close()

	var procs []*proc
	// stopAll stops the processes last started first: tail before kcat, so that kcat reads the
	// end of its input, sends what it still held and exits by itself.
	stopAll := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			if i < len(procs)-1 {
				_ = procs[i].wait(10 * time.Second)
			}
			_ = procs[i].stop(30 * time.Second)
		}
	}
	defer stopAll()
	start := func(name string, cmd *exec.Cmd) bool {
		p, err := startProc(name, cmd)
		if err != nil {
			r.Error = err.Error()
			return false
		}
		procs = append(procs, p)
		return true
	}
	switch tool {
	case "agent":
		cmd := exec.Command(b.p.agent, "--brokers", b.p.bootstrap, "--topic", r.Topic, "--tail", file,
			"--start-at", "beginning", "--state-dir", filepath.Join(dir, "state"), "--log-level", "warn")
		stop, err := b.exportToSink(cmd)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		defer stop()
		if execTrace {
			if err := os.MkdirAll(filepath.Dir(execTracePath(dir)), 0o755); err != nil {
				r.Error = err.Error()
				return r
			}
			cmd.Env = append(cmd.Env, "KAFKATRAIL_EXECTRACE="+execTracePath(dir))
		}
		if !start("agent", cmd) {
			return r
		}
	case "kcat":
		// tail's output is kcat's input: a pipe between the two processes, each measured.
		pr, pw, err := os.Pipe()
		if err != nil {
			r.Error = err.Error()
			return r
		}
		tail := exec.Command("tail", "-F", "-n", "+1", file)
		tail.Stdout = pw
		kcat := exec.Command(b.p.kcat, "-P", "-b", b.p.bootstrap, "-t", r.Topic, "-q", "-X", "enable.idempotence=true")
		kcat.Stdin = pr
		ok := start("kcat", kcat) && start("tail", tail)
		pr.Close()
		pw.Close()
		if !ok {
			return r
		}
	case "otelcol":
		conf := filepath.Join(dir, "otelcol.yaml")
		if err := os.WriteFile(conf, []byte(b.otelSteadyConfig(dir, file, r.Topic)), 0o644); err != nil {
			r.Error = err.Error()
			return r
		}
		cmd := exec.Command(b.p.otelcol, "--config", "file:"+conf)
		cmd.Env = cleanEnv()
		if !start("otelcol", cmd) {
			return r
		}
	case "rsyslog":
		conf := filepath.Join(dir, "rsyslog.conf")
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
			r.Error = err.Error()
			return r
		}
		if err := os.WriteFile(conf, []byte(b.rsyslogConf(dir, file, r.Topic, []string{"enable.idempotence=true"})), 0o644); err != nil {
			r.Error = err.Error()
			return r
		}
		if !start("rsyslog", exec.Command(b.p.rsyslogd, "-n", "-f", conf, "-i", filepath.Join(dir, "rsyslogd.pid"))) {
			return r
		}
	}
	// The writer starts a second after the tool, and the CPU counted is what the tool's
	// processes used from then until its last line is in Kafka: their start (a Go runtime, a
	// connection, metadata) and their exit are not what this measures. At the first rate it
	// starts steadyIdle after the tool instead, and the tool's RSS just before is its idle RSS:
	// started, connected, nothing to ship.
	if rate == b.prm.SteadyRates[0] && !execTrace {
		time.Sleep(steadyIdle)
		b.sampleRSS(&r, procs, "idle")
	} else {
		time.Sleep(time.Second)
	}
	cpuNow := func() float64 {
		var sum float64
		for _, p := range procs {
			if s, err := cpuSeconds(p.pid()); err == nil {
				sum += s
			}
		}
		return sum
	}
	cpu0 := cpuNow()
	line := make([]byte, b.prm.FileLineSize)
	for i := range line {
		line[i] = 'a' + byte(i%26)
	}
	line[len(line)-1] = '\n'
	perBurst := max(rate/10, 1)
	burst := make([]byte, 0, perBurst*len(line))
	for range perBurst {
		burst = append(burst, line...)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	var written int64
	for i := 0; i < secs*10; i++ {
		<-tick.C
		if b.ctx.Err() != nil {
			tick.Stop()
			r.Error = "interrupted"
			return r
		}
		if _, err := f.Write(burst); err != nil {
			tick.Stop()
			r.Error = err.Error()
			return r
		}
		written += int64(perBurst)
		for _, p := range procs {
			if p.exited() {
				tick.Stop()
				r.Error = fmt.Sprintf("%s exited: %v", p.name, p.exitErr())
				return r
			}
		}
	}
	tick.Stop()
	r.Records = written
	b.sampleRSS(&r, procs, "steady")
	// Every line in Kafka, or no progress for 10 s: `tail -F | kcat -P` keeps the last lines it
	// read (a few hundred bytes) until its input ends, so it is stopped first and counted after.
	last, lastChange := int64(-1), time.Now()
	_ = waitFor(b.ctx, 2*time.Minute, 50*time.Millisecond, func() (bool, error) {
		n, err := b.adm.count(b.ctx, r.Topic)
		if err != nil {
			return false, nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		return n >= written || time.Since(lastChange) > 10*time.Second, nil
	})
	cpu := cpuNow() - cpu0
	stopAll()
	if err := waitFor(b.ctx, 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		n, err := b.adm.count(b.ctx, r.Topic)
		return err == nil && n >= written, nil
	}); err != nil {
		n, _ := b.adm.count(b.ctx, r.Topic)
		r.Error = fmt.Sprintf("%d of %d lines in Kafka after the writer stopped and the tool exited", n, written)
	}
	if last < written {
		r.Extra["lines_held_until_stop"] = written - max(last, 0)
	}
	var whole float64
	for _, p := range procs {
		r.CPUUserSec += p.usage.UserSec
		r.CPUSysSec += p.usage.SysSec
		whole += p.usage.CPUSec()
		r.MaxRSSMiB += float64(p.usage.MaxRSSKiB) / 1024
		r.WallSec = max(r.WallSec, p.wall().Seconds())
	}
	r.CPUSec = cpu
	r.Extra["cpu_s_whole_run"] = whole
	r.InKafka, _ = b.adm.count(b.ctx, r.Topic)
	r.Extra["cpu_s_a_minute"] = cpuPerMinute(r)
	if execTrace && r.Error == "" {
		addWakeups(&r, execTracePath(dir), secs, rate)
	}
	r.OK = r.Error == ""
	r.rates()
	return r
}

// steadyIdle is how long a tool runs before the writer starts at the first rate, when its idle
// RSS is sampled: well past its start.
const steadyIdle = 10 * time.Second

// sampleRSS adds the RSS of a run's processes now (their VmRSS, RssAnon and RssFile summed) to
// its extras, as rss_<when>_mib, rss_<when>_anon_mib and rss_<when>_file_mib.
func (b *bench) sampleRSS(r *Run, procs []*proc, when string) {
	var rss, anon, file int64
	for _, p := range procs {
		f, err := procstat.Fields(p.pid(), "VmRSS:", "RssAnon:", "RssFile:")
		if err != nil {
			return // a process gone: no figure rather than a part of one
		}
		rss, anon, file = rss+f["VmRSS:"], anon+f["RssAnon:"], file+f["RssFile:"]
	}
	r.Extra["rss_"+when+"_mib"] = float64(rss) / 1024
	r.Extra["rss_"+when+"_anon_mib"] = float64(anon) / 1024
	r.Extra["rss_"+when+"_file_mib"] = float64(file) / 1024
}

// otelSteadyConfig: the filelog receiver (offsets in file_storage) to the kafka exporter with
// its defaults, acks from all in-sync replicas as the other tools have, and raw encoding (a
// line a record); the collector's own telemetry off.
func (b *bench) otelSteadyConfig(dir, file, topic string) string {
	return fmt.Sprintf(`extensions:
  file_storage:
    directory: %[1]s/storage
    create_directory: true
receivers:
  filelog:
    include: [%[2]s]
    start_at: beginning
    storage: file_storage
exporters:
  kafka:
    brokers: [%[3]s]
    logs:
      topic: %[4]s
      encoding: raw
    producer:
      required_acks: -1
service:
  extensions: [file_storage]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [filelog]
      exporters: [kafka]
`, dir, file, b.p.bootstrap, topic)
}
