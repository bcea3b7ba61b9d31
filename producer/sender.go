package producer

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// KafkaClient is what the Sender needs of the network layer. *network.NetworkClient implements
// it; tests substitute a mock that answers requests synchronously, the way the Java client's
// SenderTest uses MockClient.
type KafkaClient interface {
	Ready(node metadata.Node, now time.Time) bool
	ConnectionDelay(node int32, now time.Time) time.Duration
	PollDelay(node int32, now time.Time) time.Duration
	ConnectionFailed(node int32) bool
	Send(req *network.ClientRequest, now time.Time)
	Poll(timeout time.Duration, now time.Time) []*network.ClientResponse
	LeastLoadedNode(now time.Time) (metadata.Node, bool)
	InFlightRequestCount() int
	Wakeup()
	WakeIn(d time.Duration)
	Close() error
}

var _ KafkaClient = (*network.NetworkClient)(nil)

// Sender is the producer's I/O loop, after the Java Sender: it moves ready batches from the
// accumulator to the brokers and handles the responses. Its goroutine owns the KafkaClient, the
// in-flight batch lists and the transaction manager; nothing here is safe for concurrent use
// except initiateClose, forceClose and wakeup.
type Sender struct {
	// expireInOrder: a partition's expiry takes its other batches with it (WithExpiryInOrder).
	expireInOrder bool

	client KafkaClient
	acc    *accumulator.RecordAccumulator
	meta   *metadata.Metadata
	txn    *transactionManager // nil without idempotence
	log    *slog.Logger

	acks            int16
	maxRequestSize  int
	retries         int
	requestTimeout  time.Duration
	deliveryTimeout time.Duration
	retryBackoff    time.Duration
	// guaranteeMessageOrder mutes a partition while it has a request in flight
	// (max.in.flight.requests.per.connection=1 without idempotence), as the Java Sender does.
	guaranteeMessageOrder bool

	// inFlightBatches lists, per partition, the batches in requests that have not completed, so
	// that they too expire at delivery.timeout.ms.
	inFlightBatches map[metadata.TopicPartition][]*accumulator.ProducerBatch
	// nextExpiry is the earliest delivery.timeout.ms of a batch queued or in flight, zero if
	// none: the poll must not sleep past it.
	nextExpiry time.Time

	// metrics and telemetry are the KIP-714 client metrics and their pusher; nil with
	// enable.metrics.push=false.
	metrics   *clientMetrics
	telemetry *telemetryPusher

	running atomic.Bool
	forced  atomic.Bool
	clock   func() time.Time
	obs     Observer // nil: no telemetry
}

// run is the sender goroutine's body. It returns when Close is done: after a graceful close has
// drained everything, or at once after forceClose (remaining records failed with
// ErrProducerClosed).
func (s *Sender) run() {
	for s.running.Load() {
		s.runOnce(s.clock())
	}
	if s.telemetry != nil {
		// KafkaProducer.close: the client telemetry's last push (Terminating) goes out while
		// the buffered records are sent.
		s.telemetry.initiateClose(s.clock())
	}
	// Graceful close: keep going while there is buffered data or a response to wait for. A
	// transactional request counts only for a transaction under way (Java's
	// hasPendingTransactionalRequests): an InitProducerId or FindCoordinator of a producer
	// still initializing would hold Close until a coordinator answered.
	for !s.forced.Load() && (s.acc.HasUndrained() || s.client.InFlightRequestCount() > 0 ||
		(s.txn.hasPendingRequests() && s.txn.hasOngoingTransaction()) || s.telemetry.closing(s.clock())) {
		s.runOnce(s.clock())
	}
	// A transaction left open is aborted, as the Java Sender does: its records were sent above,
	// and without an abort they would stay invisible to read_committed consumers, and hold back
	// the partitions' last stable offset, until transaction.timeout.ms.
	for !s.forced.Load() && s.txn.hasOngoingTransaction() && s.txn.abortOnClose() {
		s.runOnce(s.clock())
	}
	if s.forced.Load() {
		s.failInFlight(ErrProducerClosed)
		s.acc.AbortIncompleteBatches(fmt.Errorf("%w before the record was acknowledged", ErrProducerClosed))
	}
	if s.txn.isTransactional() {
		// Whoever still waits on a transactional call gets an answer.
		s.txn.failPending(ErrProducerClosed)
	}
	if err := s.client.Close(); err != nil {
		s.log.Warn("closing network client", "error", err)
	}
}

