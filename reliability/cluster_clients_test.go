package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/producer"
)

// The two clients of the cluster fault scenarios, fed the same keyed lines: the agent (stdin, or
// following a file in exactly-once mode) and the Java control (reliability/javactl/
// ControlProducer.java: the Apache Kafka Java KafkaProducer reading stdin), and what a topic holds
// of their lines afterwards.

// ---------------------------------------------------------------------------------------------
// Keyed lines.

// clusterKeys is the number of distinct keys: line i has key k<i%clusterKeys>, so every key is
// a sequence of increasing line numbers, and 48 keys cover every partition of a 6-partition
// topic (murmur2, as both clients partition).
const clusterKeys = 48

// keyedLineLen is the length of a keyed line, newline included.
const keyedLineLen = 100

// keyRegex takes the key from a keyed line: its first field (both clients get it).
const keyRegex = `^(\S+) `

func keyOf(i int) string { return fmt.Sprintf("k%02d", i%clusterKeys) }

// keyedLine appends line i: "kKK NNNNNNNNN " padded with letters to size-1 bytes, and "\n".
func keyedLine(buf []byte, i, size int) []byte {
	start := len(buf)
	buf = fmt.Appendf(buf, "%s %09d ", keyOf(i), i)
	for len(buf)-start < size-1 {
		buf = append(buf, 'a'+byte((len(buf)-start+i)%26))
	}
	return append(buf, '\n')
}

// parseKeyed returns the key and number of a keyed line's value; ok is false for anything else.
func parseKeyed(v []byte) (key string, i int, ok bool) {
	if len(v) < 14 || v[0] != 'k' || v[3] != ' ' || v[13] != ' ' {
		return "", 0, false
	}
	n, err := strconv.Atoi(string(v[4:13]))
	if err != nil {
		return "", 0, false
	}
	return string(v[:3]), n, true
}

// partitionOf is the partition of line i's key in a topic of n partitions: the producer's (and
// the Java client's) murmur2 placement.
func partitionOf(i, n int) int32 {
	return producer.KeyPartition([]byte(keyOf(i)), n)
}

// ---------------------------------------------------------------------------------------------
// Feeding the clients the same lines.

// feed writes the same numbered lines to every client's input, each from its own goroutine, so
// that a client that stops reading (its buffer full) delays only its own input. The test moves
// the number of lines due: at a rate (pace) or at once (add); end lets the writers finish the
// lines due and close the inputs.
type feed struct {
	line func(buf []byte, i int) []byte

	mu        sync.Mutex
	cond      *sync.Cond
	due       int
	final     bool
	rate      int
	rateSince time.Time
	rateBase  int
	outs      []*feedOut
	stopPace  chan struct{}
	paceDone  chan struct{}
}

// feedOut is one client's input.
type feedOut struct {
	name string
	w    io.WriteCloser
	f    *feed

	mu      sync.Mutex
	written int
	at      []int64 // UnixNano when line i was written to this input
	err     error
	done    chan struct{}
}

func newFeed(line func(buf []byte, i int) []byte) *feed {
	f := &feed{line: line, stopPace: make(chan struct{}), paceDone: make(chan struct{})}
	f.cond = sync.NewCond(&f.mu)
	go f.pacer()
	return f
}

// output adds an input; its writer starts at once.
func (f *feed) output(name string, w io.WriteCloser) *feedOut {
	o := &feedOut{name: name, w: w, f: f, done: make(chan struct{})}
	f.mu.Lock()
	f.outs = append(f.outs, o)
	f.mu.Unlock()
	go o.run()
	return o
}

func (f *feed) pacer() {
	defer close(f.paceDone)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stopPace:
			return
		case now := <-tick.C:
			f.mu.Lock()
			if f.rate > 0 && !f.final {
				if due := f.rateBase + int(now.Sub(f.rateSince).Seconds()*float64(f.rate)); due > f.due {
					f.due = due
					f.cond.Broadcast()
				}
			}
			f.mu.Unlock()
		}
	}
}

