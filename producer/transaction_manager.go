package producer

import (
	"math"
	"slices"
	"sync"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// transactionManager is the idempotent producer's state, after the Java TransactionManager:
// the producer id and epoch from InitProducerId, and per partition the next sequence number and
// the batches in flight in sequence order. It is owned by the sender goroutine (Drain, which calls
// it through accumulator.SequenceSource, runs there too) and takes no locks, except for the
// transactional state (transactions.go) that Send and the transactional methods share with the
// sender goroutine, which mu guards.
//
// Recovery from a broken sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, a split
// batch) is by epoch bump (KIP-360): drain stops, in-flight requests finish, InitProducerId is
// sent with the current id and epoch, and every partition starts again at sequence 0 under the
// new epoch. Batches queued for retry keep their order in the deques and get new sequences at
// their next drain, because their epoch no longer matches.
type transactionManager struct {
	producerID    int64
	producerEpoch int16

	// bumpNeeded stops draining until a new epoch is in place.
	bumpNeeded bool
	// initInFlight is set while an InitProducerId request is outstanding.
	initInFlight bool
	// fatal is set when the broker refuses us a producer id for good; every record fails with it.
	fatal error

	partitions map[metadata.TopicPartition]*partitionSequences
	inFlight   int // batches in flight over all partitions

	// Transactions (transactions.go); transactionalID is empty for an idempotent-only producer
	// and neither it nor txnTimeoutMs changes.
	transactionalID string
	txnTimeoutMs    int32
	// Sender goroutine only: the transaction coordinator (nil until found), and whether a
	// transactional request is outstanding (they go one at a time, in queue order).
	coordinator *metadata.Node
	txnInFlight bool

	// mu guards the rest: Send (maybeAddPartition) and the transactional methods run on the
	// callers' goroutines.
	mu    sync.Mutex
	state txnState
	// lastErr is the abortable or fatal error that put the producer in its error state.
	lastErr error
	queue   []*txnRequest // by kind (priority), then arrival
	// pendingResult is the latest InitTransactions, CommitTransaction or AbortTransaction whose
	// caller has not seen it complete; pendingTarget is the state that call moved to.
	pendingResult *txnResult
	pendingTarget txnState
	// A partition is new (Send met it), then pending (in an AddPartitionsToTxn), then in the
	// transaction (added: its batches may be drained).
	newPartitions      map[metadata.TopicPartition]struct{}
	pendingPartitions  map[metadata.TopicPartition]struct{}
	partitionsInTxn    map[metadata.TopicPartition]struct{}
	transactionStarted bool // a partition was added: EndTxn has something to end
	// completedLocally is set when nextRequest ended a transaction without a request; the
	// sender takes it (takeCompletedLocally) to go round again at once instead of polling.
	completedLocally bool
	// epochBumpRequired asks for InitProducerId with the current id and epoch once the abort is
	// done, because a sequence broke (KIP-360 for a transactional producer).
	epochBumpRequired bool
}

type partitionSequences struct {
	next      int32
	lastAcked int32                        // highest sequence acknowledged under this epoch; -1: none
	inFlight  []*accumulator.ProducerBatch // ascending base sequence
}

var _ accumulator.SequenceSource = (*transactionManager)(nil)

// newTransactionManager returns the state of an idempotent producer, transactional when
// transactionalID is not empty.
func newTransactionManager(transactionalID string, txnTimeoutMs int) *transactionManager {
	return &transactionManager{
		producerID:        -1,
		producerEpoch:     -1,
		partitions:        make(map[metadata.TopicPartition]*partitionSequences),
		transactionalID:   transactionalID,
		txnTimeoutMs:      int32(txnTimeoutMs),
		newPartitions:     make(map[metadata.TopicPartition]struct{}),
		pendingPartitions: make(map[metadata.TopicPartition]struct{}),
		partitionsInTxn:   make(map[metadata.TopicPartition]struct{}),
	}
}

func (t *transactionManager) partition(tp metadata.TopicPartition) *partitionSequences {
	p := t.partitions[tp]
	if p == nil {
		p = &partitionSequences{lastAcked: -1}
		t.partitions[tp] = p
	}
	return p
}

// hasProducerID reports whether batches can be stamped: an id is known and no bump is pending.
func (t *transactionManager) hasProducerID() bool {
	return t.producerID >= 0 && !t.bumpNeeded
}

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
	if p.next > math.MaxInt32-n {
		p.next = n - (math.MaxInt32 - p.next) - 1
		return
	}
	p.next += n
}

