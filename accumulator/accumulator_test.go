package accumulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// fakeCluster maps partitions to leaders; partitions absent from it have no known leader.
type fakeCluster struct {
	leaders map[metadata.TopicPartition]int32
	byNode  map[int32][]metadata.TopicPartition
}

func newCluster(assign map[int32][]metadata.TopicPartition) *fakeCluster {
	c := &fakeCluster{leaders: map[metadata.TopicPartition]int32{}, byNode: assign}
	for node, tps := range assign {
		for _, tp := range tps {
			c.leaders[tp] = node
		}
	}
	return c
}

func (c *fakeCluster) LeaderFor(tp metadata.TopicPartition) (int32, bool) {
	n, ok := c.leaders[tp]
	return n, ok
}

func (c *fakeCluster) PartitionsForNode(node int32) []metadata.TopicPartition { return c.byNode[node] }

// PartitionCount counts the topic's partitions the fixture assigns a leader.
func (c *fakeCluster) PartitionCount(topic string) int {
	n := 0
	for tp := range c.leaders {
		if tp.Topic == topic {
			n++
		}
	}
	return n
}

// LeaderEpochFor knows no epochs: the leader-change tests are the sender's (producer/faults_sender_test.go).
func (c *fakeCluster) LeaderEpochFor(metadata.TopicPartition) (int32, bool) { return 0, false }

func tp(topic string, p int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: topic, Partition: p}
}

var (
	t0    = time.UnixMilli(1_700_000_000_000)
	p0    = tp("logs", 0)
	p1    = tp("logs", 1)
	p2    = tp("logs", 2)
	p3    = tp("logs", 3)
	value = bytes.Repeat([]byte("v"), 100)
)

// recordSize100 is the wire size of a record with a nil key and the 100-byte value, while its
// deltas fit one byte: 9 such records do not fit a 1024-byte batch, 8 do.
const recordSize100 = 109

func newTestAccumulator(cfg Config) *RecordAccumulator {
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1024
	}
	if cfg.BufferMemory == 0 {
		cfg.BufferMemory = 64 * 1024
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0 }
	}
	return New(cfg)
}

func mustAppend(t *testing.T, a *RecordAccumulator, tp metadata.TopicPartition, v []byte, cb Callback, now time.Time) AppendResult {
	t.Helper()
	res, err := a.Append(context.Background(), tp, AppendRecord{Timestamp: now, Value: v, Callback: cb, Now: now})
	if err != nil {
		t.Fatalf("Append to %s: %v", tp, err)
	}
	return res
}

// fillBatch appends records of 100 bytes to tp until a batch is full, returning that batch.
func fillBatch(t *testing.T, a *RecordAccumulator, tp metadata.TopicPartition, cb Callback, now time.Time) *ProducerBatch {
	t.Helper()
	first := mustAppend(t, a, tp, value, cb, now)
	for {
		res := mustAppend(t, a, tp, value, cb, now)
		if res.Batch != first.Batch {
			return first.Batch
		}
	}
}

func TestAppendFillsBatches(t *testing.T) {
	a := newTestAccumulator(Config{Linger: 10 * time.Millisecond})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	var first *ProducerBatch
	for i := range 8 {
		res := mustAppend(t, a, p0, value, nil, t0)
		if res.NewBatchCreated != (i == 0) || res.BatchIsFull {
			t.Fatalf("record %d: new %v full %v", i, res.NewBatchCreated, res.BatchIsFull)
		}
		if i == 0 {
			first = res.Batch
		} else if res.Batch != first {
			t.Fatalf("record %d went to another batch", i)
		}
	}
	if got := first.EstimatedSize(); got != recordBatchOverhead+8*recordSize100 {
		t.Fatalf("EstimatedSize = %d, want %d", got, recordBatchOverhead+8*recordSize100)
	}
	if r := a.Ready(cluster, t0); len(r.ReadyNodes) != 0 || r.NextReadyCheckDelay != 10*time.Millisecond {
		t.Fatalf("Ready with one open batch = %+v, want no node for 10ms", r)
	}
	// The ninth does not fit: a new batch, and the sender should wake for the full one.
	res := mustAppend(t, a, p0, value, nil, t0)
	if !res.NewBatchCreated || !res.BatchIsFull || res.Batch == first || !first.IsFull() {
		t.Fatalf("ninth record: %+v, first full %v", res, first.IsFull())
	}
	if r := a.Ready(cluster, t0); !slices.Equal(r.ReadyNodes, []int32{1}) {
		t.Fatalf("Ready = %+v, want node 1 (full batch, linger not passed)", r)
	}
	got := a.Drain(cluster, []int32{1}, 1<<20, t0)
	if len(got[1]) != 1 || got[1][0] != first || first.RecordCount() != 8 || !first.Drained.Equal(t0) {
		t.Fatalf("Drain = %v, want the first batch with 8 records", got)
	}
	if got := a.BufferPool().AvailableMemory(); got != 64*1024-2*1024 {
		t.Fatalf("AvailableMemory = %d, want two batches taken", got)
	}
}

// TestAppendLingerDue: a new batch that only linger.ms makes sendable says when it is due, which
// is when Ready first finds it ready; a batch sendable at once for any of Ready's other reasons
// (a full one before it, linger.ms 0, a flush) says nothing, and the
// sender must wake now.
func TestAppendLingerDue(t *testing.T) {
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}})
	a := newTestAccumulator(Config{Linger: 10 * time.Millisecond})
	res := mustAppend(t, a, p0, value, nil, t0)
	if !res.NewBatchCreated || !res.LingerDue.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("new batch: %+v, want LingerDue t0+10ms", res)
	}
	if r := a.Ready(cluster, res.LingerDue.Add(-time.Nanosecond)); len(r.ReadyNodes) != 0 {
		t.Fatalf("Ready before LingerDue = %+v", r)
	}
	if r := a.Ready(cluster, res.LingerDue); !slices.Equal(r.ReadyNodes, []int32{1}) {
		t.Fatalf("Ready at LingerDue = %+v, want node 1", r)
	}
	if res := mustAppend(t, a, p0, value, nil, t0); res.NewBatchCreated || !res.LingerDue.IsZero() {
		t.Fatalf("a record into the open batch: %+v", res)
	}
	// The batch after a full one is sendable at once: the full one is.
	fillBatch(t, a, p0, nil, t0)
	if res := mustAppend(t, a, p0, value, nil, t0); !res.BatchIsFull || !res.LingerDue.IsZero() {
		t.Fatalf("behind a full batch: %+v", res)
	}
	a.BeginFlush()
	if res := mustAppend(t, a, p1, value, nil, t0); !res.NewBatchCreated || !res.LingerDue.IsZero() {
		t.Fatalf("during a flush: %+v", res)
	}
	if res := mustAppend(t, newTestAccumulator(Config{}), p0, value, nil, t0); !res.NewBatchCreated || !res.LingerDue.IsZero() {
		t.Fatalf("linger.ms 0: %+v", res)
	}
}

