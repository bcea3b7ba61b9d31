package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kafkatrail/kafkatrail/internal/freeport"
)

// LatencyResult is one run of the latency section: the agent tails a file that a writer appends
// to at a steady rate, to a broker every response of which a toxiproxy holds back.
type LatencyResult struct {
	LatencyMs      int    `json:"latency_ms"`
	Config         string `json:"config"` // "defaults" or the -X settings added to them
	Partitions     int32  `json:"partitions"`
	WriterRate     int    `json:"writer_lines_per_s"`
	WriterSeconds  int    `json:"writer_seconds"`
	LinesWritten   int64  `json:"lines_written"`
	MaxBehindLines int64  `json:"max_lines_behind"` // written and not yet acknowledged, sampled every second
	// AckedRate is the lines acknowledged per second while the writer wrote (from its first
	// line to its last).
	AckedRate float64 `json:"acked_lines_per_s"`
	// DrainSeconds is how long after the writer's last line the checkpoint reached the file's
	// end: about one round trip when the agent kept up.
	DrainSeconds float64 `json:"drain_s"`
	Error        string  `json:"error,omitempty"`
}

// keptUp reports whether the agent kept pace with the writer: everything acknowledged within
// 2 s of the writer's last line (a few round trips and a linger).
func (l LatencyResult) keptUp() bool { return l.Error == "" && l.DrainSeconds < 2 }

// latencyConfigs are the agent configurations the latency section runs: its defaults, and the
// Java client's batch.size, which the agent's default replaces.
var latencyConfigs = []struct {
	name  string
	props []string
}{
	{"defaults", nil},
	{"batch.size=16384", []string{"batch.size=16384"}},
}

// latency runs on a broker of its own whose advertised port is a toxiproxy's (so that every
// connection goes through it, metadata included), with a latency toxic on the responses.
func (b *bench) latency() error {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	// Below the ephemeral range, away from with-broker.sh's bases and the memory section's.
	port, err := freeport.Base(28100+rand.IntN(50)*10, 28900, 8)
	if err != nil {
		return fmt.Errorf("latency: no free ports for its broker: %w", err)
	}
	proxy := toxiproxy.NewProxy(srv, "kafka", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", port))
	if err := srv.Collection.Add(proxy, true); err != nil {
		return fmt.Errorf("latency: toxiproxy: %w", err)
	}
	defer func() { _ = srv.Collection.Clear() }()
	_, proxyPort, _ := net.SplitHostPort(proxy.Listen)
	env := append(brokerEnv(filepath.Join(b.p.work, "latency-broker"), port), "KAFKA_ADVERTISED_PORT="+proxyPort)
	lb := &memBroker{sh: b.p.brokerSh, env: env, bootstrap: proxy.Listen}
	defer lb.stop()
	t0 := time.Now()
	if out, err := lb.run("start"); err != nil {
		return fmt.Errorf("latency: broker.sh start: %v: %s", err, lastLines(out, 3))
	}
	logf("latency: its own broker on 127.0.0.1:%d, clients through toxiproxy on %s (%.0f s)", port, proxy.Listen, time.Since(t0).Seconds())
	adm, err := newAdmin(lb.bootstrap)
	if err != nil {
		return err
	}
	defer adm.close()
	for _, ms := range b.prm.Latencies {
		if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":0}}`, ms))); err != nil {
			return fmt.Errorf("latency: toxic: %w", err)
		}
		for _, c := range latencyConfigs {
			if b.ctx.Err() != nil {
				return errStopped
			}
			res := b.latencyRun(ms, c.name, c.props, lb.bootstrap, adm)
			b.report.Latency = append(b.report.Latency, res)
			b.checkpoint()
			logf("latency %d ms, %s: %d lines written at %d/s, acknowledged at %.0f/s, at most %d behind, drained %.1f s after the writer %s",
				ms, c.name, res.LinesWritten, res.WriterRate, res.AckedRate, res.MaxBehindLines, res.DrainSeconds, res.Error)
			b.pause()
		}
		if err := proxy.Toxics.RemoveToxic(context.Background(), "latency"); err != nil {
			return fmt.Errorf("latency: remove toxic: %w", err)
		}
	}
	return nil
}

