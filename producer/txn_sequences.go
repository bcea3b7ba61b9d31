package producer

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// This file is the idempotent half of the Java TransactionManager, which a transactional
// producer uses too: per partition (Java's TxnPartitionEntry) the producer id and epoch its
// sequences belong to, the next sequence, the last acknowledged one and the batches not yet
// completed; the accumulator's SequenceSource and InFlightTracker; what a batch's completion or
// failure means for the sequences (canRetry, handleCompletedBatch, handleFailedBatch); the
// local epoch bump of an idempotent producer, and unresolved sequences after an expiry.

// partitionSequences is Java's TxnPartitionEntry.
type partitionSequences struct {
	// producerID and epoch are what this partition's sequences belong to; they lag the
	// producer's after a bump until the partition's unfinished batches are done.
	producerID int64
	epoch      int16
	next       int32
	lastAcked  int32 // highest sequence acknowledged under producerID and epoch; -1: none
	// lastAckedOffset is the offset of the last record acknowledged, to tell an
	// UNKNOWN_PRODUCER_ID after retention removed our records from one after lost data.
	lastAckedOffset int64
	// inFlight are the batches with a sequence that have neither completed nor failed: in a
	// request, or queued for a retry. Ascending (producer id, epoch, base sequence).
	inFlight []*accumulator.ProducerBatch
}

var _ accumulator.SequenceSource = (*transactionManager)(nil) // and so its InFlightTracker

// partition returns tp's entry, creating it under the current producer id and epoch.
func (t *transactionManager) partition(tp metadata.TopicPartition) *partitionSequences {
	p := t.partitions[tp]
	if p == nil {
		p = &partitionSequences{producerID: t.producerID, epoch: t.producerEpoch, lastAcked: -1, lastAckedOffset: -1}
		t.partitions[tp] = p
	}
	return p
}

// hasProducerID reports whether batches can be stamped: an id is known.
func (t *transactionManager) hasProducerID() bool { return t.producerID >= 0 }

// ProducerIDAndEpoch implements accumulator.SequenceSource.
func (t *transactionManager) ProducerIDAndEpoch() (int64, int16, bool) {
	return t.producerID, t.producerEpoch, t.hasProducerID()
}

// NextSequence implements accumulator.SequenceSource.
func (t *transactionManager) NextSequence(tp metadata.TopicPartition) int32 {
	return t.partition(tp).next
}

// IncrementSequence implements accumulator.SequenceSource. Sequences wrap to 0 after
// math.MaxInt32, as DefaultRecordBatch.incrementSequence does.
func (t *transactionManager) IncrementSequence(tp metadata.TopicPartition, n int32) {
	p := t.partition(tp)
	p.next = incrementSequence(p.next, n)
}

func incrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// MaybeUpdateProducerIDAndEpoch implements accumulator.SequenceSource (Java's
// maybeUpdateProducerIdAndEpoch): Drain calls it before it stamps tp's next new batch. A
// partition still on an older id or epoch moves to the current one, from sequence 0, once it has
// no unfinished batch left; ShouldStopDrain holds its new batches back until then.
func (t *transactionManager) MaybeUpdateProducerIDAndEpoch(tp metadata.TopicPartition) {
	if t.fatal != nil {
		return
	}
	p := t.partition(tp)
	if t.stale(p) && len(p.inFlight) == 0 {
		t.startSequencesAtBeginning(tp)
	}
}

func (t *transactionManager) stale(p *partitionSequences) bool {
	return p.producerID != t.producerID || p.epoch != t.producerEpoch
}

// AddInFlightBatch implements accumulator.InFlightTracker: Drain reports every batch it gives a
// sequence, SplitAndReenqueue every batch split from one that had a sequence.
func (t *transactionManager) AddInFlightBatch(b *accumulator.ProducerBatch) {
	p := t.partition(b.TopicPartition)
	i, _ := slices.BinarySearchFunc(p.inFlight, b, compareBySequence)
	p.inFlight = slices.Insert(p.inFlight, i, b)
}

// compareBySequence is Java's PRODUCER_BATCH_COMPARATOR: producer id, epoch, base sequence.
func compareBySequence(x, y *accumulator.ProducerBatch) int {
	if c := cmp.Compare(x.ProducerID(), y.ProducerID()); c != 0 {
		return c
	}
	if c := cmp.Compare(x.ProducerEpoch(), y.ProducerEpoch()); c != 0 {
		return c
	}
	return cmp.Compare(x.BaseSequence(), y.BaseSequence())
}

// removeInFlight forgets a batch that completed, failed or was split.
func (t *transactionManager) removeInFlight(b *accumulator.ProducerBatch) {
	p := t.partitions[b.TopicPartition]
	if p == nil {
		return
	}
	if i := slices.Index(p.inFlight, b); i >= 0 {
		p.inFlight = slices.Delete(p.inFlight, i, i+1)
	}
}

func (t *transactionManager) hasInFlight(tp metadata.TopicPartition) bool {
	p := t.partitions[tp]
	return p != nil && len(p.inFlight) > 0
}

