package producer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// This file is the requests of the Java TransactionManager and their handlers: the queue of
// transactional requests the sender goroutine sends one at a time to the transaction
// coordinator (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn, and the
// InitProducerId that bumps the epoch after an abort), how each is built and how its response
// moves the state machine (txn_state.go); and the InitProducerId of an idempotent producer
// without transactional.id, which goes to any broker outside that queue.

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

// hasPendingRequests reports whether a transactional request is queued or in flight.
func (t *transactionManager) hasPendingRequests() bool {
	if !t.isTransactional() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.txnInFlight || len(t.queue) > 0 || len(t.newPartitions) > 0
}

// takeCompletedLocally reports, once, that nextRequest ended a transaction locally.
func (t *transactionManager) takeCompletedLocally() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	done := t.completedLocally
	t.completedLocally = false
	return done
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
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		// KIP-679: Java's InitProducerIdHandler makes an authorization failure abortable, and
		// the Sender (shouldHandleAuthorizationError) fails what waits on it and returns the
		// producer to UNINITIALIZED: InitTransactions may be called again once the ACL is
		// granted, without a new producer.
		t.mu.Lock()
		t.state, t.lastErr = txnUninitialized, nil
		t.mu.Unlock()
		r.result.complete(fmt.Errorf("InitProducerId (call InitTransactions again once the ACL is granted): %w", err))
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

// An idempotent producer without transactional.id asks any broker for its producer id, outside
// the transactional queue: runOnce sends nothing else until it has one.

// maybeInitProducerID sends InitProducerId (a new id, or with the current id and epoch to bump
// the epoch, KIP-360) once nothing is in flight.
func (s *Sender) maybeInitProducerID(now time.Time) {
	t := s.txn
	if t.initInFlight || now.Before(t.nextInitAttempt) {
		return
	}
	node, ok := s.client.LeastLoadedNode(now)
	if !ok || !s.client.Ready(node, now) {
		return
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = int32(60000)
	if t.producerID >= 0 {
		req.ProducerID = t.producerID
		req.ProducerEpoch = t.producerEpoch
	}
	t.initInFlight = true
	s.sendRequest(node.ID, req, true, now, s.handleIdempotentInitProducerID)
}

// handleIdempotentInitProducerID installs the producer id, or retries after retry.backoff.ms
// (asking for a new id when the broker says our epoch is not its), or stops the producer: an
// error that is neither retriable nor a fencing makes every record fail.
func (s *Sender) handleIdempotentInitProducerID(resp *network.ClientResponse) {
	t := s.txn
	t.initInFlight = false
	now := resp.Received
	if now.IsZero() {
		now = s.clock()
	}
	var err error
	switch {
	case resp.Disconnected || resp.TimedOut:
		err = &networkError{Node: resp.Request.Destination, TimedOut: resp.TimedOut, Cause: resp.Err}
	case resp.Err != nil:
		err = resp.Err
	default:
		r, ok := resp.Body.(*kmsg.InitProducerIDResponse)
		if !ok {
			err = fmt.Errorf("unexpected InitProducerId response %T", resp.Body)
			break
		}
		if err = kerr.ErrorForCode(r.ErrorCode); err == nil {
			s.log.Debug("producer id", "id", r.ProducerID, "epoch", r.ProducerEpoch)
			if t.initRefused != "" {
				s.log.Info("idempotent producer: producer id granted", "id", r.ProducerID)
				t.initRefused = ""
			}
			t.setProducerIDAndEpoch(r.ProducerID, r.ProducerEpoch)
			return
		}
	}
	if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		// KIP-679: no IDEMPOTENT_WRITE (or WRITE) yet. Java's InitProducerIdHandler makes it
		// abortable and Sender.shouldHandleAuthorizationError fails the records the producer
		// holds with it and returns to UNINITIALIZED, so the next loop asks again: once the
		// ACL is granted, records go without a new producer.
		aerr := fmt.Errorf("idempotent producer: InitProducerId refused (asked again every retry.backoff.ms): %w", err)
		if msg := err.Error(); msg != t.initRefused {
			t.initRefused = msg
			s.log.Warn("idempotent producer: no producer id: records fail until the ACL is granted", "error", err)
		}
		s.acc.AbortIncompleteBatches(aerr)
		t.nextInitAttempt = now.Add(s.retryBackoff)
		return
	}
	if isRetriable(err) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) {
		s.log.Debug("InitProducerId failed; retrying", "error", err)
		if errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) {
			// Our epoch is not the broker's: ask for a fresh producer id instead of a bump.
			t.producerID, t.producerEpoch = -1, -1
		}
		t.nextInitAttempt = now.Add(s.retryBackoff)
		return
	}
	t.fatal = fmt.Errorf("idempotent producer cannot get a producer id: %w", err)
	s.log.Error("idempotent producer disabled by a fatal error", "error", err)
}

// pollTimeoutWithoutData bounds the poll while we wait for a producer id: short enough to retry.
func (s *Sender) pollTimeoutWithoutData(now time.Time) time.Duration {
	if d := s.txn.nextInitAttempt.Sub(now); d > 0 {
		return d
	}
	return s.retryBackoff
}
