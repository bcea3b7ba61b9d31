package producer

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// murmur2 is the Java client's Utils.murmur2, bit for bit: the hash every Kafka client that
// wants to agree with the Java producer on key placement must use. Go's int32 arithmetic wraps
// like Java's int, and >>> becomes a shift of the uint32 value.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// toPositive is Utils.toPositive: clears the sign bit rather than taking the absolute value, so
// math.MinInt32 maps to 0 like in Java.
func toPositive(n int32) int32 { return n & 0x7fffffff }

// keyPartition is BuiltInPartitioner.partitionForKey: positive(murmur2(key)) % partitions, over
// all partitions (available or not), so a key always lands where the Java client puts it.
func keyPartition(key []byte, numPartitions int) int32 {
	return toPositive(murmur2(key)) % int32(numPartitions)
}

// KeyPartition is keyPartition for tests outside this module (the reliability suite), which
// predict where the producer, and so the Java client, puts a keyed record.
func KeyPartition(key []byte, numPartitions int) int32 { return keyPartition(key, numPartitions) }

// stickyPartitioner is the built-in sticky partitioner (KIP-480, refined by KIP-794) for records
// without a key: all such records of a topic go to one partition until about batch.size bytes
// have been produced to it, then a new partition is drawn among those with a leader. Sticking
// fills batches, so fewer and larger requests reach the brokers than with round robin. The draw
// is uniform, or, with partitioner.adaptive.partitioning.enable (Java's default), weighted
// against each partition's queue of batches (BuiltInPartitioner.nextPartition): a broker that
// is slow to take batches gets fewer new ones, so it does not fill buffer.memory and hold every
// Send back. Safe for concurrent use.
type stickyPartitioner struct {
	batchSize int

	mu     sync.Mutex // guards topics; a topic's state is its own atomic
	topics map[string]*stickyTopic
}

// stickyTopic is one topic's sticky state: the partition (the high 32 bits; -1 before the
// first record) and the bytes produced to it since it was chosen (the low 32), in one word so
// that a record moves both with one compare-and-swap instead of a lock and an unlock.
type stickyTopic struct {
	state atomic.Uint64
	// load is the adaptive draw's weights (nil: uniform), which the sender's accumulator
	// Ready replaces (updateLoadStats).
	load atomic.Pointer[loadStats]
}

// loadStats is Java's PartitionLoadStats: partition ids and a cumulative frequency table in
// which a partition with a shorter queue takes a larger share of [0, cft[len-1]).
type loadStats struct {
	cft, ids []int32
}

func packSticky(partition int32, produced uint32) uint64 {
	return uint64(uint32(partition))<<32 | uint64(produced)
}

func newStickyPartitioner(batchSize int) *stickyPartitioner {
	return &stickyPartitioner{batchSize: batchSize, topics: make(map[string]*stickyTopic)}
}

// topic returns topic's sticky state; it stays the topic's for the partitioner's life, so the
// producer may keep it.
func (s *stickyPartitioner) topic(topic string) *stickyTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.topics[topic]
	if st == nil {
		st = new(stickyTopic)
		st.state.Store(packSticky(-1, 0))
		s.topics[topic] = st
	}
	return st
}

// partitionOf returns the sticky partition of the topic whose state is st and accounts size bytes
// to it. available lists partitions with a known leader; when empty, any of numPartitions is used.
func (s *stickyPartitioner) partitionOf(st *stickyTopic, size int, available []int32, numPartitions int) int32 {
	if numPartitions == 1 {
		return 0 // no choice to make, and nothing to account for one
	}
	for {
		old := st.state.Load()
		partition, produced := int32(old>>32), uint32(old)
		if partition < 0 || int(produced) >= s.batchSize || int(partition) >= numPartitions {
			if ls := st.load.Load(); ls != nil {
				partition = ls.draw(rand.Int32N(math.MaxInt32))
			} else {
				partition = nextStickyPartition(partition, available, numPartitions)
			}
			produced = 0
		}
		// Saturating: produced only needs to reach batch.size.
		produced = uint32(min(uint64(produced)+uint64(size), math.MaxUint32))
		if st.state.CompareAndSwap(old, packSticky(partition, produced)) {
			return partition
		}
	}
}

// nextStickyPartition draws a partition other than prev when there is a choice, so a switch is
// a real switch.
func nextStickyPartition(prev int32, available []int32, numPartitions int) int32 {
	if len(available) == 0 {
		if numPartitions <= 1 {
			return 0
		}
		p := rand.Int32N(int32(numPartitions))
		if p == prev {
			p = (p + 1) % int32(numPartitions)
		}
		return p
	}
	if len(available) == 1 {
		return available[0]
	}
	i := rand.IntN(len(available))
	if available[i] == prev {
		i = (i + 1) % len(available)
	}
	return available[i]
}

// draw is BuiltInPartitioner.nextPartition with load stats: random (non-negative) picks the
// first partition whose cumulative frequency is greater than random modulo the total.
func (ls *loadStats) draw(random int32) int32 {
	total := ls.cft[len(ls.cft)-1]
	r := random % total
	i, _ := slices.BinarySearch(ls.cft, r+1) // the first value > r
	return ls.ids[i]
}

// updateLoadStats is BuiltInPartitioner.updatePartitionLoadStats for topic: queueSizes[:length]
// are the queue lengths (in batches) of the partitions partitionIDs[:length] that have a leader
// and are not excluded for being unavailable; len(queueSizes) counts every partition the
// accumulator has a queue for. Nil queueSizes (adaptive off, or not every partition has had a
// batch yet), fewer than two partitions, or equal queues with none excluded: uniform. The
// slices are the caller's scratch: queueSizes is overwritten.
func (s *stickyPartitioner) updateLoadStats(topic string, queueSizes, partitionIDs []int32, length int) {
	st := s.topic(topic)
	if queueSizes == nil || length < 1 || len(queueSizes) < 2 {
		st.load.Store(nil)
		return
	}
	maxPlus1, allEqual := queueSizes[0], true
	for _, q := range queueSizes[1:length] {
		if q != queueSizes[0] {
			allEqual = false
		}
		maxPlus1 = max(maxPlus1, q)
	}
	maxPlus1++
	if allEqual && length == len(queueSizes) {
		st.load.Store(nil)
		return
	}
	// The table is folded into queueSizes (the caller's scratch, as Java folds its array in
	// place), so that unchanged weights, the common case between two sender loops, allocate
	// nothing.
	sum := int32(0)
	for i, q := range queueSizes[:length] {
		sum += maxPlus1 - q
		queueSizes[i] = sum
	}
	cft := queueSizes[:length]
	if cur := st.load.Load(); cur != nil && slices.Equal(cur.cft, cft) && slices.Equal(cur.ids, partitionIDs[:length]) {
		return
	}
	st.load.Store(&loadStats{cft: slices.Clone(cft), ids: slices.Clone(partitionIDs[:length])})
}
