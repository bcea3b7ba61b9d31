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
