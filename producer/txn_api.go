package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// This file is the transactional API: the Producer's InitTransactions, BeginTransaction,
// CommitTransaction and AbortTransaction (Java's KafkaProducer methods), and the transaction
// manager's half they call on the caller's goroutine (Java's initializeTransactions,
// beginTransaction, beginCommit, beginAbort, and maybeAddPartition for Send): each checks and
// moves the state under the manager's lock, queues what the sender goroutine must send, and
// hands back the result the caller waits on.

// transactions returns the transaction manager for a transactional method.
func (p *Producer) transactions() (*transactionManager, error) {
	select {
	case <-p.closing:
		return nil, ErrProducerClosed
	default:
	}
	t := p.sender.txn
	if !t.isTransactional() {
		return nil, ErrNotTransactional
	}
	return t, nil
}

// startAndAwait starts a transactional operation with start, wakes the sender to send what it
// queued, and waits for it (awaitTxn).
func (p *Producer) startAndAwait(ctx context.Context, start func(*transactionManager) (*txnResult, error)) error {
	t, err := p.transactions()
	if err != nil {
		return err
	}
	r, err := start(t)
	if err != nil {
		return err
	}
	p.client.Wakeup()
	return p.awaitTxn(ctx, t, r)
}

// awaitTxn waits for r for at most max.block.ms and never past ctx. When the wait ends first,
// the operation goes on in the sender; calling the same method again waits for it.
func (p *Producer) awaitTxn(ctx context.Context, t *transactionManager, r *txnResult) error {
	timer := time.NewTimer(p.maxBlock)
	defer timer.Stop()
	select {
	case <-r.done:
		t.acknowledge(r)
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w (it goes on: call %s again to wait for it)", r.op, ctx.Err(), r.op)
	case <-timer.C:
		return fmt.Errorf("%s: not done after %d ms (max.block.ms); it goes on: call %s again to wait for it",
			r.op, p.maxBlock.Milliseconds(), r.op)
	case <-p.senderDone:
		select {
		case <-r.done:
			return r.err
		default:
			return fmt.Errorf("%s: %w", r.op, ErrProducerClosed)
		}
	}
}

// InitTransactions registers the producer's transactional.id with its transaction coordinator
// (FindCoordinator, then InitProducerId) and must be called once before any other transactional
// method. It completes any transaction a previous producer with the same transactional.id left
// open (the coordinator aborts it) and fences that producer: its next request fails with
// ErrProducerFenced. It blocks for at most max.block.ms and never past ctx; after a timeout,
// call it again to keep waiting.
func (p *Producer) InitTransactions(ctx context.Context) error {
	return p.startAndAwait(ctx, (*transactionManager).initTransactions)
}

// BeginTransaction starts a transaction: every record sent until CommitTransaction or
// AbortTransaction belongs to it. Send is refused outside a transaction.
func (p *Producer) BeginTransaction() error {
	t, err := p.transactions()
	if err != nil {
		return err
	}
	return t.beginTransaction()
}

// CommitTransaction sends every buffered record of the transaction, waits for all their
// acknowledgements, and then commits (EndTxn): read_committed consumers see the records from
// now on. When a record of the transaction failed, it returns a *TransactionAbortableError and
// the transaction must be aborted; a *TransactionFatalError means only Close is left. It blocks
// for at most max.block.ms and never past ctx; after a timeout, call it again to keep waiting.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	t, err := p.transactions()
	if err != nil {
		return err
	}
	r, err := t.beginCommit()
	if err != nil {
		return err
	}
	// Make every batch of the transaction sendable now rather than after linger.ms; EndTxn waits
	// for all of them in the sender anyway.
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("CommitTransaction: %w (it goes on: call CommitTransaction again to wait for it)", err)
	}
	return p.awaitTxn(ctx, t, r)
}

// AbortTransaction aborts the transaction: records not yet sent fail with ErrTransactionAborted
// (wrapped), records already written stay invisible to read_committed consumers, and the
// producer is ready for BeginTransaction again. It is the way out of a
// *TransactionAbortableError. It blocks for at most max.block.ms and never past ctx.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.startAndAwait(ctx, (*transactionManager).beginAbort)
}

// txnResult is what a transactional method waits for (Java's TransactionalRequestResult). It is
// safe for concurrent use: the sender goroutine completes it, the caller waits on done; err is
// written once, before done is closed, and read only after.
type txnResult struct {
	op   string
	done chan struct{}
	once sync.Once
	err  error
}

func newTxnResult(op string) *txnResult { return &txnResult{op: op, done: make(chan struct{})} }

// complete records the outcome; only the first call counts.
func (r *txnResult) complete(err error) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

// cachedResultLocked is Java's handleCachedTransactionRequestResult: a call that timed out left
// its operation running; calling the same method again waits for that operation rather than
// starting another, and a different method is refused until it has been waited for.
func (t *transactionManager) cachedResultLocked(op string, target txnState) (*txnResult, error) {
	if t.pendingResult == nil {
		return nil, nil
	}
	if t.pendingTarget != target {
		return nil, &TransactionStateError{Op: op, State: t.state.String(),
			Pending: t.pendingResult.op}
	}
	return t.pendingResult, nil
}

