package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// recoveries summarizes recovery times: "mean X, max Y over N".
func recoveries(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("mean %s, max %s (%d×)", secs(sum/time.Duration(len(ds))), secs(slices.Max(ds)), len(ds))
}

// waitCheckpointed waits until the agent's checkpoints.json covers all n lines of path: every
// line acknowledged (or, in exactly-once mode, which writes it after each commit, committed).
func waitCheckpointed(t *testing.T, state, path string, n int, a *agentProc) {
	t.Helper()
	waitFor(t, 3*time.Minute, 100*time.Millisecond, func() bool { return checkpointLines(t, state, path) == int64(n) },
		func() string {
			return fmt.Sprintf("checkpoint at line %d of %d; log:\n%s", checkpointLines(t, state, path), n, a.logTail())
		})
}

// restart starts the agent again after it was killed with inKafka records in the topic and its
// checkpoint at line cp; unless cp covers the file, it records how long the new agent took to
// add a record.
func (f *scenario) restart(t *testing.T, args []string, cp, inKafka int64) *agentProc {
	t.Helper()
	a := startAgent(t, nil, nil, args...)
	started := time.Now()
	if cp < int64(f.n) {
		acked := f.w.waitAtLeast(inKafka+1, 2*time.Minute, a)
		f.recs = append(f.recs, acked.Sub(started))
	}
	return a
}

// finish waits until the checkpoint covers the whole file (every line acknowledged, or
// committed), then stops the agent, which must not have panicked.
func (f *scenario) finish(t *testing.T, a *agentProc) {
	t.Helper()
	waitCheckpointed(t, f.state, f.path, f.n, a)
	a.stop(time.Minute)
	a.checkNoPanic()
}

// killAndResume kills the broker (kill -9) and resumes it on its data. It returns once the
// resumed broker answers: when it was ready, how long it was down (kill to ready) and the
// topic's record count w saw then.
func (s *suite) killAndResume(t *testing.T, w *offsetWatcher) (ready time.Time, down time.Duration, before int64) {
	t.Helper()
	s.mustRun(t, "kill")
	killed := time.Now()
	s.mustRun(t, "resume")
	ready = time.Now()
	before = -1
	waitFor(t, time.Minute, 10*time.Millisecond, func() bool { before = w.get(); return before >= 0 },
		func() string { return "the resumed broker does not answer" })
	return ready, ready.Sub(killed), before
}

// TestBrokerKilled: the broker is killed (kill -9) and resumed on its data 5 times while the
// agent sends a file of 1M lines (CI: 200k). Idempotence: 0 lost, 0 duplicated. Recovery is from
// the broker being ready again to the topic's next new record.
func TestBrokerKilled(t *testing.T) {
	b := theBroker(t)
	n := size(1_000_000, 200_000)
	kills := size(5, 2)
	if k, err := strconv.Atoi(os.Getenv("RELIABILITY_KILLS")); err == nil && k > 0 {
		kills = k // investigation
	}
	rep := report(t, fmt.Sprintf("1. broker kill -9 + resume ×%d during a %s-line file", kills, num(int64(n))))
	f := newFileScenario(t, b, n)
	topic, path, state, rd, w := f.topic, f.path, f.state, f.rd, f.w
	a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, path, state)...)

	var downs []time.Duration
	for k := 1; k <= kills; k++ {
		w.waitAtLeast(int64(n*k/(kills+1)), 3*time.Minute, a)
		ready, down, before := b.killAndResume(t, w)
		downs = append(downs, down)
		if before >= int64(n) {
			t.Logf("kill %d: the agent had sent everything before the kill", k)
			continue
		}
		stuck := size(time.Minute, 30*time.Second) // recovery takes about a second
		acked, ok := w.reached(before+1, stuck)
		if !ok {
			a.kill9()
			c := rd.countLines(t, topic, n)
			rep.counts(int64(n), c)
			rep.Lost = -1 // not lost: still in the file past the checkpoint, but never sent
			rep.note("after kill %d the agent sent nothing in the %v after the broker was ready (%s of %s lines in Kafka): stuck",
				k, stuck, num(c.distinct), num(int64(n)))
			t.Fatalf("kill %d: no new record within %v of the broker being ready; the agent is stuck; log:\n%s", k, stuck, a.logTail())
		}
		f.recs = append(f.recs, acked.Sub(ready))
		t.Logf("kill %d: broker down %v, agent's next record %v after the broker was ready", k,
			down.Round(time.Millisecond), acked.Sub(ready).Round(time.Millisecond))
	}
	// Everything acknowledged: the checkpoint covers the whole file.
	f.finish(t, a)
	c := rd.countLines(t, topic, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(f.recs)
	rep.note("broker down %s (kill to ready)", recoveries(downs))
	if c.lost != 0 || c.dup != 0 {
		t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
	}
}