// pace makes lines due at perSecond from now on (0: none until the next pace or add).
func (f *feed) pace(perSecond int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rate, f.rateSince, f.rateBase = perSecond, time.Now(), f.due
}

// add makes n more lines due at once.
func (f *feed) add(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.due += n
	f.rateSince, f.rateBase = time.Now(), f.due
	f.cond.Broadcast()
}

// lines returns the number of lines due so far.
func (f *feed) lines() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.due
}

// end stops pacing; the writers write what is due, then close their inputs. It returns the
// number of lines in all.
func (f *feed) end() int {
	f.mu.Lock()
	if !f.final {
		f.final = true
		close(f.stopPace)
	}
	n := f.due
	f.cond.Broadcast()
	f.mu.Unlock()
	<-f.paceDone
	return n
}

func (o *feedOut) run() {
	defer close(o.done)
	f := o.f
	var buf []byte
	next := 0
	for {
		f.mu.Lock()
		for next >= f.due && !f.final {
			f.cond.Wait()
		}
		due, final := f.due, f.final
		f.mu.Unlock()
		if next >= due && final {
			o.mu.Lock()
			o.err = o.w.Close()
			o.mu.Unlock()
			return
		}
		buf = buf[:0]
		first := next
		for next < due && len(buf) < 64<<10 {
			buf = f.line(buf, next)
			next++
		}
		_, err := o.w.Write(buf)
		now := time.Now().UnixNano()
		o.mu.Lock()
		for i := first; i < next; i++ {
			o.at = append(o.at, now)
		}
		o.written = next
		if err != nil {
			o.err = err
		}
		o.mu.Unlock()
		if err != nil {
			_ = o.w.Close()
			return // the client exited: what it did not read is counted as not delivered
		}
	}
}

// writtenAt returns when line i was written to this input (zero if it was not).
func (o *feedOut) writtenAt(i int) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i < 0 || i >= len(o.at) {
		return time.Time{}
	}
	return time.Unix(0, o.at[i])
}

// linesWrittenIn returns the numbers [from, to) of the lines written to this input in [a, b].
func (o *feedOut) linesWrittenIn(a, b time.Time) (from, to int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from, _ = slices.BinarySearch(o.at, a.UnixNano())
	to, _ = slices.BinarySearch(o.at, b.UnixNano()+1)
	return from, to
}

// waitWritten waits until the writer wrote every line due and closed the input.
func (o *feedOut) waitWritten(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(timeout):
		o.mu.Lock()
		w := o.written
		o.mu.Unlock()
		t.Fatalf("%s: input not written within %v (%d lines written): the client does not read", o.name, timeout, w)
	}
}

// ---------------------------------------------------------------------------------------------
// The Java control.

var (
	javaCtlOnce sync.Once
	javaCtlDir  string
	javaCtlErr  error
)

// javaControl compiles javactl/ControlProducer.java against the cluster's jars (once) and
// returns the class directory, which also holds its logging configuration (WARN to stderr).
func javaControl(t *testing.T, c *cluster) string {
	t.Helper()
	javaCtlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kafkatrail-javactl")
		if err != nil {
			javaCtlErr = err
			return
		}
		javaCtlDir = dir
		cmd := exec.Command(javatest.Tool("javac"), "-d", dir, "-cp", filepath.Join(c.lib, "*"),
			filepath.Join(repoRoot, "reliability/javactl/ControlProducer.java"))
		if out, err := cmd.CombinedOutput(); err != nil {
			javaCtlErr = fmt.Errorf("javac: %v\n%s", err, out)
			return
		}
		javaCtlErr = os.WriteFile(filepath.Join(dir, "log4j2.properties"), []byte(`status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
`), 0o644)
	})
	if javaCtlErr != nil {
		t.Fatalf("Java control: %v", javaCtlErr)
	}
	return javaCtlDir
}

func removeJavaControl() {
	if javaCtlDir != "" {
		os.RemoveAll(javaCtlDir)
	}
}

