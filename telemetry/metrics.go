package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Histogram boundaries. Producer stages range from microseconds (doSend) to the delivery
// timeout (minutes), so the latency buckets start well below OpenTelemetry's defaults.
var (
	durationBuckets    = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	batchBytesBuckets  = []float64{128, 512, 1024, 4096, 8192, 16384, 32768, 65536, 262144, 1048576}
	batchCountBuckets  = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}
	compressionBuckets = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.2}
	// ageBuckets reach further than durationBuckets: a line read after an outage, or from a
	// file found late, is minutes to days old.
	ageBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400}
)

// instruments are the producer observer's metric instruments. OpenTelemetry instruments are
// safe for concurrent use, so producing goroutines and the sender record without locks.
type instruments struct {
	opDuration   durations
	age          durations
	sent         metric.Int64Counter
	stage        durations
	queueTime    metric.Float64Histogram
	retried      metric.Int64Counter
	failed       metric.Int64Counter
	batchSize    metric.Int64Histogram
	batchRecords metric.Int64Histogram
	compression  metric.Float64Histogram
	throttle     metric.Float64Histogram

	requestDuration metric.Float64Histogram
	networkIO       metric.Int64Counter
	connCreations   metric.Int64Counter
	connCloses      metric.Int64Counter
	connFailures    metric.Int64Counter
	connSetup       metric.Float64Histogram
}

