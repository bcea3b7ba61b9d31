package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// javaEvent is event i as a Java service logs it: an INFO line, or an ERROR line followed by a
// stack trace (frames, a cause, "... N more"); one frame line ends with CRLF, one has bytes that
// are not UTF-8.
func javaEvent(i int) string {
	if i%3 == 0 {
		return fmt.Sprintf("2026-12-01 12:00:00.%03d INFO  [main] ev-%06d request served\n", i%1000, i)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "2026-12-01 12:00:00.%03d ERROR [worker-%d] ev-%06d java.lang.IllegalStateException: boom\n", i%1000, i%8, i)
	for f := 0; f < 1+i%7; f++ {
		fmt.Fprintf(&b, "\tat com.example.Service.call%d(Service.java:%d)\n", f, 10+f)
	}
	if i%2 == 0 {
		b.WriteString("\tat com.example.Crlf.run(Crlf.java:1)\r\n")
		fmt.Fprintf(&b, "Caused by: java.io.IOException: disk \xff\xfe %d\n\tat com.example.Disk.write(Disk.java:3)\n\t... %d more\n", i, 1+i%5)
	}
	return b.String()
}

// pythonEvent is event i as a Python service logs it: an INFO line, or a traceback.
func pythonEvent(i int) string {
	if i%3 == 0 {
		return fmt.Sprintf("INFO:app:ev-%06d request served\n", i)
	}
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	fmt.Fprintf(&b, "  File \"/srv/app/ev-%06d.py\", line %d, in <module>\n    main()\n", i, i%50)
	for f := 0; f < i%5; f++ {
		fmt.Fprintf(&b, "  File \"/srv/app/lib%d.py\", line %d, in call\n\tcall%d()\n", f, f+1, f)
	}
	fmt.Fprintf(&b, "ValueError: bad input %d\n", i)
	return b.String()
}

var eventID = regexp.MustCompile(`ev-(\d{6})`)

// eventLog is the application writing events to its log file: every event's text and where it
// begins in the file.
type eventLog struct {
	t      *testing.T
	path   string
	f      *os.File
	make   func(int) string
	next   int
	starts map[int64]bool // offsets of the current file's events
	off    int64
}

func newEventLog(t *testing.T, path string, make func(int) string) *eventLog {
	l := &eventLog{t: t, path: path, make: make}
	l.open()
	t.Cleanup(func() { l.f.Close() })
	return l
}

func (l *eventLog) open() {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.t.Fatal(err)
	}
	l.f, l.off, l.starts = f, 0, map[int64]bool{0: true}
}

func (l *eventLog) write(s string) {
	if _, err := l.f.WriteString(s); err != nil {
		l.t.Fatal(err)
	}
	l.off += int64(len(s))
}

// events writes the next n events.
func (l *eventLog) events(n int) {
	var b strings.Builder
	for range n {
		l.starts[l.off+int64(b.Len())] = true
		b.WriteString(l.make(l.next))
		l.next++
	}
	l.write(b.String())
}

// want is the record event i must become: its text less the newline that ends it.
func (l *eventLog) want(i int) string { return strings.TrimSuffix(l.make(i), "\n") }

// events reads topic until every event below n arrived, checking that each record is one
// whole event, byte for byte; it returns how many records each event became.
func collectEvents(t *testing.T, bootstrap, topic string, l *eventLog, n int, timeout time.Duration, a *runningAgent) map[int]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := map[int]int{}
	missing := n
	for missing > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			first := -1
			for i := range n {
				if seen[i] == 0 {
					first = i
					break
				}
			}
			t.Fatalf("%d of %d events missing after %v (the first: %d); agent log:\n%s", missing, n, timeout, first, a.log())
		}
		fs.EachRecord(func(r *kgo.Record) {
			m := eventID.FindSubmatch(r.Value)
			i := -1
			if m != nil {
				i, _ = strconv.Atoi(string(m[1])) // six digits: in range
			}
			if i < 0 || string(r.Value) != l.want(i) {
				t.Fatalf("record %q (partition %d offset %d) is not a whole event; want %q", r.Value, r.Partition, r.Offset, l.want(i))
			}
			if seen[i] == 0 && i < n {
				missing--
			}
			seen[i]++
		})
	}
	return seen
}

// checkpointOf is path's committed offset in the state directory, and whether it has one.
func checkpointOf(t *testing.T, state, path string) (int64, bool) {
	off, ok, err := testkit.Checkpoint(state, path)
	if err != nil {
		t.Fatal(err)
	}
	return off, ok
}

