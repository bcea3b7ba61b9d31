package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// This file is the transactional part of the Java TransactionManager: the state machine, the
// queue of transactional requests the sender goroutine sends one at a time (FindCoordinator,
// InitProducerId, AddPartitionsToTxn, EndTxn) and their response handlers, and the Producer's
// transactional methods that hand work to the sender and wait.

// txnState is Java's TransactionManager.State.
type txnState int8

const (
	txnUninitialized txnState = iota
	txnInitializing
	txnReady
	txnInTransaction
	txnCommitting
	txnAborting
	txnAbortableError
	txnFatalError
)

var txnStateNames = [...]string{"UNINITIALIZED", "INITIALIZING", "READY", "IN_TRANSACTION",
	"COMMITTING_TRANSACTION", "ABORTING_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR"}

func (s txnState) String() string { return txnStateNames[s] }

// canTransitionTo is Java's State.isTransitionValid. ABORTABLE_ERROR admits only an abort;
// FATAL_ERROR admits nothing.
func (s txnState) canTransitionTo(target txnState) bool {
	switch target {
	case txnInitializing:
		// From ABORTING_TRANSACTION when an abort ends with an epoch bump.
		return s == txnUninitialized || s == txnAborting
	case txnReady:
		return s == txnInitializing || s == txnCommitting || s == txnAborting
	case txnInTransaction:
		return s == txnReady
	case txnCommitting:
		return s == txnInTransaction
	case txnAborting:
		return s == txnInTransaction || s == txnAbortableError
	case txnAbortableError:
		return s == txnInTransaction || s == txnCommitting || s == txnAbortableError
	case txnFatalError:
		return true
	}
	return false
}

// txnRequestKind orders the queue as Java's Priority does: a coordinator lookup goes first, a
// producer id next, partitions before the EndTxn that must follow them, and the epoch bump that
// ends an abort last.
type txnRequestKind int8

const (
	reqFindCoordinator txnRequestKind = iota
	reqInitProducerID
	reqAddPartitions
	reqEndTxn
	reqEpochBump
)

func (k txnRequestKind) String() string {
	return [...]string{"FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "EndTxn", "InitProducerId"}[k]
}

// txnRequest is one queued transactional request (Java's TxnRequestHandler).
type txnRequest struct {
	kind       txnRequestKind
	commit     bool                      // EndTxn: commit or abort
	partitions []metadata.TopicPartition // AddPartitionsToTxn
	result     *txnResult                // the caller waiting on it; nil for internal requests
	notBefore  time.Time                 // retry backoff
}

// txnResult is what a transactional method waits for (Java's TransactionalRequestResult).
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

// isTransactional reports whether transactional.id is set. Safe on a nil manager.
func (t *transactionManager) isTransactional() bool { return t != nil && t.transactionalID != "" }

// maybeFailLocked is Java's maybeFailWithError: after an error only abort (abortable) or
// nothing (fatal) is allowed.
func (t *transactionManager) maybeFailLocked() error {
	switch t.state {
	case txnAbortableError:
		return &TransactionAbortableError{Cause: t.lastErr}
	case txnFatalError:
		return t.lastErr
	}
	return nil
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
	if r, err := t.cachedResultLocked("InitTransactions", txnInitializing); r != nil || err != nil {
		return r, err
	}
	if err := t.maybeFailLocked(); err != nil {
		return nil, err
	}
	if !t.state.canTransitionTo(txnInitializing) {
		return nil, &TransactionStateError{Op: "InitTransactions", State: t.state.String()}
	}
	t.state = txnInitializing
	r := newTxnResult("InitTransactions")
	t.enqueueLocked(&txnRequest{kind: reqInitProducerID, result: r})
	t.setPendingLocked(r, txnInitializing)
	return r, nil
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
	if r, err := t.cachedResultLocked("CommitTransaction", txnCommitting); r != nil || err != nil {
		return r, err
	}
	if err := t.maybeFailLocked(); err != nil {
		return nil, err
	}
	if !t.state.canTransitionTo(txnCommitting) {
		return nil, &TransactionStateError{Op: "CommitTransaction", State: t.state.String()}
	}
	t.state = txnCommitting
	r := newTxnResult("CommitTransaction")
	t.enqueueLocked(&txnRequest{kind: reqEndTxn, commit: true, result: r})
	t.setPendingLocked(r, txnCommitting)
	return r, nil
}

// beginAbort moves to ABORTING_TRANSACTION: the sender drops what was never sent, waits for what
// is in flight, then sends EndTxn(abort).
func (t *transactionManager) beginAbort() (*txnResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.beginAbortLocked()
}

func (t *transactionManager) beginAbortLocked() (*txnResult, error) {
	if r, err := t.cachedResultLocked("AbortTransaction", txnAborting); r != nil || err != nil {
		return r, err
	}
	if t.state != txnAbortableError {
		if err := t.maybeFailLocked(); err != nil {
			return nil, err
		}
	}
	if !t.state.canTransitionTo(txnAborting) {
		return nil, &TransactionStateError{Op: "AbortTransaction", State: t.state.String()}
	}
	t.state = txnAborting
	clear(t.newPartitions) // nothing more is sent in this transaction
	r := newTxnResult("AbortTransaction")
	t.enqueueLocked(&txnRequest{kind: reqEndTxn, commit: false, result: r})
	t.setPendingLocked(r, txnAborting)
	return r, nil
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

// isSendToPartitionAllowed is Java's: a transaction's batch may go only to a partition the
// coordinator has added.
func (t *transactionManager) isSendToPartitionAllowed(tp metadata.TopicPartition) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == txnFatalError {
		return false
	}
	_, ok := t.partitionsInTxn[tp]
	return ok
}

// hasOngoingTransaction reports whether Close must abort before it stops.
func (t *transactionManager) hasOngoingTransaction() bool {
	if !t.isTransactional() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case txnInTransaction, txnCommitting, txnAborting, txnAbortableError:
		return true
	}
	return false
}

