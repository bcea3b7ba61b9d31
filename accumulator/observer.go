package accumulator

import (
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// RecordTrace is what a sampled record carries in its batch: a small token the producer's
// observer created at Send. Unsampled records carry nil, so tracing costs them nothing.
type RecordTrace interface {
	// RecordDone is called once, on the goroutine that completed the record (the sender's, or
	// Send's when the record never reached a batch), right after the record's callback
	// returned at callbackEnd; completing its batch began at callbacksStart. b is the batch
	// that completed it (its AttemptHistory holds the stage timestamps), nil when the record
	// failed before it was appended.
	RecordDone(b *ProducerBatch, md RecordMetadata, err error, callbacksStart, callbackEnd time.Time)
	// Appended is called when the record went into batch b, at the accumulator's clock, under
	// the partition's lock, so before the sender can drain the batch. The producer also calls
	// it with a nil b when Send failed the record before it reached a batch.
	Appended(b *ProducerBatch, at time.Time)
}

// Attempt is one send of a batch, the stage timestamps of the lifecycle between the deque and
// the response. The sender fills one per produce request that answered (or failed) for the
// batch; a batch holding a sampled record keeps all of them (Attempts), so a trace shows every
// attempt of a retried batch.
type Attempt struct {
	// Number is 1 for the first send, 2 for the first retry, and so on.
	Number int
	// TopicPartition is the batch's partition.
	TopicPartition metadata.TopicPartition
	// Enqueued is when the batch became drainable for this attempt: its creation, or its
	// re-enqueue for a retry. Drained is when it left the deque for the request: the time of
	// the sender iteration that drained it, before the batch was closed (compressed) and its
	// request built, which doSend then measures.
	Enqueued, Drained time.Time
	// Node, CorrelationID and APIVersion identify the request that carried the batch.
	Node          int32
	CorrelationID int32
	APIVersion    int16
	// Queued ends doSend: the request, framed, handed to its connection. Written ends
	// completedSend: the write of the request's last byte returned (its start when the answer
	// was read before the writer saw its write return). Received ends
	// completedReceive: the response's last byte was read (or the request failed without a
	// response, or, with acks=0, its write finished). Each is stamped where it happens, by
	// the network client and its connection's writer and reader, not at the poll that
	// reported it, and Drained <= Queued <= Written <= Received. Written is zero when the
	// request never left.
	Queued, Written, Received time.Time
	// Records, Bytes and UncompressedBytes describe the batch as sent: its record count, its
	// size on the wire and the size of its records before compression.
	Records, Bytes, UncompressedBytes int
	// Err is the outcome for this batch: the partition's error, the network error, or nil.
	Err error
}

// Observer is told when a batch reached its final state, success or failure, after every
// record's callback ran. A batch that was split is not reported: its records are, through the
// batches split from it. Calls come from the goroutine that completed the batch.
type Observer interface {
	BatchDone(b *ProducerBatch, err error, callbacksStart, callbacksEnd time.Time)
}

// RecordBatchOverhead is the size of a v2 record batch header: a batch's wire size is this plus
// its (possibly compressed) records.
const RecordBatchOverhead = recordBatchOverhead

// Traced reports whether the sender should keep the batch's attempts (AddAttempt): a record of
// it was sampled, or the observer may trace any record when it completes.
func (b *ProducerBatch) Traced() bool { return b.traced || b.keepAttempts }

// AddAttempt keeps a finished attempt for the batch's sampled records. The sender calls it,
// for traced batches only, before completing or re-enqueueing the batch.
func (b *ProducerBatch) AddAttempt(a Attempt) { b.attempts = append(b.attempts, a) }

// FirstTrace returns the RecordTrace of the batch's first sampled record, nil if none: a
// batch-level measurement recorded in its context links to that record's trace (an exemplar).
func (b *ProducerBatch) FirstTrace() RecordTrace { return b.firstTrace }

// AttemptHistory returns the attempts kept by AddAttempt, oldest first. For a batch split from a
// larger one they begin with the attempts of the original batch.
func (b *ProducerBatch) AttemptHistory() []Attempt { return b.attempts }

// RecordTiming is one record's timestamps in its batch, for an Observer's BatchDone.
type RecordTiming struct {
	// Sent is when Send handed the record over (AppendRecord.Now).
	Sent time.Time
	// Appended is when it went into the batch; zero unless stamped (Config.TraceAtCompletion,
	// or a traced record).
	Appended time.Time
	// Written is AppendRecord.Written: when the record's data came to be; zero when not known.
	Written time.Time
	// Traced is set when the record carries a RecordTrace (which reports it itself).
	Traced bool
	// Offset is the record's offset once its batch succeeded, else -1.
	Offset int64
}

// Records yields each record of the batch in order with its timings. Valid until the batch is
// deallocated; an Observer's BatchDone may use it.
func (b *ProducerBatch) Records() iter.Seq2[int, RecordTiming] {
	return func(yield func(int, RecordTiming) bool) {
		traces := traceCursor(b.traces)
		for i := range b.thunks {
			rt := b.timing(i)
			rt.Traced = traces.at(i) != nil
			if !yield(i, rt) {
				return
			}
		}
	}
}

// UntracedTiming returns record i's timings for a record SentNanos reported untraced (Traced
// is left false): one record's, where Records would convert every record's times. Valid until
// the batch is deallocated.
func (b *ProducerBatch) UntracedTiming(i int) RecordTiming { return b.timing(i) }

// timing is record i's timings but Traced.
func (b *ProducerBatch) timing(i int) RecordTiming {
	rt := RecordTiming{Sent: time.Unix(0, b.thunks[i].sent), Offset: -1}
	if b.appendedAt != nil && b.appendedAt[i] != 0 {
		rt.Appended = time.Unix(0, b.appendedAt[i])
	}
	if w := b.thunks[i].written; w != 0 {
		rt.Written = time.Unix(0, w)
	}
	if b.baseOffset >= 0 {
		rt.Offset = b.baseOffset + int64(i)
	}
	return rt
}

// SentNanos yields, for each record of the batch in order, when Send handed it over
// (AppendRecord.Now, Unix ns) and whether the record is traced (its RecordTrace then reports
// it): Records without the time.Time conversions, for a per-record latency. Valid until the
// batch is deallocated; an Observer's BatchDone may use it.
func (b *ProducerBatch) SentNanos() iter.Seq2[int64, bool] {
	return func(yield func(int64, bool) bool) {
		traces := traceCursor(b.traces)
		for i := range b.thunks {
			if !yield(b.thunks[i].sent, traces.at(i) != nil) {
				return
			}
		}
	}
}

// WrittenNanos returns record i's AppendRecord.Written in Unix ns, 0 when not known: beside
// SentNanos, for the per-record read stage and age. Valid until the batch is deallocated.
func (b *ProducerBatch) WrittenNanos(i int) int64 { return b.thunks[i].written }

// RecordHeader returns the value of record i's first header named key, nil when it has none:
// telemetry reads a record's trace context back this way when it traces the record only at
// completion. It decodes the batch's uncompressed records up to i, so it is for the rare
// record, not every one. Valid until the batch is deallocated; an Observer's BatchDone may use it.
func (b *ProducerBatch) RecordHeader(i int, key string) []byte {
	raw := b.buf
	for j := 0; len(raw) > 0; j++ {
		length, n := kbin.Varint(raw)
		end := n + int(length)
		if n == 0 || length < 0 || end > len(raw) {
			return nil
		}
		if j < i {
			raw = raw[end:]
			continue
		}
		var rec kmsg.Record
		if rec.ReadFrom(raw[:end]) != nil {
			return nil
		}
		for _, h := range rec.Headers {
			if h.Key == key {
				return h.Value
			}
		}
		return nil
	}
	return nil
}