func (s *Sender) initiateClose() {
	s.acc.Close()
	s.running.Store(false)
	s.client.Wakeup()
}

func (s *Sender) forceClose() {
	s.forced.Store(true)
	s.initiateClose()
}

// runOnce is one iteration of the loop: make sure an idempotent producer has its id (a
// transactional one: send its next transactional request, which goes before any data), send
// what is ready, then poll the network.
func (s *Sender) runOnce(now time.Time) {
	// pollWait bounds this iteration's poll: the telemetry pusher's next request, a
	// transactional request's retry backoff.
	pollWait := time.Duration(1<<63 - 1)
	if s.telemetry != nil {
		// NetworkClient.poll's telemetrySender.maybeUpdate: at most one telemetry request, sent
		// before the data; it bounds the poll below.
		pollWait = s.telemetry.maybeUpdate(now)
	}
	if s.txn != nil {
		s.txn.maybeResolveSequences()
		if err := s.txn.fatal; err != nil {
			s.acc.AbortIncompleteBatches(err)
			s.client.Poll(s.retryBackoff, now)
			return
		}
		if s.txn.isTransactional() {
			var handled bool
			var wait time.Duration
			if handled, wait = s.maybeSendAndPollTransactionalRequest(now); handled {
				return
			}
			pollWait = min(pollWait, wait)
		}
		// Java's bumpIdempotentEpochAndResetIdIfNeeded: a local epoch bump after a gap, and
		// InitProducerId when there is no producer id (at start, or the epoch is exhausted).
		if t := s.txn; t.bumpNeeded && !t.isTransactional() && t.hasProducerID() {
			s.log.Info("idempotent producer: bumping the epoch after a sequence gap", "producer_id", t.producerID,
				"epoch", t.producerEpoch+1, "partitions_restarted", len(t.rewrite))
		}
		s.txn.bumpIdempotentEpochAndResetIDIfNeeded()
		if !s.txn.isTransactional() && !s.txn.hasProducerID() {
			s.maybeInitProducerID(now)
			s.client.Poll(min(s.pollTimeoutWithoutData(now), pollWait), now)
			return
		}
	}
	timeout := s.sendProducerData(now)
	s.client.Poll(min(timeout, pollWait), now)
}

// maybeSendAndPollTransactionalRequest is the Java Sender's method of that name: while a
// transactional request is outstanding nothing else is sent; otherwise the next one in the
// queue goes to the coordinator (FindCoordinator to any broker). During an abort, and after an
// abortable error, batches never sent are dropped first. handled reports that it polled and
// the iteration is over; wait bounds the next poll when a request is in retry backoff.
func (s *Sender) maybeSendAndPollTransactionalRequest(now time.Time) (handled bool, wait time.Duration) {
	t := s.txn
	if t.txnInFlight {
		s.client.Poll(s.retryBackoff, now)
		return true, 0
	}
	if err := t.undrainedAbortError(); err != nil && s.acc.HasIncomplete() {
		s.acc.AbortUndrainedBatches(err)
	}
	r, wait := t.nextRequest(s.acc.HasIncomplete(), now)
	if r == nil && t.takeCompletedLocally() {
		// A transaction ended without a request (nothing was added to it): the state changed,
		// so whoever loops on it (Close's abort) must look again now, not after a poll that
		// nothing would wake.
		return true, 0
	}
	if r == nil {
		if wait == 0 {
			wait = time.Duration(1<<63 - 1)
		}
		return false, wait
	}
	var node metadata.Node
	if r.kind == reqFindCoordinator {
		n, ok := s.client.LeastLoadedNode(now)
		if !ok {
			t.requeue(r, now, 0)
			s.meta.RequestUpdate()
			s.client.Poll(s.retryBackoff, now)
			return true, 0
		}
		node = n
	} else {
		if t.coordinator == nil {
			t.lookupCoordinator()
			t.requeue(r, now, 0)
			return true, 0
		}
		node = *t.coordinator
	}
	if !s.client.Ready(node, now) {
		t.requeue(r, now, 0)
		delay := s.client.ConnectionDelay(node.ID, now)
		if r.kind != reqFindCoordinator && s.client.ConnectionFailed(node.ID) {
			// The coordinator's connection failed and is in reconnect backoff: the coordinator
			// may have moved, so look it up again (Java's maybeFindCoordinatorAndRetry).
			t.lookupCoordinator()
		}
		s.client.Poll(max(min(delay, s.retryBackoff), 0), now)
		return true, 0
	}
	body := t.buildRequest(r)
	s.log.Debug("transactional request", "request", r.kind.String(), "node", node.ID, "transactional_id", t.transactionalID)
	t.txnInFlight = true
	s.sendRequest(node.ID, body, true, now, func(resp *network.ClientResponse) {
		s.handleTransactionalResponse(r, resp)
	})
	s.client.Poll(s.retryBackoff, now)
	return true, 0
}