func TestAppendOversizeRecord(t *testing.T) {
	a := newTestAccumulator(Config{BufferMemory: 4096})
	big := bytes.Repeat([]byte("b"), 2000)
	res := mustAppend(t, a, p0, big, nil, t0)
	want := EstimateRecordSize(nil, big, nil)
	if cap(res.Batch.poolBuf) != want || res.Batch.RecordCount() != 1 {
		t.Fatalf("batch of %d bytes with %d records, want its own batch of %d", cap(res.Batch.poolBuf), res.Batch.RecordCount(), want)
	}
	if next := mustAppend(t, a, p0, value, nil, t0); next.Batch == res.Batch || !next.BatchIsFull {
		t.Fatal("a record after the oversize one should start a batch, leaving the big one full")
	}
	_, err := a.Append(context.Background(), p0, AppendRecord{Timestamp: t0, Value: bytes.Repeat([]byte("h"), 5000), Now: t0})
	if !errors.Is(err, ErrExceedsBufferMemory) {
		t.Fatalf("err = %v, want ErrExceedsBufferMemory", err)
	}
}

func TestReady(t *testing.T) {
	const linger, backoff = 10 * time.Millisecond, 100 * time.Millisecond
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}, 2: {p1}})
	noDelay := time.Duration(math.MaxInt64)
	tests := []struct {
		name      string
		setup     func(t *testing.T, a *RecordAccumulator)
		now       time.Time
		wantNodes []int32
		wantDelay time.Duration
		wantTopic []string
	}{
		{"nothing queued", func(*testing.T, *RecordAccumulator) {}, t0, nil, noDelay, nil},
		{"before linger", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, p0, value, nil, t0)
		}, t0.Add(4 * time.Millisecond), nil, 6 * time.Millisecond, nil},
		{"linger passed", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, p0, value, nil, t0)
		}, t0.Add(linger), []int32{1}, noDelay, nil},
		{"full", func(t *testing.T, a *RecordAccumulator) {
			fillBatch(t, a, p0, nil, t0)
		}, t0, []int32{1}, noDelay, nil},
		{"one node per leader, shortest delay", func(t *testing.T, a *RecordAccumulator) {
			fillBatch(t, a, p0, nil, t0)
			mustAppend(t, a, p1, value, nil, t0.Add(-3*time.Millisecond))
		}, t0, []int32{1}, 7 * time.Millisecond, nil},
		{"flush in progress", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, p0, value, nil, t0)
			a.BeginFlush()
		}, t0, []int32{1}, noDelay, nil},
		{"closed", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, p0, value, nil, t0)
			a.Close()
		}, t0, []int32{1}, noDelay, nil},
		{"memory exhausted", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, p0, value, nil, t0)
			exhaustPool(t, a)
		}, t0, []int32{1}, noDelay, nil},
		{"muted", func(t *testing.T, a *RecordAccumulator) {
			fillBatch(t, a, p0, nil, t0)
			a.MutePartition(p0)
		}, t0, nil, noDelay, nil},
		{"unknown leader", func(t *testing.T, a *RecordAccumulator) {
			mustAppend(t, a, tp("other", 0), value, nil, t0)
			mustAppend(t, a, tp("other", 1), value, nil, t0)
		}, t0.Add(time.Hour), nil, noDelay, []string{"other"}},
		{"retry inside backoff, even when full and flushing", func(t *testing.T, a *RecordAccumulator) {
			b := retried(t, a, p0, t0.Add(20*time.Millisecond))
			b.closeForAppends()
			a.BeginFlush()
		}, t0.Add(50 * time.Millisecond), nil, 70 * time.Millisecond, nil},
		{"retry after backoff", func(t *testing.T, a *RecordAccumulator) {
			retried(t, a, p0, t0.Add(20*time.Millisecond))
		}, t0.Add(120 * time.Millisecond), []int32{1}, noDelay, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAccumulator(Config{Linger: linger, RetryBackoff: backoff})
			tt.setup(t, a)
			r := a.Ready(cluster, tt.now)
			if !slices.Equal(r.ReadyNodes, tt.wantNodes) || r.NextReadyCheckDelay != tt.wantDelay ||
				!slices.Equal(r.UnknownLeaderTopics, tt.wantTopic) {
				t.Fatalf("Ready = %+v, want nodes %v delay %v unknown %v", r, tt.wantNodes, tt.wantDelay, tt.wantTopic)
			}
		})
	}
}

// exhaustPool takes the pool's free memory and parks an allocation behind it, so the pool has
// a waiter until the test ends.
func exhaustPool(t *testing.T, a *RecordAccumulator) {
	t.Helper()
	p := a.BufferPool()
	held, err := p.Allocate(context.Background(), int(p.AvailableMemory()), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Allocate(ctx, 10, time.Time{})
	}()
	t.Cleanup(func() { cancel(); <-done; p.Deallocate(held) })
	eventually(t, "a waiter", func() bool { return p.QueuedWaiters() == 1 })
}

// retried drains tp's only batch at t0 and re-enqueues it at when, as a failed attempt would.
func retried(t *testing.T, a *RecordAccumulator, tp metadata.TopicPartition, when time.Time) *ProducerBatch {
	t.Helper()
	mustAppend(t, a, tp, value, nil, t0)
	a.BeginFlush()
	got := a.Drain(newCluster(map[int32][]metadata.TopicPartition{1: {tp}}), []int32{1}, 1<<20, t0)
	a.flushesInProgress.Add(-1)
	b := got[1][0]
	a.Reenqueue(b, when)
	if b.Attempts != 1 || !b.InRetry() || !b.LastAttempt.Equal(when) {
		t.Fatalf("after Reenqueue: attempts %d retry %v last %v", b.Attempts, b.InRetry(), b.LastAttempt)
	}
	return b
}

