// Package accumulator holds the producer's RecordAccumulator: per-partition deques of
// ProducerBatches filled by producing goroutines, bounded by a BufferPool, and drained by the
// sender goroutine into produce requests. It follows the Java producer's RecordAccumulator,
// ProducerBatch and BufferPool, names included.
package accumulator

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/backoff"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// Java client defaults (ProducerConfig), used for zero Config fields that have no meaningful
// zero. The accumulator owns these three settings; producer.DefaultConfig reads them.
const (
	// DefaultBatchSize is batch.size's default, in bytes.
	DefaultBatchSize = 16384
	// DefaultBufferMemory is buffer.memory's default, in bytes (32 MiB).
	DefaultBufferMemory = 32 << 20
	// DefaultDeliveryTimeout is delivery.timeout.ms's default.
	DefaultDeliveryTimeout = 120 * time.Second
)

// Config is the accumulator's share of the producer configuration.
type Config struct {
	// BatchSize is batch.size: the buffer size of a batch, and of the buffers the pool recycles.
	// Zero means 16384.
	BatchSize int
	// BufferMemory is buffer.memory: the most memory batches may hold. Zero means 32 MiB.
	BufferMemory int64
	// Linger is linger.ms: how long a batch that is not full waits for more records.
	Linger time.Duration
	// RetryBackoff is retry.backoff.ms: how long a batch re-enqueued the first time waits
	// before it is sent again; each further retry doubles it, with 20 % jitter, up to
	// RetryBackoffMax, retry.backoff.max.ms (KIP-580; Java's RecordAccumulator.retryBackoff).
	// A RetryBackoffMax of zero keeps every wait at RetryBackoff.
	RetryBackoff, RetryBackoffMax time.Duration
	// Rand is the jitter's random source (tests); nil means a randomly seeded one.
	Rand *rand.Rand
	// LoadStats, when set, receives each topic's partition queue lengths at every Ready, for
	// the adaptive partitioner (partitioner.adaptive.partitioning.enable; Java's
	// RecordAccumulator.partitionReady feeding BuiltInPartitioner.updatePartitionLoadStats):
	// queueSizes[:length] are the lengths in batches of partitionIDs[:length], the partitions
	// with a leader not excluded as unavailable; len(queueSizes) counts every partition with a
	// queue. queueSizes is nil until every partition of the topic has had one. The slices are
	// scratch, reused after the call; LoadStats may overwrite them.
	LoadStats func(topic string, queueSizes, partitionIDs []int32, length int)
	// AvailabilityTimeout is partitioner.availability.timeout.ms: a partition whose leader had
	// batches ready and could not take them for longer is left out of LoadStats's partitions
	// (UpdateNodeLatencyStats). Zero: none is left out.
	AvailabilityTimeout time.Duration
	// DeliveryTimeout is delivery.timeout.ms: ExpiredBatches returns batches older than this.
	// Zero means 120s.
	DeliveryTimeout time.Duration
	// Compression is compression.type; CompressionLevel its compression.<codec>.level (0: the
	// codec's default; CheckLevel tells the levels the Java client accepts).
	Compression      Codec
	CompressionLevel int
	// Idempotent is enable.idempotence: Drain assigns producer id, epoch and sequence numbers
	// from the SequenceSource, and drains nothing until one is set and has a producer id.
	Idempotent bool
	// Now reads the clock after a blocking allocation and times BufferPool waits. Nil means
	// time.Now. Everything else takes now as a parameter.
	Now func() time.Time
	// Observer, when set, is told of every batch that completes (telemetry).
	Observer Observer
	// TraceAtCompletion is set for an observer that may trace any record when it completes
	// (a latency threshold): every record's append time is stamped, and every batch keeps its
	// attempts' timestamps, not only the batches holding a sampled record.
	TraceAtCompletion bool
}

// AppendResult tells the producer whether to wake the sender: when a batch was created (the
// sender's poll timeout may need to shrink to its linger) or a batch is full (it can go now).
type AppendResult struct {
	// BatchIsFull is true when the partition's deque holds more than one batch or its last batch
	// is full: something is sendable without waiting for linger.ms.
	BatchIsFull bool
	// Appended is when the record went into its batch, read under the partition's lock; zero
	// unless the record is traced, Config.TraceAtCompletion is set, or Append waited for
	// buffer memory (then it is when the wait ended).
	Appended time.Time
	// NewBatchCreated is true when this record started a batch.
	NewBatchCreated bool
	// LingerDue, for a new batch that nothing else makes sendable, is when linger.ms makes it
	// sendable: the sender need not wake before. Zero when the batch is sendable at once
	// (BatchIsFull, linger.ms 0, a flush, the accumulator closing, or buffer memory exhausted:
	// Ready's other reasons).
	LingerDue time.Time
	// Batch is the batch the record went into.
	Batch *ProducerBatch
}

// ClusterView is what the accumulator needs from cluster metadata; *metadata.Cluster has it.
type ClusterView interface {
	LeaderFor(tp metadata.TopicPartition) (node int32, ok bool)
	PartitionsForNode(node int32) []metadata.TopicPartition
	// LeaderEpochFor is the partition's leader epoch, ok false when unknown: Ready and Drain
	// use it to tell a retry bound for a new leader (KIP-951).
	LeaderEpochFor(tp metadata.TopicPartition) (epoch int32, ok bool)
	// PartitionCount is the topic's number of partitions (0 when unknown): the adaptive
	// partitioner's stats wait until every partition has had a queue.
	PartitionCount(topic string) int
}