// takeCompletedLocally reports, once, that nextRequest ended a transaction locally.
func (t *transactionManager) takeCompletedLocally() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	done := t.completedLocally
	t.completedLocally = false
	return done
}

// hasPendingRequests reports whether a transactional request is queued or in flight.
func (t *transactionManager) hasPendingRequests() bool {
	if !t.isTransactional() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.txnInFlight || len(t.queue) > 0 || len(t.newPartitions) > 0
}

// abortOnClose begins an abort of an open transaction when the producer closes (Java's Sender
// does the same), unless it is already committing or aborting. It reports whether the
// transaction is ending, so that Close keeps running the sender for it.
func (t *transactionManager) abortOnClose() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == txnCommitting || t.state == txnAborting {
		return true
	}
	// A call that timed out earlier no longer has anyone to wait for it.
	t.pendingResult = nil
	if _, err := t.beginAbortLocked(); err != nil {
		return false
	}
	t.pendingResult = nil
	return true
}

// undrainedAbortError is the error queued batches fail with while the transaction is being
// aborted or must be; nil otherwise.
func (t *transactionManager) undrainedAbortError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case txnAborting:
		if t.lastErr != nil {
			return fmt.Errorf("%w: %w", ErrTransactionAborted, t.lastErr)
		}
		return fmt.Errorf("%w before the record was sent", ErrTransactionAborted)
	case txnAbortableError:
		return fmt.Errorf("%w: %w", ErrTransactionAborted, t.lastErr)
	}
	return nil
}

// enqueueLocked inserts r after every queued request of the same or a higher priority.
func (t *transactionManager) enqueueLocked(r *txnRequest) {
	i := len(t.queue)
	for i > 0 && t.queue[i-1].kind > r.kind {
		i--
	}
	t.queue = slices.Insert(t.queue, i, r)
}

// requeue puts r back to be sent again no earlier than backoff from now.
func (t *transactionManager) requeue(r *txnRequest, now time.Time, backoff time.Duration) {
	r.notBefore = now.Add(backoff)
	t.mu.Lock()
	t.enqueueLocked(r)
	t.mu.Unlock()
}