// TestDrainRoundRobin: with room for one batch per request, consecutive drains of a node take
// its partitions in turn, continuing where the previous drain stopped (Java's per-node drain
// index), so no partition starves.
func TestDrainRoundRobin(t *testing.T) {
	a := newTestAccumulator(Config{})
	parts := []metadata.TopicPartition{p0, p1, p2, p3}
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: parts})
	for _, p := range parts {
		fillBatch(t, a, p, nil, t0)
		fillBatch(t, a, p, nil, t0)
	}
	oneBatch := recordBatchOverhead + 8*recordSize100
	var order []metadata.TopicPartition
	for range 8 {
		got := a.Drain(cluster, []int32{1}, oneBatch, t0)
		if len(got[1]) != 1 {
			t.Fatalf("drained %d batches, want 1", len(got[1]))
		}
		order = append(order, got[1][0].TopicPartition)
	}
	want := append(slices.Clone(parts), parts...)
	if !slices.Equal(order, want) {
		t.Fatalf("drain order %v, want %v", order, want)
	}

	// Without a size limit one drain takes every partition's first batch.
	got := a.Drain(cluster, []int32{1}, 1<<20, t0)
	if len(got[1]) != 4 {
		t.Fatalf("unlimited drain took %d batches, want 4", len(got[1]))
	}
}

func TestDrainMaxRequestSize(t *testing.T) {
	a := newTestAccumulator(Config{})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}, 2: {p2}})
	fillBatch(t, a, p0, nil, t0)
	fillBatch(t, a, p1, nil, t0)
	fillBatch(t, a, p2, nil, t0)
	// Smaller than one batch: the first batch of each request still goes, alone.
	got := a.Drain(cluster, []int32{1, 2}, 100, t0)
	if len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("drained %d and %d batches, want 1 each", len(got[1]), len(got[2]))
	}
	if got[1][0].TopicPartition != p0 || got[2][0].TopicPartition != p2 {
		t.Fatalf("drained %s and %s", got[1][0].TopicPartition, got[2][0].TopicPartition)
	}
	// Room for two batches: p1's full one, then p0's one-record batch (fillBatch leaves the
	// record that did not fit in a batch of its own), but not p1's.
	got = a.Drain(cluster, []int32{1}, recordBatchOverhead+8*recordSize100+recordBatchOverhead+recordSize100, t0)
	if len(got[1]) != 2 || got[1][0].RecordCount() != 8 || got[1][1].RecordCount() != 1 {
		t.Fatalf("drained %v, want p1's full batch and p0's single record", got[1])
	}
	if got := a.Drain(cluster, []int32{1, 2}, 1<<20, t0); len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("drained %v, want the last single-record batches", got)
	}
	if got := a.Drain(cluster, []int32{1, 2}, 1<<20, t0); len(got) != 0 {
		t.Fatalf("drained %v from empty deques; nodes without batches should be absent", got)
	}
}

func TestMutePartition(t *testing.T) {
	a := newTestAccumulator(Config{})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}})
	fillBatch(t, a, p0, nil, t0)
	a.MutePartition(p0)
	if r := a.Ready(cluster, t0); len(r.ReadyNodes) != 0 {
		t.Fatalf("Ready = %v with the only full partition muted", r.ReadyNodes)
	}
	fillBatch(t, a, p1, nil, t0)
	got := a.Drain(cluster, []int32{1}, 1<<20, t0)
	if len(got[1]) != 1 || got[1][0].TopicPartition != p1 {
		t.Fatalf("drained %v, want only %s", got[1], p1)
	}
	a.UnmutePartition(p0)
	got = a.Drain(cluster, []int32{1}, 1<<20, t0)
	if !slices.ContainsFunc(got[1], func(b *ProducerBatch) bool { return b.TopicPartition == p0 }) {
		t.Fatalf("after unmute drained %v, want %s among them", got[1], p0)
	}
}