// handleTransactionalResponse hands a transactional request's outcome to the transaction manager.
func (s *Sender) handleTransactionalResponse(r *txnRequest, resp *network.ClientResponse) {
	now := s.clock() // as Java's completion handlers read time.milliseconds(), not the receive time
	var netErr, otherErr error
	switch {
	case resp.Disconnected || resp.TimedOut:
		netErr = &networkError{Node: resp.Request.Destination, TimedOut: resp.TimedOut, Cause: resp.Err}
	case resp.Err != nil:
		otherErr = resp.Err
	}
	s.txn.handleTxnResponse(r, resp.Body, netErr, otherErr, now, s.retryBackoff)
	if err := s.txn.fatal; err != nil {
		s.log.Error("transactional producer stopped by a fatal error", "error", err)
	}
}

// sendProducerData is Sender.sendProducerData: ready nodes, expire, drain, build requests.
// It returns how long the following poll may block.
func (s *Sender) sendProducerData(now time.Time) time.Duration {
	cluster := s.meta.Fetch()
	result := s.acc.Ready(cluster, now)
	if len(result.UnknownLeaderTopics) > 0 {
		// Partitions without a leader: ask for metadata now rather than at its next refresh.
		for _, topic := range result.UnknownLeaderTopics {
			s.meta.Add(topic, now)
		}
		s.meta.RequestUpdate()
	}

	notReadyTimeout := time.Duration(1<<63 - 1)
	ready := result.ReadyNodes[:0:0]
	for _, id := range result.ReadyNodes {
		node, ok := cluster.Node(id)
		if !ok {
			// A leader the broker list does not name: our metadata is inconsistent, and only
			// a refresh can tell where to send (Java's ready() counts it as an unknown leader).
			s.meta.RequestUpdate()
			continue
		}
		if !s.client.Ready(node, now) {
			// Only the ready time moves: ready minus drain time is how long its data has
			// waited for it (partitioner.availability.timeout.ms).
			s.acc.UpdateNodeLatencyStats(id, now, false)
			// Java's pollDelayMs: a throttled node (KIP-219) is waited for until its throttle ends.
			notReadyTimeout = min(notReadyTimeout, s.client.PollDelay(id, now))
			continue
		}
		s.acc.UpdateNodeLatencyStats(id, now, true)
		ready = append(ready, id)
	}

	// Expiry comes before the drain, unlike Java's sendProducerData, which drains, fails the
	// expired batches (getExpiredInflightBatches includes the ones it has just drained) and
	// then sends every drained batch all the same. A batch failed to its caller must not be
	// written: a caller that sends failed records again would have them in the log twice.
	// Expired here, a batch is still queued, so it fails unsent, before Drain gives it a
	// sequence, counts it in flight or mutes its partition: nothing of a drain has to be
	// undone. A queued retry keeps its earlier attempts' sequence, which expire leaves
	// unresolved (as Java's sendProducerData does for an expired batch inRetry). Every batch
	// drained below has time left, so none fails before its request is built; the next expiry
	// computed here counted it while it was queued.
	s.expireBatches(now)

	batches := s.acc.Drain(cluster, ready, s.maxRequestSize, now)
	for _, list := range batches {
		for _, b := range list {
			s.metrics.drained(b, now)
			s.inFlightBatches[b.TopicPartition] = append(s.inFlightBatches[b.TopicPartition], b)
			if s.txn.isTransactional() {
				b.SetTransactional()
			}
			if s.guaranteeMessageOrder {
				s.acc.MutePartition(b.TopicPartition)
			}
		}
	}

	sent := false
	for node, list := range batches {
		if len(list) > 0 {
			s.metrics.produceRequest(list)
			s.sendProduceRequest(node, list, now)
			sent = true
		}
	}

	timeout := min(result.NextReadyCheckDelay, notReadyTimeout)
	if !s.nextExpiry.IsZero() {
		// Wake for the next delivery.timeout.ms, queued or in flight (Java's nextExpiryTimeMs).
		timeout = min(timeout, s.nextExpiry.Sub(now))
	}
	if sent {
		// Data went out: loop at once in case more is sendable (Java does the same whenever a
		// node is ready). A ready node with nothing drained is a partition the drain holds
		// (the first batch of an epoch unacknowledged, sequences unresolved, a partition not
		// yet in the transaction): what releases it is a response, which wakes the poll, or
		// a backoff, which the timeouts above count; polling at once would only spin.
		timeout = 0
	}
	return max(timeout, 0)
}