// lookupCoordinator forgets the coordinator and queues a FindCoordinator, once.
func (t *transactionManager) lookupCoordinator() {
	t.coordinator = nil
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.queue {
		if r.kind == reqFindCoordinator {
			return
		}
	}
	t.enqueueLocked(&txnRequest{kind: reqFindCoordinator})
}

// nextRequest is Java's nextRequest: the request to send now, or nil. New partitions become an
// AddPartitionsToTxn first. EndTxn waits until no batch is incomplete (hasIncomplete), so the
// commit covers every record; after an abortable error, queued requests fail with it. An
// EndTxn for a transaction the coordinator never heard of (no partition added) completes
// locally. wait is how long until the head of the queue may go, when it is in backoff.
func (t *transactionManager) nextRequest(hasIncomplete bool, now time.Time) (r *txnRequest, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.newPartitions) > 0 {
		add := &txnRequest{kind: reqAddPartitions}
		for tp := range t.newPartitions {
			t.pendingPartitions[tp] = struct{}{}
		}
		clear(t.newPartitions)
		for tp := range t.pendingPartitions {
			add.partitions = append(add.partitions, tp)
		}
		slices.SortFunc(add.partitions, func(a, b metadata.TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition) - int(b.Partition)
		})
		// Only one AddPartitionsToTxn is queued: it carries every pending partition.
		t.queue = slices.DeleteFunc(t.queue, func(q *txnRequest) bool { return q.kind == reqAddPartitions })
		t.enqueueLocked(add)
	}
	for len(t.queue) > 0 {
		r = t.queue[0]
		if r.kind == reqEndTxn && hasIncomplete {
			return nil, 0
		}
		if d := r.notBefore.Sub(now); d > 0 {
			return nil, d
		}
		t.queue = t.queue[1:]
		if t.state == txnAbortableError && r.kind != reqFindCoordinator {
			r.result.complete(&TransactionAbortableError{Cause: t.lastErr})
			if t.pendingResult == r.result {
				// The caller sees the failure; it is no reason to refuse the abort that follows.
				t.pendingResult = nil
			}
			return nil, 0
		}
		if r.kind == reqEndTxn && !t.transactionStarted {
			t.completeTransactionLocked(r.result)
			t.completedLocally = true
			continue
		}
		return r, 0
	}
	return nil, 0
}

// completeTransactionLocked is Java's completeTransaction: the transaction is over; the next
// begins with no partitions. After an abort that needs an epoch bump (a broken sequence), the
// bump runs first and completes the caller's result.
func (t *transactionManager) completeTransactionLocked(result *txnResult) {
	t.transactionStarted = false
	clear(t.newPartitions)
	clear(t.pendingPartitions)
	clear(t.partitionsInTxn)
	if t.epochBumpRequired {
		t.state = txnInitializing
		// The caller's AbortTransaction waits on result until the bump is done (a repeated
		// AbortTransaction finds it as the pending abort).
		t.enqueueLocked(&txnRequest{kind: reqEpochBump, result: result})
		return
	}
	t.state = txnReady
	t.lastErr = nil
	result.complete(nil)
}

