package telemetry

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/accumulator"
)

// recordTrace is a sampled record's token: its `send {topic}` span, started at Send, and the
// moment the record went into its batch. The stage children are created only when the record
// completes (RecordDone), from the timestamps its batch kept, with explicit start and end times.
type recordTrace struct {
	o     *ProducerObserver
	ctx   context.Context // carries span, and the decision mark for the children
	span  trace.Span
	start time.Time
	// appended is written under the partition deque's lock (or by Send, for a record that
	// failed there) before the sender can see the record, and read when it completes.
	appended time.Time
}

var _ accumulator.RecordTrace = (*recordTrace)(nil)

// Appended notes when the record went into its batch: the end of the append stage.
func (t *recordTrace) Appended(_ *accumulator.ProducerBatch, at time.Time) { t.appended = at }

// RecordDone creates the stage spans and ends the send span. The children tile the parent:
// each starts where the previous one ended, so their durations add up to the parent's.
//
//	append [Send, in batch] then, per attempt, drain [.., drained] doSend [.., queued]
//	completedSend [.., written] completedReceive [.., received]; callback [.., callback returned]
//
// A record that completed without an answer to its last drain (delivery timeout, close) gets
// a drain up to then, or, if a request carrying it was still in flight, a drain to that
// request's drain and a completedReceive that ends in the failure. A record that failed in
// Send has only append and callback. Timestamps come from different clocks reads (the
// sender's loop time, the network poll's), so a stage that would end before it starts is
// clamped to zero length rather than overlap its neighbour.
func (t *recordTrace) RecordDone(b *accumulator.ProducerBatch, md accumulator.RecordMetadata, err error, callbacksStart, callbackEnd time.Time) {
	// Wall-clock times only (Round(0) drops the monotonic reading): some timestamps come from a
	// batch's records as Unix nanoseconds, and durations mixing the two kinds would not add up.
	tr := tiler{tracer: t.o.tracer, ctx: t.ctx, at: t.start.Round(0)}
	appended := t.appended
	if appended.IsZero() {
		appended = callbacksStart
	}
	tr.child(SpanAppend, appended, nil)
	if b != nil {
		hist := b.AttemptHistory()
		for i, a := range hist {
			attempt := attribute.Int(AttrAttempt, i+1)
			tr.child(SpanDrain, a.Drained, nil, attempt)
			req := []attribute.KeyValue{
				attempt,
				attribute.Int(AttrNodeID, int(a.Node)),
				attribute.String(AttrMessagingPartitionID, strconv.Itoa(int(a.TopicPartition.Partition))),
				attribute.Int(AttrMessagingBatchCount, a.Records),
				attribute.Int(AttrBatchBytes, a.Bytes),
				attribute.Int(AttrCorrelationID, int(a.CorrelationID)),
				attribute.Int(AttrAPIVersion, int(a.APIVersion)),
			}
			tr.child(SpanDoSend, a.Queued, nil, req...)
			tr.child(SpanCompletedSend, a.Written, nil, req...)
			tr.child(SpanCompletedReceive, a.Received, a.Err, req...)
		}
		// b.Attempts counts re-enqueues: as many as the history means the last attempt was
		// retried, so the record was queued (or in flight again) when it completed.
		if len(hist) == 0 || b.Attempts >= len(hist) {
			attempt := attribute.Int(AttrAttempt, len(hist)+1)
			var lastDrain time.Time
			if len(hist) > 0 {
				lastDrain = hist[len(hist)-1].Drained
			}
			if b.Drained.After(lastDrain) {
				tr.child(SpanDrain, b.Drained, nil, attempt)
				tr.child(SpanCompletedReceive, callbacksStart, err, attempt)
			} else {
				tr.child(SpanDrain, callbacksStart, nil, attempt)
			}
		}
	}
	tr.child(SpanCallback, callbackEnd, nil)

	if md.Partition >= 0 {
		t.span.SetAttributes(attribute.String(AttrMessagingPartitionID, strconv.Itoa(int(md.Partition))))
	}
	if md.Offset >= 0 {
		t.span.SetAttributes(attribute.Int64(AttrMessagingKafkaOffset, md.Offset))
	}
	if err != nil {
		t.span.SetAttributes(attribute.String(AttrErrorType, ErrorType(err)))
		t.span.SetStatus(codes.Error, err.Error())
	}
	if b != nil {
		// The record's end-to-end latency, recorded in its span's context so the histogram
		// keeps the trace id as an exemplar: a dashboard's outlier links to this trace.
		// (BatchDone records the untraced records; one that failed in Send, Appended.)
		ta := t.o.topic(b.TopicPartition.Topic)
		opts := ta.opOK
		if err != nil {
			opts = []metric.RecordOption{metric.WithAttributes(append(ta.opAttrs(), attribute.String(AttrErrorType, ErrorType(err)))...)}
		}
		t.o.m.opDuration.Record(t.ctx, seconds(callbackEnd.Sub(t.start)), opts...)
	}
	t.span.End(trace.WithTimestamp(tr.at)) // the callback stage's end, never before its start
}

// tiler creates consecutive child spans of the span in ctx: each starts where the previous
// ended.
type tiler struct {
	tracer trace.Tracer
	ctx    context.Context
	at     time.Time
}

// child records a span from the current position to end (clamped: never before the position,
// and a zero end, a stage not reached, makes it zero length), with error.type and an error
// status when err is set.
func (t *tiler) child(name string, end time.Time, err error, attrs ...attribute.KeyValue) {
	end = end.Round(0)
	if end.IsZero() || end.Before(t.at) {
		end = t.at
	}
	_, s := t.tracer.Start(t.ctx, name, trace.WithTimestamp(t.at), trace.WithAttributes(attrs...))
	if err != nil {
		s.SetAttributes(attribute.String(AttrErrorType, ErrorType(err)))
		s.SetStatus(codes.Error, err.Error())
	}
	s.End(trace.WithTimestamp(end))
	t.at = end
}