// expireBatches fails batches older than delivery.timeout.ms: those still queued, and those
// whose request is in flight (the Java Sender's getExpiredInflightBatches). An in-flight batch's
// callbacks run now; its memory is released when its request completes.
//
// An expired batch that had been sent may or may not have been written: its partition's
// sequences are unresolved until the batches after it are done (Java markSequenceUnresolved).
func (s *Sender) expireBatches(now time.Time) {
	var expired map[metadata.TopicPartition]bool // with expireInOrder: the partitions that had an expiry
	note := func(tp metadata.TopicPartition) {
		if s.expireInOrder {
			if expired == nil {
				expired = map[metadata.TopicPartition]bool{}
			}
			expired[tp] = true
		}
	}
	for _, b := range s.acc.ExpiredBatches(now) {
		note(b.TopicPartition)
		s.expire(b, now, false)
		s.acc.Deallocate(b)
	}
	s.nextExpiry = s.acc.NextExpiryTime()
	for _, list := range s.inFlightBatches {
		for _, b := range list {
			if b.IsDone() {
				continue
			}
			deadline := b.Created.Add(s.deliveryTimeout)
			if now.Before(deadline) {
				if s.nextExpiry.IsZero() || deadline.Before(s.nextExpiry) {
					s.nextExpiry = deadline
				}
				continue
			}
			note(b.TopicPartition)
			s.expire(b, now, false)
		}
	}
	for tp := range expired {
		s.expireRest(tp, now)
	}
}

// expireRest is WithExpiryInOrder's: once a batch of tp expired, the rest of tp goes too,
// queued and in flight, so that nothing younger is written before the expired records are sent
// again. A next expiry computed before may name one of them; an early wake-up finds nothing to
// do.
func (s *Sender) expireRest(tp metadata.TopicPartition, now time.Time) {
	for _, b := range s.acc.RemoveQueued(tp) {
		s.expire(b, now, true)
		s.acc.Deallocate(b)
	}
	for _, b := range s.inFlightBatches[tp] {
		if !b.IsDone() {
			s.expire(b, now, true)
		}
	}
}

// expire fails b at delivery.timeout.ms, or, behind, with an older batch of its partition that
// expired (expireRest). One that had been sent may or may not have been written: its
// partition's sequences are unresolved until its other batches are done (Java's
// markSequenceUnresolved in sendProducerData). The caller frees a queued batch; one in a request
// in flight is freed when the request completes (applyOutcome).
func (s *Sender) expire(b *accumulator.ProducerBatch, now time.Time, behind bool) {
	err := s.timeoutError(b, now, nil)
	err.Behind = behind
	s.failBatch(b, err, nil, false)
	if s.txn != nil && (b.InRetry() || s.isInFlight(b)) {
		s.txn.markSequenceUnresolved(b)
	}
}

// isInFlight reports whether b is in a request that has not completed.
func (s *Sender) isInFlight(b *accumulator.ProducerBatch) bool {
	for _, x := range s.inFlightBatches[b.TopicPartition] {
		if x == b {
			return true
		}
	}
	return false
}