func (b *bench) latencyRun(ms int, name string, props []string, bootstrap string, adm *admin) (res LatencyResult) {
	res = LatencyResult{LatencyMs: ms, Config: name, Partitions: b.prm.Partitions, WriterRate: b.prm.LatencyRate,
		WriterSeconds: b.prm.LatencySeconds}
	dir := filepath.Join(b.p.work, fmt.Sprintf("latency-%d-%d", ms, len(b.report.Latency)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "app.log")
	f, err := os.Create(file)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.Close()
	topic := b.topicName("l", "agent", fmt.Sprintf("%dms-%d", ms, len(b.report.Latency)), 1)
	if err := adm.createTopic(b.ctx, topic, b.prm.Partitions); err != nil {
		res.Error = err.Error()
		return res
	}
	state := filepath.Join(dir, "state")
	args := []string{"--brokers", bootstrap, "--topic", topic, "--tail", file, "--start-at", "beginning",
		"--state-dir", state, "--header-host=", "--header-path=", "--log-level", "warn", "--shutdown-timeout", "5s"}
	for _, kv := range props {
		args = append(args, "-X", kv)
	}
	cmd := exec.Command(b.p.agent, args...)
	cmd.Env = agentEnv()
	p, err := startProc("agent", cmd)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() { _ = p.stop(30 * time.Second) }()
	cp := filepath.Join(state, "checkpoints.json")
	// The writer starts a second after the agent: the agent's start (its first metadata and
	// connection through the proxy) is not what this measures.
	time.Sleep(time.Second)

	line := make([]byte, b.prm.FileLineSize+1)
	for i := range line {
		line[i] = 'a' + byte(i%26)
	}
	line[len(line)-1] = '\n'
	// The writer: lines at LatencyRate per second, in 10 ms steps, for LatencySeconds.
	start := time.Now()
	var written int64
	nextSample := start.Add(time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	for time.Since(start) < time.Duration(b.prm.LatencySeconds)*time.Second {
		<-tick.C
		if b.ctx.Err() != nil {
			tick.Stop()
			res.Error = "interrupted"
			return res
		}
		if want := int64(time.Since(start).Seconds() * float64(b.prm.LatencyRate)); want > written {
			chunk := make([]byte, 0, int(want-written)*len(line))
			for ; written < want; written++ {
				chunk = append(chunk, line...)
			}
			if _, err := f.Write(chunk); err != nil {
				tick.Stop()
				res.Error = err.Error()
				return res
			}
		}
		if now := time.Now(); now.After(nextSample) {
			nextSample = nextSample.Add(time.Second)
			acked := max(checkpointOffset(cp, file), 0) / int64(len(line))
			res.MaxBehindLines = max(res.MaxBehindLines, written-acked)
		}
		if p.exited() {
			tick.Stop()
			res.Error = fmt.Sprintf("the agent exited: %v", p.exitErr())
			return res
		}
	}
	tick.Stop()
	wrote := time.Since(start)
	res.LinesWritten = written
	ackedAtEnd := max(checkpointOffset(cp, file), 0) / int64(len(line))
	res.AckedRate = float64(ackedAtEnd) / wrote.Seconds()
	size := written * int64(len(line))
	end := time.Now()
	if err := waitFor(b.ctx, 5*time.Minute, 20*time.Millisecond, func() (bool, error) {
		return checkpointOffset(cp, file) == size, nil
	}); err != nil {
		res.Error = fmt.Sprintf("checkpoint at %d of %d bytes 5 min after the writer stopped", checkpointOffset(cp, file), size)
		return res
	}
	res.DrainSeconds = time.Since(end).Seconds()
	if n, _ := adm.count(b.ctx, topic); n != written {
		res.Error = fmt.Sprintf("%d records in the topic, want %d", n, written)
	}
	return res
}
