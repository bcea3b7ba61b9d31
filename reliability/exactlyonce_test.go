package reliability

import (
	"fmt"
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
	tl := newTally(n)
	consumeCommitted(t, k, topic, int(partitions), func(r *kgo.Record) { tl.add(t, r.Value) })
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
	f := newFileScenario(t, b, n)
	topic, path, state, rd, w := f.topic, f.path, f.state, f.rd, f.w
	args := eosArgs(b, topic, path, state)

	a := startAgent(t, nil, nil, args...)
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
		a = f.restart(t, args, cp, written)
	}
	f.finish(t, a)
	total := w.get()
	t.Logf("%d records past the last commit at the kills (upper bound, markers included)", uncommitted)
	c := rd.countCommittedLines(t, topic, 3, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(f.recs)
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
	f := newFileScenario(t, b, n)
	topic, path, state, rd, w := f.topic, f.path, f.state, f.rd, f.w
	a := startAgent(t, nil, nil, eosArgs(b, topic, path, state)...)

	var downs []time.Duration
	for k := 1; k <= kills; k++ {
		w.waitAtLeast(int64(n*k/(kills+1)), 3*time.Minute, a)
		ready, down, before := b.killAndResume(t, w)
		downs = append(downs, down)
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
		f.recs = append(f.recs, acked.Sub(ready))
		t.Logf("kill %d: broker down %v, agent's next record %v after the broker was ready", k,
			down.Round(time.Millisecond), acked.Sub(ready).Round(time.Millisecond))
	}
	f.finish(t, a)
	c := rd.countCommittedLines(t, topic, 3, n)
	rep.counts(int64(n), c)
	rep.Recovery = recoveries(f.recs)
	rep.note("broker down %s (kill to ready)", recoveries(downs))
	if c.lost != 0 || c.dup != 0 || c.torn != 0 || c.spliced != 0 {
		t.Fatalf("read_committed: %d lost, %d duplicated, %d torn, %d spliced", c.lost, c.dup, c.torn, c.spliced)
	}
}
