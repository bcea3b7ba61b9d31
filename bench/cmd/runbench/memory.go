package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/freeport"
	"github.com/kafkatrail/kafkatrail/internal/procstat"
)

// MemoryResult is one memory run: the agent tails a file that keeps growing while the broker
// is stopped; its RSS is sampled every second.
type MemoryResult struct {
	BufferMemory      int64     `json:"buffer_memory"`
	Seconds           int       `json:"seconds"`
	LinesPerSecond    int       `json:"writer_lines_per_s"`
	LineSize          int       `json:"line_size"`
	RSSBeforeStopMiB  float64   `json:"rss_before_broker_stop_mib"`
	PeakRSSMiB        float64   `json:"peak_rss_mib"`
	FinalRSSMiB       float64   `json:"final_rss_mib"`
	MaxRSSMiB         float64   `json:"maxrss_mib"` // getrusage after exit: includes shutdown
	OverBufferMiB     float64   `json:"peak_minus_buffer_memory_mib"`
	SamplesMiB        []float64 `json:"rss_samples_mib"`
	FileBytes         int64     `json:"file_bytes_written"`
	CheckpointAtStop  int64     `json:"checkpoint_at_broker_stop"`
	CheckpointAtEnd   int64     `json:"checkpoint_at_end"`
	InKafkaAtStop     int64     `json:"records_in_kafka_at_broker_stop"`
	ExitedEarly       string    `json:"exited_early,omitempty"`
	Error             string    `json:"error,omitempty"`
	BrokerStopSeconds float64   `json:"broker_stop_s"`
	BrokerDownAtStart bool      `json:"broker_down_at_start"`
}

// memory runs on a broker of its own (state in the work directory, ports found free), so that
// stopping and resuming it can never touch the benchmark's broker or another run's: a stopped
// broker releases its state directory, and another with-broker.sh could start a broker there.
// For each buffer.memory in turn the broker is (re)started, the agent ships until 4 MB are
// acknowledged, the broker is stopped and the agent's RSS sampled; it is stopped at the end.
func (b *bench) memory() error {
	line := make([]byte, b.prm.FileLineSize+1)
	for i := range line {
		line[i] = 'a' + byte(i%26)
	}
	line[len(line)-1] = '\n'
	// Away from the bases with-broker.sh picks (9092, 19092-19282).
	port, err := freeport.Base(29100+rand.IntN(50)*10, 29900, 8)
	if err != nil {
		return fmt.Errorf("memory: no free ports for its broker: %w", err)
	}
	mb := &memBroker{sh: b.p.brokerSh, env: brokerEnv(filepath.Join(b.p.work, "memory-broker"), port),
		bootstrap: fmt.Sprintf("127.0.0.1:%d", port)}
	defer mb.stop()
	for i, bufMem := range b.prm.MemoryBuffers {
		if b.ctx.Err() != nil {
			return errStopped
		}
		verb := "resume"
		if i == 0 {
			verb = "start"
		}
		t0 := time.Now()
		if out, err := mb.run(verb); err != nil {
			return fmt.Errorf("memory: broker.sh %s: %v: %s", verb, err, lastLines(out, 3))
		}
		logf("memory: its own broker on %s is up (%s, %.0f s)", mb.bootstrap, verb, time.Since(t0).Seconds())
		adm, err := newAdmin(mb.bootstrap)
		if err != nil {
			return err
		}
		res := b.memoryRun(bufMem, line, mb, adm)
		adm.close()
		b.report.Memory = append(b.report.Memory, res)
		b.checkpoint()
		logf("memory buffer.memory=%d MiB: peak RSS %.1f MiB (%.1f MiB over buffer.memory), before the broker stop %.1f MiB %s",
			bufMem>>20, res.PeakRSSMiB, res.OverBufferMiB, res.RSSBeforeStopMiB, res.Error)
	}
	return nil
}

// memBroker is the memory section's own broker, driven by scripts/kafka/broker.sh.
type memBroker struct {
	sh, bootstrap string
	env           []string
	up            bool
}

func (m *memBroker) run(verb string) (string, error) {
	cmd := exec.Command(m.sh, verb)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil && (verb == "start" || verb == "resume"):
		m.up = true
	case verb == "stop":
		m.up = false
	}
	return string(out), err
}

func (m *memBroker) stop() {
	if m.up {
		_, _ = m.run("stop")
	}
}

