package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// This file is the transactional state machine of the Java TransactionManager: the states and
// their transitions, the abortable and fatal errors that move a transaction out of its normal
// course, failing what waits when the producer can go no further, and the questions the
// sender asks about the state (may a partition be drained, must Close abort, what does an
// undrained batch fail with).

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

// fatalError is Java's transitionToFatalError: the producer can only be closed. The caller
// waiting, every queued request and buffered records (through t.fatal) fail with it. Sender
// goroutine only: it sets fatal.
func (t *transactionManager) fatalError(cause error) error {
	t.mu.Lock()
	if t.state != txnFatalError {
		err := &TransactionFatalError{TransactionalID: t.transactionalID, Cause: cause}
		t.state, t.lastErr = txnFatalError, err
		t.failAllLocked(err)
	}
	err := t.lastErr
	t.mu.Unlock()
	t.fatal = err
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

// failPending fails every transactional call still waiting and every queued request, when the
// sender stops (Java's close).
func (t *transactionManager) failPending(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failAllLocked(err)
}

// failAllLocked fails every queued request and the call waiting on the pending result with err:
// nothing more will be sent for them (a fatal error, or the sender stopping).
func (t *transactionManager) failAllLocked(err error) {
	for _, r := range t.queue {
		r.result.complete(err)
	}
	t.queue = nil
	t.pendingResult.complete(err)
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