// javaSummary is the control's last line of output.
type javaSummary struct {
	Sent        int64            `json:"sent"`
	Acked       int64            `json:"acked"`
	Failed      int64            `json:"failed"`
	Delivered   int64            `json:"delivered"`
	ElapsedMs   int64            `json:"elapsed_ms"`
	SendMaxMs   float64          `json:"send_max_ms"`
	SendMaxLate float64          `json:"send_max_later_ms"`
	SendP99Ms   float64          `json:"send_p99_ms"`
	SlowSends   int64            `json:"slow_sends"`
	Commits     int64            `json:"commits"`
	Aborts      int64            `json:"aborts"`
	Errors      map[string]int64 `json:"errors"`
	FirstErrors []string         `json:"first_errors"`
}

// ---------------------------------------------------------------------------------------------
// A client run.

// clientSpec is how both clients of a scenario run.
type clientSpec struct {
	props []string // producer properties KEY=VALUE, the same for both (-X)
	// exactlyOnce: the agent follows a file with --exactly-once; the control runs transactional.
	exactlyOnce bool
	// follow: the agent follows a file (as `agent --tail` is used) rather than reading stdin,
	// whose lines it cannot hold while a refusal lasts (a stdin line that meets one fails).
	follow       bool
	commitMs     int
	commitLines  int
	agentArgs    []string // extra agent arguments
	javaArgs     []string
	bootstrap    string // default: the cluster's
	agentTxnID   string
	javaTxnID    string
	stateTopic   string
	shutdownWait time.Duration // the agent's --shutdown-timeout; the control's close timeout
}

// clusterClient is one client of a scenario.
type clusterClient struct {
	kind  string // "agent" or "Java"
	topic string
	proc  *agentProc
	in    *feedOut
	start time.Time

	// exactly-once agent: the file it follows and its state dir, and when its checkpoint moved
	path, state string
	commitMu    sync.Mutex
	commitAt    []time.Time
	// The exactly-once agent runs supervised as configs/kafkatrail-agent.service does
	// (Restart=on-failure, RestartSec=2): it exits when a transaction had to be aborted, and
	// its restart resumes at the last commit.
	procMu     sync.Mutex
	stopping   atomic.Bool
	supervised chan struct{} // closed when the supervisor ends
	restarts   []string      // why each run ended, for the row
}

// process is the client's current process (a supervised agent's changes at each restart).
func (cc *clusterClient) process() *agentProc {
	cc.procMu.Lock()
	defer cc.procMu.Unlock()
	return cc.proc
}

// restartSec is the unit's RestartSec.
const restartSec = 2 * time.Second

// supervise restarts the exactly-once agent after a failure, as systemd would, until stopping.
func (cc *clusterClient) supervise(t *testing.T, args []string) {
	defer close(cc.supervised)
	for {
		p := cc.process()
		<-p.exited
		code := exitCode(p.err)
		if cc.stopping.Load() || code == 0 {
			return
		}
		why := lastAgentError(p.log())
		cc.procMu.Lock()
		cc.restarts = append(cc.restarts, fmt.Sprintf("exit %d: %s", code, why))
		cc.procMu.Unlock()
		time.Sleep(restartSec)
		if cc.stopping.Load() {
			return
		}
		np, err := spawn(t, p.logf, agentBin, nil, nil, args...)
		if err != nil {
			return
		}
		cc.procMu.Lock()
		cc.proc = np
		cc.procMu.Unlock()
	}
}

// stopSupervised ends supervision and kills the current process (the test's cleanup).
func (cc *clusterClient) stopSupervised() {
	cc.stopping.Store(true)
	p := cc.process()
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	<-cc.supervised
}

// lastAgentError is the agent's last "agent: ..." line (its exit message).
func lastAgentError(log string) string {
	ls := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(ls) - 1; i >= 0; i-- {
		if strings.HasPrefix(ls[i], "agent: ") {
			l := ls[i]
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return l
		}
	}
	return "(no message)"
}

var clusterProps = []string{"batch.size=16384", "linger.ms=5", "retry.backoff.ms=100",
	"max.in.flight.requests.per.connection=5", "buffer.memory=33554432"}

