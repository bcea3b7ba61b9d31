package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// agent-eos is the agent with --exactly-once (issue 8): lines and file positions committed in
// Kafka transactions every commit-interval (1 s). Its ratio over agent is the cost of the
// guarantee. Its run ends when its checkpoint, written after each commit, reaches the file's
// size: the topic's end offsets count the transactions' commit markers too. agent-otel is the
// agent as users run it, its default telemetry on: metrics and traces (1 % sampled) exported
// over OTLP/gRPC to otlpsink. Every agent run writes a CPU profile (KAFKATRAIL_CPUPROFILE,
// about 1 % of its CPU at 100 Hz), split by stage in the report (fileCPUParts). agent-cri reads
// the same lines as a container runtime frames them (CRI: time, stream, tag before each) with
// --container-format cri: its ratio over agent is the cost of taking the framing off.
// agent-filters adds one --exclude-lines rule (a health check) and one --redact rule (a
// password in a query), each with a literal part no line holds: what a user's first filter and
// redaction cost on a log that holds neither. agent-redact-regexp has one --redact rule with no
// literal part (a card number), whose regexp runs on every line.
var fileTools = []string{"agent", "agent-cri", "agent-otel", "agent-eos", "agent-filters", "agent-redact-regexp",
	threeInputs, threeAgents, "kcat", "otelcol", "rsyslog", "agent-defaults", "kcat-defaults"}

// The rules agent-filters and agent-redact-regexp run with.
const (
	benchExcludeLines = `GET /health`
	benchRedact       = `password=\S+=>password=***`
	benchRedactRegexp = `\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}=>****`
)

// fileSection: every tool ships the same file of FileLines lines; a run ends when the topic
// holds every line (end offsets summed, polled every 50 ms), then the tool is stopped by its
// PID (kcat -l exits by itself). lines/s counts from the tool's start to that moment.
func (b *bench) fileSection() error {
	data, err := b.dataFile(b.prm.FileLines, b.prm.FileLineSize)
	if err != nil {
		return err
	}
	c := cell{Size: b.prm.FileLineSize, Batch: 16384, Comp: "none"}
	criData := ""
	if b.toolOn("agent-cri") {
		if criData, err = criFile(data); err != nil {
			return err
		}
	}
	b.warm()
	if b.toolOn("agent-eos") {
		// The broker's first transaction creates its transaction state topic (50 partitions)
		// and loads the coordinator: a cost of the broker's first use, not of the agent's.
		small, err := b.dataFile(10000, b.prm.FileLineSize)
		if err != nil {
			return err
		}
		r := b.fileRun("agent-eos", c, 0, small)
		logf("warm-up: the agent with --exactly-once on 10000 lines in %.1f s (transaction coordinator; not measured)", r.WallSec)
	}
	total := b.prm.Runs * len(fileTools)
	i := 0
	for rep := 1; rep <= b.prm.Runs; rep++ {
		for _, tool := range fileTools {
			if !b.toolOn(tool) {
				continue
			}
			if b.ctx.Err() != nil {
				return errStopped
			}
			i++
			d := data
			if tool == "agent-cri" {
				d = criData
			}
			var r Run
			if tool == threeInputs || tool == threeAgents {
				r = b.fileRunThree(tool, c, rep, d)
			} else {
				r = b.fileRun(tool, c, rep, d)
			}
			b.record(r)
			logf("[%d/%d] file rep %d %-8s %s", i, total, rep, tool, r.brief())
			b.pause()
		}
	}
	return nil
}

