package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/procstat"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// runningAgent is an agent process started in the background.
type runningAgent struct {
	t      *testing.T
	cmd    *exec.Cmd
	logf   string
	exited chan struct{}
	err    error
}

func startAgent(t *testing.T, env []string, args ...string) *runningAgent {
	t.Helper()
	logf := filepath.Join(t.TempDir(), "agent.log")
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agentBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(testkit.AgentEnv(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &runningAgent{t: t, cmd: cmd, logf: logf, exited: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		f.Close()
		close(a.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-a.exited:
		default:
			_ = cmd.Process.Kill()
			<-a.exited
		}
	})
	return a
}

func (a *runningAgent) log() string {
	b, _ := os.ReadFile(a.logf)
	return tail(string(b))
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (a *runningAgent) stop(timeout time.Duration) {
	a.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(timeout):
		a.t.Fatalf("agent did not stop within %v after SIGTERM; log:\n%s", timeout, a.log())
	}
	if a.err != nil {
		a.t.Fatalf("agent exited with %v; log:\n%s", a.err, a.log())
	}
}

// kill9 kills the agent as a crash would.
func (a *runningAgent) kill9() {
	_ = a.cmd.Process.Kill()
	<-a.exited
}

// rss returns the agent's resident memory in bytes.
func (a *runningAgent) rss() int64 { return procstat.RSS(a.cmd.Process.Pid) }

// lineLen is the length of the lines the tests' "application" writes (testkit.LineFile),
// newline included: about a typical log line.
const lineLen = 70

// tailSetup is how the tail tests start: the real broker, a new topic of the given partitions,
// and the application's log file path (dir/app.log) open for writing (lw).
func tailSetup(t *testing.T, partitions int) (bootstrap, topic, dir, path string, lw *testkit.LineFile) {
	t.Helper()
	bootstrap, topic, dir = kafkatest.Bootstrap(t), kafkatest.NewTopic(t, partitions), t.TempDir()
	path = filepath.Join(dir, "app.log")
	return bootstrap, topic, dir, path, testkit.NewLineFile(t, path, lineLen)
}

// waitForRecords consumes topic until n distinct lines arrived, or fails at the deadline.
func waitForRecords(t *testing.T, bootstrap, topic string, n int, timeout time.Duration, agent interface{ log() string }) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := make(map[string]bool, n)
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d lines reached Kafka within %v; agent log:\n%s", len(seen), n, timeout, agent.log())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if f := strings.Fields(string(r.Value)); len(f) > 0 {
				seen[f[0]] = true
			}
		})
	}
}

// countLines reads the topic with kcat and returns how many lost and duplicated of line-0..n-1.
func countLines(t *testing.T, bootstrap, topic string, n int) (lost, dup int) {
	t.Helper()
	seen := make([]int, n)
	for _, v := range kcatValues(t, bootstrap, topic) {
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(f[0], "line-"))
		if err != nil || i < 0 || i >= n {
			t.Fatalf("unexpected record %.80q", v)
		}
		seen[i]++
	}
	for _, c := range seen {
		if c == 0 {
			lost++
		} else {
			dup += c - 1
		}
	}
	return lost, dup
}

func tailArgs(bootstrap, topic, path, state string) []string {
	return []string{"--brokers", bootstrap, "--topic", topic, "--tail", path, "--state-dir", state,
		"--start-at", "beginning", "--partial-line-idle", "200ms", "--log-level", "info", "--log-format", "text"}
}

func TestTailMillionLineFile(t *testing.T) {
	bootstrap, topic, dir, path, lw := tailSetup(t, 6)
	const n = 1_000_000
	lw.Write(n)
	start := time.Now()
	a := startAgent(t, nil, tailArgs(bootstrap, topic, path, filepath.Join(dir, "state"))...)
	waitForRecords(t, bootstrap, topic, n, 5*time.Minute, a)
	took := time.Since(start)
	a.stop(time.Minute)
	t.Logf("%d lines from a file in %v: %.0f lines/s", n, took, n/took.Seconds())
	if lost, dup := countLines(t, bootstrap, topic, n); lost != 0 || dup != 0 {
		t.Fatalf("%d lost, %d duplicated", lost, dup)
	}
	// The checkpoint must now point at the end: a restart sends nothing again.
	b := startAgent(t, nil, tailArgs(bootstrap, topic, path, filepath.Join(dir, "state"))...)
	lw.Write(10)
	waitForRecords(t, bootstrap, topic, n+10, time.Minute, b)
	b.stop(time.Minute)
	if lost, dup := countLines(t, bootstrap, topic, n+10); lost != 0 || dup != 0 {
		t.Fatalf("after a restart: %d lost, %d duplicated", lost, dup)
	}
}

