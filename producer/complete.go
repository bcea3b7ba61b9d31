package producer

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The way back from the broker, as decide → apply: decideBatch reads an attempt's result and
// what the batch and its partition were when the response was read (batchFacts) and returns an
// outcome, and nothing else; Sender.applyOutcome acts on it in one place. Java's
// Sender.completeBatch and TransactionManager.canRetry decide and act in the same breath;
// their branches are here, in their order, as data.

// batchFacts is everything decideBatch reads: one attempt's result and a snapshot of its batch
// and partition, taken by Sender.factsOf.
type batchFacts struct {
	err            error // the partition's error in the response, or what stands for it; nil: written
	logStartOffset int64 // the partition's log start offset from the response, -1 when unknown

	records  int           // in the batch
	done     bool          // its callbacks already ran (it expired while in flight)
	attempts int           // attempts before this one
	age      time.Duration // since the batch was created

	retries         int
	deliveryTimeout time.Duration

	// The partition's sequence state, for an idempotent producer (transactionManager.sequenceFacts).
	idempotent      bool
	transactional   bool
	baseSequence    int32 // the batch's
	sequenceReset   bool  // the batch's sequences were given again from 0 (an epoch bump)
	lastAcked       int32 // the partition's last acknowledged sequence, -1 for none
	lastAckedOffset int64 // the offset of the partition's last acknowledged record, -1 for none
	unresolved      bool  // an expired batch of the partition may or may not have been written
	unresolvedNext  int32 // the sequence after the unresolved batches
}

// outcomeKind is what becomes of a batch after an attempt.
type outcomeKind uint8

const (
	// outcomeComplete: written; the callbacks get the offset.
	outcomeComplete outcomeKind = iota
	// outcomeDuplicate: DUPLICATE_SEQUENCE_NUMBER, written by an earlier attempt whose response
	// was lost; completed as written, without an offset.
	outcomeDuplicate
	// outcomeSplit: MESSAGE_TOO_LARGE for a batch of several records: its records go back to
	// the queue as smaller batches with the same producer id, epoch and sequences.
	outcomeSplit
	// outcomeRetry: queued again, after the retry backoff.
	outcomeRetry
	// outcomeExpire: retriable, but delivery.timeout.ms has passed; the attempt may have been
	// written, so the partition's sequences are unresolved.
	outcomeExpire
	// outcomeFail: refused for good; the callbacks get the broker's error.
	outcomeFail
)

var outcomeNames = [...]string{"complete", "duplicate", "split", "retry", "expire", "fail"}

func (k outcomeKind) String() string { return outcomeNames[k] }

// seqAction is what a retry does to the partition's sequences first.
type seqAction uint8

const (
	// seqKeep: the batch goes again with the sequences it has.
	seqKeep seqAction = iota
	// seqBumpEpoch: an idempotent producer bumps its epoch and starts the partition again at
	// sequence 0 (requestEpochBumpForPartition).
	seqBumpEpoch
	// seqRestart: a transactional producer whose records the log's retention removed starts the
	// partition at sequence 0 under the same epoch (startSequencesAtBeginning).
	seqRestart
)

var seqActionNames = [...]string{"keep", "bump-epoch", "restart"}

func (a seqAction) String() string { return seqActionNames[a] }

// batchOutcome is decideBatch's answer.
type batchOutcome struct {
	kind outcomeKind
	// seq: outcomeRetry's consequence for the partition's sequences.
	seq seqAction
	// adjust, for outcomeFail: the batch certainly was not written (it failed with retries
	// left), so the batches after it may take its sequences (Java's adjustSequenceNumbers).
	adjust bool
	// refreshMetadata: the error says our idea of the leader is stale (Java's
	// InvalidMetadataException branch).
	refreshMetadata bool
}

// decideBatch is Java's Sender.completeBatch as a decision. It reads f only.
func decideBatch(f batchFacts) batchOutcome {
	if f.err == nil {
		return batchOutcome{kind: outcomeComplete}
	}
	o := batchOutcome{refreshMetadata: needsMetadataRefresh(f.err)}
	switch retry, seq := canRetry(f); {
	case errors.Is(f.err, kerr.MessageTooLarge) && f.records > 1 && !f.done:
		o.kind = outcomeSplit
	case retry:
		o.kind, o.seq = outcomeRetry, seq
	case errors.Is(f.err, kerr.DuplicateSequenceNumber):
		o.kind = outcomeDuplicate
	case !f.done && isRetriable(f.err) && f.age >= f.deliveryTimeout:
		// Only delivery.timeout.ms stopped the retry: an expiry, handled as Sender.expire
		// handles an in-flight batch (Java's sendProducerData: failBatch without adjusting
		// sequences, then markSequenceUnresolved). The attempt that ended with a disconnect, a
		// request timeout or a retriable code such as REQUEST_TIMED_OUT may have been written,
		// so the partition's sequences stay unresolved until its other batches are done, and
		// only a gap then confirmed bumps the epoch. Java's completeBatch differs: it fails the
		// batch with adjustSequenceNumbers = attempts < retries, i.e. "certainly not written",
		// and for an idempotent producer that bumps the epoch at once and re-stamps the
		// partition's other unfinished batches, whose retries the broker then cannot recognise
		// as duplicates of attempts it may already have written.
		o.kind = outcomeExpire
	default:
		// Sequences are given to later batches only while retries were left: a batch that ran
		// out of them may have been written by an attempt whose answer was lost.
		o.kind, o.adjust = outcomeFail, f.attempts < f.retries
	}
	return o
}

// canRetry is Java's Sender.canRetry with TransactionManager.canRetry: within
// delivery.timeout.ms, under retries, not already done, and an error the producer may retry;
// for an idempotent producer, UNKNOWN_PRODUCER_ID and OUT_OF_ORDER_SEQUENCE_NUMBER are retried
// with the sequence action they need.
func canRetry(f batchFacts) (bool, seqAction) {
	if f.done || f.age >= f.deliveryTimeout || f.attempts >= f.retries {
		return false, seqKeep
	}
	if !f.idempotent {
		return isRetriable(f.err), seqKeep
	}
	switch {
	case errors.Is(f.err, kerr.UnknownProducerID):
		if f.logStartOffset == -1 || f.sequenceReset {
			// The broker will know the log start offset once things settle; or the partition
			// was already started again at 0 and this is one of its batches.
			return true, seqKeep
		}
		if f.lastAckedOffset < f.logStartOffset {
			// Retention removed our records and the producer state with them.
			if f.transactional {
				return true, seqRestart
			}
			return true, seqBumpEpoch
		}
		if !f.transactional {
			return true, seqBumpEpoch
		}
	case errors.Is(f.err, kerr.OutOfOrderSequenceNumber):
		if !f.unresolved && (f.sequenceReset || f.baseSequence-f.lastAcked != 1) {
			// Not the batch the broker expects next (isNextSequence): an earlier one has yet
			// to land.
			return true, seqKeep
		}
		if !f.transactional {
			// A real gap (no unresolved sequence, or this batch comes right after the
			// unresolved one): bump. Otherwise wait and see whether the sequence resolves.
			if !f.unresolved || f.baseSequence == f.unresolvedNext {
				return true, seqBumpEpoch
			}
			return true, seqKeep
		}
	}
	return isRetriable(f.err), seqKeep
}