// startClient starts one client on topic; its input is a pipe (stdin) or, for the exactly-once
// agent, a file it follows.
func startClient(t *testing.T, c *cluster, f *feed, kind, topic string, spec clientSpec) *clusterClient {
	t.Helper()
	bootstrap := spec.bootstrap
	if bootstrap == "" {
		bootstrap = c.bootstrap
	}
	wait := spec.shutdownWait
	if wait == 0 {
		wait = 2 * time.Minute
	}
	props := append(slices.Clone(clusterProps), spec.props...)
	cc := &clusterClient{kind: kind, topic: topic}
	var xs []string
	for _, p := range props {
		xs = append(xs, "-X", p)
	}
	if kind == "agent" {
		args := []string{"--brokers", bootstrap, "--topic", topic, "--key-regex", keyRegex,
			"--header-path=", "--header-host=", "--log-level", agentLogLevel(), "--log-format", "text",
			"--shutdown-timeout", wait.String()}
		if spec.exactlyOnce || spec.follow {
			dir := t.TempDir()
			cc.path, cc.state = filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
			w, err := os.OpenFile(cc.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, "--tail", cc.path, "--state-dir", cc.state, "--start-at", "beginning",
				"--partial-line-idle", "200ms")
			if spec.exactlyOnce {
				args = append(args, "--exactly-once", "--transactional-id", spec.agentTxnID,
					"--state-topic", spec.stateTopic, "--commit-interval", fmt.Sprintf("%dms", spec.commitMs),
					"--commit-max-lines", strconv.Itoa(spec.commitLines))
			}
			args = append(append(args, xs...), spec.agentArgs...)
			cc.proc = startAgent(t, nil, nil, args...)
			cc.in = f.output(kind, w)
			cc.supervised = make(chan struct{})
			go cc.supervise(t, args)
			t.Cleanup(cc.stopSupervised)
			go cc.pollCommits()
		} else {
			// Its own state dir: where a line Kafka refuses for good is kept (dead-letters.jsonl).
			cc.state = t.TempDir()
			args = append(append(append(args, "--stdin", "--state-dir", cc.state), xs...), spec.agentArgs...)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cc.proc = startAgent(t, r, nil, args...)
			r.Close()
			cc.in = f.output(kind, w)
		}
	} else {
		dir := javaControl(t, c)
		args := []string{"-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties"),
			"-cp", filepath.Join(c.lib, "*") + string(os.PathListSeparator) + dir, "ControlProducer",
			"--bootstrap", bootstrap, "--topic", topic, "--key-regex", keyRegex,
			"--shutdown-timeout-ms", strconv.FormatInt(wait.Milliseconds(), 10)}
		if spec.exactlyOnce {
			args = append(args, "--transactional-id", spec.javaTxnID, "--commit-ms", strconv.Itoa(spec.commitMs),
				"--commit-lines", strconv.Itoa(spec.commitLines))
		}
		args = append(append(args, xs...), spec.javaArgs...)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cc.proc = startProc(t, "java", javatest.Tool("java"), r, nil, args...)
		r.Close()
		cc.in = f.output(kind, w)
	}
	cc.start = time.Now()
	return cc
}

// clientOutcome is how a client's run ended.
type clientOutcome struct {
	exit       int
	failed     int64  // lines the client reported failed (exit message, callbacks)
	firstError string // the first failure it named
	java       *javaSummary
	stuck      string   // the client did not finish: what was seen
	restarts   []string // a supervised agent's runs that ended in a failure
}

var agentFailedRe = regexp.MustCompile(`agent: (\d+) of (\d+) lines failed; first error: (.*)`)