// TestTailMultilineStackTraces: Java and Python stack traces written to a followed file reach
// Kafka one record per event, byte for byte, none lost, across a kill -9 while an event was half
// written (the checkpoint stops before it and the restart reads it whole), a kill -9 while
// events stream, and a rename rotation with an event pending at the old file's end.
func TestTailMultilineStackTraces(t *testing.T) {
	for _, tc := range []struct {
		preset string
		make   func(int) string
	}{{"java", javaEvent}, {"python", pythonEvent}} {
		t.Run(tc.preset, func(t *testing.T) {
			bootstrap, topic, dir := kafkatest.Bootstrap(t), kafkatest.NewTopic(t, 3), t.TempDir()
			path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
			l := newEventLog(t, path, tc.make)
			args := func(timeout string) []string {
				return append(tailArgs(bootstrap, topic, path, state), "--multiline", tc.preset, "--multiline-timeout", timeout)
			}

			// 1. A half-written event at the end: held (the timeout is an hour), so the
			// checkpoint stops exactly at its first byte. Crash there.
			l.events(1000)
			half := l.make(1000)
			cut := strings.Index(half, "\n") + 1
			cut += strings.Index(half[cut:], "\n") + 1
			halfStart := l.off
			l.starts[halfStart] = true
			l.write(half[:cut])
			l.next++
			a := startAgent(t, nil, args("1h")...)
			collectEvents(t, bootstrap, topic, l, 1000, time.Minute, a)
			waitCond(t, "the checkpoint at the held event", func() bool { cp, _ := checkpointOf(t, state, path); return cp == halfStart }, a)
			a.kill9()

			// 2. The event's rest written while the agent is down; then a stream of events
			// and a crash while they are sent. The checkpoint is never inside an event.
			l.write(half[cut:])
			a = startAgent(t, nil, args("300ms")...)
			l.events(2000)
			collectEvents(t, bootstrap, topic, l, 1500, time.Minute, a)
			a.kill9()
			if cp, ok := checkpointOf(t, state, path); !ok || !l.starts[cp] && cp != l.off {
				t.Fatalf("checkpoint %d (found %v) is not at an event's first byte", cp, ok)
			}

			// 3. Restart, then rotate by rename with the file's last event pending (it is sent
			// once the old file is idle), and go on in the new file.
			a = startAgent(t, nil, args("300ms")...)
			l.events(500)
			collectEvents(t, bootstrap, topic, l, l.next-1, time.Minute, a)
			l.f.Close()
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			l.open()
			l.events(500)
			seen := collectEvents(t, bootstrap, topic, l, l.next, time.Minute, a)
			a.stop(time.Minute)

			dup := 0
			for _, c := range seen {
				dup += c - 1
			}
			t.Logf("%s: %d events (%d records read), %d sent again after the crashes; each one record, byte for byte", tc.preset, l.next, l.next+dup, dup)
		})
	}
}

// waitCond polls cond every 20 ms for up to 30 s.
func waitCond(t *testing.T, what string, cond func() bool, a *runningAgent) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; agent log:\n%s", what, a.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pipedAgent is the agent reading a pipe (blocking, as a shell makes it) that the test writes.
type pipedAgent struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr syncBuffer
	exited chan struct{} // closed once the agent has exited
}

func startPipedAgent(t *testing.T, args ...string) *pipedAgent {
	t.Helper()
	a := &pipedAgent{cmd: exec.Command(agentBin, args...), exited: make(chan struct{})}
	a.cmd.Env = testkit.AgentEnv()
	in, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.in = in
	a.cmd.Stderr = &a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-a.exited:
		default:
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	})
	return a
}

// log is what the agent wrote to stderr so far.
func (a *pipedAgent) log() string { return a.stderr.String() }

// stopsOnSIGTERM fails unless the agent exits within 15 s of SIGTERM.
func (a *pipedAgent) stopsOnSIGTERM(t *testing.T) {
	t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the agent did not stop reading an idle stdin after SIGTERM; stderr:\n%s", tail(a.stderr.String()))
	}
}

// TestStdinMultilineIdleThenSignal: on a real pipe, an event held while the read waits is sent
// once stdin is idle for the multiline timeout, and SIGTERM then stops the blocked read.
func TestStdinMultilineIdleThenSignal(t *testing.T) {
	bootstrap, topic := kafkatest.Bootstrap(t), kafkatest.NewTopic(t, 1)
	a := startPipedAgent(t, "--brokers", bootstrap, "--topic", topic, "--stdin", "--multiline", "java",
		"--multiline-timeout", "300ms", "--log-format", "text")
	event := "2026-12-01 ERROR boom\n\tat a.B(B.java:1)\n\t... 2 more"
	if _, err := io.WriteString(a.in, "first\n"+event+"\n"); err != nil {
		t.Fatal(err)
	}
	recs := kafkatest.Consume(t, topic, 2, 20*time.Second)
	if len(recs) != 2 || string(recs[0].Value) != "first" || string(recs[1].Value) != event {
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		t.Fatalf("records %q, want %q and the held event %q; stderr:\n%s", got, "first", event, tail(a.stderr.String()))
	}
	a.stopsOnSIGTERM(t)
}

// TestStdinSIGTERMStopsIdleRead: SIGTERM stops an agent whose stdin pipe is open and idle (the
// read is blocked), without multiline events: os.Stdin of a blocking pipe has no read
// deadline, so the agent reads a polled duplicate of it.
func TestStdinSIGTERMStopsIdleRead(t *testing.T) {
	bootstrap, topic := kafkatest.Bootstrap(t), kafkatest.NewTopic(t, 1)
	a := startPipedAgent(t, "--brokers", bootstrap, "--topic", topic, "--stdin", "--log-format", "text")
	if _, err := io.WriteString(a.in, "one\n"); err != nil {
		t.Fatal(err)
	}
	if recs := kafkatest.Consume(t, topic, 1, 20*time.Second); len(recs) != 1 {
		t.Fatalf("%d records; stderr:\n%s", len(recs), tail(a.stderr.String()))
	}
	a.stopsOnSIGTERM(t)
	if !strings.Contains(a.stderr.String(), "stopped reading stdin") {
		t.Fatalf("the agent exited without stopping its read; stderr:\n%s", tail(a.stderr.String()))
	}
}