// ShouldStopDrain implements accumulator.SequenceSource. Two rules keep the broker's view of a
// partition in sequence order:
//
//   - A retried batch (one that already has a sequence under the current epoch) is sent only when
//     it is the oldest in flight for its partition, which in effect lowers max.in.flight to 1 while
//     a partition recovers (Java's shouldStopDrainBatchesForPartition).
//   - Until the first batch of a partition is acknowledged under the current epoch, only one batch
//     is in flight for it. A broker that has no state for this producer on a partition accepts any
//     first sequence; if that first batch failed (say NOT_LEADER_OR_FOLLOWER right after the topic
//     was created) while the second was written, the first could only ever land after it.
func (t *transactionManager) ShouldStopDrain(tp metadata.TopicPartition, first *accumulator.ProducerBatch) bool {
	if !t.hasProducerID() {
		return true
	}
	if t.transactionalID != "" && !t.isSendToPartitionAllowed(tp) {
		// Not yet added to the transaction by AddPartitionsToTxn (or the producer is fenced).
		return true
	}
	p := t.partitions[tp]
	if p == nil || len(p.inFlight) == 0 {
		return false
	}
	if !t.stampedNow(first) {
		return p.lastAcked < 0
	}
	return first.BaseSequence() != p.inFlight[0].BaseSequence()
}

// acknowledged records that b was written: its sequences are now the broker's too.
func (t *transactionManager) acknowledged(b *accumulator.ProducerBatch) {
	if !t.stampedNow(b) {
		return
	}
	p := t.partition(b.TopicPartition)
	if last := b.LastSequence(); last > p.lastAcked {
		p.lastAcked = last
	}
}

// isNextSequence reports whether b is the batch the broker expects next on its partition
// (Java's isNextSequence): when such a batch is refused as out of order, the broker's sequence
// state and ours truly disagree, and only an epoch bump recovers. A batch further behind is
// refused only because an earlier one has not landed yet, and a plain retry suffices.
func (t *transactionManager) isNextSequence(b *accumulator.ProducerBatch) bool {
	if !t.stampedNow(b) {
		return false
	}
	p := t.partitions[b.TopicPartition]
	if p == nil {
		return b.BaseSequence() == 0
	}
	return b.BaseSequence() == p.lastAcked+1
}

// stampedNow reports whether b carries a sequence under the current producer id and epoch.
func (t *transactionManager) stampedNow(b *accumulator.ProducerBatch) bool {
	return b.HasSequence() && b.ProducerID() == t.producerID && b.ProducerEpoch() == t.producerEpoch
}

// addInFlight records drained batches, keeping each partition's list in sequence order.
func (t *transactionManager) addInFlight(b *accumulator.ProducerBatch) {
	p := t.partition(b.TopicPartition)
	i, _ := slices.BinarySearchFunc(p.inFlight, b.BaseSequence(), func(x *accumulator.ProducerBatch, seq int32) int {
		return int(x.BaseSequence()) - int(seq)
	})
	p.inFlight = slices.Insert(p.inFlight, i, b)
	t.inFlight++
}

// removeInFlight forgets a batch whose request finished (acknowledged, failed or to be retried).
func (t *transactionManager) removeInFlight(b *accumulator.ProducerBatch) {
	p := t.partitions[b.TopicPartition]
	if p == nil {
		return
	}
	if i := slices.Index(p.inFlight, b); i >= 0 {
		p.inFlight = slices.Delete(p.inFlight, i, i+1)
		t.inFlight--
	}
}

// requestEpochBump stops draining; the sender bumps once nothing is in flight.
func (t *transactionManager) requestEpochBump() { t.bumpNeeded = true }

// setProducerIDAndEpoch installs the result of InitProducerId and starts every partition's
// sequence at 0: a new epoch is a new sequence space on the broker. Called only when no batch
// is in flight.
func (t *transactionManager) setProducerIDAndEpoch(id int64, epoch int16) {
	t.producerID, t.producerEpoch = id, epoch
	t.bumpNeeded = false
	// The sender only asks for a new epoch when nothing is in flight, so no batch is tracked here.
	clear(t.partitions)
}