func TestExpiredBatches(t *testing.T) {
	a := newTestAccumulator(Config{DeliveryTimeout: time.Second})
	bigValue := bytes.Repeat([]byte("x"), 900) // one per 1024-byte batch
	old := mustAppend(t, a, p0, bigValue, nil, t0).Batch
	newer := mustAppend(t, a, p0, bigValue, nil, t0.Add(500*time.Millisecond)).Batch
	other := mustAppend(t, a, p1, bigValue, nil, t0.Add(200*time.Millisecond)).Batch
	if old == newer {
		t.Fatal("expected two batches on p0")
	}
	if got := a.ExpiredBatches(t0.Add(999 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("expired %d batches before the timeout", len(got))
	}
	got := a.ExpiredBatches(t0.Add(time.Second))
	if len(got) != 1 || got[0] != old {
		t.Fatalf("expired %v, want the oldest batch only", got)
	}
	if want := t0.Add(1200 * time.Millisecond); !a.NextExpiryTime().Equal(want) {
		t.Fatalf("NextExpiryTime = %v, want %v", a.NextExpiryTime(), want)
	}
	got = a.ExpiredBatches(t0.Add(2 * time.Second))
	if len(got) != 2 || !slices.Contains(got, newer) || !slices.Contains(got, other) {
		t.Fatalf("expired %v, want the other two", got)
	}
	if a.HasUndrained() || !a.HasIncomplete() {
		t.Fatal("expired batches leave the deques but stay incomplete until deallocated")
	}
}

func TestReenqueueOrder(t *testing.T) {
	tests := []struct {
		name      string
		sequences []int32 // base sequences of the drained batches, -1 for none
		reenqueue []int   // indexes of drained batches, in re-enqueue order
		want      []int   // deque order afterwards; -1 is the newer, never-drained batch
	}{
		{"no sequence: each at the head", []int32{-1, -1, -1}, []int{0, 2, 1}, []int{1, 2, 0, -1}},
		{"by sequence whatever the order", []int32{0, 5, 10}, []int{2, 0, 1}, []int{0, 1, 2, -1}},
		{"by sequence, reversed", []int32{0, 5, 10}, []int{2, 1, 0}, []int{0, 1, 2, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAccumulator(Config{})
			bigValue := bytes.Repeat([]byte("x"), 900)
			var drained []*ProducerBatch
			for _, seq := range tt.sequences {
				b := mustAppend(t, a, p0, bigValue, nil, t0).Batch
				if seq >= 0 {
					b.SetProducerState(1, 0, seq)
				}
				drained = append(drained, b)
			}
			fresh := mustAppend(t, a, p0, bigValue, nil, t0).Batch
			dq := a.getDeque(p0)
			dq.batches = dq.batches[len(drained):] // as if all were in flight
			for _, i := range tt.reenqueue {
				a.Reenqueue(drained[i], t0)
			}
			var order []int
			for _, b := range dq.batches {
				if b == fresh {
					order = append(order, -1)
				} else {
					order = append(order, slices.Index(drained, b))
				}
			}
			if !slices.Equal(order, tt.want) {
				t.Fatalf("deque order %v, want %v", order, tt.want)
			}
		})
	}
}

func TestSplitAndReenqueue(t *testing.T) {
	for _, withSeq := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequence=%v", withSeq), func(t *testing.T) {
			a := newTestAccumulator(Config{Compression: CodecGzip})
			cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
			calls := make([]int, 8)
			offsets := make([]int64, 8)
			next := 0
			var mu sync.Mutex
			cbFor := func(i int) Callback {
				return func(md RecordMetadata, err error) {
					mu.Lock()
					defer mu.Unlock()
					calls[i]++
					offsets[i] = md.Offset
				}
			}
			first := mustAppend(t, a, p0, value, cbFor(next), t0).Batch
			for next = 1; next < 8; next++ {
				mustAppend(t, a, p0, value, cbFor(next), t0)
			}
			later := mustAppend(t, a, p0, value, nil, t0).Batch // the ninth starts a new batch
			big := a.Drain(cluster, []int32{1}, 1<<20, t0)[1][0]
			if big != first {
				t.Fatal("drained the wrong batch")
			}
			if withSeq {
				big.SetProducerState(77, 3, 40)
			}
			before := a.BufferPool().AvailableMemory()

			if n := a.SplitAndReenqueue(big); n != 2 {
				t.Fatalf("split into %d batches, want 2 halves", n)
			}
			a.Deallocate(big)
			if got := a.BufferPool().AvailableMemory(); got != before+1024 {
				t.Fatalf("AvailableMemory = %d, want the big batch's 1024 bytes back on top of %d", got, before)
			}
			if big.Complete(0, -1) {
				t.Fatal("a split batch must not complete its records itself")
			}
			dq := a.getDeque(p0)
			if len(dq.batches) != 3 || dq.batches[2] != later {
				t.Fatalf("deque holds %d batches, want two halves before the newer batch", len(dq.batches))
			}
			halves := slices.Clone(dq.batches[:2])
			for i, h := range halves {
				if h.RecordCount() != 4 || !h.IsSplit() || !h.IsFull() || !h.Created.Equal(big.Created) || h.Attempts != 0 {
					t.Fatalf("half %d: %d records split %v full %v", i, h.RecordCount(), h.IsSplit(), h.IsFull())
				}
				wantSeq := int32(-1)
				if withSeq {
					wantSeq = 40 + int32(4*i)
				}
				if h.BaseSequence() != wantSeq || (withSeq && (h.ProducerID() != 77 || h.ProducerEpoch() != 3)) {
					t.Fatalf("half %d: sequence %d producer %d/%d", i, h.BaseSequence(), h.ProducerID(), h.ProducerEpoch())
				}
				_, recs := decodeBatch(t, h.AppendEncoded(nil))
				if len(recs) != 4 || !bytes.Equal(recs[0].Value, value) {
					t.Fatalf("half %d decodes to %d records", i, len(recs))
				}
			}

			flushed := make(chan error, 1)
			a.BeginFlush()
			go func() { flushed <- a.AwaitFlushCompletion(context.Background()) }()
			got := a.Drain(cluster, []int32{1}, 1<<20, t0)
			if got[1][0] != halves[0] {
				t.Fatal("first half should be drained first")
			}
			halves[0].Complete(100, -1)
			a.Deallocate(halves[0])
			if got = a.Drain(cluster, []int32{1}, 1<<20, t0); got[1][0] != halves[1] {
				t.Fatal("second half should be drained next")
			}
			halves[1].Complete(104, -1)
			a.Deallocate(halves[1])
			if got = a.Drain(cluster, []int32{1}, 1<<20, t0); got[1][0] != later {
				t.Fatal("the newer batch should come after both halves")
			}
			later.Complete(108, -1)
			a.Deallocate(later)
			if err := <-flushed; err != nil {
				t.Fatalf("flush: %v", err)
			}
			for i := range 8 {
				if calls[i] != 1 || offsets[i] != 100+int64(i) {
					t.Fatalf("record %d: %d calls, offset %d", i, calls[i], offsets[i])
				}
			}
			if a.HasIncomplete() || a.BufferPool().AvailableMemory() != 64*1024 {
				t.Fatalf("incomplete %v, available %d", a.HasIncomplete(), a.BufferPool().AvailableMemory())
			}
		})
	}
}

// TestSplitDownToSingleRecords: each split halves, so repeated MESSAGE_TOO_LARGE ends in
// batches of one record, which the sender then fails.
func TestSplitDownToSingleRecords(t *testing.T) {
	a := newTestAccumulator(Config{})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	mustAppend(t, a, p0, value, nil, t0)
	mustAppend(t, a, p0, value, nil, t0)
	mustAppend(t, a, p0, value, nil, t0)
	b := a.Drain(cluster, []int32{1}, 1<<20, t0)[1][0]
	for rounds := 0; b.RecordCount() > 1; rounds++ {
		if rounds > 3 {
			t.Fatal("split does not converge")
		}
		if a.SplitAndReenqueue(b) < 2 {
			t.Fatalf("split of %d records made fewer than 2 batches", b.RecordCount())
		}
		a.Deallocate(b)
		b = a.Drain(cluster, []int32{1}, 1<<20, t0)[1][0]
	}
}

// fakeSequences is a SequenceSource for drain tests.
type fakeSequences struct {
	ok       bool
	next     map[metadata.TopicPartition]int32
	stop     map[metadata.TopicPartition]bool
	inFlight []*ProducerBatch
}

func (f *fakeSequences) ProducerIDAndEpoch() (int64, int16, bool) { return 1000, 2, f.ok }
func (f *fakeSequences) NextSequence(tp metadata.TopicPartition) int32 {
	return f.next[tp]
}
func (f *fakeSequences) IncrementSequence(tp metadata.TopicPartition, n int32) { f.next[tp] += n }
func (f *fakeSequences) ShouldStopDrain(tp metadata.TopicPartition, _ *ProducerBatch) bool {
	return f.stop[tp]
}
func (f *fakeSequences) AddInFlightBatch(b *ProducerBatch)                     { f.inFlight = append(f.inFlight, b) }
func (f *fakeSequences) MaybeUpdateProducerIDAndEpoch(metadata.TopicPartition) {}