// ShouldStopDrain implements accumulator.SequenceSource: Java's
// shouldStopDrainBatchesForPartition, and one rule of ours.
//
//   - A new batch waits while the partition has unfinished batches under an older epoch (a
//     batch at sequence 0 of the new epoch must not reach the broker before them), and while
//     an expired batch's fate is unresolved.
//   - A retried batch (one that has a sequence) is sent only when it is the partition's lowest
//     unfinished sequence, which in effect lowers max.in.flight to 1 while a partition recovers.
//   - Ours: until a partition's first batch under its epoch is acknowledged, only one batch is
//     in flight for it. A broker that has no state for this producer on a partition accepts any
//     first sequence; if that first batch failed (say NOT_LEADER_OR_FOLLOWER right after the topic
//     was created) while the second was written, the first could only ever land after it.
func (t *transactionManager) ShouldStopDrain(tp metadata.TopicPartition, first *accumulator.ProducerBatch) bool {
	if t.transactionalID != "" && !t.isSendToPartitionAllowed(tp) {
		// Not yet added to the transaction by AddPartitionsToTxn (or the producer is fenced).
		return true
	}
	if !t.hasProducerID() {
		return true
	}
	p := t.partitions[tp]
	if !first.HasSequence() {
		if p != nil && len(p.inFlight) > 0 && t.stale(p) {
			return true
		}
		if _, ok := t.unresolved[tp]; ok {
			return true
		}
		return p != nil && len(p.inFlight) > 0 && p.lastAcked < 0 && !t.stale(p)
	}
	return p != nil && len(p.inFlight) > 0 && first.BaseSequence() != p.inFlight[0].BaseSequence()
}

// handleCompletedBatch is Java's: b was written, so its sequences are the broker's too.
func (t *transactionManager) handleCompletedBatch(b *accumulator.ProducerBatch, baseOffset int64) {
	t.removeInFlight(b)
	if !b.HasSequence() {
		return
	}
	p := t.partition(b.TopicPartition)
	if b.ProducerID() != p.producerID || b.ProducerEpoch() != p.epoch {
		// An expired batch of an epoch this partition has left: it says nothing of the new one.
		return
	}
	if last := b.LastSequence(); last > p.lastAcked {
		p.lastAcked = last
	}
	if baseOffset >= 0 {
		p.lastAckedOffset = max(p.lastAckedOffset, baseOffset+int64(b.RecordCount())-1)
	}
}

// handleFailedBatch is Java's: b failed for good with err (its callbacks ran). adjust says that
// b certainly was not written (a non-retriable error with retries left): its sequences can be
// given to the batches after it. Otherwise, or with an error that means a gap, an idempotent
// producer bumps the epoch for the partition.
func (t *transactionManager) handleFailedBatch(b *accumulator.ProducerBatch, err error, adjust bool) {
	t.removeInFlight(b)
	if t.fatal != nil || !b.HasSequence() {
		return
	}
	switch {
	case !t.isTransactional() && (errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID)):
		// A gap in the log: a new epoch starts the partition at sequence 0.
		t.requestEpochBumpForPartition(b.TopicPartition)
	case errors.Is(err, kerr.UnknownProducerID):
		// The broker has no state for us on the partition and takes sequence 0 next.
		delete(t.partitions, b.TopicPartition)
		delete(t.unresolved, b.TopicPartition)
	case adjust && !t.isTransactional():
		t.requestEpochBumpForPartition(b.TopicPartition)
	case adjust:
		t.adjustSequencesDueToFailedBatch(b)
	}
}

// adjustSequencesDueToFailedBatch is Java's: inside a transaction, the batches after a batch
// that was certainly not written take its sequences, so the partition has no gap.
func (t *transactionManager) adjustSequencesDueToFailedBatch(b *accumulator.ProducerBatch) {
	p := t.partitions[b.TopicPartition]
	if p == nil || b.ProducerID() != p.producerID || b.ProducerEpoch() != p.epoch {
		return
	}
	n := int32(b.RecordCount())
	if p.next-n < 0 {
		return // a sequence that wrapped: leave it to the abort's epoch bump
	}
	p.next -= n
	for _, x := range p.inFlight {
		if x.BaseSequence() < b.BaseSequence() {
			continue
		}
		x.ResetProducerState(x.ProducerID(), x.ProducerEpoch(), x.BaseSequence()-n)
	}
	slices.SortFunc(p.inFlight, compareBySequence)
}

// requestEpochBumpForPartition is Java's: the next runOnce bumps the epoch and starts tp again
// at sequence 0.
func (t *transactionManager) requestEpochBumpForPartition(tp metadata.TopicPartition) {
	t.bumpNeeded = true
	t.rewrite[tp] = struct{}{}
}

