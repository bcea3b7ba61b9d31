package accumulator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// Callback receives the outcome of one record: its metadata (offset and timestamp on success)
// and nil, or the error that failed it. It runs on the goroutine that completes the batch (the
// sender), so it must be quick and must not block on the producer.
type Callback func(RecordMetadata, error)

// RecordMetadata describes a record after the broker answered for it. On failure Offset is -1
// and Timestamp is zero, as the Java client reports a failed record (which also reports -1
// sizes: here they are the record's either way, for a caller that accounts bytes in flight).
type RecordMetadata struct {
	Topic     string
	Partition int32
	// Offset is the record's offset in the partition, -1 when unknown.
	Offset int64
	// Tag is the record's Tag, as the caller gave it: one Callback can then serve many records
	// without a closure (an allocation) per record.
	Tag int64
	// Timestamp is the broker's log append time when the topic uses it, else the record's
	// create time.
	Timestamp time.Time
	// SerializedKeySize and SerializedValueSize are the key and value lengths, -1 for nil.
	SerializedKeySize, SerializedValueSize int
	// Record is the record's content when it failed (nil on success): what a caller needs to
	// send it again or keep it elsewhere, without holding a copy of every record it sends.
	// Its slices belong to the batch (or to Send's caller) and are valid only during the
	// callback: copy what must outlive it.
	Record *FailedRecord
}

// FailedRecord is a failed record's content, read back from its batch's uncompressed buffer.
type FailedRecord struct {
	Key, Value []byte
	Headers    []kmsg.Header
	Timestamp  time.Time // the record's create time
}