func (t *transactionManager) setPendingLocked(r *txnResult, target txnState) {
	t.pendingResult, t.pendingTarget = r, target
}

// acknowledge forgets the cached result once its caller has seen it complete.
func (t *transactionManager) acknowledge(r *txnResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pendingResult == r {
		t.pendingResult = nil
	}
}

// initTransactions queues the InitProducerId that registers the transactional.id.
func (t *transactionManager) initTransactions() (*txnResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.transitionLocked("InitTransactions", txnInitializing, &txnRequest{kind: reqInitProducerID})
}

// beginTransaction is local, as in Java: the coordinator learns of the transaction when its
// first partition is added.
func (t *transactionManager) beginTransaction() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pendingResult != nil {
		return &TransactionStateError{Op: "BeginTransaction", State: t.state.String(), Pending: t.pendingResult.op}
	}
	if err := t.maybeFailLocked(); err != nil {
		return err
	}
	if !t.state.canTransitionTo(txnInTransaction) {
		return &TransactionStateError{Op: "BeginTransaction", State: t.state.String()}
	}
	t.state = txnInTransaction
	return nil
}

// beginCommit moves to COMMITTING_TRANSACTION (Send is refused from now on) and queues the
// EndTxn, which the sender holds back until every batch of the transaction has completed.
func (t *transactionManager) beginCommit() (*txnResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.transitionLocked("CommitTransaction", txnCommitting, &txnRequest{kind: reqEndTxn, commit: true})
}

// beginAbort moves to ABORTING_TRANSACTION: the sender drops what was never sent, waits for what
// is in flight, then sends EndTxn(abort).
func (t *transactionManager) beginAbort() (*txnResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.beginAbortLocked()
}

func (t *transactionManager) beginAbortLocked() (*txnResult, error) {
	return t.transitionLocked("AbortTransaction", txnAborting, &txnRequest{kind: reqEndTxn, commit: false})
}

// transitionLocked is what InitTransactions, CommitTransaction and AbortTransaction share (Java's
// handleCachedTransactionRequestResult, maybeFailWithError, transitionTo and enqueueRequest):
// the same call made again after a timeout waits for the first; otherwise the state must allow
// target, and req is queued with the result its caller waits on.
func (t *transactionManager) transitionLocked(op string, target txnState, req *txnRequest) (*txnResult, error) {
	if r, err := t.cachedResultLocked(op, target); r != nil || err != nil {
		return r, err
	}
	// An abort is the way out of ABORTABLE_ERROR (Java's beginAbort calls maybeFailWithError
	// only in another state); after an error every other call is refused with it.
	if target != txnAborting || t.state != txnAbortableError {
		if err := t.maybeFailLocked(); err != nil {
			return nil, err
		}
	}
	if !t.state.canTransitionTo(target) {
		return nil, &TransactionStateError{Op: op, State: t.state.String()}
	}
	// Java's beginCompletingTransaction: a coordinator that has no mapping for the producer id
	// accepts no EndTxn, so an abort after INVALID_PRODUCER_ID_MAPPING goes straight to
	// InitProducerId with the current id and epoch; the aborted transaction's partitions are
	// forgotten as completeTransaction forgets them, and the sender drops its unsent batches
	// while the state is ABORTING_TRANSACTION, until the new epoch arrives (READY).
	skipEndTxn := target == txnAborting && errors.Is(t.lastErr, kerr.InvalidProducerIDMapping)
	t.state = target
	if target == txnAborting {
		clear(t.newPartitions) // nothing more is sent in this transaction
	}
	if skipEndTxn {
		t.transactionStarted = false
		clear(t.pendingPartitions)
		clear(t.partitionsInTxn)
		t.epochBumpRequired = true
		req = &txnRequest{kind: reqEpochBump}
	}
	req.result = newTxnResult(op)
	t.enqueueLocked(req)
	t.setPendingLocked(req.result, target)
	return req.result, nil
}

// maybeAddPartition is Send's hook (Java's failIfNotReadyForSend and maybeAddPartition): a
// transactional producer sends only inside a transaction, and a partition's batches are drained
// only after AddPartitionsToTxn has added it. It does nothing without transactional.id.
func (t *transactionManager) maybeAddPartition(tp metadata.TopicPartition) error {
	if !t.isTransactional() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.maybeFailLocked(); err != nil {
		return err
	}
	if t.state != txnInTransaction {
		return &TransactionStateError{Op: "Send", State: t.state.String()}
	}
	if _, ok := t.partitionsInTxn[tp]; ok {
		return nil
	}
	if _, ok := t.pendingPartitions[tp]; ok {
		return nil
	}
	t.newPartitions[tp] = struct{}{}
	return nil
}