// bumpIdempotentEpochAndResetIDIfNeeded is Java's bumpIdempotentEpochAndResetIdIfNeeded for a
// producer without transactional.id: the bump is local, and only an exhausted epoch needs a
// new producer id from InitProducerId (which the sender then sends).
func (t *transactionManager) bumpIdempotentEpochAndResetIDIfNeeded() {
	if t.isTransactional() || !t.bumpNeeded || !t.hasProducerID() {
		return
	}
	t.bumpNeeded = false
	if t.producerEpoch == math.MaxInt16 {
		// The rewrite waits for the new id (setProducerIDAndEpoch).
		t.producerID, t.producerEpoch = -1, -1
		return
	}
	t.producerEpoch++
	t.rewritePartitions()
}

// rewritePartitions starts every partition that asked for the bump at sequence 0 under the
// current id and epoch (Java bumpIdempotentProducerEpoch's loop).
func (t *transactionManager) rewritePartitions() {
	for tp := range t.rewrite {
		t.startSequencesAtBeginning(tp)
		delete(t.unresolved, tp)
	}
	clear(t.rewrite)
}

// startSequencesAtBeginning is Java's TxnPartitionEntry.startSequencesAtBeginning: tp's
// unfinished batches get consecutive sequences from 0 under the current id and epoch, in their
// order, and the next new batch follows them.
func (t *transactionManager) startSequencesAtBeginning(tp metadata.TopicPartition) {
	p := t.partition(tp)
	var seq int32
	for _, b := range p.inFlight {
		b.ResetProducerState(t.producerID, t.producerEpoch, seq)
		seq = incrementSequence(seq, int32(b.RecordCount()))
	}
	p.producerID, p.epoch = t.producerID, t.producerEpoch
	p.next, p.lastAcked = seq, -1
}

// isNextSequence reports whether seq is the one the broker expects next on tp (Java's).
func (t *transactionManager) isNextSequence(tp metadata.TopicPartition, seq int32) bool {
	lastAcked := int32(-1)
	if p := t.partitions[tp]; p != nil {
		lastAcked = p.lastAcked
	}
	return seq-lastAcked == 1
}

// markSequenceUnresolved is Java's: b expired after it had been sent, so whether the broker
// has its sequences is unknown.
func (t *transactionManager) markSequenceUnresolved(b *accumulator.ProducerBatch) {
	if !b.HasSequence() {
		return
	}
	next := b.LastSequence() + 1
	if v, ok := t.unresolved[b.TopicPartition]; !ok || next > v {
		t.unresolved[b.TopicPartition] = next
	}
}

// maybeResolveSequences is Java's: once an unresolved partition has no unfinished batch, its
// last acknowledged sequence says whether the expired batches were written. If not, there is a
// gap: an idempotent producer bumps the epoch for the partition; a transactional one must
// abort, and the abort bumps the epoch.
func (t *transactionManager) maybeResolveSequences() {
	for tp := range t.unresolved {
		if t.hasInFlight(tp) {
			continue
		}
		delete(t.unresolved, tp)
		if t.isNextSequence(tp, t.NextSequence(tp)) {
			continue // the expired batches were written after all, or later ones were
		}
		if t.isTransactional() {
			t.abortableError(errors.New("the producer has not received acknowledgement for some records it sent "+
				"and can no longer retry them; it is safe to abort the transaction and continue"), true)
			continue
		}
		t.requestEpochBumpForPartition(tp)
	}
}

// sequenceFacts fills in what decideBatch reads of b's partition (Java's
// TransactionManager.canRetry reads the same state).
func (t *transactionManager) sequenceFacts(b *accumulator.ProducerBatch, f *batchFacts) {
	f.idempotent, f.transactional = true, t.isTransactional()
	f.baseSequence, f.sequenceReset = b.BaseSequence(), b.SequenceHasBeenReset()
	f.lastAcked, f.lastAckedOffset = -1, -1
	if p := t.partitions[b.TopicPartition]; p != nil {
		f.lastAcked, f.lastAckedOffset = p.lastAcked, p.lastAckedOffset
	}
	f.unresolvedNext, f.unresolved = t.unresolved[b.TopicPartition]
}

// retrying applies a retry's sequence action to tp (the side effects of Java's
// TransactionManager.canRetry).
func (t *transactionManager) retrying(tp metadata.TopicPartition, a seqAction) {
	switch a {
	case seqBumpEpoch:
		t.requestEpochBumpForPartition(tp)
	case seqRestart:
		t.startSequencesAtBeginning(tp)
	}
}

// setProducerIDAndEpoch installs the result of InitProducerId. A transactional producer's
// InitProducerId runs between transactions, with nothing unfinished: every partition starts at
// sequence 0 (Java resetSequenceNumbers). An idempotent producer's partitions move to the new
// id one by one as their unfinished batches finish (MaybeUpdateProducerIDAndEpoch), and those
// that asked for the bump that exhausted the epoch start again now.
func (t *transactionManager) setProducerIDAndEpoch(id int64, epoch int16) {
	t.producerID, t.producerEpoch = id, epoch
	if t.isTransactional() {
		clear(t.partitions)
		clear(t.unresolved)
		clear(t.rewrite)
		return
	}
	t.bumpNeeded = false // the new id is the bump
	t.rewritePartitions()
}