func (s *Sender) timeoutError(b *accumulator.ProducerBatch, now time.Time, cause error) *DeliveryTimeoutError {
	return &DeliveryTimeoutError{
		Partition: b.TopicPartition.String(),
		Records:   b.RecordCount(),
		Elapsed:   now.Sub(b.Created),
		Cause:     cause,
	}
}

// recordsPool recycles the encoded record batches of a request: they live only until the network
// client has copied them into the request's frame.
var recordsPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// sendProduceRequest builds one ProduceRequest for a node's drained batches.
func (s *Sender) sendProduceRequest(node int32, batches []*accumulator.ProducerBatch, now time.Time) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = s.acks
	if s.txn.isTransactional() {
		// The broker authorizes transactional records by the request's transactional id, and
		// refuses them without one (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
		req.TransactionID = &s.txn.transactionalID
	}
	req.TimeoutMillis = int32(s.requestTimeout.Milliseconds())
	byTP := make(map[metadata.TopicPartition]*accumulator.ProducerBatch, len(batches))
	bufs := make([]*[]byte, 0, len(batches))
	topicIndex := make(map[string]int)
	for _, b := range batches {
		tp := b.TopicPartition
		byTP[tp] = b
		i, ok := topicIndex[tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicIndex[tp.Topic] = i
			t := kmsg.NewProduceRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = tp.Partition
		buf := recordsPool.Get().(*[]byte)
		p.Records = b.AppendEncoded((*buf)[:0])
		*buf = p.Records
		bufs = append(bufs, buf)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	s.sendRequest(node, req, s.acks != 0, now, func(resp *network.ClientResponse) {
		s.handleProduceResponse(resp, byTP)
	})
	// The client framed the request (records copied into the frame) or refused it; either way
	// the encoded batches are no longer read. Drop the references so nothing sees reused bytes.
	for _, t := range req.Topics {
		for i := range t.Partitions {
			t.Partitions[i].Records = nil
		}
	}
	for _, buf := range bufs {
		recordsPool.Put(buf)
	}
}

// sendRequest hands a request the sender built to the client, for node, with request.timeout.ms;
// cb gets the outcome from a later Poll (Java's client.send). Every request the sender sends goes
// through it (produce, transactional, the idempotent InitProducerId); the callers note the request
// in flight (inFlightBatches, txnInFlight, initInFlight) first, and the network client reports it
// to the observer.
func (s *Sender) sendRequest(node int32, body kmsg.Request, expectResponse bool, now time.Time, cb func(*network.ClientResponse)) {
	s.client.Send(&network.ClientRequest{
		Destination:    node,
		Body:           body,
		ExpectResponse: expectResponse,
		Created:        now,
		Timeout:        s.requestTimeout,
		Callback:       cb,
	}, now)
}

// sendTelemetryRequest sends a KIP-714 request (GetTelemetrySubscriptions, PushTelemetry) for
// the telemetry pusher.
func (s *Sender) sendTelemetryRequest(node int32, body kmsg.Request, now time.Time, cb func(*network.ClientResponse)) {
	s.sendRequest(node, body, true, now, cb)
}

// partitionResult is one partition's answer in a produce response, or the error that stands
// for it when the request failed as a whole.
type partitionResult struct {
	err            error
	baseOffset     int64
	logAppendTime  int64
	logStartOffset int64
	// recordErrs are the records the broker named as invalid (KIP-467), by batch index.
	recordErrs []kmsg.ProduceResponseTopicPartitionErrorRecord
	errMsg     *string // the broker's message for the partition's error
}

func failedResult(err error) partitionResult {
	return partitionResult{err: err, baseOffset: -1, logAppendTime: -1, logStartOffset: -1}
}

// handleProduceResponse is Sender.handleProduceResponse: every batch of the request is completed,
// retried, split or failed.
//
// The way back from the broker starts here, on the sender goroutine, called from client.Poll
// with the response (or the disconnection or timeout that stands for it). Each batch of the
// request then goes through these steps, in this order:
//  1. here: its partition's result (error, base offset); NOT_LEADER answers that name the new
//     leader (KIP-951) update metadata once the whole response is read;
//  2. finishAttempt: with an observer, the attempt's timestamps go on a traced batch first, so
//     the traces built in step 4 include this attempt;
//  3. completeBatch: decideBatch (complete.go) decides from the attempt's facts alone:
//     complete, duplicate, split, retry (with what it does to the partition's sequences),
//     expire or fail; applyOutcome acts on it in one place. The transaction manager hears of
//     the outcome before the records' callbacks run (handleCompletedBatch; produceFailed,
//     which picks the error the callbacks get), so a callback sees the producer's state
//     already moved on; handleFailedBatch follows only the completion that won the batch;
//  4. ProducerBatch.Complete or CompleteExceptionally (accumulator/batch.go, complete): each
//     record's callback, then its trace's RecordDone, then the accumulator Observer's
//     BatchDone, then Flush's waiters;
//  5. Deallocate, at the end of applyOutcome, once, unless the batch was queued again: the
//     buffer goes back to the pool only after the callbacks, which read the batch's thunks;
//  6. finishAttempt tells the observer (AttemptDone) last, because what it reports is the
//     decision of step 3 (a retry is a batch still open).
func (s *Sender) handleProduceResponse(resp *network.ClientResponse, batches map[metadata.TopicPartition]*accumulator.ProducerBatch) {
	// Decisions (retry backoff, delivery timeout) are made as of now, as Java's
	// Sender.sendProduceRequest callback passes time.milliseconds(); resp.Received is when the
	// reader had the response, a stage time for telemetry, possibly well before this poll.
	now := s.clock()
	node := resp.Request.Destination
	switch {
	case resp.Disconnected || resp.TimedOut:
		err := &networkError{Node: node, TimedOut: resp.TimedOut, Cause: resp.Err}
		for _, b := range batches {
			s.finishAttempt(b, resp, failedResult(err), now)
		}
	case resp.Err != nil:
		for _, b := range batches {
			s.finishAttempt(b, resp, failedResult(fmt.Errorf("produce to broker %d: %w", node, resp.Err)), now)
		}
	case !resp.Request.ExpectResponse:
		// acks=0: the broker sends nothing back; the write leaving the socket is all we learn.
		for _, b := range batches {
			s.finishAttempt(b, resp, failedResult(nil), now)
		}
	default:
		pr, ok := resp.Body.(*kmsg.ProduceResponse)
		if !ok {
			for _, b := range batches {
				s.finishAttempt(b, resp, failedResult(fmt.Errorf("broker %d answered a produce request with %T", node, resp.Body)), now)
			}
			return
		}
		s.metrics.produceResponse(resp, pr.ThrottleMillis)
		var leaders []metadata.LeaderHint
		for _, t := range pr.Topics {
			for _, p := range t.Partitions {
				tp := metadata.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				b := batches[tp]
				if b == nil {
					continue
				}
				delete(batches, tp)
				err := kerr.ErrorForCode(p.ErrorCode)
				if err != nil {
					err = brokerError(err, p.ErrorMessage, p.ErrorRecords)
					if (errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch)) &&
						p.CurrentLeader.LeaderID >= 0 && p.CurrentLeader.LeaderEpoch >= 0 {
						// KIP-951: the broker names the new leader; use it without waiting for a
						// metadata round trip (Java's partitionsWithUpdatedLeaderInfo).
						leaders = append(leaders, metadata.LeaderHint{TopicPartition: tp,
							Leader: p.CurrentLeader.LeaderID, LeaderEpoch: p.CurrentLeader.LeaderEpoch})
					}
				}
				s.finishAttempt(b, resp, partitionResult{err: err, baseOffset: p.BaseOffset,
					logAppendTime: p.LogAppendTime, logStartOffset: p.LogStartOffset,
					recordErrs: p.ErrorRecords, errMsg: p.ErrorMessage}, now)
			}
		}
		if len(leaders) > 0 {
			nodes := make([]metadata.Node, 0, len(pr.Brokers))
			for _, e := range pr.Brokers {
				n := metadata.Node{ID: e.NodeID, Host: e.Host, Port: e.Port}
				if e.Rack != nil {
					n.Rack = *e.Rack
				}
				nodes = append(nodes, n)
			}
			s.meta.UpdatePartitionLeadership(leaders, nodes)
		}
		// A partition the broker did not mention is a broker bug; do not leave it hanging.
		for _, b := range batches {
			s.finishAttempt(b, resp, failedResult(fmt.Errorf("broker %d returned no result for %s", node, b.TopicPartition)), now)
		}
	}
}