func TestIdempotentDrain(t *testing.T) {
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}})
	setup := func(t *testing.T) (*RecordAccumulator, *fakeSequences) {
		a := newTestAccumulator(Config{Idempotent: true})
		seqs := &fakeSequences{ok: true, next: map[metadata.TopicPartition]int32{p1: 7}, stop: map[metadata.TopicPartition]bool{}}
		a.SetSequenceSource(seqs)
		for range 2 {
			fillBatch(t, a, p0, nil, t0)
			fillBatch(t, a, p1, nil, t0)
		}
		return a, seqs
	}
	drainAll := func(a *RecordAccumulator) []*ProducerBatch {
		return a.Drain(cluster, []int32{1}, 1<<20, t0)[1]
	}

	t.Run("sequences follow record counts", func(t *testing.T) {
		a, seqs := setup(t)
		first := drainAll(a)
		second := drainAll(a)
		if len(first) != 2 || len(second) != 2 {
			t.Fatalf("drained %d then %d", len(first), len(second))
		}
		for _, b := range append(first, second...) {
			if b.ProducerID() != 1000 || b.ProducerEpoch() != 2 {
				t.Fatalf("%s: producer %d/%d", b.TopicPartition, b.ProducerID(), b.ProducerEpoch())
			}
		}
		seqOf := func(bs []*ProducerBatch, tp metadata.TopicPartition) int32 {
			for _, b := range bs {
				if b.TopicPartition == tp {
					return b.BaseSequence()
				}
			}
			return -2
		}
		if seqOf(first, p0) != 0 || seqOf(second, p0) != 8 || seqOf(first, p1) != 7 || seqOf(second, p1) != 15 {
			t.Fatalf("sequences p0 %d,%d p1 %d,%d", seqOf(first, p0), seqOf(second, p0), seqOf(first, p1), seqOf(second, p1))
		}
		if seqs.next[p0] != 16 || len(seqs.inFlight) != 4 {
			t.Fatalf("next p0 %d, %d tracked in flight", seqs.next[p0], len(seqs.inFlight))
		}
		_, recs := decodeBatch(t, second[0].AppendEncoded(nil))
		if len(recs) != 8 {
			t.Fatalf("decoded %d records", len(recs))
		}
	})
	t.Run("a reset sequence is cleared at the next drain", func(t *testing.T) {
		// Java's ProducerBatch.close, at every drain, clears reopened: the refusal of the
		// batch's next attempt concerns the sequences it was sent with.
		a, _ := setup(t)
		b := drainAll(a)[0]
		b.ResetProducerState(1000, 3, 0)
		if !b.SequenceHasBeenReset() {
			t.Fatal("ResetProducerState did not mark the batch")
		}
		a.Reenqueue(b, t0.Add(time.Second))
		var again *ProducerBatch
		for _, d := range a.Drain(cluster, []int32{1}, 1<<20, t0.Add(time.Hour))[1] {
			if d == b {
				again = d
			}
		}
		if again == nil {
			t.Fatal("the batch sent again was not drained")
		}
		if again.SequenceHasBeenReset() {
			t.Error("SequenceHasBeenReset still true after the batch was drained again")
		}
	})
	t.Run("no producer id drains nothing", func(t *testing.T) {
		a, seqs := setup(t)
		seqs.ok = false
		if got := a.Drain(cluster, []int32{1}, 1<<20, t0); len(got) != 0 {
			t.Fatalf("drained %v without a producer id", got)
		}
	})
	t.Run("no sequence source drains nothing", func(t *testing.T) {
		a := newTestAccumulator(Config{Idempotent: true})
		fillBatch(t, a, p0, nil, t0)
		if got := a.Drain(cluster, []int32{1}, 1<<20, t0); len(got) != 0 {
			t.Fatalf("drained %v without a sequence source", got)
		}
	})
	t.Run("held-back partition is skipped", func(t *testing.T) {
		a, seqs := setup(t)
		seqs.stop[p0] = true
		got := drainAll(a)
		if len(got) != 1 || got[0].TopicPartition != p1 {
			t.Fatalf("drained %v, want only %s", got, p1)
		}
	})
	t.Run("retry keeps its sequence", func(t *testing.T) {
		a, seqs := setup(t)
		b := drainAll(a)[0]
		seq := b.BaseSequence()
		a.Reenqueue(b, t0)
		again := drainAll(a)
		if !slices.Contains(again, b) || b.BaseSequence() != seq || seqs.next[b.TopicPartition] != seq+8 {
			t.Fatalf("retried batch sequence %d (was %d), next %d", b.BaseSequence(), seq, seqs.next[b.TopicPartition])
		}
	})
}

func TestFlush(t *testing.T) {
	a := newTestAccumulator(Config{Linger: time.Hour})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	mustAppend(t, a, p0, value, nil, t0)
	a.BeginFlush()
	if r := a.Ready(cluster, t0); len(r.ReadyNodes) != 1 {
		t.Fatal("a flush should make the partition ready despite linger")
	}
	flushed := make(chan error, 1)
	go func() { flushed <- a.AwaitFlushCompletion(context.Background()) }()
	b := a.Drain(cluster, []int32{1}, 1<<20, t0)[1][0]
	select {
	case err := <-flushed:
		t.Fatalf("flush returned (%v) before the batch completed", err)
	default:
	}
	b.Complete(0, -1)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if a.flushInProgress() {
		t.Fatal("flush still in progress")
	}

	// A cancelled wait also ends the flush.
	mustAppend(t, a, p0, value, nil, t0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.BeginFlush()
	if err := a.AwaitFlushCompletion(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if a.flushInProgress() {
		t.Fatal("flush still in progress after cancel")
	}
}

func TestAbortIncompleteBatches(t *testing.T) {
	a := newTestAccumulator(Config{})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}})
	var calls atomic.Int32
	errClosing := errors.New("producer closed forcefully")
	cb := func(md RecordMetadata, err error) {
		if err != errClosing || md.Offset != -1 {
			t.Errorf("callback got %+v, %v", md, err)
		}
		calls.Add(1)
	}
	fillBatch(t, a, p0, cb, t0) // 8 records, plus one in the next batch
	mustAppend(t, a, p1, value, cb, t0)
	inFlight := a.Drain(cluster, []int32{1}, 1<<20, t0)[1]
	mustAppend(t, a, p1, value, cb, t0)

	a.Close()
	if _, err := a.Append(context.Background(), p0, AppendRecord{Timestamp: t0, Value: value, Callback: cb, Now: t0}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	a.AbortIncompleteBatches(errClosing)
	if got := calls.Load(); got != 11 {
		t.Fatalf("%d callbacks, want 11", got)
	}
	if a.HasIncomplete() || a.HasUndrained() || a.BufferPool().AvailableMemory() != 64*1024 {
		t.Fatalf("incomplete %v undrained %v available %d", a.HasIncomplete(), a.HasUndrained(), a.BufferPool().AvailableMemory())
	}
	// The broker answering afterwards changes nothing.
	for _, b := range inFlight {
		if b.Complete(5, -1) {
			t.Fatal("completed an aborted batch")
		}
		a.Deallocate(b)
	}
	if calls.Load() != 11 || a.BufferPool().AvailableMemory() != 64*1024 {
		t.Fatal("late completion ran callbacks or freed memory twice")
	}
}

