package reliability

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The exactly-once rows: the agent with --exactly-once through agent and broker crashes, read
// back by franz-go at isolation level read_committed. Every line must be there exactly once.

// eosCommitInterval is the agent's --commit-interval in these scenarios: short, so that the
// crashes land between many commits.
const eosCommitInterval = "300ms"

// eosCommitMaxLines is the agent's --commit-max-lines there: the size bound commits too.
const eosCommitMaxLines = 10000

// eosArgs are the arguments of an exactly-once agent following path, with its own transactional
// id and state topic (derived from topic).
func eosArgs(b *suite, topic, path, state string) []string {
	return tailArgs(b.bootstrap(), topic, path, state, "--exactly-once", "--transactional-id", topic+"-txn",
		"--state-topic", topic+"-state", "--commit-interval", eosCommitInterval, "--commit-max-lines", fmt.Sprint(eosCommitMaxLines))
}

// endOfTest is the value of the sentinel record written to every partition after the agent
// stopped: outside any transaction, so a read_committed reader that has seen it has seen every
// transaction decided before it.
const endOfTest = "end-of-test"

// countCommittedLines writes the sentinel to each of the topic's partitions, then reads the topic
// with franz-go at read_committed (kgo.FetchIsolationLevel(kgo.ReadCommitted())) until every
// partition's sentinel arrived, counting the numbered lines 0..n-1. Aborted records and
// transaction markers are invisible at that level; a line seen twice is a duplicate.
func (k kafkaAccess) countCommittedLines(t *testing.T, topic string, partitions int32, n int) lineCount {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod := k.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer prod.Close()
	want := map[int32]bool{}
	for p := int32(0); p < partitions; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(endOfTest)}).FirstErr(); err != nil {
			t.Fatalf("sentinel to %s/%d: %v", topic, p, err)
		}
		want[p] = true
	}
	cl := k.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	defer cl.Close()
	tl := newTally(n)
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back at read_committed: %v (%d partitions not read to their sentinel)", topic, ctx.Err(), len(want))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == endOfTest {
				delete(want, r.Partition)
				return
			}
			tl.add(t, r.Value)
		})
	}
	return tl.result()
}