func TestTailRotationWhileWriting(t *testing.T) {
	bootstrap, topic, dir, path, lw := tailSetup(t, 3)
	lw.Write(1000)
	a := startAgent(t, nil, tailArgs(bootstrap, topic, path, filepath.Join(dir, "state"))...)
	// The agent must know the file before it is first rotated: a file renamed away before the
	// agent ever saw it is not at the followed path any more.
	waitForRecords(t, bootstrap, topic, lw.Next, time.Minute, a)
	for round := 0; round < 10; round++ {
		lw.Write(5000)
		if round%2 == 0 {
			lw.RotateRename(fmt.Sprintf("%s.%d", path, round))
		} else {
			// copytruncate loses what is written between the copy and the truncation; this
			// writer writes nothing in between, so every line must arrive exactly once.
			waitForRecords(t, bootstrap, topic, lw.Next, time.Minute, a)
			lw.RotateCopyTruncate(fmt.Sprintf("%s.%d", path, round))
		}
	}
	lw.Write(1000)
	waitForRecords(t, bootstrap, topic, lw.Next, 2*time.Minute, a)
	a.stop(time.Minute)
	if lost, dup := countLines(t, bootstrap, topic, lw.Next); lost != 0 || dup != 0 {
		t.Fatalf("%d of %d lines lost, %d duplicated across rename and copytruncate rotations", lost, lw.Next, dup)
	}
}

func TestTailKill9AndRestartLosesNothing(t *testing.T) {
	bootstrap, topic, dir, path, lw := tailSetup(t, 3)
	state := filepath.Join(dir, "state")
	const rounds, perRound = 5, 40000
	// resendable is what the restarts may send again: at each kill, the lines written beyond
	// the checkpoint as it was just before the kill (the checkpoint at the kill can only be
	// further on).
	resendable := 0
	for round := 0; round < rounds; round++ {
		a := startAgent(t, nil, tailArgs(bootstrap, topic, path, state)...)
		before := checkpointLines(t, state, path)
		lw.Write(perRound)
		// Let it get part of the way, then crash it mid-stream.
		waitForRecords(t, bootstrap, topic, lw.Next-perRound/2, time.Minute, a)
		// The application keeps writing, so lines are in flight whenever the crash comes.
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
					lw.Write(200)
				}
			}
		}()
		// The checkpoint must move while the agent streams, not only when it stops: a round can
		// be shorter than the checkpoint interval, so wait for this round's first save.
		deadline := time.Now().Add(30 * time.Second)
		for checkpointLines(t, state, path) <= before {
			if time.Now().After(deadline) {
				close(stop)
				<-stopped
				t.Fatalf("round %d: the checkpoint stayed at line %d for 30 s while lines were acknowledged; log:\n%s", round, before, a.log())
			}
			time.Sleep(20 * time.Millisecond)
		}
		covered := checkpointLines(t, state, path)
		a.kill9()
		close(stop)
		<-stopped
		resendable += lw.Next - covered
	}
	a := startAgent(t, nil, tailArgs(bootstrap, topic, path, state)...)
	waitForRecords(t, bootstrap, topic, lw.Next, 2*time.Minute, a)
	a.stop(time.Minute)
	lost, dup := countLines(t, bootstrap, topic, lw.Next)
	t.Logf("kill -9 %d times during %d lines: %d lost, %d duplicated (at most %d beyond the checkpoints)", rounds, lw.Next, lost, dup, resendable)
	if lost != 0 {
		t.Fatalf("%d lines lost", lost)
	}
	// A restart sends again only what its checkpoint did not cover, each line once.
	if dup > resendable {
		t.Fatalf("%d duplicates, but only %d lines were beyond the checkpoints at the kills", dup, resendable)
	}
	if got := checkpointLines(t, state, path); got != lw.Next {
		t.Fatalf("after a clean stop the checkpoint is at line %d of %d", got, lw.Next)
	}
}

// checkpointLines is the agent's committed offset of path in state, in lines of lineLen.
func checkpointLines(t *testing.T, state, path string) int {
	t.Helper()
	off, err := testkit.CheckpointOffset(state, path)
	if err != nil {
		t.Fatal(err)
	}
	return int(off / lineLen)
}

