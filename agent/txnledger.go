package agent

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
)

// txnLedger holds what the lines of the open exactly-once transaction came to until the
// transaction ends. With --exactly-once a line is acknowledged, or dead-lettered, for good only
// when its transaction commits: an abort takes its records back, and the next round reads the
// line again. So its outcome is counted here first; commit adds the counts to the agent's (the
// total, its topic's, the dead letters'), and an aborted transaction's ledger is dropped.
//
// The producer's callbacks (one goroutine: the sender) and the redelivery add to it; the
// committer commits it after Flush, holding the locks that keep lines and dead letters out of
// the transaction, so that it holds exactly the outcomes of the transaction committed.
type txnLedger struct {
	mu          sync.Mutex
	acks        map[ledgerTopic]int64
	deadLetters map[ledgerDeadLetter]int64
	files       map[*filetail.File]*[2]uint64 // acknowledged and dead-lettered lines of each file
}

type ledgerTopic struct {
	in    *input
	topic string
}

type ledgerDeadLetter struct {
	ledgerTopic
	key deadLetterKey
}

func (l *txnLedger) acked(src *lineOrigin, topic string) {
	l.mu.Lock()
	if l.acks == nil {
		l.acks = map[ledgerTopic]int64{}
	}
	l.acks[ledgerTopic{src.in, topic}]++
	l.fileCounts(src.file)[0]++
	l.mu.Unlock()
}

func (l *txnLedger) deadLettered(src *lineOrigin, topic string, key deadLetterKey) {
	l.mu.Lock()
	if l.deadLetters == nil {
		l.deadLetters = map[ledgerDeadLetter]int64{}
	}
	l.deadLetters[ledgerDeadLetter{ledgerTopic{src.in, topic}, key}]++
	l.fileCounts(src.file)[1]++
	l.mu.Unlock()
}

// fileCounts is f's counts. Under mu.
func (l *txnLedger) fileCounts(f *filetail.File) *[2]uint64 {
	if l.files == nil {
		l.files = map[*filetail.File]*[2]uint64{}
	}
	c := l.files[f]
	if c == nil {
		c = new([2]uint64)
		l.files[f] = c
	}
	return c
}

// commit adds the transaction's outcomes to the agent's counts and empties the ledger: the
// transaction committed.
func (l *txnLedger) commit(a *Agent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.acks {
		a.stats.LinesAcked.Add(n)
		k.in.line.rules.CountOutcome(k.topic, linerecord.OutcomeAcked, n)
	}
	for k, n := range l.deadLetters {
		a.redo.countDeadLetter(k.in, k.topic, k.key, n)
	}
	for f, c := range l.files {
		f.CountCommitted(c[0], c[1]) // the tailer counts nothing itself (Config.CommittedOnly)
	}
	clear(l.acks)
	clear(l.deadLetters)
	clear(l.files)
}

// lineUnsent is told of a line of the open transaction that will not be delivered in it: the
// transaction must abort (the commit finds unsent), and the next round reads the line again.
// Nothing is lost, so nothing is counted as failed; the first such line of the round is logged,
// unless it is a consequence of the abort itself.
func (c *txnCommitter) lineUnsent(src *lineOrigin, end int64, err error) {
	c.unsent.Add(1)
	if transactionFailed(err) || errors.Is(err, errRoundEnded) {
		return
	}
	if c.firstUnsent.CompareAndSwap(nil, &err) {
		if f, _ := classify(err, src.templated()); f == fateDeadLetter {
			return // refused by the broker for good: keepPendingDeadLetter said what happens
		}
		c.a.inputLog(src.in).Warn("exactly-once: a line of the open transaction was not delivered: the transaction aborts, and the agent resumes from the last commit (nothing is lost)",
			"source", sourceName(src), "offset", end, "error", err)
	}
}

// unsentCause is the error of the round's first line that was not delivered.
func (c *txnCommitter) unsentCause() error {
	if p := c.firstUnsent.Load(); p != nil {
		return *p
	}
	return errRoundEnded
}

// errRoundEnded is the cause of an abort whose lines were given up without an error of
// their own (the round ended around them).
var errRoundEnded = errors.New("the exactly-once round ended before the line was delivered")

// replayPositions is where each file of an input stood in a round that aborted: the end of the
// last line the round handled (sent, left out or dead-lettered). The next round reads those
// lines again; it counts them as sent again (LinesResent), not as read or sent for the first
// time.
type replayPositions struct {
	mu  sync.Mutex
	end map[filetail.FileKey]*atomic.Int64
}

// of returns file k's position, made at 0 on first use.
func (r *replayPositions) of(k filetail.FileKey) *atomic.Int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end == nil {
		r.end = map[filetail.FileKey]*atomic.Int64{}
	}
	p := r.end[k]
	if p == nil {
		p = new(atomic.Int64)
		r.end[k] = p
	}
	return p
}

// merged returns the furthest of r's and other's positions, per file, as a plain map.
func (r *replayPositions) merged(other map[filetail.FileKey]int64) map[filetail.FileKey]int64 {
	out := make(map[filetail.FileKey]int64, len(other))
	for k, v := range other {
		out[k] = v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.end {
		if v := p.Load(); v > out[k] {
			out[k] = v
		}
	}
	return out
}
