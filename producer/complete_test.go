package producer

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDecideBatch is the way back's decisions, one row per branch of Java's
// Sender.completeBatch and TransactionManager.canRetry.
func TestDecideBatch(t *testing.T) {
	// fresh is a batch of 3 records on its first attempt, well inside delivery.timeout.ms.
	fresh := func(err error) batchFacts {
		return batchFacts{err: err, logStartOffset: -1, records: 3, age: time.Second,
			retries: 5, deliveryTimeout: 2 * time.Minute, lastAcked: -1, lastAckedOffset: -1}
	}
	// idem is fresh for an idempotent producer: the batch has sequences 10-12 and the partition's
	// last acknowledged sequence is 9, so the batch is the one the broker expects next.
	idem := func(err error) batchFacts {
		f := fresh(err)
		f.idempotent, f.baseSequence, f.lastAcked, f.lastAckedOffset = true, 10, 9, 100
		return f
	}
	txn := func(err error) batchFacts { f := idem(err); f.transactional = true; return f }
	with := func(f batchFacts, change func(*batchFacts)) batchFacts { change(&f); return f }
	netErr := &networkError{Node: 1, TimedOut: true}
	brokerSays := func(err error) error { return fmt.Errorf("%w (broker says: no)", err) }

	for _, tc := range []struct {
		name string
		f    batchFacts
		want batchOutcome
	}{
		{"written", fresh(nil), batchOutcome{kind: outcomeComplete}},
		{"written after it expired in flight", with(fresh(nil), func(f *batchFacts) { f.done = true }),
			batchOutcome{kind: outcomeComplete}},

		{"too large with several records: split", fresh(kerr.MessageTooLarge), batchOutcome{kind: outcomeSplit}},
		{"too large with one record: fails, not written", with(fresh(kerr.MessageTooLarge), func(f *batchFacts) { f.records = 1 }),
			batchOutcome{kind: outcomeFail, adjust: true}},
		{"too large after it expired: no split", with(fresh(kerr.MessageTooLarge), func(f *batchFacts) { f.done = true }),
			batchOutcome{kind: outcomeFail, adjust: true}},

		{"retriable", fresh(kerr.RequestTimedOut), batchOutcome{kind: outcomeRetry}},
		{"leader moved: retry and refresh", fresh(brokerSays(kerr.NotLeaderForPartition)),
			batchOutcome{kind: outcomeRetry, refreshMetadata: true}},
		{"no response: retry and refresh", fresh(netErr), batchOutcome{kind: outcomeRetry, refreshMetadata: true}},
		{"retriable at delivery.timeout.ms: expires", with(fresh(netErr), func(f *batchFacts) { f.age = 2 * time.Minute }),
			batchOutcome{kind: outcomeExpire, refreshMetadata: true}},
		{"retriable, no retries left: fails, maybe written", with(fresh(kerr.RequestTimedOut), func(f *batchFacts) { f.attempts = 5 }),
			batchOutcome{kind: outcomeFail}},
		{"retriable after it expired in flight: left alone", with(fresh(kerr.RequestTimedOut), func(f *batchFacts) { f.done = true }),
			batchOutcome{kind: outcomeFail, adjust: true}},
		{"refused for good: fails, not written", fresh(kerr.TopicAuthorizationFailed),
			batchOutcome{kind: outcomeFail, adjust: true}},
		{"invalid record: fails", fresh(brokerSays(kerr.InvalidRecord)), batchOutcome{kind: outcomeFail, adjust: true}},

		{"duplicate: delivered", idem(kerr.DuplicateSequenceNumber), batchOutcome{kind: outcomeDuplicate}},
		{"not idempotent: UNKNOWN_PRODUCER_ID fails", fresh(kerr.UnknownProducerID), batchOutcome{kind: outcomeFail, adjust: true}},

		{"UNKNOWN_PRODUCER_ID, log start unknown: retry as is", idem(kerr.UnknownProducerID), batchOutcome{kind: outcomeRetry}},
		{"UNKNOWN_PRODUCER_ID on a reset batch: retry as is",
			with(idem(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset, f.sequenceReset = 500, true }),
			batchOutcome{kind: outcomeRetry}},
		{"UNKNOWN_PRODUCER_ID, retention removed our records: bump",
			with(idem(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset = 500 }),
			batchOutcome{kind: outcomeRetry, seq: seqBumpEpoch}},
		{"UNKNOWN_PRODUCER_ID, retention removed our records, transactional: restart sequences",
			with(txn(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset = 500 }),
			batchOutcome{kind: outcomeRetry, seq: seqRestart}},
		{"UNKNOWN_PRODUCER_ID, records still there: bump",
			with(idem(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset = 50 }),
			batchOutcome{kind: outcomeRetry, seq: seqBumpEpoch}},
		{"UNKNOWN_PRODUCER_ID, records still there, transactional: fails",
			with(txn(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset = 50 }),
			batchOutcome{kind: outcomeFail, adjust: true}},
		{"UNKNOWN_PRODUCER_ID, no retries left: fails, maybe written, no bump here",
			with(idem(kerr.UnknownProducerID), func(f *batchFacts) { f.logStartOffset, f.attempts = 500, 5 }),
			batchOutcome{kind: outcomeFail}},

		{"out of order, an earlier batch yet to land: retry as is",
			with(idem(kerr.OutOfOrderSequenceNumber), func(f *batchFacts) { f.lastAcked = 4 }),
			batchOutcome{kind: outcomeRetry}},
		{"out of order on a reset batch: retry as is",
			with(idem(kerr.OutOfOrderSequenceNumber), func(f *batchFacts) { f.sequenceReset = true }),
			batchOutcome{kind: outcomeRetry}},
		{"out of order, the next expected: a gap, bump", idem(kerr.OutOfOrderSequenceNumber),
			batchOutcome{kind: outcomeRetry, seq: seqBumpEpoch}},
		{"out of order right after the unresolved batches: bump",
			with(idem(kerr.OutOfOrderSequenceNumber), func(f *batchFacts) { f.lastAcked, f.unresolved, f.unresolvedNext = 4, true, 10 }),
			batchOutcome{kind: outcomeRetry, seq: seqBumpEpoch}},
		{"out of order behind unresolved batches: wait and see",
			with(idem(kerr.OutOfOrderSequenceNumber), func(f *batchFacts) { f.lastAcked, f.unresolved, f.unresolvedNext = 4, true, 7 }),
			batchOutcome{kind: outcomeRetry}},
		{"out of order, transactional gap: fails (the transaction aborts)", txn(kerr.OutOfOrderSequenceNumber),
			batchOutcome{kind: outcomeFail, adjust: true}},
		{"out of order, no retries left: fails",
			with(idem(kerr.OutOfOrderSequenceNumber), func(f *batchFacts) { f.attempts = 5 }),
			batchOutcome{kind: outcomeFail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideBatch(tc.f); got != tc.want {
				t.Errorf("decideBatch(%v) = %+v (%v, seq %v), want %+v (%v, seq %v)",
					tc.f.err, got, got.kind, got.seq, tc.want, tc.want.kind, tc.want.seq)
			}
		})
	}
}