// recordErrors is Java's Sender.failBatch for a response with record errors (KIP-467): each
// record the broker named fails with the partition's error, its own message in it (with more
// than one named, Java makes each an InvalidRecordException, since one code cannot tell them
// apart; the code is kept here, as errors.Is needs it); nil when none was named.
func recordErrors(err error, r partitionResult) map[int]error {
	if len(r.recordErrs) == 0 {
		return nil
	}
	code := err
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		code = ke
	}
	if len(r.recordErrs) > 1 {
		code = kerr.InvalidRecord
	}
	m := make(map[int]error, len(r.recordErrs))
	for _, re := range r.recordErrs {
		msg := re.ErrorMessage
		if msg == nil {
			msg = r.errMsg
		}
		if msg != nil && *msg != "" {
			m[int(re.RelativeOffset)] = fmt.Errorf("%w (broker says: record %d: %s)", code, re.RelativeOffset, *msg)
		} else {
			m[int(re.RelativeOffset)] = code
		}
	}
	return m
}

// brokerError keeps the broker's error (kerr, so errors.Is works and its name is in the message)
// and adds the broker's own message and the first per-record error when there are any.
func brokerError(err error, msg *string, recordErrs []kmsg.ProduceResponseTopicPartitionErrorRecord) error {
	extra := ""
	if msg != nil && *msg != "" {
		extra = *msg
	}
	if len(recordErrs) > 0 && recordErrs[0].ErrorMessage != nil {
		if extra != "" {
			extra += "; "
		}
		extra += fmt.Sprintf("record %d: %s", recordErrs[0].RelativeOffset, *recordErrs[0].ErrorMessage)
	}
	if extra == "" {
		return err
	}
	return fmt.Errorf("%w (broker says: %s)", err, extra)
}