// Wire constants of the v2 record batch (KIP-98).
const (
	// recordBatchOverhead is the v2 batch header: base offset (8), length (4), partition
	// leader epoch (4), magic (1), crc (4), attributes (2), last offset delta (4), first and
	// max timestamp (8+8), producer id (8), producer epoch (2), base sequence (4), count (4).
	recordBatchOverhead = 61
	// maxRecordOverhead bounds a record's framing whatever its deltas: length varint (5),
	// attributes (1), timestamp delta varlong (10), offset delta varint (5). Java's
	// DefaultRecord.MAX_RECORD_OVERHEAD.
	maxRecordOverhead = 21

	batchLengthOffset = 8  // the Length field: bytes after it
	batchCRCOffset    = 17 // the CRC field
	batchAttrsOffset  = 21 // CRC-32C covers attributes to the end

	noProducerID    = -1
	noProducerEpoch = -1
	noSequence      = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Final states of a batch. A batch leaves stateOpen exactly once, which is what makes every
// record callback run exactly once: success, failure, and a split (whose records' callbacks
// move to the new batches) all race for the same compare-and-swap.
const (
	stateOpen int32 = iota
	stateSucceeded
	stateFailed
	stateSplit
)

// thunk is what a batch keeps per record to complete it: no key or value, those live encoded in
// the batch buffer. Keeping it a small value type lets a batch hold its thunks in one slice that
// is reused across batches (thunkPool), so appending a record allocates nothing. It holds only
// what every record needs (40 bytes, against ~110 in the batch for a 100-byte line); what few
// records have lives beside it in the batch:
// traces (the sampled records), timestamps (only once a record's create time is not its Send
// time) and appendedAt (only when the observer may trace any record at completion).
type thunk struct {
	cb        Callback
	tag       int64 // the caller's, handed back in RecordMetadata.Tag
	sent      int64 // when Send handed the record over, Unix ns: end-to-end latency
	written   int64 // AppendRecord.Written, Unix ns; 0: not known
	keySize   int32
	valueSize int32
}

// tracedRecord is a sampled record's trace, by the record's index in the batch.
type tracedRecord struct {
	index int
	trace RecordTrace
}

// traceCursor walks a batch's traces alongside its records, in index order.
type traceCursor []tracedRecord

// at returns record i's trace, nil when it has none; i must not go backwards.
func (c *traceCursor) at(i int) RecordTrace {
	if len(*c) > 0 && (*c)[0].index == i {
		t := (*c)[0].trace
		*c = (*c)[1:]
		return t
	}
	return nil
}

// sentMilli is the create time of a record whose timestamp is its Send time, as Append takes it.
func sentMilli(sent int64) int64 { return time.Unix(0, sent).UnixMilli() }

var thunkPool = sync.Pool{New: func() any { s := make([]thunk, 0, 64); return &s }}

// ProducerBatch is a batch of records for one partition, the unit the accumulator queues and
// the sender puts into produce requests. Records are encoded (kmsg.Record wire form) into a
// buffer from the BufferPool as they are appended; Close compresses them once; AppendEncoded
// writes the v2 record batch with the producer state current at that attempt.
//
// Appends happen under the partition deque's lock; once drained, a batch belongs to the sender
// goroutine. The exported time fields are plain timestamps for telemetry and retry decisions.
type ProducerBatch struct {
	// TopicPartition is the partition every record in the batch goes to.
	TopicPartition metadata.TopicPartition
	// Created is when the batch was started; linger and delivery.timeout.ms count from it.
	Created time.Time
	// Drained is when the batch last left its deque for a request.
	Drained time.Time
	// Attempts counts re-enqueues for retry; 0 until the first retry.
	Attempts int
	// LastAttempt is Created, then the time of the latest re-enqueue; the retry backoff counts
	// from it.
	LastAttempt time.Time
	// retryWait is the backoff of the current retry (RecordAccumulator.Reenqueue).
	retryWait time.Duration
	// Node is the broker node the batch was last drained for (its partition's leader then),
	// -1 until its first drain: telemetry's server.address.
	Node int32

	codec      Codec
	level      int32  // the codec's compression level (0: its default)
	buf        []byte // encoded records, uncompressed; cap is what was taken from the pool
	poolBuf    []byte // buf as allocated, returned to the pool whole
	writeLimit int    // header + records may not exceed this (the allocated size)
	offPool    bool   // split batches are allocated outside the pool, as in Java

	appendsClosed bool // no more records: the batch is full, drained, split or expired
	drainClosed   bool // Close ran: the sender drained the batch (Java's isClosed)
	// closeMu serialises the compression, done once by whichever comes first: the appender that
	// found the batch full (compressFull, outside the deque lock) or the sender's Close; and
	// release, after which neither may touch the buffers. compressed is set last, so a reader
	// that sees it sees payload too.
	closeMu    sync.Mutex
	compressed atomic.Bool
	released   bool // release ran (under closeMu)
	attrCodec  Codec
	payload    []byte       // the Records field once compressed: buf or the compressed bytes
	out        *sliceWriter // compressed output, returned to outputPool on deallocate

	numRecords     int32
	firstTimestamp int64
	maxTimestamp   int64
	lastAppend     time.Time
	thunks         []thunk
	thunkHolder    *[]thunk
	traces         []tracedRecord // the sampled records, in index order
	timestamps     []int64        // create times (ms) by index; nil while every one is sentMilli
	appendedAt     []int64        // append times (Unix ns) by index, with keepAttempts; else nil

	// Telemetry: obs is told when the batch completes; traced is set when a record carries a
	// RecordTrace, and only then (or with keepAttempts, for an observer that may trace any
	// record at completion) does the sender keep each attempt's timestamps in attempts.
	obs          Observer
	traced       bool
	keepAttempts bool
	firstTrace   RecordTrace // the first sampled record's
	attempts     []Attempt
	// baseOffset is the offset the broker gave the first record, once the batch succeeded.
	baseOffset int64

	producerID    int64
	producerEpoch int16
	baseSequence  int32
	retry         bool
	// currentLeaderEpoch is the partition's leader epoch last seen at Ready or Drain (-1:
	// none yet), and attemptsWhenLeaderLastChanged the attempt count when it last went up.
	currentLeaderEpoch            int32
	attemptsWhenLeaderLastChanged int
	sequenceReset                 bool // the producer state was rewritten after the batch had one (Java reopened)
	transactional                 bool // written with the transactional attribute (a transactional producer's batch)

	state       atomic.Int32
	done        chan struct{} // closed when the batch reaches a final state
	children    []*ProducerBatch
	deallocated atomic.Bool
}

func newBatch(tp metadata.TopicPartition, buf []byte, codec Codec, level int32, now time.Time) *ProducerBatch {
	holder := thunkPool.Get().(*[]thunk)
	return &ProducerBatch{
		TopicPartition:     tp,
		Created:            now,
		LastAttempt:        now,
		Node:               -1,
		codec:              codec,
		level:              level,
		buf:                buf[:0],
		poolBuf:            buf[:0],
		writeLimit:         cap(buf),
		lastAppend:         now,
		thunks:             (*holder)[:0],
		thunkHolder:        holder,
		producerID:         noProducerID,
		producerEpoch:      noProducerEpoch,
		baseSequence:       noSequence,
		baseOffset:         -1,
		currentLeaderEpoch: -1,
		done:               make(chan struct{}),
	}
}

// bytesFieldSize is the wire size of a varint-length-prefixed nullable byte field.
func bytesFieldSize(b []byte) int {
	if b == nil {
		return kbin.VarintLen(-1)
	}
	return kbin.VarintLen(int32(len(b))) + len(b)
}

// recordPayloadSize is the size of a record's key, value and headers on the wire.
func recordPayloadSize(key, value []byte, headers []kmsg.Header) int {
	n := bytesFieldSize(key) + bytesFieldSize(value) + kbin.VarintLen(int32(len(headers)))
	for i := range headers {
		n += kbin.VarintLen(int32(len(headers[i].Key))) + len(headers[i].Key) + bytesFieldSize(headers[i].Value)
	}
	return n
}

// recordBodySize is the exact size of what follows a record's length varint.
func recordBodySize(timestampDelta int64, offsetDelta int32, key, value []byte, headers []kmsg.Header) int {
	return 1 + kbin.VarlongLen(timestampDelta) + kbin.VarintLen(offsetDelta) + recordPayloadSize(key, value, headers)
}

// EstimateRecordSize returns the most bytes a batch holding only this record can take on the
// wire, Java's AbstractRecords.estimateSizeInBytesUpperBound for magic v2. The producer checks
// it against max.request.size and buffer.memory before appending; Append allocates it when the
// record is larger than batch.size.
func EstimateRecordSize(key, value []byte, headers []kmsg.Header) int {
	return recordBatchOverhead + maxRecordOverhead + recordPayloadSize(key, value, headers)
}

// tryAppend encodes the record into the batch if it fits, and reports whether it did. The first
// record always fits: the buffer was sized for it.
func (b *ProducerBatch) tryAppend(ts int64, key, value []byte, headers []kmsg.Header, t thunk, trace RecordTrace, now time.Time) bool {
	if b.appendsClosed {
		return false
	}
	var tsDelta int64
	if b.numRecords > 0 {
		tsDelta = ts - b.firstTimestamp
	}
	body := recordBodySize(tsDelta, b.numRecords, key, value, headers)
	size := kbin.VarintLen(int32(body)) + body
	if b.numRecords > 0 && recordBatchOverhead+len(b.buf)+size > b.writeLimit {
		return false
	}
	rec := kmsg.Record{
		Length:           int32(body),
		TimestampDelta64: tsDelta,
		OffsetDelta:      b.numRecords,
		Key:              key,
		Value:            value,
		Headers:          headers,
	}
	b.buf = rec.AppendTo(b.buf)
	if b.numRecords == 0 {
		b.firstTimestamp, b.maxTimestamp = ts, ts
	} else if ts > b.maxTimestamp {
		b.maxTimestamp = ts
	}
	i := len(b.thunks)
	b.thunks = append(b.thunks, t)
	if b.timestamps != nil || ts != sentMilli(t.sent) {
		if b.timestamps == nil {
			b.timestamps = make([]int64, i, cap(b.thunks))
			for j := range i {
				b.timestamps[j] = sentMilli(b.thunks[j].sent)
			}
		}
		b.timestamps = append(b.timestamps, ts)
	}
	if b.keepAttempts {
		b.appendedAt = append(b.appendedAt, 0) // stampAppend sets it
	}
	if trace != nil {
		b.traces = append(b.traces, tracedRecord{index: i, trace: trace})
		if !b.traced {
			b.traced, b.firstTrace = true, trace
		}
	}
	b.numRecords++
	if now.After(b.lastAppend) {
		b.lastAppend = now
	}
	return true
}

// closeForAppends stops further records; Java's closeForRecordAppends. A batch that refused a
// record is full from then on, even if a smaller record would still fit, which keeps records of
// one partition in append order.
func (b *ProducerBatch) closeForAppends() { b.appendsClosed = true }

// RecordCount returns the number of records in the batch.
func (b *ProducerBatch) RecordCount() int { return int(b.numRecords) }

// EstimatedSize returns the batch's size on the wire: header plus uncompressed records while it
// is open, the exact encoded size once closed. Drain compares it with max.request.size.
func (b *ProducerBatch) EstimatedSize() int {
	if b.compressed.Load() {
		return recordBatchOverhead + len(b.payload)
	}
	return recordBatchOverhead + len(b.buf)
}

// IsFull reports whether the batch takes no more records: its buffer is full, a record did not
// fit, or it has been closed. A full batch is ready to send without waiting for linger.ms.
func (b *ProducerBatch) IsFull() bool {
	return b.appendsClosed || recordBatchOverhead+len(b.buf) >= b.writeLimit
}

// InRetry reports whether the batch has been re-enqueued after a failed attempt.
func (b *ProducerBatch) InRetry() bool { return b.retry }

// HasSequence reports whether an idempotent producer has assigned the batch its sequence.
func (b *ProducerBatch) HasSequence() bool { return b.baseSequence != noSequence }

// BaseSequence returns the sequence of the first record, -1 when none is assigned.
func (b *ProducerBatch) BaseSequence() int32 { return b.baseSequence }

// LastSequence returns the sequence of the last record, -1 when none is assigned.
func (b *ProducerBatch) LastSequence() int32 {
	if !b.HasSequence() {
		return noSequence
	}
	return b.baseSequence + b.numRecords - 1
}

// ProducerID returns the producer id written in the header, -1 when not idempotent.
func (b *ProducerBatch) ProducerID() int64 { return b.producerID }

// ProducerEpoch returns the producer epoch written in the header, -1 when not idempotent.
func (b *ProducerBatch) ProducerEpoch() int16 { return b.producerEpoch }

// IsSplit reports whether the batch came from splitting a batch the broker found too large.
func (b *ProducerBatch) IsSplit() bool { return b.offPool }

// IsDone reports whether the batch has completed, failed or been split.
func (b *ProducerBatch) IsDone() bool { return b.state.Load() != stateOpen }

// Codec returns the codec the batch's records are (or will be) compressed with.
func (b *ProducerBatch) Codec() Codec { return b.codec }

// UncompressedSize returns the size of the encoded records before compression, for the
// compression-rate metric.
func (b *ProducerBatch) UncompressedSize() int { return len(b.buf) }

// SetProducerState sets the producer id, epoch and base sequence written at the next
// AppendEncoded. Called at drain for a batch's first send, and again when the producer's epoch
// is bumped and unacknowledged batches get new sequences (Java resetProducerState): since the
// header is rebuilt on every encode, a reset needs no reopening of the records.
func (b *ProducerBatch) SetProducerState(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// ResetProducerState gives a batch that already has a sequence a new producer id, epoch and
// base sequence: after an epoch bump, or when an earlier batch of a transaction failed and its
// sequences go to the batches after it (Java resetProducerState). SequenceHasBeenReset reports
// it until the batch is drained again.
func (b *ProducerBatch) ResetProducerState(id int64, epoch int16, baseSequence int32) {
	b.sequenceReset = true
	b.SetProducerState(id, epoch, baseSequence)
}

// SequenceHasBeenReset reports whether ResetProducerState rewrote the batch's producer state
// (Java sequenceHasBeenReset): a refusal of its earlier attempt, under the old sequences, says
// nothing about the new ones.
func (b *ProducerBatch) SequenceHasBeenReset() bool { return b.sequenceReset }

// SetTransactional marks the batch as part of a transaction: its header carries the
// transactional attribute, which tells the broker to hold its records back from read_committed
// consumers until the transaction's commit marker. The sender sets it at drain, before encoding.
func (b *ProducerBatch) SetTransactional() { b.transactional = true }

// Close stops appends and compresses the records, once; later calls do nothing. Drain calls it
// outside the deque lock, because compressing is the expensive part of sending. If compression
// fails the records go uncompressed, which every broker accepts, rather than failing the batch.
//
// The sender calls it (Drain, AppendEncoded), on a batch out of its deque; the compression may
// already be done, by the appender that found the batch full (compressFull), or under way, in
// which case Close waits for it.
func (b *ProducerBatch) Close() {
	if b.drainClosed {
		return
	}
	b.appendsClosed = true
	b.drainClosed = true
	b.compress()
}

// compressFull compresses a batch that an appender found full (closed for appends under the
// deque's lock), on that appender's goroutine and outside the lock. Java compresses as records
// are appended, on the threads that call send; this one compresses a batch whole, once, and
// doing it here keeps it off the sender's loop, which every batch of every partition passes
// through. The batch may meanwhile have been drained, sent and released: then it does nothing.
func (b *ProducerBatch) compressFull() {
	if b.codec != CodecNone {
		b.compress()
	}
}

// compress sets payload, once: the records compressed with the batch's codec, or as they are
// if it has none or compression fails (every broker accepts those, rather than failing the
// batch). buf takes no more records by now, so reading it outside the deque lock is safe.
func (b *ProducerBatch) compress() {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.compressed.Load() || b.released {
		return
	}
	b.attrCodec, b.payload = CodecNone, b.buf
	if b.codec != CodecNone {
		w := outputPool.Get().(*sliceWriter)
		if out, err := compress(b.codec, b.level, w, b.buf); err != nil {
			outputPool.Put(w)
		} else {
			b.out, b.attrCodec, b.payload = w, b.codec, out
		}
	}
	b.compressed.Store(true)
}

// AppendEncoded appends the batch as a v2 record batch to dst, ready to be the Records of a
// kmsg.ProduceRequestTopicPartition. The header is built at every call, so a retry carries the
// producer state set since. It closes the batch if Drain has not; it must not be called after
// Deallocate, when the buffers belong to other batches.
func (b *ProducerBatch) AppendEncoded(dst []byte) []byte {
	if b.deallocated.Load() {
		panic(fmt.Sprintf("accumulator: AppendEncoded on a deallocated batch for %s", b.TopicPartition))
	}
	b.Close()
	start := len(dst)
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           b.attributes(), // CreateTime, not control
		LastOffsetDelta:      b.numRecords - 1,
		FirstTimestamp:       b.firstTimestamp,
		MaxTimestamp:         b.maxTimestamp,
		ProducerID:           b.producerID,
		ProducerEpoch:        b.producerEpoch,
		FirstSequence:        b.baseSequence,
		NumRecords:           b.numRecords,
		Records:              b.payload,
	}
	dst = rb.AppendTo(dst)
	enc := dst[start:]
	binary.BigEndian.PutUint32(enc[batchLengthOffset:], uint32(len(enc)-batchLengthOffset-4))
	binary.BigEndian.PutUint32(enc[batchCRCOffset:], crc32.Checksum(enc[batchAttrsOffset:], castagnoli))
	return dst
}

// attributes is the v2 batch header's attributes: the codec and, for a transaction, bit 4.
func (b *ProducerBatch) attributes() int16 {
	attrs := int16(b.attrCodec)
	if b.transactional {
		attrs |= transactionalAttribute
	}
	return attrs
}

// transactionalAttribute is the v2 batch attribute bit of a transactional batch.
const transactionalAttribute = 0x10

// Complete runs every record's callback with its offset (baseOffset plus its index) and
// timestamp (logAppendTime in ms, or the record's create time when logAppendTime is -1). It
// returns false, running nothing, if the batch was already completed, failed or split.
func (b *ProducerBatch) Complete(baseOffset int64, logAppendTime int64) bool {
	return b.complete(baseOffset, logAppendTime, nil, nil)
}

// CompleteExceptionally fails every record: with recordErrs[i] when the broker named an error
// for record i, else with topErr. It returns false, running nothing, if the batch was already
// completed, failed or split.
func (b *ProducerBatch) CompleteExceptionally(topErr error, recordErrs map[int]error) bool {
	if topErr == nil {
		panic("accumulator: CompleteExceptionally with a nil error")
	}
	return b.complete(-1, -1, topErr, recordErrs)
}

// complete is the one way a batch's records complete, success (topErr nil) or failure. Its
// steps go in this order because each needs the one before:
//  1. the compare-and-swap out of stateOpen, so that of a success, a failure and a split
//     racing for the batch exactly one runs the records' callbacks;
//  2. per record, its callback, then its RecordTrace's RecordDone, so that the record's trace
//     ends with the callback it measured;
//  3. the accumulator Observer's BatchDone, while the thunks it reads (Records, SentNanos)
//     are still there;
//  4. done closes: a flush waiting on the batch returns, and Deallocate may recycle the thunks.
func (b *ProducerBatch) complete(baseOffset, logAppendTime int64, topErr error, recordErrs map[int]error) bool {
	final := stateSucceeded
	if topErr != nil {
		final = stateFailed
	}
	if !b.state.CompareAndSwap(stateOpen, final) {
		return false
	}
	b.baseOffset = baseOffset // -1 on failure: Records then reports no offsets
	var start time.Time
	if b.obs != nil || b.traced {
		start = time.Now()
	}
	traces := traceCursor(b.traces)
	// A failed batch hands each callback its record, read back from the uncompressed buffer
	// as split reads it (the buffer is given back only after the callbacks ran). Only failures
	// pay for it.
	var failed recordReader
	if topErr != nil {
		failed = recordReader{raw: b.buf, first: b.firstTimestamp}
	}
	for i := range b.thunks {
		t := &b.thunks[i]
		trace := traces.at(i)
		var fr *FailedRecord
		if topErr != nil {
			fr = failed.next()
		}
		if t.cb == nil && trace == nil {
			continue
		}
		md := RecordMetadata{
			Topic:               b.TopicPartition.Topic,
			Partition:           b.TopicPartition.Partition,
			Offset:              -1,
			Tag:                 t.tag,
			SerializedKeySize:   int(t.keySize),
			SerializedValueSize: int(t.valueSize),
			Record:              fr,
		}
		err := topErr
		switch {
		case err != nil:
			if e, ok := recordErrs[i]; ok && e != nil {
				err = e
			}
		case logAppendTime >= 0:
			md.Timestamp = time.UnixMilli(logAppendTime)
		default:
			md.Timestamp = time.UnixMilli(b.timestampAt(i))
		}
		if baseOffset >= 0 { // -1 on failure
			md.Offset = baseOffset + int64(i)
		}
		if t.cb != nil {
			t.cb(md, err)
		}
		if trace != nil {
			trace.RecordDone(b, md, err, start, time.Now())
		}
	}
	b.observeDone(topErr, start)
	close(b.done)
	return true
}

// recordReader reads a batch's records back, in order, from its uncompressed buffer.
type recordReader struct {
	raw   []byte
	first int64 // the batch's first timestamp, ms
	rec   kmsg.Record
	out   FailedRecord
}

// record decodes the next record into r.rec (reused by the call after). ok is false once the
// buffer is used up, or when it cannot be read: we encoded these bytes ourselves, so that is
// a batch already given back, or memory corruption (then left is true).
func (r *recordReader) record() (ok, left bool) {
	if len(r.raw) == 0 {
		return false, false
	}
	length, n := kbin.Varint(r.raw)
	end := n + int(length)
	r.rec = kmsg.Record{}
	if n == 0 || length < 0 || end > len(r.raw) || r.rec.ReadFrom(r.raw[:end]) != nil {
		r.raw = nil
		return false, true
	}
	r.raw = r.raw[end:]
	return true, false
}

// next returns the next record as a FailedRecord (reused by the call after), nil once the
// buffer is used up or cannot be read.
func (r *recordReader) next() *FailedRecord {
	if ok, _ := r.record(); !ok {
		return nil
	}
	r.out = FailedRecord{Key: r.rec.Key, Value: r.rec.Value, Headers: r.rec.Headers,
		Timestamp: time.UnixMilli(r.first + r.rec.TimestampDelta64)}
	return &r.out
}

// observeDone tells the observer the batch is done. It runs before done closes, so the thunks
// (Records, SentNanos) are still there: Deallocate recycles them only after done.
func (b *ProducerBatch) observeDone(err error, start time.Time) {
	if b.obs != nil {
		b.obs.BatchDone(b, err, start, time.Now())
	}
}

// split moves the batch's records, with their callbacks, into new batches of at most batchSize
// bytes and at most about half the batch (a record larger than that gets a batch of its own).
// Halving is our addition to Java's split: our batches never exceed batch.size uncompressed, so
// when the broker's limit is below batch.size, splitting at batch.size alone would rebuild the
// same batch and be refused again until the delivery timeout; halving always makes progress,
// down to one record per batch. The records are read back from the uncompressed buffer, which
// Close leaves intact. New batches keep the original creation time,
// so delivery.timeout.ms still counts from the first append, and, when the batch had a
// sequence, take consecutive sequences from its base (Java assignProducerStateToBatches).
// It returns nil if the batch had already reached a final state.
func (b *ProducerBatch) split(batchSize int) []*ProducerBatch {
	if !b.state.CompareAndSwap(stateOpen, stateSplit) {
		return nil
	}
	limit := min(batchSize, recordBatchOverhead+(len(b.buf)+1)/2)
	var out []*ProducerBatch
	var cur *ProducerBatch
	rd := recordReader{raw: b.buf}
	traces := traceCursor(b.traces)
	for i := 0; ; i++ {
		ok, corrupt := rd.record()
		if corrupt {
			// We encoded these bytes ourselves; failing to read them back is memory corruption.
			panic(fmt.Sprintf("accumulator: cannot re-read record %d of a batch for %s", i, b.TopicPartition))
		}
		if !ok {
			break
		}
		rec := &rd.rec
		ts := b.firstTimestamp + rec.TimestampDelta64
		t := b.thunks[i]
		trace := traces.at(i)
		if cur == nil || !cur.tryAppend(ts, rec.Key, rec.Value, rec.Headers, t, trace, b.lastAppend) {
			if cur != nil {
				cur.closeForAppends()
				out = append(out, cur)
			}
			size := max(limit, EstimateRecordSize(rec.Key, rec.Value, rec.Headers))
			cur = newBatch(b.TopicPartition, make([]byte, 0, size), b.codec, b.level, b.Created)
			cur.offPool = true
			cur.obs = b.obs
			cur.keepAttempts = b.keepAttempts
			if b.Traced() {
				// The attempt that was too large belongs to these records' history too.
				cur.attempts = slices.Clone(b.attempts)
			}
			cur.tryAppend(ts, rec.Key, rec.Value, rec.Headers, t, trace, b.lastAppend)
		}
		if b.appendedAt != nil {
			cur.appendedAt[len(cur.appendedAt)-1] = b.appendedAt[i]
		}
	}
	if cur != nil {
		cur.closeForAppends()
		out = append(out, cur)
	}
	if b.HasSequence() {
		seq := b.baseSequence
		for _, nb := range out {
			nb.SetProducerState(b.producerID, b.producerEpoch, seq)
			seq += nb.numRecords
		}
	}
	// Publish the children before done closes, so a flush waiting on this batch then waits on
	// them (the channel close orders the write before the waiter's read).
	b.children = out
	close(b.done)
	return out
}

// await blocks until the batch and, if it was split, every batch split from it are done.
func (b *ProducerBatch) await(ctx context.Context) error {
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, c := range b.children {
		if err := c.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reenqueued records a retry; Java's ProducerBatch.reenqueued.
func (b *ProducerBatch) reenqueued(now time.Time) {
	b.Attempts++
	if now.After(b.lastAppend) {
		b.lastAppend = now
	}
	b.LastAttempt = b.lastAppend
	b.retry = true
}

// maybeUpdateLeaderEpoch is Java's: a newer leader epoch than the one last seen is noted with
// the attempt count at which it appeared.
func (b *ProducerBatch) maybeUpdateLeaderEpoch(epoch int32) {
	if epoch >= 0 && epoch > b.currentLeaderEpoch {
		b.attemptsWhenLeaderLastChanged = b.Attempts
		b.currentLeaderEpoch = epoch
	}
}

// hasLeaderChangedForTheOngoingRetry is Java's: the batch is being retried and the leader
// changed since its last attempt failed.
func (b *ProducerBatch) hasLeaderChangedForTheOngoingRetry() bool {
	return b.Attempts >= 1 && b.Attempts == b.attemptsWhenLeaderLastChanged
}

// drained records that the batch left its deque for node.
func (b *ProducerBatch) drained(node int32, now time.Time) {
	// Java's ProducerBatch.close, which drainBatchesForOneNode calls at every drain, clears
	// reopened: from this attempt on, a refusal concerns the sequences the batch now carries.
	b.sequenceReset = false
	b.Node = node
	if now.After(b.Drained) {
		b.Drained = now
	}
}

// timestampAt is record i's create time, ms.
func (b *ProducerBatch) timestampAt(i int) int64 {
	if b.timestamps != nil {
		return b.timestamps[i]
	}
	return sentMilli(b.thunks[i].sent)
}

// callbacksRan reports whether the goroutine that won the final state has finished with the
// thunks. IsDone is not enough: a batch failed by AbortIncompleteBatches may still be running
// callbacks when the sender, whose Complete lost the race, deallocates it.
func (b *ProducerBatch) callbacksRan() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// release hands the batch's pooled memory back: the compressed output always, the thunks only
// once every callback has run (otherwise they are left to the GC).
// It returns the pool buffer to give back to the BufferPool, nil for a split batch.
func (b *ProducerBatch) release() []byte {
	// A compressFull still to come (its appender was descheduled) must not compress buffers
	// that are given back; one under way finishes first.
	b.closeMu.Lock()
	b.released = true
	b.closeMu.Unlock()
	if b.out != nil {
		b.out.b = b.out.b[:0]
		outputPool.Put(b.out)
		b.out = nil
	}
	b.payload = nil
	if b.thunkHolder != nil && b.callbacksRan() {
		clear(b.thunks) // drop callbacks so the pool does not keep user closures alive
		*b.thunkHolder = b.thunks[:0]
		thunkPool.Put(b.thunkHolder)
		b.thunks, b.thunkHolder = nil, nil
		b.traces, b.timestamps, b.appendedAt = nil, nil, nil
	}
	buf := b.poolBuf
	b.buf, b.poolBuf = nil, nil
	if b.offPool {
		return nil
	}
	return buf
}

// String names the batch the way the Java client logs one.
func (b *ProducerBatch) String() string {
	return fmt.Sprintf("ProducerBatch(topicPartition=%s, recordCount=%d)", b.TopicPartition, b.numRecords)
}