func (b *bench) fileRun(tool string, c cell, rep int, data string) Run {
	r := Run{Section: "file", Tool: tool, Cell: fmt.Sprintf("%d lines of %d B", b.prm.FileLines, c.Size), Rep: rep,
		Records: int64(b.prm.FileLines), Bytes: int64(b.prm.FileLines) * int64(c.Size)}
	if tool == "otelcol" && b.p.otelcol == "" {
		r.Error = "not run: " + b.otelMissing
		return r
	}
	r.Topic = b.topicName("f", tool, "file", rep)
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

	var cmd *exec.Cmd
	selfExit := false
	prof := ""
	switch tool {
	case "agent", "agent-otel", "agent-eos", "agent-cri", "agent-filters", "agent-redact-regexp", "agent-defaults":
		args := []string{"--brokers", b.p.bootstrap, "--topic", r.Topic, "--tail", data, "--start-at", "beginning",
			"--state-dir", filepath.Join(dir, "state"), "--header-host=", "--header-path=", "--log-level", "warn",
			"--shutdown-timeout", "10s"}
		if tool == "agent-cri" {
			args = append(args, "--container-format", "cri")
		}
		switch tool {
		case "agent-filters":
			args = append(args, "--exclude-lines", benchExcludeLines, "--redact", benchRedact)
		case "agent-redact-regexp":
			args = append(args, "--redact", benchRedactRegexp)
		}
		if tool == "agent-eos" {
			// A transactional id and state topic of the run's own: the runs share the data file.
			args = append(args, "--exactly-once", "--transactional-id", r.Topic, "--state-topic", r.Topic+"-state")
		}
		props := b.javaProps(c)
		if tool == "agent-defaults" {
			// As a user runs it: its own producer settings and its headers.
			args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--header-") })
			props = nil
		}
		cmd = exec.Command(b.p.agent, withProps(args, props)...)
		cmd.Env = agentEnv()
		if tool == "agent-otel" || tool == "agent-defaults" {
			stop, err := b.exportToSink(cmd)
			if err != nil {
				r.Error = err.Error()
				return r
			}
			defer stop()
		}
		prof = filepath.Join(b.p.work, "cpu-"+r.Topic+".prof")
		cmd.Env = append(cmd.Env, "KAFKATRAIL_CPUPROFILE="+prof)
	case "kcat", "kcat-defaults":
		props := b.rdkafkaProps(c)
		if tool == "kcat-defaults" {
			props = guaranteeProps // librdkafka's own batch.size (1,000,000), linger (5 ms), queue
		}
		cmd = exec.Command(b.p.kcat, withProps([]string{"-P", "-b", b.p.bootstrap, "-t", r.Topic, "-l", data, "-q"}, props)...)
		selfExit = true
	case "otelcol":
		conf := filepath.Join(dir, "otelcol.yaml")
		if err := os.WriteFile(conf, []byte(b.otelConfig(dir, data, r.Topic, c)), 0o644); err != nil {
			r.Error = err.Error()
			return r
		}
		cmd = exec.Command(b.p.otelcol, "--config", "file:"+conf)
		cmd.Env = cleanEnv()
	case "rsyslog":
		conf := filepath.Join(dir, "rsyslog.conf")
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
			r.Error = err.Error()
			return r
		}
		if err := os.WriteFile(conf, []byte(b.rsyslogConfig(dir, data, r.Topic, c)), 0o644); err != nil {
			r.Error = err.Error()
			return r
		}
		cmd = exec.Command(b.p.rsyslogd, "-n", "-f", conf, "-i", filepath.Join(dir, "rsyslogd.pid"))
	default:
		r.Error = "unknown tool " + tool
		return r
	}

	cpu0 := b.brokerCPU()
	p, err := startProc(tool, cmd)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	timeout := time.Duration(b.prm.RunTimeoutSec) * time.Second
	var doneAt time.Time
	var werr error
	lastCount := int64(-1)
	lastChange := time.Now()
	werr = waitFor(b.ctx, timeout, 50*time.Millisecond, func() (bool, error) {
		n, err := b.adm.count(b.ctx, r.Topic)
		if err != nil {
			return false, nil
		}
		if n != lastCount {
			lastCount, lastChange = n, time.Now()
		}
		if n >= r.Records {
			doneAt = time.Now()
			return true, nil
		}
		if tool == "agent-eos" && checkpointOffset(filepath.Join(dir, "state", "checkpoints.json"), data) == fileSize(data) {
			doneAt = time.Now() // committed: the end offsets are past the line count by the markers
			return true, nil
		}
		if p.exited() && !selfExit {
			return false, fmt.Errorf("%s exited early: %v", tool, p.exitErr())
		}
		if p.exited() && selfExit && time.Since(p.end) > 5*time.Second {
			return false, fmt.Errorf("%s exited with %d of %d lines in the topic: %v", tool, n, r.Records, p.exitErr())
		}
		if time.Since(lastChange) > 60*time.Second {
			return false, fmt.Errorf("no progress for 60 s at %d of %d lines", n, r.Records)
		}
		return false, nil
	})
	if werr == nil && strings.HasPrefix(tool, "agent") {
		// The agent's own completion: its checkpoint reaches the file's size.
		size := fileSize(data)
		werr = waitFor(b.ctx, 30*time.Second, 20*time.Millisecond, func() (bool, error) {
			return checkpointOffset(filepath.Join(dir, "state", "checkpoints.json"), data) == size, nil
		})
		if werr != nil {
			werr = fmt.Errorf("every line is in the topic but the checkpoint is %d of %d bytes after 30 s",
				checkpointOffset(filepath.Join(dir, "state", "checkpoints.json"), data), size)
		} else {
			r.Extra = map[string]any{"checkpoint_complete_s": time.Since(p.start).Seconds()}
			if tool == "agent-eos" {
				doneAt = time.Now() // every line committed
			}
		}
	}
	var serr error
	if selfExit {
		serr = p.wait(timeout)
		if serr == nil {
			serr = p.exitErr()
		}
	} else {
		// A non-zero exit on SIGTERM is not a failure of the run; needing SIGKILL is.
		if err := p.stop(30 * time.Second); err != nil && strings.Contains(err.Error(), "after SIGTERM") {
			serr = err
		}
	}
	r.BrokerCPUSec = b.brokerCPU() - cpu0
	r.setUsage(p)
	if anon, file := p.peakAnonKiB.Load(), p.peakFileKiB.Load(); anon+file > 0 {
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["rss_anon_mib"] = float64(anon) / 1024
		r.Extra["rss_file_mib"] = float64(file) / 1024
	}
	if prof != "" {
		if split, err := cpuSplitBy(prof, fileCPUParts); err == nil {
			if r.Extra == nil {
				r.Extra = map[string]any{}
			}
			r.Extra["cpu_split_s"] = split
			_ = os.Remove(prof)
		} else {
			logf("file: no CPU split for %s: %v", tool, err)
		}
	}
	if !doneAt.IsZero() {
		r.WallSec = doneAt.Sub(p.start).Seconds()
		if selfExit && p.wall().Seconds() > r.WallSec {
			r.WallSec = p.wall().Seconds()
		}
	}
	r.InKafka, _ = b.adm.count(b.ctx, r.Topic)
	r.Partitions = b.adm.perPartition(b.ctx, r.Topic)
	if v := b.adm.firstValue(b.ctx, b.p.bootstrap, r.Topic); v != "" {
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["a_record_value_bytes"] = len(v)
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		r.Extra["a_record_value"] = v
	}
	switch {
	case werr != nil:
		r.Error = werr.Error()
		if t := lastLines(p.stderr.String()+"\n"+p.stdout.String(), 3); t != "" {
			r.Error += "; output: " + t
		}
	case serr != nil:
		r.Error = serr.Error()
	case r.InKafka != r.Records && tool != "agent-eos":
		r.Error = fmt.Sprintf("%d records in the topic, want %d (duplicates)", r.InKafka, r.Records)
	case tool == "agent-eos" && r.InKafka < r.Records:
		r.Error = fmt.Sprintf("%d offsets in the topic (records and commit markers), want at least %d", r.InKafka, r.Records)
	}
	r.OK = r.Error == ""
	r.rates()
	return r
}