// finishAttempt is completeBatch for a batch of the produce request resp answered (or failed):
// steps 2 and 6 of the way back (see handleProduceResponse) around it. With an observer it first
// keeps the attempt's stage timestamps on a traced batch, so the records' traces (built when
// their callbacks ran inside completeBatch) show it, and then reports the attempt with what
// completeBatch decided.
func (s *Sender) finishAttempt(b *accumulator.ProducerBatch, resp *network.ClientResponse, r partitionResult, now time.Time) {
	if s.obs == nil {
		s.completeBatch(b, r, now)
		return
	}
	req := resp.Request
	a := accumulator.Attempt{
		Number:            b.Attempts + 1,
		TopicPartition:    b.TopicPartition,
		Enqueued:          b.LastAttempt,
		Drained:           b.Drained,
		Node:              req.Destination,
		CorrelationID:     req.CorrelationID,
		APIVersion:        req.APIVersion,
		Queued:            req.Queued,
		Written:           req.Written,
		Received:          now,
		Records:           b.RecordCount(),
		Bytes:             b.EstimatedSize(),
		UncompressedBytes: b.UncompressedSize() + accumulator.RecordBatchOverhead,
		Err:               r.err,
	}
	if b.Traced() {
		b.AddAttempt(a)
	}
	s.completeBatch(b, r, now)
	// Still open after completeBatch means re-enqueued: completed, failed and split batches are done.
	s.obs.AttemptDone(b, a, !b.IsDone())
}

// completeBatch is Java's Sender.completeBatch, steps 3 to 5 of the way back (see
// handleProduceResponse): decideBatch decides what becomes of b from the facts of the attempt,
// and applyOutcome acts on it.
func (s *Sender) completeBatch(b *accumulator.ProducerBatch, r partitionResult, now time.Time) {
	s.removeInFlightBatch(b)
	if s.guaranteeMessageOrder {
		s.acc.UnmutePartition(b.TopicPartition)
	}
	s.applyOutcome(b, r, decideBatch(s.factsOf(b, r, now)), now)
}

// factsOf is what decideBatch reads of b, its partition and this attempt's result r.
func (s *Sender) factsOf(b *accumulator.ProducerBatch, r partitionResult, now time.Time) batchFacts {
	f := batchFacts{
		err:             r.err,
		logStartOffset:  r.logStartOffset,
		records:         b.RecordCount(),
		done:            b.IsDone(),
		attempts:        b.Attempts,
		age:             now.Sub(b.Created),
		retries:         s.retries,
		deliveryTimeout: s.deliveryTimeout,
	}
	if s.txn != nil {
		s.txn.sequenceFacts(b, &f)
	}
	return f
}