// TestAgentKilled: the agent is killed (kill -9) 5 times during a file of 1M lines (CI: 200k)
// and restarted on the same state directory. 0 lost; duplicates are the lines that were in
// Kafka past the checkpoint at each crash (acknowledged after the last checkpoint write, or in
// flight), which bounds them.
func TestAgentKilled(t *testing.T) {
	b := theBroker(t)
	n := size(1_000_000, 200_000)
	const kills = 5
	rep := report(t, fmt.Sprintf("2. agent kill -9 + restart ×%d during a %s-line file", kills, num(int64(n))))
	f := newFileScenario(t, b, n)
	topic, path, state, rd, w := f.topic, f.path, f.state, f.rd, f.w
	args := tailArgs(b.bootstrap(), topic, path, state)

	a := startAgent(t, nil, nil, args...)
	var bound int64
	for k := 1; k <= kills; k++ {
		w.waitAtLeast(int64(n*k/(kills+1)), 3*time.Minute, a)
		a.kill9()
		inKafka := w.settle(30 * time.Second)
		cp := checkpointLines(t, state, path)
		bound += inKafka - cp
		t.Logf("kill %d: %d records in Kafka, checkpoint at line %d: up to %d duplicates", k, inKafka, cp, inKafka-cp)
		a.checkNoPanic()
		a = f.restart(t, args, cp, inKafka)
	}
	f.finish(t, a)
	c := rd.countLines(t, topic, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(f.recs)
	rep.note("duplicates bounded by %s (records past the checkpoint at the crashes)", num(bound))
	if c.lost != 0 {
		t.Fatalf("%d lines lost", c.lost)
	}
	if c.dup > bound {
		t.Fatalf("%d duplicates, more than the %d records past the checkpoints at the crashes", c.dup, bound)
	}
}

// TestStopUnderBackpressure: SIGTERM while the producer's buffer is full (the proxy blackholes the
// broker, so reading is paused on a line waiting for buffer memory). The agent must
// stop cleanly: flush what is buffered, save the checkpoints and exit 0; the line it was waiting
// to buffer is not a failed line, only one not read yet. A restart then sends the rest.
func TestStopUnderBackpressure(t *testing.T) {
	if noProxy {
		t.Skip("RELIABILITY_NO_PROXY=1: no proxy to cut the broker off")
	}
	b := theBroker(t)
	n := size(400_000, 100_000)
	rep := report(t, fmt.Sprintf("2. agent SIGTERM while its buffer is full (broker unreachable), then restart; %s-line file", num(int64(n))))
	topic := b.newTopic(t, 3)
	dir := t.TempDir()
	path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
	lf := newLineFile(t, path)
	lf.Write(1000)
	rd := b.reader()
	// --max-in-flight-bytes above buffer.memory: the producer's buffer, not the file read-ahead
	// (whose default stops reading at 2 MiB here), is what fills while the broker is cut off.
	args := tailArgs(b.bootstrap(), topic, path, state, "-X", "buffer.memory=4194304", "-X", "max.block.ms=1000",
		"--max-in-flight-bytes", "16777216")
	a := startAgent(t, nil, nil, args...)
	rd.watch(t, topic).waitAtLeast(1000, time.Minute, a) // flowing before the cut
	b.addToxic(t, `{"name":"bh_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
	b.addToxic(t, `{"name":"bh_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	lf.Write(n - 1000) // far more than buffer.memory holds
	lf.Close()
	removed := false
	defer func() {
		if !removed {
			b.removeToxic(t, "bh_up")
			b.removeToxic(t, "bh_down")
		}
	}()
	waitLog(t, a, "producer buffer full", time.Minute)
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	signalled := time.Now()
	b.removeToxic(t, "bh_up")
	b.removeToxic(t, "bh_down")
	removed = true
	code := a.wait(time.Minute)
	a.checkNoPanic()
	first := lastWords(a)
	took := a.done.Sub(signalled)
	// The rest, from the checkpoint.
	a2 := startAgent(t, nil, nil, args...)
	waitFor(t, 3*time.Minute, 100*time.Millisecond, func() bool { return checkpointLines(t, state, path) == int64(n) },
		func() string { return "checkpoint at the end after the restart; log:\n" + a2.logTail() })
	a2.stop(time.Minute)
	c := rd.countLines(t, topic, n)
	rep.counts(int64(n), c)
	rep.Recovery = "stop " + secs(took)
	if code == 0 {
		rep.note("SIGTERM: exit 0 after %s", secs(took))
	} else {
		rep.note("SIGTERM: exit %d after %s: %q", code, secs(took), first)
	}
	if c.lost != 0 {
		t.Fatalf("%d lines lost", c.lost)
	}
	if code != 0 {
		t.Fatalf("SIGTERM under backpressure: exit %d, %q; log:\n%s", code, first, a.logTail())
	}
}
