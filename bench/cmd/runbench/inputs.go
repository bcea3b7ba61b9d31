package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The file section's two forms of three logs shipped by one host (issue 31): agent-3inputs is
// one agent whose configuration file has three inputs, each following the cell's file into a
// topic of its own; agent-3agents is three agents, each following the file into its topic, as
// a host without inputs runs them. Each run ships the file three times: its lines/s count all
// three topics' lines, its CPU every process's, its peak RSS the sum of every process's peak.
const (
	threeInputs = "agent-3inputs"
	threeAgents = "agent-3agents"
)

// fileRunThree runs tool (threeInputs or threeAgents) on data: done when each of the three
// topics holds every line.
func (b *bench) fileRunThree(tool string, c cell, rep int, data string) Run {
	r := Run{Section: "file", Tool: tool, Cell: fmt.Sprintf("%d lines of %d B", b.prm.FileLines, c.Size), Rep: rep,
		Records: 3 * int64(b.prm.FileLines), Bytes: 3 * int64(b.prm.FileLines) * int64(c.Size)}
	base := b.topicName("f", tool, "file", rep)
	r.Topic = base
	dir := filepath.Join(b.p.work, base)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	var topics []string
	for _, name := range []string{"a", "b", "c"} {
		t := Run{Topic: base + "-" + name}
		if !b.createTopic(&t) {
			r.Error = t.Error
			return r
		}
		defer b.deleteTopic(t.Topic)
		topics = append(topics, t.Topic)
	}
	common := []string{"--brokers", b.p.bootstrap, "--start-at", "beginning", "--header-host=", "--header-path=",
		"--log-level", "warn", "--shutdown-timeout", "10s"}
	var cmds []*exec.Cmd
	if tool == threeInputs {
		var conf strings.Builder
		conf.WriteString("inputs:\n")
		for i, t := range topics {
			fmt.Fprintf(&conf, "  - {name: %c, tail: [%q], topic: %q}\n", 'a'+i, data, t)
		}
		path := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
			r.Error = err.Error()
			return r
		}
		args := append([]string{"--config", path, "--state-dir", filepath.Join(dir, "state")}, common...)
		cmds = append(cmds, exec.Command(b.p.agent, withProps(args, b.javaProps(c))...))
	} else {
		for i, t := range topics {
			args := append([]string{"--tail", data, "--topic", t, "--state-dir", filepath.Join(dir, fmt.Sprintf("state-%d", i))}, common...)
			cmds = append(cmds, exec.Command(b.p.agent, withProps(args, b.javaProps(c))...))
		}
	}
	cpu0 := b.brokerCPU()
	var procs []*proc
	for i, cmd := range cmds {
		cmd.Env = agentEnv()
		p, err := startProc(fmt.Sprintf("%s-%d", tool, i), cmd)
		if err != nil {
			r.Error = err.Error()
			break
		}
		procs = append(procs, p)
	}
	var doneAt time.Time
	if r.Error == "" {
		lastCount, lastChange := int64(-1), time.Now()
		werr := waitFor(b.ctx, time.Duration(b.prm.RunTimeoutSec)*time.Second, 50*time.Millisecond, func() (bool, error) {
			var n int64
			for _, t := range topics {
				k, err := b.adm.count(b.ctx, t)
				if err != nil {
					return false, nil
				}
				n += k
			}
			if n != lastCount {
				lastCount, lastChange = n, time.Now()
			}
			if n >= r.Records {
				doneAt = time.Now()
				return true, nil
			}
			for _, p := range procs {
				if p.exited() {
					return false, fmt.Errorf("%s exited early: %v", p.name, p.exitErr())
				}
			}
			if time.Since(lastChange) > 60*time.Second {
				return false, fmt.Errorf("no progress for 60 s at %d of %d lines", n, r.Records)
			}
			return false, nil
		})
		if werr != nil {
			r.Error = werr.Error()
		}
	}
	var start time.Time
	var maxRSS float64
	for _, p := range procs {
		if err := p.stop(30 * time.Second); err != nil && strings.Contains(err.Error(), "after SIGTERM") && r.Error == "" {
			r.Error = err.Error()
		}
		if start.IsZero() || p.start.Before(start) {
			start = p.start
		}
		r.CPUUserSec += p.usage.UserSec
		r.CPUSysSec += p.usage.SysSec
		r.CPUSec += p.usage.CPUSec()
		maxRSS += float64(p.usage.MaxRSSKiB) / 1024
	}
	r.MaxRSSMiB = maxRSS
	r.BrokerCPUSec = b.brokerCPU() - cpu0
	if !doneAt.IsZero() {
		r.WallSec = doneAt.Sub(start).Seconds()
	}
	for _, t := range topics {
		n, _ := b.adm.count(b.ctx, t)
		r.InKafka += n
	}
	if r.Error == "" && r.InKafka != r.Records {
		r.Error = fmt.Sprintf("%d records in the three topics, want %d", r.InKafka, r.Records)
	}
	r.OK = r.Error == ""
	r.rates()
	return r
}