// applyOutcome is the one place a completed attempt acts: the transaction manager hears of the
// outcome before the records' callbacks run (so a callback sees the producer's state already
// moved on), the batch completes, fails, splits or goes back to its queue, and its memory is
// freed, once, after the callbacks (which read its thunks), unless it was queued again.
func (s *Sender) applyOutcome(b *accumulator.ProducerBatch, r partitionResult, o batchOutcome, now time.Time) {
	tp := b.TopicPartition
	switch o.kind {
	case outcomeComplete, outcomeDuplicate:
		// A duplicate is delivered: the broker has it from an earlier attempt whose response
		// was lost, and no longer the offset it was written at.
		if s.txn != nil {
			s.txn.handleCompletedBatch(b, r.baseOffset)
		}
		b.Complete(r.baseOffset, r.logAppendTime)

	case outcomeSplit:
		// The split batches keep the refused batch's producer id, epoch and consecutive
		// sequences (Java ProducerBatch.split): no epoch bump, no gap.
		if s.txn != nil {
			s.txn.removeInFlight(b)
		}
		s.metrics.split()
		n := s.acc.SplitAndReenqueue(b)
		s.log.Info("batch too large for the broker: split", "partition", tp.String(),
			"records", b.RecordCount(), "new_batches", n)

	case outcomeRetry:
		if s.txn != nil {
			s.txn.retrying(tp, o.seq)
		}
		s.metrics.retried(b)
		s.log.Debug("retrying batch", "partition", tp.String(), "attempt", b.Attempts+1, "error", r.err)
		s.acc.Reenqueue(b, now)

	case outcomeExpire:
		s.failBatch(b, s.timeoutError(b, now, r.err), nil, false)
		if s.txn != nil {
			s.txn.markSequenceUnresolved(b)
		}
		if s.expireInOrder {
			s.expireRest(tp, now)
		}

	case outcomeFail:
		s.failBatch(b, r.err, recordErrors(r.err, r), o.adjust)
	}
	if o.kind != outcomeRetry {
		s.acc.Deallocate(b)
	}
	if o.refreshMetadata {
		s.meta.RequestUpdate()
	}
}

// failBatch is Java's Sender.failBatch: every record's callback runs with err, or with
// recordErrs[i] for the records the broker named (recordErrors; the others of the batch get
// ErrBatchHadInvalidRecords), once: a batch already done is left alone. The transaction
// manager picks the error a transactional producer's callbacks get (produceFailed) and then
// learns of the failure (handleFailedBatch); adjust says b was certainly not written. The
// caller frees the batch: a batch whose request is in flight is freed when the request
// completes, as the request may still be framed from its buffer.
func (s *Sender) failBatch(b *accumulator.ProducerBatch, err error, recordErrs map[int]error, adjust bool) {
	if !b.IsDone() && s.txn.isTransactional() {
		err = s.txn.produceFailed(err)
	}
	if recordErrs != nil {
		for i := range b.RecordCount() {
			if _, ok := recordErrs[i]; !ok {
				recordErrs[i] = ErrBatchHadInvalidRecords
			}
		}
	}
	if b.CompleteExceptionally(err, recordErrs) {
		s.metrics.failed(b)
		s.log.Debug("batch failed", "partition", b.TopicPartition.String(), "records", b.RecordCount(), "error", err)
		if s.txn != nil {
			s.txn.handleFailedBatch(b, err, adjust)
		}
	}
}

func (s *Sender) removeInFlightBatch(b *accumulator.ProducerBatch) {
	list := s.inFlightBatches[b.TopicPartition]
	for i, x := range list {
		if x == b {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.inFlightBatches, b.TopicPartition)
	} else {
		s.inFlightBatches[b.TopicPartition] = list
	}
}

// failInFlight fails the batches of requests that will never complete (forced close).
func (s *Sender) failInFlight(err error) {
	for _, list := range s.inFlightBatches {
		for _, b := range list {
			if b.CompleteExceptionally(err, nil) && s.txn != nil {
				s.txn.handleFailedBatch(b, err, false)
			}
		}
	}
}