// TestExactlyOnceAgentKilled: the exactly-once agent is killed (kill -9) 5 times during a file
// of 1M lines (CI: 200k) and restarted on the same transactional id. Each restart fences the
// killed agent's transaction (the coordinator aborts it) and resumes at the last commit: read
// at read_committed, every line is there once.
func TestExactlyOnceAgentKilled(t *testing.T) {
	b := theBroker(t)
	n := size(1_000_000, 200_000)
	const kills = 5
	rep := report(t, fmt.Sprintf("10. exactly-once: agent kill -9 + restart ×%d during a %s-line file (commit every %s or %s lines; read_committed)", kills, num(int64(n)), eosCommitInterval, num(eosCommitMaxLines)))
	topic := b.newTopic(t, 3)
	dir := t.TempDir()
	path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
	lf := newLineFile(t, path)
	lf.Write(n)
	lf.Close()
	rd := b.reader()
	w := rd.watch(t, topic)
	args := eosArgs(b, topic, path, state)

	a := startAgent(t, nil, nil, args...)
	var recs []time.Duration
	var uncommitted int64
	for k := 1; k <= kills; k++ {
		// Killed right after a commit took the position past k/6 of the file: the agent is
		// then sending the next transaction, which the restart must abort.
		want, before := int64(n*k/(kills+1)), checkpointLines(t, state, path)
		waitFor(t, 3*time.Minute, 5*time.Millisecond, func() bool {
			cp := checkpointLines(t, state, path)
			return cp > before && cp >= want
		},
			func() string { return fmt.Sprintf("no commit past line %d; log:\n%s", want, a.logTail()) })
		// ... and once the next transaction holds lines written after that commit.
		w.waitAtLeast(w.get()+2000, time.Minute, a)
		a.kill9()
		a.checkNoPanic()
		cp := checkpointLines(t, state, path)
		written := w.settle(30 * time.Second)
		t.Logf("kill %d: last commit at line %d; %d records in Kafka (committed, aborted and open ones, and markers)", k, cp, written)
		uncommitted += max(0, written-cp)
		a = startAgent(t, nil, nil, args...)
		started := time.Now()
		if cp < int64(n) {
			acked := w.waitAtLeast(written+1, 2*time.Minute, a)
			recs = append(recs, acked.Sub(started))
		}
	}
	waitCheckpointed(t, state, path, n, a)
	a.stop(time.Minute)
	a.checkNoPanic()
	total := w.get()
	t.Logf("%d records past the last commit at the kills (upper bound, markers included)", uncommitted)
	c := rd.countCommittedLines(t, topic, 3, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(recs)
	rep.note("%s records written in all, markers and the killed agents' open transactions included; read_committed sees each line once",
		num(total))
	if c.lost != 0 || c.dup != 0 || c.torn != 0 || c.spliced != 0 {
		t.Fatalf("read_committed: %d lost, %d duplicated, %d torn, %d spliced", c.lost, c.dup, c.torn, c.spliced)
	}
}

// TestExactlyOnceBrokerKilled: the broker (the transaction coordinator too) is killed (kill -9)
// and resumed on its data 5 times (CI: once) while the exactly-once agent sends a file of 1M lines
// (CI: 100k). The agent rides it out; read at read_committed, every line is there once.
func TestExactlyOnceBrokerKilled(t *testing.T) {
	b := theBroker(t)
	n := size(1_000_000, 100_000)
	kills := size(5, 1) // a broker restart takes about 14 s here
	rep := report(t, fmt.Sprintf("10. exactly-once: broker kill -9 + resume ×%d during a %s-line file (commit every %s or %s lines; read_committed)", kills, num(int64(n)), eosCommitInterval, num(eosCommitMaxLines)))
	topic := b.newTopic(t, 3)
	dir := t.TempDir()
	path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
	lf := newLineFile(t, path)
	lf.Write(n)
	lf.Close()
	rd := b.reader()
	w := rd.watch(t, topic)
	a := startAgent(t, nil, nil, eosArgs(b, topic, path, state)...)

	var recs, downs []time.Duration
	for k := 1; k <= kills; k++ {
		w.waitAtLeast(int64(n*k/(kills+1)), 3*time.Minute, a)
		b.mustRun(t, "kill")
		killed := time.Now()
		b.mustRun(t, "resume")
		ready := time.Now()
		downs = append(downs, ready.Sub(killed))
		var before int64 = -1
		waitFor(t, time.Minute, 10*time.Millisecond, func() bool { before = w.get(); return before >= 0 },
			func() string { return "the resumed broker does not answer" })
		if checkpointLines(t, state, path) >= int64(n) {
			t.Logf("kill %d: the agent had committed everything before the kill", k)
			continue
		}
		stuck := size(2*time.Minute, time.Minute)
		acked, ok := w.reached(before+1, stuck)
		if !ok {
			a.kill9()
			rep.note("after kill %d the agent sent nothing in the %v after the broker was ready: stuck", k, stuck)
			t.Fatalf("kill %d: no new record within %v of the broker being ready; the agent is stuck; log:\n%s", k, stuck, a.logTail())
		}
		if !a.running() {
			t.Fatalf("kill %d: the agent exited; log:\n%s", k, a.logTail())
		}
		recs = append(recs, acked.Sub(ready))
		t.Logf("kill %d: broker down %v, agent's next record %v after the broker was ready", k,
			ready.Sub(killed).Round(time.Millisecond), acked.Sub(ready).Round(time.Millisecond))
	}
	waitCheckpointed(t, state, path, n, a)
	a.stop(time.Minute)
	a.checkNoPanic()
	c := rd.countCommittedLines(t, topic, 3, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(recs)
	rep.note("broker down %s (kill to ready)", recoveries(downs))
	if c.lost != 0 || c.dup != 0 || c.torn != 0 || c.spliced != 0 {
		t.Fatalf("read_committed: %d lost, %d duplicated, %d torn, %d spliced", c.lost, c.dup, c.torn, c.spliced)
	}
}