// finish stops an exactly-once agent (which follows a file) once its checkpoint covers the
// file's lines (every line committed) with SIGINT, or at timeout; the outcome says so if it
// never got there.
func (cc *clusterClient) finish(t *testing.T, timeout time.Duration, lines int) clientOutcome {
	t.Helper()
	var out clientOutcome
	deadline := time.Now().Add(timeout)
	cc.in.waitWritten(t, time.Minute)
	want := int64(lines) * keyedLineLen
	for readCheckpoint(cc.state, cc.path) < want && time.Now().Before(deadline) {
		select {
		case <-cc.supervised:
			deadline = time.Now() // it ended with exit 0 by itself: nothing more will come
		case <-time.After(100 * time.Millisecond):
		}
	}
	cc.stopping.Store(true)
	if got := readCheckpoint(cc.state, cc.path); got < want {
		out.stuck = fmt.Sprintf("committed %s of %s lines within %v", num(got/keyedLineLen), num(int64(lines)), timeout.Round(time.Second))
	}
	p := cc.process()
	if p.running() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			p.kill9()
		}
	}
	<-cc.supervised
	out.exit = exitCode(p.err)
	cc.procMu.Lock()
	out.restarts = slices.Clone(cc.restarts)
	cc.procMu.Unlock()
	return out
}

// readCheckpoint is checkpointOffset without a test (the commit poller's goroutine): the
// committed offset of path in bytes, 0 when there is none or the file does not parse.
func readCheckpoint(stateDir, path string) int64 {
	off, _ := testkit.CheckpointOffset(stateDir, path)
	return off
}

