package producer

import (
	"sync"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// The transaction manager's methods are in four files by what they do: txn_sequences.go (the
// idempotent producer's sequences), txn_state.go (the transactional state machine),
// txn_requests.go (InitProducerId and the transactional requests, and their handlers) and
// txn_api.go (the transactional methods on the callers' goroutines).

// transactionManager is the idempotent producer's state, after the Java TransactionManager:
// the producer id and epoch from InitProducerId, and per partition (Java's TxnPartitionEntry)
// the id and epoch its sequences belong to, the next sequence number, the last acknowledged one,
// and the batches that carry a sequence and have not completed, in sequence order. It is owned
// by the sender goroutine (Drain, which calls it through accumulator.SequenceSource, runs there
// too) and takes no locks, except for the transactional state (transactions.go) that Send and
// the transactional methods share with the sender goroutine, which mu guards.
//
// A batch keeps the producer id, epoch and sequence it was first sent with for as long as it is
// retried (Java drainBatchesForOneNode): its earlier attempt may have been written, and the
// broker can only recognise the retry as a duplicate by them. Recovery from a sequence gap (a
// batch that failed for good, or expired, after it may have been sent) is by a local epoch bump
// for an idempotent producer (KIP-360, Java bumpIdempotentProducerEpoch): the epoch goes up by
// one without a request, the partitions that caused the bump have their unfinished batches
// rewritten from sequence 0 under the new epoch, and every other partition moves to the new
// epoch on its own once its unfinished batches are done (maybeUpdateProducerIDAndEpoch). No
// partition waits for another. A transactional producer cannot change epoch inside a
// transaction: a failed batch makes the transaction abortable and the abort ends with an epoch
// bump from the coordinator.
type transactionManager struct {
	producerID    int64
	producerEpoch int16

	// bumpNeeded asks the next runOnce to bump an idempotent producer's epoch locally
	// (Java's epochBumpRequired for a producer without transactional.id); rewrite names the
	// partitions whose unfinished batches then start again at sequence 0.
	bumpNeeded bool
	rewrite    map[metadata.TopicPartition]struct{}
	// unresolved holds the partitions where a batch that had been sent expired, with the
	// sequence that would follow it (Java's partitionsWithUnresolvedSequences): whether it was
	// written is unknown until the partition's other batches are done. No new batch is drained
	// there until then.
	unresolved map[metadata.TopicPartition]int32
	// initInFlight is set while an InitProducerId request is outstanding.
	initInFlight bool
	// fatal is set when the broker refuses us a producer id for good; every record fails with it.
	fatal error

	partitions map[metadata.TopicPartition]*partitionSequences

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
	// done, because a batch of the transaction failed (KIP-360 for a transactional producer).
	epochBumpRequired bool
}

// newTransactionManager returns the state of an idempotent producer, transactional when
// transactionalID is not empty.
func newTransactionManager(transactionalID string, txnTimeoutMs int) *transactionManager {
	return &transactionManager{
		producerID:        -1,
		producerEpoch:     -1,
		rewrite:           make(map[metadata.TopicPartition]struct{}),
		unresolved:        make(map[metadata.TopicPartition]int32),
		partitions:        make(map[metadata.TopicPartition]*partitionSequences),
		transactionalID:   transactionalID,
		txnTimeoutMs:      int32(txnTimeoutMs),
		newPartitions:     make(map[metadata.TopicPartition]struct{}),
		pendingPartitions: make(map[metadata.TopicPartition]struct{}),
		partitionsInTxn:   make(map[metadata.TopicPartition]struct{}),
	}
}

// isTransactional reports whether transactional.id is set. Safe on a nil manager.
func (t *transactionManager) isTransactional() bool { return t != nil && t.transactionalID != "" }