// TestAbortWhileOpen: on a fatal error the sender aborts without closing; what is queued fails
// and appends go on into new batches.
func TestAbortWhileOpen(t *testing.T) {
	a := newTestAccumulator(Config{})
	var failed atomic.Int32
	errFatal := errors.New("fatal")
	mustAppend(t, a, p0, value, func(_ RecordMetadata, err error) {
		if err == errFatal {
			failed.Add(1)
		}
	}, t0)
	a.AbortIncompleteBatches(errFatal)
	if failed.Load() != 1 || a.HasIncomplete() {
		t.Fatalf("%d failed, incomplete %v", failed.Load(), a.HasIncomplete())
	}
	if res := mustAppend(t, a, p0, value, nil, t0); !res.NewBatchCreated {
		t.Fatal("append after an abort should start a new batch")
	}
}

// TestAbortRacesAppends: appends racing Close and AbortIncompleteBatches either fail with
// ErrClosed (no callback) or get exactly one callback; no batch is left behind.
func TestAbortRacesAppends(t *testing.T) {
	a := New(Config{BatchSize: 1024, BufferMemory: 16 * 1024})
	const producers, perProducer = 4, 500
	var accepted, called atomic.Int64
	errAbort := errors.New("aborted")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range perProducer {
				_, err := a.Append(context.Background(), parts4[g%4], AppendRecord{Timestamp: time.Now(), Value: value,
					Callback: func(_ RecordMetadata, err error) {
						if err != errAbort {
							t.Errorf("callback error %v", err)
						}
						called.Add(1)
					}, MaxBlockDeadline: time.Now().Add(10 * time.Second), Now: time.Now()})
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, ErrClosed):
				default:
					t.Errorf("append: %v", err)
				}
			}
		}()
	}
	close(start)
	eventually(t, "some appends", func() bool { return accepted.Load() > 50 })
	a.Close()
	a.AbortIncompleteBatches(errAbort)
	wg.Wait()
	if called.Load() != accepted.Load() || a.HasIncomplete() || a.BufferPool().AvailableMemory() != 16*1024 {
		t.Fatalf("%d accepted, %d callbacks, incomplete %v, available %d", accepted.Load(), called.Load(),
			a.HasIncomplete(), a.BufferPool().AvailableMemory())
	}
}

var parts4 = []metadata.TopicPartition{p0, p1, p2, p3}

func TestAppendWaitsForMemory(t *testing.T) {
	later := t0.Add(time.Minute)
	a := newTestAccumulator(Config{BufferMemory: 2048, Now: func() time.Time { return later }})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1, p2}})
	mustAppend(t, a, p0, value, nil, t0)
	mustAppend(t, a, p1, value, nil, t0)

	t.Run("deadline", func(t *testing.T) {
		// The deadline is on the accumulator's clock, like the now the producer passes.
		_, err := a.Append(context.Background(), p2, AppendRecord{Timestamp: t0, Value: value, MaxBlockDeadline: later.Add(10 * time.Millisecond), Now: t0})
		if !errors.Is(err, ErrBufferExhausted) {
			t.Fatalf("err = %v, want ErrBufferExhausted", err)
		}
	})
	t.Run("memory freed", func(t *testing.T) {
		type result struct {
			res AppendResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := a.Append(context.Background(), p2, AppendRecord{Timestamp: t0, Value: value, Now: t0})
			done <- result{res, err}
		}()
		eventually(t, "append to wait", func() bool { return a.BufferPool().QueuedWaiters() == 1 })
		if r := a.Ready(cluster, t0); len(r.ReadyNodes) != 1 {
			t.Fatal("an exhausted pool makes partitions ready")
		}
		b := a.Drain(cluster, []int32{1}, 1<<20, t0)[1][0]
		b.Complete(0, -1)
		a.Deallocate(b)
		r := <-done
		if r.err != nil || !r.res.NewBatchCreated {
			t.Fatalf("append after memory freed: %+v %v", r.res, r.err)
		}
		// linger and delivery.timeout.ms count from when the batch really started.
		if !r.res.Batch.Created.Equal(later) {
			t.Fatalf("Created = %v, want the clock after waiting (%v)", r.res.Batch.Created, later)
		}
	})
	t.Run("close wakes the waiter", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := a.Append(context.Background(), p0, AppendRecord{Timestamp: t0, Value: bytes.Repeat([]byte("z"), 1500), Now: t0})
			done <- err
		}()
		eventually(t, "append to wait", func() bool { return a.BufferPool().QueuedWaiters() == 1 })
		a.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	})
}

// TestConcurrentAppendAndDrain runs producers against a sender loop with little memory, so
// appends block and batches cycle through the pool, and checks every callback ran exactly once
// with per-partition offsets in each producer's append order, and no memory leaked.
func TestConcurrentAppendAndDrain(t *testing.T) {
	const producers, perProducer = 6, 1500
	parts := []metadata.TopicPartition{p0, p1, p2, p3}
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0, p1}, 2: {p2, p3}})
	a := New(Config{BatchSize: 1024, BufferMemory: 8 * 1024, Compression: CodecLz4})

	type outcome struct {
		calls  atomic.Int32
		offset atomic.Int64
	}
	outcomes := make([][]outcome, producers)
	for i := range outcomes {
		outcomes[i] = make([]outcome, perProducer)
	}

	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				o := &outcomes[g][i]
				cb := func(md RecordMetadata, err error) {
					if err != nil {
						t.Errorf("record %d/%d: %v", g, i, err)
					}
					o.offset.Store(md.Offset)
					o.calls.Add(1)
				}
				// Each producer writes to one partition so its order there is checkable.
				v := fmt.Appendf(nil, "%d-%d", g, i)
				if _, err := a.Append(context.Background(), parts[g%len(parts)], AppendRecord{Timestamp: time.Now(), Value: v, Callback: cb, Now: time.Now()}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	producersDone := make(chan struct{})
	go func() { wg.Wait(); close(producersDone) }()

	// The sender: a fake broker assigns offsets per partition.
	nextOffset := map[metadata.TopicPartition]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-producersDone:
			a.BeginFlush() // send the last open batches without waiting for linger
			producersDone = nil
		default:
		}
		now := time.Now()
		if now.After(deadline) {
			t.Fatal("sender loop timed out")
		}
		r := a.Ready(cluster, now)
		for _, batches := range a.Drain(cluster, r.ReadyNodes, 1<<20, now) {
			for _, b := range batches {
				_, recs := decodeBatch(t, b.AppendEncoded(nil))
				base := nextOffset[b.TopicPartition]
				nextOffset[b.TopicPartition] += int64(len(recs))
				b.Complete(base, -1)
				a.Deallocate(b)
			}
		}
		if producersDone == nil && !a.HasIncomplete() {
			break
		}
		if len(r.ReadyNodes) == 0 {
			time.Sleep(50 * time.Microsecond) // nothing sendable yet: let producers run
		}
	}
	a.flushesInProgress.Add(-1)

	for g := range producers {
		last := int64(-1)
		for i := range perProducer {
			o := &outcomes[g][i]
			if o.calls.Load() != 1 {
				t.Fatalf("record %d/%d: %d callbacks", g, i, o.calls.Load())
			}
			if off := o.offset.Load(); off <= last {
				t.Fatalf("record %d/%d: offset %d after %d", g, i, off, last)
			} else {
				last = off
			}
		}
	}
	if got := a.BufferPool().AvailableMemory(); got != 8*1024 {
		t.Fatalf("AvailableMemory = %d after everything completed, want 8192", got)
	}
}

