package reliability

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kafkatrail/kafkatrail/internal/procstat"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// ---------------------------------------------------------------------------------------------
// Waiting on conditions.

// waitFor polls cond every interval until it returns true, or fails the test at the deadline
// with the message what() returns.
func waitFor(t *testing.T, timeout, interval time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what())
		}
		time.Sleep(interval)
	}
}

// ---------------------------------------------------------------------------------------------
// The agent process.

type agentProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	logf   string
	exited chan struct{}
	err    error
	done   time.Time

	peakMu sync.Mutex
	peak   int64
	stopS  chan struct{}
}

// startAgent starts the agent binary with args; its stdout and stderr go to a file (log()). It is
// killed by its PID when the test ends, if it still runs. stdin is r (nil: /dev/null).
func startAgent(t *testing.T, stdin io.Reader, env []string, args ...string) *agentProc {
	t.Helper()
	return startProc(t, "agent", agentBin, stdin, env, args...)
}

// startProc starts bin as startAgent starts the agent (the cluster suite's Java control too);
// its output goes to name.log in the test's temporary directory.
func startProc(t *testing.T, name, bin string, stdin io.Reader, env []string, args ...string) *agentProc {
	t.Helper()
	a, err := spawn(t, filepath.Join(t.TempDir(), name+".log"), bin, stdin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-a.exited:
		default:
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	})
	return a
}

// spawn starts bin with its output appended to logf. It calls no method of t (a supervisor's
// goroutine restarts processes with it); the caller stops the process.
func spawn(t *testing.T, logf, bin string, stdin io.Reader, env []string, args ...string) (*agentProc, error) {
	f, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Stdin = stdin
	cmd.Env = append(testkit.AgentEnv(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	a := &agentProc{t: t, cmd: cmd, logf: logf, exited: make(chan struct{}), stopS: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		a.done = time.Now()
		f.Close()
		close(a.exited)
	}()
	go a.sampleRSS()
	return a, nil
}

// sampleRSS records the agent's peak resident memory every 20 ms while it runs.
func (a *agentProc) sampleRSS() {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-a.exited:
			return
		case <-tick.C:
			if r := procstat.RSS(a.cmd.Process.Pid); r > 0 {
				a.peakMu.Lock()
				a.peak = max(a.peak, r)
				a.peakMu.Unlock()
			}
		}
	}
}

// peakRSS returns the highest resident memory seen, and resets it to 0 when reset is set.
func (a *agentProc) peakRSS(reset bool) int64 {
	a.peakMu.Lock()
	defer a.peakMu.Unlock()
	p := a.peak
	if reset {
		a.peak = 0
	}
	return p
}

func (a *agentProc) log() string {
	b, _ := os.ReadFile(a.logf)
	return string(b)
}