// criFile returns data's lines framed as containerd writes them, each after
// "<RFC 3339 time> stdout F ", the time 10 µs later at every line (100,000 lines a second), made
// once beside data.
func criFile(data string) (string, error) {
	path := strings.TrimSuffix(data, ".txt") + "-cri.txt"
	if fi, err := os.Stat(path); err == nil && fi.Size() > fileSize(data) {
		return path, nil
	}
	in, err := os.Open(data)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	t := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var ts []byte
	for sc.Scan() {
		ts = t.AppendFormat(ts[:0], time.RFC3339Nano)
		w.Write(ts)
		w.WriteString(" stdout F ")
		w.Write(sc.Bytes())
		w.WriteByte('\n')
		t = t.Add(10 * time.Microsecond)
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return path, out.Close()
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// checkpointOffset reads the agent's checkpoint offset of path (-1 if none yet).
func checkpointOffset(cp, path string) int64 {
	b, err := os.ReadFile(cp)
	if err != nil {
		return -1
	}
	var f struct {
		Entries []struct {
			Path   string `json:"path"`
			Offset int64  `json:"offset"`
		} `json:"entries"`
	}
	if json.Unmarshal(b, &f) != nil {
		return -1
	}
	for _, e := range f.Entries {
		if e.Path == path {
			return e.Offset
		}
	}
	return -1
}

// otelConfig: filelog receiver (from the beginning, offsets kept in file_storage) to the kafka
// exporter with the same producer settings; block_on_overflow so that a full queue slows the
// receiver instead of dropping lines; raw encoding so that each line is one record (the body,
// a string, is sent JSON-quoted); the collector's own telemetry off (no port opened).
func (b *bench) otelConfig(dir, data, topic string, c cell) string {
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
    client_id: otelcol-bench
    logs:
      topic: %[4]s
      encoding: raw
    producer:
      required_acks: -1
      compression: %[5]s
      linger: 5ms
      max_message_bytes: %[6]d
    sending_queue:
      enabled: true
      block_on_overflow: true
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
`, dir, data, b.p.bootstrap, topic, c.Comp, b.prm.MaxRequestBytes)
}

// rsyslogConfig: imfile (inotify) to omkafka with the same librdkafka settings as kcat.
func (b *bench) rsyslogConfig(dir, data, topic string, c cell) string {
	var conf []string
	for _, kv := range b.rdkafkaProps(c) {
		if strings.HasPrefix(kv, "acks=") {
			continue // a topic property: topicConfParam in rsyslogConf
		}
		conf = append(conf, kv)
	}
	return b.rsyslogConf(dir, data, topic, conf)
}

// rsyslogConf is rsyslogd's configuration for one run: imfile (inotify) following file into
// omkafka with the librdkafka properties conf and acks from all in-sync replicas; only the
// message text is sent (template %msg%); no network input is loaded, nothing listens.
func (b *bench) rsyslogConf(dir, file, topic string, conf []string) string {
	quoted := make([]string, len(conf))
	for i, kv := range conf {
		quoted[i] = strconv.Quote(kv)
	}
	return fmt.Sprintf(`# Generated by bench/cmd/runbench for one benchmark run.
global(workDirectory="%[1]s/work" maxMessageSize="64k")
module(load="imfile" mode="inotify")
module(load="omkafka")
template(name="bench_raw" type="string" string="%%msg%%")
ruleset(name="bench_kafka") {
  action(type="omkafka" broker=["%[2]s"] topic="%[3]s" template="bench_raw" partitions.auto="on"
         confParam=[%[4]s]
         topicConfParam=["request.required.acks=-1"])
}
input(type="imfile" file="%[5]s" tag="bench" ruleset="bench_kafka" freshStartTail="off")
`, dir, b.p.bootstrap, topic, strings.Join(quoted, ", "), file)
}