// pollCommits records when the exactly-once agent's checkpoint moved (it is written after each
// commit), every 20 ms while the agent runs.
func (cc *clusterClient) pollCommits() {
	var last int64
	for !cc.stopping.Load() {
		if off := readCheckpoint(cc.state, cc.path); off != last {
			last = off
			cc.commitMu.Lock()
			cc.commitAt = append(cc.commitAt, time.Now())
			cc.commitMu.Unlock()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (cc *clusterClient) commits() []time.Time {
	cc.commitMu.Lock()
	defer cc.commitMu.Unlock()
	return slices.Clone(cc.commitAt)
}

// parseJavaSummary returns the control's JSON summary line, nil if it printed none.
func parseJavaSummary(log string) *javaSummary {
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "{\"sent\"") {
			var s javaSummary
			if err := json.Unmarshal([]byte(l), &s); err == nil {
				return &s
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Reading a topic back.

// keyedRec is one record as read back: its line number, partition and append time.
type keyedRec struct {
	num  int32
	part int32
	ts   int64 // broker append time (the topics have message.timestamp.type=LogAppendTime), ms
}

// keyedCount is what a topic holds of a client's lines 0..n-1.
type keyedCount struct {
	records    int64
	distinct   int64
	missing    []int      // lines never seen
	dup        int64      // extra copies
	reordered  int64      // first copies with a lower number than one before them of the same key in its partition
	misrouted  int64      // records in another partition than murmur2 of their key
	unexpected int64      // records that are not keyed lines of this run
	recs       []keyedRec // in the order read: each partition's in offset order
	firstTS    []int64    // append time of each line's first copy (0: never seen)
}

// delivered counts the lines from, from+1, ... from+n-1 that are in the topic.
func (kc *keyedCount) delivered(from, n int) int {
	got := 0
	for i := from; i < from+n; i++ {
		if kc.firstTS[i] != 0 {
			got++
		}
	}
	return got
}

// among recounts duplicates and reordering over the lines counted selects (a scenario whose
// other lines have no defined fate: written before their topic was created again).
func (kc *keyedCount) among(counted func(i int) bool, partitions int) (dup, reordered, misrouted int64) {
	seen := map[int32]bool{}
	maxByKey := map[[2]int32]int32{}
	for _, r := range kc.recs {
		if !counted(int(r.num)) {
			continue
		}
		if partitionOf(int(r.num), partitions) != r.part {
			misrouted++
		}
		if seen[r.num] {
			dup++
			continue
		}
		seen[r.num] = true
		pk := [2]int32{r.part, r.num % clusterKeys}
		if hi, ok := maxByKey[pk]; ok && r.num < hi {
			reordered++
		} else {
			maxByKey[pk] = r.num
		}
	}
	return dup, reordered, misrouted
}

// readKeyed reads topic (of partitions partitions) back and counts the keyed lines 0..n-1. With
// committed, it reads at read_committed after writing a sentinel to every partition (so that
// every transaction decided before is seen).
func readKeyed(t *testing.T, acc kafkaAccess, topic string, partitions, n int, committed bool) keyedCount {
	t.Helper()
	kc := keyedCount{firstTS: make([]int64, n)}
	seen := make([]uint16, n)
	maxByKey := map[[2]int32]int32{} // (partition, key) -> highest number seen
	each := func(r *kgo.Record) {
		kc.records++
		key, i, ok := parseKeyed(r.Value)
		if !ok || i >= n || key != keyOf(i) {
			kc.unexpected++
			if kc.unexpected <= 3 {
				t.Logf("%s: unexpected record %.60q", topic, r.Value)
			}
			return
		}
		if want := partitionOf(i, partitions); r.Partition != want {
			kc.misrouted++
		}
		ts := r.Timestamp.UnixMilli()
		kc.recs = append(kc.recs, keyedRec{num: int32(i), part: r.Partition, ts: ts})
		seen[i]++
		if seen[i] > 1 {
			kc.dup++
			return
		}
		kc.firstTS[i] = ts
		pk := [2]int32{r.Partition, int32(i % clusterKeys)}
		if hi, ok := maxByKey[pk]; ok && int32(i) < hi {
			kc.reordered++
			if kc.reordered <= 3 {
				t.Logf("%s: line %d after line %d of key %s in partition %d", topic, i, hi, key, r.Partition)
			}
		} else {
			maxByKey[pk] = int32(i)
		}
	}
	if committed {
		consumeCommitted(t, acc, topic, partitions, each)
	} else {
		acc.consume(t, topic, each)
	}
	for i, s := range seen {
		if s == 0 {
			kc.missing = append(kc.missing, i)
		} else {
			kc.distinct++
		}
	}
	return kc
}

// consumeCommitted writes endOfTest to every partition, then reads at read_committed until
// every partition's sentinel came.
func consumeCommitted(t *testing.T, acc kafkaAccess, topic string, partitions int, each func(*kgo.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod := acc.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer prod.Close()
	want := map[int32]int64{}
	for p := int32(0); p < int32(partitions); p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(endOfTest)}).FirstErr(); err != nil {
			t.Fatalf("sentinel to %s/%d: %v", topic, p, err)
		}
		want[p] = 0
	}
	acc.readBack(t, ctx, topic, " at read_committed", "sentinel", want, func(r *kgo.Record) bool {
		if string(r.Value) == endOfTest {
			return true
		}
		each(r)
		return false
	}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

// firstAfter returns the append time of the first record on parts (nil: any partition) appended
// after at; ok is false if there is none.
func (kc *keyedCount) firstAfter(at time.Time, parts []int32) (time.Time, bool) {
	ms := at.UnixMilli()
	best := int64(-1)
	for _, r := range kc.recs {
		if r.ts > ms && (parts == nil || slices.Contains(parts, r.part)) && (best < 0 || r.ts < best) {
			best = r.ts
		}
	}
	if best < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(best), true
}

// longestGap returns the longest time without a new record on parts between from and to.
func (kc *keyedCount) longestGap(from, to time.Time, parts []int32) time.Duration {
	var ts []int64
	for _, r := range kc.recs {
		if r.ts >= from.UnixMilli() && r.ts <= to.UnixMilli() && (parts == nil || slices.Contains(parts, r.part)) {
			ts = append(ts, r.ts)
		}
	}
	slices.Sort(ts)
	prev, gap := from.UnixMilli(), int64(0)
	for _, x := range ts {
		gap = max(gap, x-prev)
		prev = x
	}
	gap = max(gap, to.UnixMilli()-prev)
	return time.Duration(gap) * time.Millisecond
}

// lastIn returns the append time of the last line of want to arrive (its first copy); ok is
// false if one of them never came.
func (kc *keyedCount) lastIn(want func(i int) bool) (time.Time, bool) {
	var last int64
	for i, ts := range kc.firstTS {
		if !want(i) {
			continue
		}
		if ts == 0 {
			return time.Time{}, false
		}
		last = max(last, ts)
	}
	return time.UnixMilli(last), true
}
