package producer

import (
	"sync"
	"time"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// transactionManager is the Java TransactionManager: the state of an idempotent producer, and
// of a transactional one when transactional.id is set. Its methods are in four files by what
// they do: txn_sequences.go (the producer id and epoch and, per partition, the sequences: Java's
// TxnPartitionEntry), txn_state.go (the transactional state machine and its errors),
// txn_requests.go (InitProducerId and the transactional requests, and their handlers) and
// txn_api.go (the transactional methods, on the callers' goroutines).
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
//
// Every field has one owner, in three groups below: transactionalID and txnTimeoutMs never
// change after newTransactionManager; the sender goroutine alone reads and writes the second
// group, without a lock (Drain and SplitAndReenqueue, which call the manager through
// accumulator.SequenceSource and InFlightTracker, and the requests' callbacks, run there too);
// mu guards the third, the transactional state that Send (maybeAddPartition) and the
// transactional methods share with the sender goroutine. A method whose name ends in Locked
// is called with mu held. A txnRequest in the queue is mu's; the one nextRequest hands out is
// the sender goroutine's until requeue puts it back. A txnResult is safe for concurrent use.
type transactionManager struct {
	// Set once by newTransactionManager; transactionalID is empty for an idempotent-only
	// producer.
	transactionalID string
	txnTimeoutMs    int32

	// The sender goroutine's.
	producerID    int64
	producerEpoch int16
	// partitions holds each partition's sequences (txn_sequences.go).
	partitions map[metadata.TopicPartition]*partitionSequences
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
	// initInFlight is set while an idempotent producer's InitProducerId is outstanding;
	// nextInitAttempt delays the next one after a failure by retry.backoff.ms.
	initInFlight    bool
	nextInitAttempt time.Time
	// initRefused is the authorization error of the last InitProducerId, logged once while it
	// lasts ("" once a producer id is granted).
	initRefused string
	// fatal is set when the producer can go no further: the broker refused an idempotent
	// producer a producer id for good, or a transactional producer reached FATAL_ERROR (then
	// state and lastErr say the same to the callers, under mu). Every record fails with it.
	fatal error
	// coordinator is the transaction coordinator, nil until found; txnInFlight is set while a
	// transactional request is outstanding (they go one at a time, in queue order).
	coordinator *metadata.Node
	txnInFlight bool

	// mu guards the rest.
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