// BenchmarkAppend appends 100-byte records to one partition, with the sender's work done
// inline whenever a batch fills: drain, complete, deallocate. In steady state buffers, thunk
// slices and compression outputs all come from pools, so a record costs no allocation.
func BenchmarkAppend(b *testing.B) {
	for _, codec := range []Codec{CodecNone, CodecLz4} {
		b.Run(codec.String(), func(b *testing.B) {
			a := New(Config{BatchSize: 16384, BufferMemory: 1 << 20, Linger: time.Hour, Compression: codec})
			cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
			nodes := []int32{1}
			cb := func(RecordMetadata, error) {}
			ctx := context.Background()
			now := t0
			v := bytes.Repeat([]byte("l"), 100)
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			batches := 0
			for b.Loop() {
				res, err := a.Append(ctx, p0, AppendRecord{Timestamp: now, Value: v, Callback: cb, Now: now})
				if err != nil {
					b.Fatal(err)
				}
				if res.BatchIsFull {
					for _, batch := range a.Drain(cluster, nodes, 1<<20, now)[1] {
						batch.Complete(0, -1)
						a.Deallocate(batch)
						batches++
					}
				}
			}
			runtime.ReadMemStats(&after)
			// allocs/op rounds down; this shows what the per-batch allocations (the batch, its
			// done channel, Drain's map and slice) cost each record.
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "mallocs/record")
			if batches > 0 {
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(batches), "mallocs/batch")
			}
		})
	}
}

// BenchmarkAppendParallel appends from GOMAXPROCS goroutines to 16 partitions while a sender
// goroutine drains, as the agent's file readers do.
func BenchmarkAppendParallel(b *testing.B) {
	parts := make([]metadata.TopicPartition, 16)
	for i := range parts {
		parts[i] = tp("logs", int32(i))
	}
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: parts})
	a := New(Config{BatchSize: 16384, BufferMemory: 4 << 20, Linger: time.Millisecond})
	stop := make(chan struct{})
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now()
			r := a.Ready(cluster, now)
			for _, batches := range a.Drain(cluster, r.ReadyNodes, 1<<20, now) {
				for _, batch := range batches {
					batch.Complete(0, -1)
					a.Deallocate(batch)
				}
			}
			if len(r.ReadyNodes) == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	cb := func(RecordMetadata, error) {}
	v := bytes.Repeat([]byte("l"), 100)
	var next atomic.Int32
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := parts[int(next.Add(1))%len(parts)]
		ctx := context.Background()
		for pb.Next() {
			now := time.Now()
			if _, err := a.Append(ctx, p, AppendRecord{Timestamp: now, Value: v, Callback: cb, Now: now}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	close(stop)
	<-senderDone
}

// TestAppenderCompressesTheBatchItFoundFull: the append that finds a batch full compresses it,
// on its own goroutine, before the sender drains it; the sender's Close then only marks it
// drained, and the request carries the compressed records.
func TestAppenderCompressesTheBatchItFoundFull(t *testing.T) {
	a := newTestAccumulator(Config{Compression: CodecLz4})
	full := fillBatch(t, a, p0, nil, t0)
	if !full.compressed.Load() || full.drainClosed || full.attrCodec != CodecLz4 || len(full.payload) >= len(full.buf) {
		t.Fatalf("full batch: compressed %v, drained %v, codec %v, %d bytes of %d: want compressed by the appender, not drained",
			full.compressed.Load(), full.drainClosed, full.attrCodec, len(full.payload), len(full.buf))
	}
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	drained := a.Drain(cluster, []int32{1}, 1<<20, t0)[1]
	if len(drained) != 1 || drained[0] != full || !full.drainClosed {
		t.Fatalf("drained %v: want the full batch, closed by the drain", drained)
	}
	rb, recs := decodeBatch(t, full.AppendEncoded(nil))
	if Codec(rb.Attributes&0x7) != CodecLz4 || len(recs) != full.RecordCount() || !bytes.Equal(recs[0].Value, value) {
		t.Fatalf("encoded batch: attributes %#x, %d records of %d", rb.Attributes, len(recs), full.RecordCount())
	}
}

// TestCompressFullAfterRelease: an appender descheduled between finding a batch full and
// compressing it may come back after the batch was sent and its memory given back; it must
// then leave the buffers alone.
func TestCompressFullAfterRelease(t *testing.T) {
	b := newBatch(p0, make([]byte, 0, 1024), CodecLz4, 0, t0)
	for b.tryAppend(t0.UnixMilli(), nil, value, nil, thunk{}, nil, t0) {
	}
	b.closeForAppends()
	b.release()
	b.compressFull()
	if b.compressed.Load() || b.payload != nil || b.out != nil {
		t.Fatalf("after release: compressed %v, payload %d bytes, out %v: want nothing done", b.compressed.Load(), len(b.payload), b.out)
	}
}

// TestTraceAtCompletionStampsWithoutAClockRead: with TraceAtCompletion an untraced record's
// append time is when its Send stopped waiting (Ready, after a metadata wait) or its Send's
// start: the accumulator's clock is never read for it.
func TestTraceAtCompletionStampsWithoutAClockRead(t *testing.T) {
	reads := 0
	a := newTestAccumulator(Config{TraceAtCompletion: true, Now: func() time.Time { reads++; return t0.Add(time.Hour) }})
	start, ready := t0.Add(time.Second), t0.Add(2*time.Second)
	first, err := a.Append(context.Background(), p0, AppendRecord{Value: value, Now: start})
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.Append(context.Background(), p0, AppendRecord{Value: value, Now: start, Ready: ready})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Appended.Equal(start) || !second.Appended.Equal(ready) {
		t.Fatalf("appended at %v and %v, want Send's start %v and its metadata wait's end %v", first.Appended, second.Appended, start, ready)
	}
	var got []time.Time
	for _, r := range second.Batch.Records() {
		got = append(got, r.Appended)
	}
	if len(got) != 2 || !got[0].Equal(start) || !got[1].Equal(ready) {
		t.Fatalf("the batch keeps append times %v", got)
	}
	if reads != 0 {
		t.Fatalf("the clock was read %d times for untraced records", reads)
	}
}

// TestRetryBackoffGrowsExponentially: each retry of a batch waits retry.backoff.ms doubled per
// earlier retry, with 20 % jitter, up to retry.backoff.max.ms (KIP-580, Java's
// RecordAccumulator.retryBackoff.backoff(attempts - 1)). It used to wait retry.backoff.ms every time.
func TestRetryBackoffGrowsExponentially(t *testing.T) {
	a := newTestAccumulator(Config{RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: time.Second,
		Rand: rand.New(rand.NewPCG(5, 5))})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	b := retried(t, a, p0, t0)
	at := t0
	for i, term := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		term *= time.Millisecond
		lo, hi := time.Duration(float64(term)*0.8), min(time.Duration(float64(term)*1.2), time.Second)
		if term == time.Second {
			lo = 800 * time.Millisecond
		}
		if r := a.Ready(cluster, at.Add(lo-time.Millisecond)); len(r.ReadyNodes) != 0 {
			t.Fatalf("retry %d: ready %v after %v, inside a backoff of at least %v", i+1, lo-time.Millisecond, r.ReadyNodes, lo)
		}
		if r := a.Ready(cluster, at.Add(hi+time.Millisecond)); len(r.ReadyNodes) != 1 {
			t.Fatalf("retry %d: not ready after %v, past a backoff of at most %v", i+1, hi+time.Millisecond, hi)
		}
		drained := a.Drain(cluster, []int32{1}, 1<<20, at.Add(hi+time.Millisecond))[1]
		if len(drained) != 1 || drained[0] != b {
			t.Fatalf("retry %d: drained %v", i+1, drained)
		}
		at = at.Add(hi + 2*time.Millisecond)
		a.Reenqueue(b, at)
	}
}