// TestSIGHUPReloadsTailPatterns: the agent follows a second file after its configuration file
// names it and SIGHUP arrives.
func TestSIGHUPReloadsTailPatterns(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topic := kafkatest.NewTopic(t, 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.yaml")
	writeCfg := func(tails ...string) {
		body := fmt.Sprintf("brokers: [%s]\ntopic: %s\nstate-dir: %s\nstart-at: beginning\nlog-format: text\ntail:\n", bootstrap, topic, filepath.Join(dir, "state"))
		for _, p := range tails {
			body += "  - " + p + "\n"
		}
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, second := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log")
	writeCfg(first)
	lw := testkit.NewLineFile(t, first, lineLen)
	lw.Write(100)
	a := startAgent(t, nil, "--config", cfgPath)
	waitForRecords(t, bootstrap, topic, 100, time.Minute, a)

	lw2 := testkit.NewLineFile(t, second, lineLen)
	lw2.Next = 100 // numbers continue, so every line of both files is distinct
	lw2.Write(100)
	writeCfg(first, second)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForRecords(t, bootstrap, topic, 200, time.Minute, a)
	a.stop(time.Minute)
	if !strings.Contains(a.log(), "SIGHUP: configuration reloaded") {
		t.Fatalf("no reload logged:\n%s", a.log())
	}
}

// TestSIGHUPAppliesInputs: SIGHUP with a configuration file that adds an input and removes
// another starts the one and stops the other (its checkpoint saved at its file's end), with
// no restart.
func TestSIGHUPAppliesInputs(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topicA, topicB := kafkatest.NewTopic(t, 1), kafkatest.NewTopic(t, 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.yaml")
	fileA, fileB := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	writeCfg := func(inputs ...string) {
		body := fmt.Sprintf("brokers: [%s]\nstate-dir: %s\nstart-at: beginning\nlog-format: text\ninputs:\n", bootstrap, filepath.Join(dir, "state"))
		for _, in := range inputs {
			body += "  - " + in + "\n"
		}
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inputA := fmt.Sprintf("{name: a, tail: [%s], topic: %s}", fileA, topicA)
	inputB := fmt.Sprintf("{name: b, tail: [%s], topic: %s}", fileB, topicB)
	writeCfg(inputA)
	testkit.NewLineFile(t, fileA, lineLen).Write(100)
	testkit.NewLineFile(t, fileB, lineLen).Write(50)
	a := startAgent(t, nil, "--config", cfgPath)
	waitForRecords(t, bootstrap, topicA, 100, time.Minute, a)

	writeCfg(inputB)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForRecords(t, bootstrap, topicB, 50, time.Minute, a)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(a.log(), "input stopped") || !strings.Contains(a.log(), "input started") {
		if time.Now().After(deadline) {
			t.Fatalf("no input stopped and started logged:\n%s", a.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.stop(time.Minute)
	if n := checkpointLines(t, filepath.Join(dir, "state", "inputs", "a"), fileA); n != 100 {
		t.Errorf("input a's checkpoint at line %d, want its file's end, 100", n)
	}
}

// TestStdinBesideInputs: `app | agent --stdin --config FILE` where the file's inputs follow a
// file: the piped lines go to --topic, the file's to its input's topic; the end of stdin ends
// that input alone, the file is followed on, and SIGTERM stops the agent with exit 0.
func TestStdinBesideInputs(t *testing.T) {
	bootstrap, piped, dir, path, lw := tailSetup(t, 1)
	files := kafkatest.NewTopic(t, 1)
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("inputs:\n  - {name: files, tail: [%s], topic: %s}\n", path, files)), 0o600); err != nil {
		t.Fatal(err)
	}
	lw.Write(100)
	a := startPipedAgent(t, "--config", cfgPath, "--brokers", bootstrap, "--topic", piped, "--stdin",
		"--state-dir", filepath.Join(dir, "state"), "--start-at", "beginning", "--log-format", "text")
	if _, err := io.WriteString(a.in, "piped-1\npiped-2\n"); err != nil {
		t.Fatal(err)
	}
	a.in.Close()
	waitForRecords(t, bootstrap, piped, 2, time.Minute, a)
	waitForRecords(t, bootstrap, files, 100, time.Minute, a)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(a.log(), "stdin ended") {
		if time.Now().After(deadline) {
			t.Fatalf("the end of stdin is not logged:\n%s", a.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lw.Write(50) // after stdin ended: still followed
	waitForRecords(t, bootstrap, files, 150, time.Minute, a)
	a.stopsOnSIGTERM(t)
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, a.log())
	}
}