// newInstruments builds the observer's instruments on m; the two histograms recorded once per
// record go to own instead when it is not nil (see Histograms).
func newInstruments(m metric.Meter, o *ProducerObserver, own *Histograms) (*instruments, error) {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	hist := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		return instrument(check, m.Float64Histogram, name, unit, desc,
			[]metric.Float64HistogramOption{metric.WithExplicitBucketBoundaries(buckets...)}...)
	}
	intHist := func(name, unit, desc string, buckets []float64) metric.Int64Histogram {
		return instrument(check, m.Int64Histogram, name, unit, desc,
			[]metric.Int64HistogramOption{metric.WithExplicitBucketBoundaries(buckets...)}...)
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		return instrument(check, m.Int64Counter, name, unit, desc)
	}
	const (
		opDurationDesc = "Duration of a send: Send called to the record's callback returned."
		stageDesc      = "Time spent in each lifecycle stage (read and append per record, the others per batch attempt)."
		ageDesc        = "A record's age when the broker acknowledged it: its data written to acknowledged."
	)
	var opDuration, stage, age durations
	if own != nil {
		opDuration = own.duration(MetricOperationDuration, opDurationDesc, durationBuckets)
		stage = own.duration(MetricStageDuration, stageDesc, durationBuckets)
		age = own.duration(MetricRecordAge, ageDesc, ageBuckets)
	} else {
		opDuration = sdkDurations{hist(MetricOperationDuration, "s", opDurationDesc, durationBuckets)}
		stage = sdkDurations{hist(MetricStageDuration, "s", stageDesc, durationBuckets)}
		age = sdkDurations{hist(MetricRecordAge, "s", ageDesc, ageBuckets)}
	}
	in := &instruments{
		opDuration:      opDuration,
		age:             age,
		sent:            counter(MetricSentMessages, "{message}", "Records a broker acknowledged."),
		stage:           stage,
		queueTime:       hist(MetricRecordQueueTime, "s", "Time a batch waited in its deque: created or re-enqueued to drained.", durationBuckets),
		retried:         counter(MetricRecordsRetried, "{record}", "Records in batches sent again after a retriable error."),
		failed:          counter(MetricRecordsFailed, "{record}", "Records whose callback got an error."),
		batchSize:       intHist(MetricBatchSize, "By", "Batch size on the wire, after compression.", batchBytesBuckets),
		batchRecords:    intHist(MetricBatchRecords, "{record}", "Records per batch.", batchCountBuckets),
		compression:     hist(MetricCompressionRatio, "1", "Compressed over uncompressed batch size.", compressionBuckets),
		throttle:        hist(MetricThrottleTime, "s", "Throttle time reported by brokers in produce responses.", durationBuckets),
		requestDuration: hist(MetricRequestDuration, "s", "Request queued to response read, per broker and API.", durationBuckets),
		networkIO:       counter(MetricNetworkIO, "By", "Bytes written to and read from brokers."),
		connCreations:   counter(MetricConnectionCreations, "{connection}", "Connections established."),
		connCloses:      counter(MetricConnectionCloses, "{connection}", "Established connections that closed."),
		connFailures:    counter(MetricConnectionFailures, "{connection}", "Connection attempts that failed."),
		connSetup:       hist(MetricConnectionSetup, "s", "Connection attempt to established (TCP, TLS, SASL).", durationBuckets),
	}

	// Observable instruments read state that other goroutines own, when a reader collects.
	bufTotal := instrument(check, m.Int64ObservableGauge, MetricBufferTotal, "By", "buffer.memory.")
	bufAvail := instrument(check, m.Int64ObservableGauge, MetricBufferAvailable, "By", "Buffer memory not held by batches.")
	bufWaiting := instrument(check, m.Int64ObservableGauge, MetricBufferWaiting, "{waiter}", "Sends blocked waiting for buffer memory.")
	bufWait := instrument(check, m.Float64ObservableCounter, MetricBufferWaitTime, "s", "Total time Sends spent blocked on buffer memory.")
	bufExhausted := instrument(check, m.Int64ObservableCounter, MetricBufferExhausted, "{allocation}", "Sends that failed after max.block.ms without buffer memory.")
	metaAge := instrument(check, m.Float64ObservableGauge, MetricMetadataAge, "s", "Time since the last successful metadata response.")
	inFlight := instrument(check, m.Int64ObservableGauge, MetricInFlightRequests, "{request}", "Requests sent to the broker and not answered.")
	connCount := instrument(check, m.Int64ObservableGauge, MetricConnectionCount, "{connection}", "1 per known broker node, in its current connection state.")
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	_, err := m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o.poolsMu.Lock()
		var total, avail, waiting, exhausted int64
		var wait time.Duration
		for p := range o.pools {
			total += p.TotalMemory()
			avail += p.AvailableMemory()
			waiting += int64(p.QueuedWaiters())
			exhausted += p.ExhaustedCount()
			wait += p.WaitTime()
		}
		pools := len(o.pools)
		o.poolsMu.Unlock()
		if pools > 0 {
			obs.ObserveInt64(bufTotal, total)
			obs.ObserveInt64(bufAvail, avail)
			obs.ObserveInt64(bufWaiting, waiting)
			obs.ObserveFloat64(bufWait, wait.Seconds())
			obs.ObserveInt64(bufExhausted, exhausted)
		}
		if at := o.metadataAt.Load(); at != 0 {
			obs.ObserveFloat64(metaAge, time.Since(time.Unix(0, at)).Seconds())
		}
		o.inFlight.Range(func(k, v any) bool {
			obs.ObserveInt64(inFlight, v.(*atomic.Int64).Load(), o.node(k.(int32)).opt)
			return true
		})
		o.conn.mu.Lock()
		for node, state := range o.conn.states {
			obs.ObserveInt64(connCount, 1, metric.WithAttributes(attribute.Int(AttrNodeID, int(node)),
				attribute.String(AttrConnectionState, state.String())))
		}
		o.conn.mu.Unlock()
		return nil
	}, bufTotal, bufAvail, bufWaiting, bufWait, bufExhausted, metaAge, inFlight, connCount)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// instrument makes one instrument with newInstrument (a metric.Meter method), with its unit,
// description and more options, and hands its error to check. Every option the metric package
// makes for a unit or description fits every instrument's option type.
func instrument[I, O any](check func(error), newInstrument func(string, ...O) (I, error), name, unit, desc string, more ...O) I {
	opts := append([]O{any(metric.WithUnit(unit)).(O), any(metric.WithDescription(desc)).(O)}, more...)
	in, err := newInstrument(name, opts...)
	check(err)
	return in
}