// ReadyResult is what Ready found.
type ReadyResult struct {
	// ReadyNodes are the leaders with at least one sendable partition.
	ReadyNodes []int32
	// NextReadyCheckDelay is the longest the sender may sleep before some partition becomes
	// sendable by time alone (linger or retry backoff); math.MaxInt64 when none is waiting.
	NextReadyCheckDelay time.Duration
	// UnknownLeaderTopics are topics with batches waiting for a partition whose leader is
	// unknown; the sender requests a metadata update for them.
	UnknownLeaderTopics []string
}

// SequenceSource is the idempotent producer's state (the producer's TransactionManager), which
// Drain consults to stamp batches. It is called on the sender goroutine only.
type SequenceSource interface {
	// ProducerIDAndEpoch returns the current producer id and epoch; ok is false until
	// InitProducerId has succeeded, and then Drain sends nothing.
	ProducerIDAndEpoch() (id int64, epoch int16, ok bool)
	// NextSequence returns the sequence the next new batch for tp starts at.
	NextSequence(tp metadata.TopicPartition) int32
	// IncrementSequence advances tp's next sequence by n records.
	IncrementSequence(tp metadata.TopicPartition, n int32)
	// ShouldStopDrain reports whether first, tp's first batch, must not be sent now: for
	// example a retried batch that is not the oldest in flight, or a partition whose earlier
	// sequences are unresolved. Drain skips the partition this round.
	ShouldStopDrain(tp metadata.TopicPartition, first *ProducerBatch) bool
	// MaybeUpdateProducerIDAndEpoch is called before tp's next batch without a sequence is
	// stamped: a partition whose sequences belong to an older producer id or epoch, and that
	// has nothing unfinished, starts again at sequence 0 under the current ones.
	MaybeUpdateProducerIDAndEpoch(tp metadata.TopicPartition)
	InFlightTracker
}

// InFlightTracker is the SequenceSource's share that follows batches with sequences: Drain
// reports every batch it assigns a sequence, and SplitAndReenqueue every batch it creates with
// one, as the Java accumulator calls TransactionManager.addInFlightBatch.
type InFlightTracker interface {
	AddInFlightBatch(b *ProducerBatch)
}

// RecordAccumulator queues records into per-partition batches for the sender.
//
// Append, BeginFlush, AwaitFlushCompletion, HasIncomplete, HasUndrained and Close are safe
// for concurrent use. Ready, Drain, MutePartition, UnmutePartition, Reenqueue,
// SplitAndReenqueue, ExpiredBatches, Deallocate and AbortIncompleteBatches belong to the sender
// goroutine, as in the Java client: the muted set and drain indexes are its alone and unlocked.
type RecordAccumulator struct {
	cfg  Config
	pool *BufferPool
	// retryBackoff gives a retried batch its wait (Reenqueue); the sender's goroutine only.
	retryBackoff *backoff.Exponential
	// nodeStats and topicLoads are the adaptive partitioner's (Ready, UpdateNodeLatencyStats):
	// the sender's goroutine only.
	nodeStats  map[int32]*nodeLatencyStats
	topicLoads map[string]*topicLoad

	// deques is copy-on-write (Java's CopyOnWriteMap): Append looks its partition up without a
	// lock, and partitions are added rarely.
	deques   atomic.Pointer[dequeTable]
	dequesMu sync.Mutex // serialises writers of deques
	// lastDeque is the deque of the last append. Deques are never removed and a producer
	// usually appends to one partition for a whole batch (sticky partitioning), so this saves
	// hashing the TopicPartition for almost every record.
	lastDeque atomic.Pointer[partitionDeque]

	closed            atomic.Bool
	flushesInProgress atomic.Int32
	appendsInProgress atomic.Int32
	incomplete        incompleteBatches

	// Sender goroutine only.
	seq            SequenceSource
	muted          map[metadata.TopicPartition]struct{}
	drainIndex     map[int32]int
	nextExpiryTime time.Time

	// testHookReadyScan, when set, runs in Ready before it walks the queues: a test stalls
	// there to end a flush and append while Ready is under way.
	testHookReadyScan func()
}

// partitionDeque is one partition's queue of batches, oldest first. Its mutex is the lock per
// deque the design speaks of: producing goroutines append under it, the sender peeks and polls
// under it.
type partitionDeque struct {
	mu      sync.Mutex
	tp      metadata.TopicPartition
	batches []*ProducerBatch
}

type dequeTable struct {
	byTP map[metadata.TopicPartition]*partitionDeque
	all  []*partitionDeque // creation order, so Ready and expiry walk partitions stably
}

