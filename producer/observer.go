package producer

import (
	"context"
	"time"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/network"
)

// Observer is the producer's telemetry hook (package telemetry implements it with
// OpenTelemetry). The producer records stage timestamps on its batches and requests as plain
// time.Time values and tells the observer at a few points; without an observer (the default)
// none of these calls happen.
//
// Calls come from the goroutine that calls Send (StartSend, Appended), from New
// (TracesAtCompletion, ProducerStarted) or from the sender goroutine (everything else), in the
// order Sender.handleProduceResponse tells for a produce response: implementations must be safe for concurrent use, quick, and
// must not call back into the producer.
type Observer interface {
	// Connections, requests and in-flight counts, from the network layer.
	network.Observer
	// BatchDone is called when a batch completed, after its callbacks ran.
	accumulator.Observer

	// StartSend is called first thing in Send, at now, with Send's ctx (whose span context, if
	// any, is the record's parent). It decides whether the record is traced. When it is not,
	// it returns nil and r.Headers, allocating nothing. When it is, it returns the token the
	// record carries in its batch and the headers to encode, with the trace context injected
	// (a new slice: r.Headers is the caller's and is not modified).
	StartSend(ctx context.Context, r *Record, now time.Time) (accumulator.RecordTrace, []Header)
	// Appended reports the append stage of every record: from Send called (start) to the
	// record in its batch (end), or to the error that failed it in Send. trace is what
	// StartSend returned (nil for an untraced record). end is zero when the record is not
	// traced and Send did not wait (for metadata or buffer memory): the stage was not timed,
	// to spare every record a clock read, and lasted about as long as appending takes.
	Appended(topic string, trace accumulator.RecordTrace, start, end time.Time, err error)
	// AttemptDone reports a batch's produce attempt that answered or failed, after the sender
	// decided what follows and the batch's callbacks and BatchDone ran, if it completed; retry
	// is true when the batch was re-enqueued for another attempt.
	AttemptDone(b *accumulator.ProducerBatch, a accumulator.Attempt, retry bool)
	// TracesAtCompletion reports whether the observer may trace a record only when it
	// completes (a latency threshold). New asks once: when true, the accumulator stamps every
	// record's append time and every batch keeps its attempts
	// (accumulator.Config.TraceAtCompletion), not only the batches holding a sampled record.
	TracesAtCompletion() bool
	// ProducerStarted hands the observer the producer's buffer pool (safe for concurrent use),
	// for its gauges. The producer calls the returned function when it has closed.
	ProducerStarted(pool *accumulator.BufferPool) (stopped func())
}

// WithObserver installs a telemetry observer (see Observer); telemetry.Provider's
// ProducerOption returns one.
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }
