package producer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// Regression tests for the faults a real cluster throws (the Java SenderTest and
// TransactionManagerTest cases of the same names are the model): sequence gaps, epoch bumps
// that must stay local to their partition, and expiry.

// answerByPartition answers a ProduceRequest with codes[partition] (0 when absent).
func answerByPartition(codes map[int32]int16, baseOffset int64) func(kmsg.Request) kmsg.Response {
	return func(r kmsg.Request) kmsg.Response {
		return kafkatest.ProduceAnswer(r.(*kmsg.ProduceRequest), func(p kmsg.ProduceRequestTopicPartition) int16 {
			return codes[p.Partition]
		}, baseOffset)
	}
}

// idempotentFixture is a sender fixture with producer id 7, epoch 0, and small batches (one
// 60-byte record each).
func idempotentFixture(t *testing.T, partitions int, mutate func(*Config)) *senderFixture {
	t.Helper()
	f := newSenderFixture(t, partitions, func(c *Config) {
		c.EnableIdempotence = true
		c.BatchSize = 100
		if mutate != nil {
			mutate(c)
		}
	})
	f.runOnce()
	f.client.respond(t, initProducerIDAnswer(7, 0))
	f.runOnce()
	return f
}

func record(c byte) string { return strings.Repeat(string(c), 60) }

// pendingProduce returns the sequence and epoch of partition's batch in the oldest pending
// produce request.
func (f *senderFixture) pendingBatch(i int, partition int32) kmsg.RecordBatch {
	f.t.Helper()
	if i >= len(f.client.pending) {
		f.t.Fatalf("no pending request %d (%d pending)", i, len(f.client.pending))
	}
	req, ok := f.client.pending[i].Body.(*kmsg.ProduceRequest)
	if !ok {
		f.t.Fatalf("pending request %d is %T", i, f.client.pending[i].Body)
	}
	return batchOf(f.t, req, partition)
}

// sendTwo appends two records to partition 0 and runs the sender twice: once per request it
// may send.
func (f *senderFixture) sendTwo(first, second string) (*outcome, *outcome) {
	f.t.Helper()
	a, b := f.append(0, first), f.append(0, second)
	f.runOnce()
	f.runOnce()
	return a, b
}

// twoInFlight appends two records that make a batch each (at batch.size 100) and sends them,
// which an idempotent producer does only once their partition has an acknowledged batch.
func (f *senderFixture) twoInFlight(first, second string) (*outcome, *outcome) {
	f.t.Helper()
	a, b := f.sendTwo(first, second)
	if n := len(f.client.pending); n != 2 {
		f.t.Fatalf("%d requests in flight, want 2 once the partition has an ack", n)
	}
	return a, b
}

// deliversUnder checks that the first pending request carries partition 0's batch under epoch
// and sequence, answers it, and checks that o, the batch's record, was delivered.
func (f *senderFixture) deliversUnder(what string, o *outcome, epoch int16, sequence int32) {
	f.t.Helper()
	b := f.pendingBatch(0, 0)
	if b.ProducerEpoch != epoch || b.FirstSequence != sequence {
		f.t.Fatalf("%s sent with epoch %d sequence %d, want epoch %d sequence %d", what, b.ProducerEpoch, b.FirstSequence, epoch, sequence)
	}
	f.client.respond(f.t, produceAnswer(0, 1))
	f.runOnce()
	if o.calls != 1 || o.err != nil {
		f.t.Fatalf("%s: calls=%d err=%v, want delivered once", what, o.calls, o.err)
	}
}

// pendingFor returns partition's batch from the produce requests in flight (from the latest
// that carries one); ok is false when none does.
func (f *senderFixture) pendingFor(partition int32) (b kmsg.RecordBatch, ok bool) {
	f.t.Helper()
	for _, r := range f.client.pending {
		req, isProduce := r.Body.(*kmsg.ProduceRequest)
		if !isProduce {
			continue
		}
		for _, tt := range req.Topics {
			for _, p := range tt.Partitions {
				if p.Partition == partition {
					b, ok = batchOf(f.t, req, partition), true
				}
			}
		}
	}
	return b, ok
}

// settle answers every produce request with success until nothing is pending, up to n rounds.
func (f *senderFixture) settle(n int) {
	for ; n > 0; n-- {
		f.now = f.now.Add(200 * time.Millisecond)
		f.runOnce()
		if len(f.client.pending) == 0 {
			return
		}
		for len(f.client.pending) > 0 {
			if _, ok := f.client.pending[0].Body.(*kmsg.InitProducerIDRequest); ok {
				f.client.respond(f.t, initProducerIDAnswer(7, 1))
				continue
			}
			f.client.respond(f.t, produceAnswer(0, 100))
		}
		f.runOnce()
	}
}

// A batch refused for good (here MESSAGE_TOO_LARGE for a single record) leaves a gap in its
// partition's sequences. The batch behind it, refused OUT_OF_ORDER_SEQUENCE_NUMBER, must be sent
// again under a new epoch from sequence 0, and so must every later batch (Java handleFailedBatch:
// requestEpochBumpForPartition).
func TestIdempotentGapAfterRefusedRecordIsRepaired(t *testing.T) {
	f := idempotentFixture(t, 1, nil)
	a := f.append(0, record('a'))
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	tooLarge, behind := f.twoInFlight(record('b'), record('c')) // sequences 1 and 2
	f.client.respond(t, produceAnswer(kerr.MessageTooLarge.Code, -1))
	f.client.respond(t, produceAnswer(kerr.OutOfOrderSequenceNumber.Code, -1))
	f.runOnce()
	if a.err != nil || !errors.Is(tooLarge.err, kerr.MessageTooLarge) || tooLarge.calls != 1 {
		t.Fatalf("refused record: calls=%d err=%v, want MESSAGE_TOO_LARGE once", tooLarge.calls, tooLarge.err)
	}
	if behind.calls != 0 {
		t.Fatalf("the record behind the gap failed: %v", behind.err)
	}
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	f.deliversUnder("record behind the gap", behind, 1, 0)
	later := f.append(0, record('d'))
	f.runOnce()
	if b := f.pendingBatch(0, 0); b.ProducerEpoch != 1 || b.FirstSequence != 1 {
		t.Fatalf("later batch epoch %d sequence %d, want 1/1", b.ProducerEpoch, b.FirstSequence)
	}
	f.settle(5)
	if later.calls != 1 || later.err != nil {
		t.Fatalf("later record: calls=%d err=%v", later.calls, later.err)
	}
}

// A batch that expires after it was sent may or may not have been written: its partition's
// sequences are unresolved until nothing else is unfinished there, then, with the gap confirmed,
// the epoch is bumped for the partition (Java markSequenceUnresolved, maybeResolveSequences).
func TestIdempotentExpiredBatchGapIsResolvedByBump(t *testing.T) {
	f := idempotentFixture(t, 1, func(c *Config) { c.DeliveryTimeoutMs = 30100; c.RequestTimeoutMs = 30000 })
	f.append(0, record('a'))
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	lost := f.append(0, record('b')) // sequence 1: sent, then the broker hangs
	f.runOnce()
	f.client.disconnect(t)
	f.client.notReady = map[int32]bool{1: true} // the broker hangs: no new connection
	f.runOnce()
	f.now = f.now.Add(31 * time.Second) // still queued for its retry when it expires
	f.runOnce()
	f.client.notReady = nil
	var dte *DeliveryTimeoutError
	if lost.calls != 1 || !errors.As(lost.err, &dte) {
		t.Fatalf("expired record: calls=%d err=%v, want a DeliveryTimeoutError", lost.calls, lost.err)
	}
	next := f.append(0, record('c'))
	f.runOnce()
	f.runOnce()
	f.deliversUnder("record after the expiry", next, 1, 0)
}

// An epoch bump for one partition must not touch another partition's queued retry: its first
// attempt may have been written, and only its original producer id, epoch and sequence let the
// broker recognise the retry as a duplicate (Java drainBatchesForOneNode).
func TestIdempotentBumpLeavesOtherPartitionsRetriesAlone(t *testing.T) {
	f := idempotentFixture(t, 2, nil)
	f.append(0, record('a'))
	f.append(1, record('a'))
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.append(0, record('b')) // partition 0, sequence 1: the gap
	f.append(1, record('b')) // partition 1, sequence 1: its answer is lost
	f.runOnce()
	if b := f.pendingBatch(0, 1); b.FirstSequence != 1 || b.ProducerEpoch != 0 {
		t.Fatalf("partition 1 first attempt seq %d epoch %d", b.FirstSequence, b.ProducerEpoch)
	}
	// Partition 0 is refused for good (a gap: bump), partition 1 times out (retry, and its
	// write may have happened).
	f.client.respond(t, answerByPartition(map[int32]int16{0: kerr.OutOfOrderSequenceNumber.Code, 1: kerr.RequestTimedOut.Code}, -1))
	f.runOnce()
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	if len(f.client.pending) == 1 {
		if _, ok := f.client.pending[0].Body.(*kmsg.InitProducerIDRequest); ok {
			// A bump by InitProducerId (the old way): let it through, then look at the retry.
			f.client.respond(t, initProducerIDAnswer(7, 1))
			f.runOnce()
			f.runOnce()
		}
	}
	retry, ok := f.pendingFor(1)
	if !ok {
		t.Fatal("partition 1's retry was not sent")
	}
	if retry.ProducerEpoch != 0 || retry.FirstSequence != 1 {
		t.Fatalf("partition 1's retry went with epoch %d sequence %d, want its own 0/1", retry.ProducerEpoch, retry.FirstSequence)
	}
	f.settle(5)
	// Once its retry is done, partition 1 moves to the new epoch from 0.
	f.append(1, record('c'))
	f.runOnce()
	if b := f.pendingBatch(0, 1); b.ProducerEpoch != 1 || b.FirstSequence != 0 {
		t.Fatalf("partition 1 after its retry: epoch %d sequence %d, want 1/0", b.ProducerEpoch, b.FirstSequence)
	}
}

// A split after MESSAGE_TOO_LARGE keeps the refused batch's producer id, epoch and sequences and
// bumps nothing (Java never bumps on a split).
func TestIdempotentSplitDoesNotBumpEpoch(t *testing.T) {
	f := idempotentFixture(t, 1, func(c *Config) { c.BatchSize = 400 })
	for i := 0; i < 4; i++ {
		f.append(0, strings.Repeat("x", 30))
	}
	f.runOnce()
	if b := f.pendingBatch(0, 0); b.NumRecords != 4 || b.FirstSequence != 0 {
		t.Fatalf("first batch: %d records at sequence %d", b.NumRecords, b.FirstSequence)
	}
	f.client.respond(t, produceAnswer(kerr.MessageTooLarge.Code, -1))
	f.runOnce()
	sent := len(f.client.sent)
	f.settle(10)
	var seqs []int32
	for _, r := range f.client.sent[sent:] {
		switch body := r.Body.(type) {
		case *kmsg.InitProducerIDRequest:
			t.Fatal("a split sent InitProducerId")
		case *kmsg.ProduceRequest:
			b := batchOf(t, body, 0)
			if b.ProducerEpoch != 0 {
				t.Fatalf("split batch under epoch %d, want 0", b.ProducerEpoch)
			}
			seqs = append(seqs, b.FirstSequence)
		}
	}
	if len(seqs) < 2 || seqs[0] != 0 {
		t.Fatalf("split batches went with sequences %v, want the refused batch's, from 0", seqs)
	}
}

// The bump is local: a partition that needs nothing waits for nobody.
func TestIdempotentBumpDoesNotStopOtherPartitions(t *testing.T) {
	f := idempotentFixture(t, 3, nil)
	for p := int32(0); p < 3; p++ {
		f.append(p, record('a'))
	}
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.append(0, record('b')) // will need a bump
	f.append(1, record('b')) // will stay in flight, unanswered
	f.runOnce()
	f.client.respond(t, answerByPartition(map[int32]int16{0: kerr.OutOfOrderSequenceNumber.Code, 1: 0}, 5))
	// Partition 1's next batch is in flight and stays unanswered while partition 0 bumps.
	f.append(1, record('c'))
	f.runOnce()
	stuck := len(f.client.pending)
	if stuck == 0 {
		t.Fatal("nothing in flight")
	}
	o := f.append(2, record('b'))
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	if _, found := f.pendingFor(2); !found {
		t.Fatal("partition 2's new batch waited for another partition's request in flight")
	}
	f.settle(5)
	if o.calls != 1 || o.err != nil {
		t.Fatalf("partition 2 record: calls=%d err=%v", o.calls, o.err)
	}
}

// The poll must wake for the next delivery.timeout.ms, so that expiry is not late by up to
// request.timeout.ms (Java's pollTimeout includes nextExpiryTimeMs).
func TestSenderPollTimeoutIncludesNextExpiry(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.DeliveryTimeoutMs = 30100; c.RequestTimeoutMs = 30000 })
	f.append(0, "v")
	f.runOnce() // in flight now, unanswered
	f.now = f.now.Add(time.Second)
	got := f.sender.sendProducerData(f.now)
	want := 29100 * time.Millisecond
	if got > want {
		t.Fatalf("poll timeout %v with a batch in flight that expires in %v", got, want)
	}
	f.client.notReady = map[int32]bool{1: true}
	f.append(0, "queued")
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	got = f.sender.sendProducerData(f.now)
	if got > 30100*time.Millisecond || got <= 0 {
		t.Fatalf("poll timeout %v with a queued batch expiring in about 30 s", got)
	}
}

// KIP-951: a NOT_LEADER_OR_FOLLOWER that names the new leader (CurrentLeader, with its endpoint
// in NodeEndpoints) moves the partition there at once, without waiting for a metadata round trip
// (Java's Sender.handleProduceResponse and Metadata.updatePartitionLeadership).
func TestSenderFollowsLeaderHintFromProduceResponse(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	o := f.append(0, "v")
	f.runOnce()
	f.client.respond(t, func(r kmsg.Request) kmsg.Response {
		resp := kafkatest.ProduceAnswer(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
			return kerr.NotLeaderForPartition.Code
		}, -1)
		p := &resp.Topics[0].Partitions[0]
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 5
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = 2, "127.0.0.1", 9093
		resp.Brokers = append(resp.Brokers, b)
		return resp
	})
	f.runOnce()
	tp := f.sender.meta.Fetch()
	if leader, ok := tp.LeaderFor(metadataTP("t", 0)); !ok || leader != 2 {
		t.Fatalf("leader after the hint: %d (ok %v), want 2", leader, ok)
	}
	if _, ok := tp.Node(2); !ok {
		t.Fatal("the hinted leader's endpoint is not a known node")
	}
	// A retry bound for a newer leader skips retry.backoff.ms (Java's
	// hasLeaderChangedForTheOngoingRetry): no time passes here.
	f.runOnce()
	if len(f.client.pending) == 0 {
		t.Fatal("the retry to the new leader waited out retry.backoff.ms")
	}
	if dst := f.client.pending[len(f.client.pending)-1].Destination; dst != 2 {
		t.Fatalf("retry went to node %d, want the hinted leader 2", dst)
	}
	f.client.respond(t, produceAnswer(0, 9))
	f.runOnce()
	if o.calls != 1 || o.err != nil {
		t.Fatalf("callback calls=%d err=%v", o.calls, o.err)
	}
}

func metadataTP(topic string, partition int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: topic, Partition: partition}
}

// A partition whose leader the broker list does not name cannot be sent to; the sender must
// ask for metadata rather than skip it silently until the next periodic refresh (Java's ready()
// counts such a leader as unknown and requests an update).
func TestSenderRequestsMetadataForLeaderMissingFromBrokers(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Leader, p.LeaderEpoch = 3, 1 // node 3 is not in Brokers
	f.meta.Update(topicMetadata(p), f.now)
	if f.meta.UpdateRequested() {
		t.Fatal("fixture: an update is already requested")
	}
	f.append(0, "v")
	f.runOnce()
	if !f.meta.UpdateRequested() {
		t.Fatal("a leader missing from the broker list did not request a metadata update")
	}
}

// expiryFixture is idempotentFixture (or, with idempotent false, the plain sender fixture) with
// delivery.timeout.ms 30.1 s and request.timeout.ms 30 s, and one record of partition 0
// acknowledged, so that its partition may have more than one batch in flight.
func expiryFixture(t *testing.T, idempotent bool, mutate func(*Config)) *senderFixture {
	t.Helper()
	timeouts := func(c *Config) {
		c.DeliveryTimeoutMs, c.RequestTimeoutMs = 30100, 30000
		if mutate != nil {
			mutate(c)
		}
	}
	var f *senderFixture
	if idempotent {
		f = idempotentFixture(t, 1, timeouts)
	} else {
		f = newSenderFixture(t, 1, timeouts)
	}
	first := f.append(0, record('a'))
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	if first.calls != 1 || first.err != nil {
		t.Fatalf("first record: calls=%d err=%v", first.calls, first.err)
	}
	return f
}

// wantExpiredNotSent checks that o's batch failed once with a DeliveryTimeoutError, that no
// produce request followed the first sent requests, and that its memory is back in the pool.
func (f *senderFixture) wantExpiredNotSent(o *outcome, sent int) {
	f.t.Helper()
	var dte *DeliveryTimeoutError
	if o.calls != 1 || !errors.As(o.err, &dte) {
		f.t.Fatalf("expired record: calls=%d err=%v, want one DeliveryTimeoutError", o.calls, o.err)
	}
	for _, r := range f.client.sent[sent:] {
		if req, ok := r.Body.(*kmsg.ProduceRequest); ok {
			b := batchOf(f.t, req, 0)
			f.t.Fatalf("the batch was sent (epoch %d, sequence %d) after its callback reported %v: "+
				"the broker may write records whose sender was told they failed", b.ProducerEpoch, b.FirstSequence, o.err)
		}
	}
	if f.acc.HasIncomplete() {
		f.t.Fatal("the expired batch's memory was not given back")
	}
	if pool := f.acc.BufferPool(); pool.AvailableMemory() != pool.TotalMemory() {
		f.t.Fatalf("buffer pool has %d of %d bytes available after the expiry", pool.AvailableMemory(), pool.TotalMemory())
	}
}

// A batch whose delivery.timeout.ms has passed when its broker can be sent to again must fail
// without being sent: its records' callbacks report the failure, and a caller that sends them
// again would otherwise find them written twice. Expired while still queued, the batch never got
// a sequence: the next batch takes the one it would have had, under the same epoch.
func TestIdempotentBatchExpiredWhenSendableIsNotSent(t *testing.T) {
	f := expiryFixture(t, true, nil)
	f.client.notReady = map[int32]bool{1: true}
	late := f.append(0, record('b'))
	f.runOnce()
	sent := len(f.client.sent)
	f.now = f.now.Add(30100 * time.Millisecond)
	f.client.notReady = nil // the broker is back in the same loop that finds the batch expired
	f.runOnce()
	f.wantExpiredNotSent(late, sent)
	next := f.append(0, record('c'))
	f.runOnce()
	f.deliversUnder("record after the expired batch", next, 0, 1)
}

// The same for a retry: its first attempt may have been written, so its sequence stays
// unresolved; once nothing else is unfinished on the partition, the gap (the acknowledged
// sequence is behind) bumps the epoch, and the next batch starts the partition at sequence 0.
func TestIdempotentRetryExpiredWhenSendableIsNotSent(t *testing.T) {
	f := expiryFixture(t, true, nil)
	late := f.append(0, record('b')) // sequence 1
	f.runOnce()
	f.client.respond(t, produceAnswer(kerr.NotLeaderForPartition.Code, -1))
	f.client.notReady = map[int32]bool{1: true}
	f.runOnce() // queued for its retry; the broker is unreachable
	if late.calls != 0 {
		t.Fatalf("retriable error reached the callback: %v", late.err)
	}
	sent := len(f.client.sent)
	f.now = f.now.Add(30100 * time.Millisecond)
	f.client.notReady = nil
	f.runOnce()
	f.wantExpiredNotSent(late, sent)
	next := f.append(0, record('c'))
	f.runOnce()
	f.deliversUnder("record after the expired retry", next, 1, 0)
}

// Without idempotence, with max.in.flight.requests.per.connection=1 (the sender mutes a partition
// while its request is in flight): the expired batch is not sent, and its partition is not left
// muted by a request that never went out.
func TestSenderBatchExpiredWhenSendableIsNotSent(t *testing.T) {
	f := expiryFixture(t, false, func(c *Config) { c.MaxInFlightRequestsPerConnection = 1 })
	f.client.notReady = map[int32]bool{1: true}
	late := f.append(0, record('b'))
	f.runOnce()
	sent := len(f.client.sent)
	f.now = f.now.Add(30100 * time.Millisecond)
	f.client.notReady = nil
	f.runOnce()
	f.wantExpiredNotSent(late, sent)
	next := f.append(0, record('c'))
	f.runOnce()
	if _, ok := f.pendingFor(0); !ok {
		t.Fatal("the next record was not sent: its partition stayed muted")
	}
	f.client.respond(t, produceAnswer(0, 1))
	f.runOnce()
	if next.calls != 1 || next.err != nil {
		t.Fatalf("next record: calls=%d err=%v, want delivered once", next.calls, next.err)
	}
}

// A retriable answer (REQUEST_TIMED_OUT, a dropped connection) read after delivery.timeout.ms
// ends an attempt that may have been written. It is an expiry: its sequence is unresolved, and
// the epoch stays. Failed as certainly not written, it would bump the epoch and re-stamp the
// partition's next batch, still in flight, whose retry under the new epoch and sequence 0 the
// broker would write even when it had already written the first attempt.
func TestIdempotentRetriableErrorAfterDeliveryTimeoutIsAnExpiry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		fail  func(*senderFixture)
	}{
		{"REQUEST_TIMED_OUT", kerr.RequestTimedOut, func(f *senderFixture) {
			f.client.respond(f.t, produceAnswer(kerr.RequestTimedOut.Code, -1))
		}},
		{"dropped connection", nil, func(f *senderFixture) { f.client.disconnect(f.t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := expiryFixture(t, true, nil)
			expired := f.append(0, record('b')) // sequence 1
			f.runOnce()
			f.now = f.now.Add(10 * time.Second)
			behind := f.append(0, record('c')) // sequence 2, ten seconds younger
			f.runOnce()
			if n := len(f.client.pending); n != 2 {
				t.Fatalf("%d requests in flight, want 2", n)
			}
			// The first batch's answer is read in the poll during which its delivery.timeout.ms
			// passed, before the next loop's expiry check sees it.
			f.now = f.now.Add(20200 * time.Millisecond)
			tc.fail(f)
			f.client.Poll(0, f.now)
			var dte *DeliveryTimeoutError
			if expired.calls != 1 || !errors.As(expired.err, &dte) {
				t.Fatalf("expired record: calls=%d err=%v, want one DeliveryTimeoutError", expired.calls, expired.err)
			}
			if tc.cause != nil && !errors.Is(expired.err, tc.cause) {
				t.Fatalf("expired record's error %v does not name the last error %v", expired.err, tc.cause)
			}
			// The batch behind it fails retriably too: its first attempt may have been written,
			// and only its own epoch and sequence let the broker recognise the retry.
			f.client.respond(t, produceAnswer(kerr.RequestTimedOut.Code, -1))
			f.runOnce()
			f.now = f.now.Add(200 * time.Millisecond)
			f.runOnce()
			retry, ok := f.pendingFor(0)
			if !ok {
				t.Fatal("the batch behind the expired one was not retried")
			}
			if retry.ProducerEpoch != 0 || retry.FirstSequence != 2 {
				t.Fatalf("retry sent under epoch %d sequence %d, want its own 0/2: a broker that wrote its first "+
					"attempt would write it again", retry.ProducerEpoch, retry.FirstSequence)
			}
			f.client.respond(t, produceAnswer(0, 2))
			f.runOnce()
			if behind.calls != 1 || behind.err != nil {
				t.Fatalf("record behind: calls=%d err=%v, want delivered once", behind.calls, behind.err)
			}
			// Its acknowledgement shows the expired batch written: the sequence is resolved
			// without a bump.
			next := f.append(0, record('d'))
			f.runOnce()
			f.deliversUnder("record after the resolved expiry", next, 0, 3)
			if f.acc.HasIncomplete() {
				t.Fatal("a batch's memory was not given back")
			}
		})
	}
}

// With WithExpiryInOrder, a retriable answer read after delivery.timeout.ms is an expiry like
// any other: the younger batch of the partition, in flight behind it, fails with it (Behind),
// so that a caller sending both again keeps their order.
func TestExpiryInOrderAlsoWhenTheTimeoutIsSeenInAnAnswer(t *testing.T) {
	f := expiryFixture(t, true, nil)
	f.sender.expireInOrder = true
	expired := f.append(0, record('b'))
	f.runOnce()
	f.now = f.now.Add(10 * time.Second)
	behind := f.append(0, record('c'))
	f.runOnce()
	if n := len(f.client.pending); n != 2 {
		t.Fatalf("%d requests in flight, want 2", n)
	}
	f.now = f.now.Add(20200 * time.Millisecond)
	f.client.respond(t, produceAnswer(kerr.RequestTimedOut.Code, -1))
	f.client.Poll(0, f.now)
	var dte *DeliveryTimeoutError
	if expired.calls != 1 || !errors.As(expired.err, &dte) || dte.Behind {
		t.Fatalf("expired record: calls=%d err=%v, want its own expiry", expired.calls, expired.err)
	}
	if behind.calls != 1 || !errors.As(behind.err, &dte) || !dte.Behind {
		t.Fatalf("younger record: calls=%d err=%v, want failed behind the expired one", behind.calls, behind.err)
	}
}

// TestSenderDoesNotSpinOnAHeldBatch: a partition whose next batch is held (the first batch of
// its epoch is still unacknowledged) has a ready leader but nothing to drain: the sender's poll
// waits for the response instead of returning at once (timeout 0) and looping, which ran the
// sender hot for as long as the response took (up to request.timeout.ms against a hung broker).
func TestSenderDoesNotSpinOnAHeldBatch(t *testing.T) {
	f := idempotentFixture(t, 1, nil)
	f.sendTwo(strings.Repeat("a", 60), strings.Repeat("b", 60)) // a batch each
	if n := len(f.client.pending); n != 1 {
		t.Fatalf("%d produce requests in flight, want the first batch's alone", n)
	}
	f.client.polls = nil
	for range 3 {
		f.now = f.now.Add(time.Millisecond)
		f.runOnce()
	}
	for i, d := range f.client.polls {
		if d == 0 {
			t.Fatalf("poll %d returned at once (timeout 0) with nothing sendable: the sender spins; polls %v", i, f.client.polls)
		}
	}
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.runOnce()
	if b := batchOf(t, f.lastProduce(), 0); b.FirstSequence != 1 {
		t.Fatalf("the held batch went with sequence %d once the first was acknowledged, want 1", b.FirstSequence)
	}
}