// New returns an accumulator with its own BufferPool of cfg.BufferMemory bytes.
func New(cfg Config) *RecordAccumulator {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BufferMemory <= 0 {
		cfg.BufferMemory = DefaultBufferMemory
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RetryBackoffMax <= 0 {
		cfg.RetryBackoffMax = cfg.RetryBackoff
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	a := &RecordAccumulator{
		cfg:          cfg,
		retryBackoff: backoff.New(cfg.RetryBackoff, backoff.Multiplier, cfg.RetryBackoffMax, backoff.Jitter, cfg.Rand),
		pool:         NewBufferPool(cfg.BufferMemory, cfg.BatchSize, cfg.Now),
		muted:        make(map[metadata.TopicPartition]struct{}),
		drainIndex:   make(map[int32]int),
	}
	a.deques.Store(&dequeTable{byTP: map[metadata.TopicPartition]*partitionDeque{}})
	a.incomplete.set = make(map[*ProducerBatch]struct{})
	return a
}

// BufferPool returns the accumulator's pool, for its metrics.
func (a *RecordAccumulator) BufferPool() *BufferPool { return a.pool }

// SetSequenceSource installs the idempotent producer's state. Call it before the sender starts.
func (a *RecordAccumulator) SetSequenceSource(s SequenceSource) { a.seq = s }

func (a *RecordAccumulator) getDeque(tp metadata.TopicPartition) *partitionDeque {
	return a.deques.Load().byTP[tp]
}

func (a *RecordAccumulator) getOrCreateDeque(tp metadata.TopicPartition) *partitionDeque {
	if dq := a.lastDeque.Load(); dq != nil && dq.tp == tp {
		return dq
	}
	if dq := a.getDeque(tp); dq != nil {
		a.lastDeque.Store(dq)
		return dq
	}
	a.dequesMu.Lock()
	defer a.dequesMu.Unlock()
	old := a.deques.Load()
	if dq := old.byTP[tp]; dq != nil {
		return dq
	}
	dq := &partitionDeque{tp: tp}
	next := &dequeTable{
		byTP: make(map[metadata.TopicPartition]*partitionDeque, len(old.byTP)+1),
		all:  make([]*partitionDeque, len(old.all), len(old.all)+1),
	}
	for k, v := range old.byTP {
		next.byTP[k] = v
	}
	copy(next.all, old.all)
	next.byTP[tp] = dq
	next.all = append(next.all, dq)
	a.deques.Store(next)
	return dq
}

// AppendRecord is one record for Append, with what travels beside it to its completion.
type AppendRecord struct {
	// Timestamp is the record's create time; zero means Now.
	Timestamp time.Time
	// Key, Value and Headers are copied into the batch, so the caller may reuse them.
	Key, Value []byte
	Headers    []kmsg.Header
	// Callback (may be nil) runs exactly once, on the goroutine that completes the batch.
	Callback Callback
	// Tag is the caller's, handed back to Callback in RecordMetadata.Tag.
	Tag int64
	// Trace is a sampled record's token (nil otherwise): it travels with the record in its
	// batch and is told when the record is appended and when it completes.
	Trace RecordTrace
	// MaxBlockDeadline bounds the wait for buffer memory: Send's now plus max.block.ms.
	MaxBlockDeadline time.Time
	// Now is when Send was called: linger and delivery.timeout.ms of a batch the record
	// starts count from it, and the record's end-to-end latency too.
	Now time.Time
	// Written is when the record's data came to be, before Send (a log line written), zero
	// when not known: the record keeps it for its read stage and its age at acknowledgement.
	Written time.Time
	// Ready is when Send stopped waiting for metadata, zero when it did not wait: an untraced
	// record's append time under Config.TraceAtCompletion (see stampAppend).
	Ready time.Time
}

// ready is when Send stopped waiting: after metadata (Ready), or after buffer memory (Now,
// which Append moves past such a wait), else Send's start.
func (r *AppendRecord) ready() time.Time {
	if r.Ready.After(r.Now) {
		return r.Ready
	}
	return r.Now
}

// Append adds a record to tp's last batch, or starts a batch with memory from the BufferPool,
// waiting for it until r.MaxBlockDeadline or until ctx ends. r.Callback runs exactly once, on
// the sender goroutine, unless Append returns an error, in which case it never runs.
func (a *RecordAccumulator) Append(ctx context.Context, tp metadata.TopicPartition, r AppendRecord) (AppendResult, error) {
	// Counted so AbortIncompleteBatches can wait out appends that passed the closed check.
	a.appendsInProgress.Add(1)
	defer a.appendsInProgress.Add(-1)
	if a.closed.Load() {
		return AppendResult{}, ErrClosed
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = r.Now
	}
	ts := r.Timestamp.UnixMilli()
	t := thunk{cb: r.Callback, tag: r.Tag, sent: r.Now.UnixNano(), keySize: -1, valueSize: -1}
	if !r.Written.IsZero() {
		t.written = r.Written.UnixNano()
	}
	if r.Key != nil {
		t.keySize = int32(len(r.Key))
	}
	if r.Value != nil {
		t.valueSize = int32(len(r.Value))
	}

	dq := a.getOrCreateDeque(tp)
	dq.mu.Lock()
	res, ok, full, err := a.tryAppendLocked(dq, ts, r.Key, r.Value, r.Headers, t, r.Trace, r.Now, r.ready())
	dq.mu.Unlock()
	if ok || err != nil {
		return res, err
	}
	if full != nil {
		full.compressFull() // this goroutine's work, not the sender's (ProducerBatch.compressFull)
	}

	// No room: allocate outside the deque lock, since this may block for max.block.ms.
	size := max(a.cfg.BatchSize, EstimateRecordSize(r.Key, r.Value, r.Headers))
	buf, waited, err := a.pool.allocate(ctx, size, r.MaxBlockDeadline)
	if err != nil {
		return AppendResult{}, err
	}
	if waited {
		// The caller's now is stale after blocking; linger and delivery.timeout.ms should
		// count from when the batch really starts.
		r.Now = a.cfg.Now()
	}

	dq.mu.Lock()
	defer dq.mu.Unlock()
	res, ok, _, err = a.tryAppendLocked(dq, ts, r.Key, r.Value, r.Headers, t, r.Trace, r.Now, r.ready())
	if ok || err != nil {
		// Another goroutine started a batch while we waited for memory: use it, return ours.
		a.pool.Deallocate(buf)
		if ok && waited && res.Appended.IsZero() {
			res.Appended = r.Now
		}
		return res, err
	}
	b := newBatch(tp, buf, a.cfg.Compression, int32(a.cfg.CompressionLevel), r.Now)
	b.obs = a.cfg.Observer
	b.keepAttempts = a.cfg.TraceAtCompletion
	b.tryAppend(ts, r.Key, r.Value, r.Headers, t, r.Trace, r.Now) // a fresh batch always takes its first record
	appended := a.stampAppend(b, r.Trace, r.ready())
	if waited && appended.IsZero() {
		appended = r.Now // the clock read when the wait ended
	}
	dq.batches = append(dq.batches, b)
	a.incomplete.add(b)
	res = AppendResult{BatchIsFull: len(dq.batches) > 1 || b.IsFull(), NewBatchCreated: true, Batch: b, Appended: appended}
	if !res.BatchIsFull && a.cfg.Linger > 0 && !a.closed.Load() && !a.flushInProgress() && a.pool.QueuedWaiters() == 0 {
		res.LingerDue = b.LastAttempt.Add(a.cfg.Linger) // as Ready counts it: waited from LastAttempt
	}
	return res, nil
}

// stampAppend notes when the record just appended to b went into it, if anyone needs to know:
// its RecordTrace, or an observer that may trace it at completion. Called under the deque's lock.
// A traced record's is read from the clock; an untraced one's (Config.TraceAtCompletion: any
// record may be traced once it completes) is ready, when Send stopped waiting (for metadata or
// buffer memory, else its start): what is left is the append itself, far below anything a
// slow record's trace shows, and every record is spared a clock read.
func (a *RecordAccumulator) stampAppend(b *ProducerBatch, trace RecordTrace, ready time.Time) time.Time {
	if trace == nil && !a.cfg.TraceAtCompletion {
		return time.Time{}
	}
	at := ready
	if trace != nil {
		at = a.cfg.Now()
	}
	if b.appendedAt != nil {
		b.appendedAt[len(b.appendedAt)-1] = at.UnixNano()
	}
	if trace != nil {
		trace.Appended(b, at)
	}
	return at
}

// tryAppendLocked appends to the deque's last batch if it has room. A last batch without room
// is closed for appends, so it reads as full from now on, and returned as full: the caller
// compresses it once it has let go of the lock.
func (a *RecordAccumulator) tryAppendLocked(dq *partitionDeque, ts int64, key, value []byte,
	headers []kmsg.Header, t thunk, trace RecordTrace, now, ready time.Time,
) (res AppendResult, ok bool, full *ProducerBatch, err error) {
	if a.closed.Load() {
		return AppendResult{}, false, nil, ErrClosed
	}
	n := len(dq.batches)
	if n == 0 {
		return AppendResult{}, false, nil, nil
	}
	last := dq.batches[n-1]
	if !last.tryAppend(ts, key, value, headers, t, trace, now) {
		if !last.appendsClosed {
			full = last // the first append to find it full compresses it
		}
		last.closeForAppends()
		return AppendResult{}, false, full, nil
	}
	appended := a.stampAppend(last, trace, ready)
	return AppendResult{BatchIsFull: n > 1 || last.IsFull(), Batch: last, Appended: appended}, true, nil, nil
}

func (a *RecordAccumulator) isMuted(tp metadata.TopicPartition) bool {
	_, ok := a.muted[tp]
	return ok
}

// backingOff reports whether a retried batch is still inside its retry backoff (retryWait). A
// retry that goes to a newer leader than the attempt that failed does not wait (KIP-951, Java's
// shouldBackoff with hasLeaderChangedForTheOngoingRetry): the wait was for the old leader.
func (a *RecordAccumulator) backingOff(b *ProducerBatch, now time.Time) bool {
	return b.Attempts > 0 && now.Sub(b.LastAttempt) < b.retryWait && !b.hasLeaderChangedForTheOngoingRetry()
}

// noteLeaderEpoch tells the deque's first batch the partition's current leader epoch, before
// its backoff is judged. Called under the deque's lock.
func noteLeaderEpoch(c ClusterView, tp metadata.TopicPartition, first *ProducerBatch) {
	if epoch, ok := c.LeaderEpochFor(tp); ok {
		first.maybeUpdateLeaderEpoch(epoch)
	}
}

// nodeLatencyStats is Java's NodeLatencyStats: when the node last had batches ready, and when
// it last could take them.
type nodeLatencyStats struct{ readyTime, drainTime time.Time }

// UpdateNodeLatencyStats is Java's updateNodeLatencyStats, told by the sender of every ready
// node: canDrain says the node could take a request now (which resets its latency), else only
// its ready time moves, so that readyTime - drainTime is how long its data has waited.
func (a *RecordAccumulator) UpdateNodeLatencyStats(node int32, now time.Time, canDrain bool) {
	if a.cfg.LoadStats == nil || a.cfg.AvailabilityTimeout <= 0 {
		return
	}
	if a.nodeStats == nil {
		a.nodeStats = map[int32]*nodeLatencyStats{}
	}
	s := a.nodeStats[node]
	if s == nil {
		s = &nodeLatencyStats{readyTime: now, drainTime: now}
		a.nodeStats[node] = s
	}
	if canDrain {
		s.drainTime = now
	}
	s.readyTime = now
}

// topicLoad gathers one topic's queue lengths during a Ready; its slices are reused.
type topicLoad struct {
	queues     int // the topic's partitions with a queue, empty or not
	sizes, ids []int32
}

// unavailable reports that leader had batches ready and could not take them for longer than
// partitioner.availability.timeout.ms.
func (a *RecordAccumulator) unavailable(leader int32) bool {
	if a.cfg.AvailabilityTimeout <= 0 {
		return false
	}
	s := a.nodeStats[leader]
	return s != nil && s.readyTime.Sub(s.drainTime) > a.cfg.AvailabilityTimeout
}

// noteLoad adds a partition's queue to its topic's load, when the adaptive partitioner wants it.
func (a *RecordAccumulator) noteLoad(tp metadata.TopicPartition, hasLeader bool, leader int32, size int) {
	l := a.topicLoads[tp.Topic]
	if l == nil {
		l = &topicLoad{}
		a.topicLoads[tp.Topic] = l
	}
	l.queues++
	if !hasLeader || (size > 0 && a.unavailable(leader)) {
		return
	}
	l.sizes = append(l.sizes, int32(size))
	l.ids = append(l.ids, tp.Partition)
}

// reportLoads hands every topic's load to LoadStats, as Java's partitionReady does per topic.
func (a *RecordAccumulator) reportLoads(c ClusterView) {
	for topic, l := range a.topicLoads {
		n := c.PartitionCount(topic)
		if n == 0 || l.queues < n {
			// Not every partition has had a queue yet: partitions without one would never be
			// drawn, so the draw stays uniform (Java waits the same way).
			a.cfg.LoadStats(topic, nil, nil, 0)
		} else {
			// len(queueSizes) is the number of queues, as Java's array is; entries past
			// length are those left out (no leader, or unavailable).
			length := len(l.sizes)
			for len(l.sizes) < l.queues {
				l.sizes = append(l.sizes, 0)
				l.ids = append(l.ids, -1)
			}
			a.cfg.LoadStats(topic, l.sizes, l.ids, length)
		}
		l.queues, l.sizes, l.ids = 0, l.sizes[:0], l.ids[:0]
	}
}

// Ready returns the nodes that lead a partition with a sendable first batch: full, waited
// linger.ms (retry.backoff.ms when retried), or sendable at once because the BufferPool has
// waiters, a flush is in progress or the accumulator is closed. A retried batch inside its
// backoff is never sendable. Muted partitions are skipped; partitions with batches and no known
// leader name their topic in UnknownLeaderTopics.
func (a *RecordAccumulator) Ready(c ClusterView, now time.Time) ReadyResult {
	res := ReadyResult{NextReadyCheckDelay: time.Duration(math.MaxInt64)}
	exhausted := a.pool.QueuedWaiters() > 0
	if a.testHookReadyScan != nil {
		a.testHookReadyScan()
	}
	adaptive := a.cfg.LoadStats != nil
	if adaptive && a.topicLoads == nil {
		a.topicLoads = map[string]*topicLoad{}
	}
	for _, dq := range a.deques.Load().all {
		dq.mu.Lock()
		if len(dq.batches) == 0 {
			dq.mu.Unlock()
			if adaptive {
				leader, ok := c.LeaderFor(dq.tp)
				a.noteLoad(dq.tp, ok, leader, 0)
			}
			continue
		}
		first := dq.batches[0]
		noteLeaderEpoch(c, dq.tp, first)
		waited := max(now.Sub(first.LastAttempt), 0)
		backingOff := a.backingOff(first, now)
		retryWait := first.retryWait
		full := len(dq.batches) > 1 || first.IsFull()
		queued := len(dq.batches)
		dq.mu.Unlock()

		leader, ok := c.LeaderFor(dq.tp)
		if adaptive {
			a.noteLoad(dq.tp, ok, leader, queued)
		}
		if !ok {
			res.UnknownLeaderTopics = appendUnique(res.UnknownLeaderTopics, dq.tp.Topic)
			continue
		}
		if containsNode(res.ReadyNodes, leader) || a.isMuted(dq.tp) {
			continue
		}
		timeToWait := a.cfg.Linger
		if backingOff {
			timeToWait = retryWait
		}
		// Java's batchReady: closed and flushInProgress are read per batch, after its deque was
		// looked at. Read once before the scan, a flush that ended during it would still count
		// for a batch appended after the flush returned, which would go out before linger.ms.
		sendable := full || waited >= timeToWait || exhausted || a.closed.Load() || a.flushInProgress()
		if sendable && !backingOff {
			res.ReadyNodes = append(res.ReadyNodes, leader)
			continue
		}
		// Conservative: this partition's leader may turn out ready through another partition,
		// in which case the sender just wakes and sleeps again.
		res.NextReadyCheckDelay = min(res.NextReadyCheckDelay, max(timeToWait-waited, 0))
	}
	if adaptive {
		a.reportLoads(c)
	}
	return res
}

func containsNode(nodes []int32, n int32) bool {
	for _, x := range nodes {
		if x == n {
			return true
		}
	}
	return false
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Drain takes, for each node, the first batch of each of its partitions, round robin from where
// the node's previous drain stopped, while the request stays within maxRequestSize (the first
// batch always goes, however large). It skips muted partitions and batches in retry backoff;
// for an idempotent producer it skips partitions the SequenceSource holds back and stamps each
// batch's first send with producer id, epoch and sequence. Drained batches are closed
// (compressed) and stamped Drained. Nodes with nothing to send are absent from the map.
func (a *RecordAccumulator) Drain(c ClusterView, nodes []int32, maxRequestSize int, now time.Time) map[int32][]*ProducerBatch {
	out := make(map[int32][]*ProducerBatch, len(nodes))
	var pid int64 = noProducerID
	var epoch int16 = noProducerEpoch
	if a.cfg.Idempotent {
		var ok bool
		if a.seq != nil {
			pid, epoch, ok = a.seq.ProducerIDAndEpoch()
		}
		if !ok {
			return out // without a producer id no batch may be sent, retried ones included
		}
	}
	for _, node := range nodes {
		if ready := a.drainBatchesForOneNode(c, node, maxRequestSize, now, pid, epoch); len(ready) > 0 {
			out[node] = ready
		}
	}
	return out
}

func (a *RecordAccumulator) drainBatchesForOneNode(c ClusterView, node int32, maxSize int, now time.Time,
	pid int64, epoch int16,
) []*ProducerBatch {
	parts := c.PartitionsForNode(node)
	if len(parts) == 0 {
		return nil
	}
	var ready []*ProducerBatch
	size := 0
	// Each node keeps its own index, so that a partition cut off by max.request.size is the
	// first considered next time and no partition starves.
	i := a.drainIndex[node] % len(parts)
	start := i
	for {
		tp := parts[i]
		a.drainIndex[node] = i
		i = (i + 1) % len(parts)

		b, stop := a.pollDrainable(c, tp, size, len(ready) == 0, maxSize, now, pid, epoch)
		if stop {
			break
		}
		if b != nil {
			// Compress outside the deque lock: it is the slow part, and appends to the
			// partition's newer batches need not wait for it.
			b.Close()
			size += b.EstimatedSize()
			b.drained(node, now)
			ready = append(ready, b)
		}
		if i == start {
			break
		}
	}
	return ready
}

// pollDrainable removes tp's first batch if it may go in this request. stop reports that the
// request is full.
func (a *RecordAccumulator) pollDrainable(c ClusterView, tp metadata.TopicPartition, size int, firstInRequest bool, maxSize int,
	now time.Time, pid int64, epoch int16,
) (b *ProducerBatch, stop bool) {
	if a.isMuted(tp) {
		return nil, false
	}
	dq := a.getDeque(tp)
	if dq == nil {
		return nil, false
	}
	dq.mu.Lock()
	defer dq.mu.Unlock()
	if len(dq.batches) == 0 {
		return nil, false
	}
	first := dq.batches[0]
	noteLeaderEpoch(c, tp, first)
	if a.backingOff(first, now) {
		return nil, false
	}
	if size+first.EstimatedSize() > maxSize && !firstInRequest {
		// A batch larger than the request limit on its own (possible after compression
		// estimates, or a huge record) still goes, alone, at the head of a request.
		return nil, true
	}
	if a.cfg.Idempotent && a.seq.ShouldStopDrain(tp, first) {
		return nil, false
	}
	dq.batches = popFront(dq.batches)
	first.closeForAppends()
	if a.cfg.Idempotent && !first.HasSequence() {
		// A batch that already has a sequence keeps its producer id, epoch and sequence
		// (Java drainBatchesForOneNode): the previous attempt may have been written, and only
		// the same three let the broker recognise this one as its duplicate. The sequence
		// source rewrites them itself when the batch's partition is started again after a gap.
		a.seq.MaybeUpdateProducerIDAndEpoch(tp)
		first.SetProducerState(pid, epoch, a.seq.NextSequence(tp))
		a.seq.IncrementSequence(tp, first.numRecords)
		a.seq.AddInFlightBatch(first)
	}
	return first, false
}

func popFront(s []*ProducerBatch) []*ProducerBatch {
	copy(s, s[1:])
	s[len(s)-1] = nil
	return s[:len(s)-1]
}

func pushFront(s []*ProducerBatch, b *ProducerBatch) []*ProducerBatch {
	return insertAt(s, 0, b)
}

func insertAt(s []*ProducerBatch, i int, b *ProducerBatch) []*ProducerBatch {
	s = append(s, nil)
	copy(s[i+1:], s[i:])
	s[i] = b
	return s
}

func removeBatch(s []*ProducerBatch, b *ProducerBatch) []*ProducerBatch {
	for i, x := range s {
		if x == b {
			copy(s[i:], s[i+1:])
			s[len(s)-1] = nil
			return s[:len(s)-1]
		}
	}
	return s
}

// insertInSequenceOrder puts a batch that has a sequence back in front of every batch with a
// higher sequence or none. With several requests in flight for a partition, retried batches
// come back in any order, and the broker accepts them only in sequence order.
func insertInSequenceOrder(s []*ProducerBatch, b *ProducerBatch) []*ProducerBatch {
	i := 0
	for i < len(s) && s[i].HasSequence() && s[i].BaseSequence() < b.BaseSequence() {
		i++
	}
	return insertAt(s, i, b)
}

// MutePartition stops Ready and Drain from considering tp, so that with
// max.in.flight.requests.per.connection=1 a partition has one request in flight at a time.
func (a *RecordAccumulator) MutePartition(tp metadata.TopicPartition) { a.muted[tp] = struct{}{} }

// UnmutePartition undoes MutePartition once tp's request has completed.
func (a *RecordAccumulator) UnmutePartition(tp metadata.TopicPartition) { delete(a.muted, tp) }

// Reenqueue puts a batch back for retry: at the head of its deque, or, if it has a sequence, in
// sequence order among the batches there (Java insertInSequenceOrder). Its retry backoff
// counts from now: Java's retryBackoff.backoff(attempts - 1), drawn once here for the attempt,
// so that Ready and Drain agree on it. The delivery timeout is the sender's to check before
// calling. The sender's goroutine only (the jitter's random source is its).
func (a *RecordAccumulator) Reenqueue(b *ProducerBatch, now time.Time) {
	b.reenqueued(now)
	b.retryWait = a.retryBackoff.Backoff(b.Attempts - 1)
	dq := a.getOrCreateDeque(b.TopicPartition)
	dq.mu.Lock()
	defer dq.mu.Unlock()
	b.closeForAppends() // it may end up last in the deque; new records must not join a retry
	if b.HasSequence() {
		dq.batches = insertInSequenceOrder(dq.batches, b)
	} else {
		dq.batches = pushFront(dq.batches, b)
	}
}

// SplitAndReenqueue handles MESSAGE_TOO_LARGE: it splits b into batches of at most batch.size
// and about half of b (at least one record each), which keep the records' callbacks and b's
// creation time, and puts them at the head of the deque as if never tried. b itself completes no callback; the caller
// still deallocates it. It returns the number of new batches, 0 if b was already done.
func (a *RecordAccumulator) SplitAndReenqueue(b *ProducerBatch) int {
	parts := b.split(a.cfg.BatchSize)
	if len(parts) == 0 {
		return 0
	}
	dq := a.getOrCreateDeque(b.TopicPartition)
	for i := len(parts) - 1; i >= 0; i-- {
		nb := parts[i]
		a.incomplete.add(nb)
		dq.mu.Lock()
		if nb.HasSequence() {
			if a.seq != nil {
				a.seq.AddInFlightBatch(nb)
			}
			dq.batches = insertInSequenceOrder(dq.batches, nb)
		} else {
			dq.batches = pushFront(dq.batches, nb)
		}
		dq.mu.Unlock()
	}
	return len(parts)
}

// ExpiredBatches removes and returns the queued batches that have reached delivery.timeout.ms,
// oldest first per partition. Batches in flight are not in the deques and are the sender's to
// expire. The caller fails and deallocates them.
func (a *RecordAccumulator) ExpiredBatches(now time.Time) []*ProducerBatch {
	var expired []*ProducerBatch
	a.nextExpiryTime = time.Time{}
	for _, dq := range a.deques.Load().all {
		dq.mu.Lock()
		for len(dq.batches) > 0 {
			first := dq.batches[0]
			deadline := first.Created.Add(a.cfg.DeliveryTimeout)
			if now.Before(deadline) {
				if a.nextExpiryTime.IsZero() || deadline.Before(a.nextExpiryTime) {
					a.nextExpiryTime = deadline
				}
				break
			}
			dq.batches = popFront(dq.batches)
			first.closeForAppends()
			expired = append(expired, first)
		}
		dq.mu.Unlock()
	}
	return expired
}

// RemoveQueued takes every batch queued for tp out of its deque, closed for appends, and
// returns them in queue order: batches the sender fails with an older one of the partition
// that expired.
func (a *RecordAccumulator) RemoveQueued(tp metadata.TopicPartition) []*ProducerBatch {
	dq := a.deques.Load().byTP[tp]
	if dq == nil {
		return nil
	}
	dq.mu.Lock()
	defer dq.mu.Unlock()
	out := slices.Clone(dq.batches)
	clear(dq.batches)
	dq.batches = dq.batches[:0]
	for _, b := range out {
		b.closeForAppends()
	}
	return out
}

// NextExpiryTime returns the earliest delivery deadline of the batches ExpiredBatches last left
// queued, zero if none, so the sender can bound its poll timeout.
func (a *RecordAccumulator) NextExpiryTime() time.Time { return a.nextExpiryTime }

// Deallocate returns a finished batch's buffer to the pool (split batches were allocated outside
// it) and forgets the batch. Calling it again is harmless. The batch must not be encoded again.
func (a *RecordAccumulator) Deallocate(b *ProducerBatch) {
	a.incomplete.remove(b)
	if !b.deallocated.CompareAndSwap(false, true) {
		return
	}
	if buf := b.release(); buf != nil {
		a.pool.Deallocate(buf)
	}
}

func (a *RecordAccumulator) flushInProgress() bool { return a.flushesInProgress.Load() > 0 }

// BeginFlush makes every partition ready at once, until the matching AwaitFlushCompletion.
func (a *RecordAccumulator) BeginFlush() { a.flushesInProgress.Add(1) }

// AwaitFlushCompletion waits until every batch incomplete when it was called has completed
// (a split batch: every batch split from it), or until ctx ends. It ends the flush that
// BeginFlush started either way.
func (a *RecordAccumulator) AwaitFlushCompletion(ctx context.Context) error {
	defer a.flushesInProgress.Add(-1)
	for _, b := range a.incomplete.snapshot() {
		if err := b.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// HasIncomplete reports whether any batch is queued or in flight.
func (a *RecordAccumulator) HasIncomplete() bool { return a.incomplete.len() > 0 }

// HasUndrained reports whether any batch is still queued.
func (a *RecordAccumulator) HasUndrained() bool {
	for _, dq := range a.deques.Load().all {
		dq.mu.Lock()
		n := len(dq.batches)
		dq.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// Close stops accepting records: Append and appends waiting for memory fail with ErrClosed.
// Queued batches become ready at once, so the sender can send them before it stops.
func (a *RecordAccumulator) Close() {
	a.closed.Store(true)
	a.pool.Close()
}

// AbortIncompleteBatches fails every incomplete batch, queued or in flight, with err (non-nil;
// each record's callback runs once with it) and frees its memory. The sender calls it when a
// forced close gives up on what is left, or on a fatal error; batches in flight at that moment
// are failed too, and their later responses change nothing.
func (a *RecordAccumulator) AbortIncompleteBatches(err error) {
	// Once closed, an append that passed the closed check may still add a batch: keep aborting
	// until none is in progress (appends blocked on memory were woken by the pool's close), then
	// once more for the batch the last one may have added. While open, appends never stop, so a
	// single pass is all that can be promised; later batches meet the next abort.
	for a.closed.Load() && a.appendsInProgress.Load() > 0 {
		a.abortBatches(err)
		runtime.Gosched()
	}
	a.abortBatches(err)
}

func (a *RecordAccumulator) abortBatches(err error) {
	for _, b := range a.incomplete.snapshot() {
		if dq := a.getDeque(b.TopicPartition); dq != nil {
			dq.mu.Lock()
			b.closeForAppends()
			dq.batches = removeBatch(dq.batches, b)
			dq.mu.Unlock()
		}
		b.CompleteExceptionally(err, nil)
		a.Deallocate(b)
	}
}

// AbortUndrainedBatches fails, with err, the batches still queued that never went to a broker,
// and frees their memory (Java abortUndrainedBatches). With idempotence these are the batches
// without a sequence: a queued retry keeps its place, because its earlier attempt may have been
// written and the sequences after it must still reach the broker. A transactional producer calls
// it when the transaction is being aborted: what was never sent need not be.
func (a *RecordAccumulator) AbortUndrainedBatches(err error) {
	for _, b := range a.incomplete.snapshot() {
		dq := a.getDeque(b.TopicPartition)
		if dq == nil {
			continue
		}
		dq.mu.Lock()
		aborted := false
		if (a.cfg.Idempotent && !b.HasSequence()) || (!a.cfg.Idempotent && !b.drainClosed) {
			n := len(dq.batches)
			dq.batches = removeBatch(dq.batches, b)
			if aborted = len(dq.batches) < n; aborted { // still queued, not in flight
				b.closeForAppends()
			}
		}
		dq.mu.Unlock()
		if aborted {
			b.CompleteExceptionally(err, nil)
			a.Deallocate(b)
		}
	}
}

// incompleteBatches are the batches created and not yet deallocated (Java IncompleteBatches):
// what a flush waits for and a forced close aborts.
type incompleteBatches struct {
	mu  sync.Mutex
	set map[*ProducerBatch]struct{}
}

func (ib *incompleteBatches) add(b *ProducerBatch) {
	ib.mu.Lock()
	ib.set[b] = struct{}{}
	ib.mu.Unlock()
}

func (ib *incompleteBatches) remove(b *ProducerBatch) {
	ib.mu.Lock()
	delete(ib.set, b)
	ib.mu.Unlock()
}

func (ib *incompleteBatches) len() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return len(ib.set)
}

func (ib *incompleteBatches) snapshot() []*ProducerBatch {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	out := make([]*ProducerBatch, 0, len(ib.set))
	for b := range ib.set {
		out = append(out, b)
	}
	return out
}