func (a *agentProc) logTail() string {
	var kept []string
	for _, l := range strings.Split(a.log(), "\n") {
		if !strings.Contains(l, "msg=telemetry") { // the OTLP exporter finds no collector: noise here
			kept = append(kept, l)
		}
	}
	s := strings.Join(kept, "\n")
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

func (a *agentProc) running() bool {
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// wait waits for the agent to exit by itself and returns its exit code.
func (a *agentProc) wait(timeout time.Duration) int {
	a.t.Helper()
	select {
	case <-a.exited:
	case <-time.After(timeout):
		a.t.Fatalf("agent still running after %v; log:\n%s", timeout, a.logTail())
	}
	return exitCode(a.err)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// stop sends SIGTERM and waits for the exit; the agent must exit 0.
func (a *agentProc) stop(timeout time.Duration) {
	a.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.wait(timeout); code != 0 {
		a.t.Fatalf("agent exited %d after SIGTERM; log:\n%s", code, a.logTail())
	}
}

// kill9 kills the agent as a crash would, by its PID.
func (a *agentProc) kill9() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}

// checkNoPanic fails the test if the agent's output shows a Go panic or fatal runtime error.
func (a *agentProc) checkNoPanic() {
	a.t.Helper()
	l := a.log()
	for _, s := range []string{"panic:", "fatal error:", "goroutine 1 ["} {
		if strings.Contains(l, s) {
			a.t.Fatalf("agent crashed (%q in its output):\n%s", s, a.logTail())
		}
	}
}

// tailArgs are the arguments of an agent following path (a file or a glob).
func tailArgs(bootstrap, topic, path, state string, extra ...string) []string {
	return append([]string{"--brokers", bootstrap, "--topic", topic, "--tail", path, "--state-dir", state,
		"--start-at", "beginning", "--partial-line-idle", "200ms", "--log-level", agentLogLevel(), "--log-format", "text"}, extra...)
}

// agentLogLevel is info, or RELIABILITY_AGENT_LOG_LEVEL (debug, to investigate a failure).
func agentLogLevel() string {
	if l := os.Getenv("RELIABILITY_AGENT_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// ---------------------------------------------------------------------------------------------
// Lines and files.

// lineLen is the length of every numbered line, newline included: offsets convert to line
// numbers, so a checkpoint says how many lines it covers.
const lineLen = 100

// lineFile is the application's log file in every scenario: numbered lines of lineLen bytes.
type lineFile = testkit.LineFile

func newLineFile(t testing.TB, path string) *lineFile { return testkit.NewLineFile(t, path, lineLen) }

// scenario is how most scenarios start: a topic of 3 partitions; the application's log file at
// path in dir, open for appending (lf, closed when the test ends), and the agent's state dir
// beside it; the topic read back outside the proxy (rd) and watched (w). n is the number of lines
// of a file written before the agent starts (newFileScenario); recs collects recovery times.
type scenario struct {
	topic, dir, path, state string
	lf                      *lineFile
	rd                      kafkaAccess
	w                       *offsetWatcher
	n                       int
	recs                    []time.Duration
}

func newScenario(t *testing.T, b *suite) *scenario {
	t.Helper()
	f := &scenario{topic: b.newTopic(t, 3), dir: t.TempDir()}
	f.path, f.state = filepath.Join(f.dir, "app.log"), filepath.Join(f.dir, "state")
	f.lf = newLineFile(t, f.path)
	t.Cleanup(f.lf.Close)
	f.rd = b.reader()
	f.w = f.rd.watch(t, f.topic)
	return f
}

// newFileScenario is newScenario with a file of n lines, written and closed.
func newFileScenario(t *testing.T, b *suite, n int) *scenario {
	t.Helper()
	f := newScenario(t, b)
	f.n = n
	f.lf.Write(n)
	f.lf.Close()
	return f
}

// checkpointLines reads the agent's checkpoint file and returns the committed offset of the
// entry for path (its current name), in lines; 0 if there is none yet.
func checkpointLines(t *testing.T, stateDir, path string) int64 {
	t.Helper()
	return checkpointOffset(t, stateDir, path) / lineLen
}

// checkpointOffset returns the committed offset of path in bytes; 0 if there is none yet.
func checkpointOffset(t *testing.T, stateDir, path string) int64 {
	t.Helper()
	off, err := testkit.CheckpointOffset(stateDir, path)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// checkpointsCover reports whether the checkpoint of every file in paths is at the file's end:
// the agent has every line of them acknowledged.
func checkpointsCover(t *testing.T, stateDir string, paths []string) (bool, string) {
	t.Helper()
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return false, err.Error()
		}
		if off := checkpointOffset(t, stateDir, p); off != fi.Size() {
			return false, fmt.Sprintf("%s: checkpoint at %d of %d bytes", p, off, fi.Size())
		}
	}
	return true, ""
}

// ---------------------------------------------------------------------------------------------
// Reading Kafka.

// kafkaAccess reads a cluster: the suite broker through its SASL listener (which the toxics do
// not touch), or kfake directly.
type kafkaAccess struct {
	seeds []string
	opts  []kgo.Opt
}

func (k kafkaAccess) client(t *testing.T, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(k.seeds...),
		kgo.RequestTimeoutOverhead(5 * time.Second), kgo.RetryTimeout(10 * time.Second)}, k.opts...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// endOffsets returns the sum of the topic's partitions' end offsets (records written, when the
// topic started empty).
func (k kafkaAccess) endOffsets(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := lo.Error(); err != nil {
		return 0, err
	}
	var sum int64
	lo.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, nil
}

// offsetWatcher polls a topic's end offsets.
type offsetWatcher struct {
	t     *testing.T
	k     kafkaAccess
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
}

func (k kafkaAccess) watch(t *testing.T, topic string) *offsetWatcher {
	cl := k.client(t)
	t.Cleanup(cl.Close)
	return &offsetWatcher{t: t, k: k, cl: cl, adm: kadm.NewClient(cl), topic: topic}
}

// get returns the records in the topic now, or -1 if the cluster did not answer.
func (w *offsetWatcher) get() int64 {
	n, err := w.k.endOffsets(context.Background(), w.adm, w.topic)
	if err != nil {
		return -1
	}
	return n
}

// waitAtLeast waits until the topic holds at least n records and returns when that was seen.
func (w *offsetWatcher) waitAtLeast(n int64, timeout time.Duration, a *agentProc) time.Time {
	w.t.Helper()
	var last int64
	waitFor(w.t, timeout, 20*time.Millisecond, func() bool { last = w.get(); return last >= n },
		func() string {
			s := fmt.Sprintf("%d of %d records in %s", last, n, w.topic)
			if a != nil {
				s += "; agent log:\n" + a.logTail()
			}
			return s
		})
	return time.Now()
}

// reached waits until the topic holds at least n records; false if it did not within timeout.
func (w *offsetWatcher) reached(n int64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if w.get() >= n {
			return time.Now(), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, false
}

// settle waits until the end offsets stop moving for 500 ms (after a crash: what was in flight
// has landed) and returns them.
func (w *offsetWatcher) settle(timeout time.Duration) int64 {
	w.t.Helper()
	last, since := int64(-2), time.Now()
	waitFor(w.t, timeout, 50*time.Millisecond, func() bool {
		n := w.get()
		if n != last || n < 0 {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= 500*time.Millisecond
	}, func() string { return fmt.Sprintf("end offsets of %s still moving (%d)", w.topic, last) })
	return last
}

// lineCount is what a topic holds of line-0 .. line-(n-1). torn counts records that are a
// strict prefix of a numbered line (a partial line sent as a record); they do not count as the
// line delivered.
type lineCount struct {
	records, distinct, lost, dup int64
	torn                         int64 // a strict prefix of a numbered line: a partial line sent as a record
	spliced                      int64 // starts as numbered line i but goes on with other bytes: a corrupt record
}

// countLines reads the whole topic and counts the numbered lines: lost are the lines of
// 0..n-1 never seen, dup the extra copies. Records that are not numbered lines fail the test.
func (k kafkaAccess) countLines(t *testing.T, topic string, n int) lineCount {
	t.Helper()
	tl := newTally(n)
	k.consume(t, topic, func(r *kgo.Record) { tl.add(t, r.Value) })
	return tl.result()
}

// tally counts numbered lines 0..n-1 as records arrive.
type tally struct {
	seen []uint16
	c    lineCount
}

func newTally(n int) *tally { return &tally{seen: make([]uint16, n)} }

// add counts one record. Records that are not numbered lines fail the test.
func (tl *tally) add(t *testing.T, v []byte) {
	t.Helper()
	n, c := len(tl.seen), &tl.c
	c.records++
	if len(v) < 14 {
		if isLinePrefix(v) {
			c.torn++
			return
		}
		t.Fatalf("unexpected record %.80q", v)
	}
	if !bytes.HasPrefix(v, []byte("line-")) {
		t.Fatalf("unexpected record %.80q", v)
	}
	i, err := strconv.Atoi(string(v[5:14]))
	if err != nil || i < 0 || i >= n {
		t.Fatalf("unexpected record %.80q (lines 0..%d expected)", v, n-1)
	}
	if want := testkit.NumberedLine(nil, i, lineLen); len(v) != lineLen-1 || !bytes.Equal(v, want[:lineLen-1]) {
		if len(v) < lineLen-1 && bytes.HasPrefix(want, v) {
			c.torn++
			if c.torn <= 3 {
				t.Logf("torn record (a partial line): %q", v)
			}
			return
		}
		c.spliced++
		if c.spliced <= 3 {
			t.Logf("spliced record (starts as line %d, goes on with other bytes): %q", i, v)
		}
		return
	}
	tl.seen[i]++
}

// result counts the lines lost (never seen) and duplicated (extra copies).
func (tl *tally) result() lineCount {
	c := tl.c
	for _, s := range tl.seen {
		if s == 0 {
			c.lost++
		} else {
			c.distinct++
			c.dup += int64(s) - 1
		}
	}
	return c
}

// isLinePrefix reports whether v (shorter than "line-" and nine digits) starts some numbered line.
func isLinePrefix(v []byte) bool {
	for i, c := range v {
		if i < 5 && c != "line-"[i] || i >= 5 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// consume reads every record of topic, from the start to the end offsets the cluster agrees on
// at the call (settledEndOffsets).
func (k kafkaAccess) consume(t *testing.T, topic string, each func(*kgo.Record)) {
	t.Helper()
	admCl := k.client(t)
	defer admCl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ends := k.settledEndOffsets(t, ctx, admCl, topic)
	want := map[int32]int64{}
	for p, e := range ends {
		if e.offset > 0 {
			want[p] = e.offset
		}
	}
	if len(want) == 0 {
		return
	}
	k.readBack(t, ctx, topic, "", "end", want, func(r *kgo.Record) bool {
		end, ok := want[r.Partition]
		if !ok || r.Offset >= end {
			return false
		}
		each(r)
		return r.Offset+1 >= end
	})
}

// endOffset is a partition's end offset (its high watermark) as its leader gave it, with the
// leader and the leader epoch it answered under.
type endOffset struct {
	offset        int64
	leader, epoch int32
}

// settledEndOffsets returns topic's end offsets once the cluster agrees on them. One answer to
// ListOffsets is not enough right after a fault: a leader paused past its session that has just
// resumed still believes it leads until it reads the metadata log, and answers from a log the
// new leader has gone past, so a read-back to its end offsets would count the records after it
// as lost. So: every broker's metadata must name the same leader and leader epoch for every
// partition; the leader is asked with that epoch as its current one (a broker that no longer
// leads at it refuses, FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER, rather than answer); and
// two such rounds half a second apart must give the same offsets. What each round saw is logged
// when it does not settle at once: the run's evidence.
func (k kafkaAccess) settledEndOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) map[int32]endOffset {
	t.Helper()
	var last map[int32]endOffset
	for round := 1; ; round++ {
		cur, err := leaderEndOffsets(ctx, cl, topic)
		switch {
		case err != nil:
			t.Logf("end offsets of %s, round %d: %v", topic, round, err)
		case last != nil && equalEnds(cur, last):
			if round > 2 {
				t.Logf("end offsets of %s settled in round %d: %v", topic, round, cur)
			}
			return cur
		case last != nil:
			t.Logf("end offsets of %s, round %d: %v, then %v: asking again", topic, round, last, cur)
		}
		if err == nil {
			last = cur
		}
		select {
		case <-ctx.Done():
			t.Fatalf("end offsets of %s did not settle: last %v, error %v", topic, last, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func equalEnds(a, b map[int32]endOffset) bool {
	if len(a) != len(b) {
		return false
	}
	for p, e := range a {
		if b[p] != e {
			return false
		}
	}
	return true
}

// leaderEndOffsets asks every broker for topic's metadata and, when they all name the same
// leader and epoch for each partition, asks each leader for its partitions' end offsets under
// that epoch.
func leaderEndOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]endOffset, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mdReq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mdReq.Topics = append(mdReq.Topics, mt)
	first, err := mdReq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	views := map[int32]map[int32]endOffset{} // broker -> partition -> leader and epoch
	for _, b := range first.Brokers {
		resp, err := mdReq.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return nil, fmt.Errorf("metadata from broker %d: %w", b.NodeID, err)
		}
		view := map[int32]endOffset{}
		for _, rt := range resp.Topics {
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				return nil, fmt.Errorf("metadata from broker %d: %w", b.NodeID, err)
			}
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil || rp.Leader < 0 {
					return nil, fmt.Errorf("metadata from broker %d: partition %d: leader %d, %v", b.NodeID, rp.Partition, rp.Leader, err)
				}
				view[rp.Partition] = endOffset{offset: -1, leader: rp.Leader, epoch: rp.LeaderEpoch}
			}
		}
		views[b.NodeID] = view
	}
	var agreed map[int32]endOffset
	for node, view := range views {
		if agreed == nil {
			agreed = view
		} else if !equalEnds(agreed, view) {
			return nil, fmt.Errorf("the brokers disagree on the leaders: broker %d says %v, another %v", node, view, agreed)
		}
	}
	byLeader := map[int32][]int32{}
	for p, e := range agreed {
		byLeader[e.leader] = append(byLeader[e.leader], p)
	}
	out := map[int32]endOffset{}
	for leader, parts := range byLeader {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, agreed[p].epoch, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return nil, fmt.Errorf("end offsets from leader %d: %w", leader, err)
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return nil, fmt.Errorf("end offset of partition %d from leader %d (epoch %d): %w", rp.Partition, leader, agreed[rp.Partition].epoch, err)
				}
				out[rp.Partition] = endOffset{offset: rp.Offset, leader: leader, epoch: agreed[rp.Partition].epoch}
			}
		}
	}
	if len(out) != len(agreed) {
		return nil, fmt.Errorf("end offsets of %d of %d partitions", len(out), len(agreed))
	}
	return out, nil
}

// readBack reads topic from the start (opts added) until no partition is left in want: take
// gets every record and says whether it was its partition's last. At ctx's deadline it fails
// the test: the topic not read back (how: at which isolation level) to each partition's goal.
func (k kafkaAccess) readBack(t *testing.T, ctx context.Context, topic, how, goal string, want map[int32]int64,
	take func(*kgo.Record) (last bool), opts ...kgo.Opt) {
	t.Helper()
	cl := k.client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(16 << 20)}, opts...)...)
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back%s: %v (%d partitions not read to their %s)", topic, how, ctx.Err(), len(want), goal)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if take(r) {
				delete(want, r.Partition)
			}
		})
	}
}

// values reads every record value of topic.
func (k kafkaAccess) values(t *testing.T, topic string) [][]byte {
	t.Helper()
	var out [][]byte
	k.consume(t, topic, func(r *kgo.Record) { out = append(out, r.Value) })
	return out
}

// ---------------------------------------------------------------------------------------------
// Ports.

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// saslPlain is the suite broker's SASL user for reading.
func saslPlain(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// lines splits b into its lines (without newlines).
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