// brokerEnv is this process's environment with the broker's state directory and base port.
func brokerEnv(state string, port int) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KAFKATRAIL_STATE=") || strings.HasPrefix(kv, "KAFKA_PORT=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "KAFKATRAIL_STATE="+state, "KAFKA_PORT="+strconv.Itoa(port))
}

func (b *bench) memoryRun(bufMem int64, line []byte, mb *memBroker, adm *admin) (res MemoryResult) {
	res = MemoryResult{BufferMemory: bufMem, Seconds: b.prm.MemorySeconds, LinesPerSecond: b.prm.MemoryRate, LineSize: len(line) - 1,
		CheckpointAtStop: -1}
	dir := filepath.Join(b.p.work, fmt.Sprintf("memory-%d", bufMem))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "growing.log")
	f, err := os.Create(file)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.Close()
	topic := b.topicName("m", "agent", strconv.FormatInt(bufMem>>20, 10)+"MiB", 1)
	if err := adm.createTopic(b.ctx, topic, b.prm.Partitions); err != nil {
		res.Error = err.Error()
		return res
	}

	// The writer: FileLines-sized lines at MemoryRate lines/s, in 10 ms steps.
	stopWriter := make(chan struct{})
	writerDone := make(chan int64)
	go func() {
		var written int64
		perTick := max(b.prm.MemoryRate/100, 1)
		chunk := make([]byte, 0, perTick*len(line))
		for i := 0; i < perTick; i++ {
			chunk = append(chunk, line...)
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopWriter:
				writerDone <- written
				return
			case <-t.C:
				n, _ := f.Write(chunk)
				written += int64(n)
			}
		}
	}()
	defer func() {
		close(stopWriter)
		res.FileBytes = <-writerDone
	}()

	state := filepath.Join(dir, "state")
	c := cell{Size: len(line) - 1, Batch: 16384, Comp: "none"}
	args := []string{"--brokers", mb.bootstrap, "--topic", topic, "--tail", file, "--start-at", "beginning",
		"--state-dir", state, "--header-host=", "--header-path=", "--log-level", "warn", "--shutdown-timeout", "2s"}
	for _, kv := range b.javaProps(c) {
		if len(kv) > 14 && kv[:14] == "buffer.memory=" {
			kv = "buffer.memory=" + strconv.FormatInt(bufMem, 10)
		}
		args = append(args, "-X", kv)
	}
	cmd := exec.Command(b.p.agent, args...)
	cmd.Env = agentEnv()
	p, err := startProc("agent", cmd)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		_ = p.stop(40 * time.Second)
		res.MaxRSSMiB = float64(p.usage.MaxRSSKiB) / 1024
		res.CheckpointAtEnd = checkpointOffset(filepath.Join(state, "checkpoints.json"), file)
	}()
	cp := filepath.Join(state, "checkpoints.json")
	// Let it flow until a few MB are acknowledged, then stop the broker.
	_ = waitFor(b.ctx, 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		return checkpointOffset(cp, file) > 4<<20 || p.exited(), nil
	})
	time.Sleep(2 * time.Second)
	if kb, err := procstat.KiB(p.pid(), "VmRSS:"); err == nil {
		res.RSSBeforeStopMiB = float64(kb) / 1024
	}
	res.CheckpointAtStop = checkpointOffset(cp, file)
	res.InKafkaAtStop, _ = adm.count(b.ctx, topic)
	t0 := time.Now()
	out, err := mb.run("stop")
	res.BrokerStopSeconds = time.Since(t0).Seconds()
	if err != nil {
		res.Error = fmt.Sprintf("broker.sh stop: %v: %s", err, lastLines(out, 2))
		return res
	}
	logf("memory: broker stopped (%s); sampling the agent's RSS for %d s", lastLines(out, 1), b.prm.MemorySeconds)
	for i := 0; i < b.prm.MemorySeconds; i++ {
		select {
		case <-b.ctx.Done():
			res.Error = "interrupted"
			return res
		case <-time.After(time.Second):
		}
		if p.exited() {
			res.ExitedEarly = fmt.Sprint(p.exitErr())
			res.Error = "the agent exited during the measurement: " + res.ExitedEarly
			break
		}
		kb, err := procstat.KiB(p.pid(), "VmRSS:")
		if err != nil {
			continue
		}
		mib := float64(kb) / 1024
		res.SamplesMiB = append(res.SamplesMiB, mib)
		res.PeakRSSMiB = max(res.PeakRSSMiB, mib)
		res.FinalRSSMiB = mib
	}
	res.OverBufferMiB = res.PeakRSSMiB - float64(bufMem)/(1<<20)
	return res
}