// buildRequest builds the wire request for r with the current producer id and epoch.
func (t *transactionManager) buildRequest(r *txnRequest) kmsg.Request {
	switch r.kind {
	case reqFindCoordinator:
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1 // TRANSACTION
		req.CoordinatorKey = t.transactionalID
		req.CoordinatorKeys = []string{t.transactionalID}
		return req
	case reqInitProducerID, reqEpochBump:
		req := kmsg.NewPtrInitProducerIDRequest()
		id := t.transactionalID
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = t.txnTimeoutMs
		if r.kind == reqEpochBump {
			// KIP-360: with the current id and epoch the coordinator bumps the epoch instead of
			// fencing us.
			req.ProducerID, req.ProducerEpoch = t.producerID, t.producerEpoch
		}
		return req
	case reqAddPartitions:
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = t.transactionalID
		req.ProducerID, req.ProducerEpoch = t.producerID, t.producerEpoch
		for _, tp := range r.partitions {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			last := &req.Topics[len(req.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
		return req
	default: // reqEndTxn
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = t.transactionalID
		req.ProducerID, req.ProducerEpoch = t.producerID, t.producerEpoch
		req.Commit = r.commit
		return req
	}
}

// fatalError is Java's transitionToFatalError: the producer can only be closed. The caller
// waiting, every queued request and buffered records (through s.txn.fatal) fail with it.
func (t *transactionManager) fatalError(cause error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fatalErrorLocked(cause)
}

func (t *transactionManager) fatalErrorLocked(cause error) error {
	if t.state == txnFatalError {
		return t.lastErr
	}
	err := &TransactionFatalError{TransactionalID: t.transactionalID, Cause: cause}
	t.state, t.lastErr = txnFatalError, err
	t.fatal = err
	for _, r := range t.queue {
		r.result.complete(err)
	}
	t.queue = nil
	t.pendingResult.complete(err)
	return err
}

// abortableError is Java's transitionToAbortableError: the transaction can only be aborted.
// bump asks for a new epoch at the end of the abort (a broken sequence, KIP-360). An abort
// already under way is not disturbed.
func (t *transactionManager) abortableError(cause error, bump bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abortableErrorLocked(cause, bump)
}

func (t *transactionManager) abortableErrorLocked(cause error, bump bool) {
	if bump {
		t.epochBumpRequired = true
	}
	if t.state == txnAborting || !t.state.canTransitionTo(txnAbortableError) {
		return
	}
	t.state, t.lastErr = txnAbortableError, cause
}

// produceFailed classifies a transactional batch's final failure, after Java's
// maybeTransitionToErrorState: fencing, authorization and an unsupported version are fatal;
// anything else, INVALID_PRODUCER_EPOCH included (KIP-588), makes the transaction abortable,
// and unless the transaction is already ending, its abort bumps the epoch: the failed batch
// left a gap in the partition's sequences that the next transaction must not meet. It returns
// the error the batch's records get.
//
// (OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID always bump, see below.)
func (t *transactionManager) produceFailed(err error) error {
	switch {
	case errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.UnsupportedVersion):
		return t.fatalError(err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Java bumps only outside commit and abort, and otherwise gives the failed batch's
	// sequences to the batches after it. A sequence error says the broker's idea of our
	// sequences is not ours: then the next transaction starts under a new epoch in any case.
	completing := t.state == txnCommitting || t.state == txnAborting
	sequenceBroken := errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID)
	t.abortableErrorLocked(err, !completing || sequenceBroken)
	return err
}

// txnRetriable is Java's "instanceof RetriableException" for a transactional request's error:
// kerr's table, plus CONCURRENT_TRANSACTIONS, which kerr does not mark retriable and Java's
// ConcurrentTransactionsException is.
func txnRetriable(err error) bool {
	return kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions)
}

// handleTxnResponse handles the response to r. Network failures requeue it (looking the
// coordinator up again when r went to it); a version the broker does not support is fatal.
func (t *transactionManager) handleTxnResponse(r *txnRequest, body kmsg.Response, netErr, otherErr error, now time.Time, backoff time.Duration) {
	t.txnInFlight = false
	switch {
	case netErr != nil:
		if r.kind != reqFindCoordinator {
			t.lookupCoordinator()
		}
		t.requeue(r, now, backoff)
		return
	case otherErr != nil:
		t.fatalError(fmt.Errorf("%s: %w", r.kind, otherErr))
		return
	}
	switch b := body.(type) {
	case *kmsg.FindCoordinatorResponse:
		t.handleFindCoordinator(r, b, now, backoff)
	case *kmsg.InitProducerIDResponse:
		t.handleInitProducerID(r, b, now, backoff)
	case *kmsg.AddPartitionsToTxnResponse:
		t.handleAddPartitions(r, b, now, backoff)
	case *kmsg.EndTxnResponse:
		t.handleEndTxn(r, b, now, backoff)
	default:
		t.fatalError(fmt.Errorf("%s: unexpected response %T", r.kind, body))
	}
}

func (t *transactionManager) handleFindCoordinator(r *txnRequest, resp *kmsg.FindCoordinatorResponse, now time.Time, backoff time.Duration) {
	code, msg, node := resp.ErrorCode, resp.ErrorMessage, metadata.Node{ID: resp.NodeID, Host: resp.Host, Port: resp.Port}
	if len(resp.Coordinators) > 0 { // v4+: one entry per key; we ask for one
		c := resp.Coordinators[0]
		code, msg, node = c.ErrorCode, c.ErrorMessage, metadata.Node{ID: c.NodeID, Host: c.Host, Port: c.Port}
	}
	err := kerr.ErrorForCode(code)
	switch {
	case err == nil:
		t.coordinator = &node
		r.result.complete(nil)
	case txnRetriable(err):
		// Java re-enqueues every RetriableException.
		t.requeue(r, now, backoff)
	case errors.Is(err, kerr.TransactionAbortable):
		t.abortableError(fmt.Errorf("finding the transaction coordinator: %w", err), false)
		r.result.complete(err)
	default:
		if msg != nil && *msg != "" {
			err = fmt.Errorf("%w (broker says: %s)", err, *msg)
		}
		t.fatalError(fmt.Errorf("finding the transaction coordinator: %w", err))
	}
}

func (t *transactionManager) handleInitProducerID(r *txnRequest, resp *kmsg.InitProducerIDResponse, now time.Time, backoff time.Duration) {
	err := kerr.ErrorForCode(resp.ErrorCode)
	switch {
	case err == nil:
		// Sequences restart at 0 under the new epoch; nothing is in flight (an init or a bump
		// runs only between transactions).
		t.setProducerIDAndEpoch(resp.ProducerID, resp.ProducerEpoch)
		t.mu.Lock()
		t.state, t.lastErr, t.epochBumpRequired = txnReady, nil, false
		t.mu.Unlock()
		r.result.complete(nil)
	case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable):
		t.lookupCoordinator()
		t.requeue(r, now, backoff)
	case txnRetriable(err):
		// Java re-enqueues every RetriableException; CONCURRENT_TRANSACTIONS among them: the
		// coordinator is still aborting the transaction a previous producer with our
		// transactional.id left open.
		t.requeue(r, now, backoff)
	case errors.Is(err, kerr.TransactionAbortable):
		t.abortableError(fmt.Errorf("InitProducerId: %w", err), false)
		r.result.complete(&TransactionAbortableError{Cause: err})
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		t.fatalError(fmt.Errorf("transaction.timeout.ms=%d: %w", t.txnTimeoutMs, err))
	default:
		// PRODUCER_FENCED and INVALID_PRODUCER_EPOCH (fenced), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
		// CLUSTER_AUTHORIZATION_FAILED and anything unexpected.
		t.fatalError(fmt.Errorf("InitProducerId: %w", err))
	}
}

func (t *transactionManager) handleAddPartitions(r *txnRequest, resp *kmsg.AddPartitionsToTxnResponse, now time.Time, backoff time.Duration) {
	var partitionErrs []string
	var unauthorized []string
	answered := make([]metadata.TopicPartition, 0, len(r.partitions))
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := metadata.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			answered = append(answered, tp)
			err := kerr.ErrorForCode(rp.ErrorCode)
			switch {
			case err == nil:
			case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator):
				t.lookupCoordinator()
				t.requeue(r, now, backoff)
				return
			case errors.Is(err, kerr.ConcurrentTransactions):
				// The previous transaction is still completing. Java retries the first
				// AddPartitionsToTxn of a transaction sooner than retry.backoff.ms.
				t.mu.Lock()
				first := len(t.partitionsInTxn) == 0
				t.mu.Unlock()
				if first {
					backoff = min(backoff, 20*time.Millisecond)
				}
				t.requeue(r, now, backoff)
				return
			case txnRetriable(err):
				// Java re-enqueues every RetriableException (UNKNOWN_TOPIC_OR_PARTITION,
				// COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT, ...).
				t.requeue(r, now, backoff)
				return
			case errors.Is(err, kerr.TransactionAbortable):
				t.abortableError(fmt.Errorf("AddPartitionsToTxn %s: %w", tp, err), false)
				r.result.complete(nil)
				return
			case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced),
				errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.InvalidTxnState):
				t.fatalError(fmt.Errorf("AddPartitionsToTxn %s: %w", tp, err))
				return
			case errors.Is(err, kerr.UnknownProducerID), errors.Is(err, kerr.InvalidProducerIDMapping):
				t.abortableError(fmt.Errorf("AddPartitionsToTxn %s: %w", tp, err), true)
				return
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				unauthorized = append(unauthorized, tp.Topic)
			case errors.Is(err, kerr.OperationNotAttempted):
				// Not tried because another partition of the request failed.
			default:
				partitionErrs = append(partitionErrs, fmt.Sprintf("%s: %v", tp, err))
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Answered partitions leave the pending set whatever the result: after an error the
	// transaction is aborted, and retried batches of partitions that were added must still go.
	for _, tp := range answered {
		delete(t.pendingPartitions, tp)
	}
	switch {
	case len(unauthorized) > 0:
		slices.Sort(unauthorized)
		t.abortableErrorLocked(fmt.Errorf("AddPartitionsToTxn: topics %v: %w", slices.Compact(unauthorized), kerr.TopicAuthorizationFailed), false)
	case len(partitionErrs) > 0:
		t.abortableErrorLocked(fmt.Errorf("AddPartitionsToTxn failed: %s", strings.Join(partitionErrs, "; ")), false)
	default:
		for _, tp := range answered {
			t.partitionsInTxn[tp] = struct{}{}
		}
		t.transactionStarted = true
	}
	r.result.complete(nil)
}