// TestReadyReportsQueueLengths: with LoadStats set, Ready hands each topic's partition queue
// lengths (in batches) to the adaptive partitioner, once every partition of the topic has had
// a queue (Java's partitionReady); a leader that had batches ready and could not take them for
// longer than partitioner.availability.timeout.ms has its partitions left out.
func TestReadyReportsQueueLengths(t *testing.T) {
	type report struct {
		sizes, ids []int32
		length     int
	}
	var got map[string]report
	a := newTestAccumulator(Config{Linger: time.Hour, AvailabilityTimeout: 100 * time.Millisecond,
		LoadStats: func(topic string, sizes, ids []int32, length int) {
			got[topic] = report{slices.Clone(sizes), slices.Clone(ids), length}
		}})
	t1, t2 := tp("t", 0), tp("t", 1)
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {t1}, 2: {t2}})
	ready := func(now time.Time) report {
		got = map[string]report{}
		a.Ready(cluster, now)
		return got["t"]
	}
	fillBatch(t, a, t1, nil, t0)
	if r := ready(t0); r.sizes != nil {
		t.Fatalf("stats %+v before every partition had a queue, want none", r)
	}
	fillBatch(t, a, t1, nil, t0)
	fillBatch(t, a, t1, nil, t0)
	mustAppend(t, a, t2, value, nil, t0)
	if r := ready(t0); r.length != 2 || len(r.sizes) != 2 || fmt.Sprint(r.ids) != "[0 1]" || r.sizes[0] < 3 || r.sizes[1] != 1 {
		t.Fatalf("stats %+v, want partition 0's queue of 3 or more batches and partition 1's of 1", r)
	}
	// Node 2 has had data ready and not taken it for 200 ms: partition 1 is left out.
	a.UpdateNodeLatencyStats(2, t0, true)
	a.UpdateNodeLatencyStats(2, t0.Add(200*time.Millisecond), false)
	if r := ready(t0.Add(200 * time.Millisecond)); r.length != 1 || r.ids[0] != 0 || len(r.sizes) != 2 {
		t.Fatalf("stats %+v, want partition 0 alone, partition 1 left out", r)
	}
	a.UpdateNodeLatencyStats(2, t0.Add(300*time.Millisecond), true) // it takes data again
	if r := ready(t0.Add(300 * time.Millisecond)); r.length != 2 {
		t.Fatalf("stats %+v, want both partitions back", r)
	}
}

// A flush that ends while Ready is under way makes no batch appended after it sendable: Java's
// batchReady reads flushInProgress per batch, after looking at the deque. The hook stalls Ready
// before it walks the queues, ends the flush and appends there: a flag read once for the whole
// scan would still say "flushing" for the batch appended meanwhile.
func TestReadyAfterAFlushEndsWaitsForLinger(t *testing.T) {
	a := newTestAccumulator(Config{Linger: time.Hour})
	cluster := newCluster(map[int32][]metadata.TopicPartition{1: {p0}})
	a.BeginFlush()
	a.testHookReadyScan = func() {
		a.testHookReadyScan = nil
		if err := a.AwaitFlushCompletion(context.Background()); err != nil {
			t.Errorf("flush with nothing incomplete: %v", err)
		}
		mustAppend(t, a, p0, value, nil, t0)
	}
	r := a.Ready(cluster, t0)
	if len(r.ReadyNodes) != 0 {
		t.Fatalf("ready nodes %v: a record appended after Flush returned is sendable before linger.ms", r.ReadyNodes)
	}
	if r.NextReadyCheckDelay != time.Hour {
		t.Fatalf("next ready check in %v, want linger.ms (1h)", r.NextReadyCheckDelay)
	}
	// A flush begun now makes it ready at once.
	a.BeginFlush()
	if r := a.Ready(cluster, t0); len(r.ReadyNodes) != 1 {
		t.Fatalf("ready nodes %v during a flush, want [1]", r.ReadyNodes)
	}
}