func (t *transactionManager) handleEndTxn(r *txnRequest, resp *kmsg.EndTxnResponse, now time.Time, backoff time.Duration) {
	err := kerr.ErrorForCode(resp.ErrorCode)
	switch {
	case err == nil:
		t.mu.Lock()
		t.completeTransactionLocked(r.result)
		t.mu.Unlock()
	case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator):
		t.lookupCoordinator()
		t.requeue(r, now, backoff)
	case txnRetriable(err):
		// Java re-enqueues every RetriableException.
		t.requeue(r, now, backoff)
	case errors.Is(err, kerr.UnknownProducerID), errors.Is(err, kerr.InvalidProducerIDMapping),
		errors.Is(err, kerr.TransactionAbortable):
		// Java's abortableErrorIfPossible: the transaction must be aborted, and (for a lost
		// producer id) the abort bumps the epoch.
		bump := !errors.Is(err, kerr.TransactionAbortable)
		t.mu.Lock()
		t.abortableErrorLocked(fmt.Errorf("EndTxn: %w", err), bump)
		if t.state == txnCommitting || t.state == txnAborting {
			// An abortable error met while ending: the caller is told and may abort again.
			t.state, t.lastErr = txnAbortableError, fmt.Errorf("EndTxn: %w", err)
		}
		t.mu.Unlock()
		r.result.complete(&TransactionAbortableError{Cause: err})
	default:
		// PRODUCER_FENCED and INVALID_PRODUCER_EPOCH (fenced), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
		// INVALID_TXN_STATE and anything unexpected: the transaction's outcome is the
		// coordinator's now, and this producer cannot go on.
		what := "abort"
		if r.commit {
			what = "commit"
		}
		t.fatalError(fmt.Errorf("EndTxn(%s): %w", what, err))
	}
}

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
	t, err := p.transactions()
	if err != nil {
		return err
	}
	r, err := t.initTransactions()
	if err != nil {
		return err
	}
	p.client.Wakeup()
	return p.awaitTxn(ctx, t, r)
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
	t, err := p.transactions()
	if err != nil {
		return err
	}
	r, err := t.beginAbort()
	if err != nil {
		return err
	}
	p.client.Wakeup()
	return p.awaitTxn(ctx, t, r)
}

// failPending fails every transactional call still waiting and every queued request, when the
// sender stops.
func (t *transactionManager) failPending(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.queue {
		r.result.complete(err)
	}
	t.queue = nil
	t.pendingResult.complete(err)
}
