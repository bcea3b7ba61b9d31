package telemetry

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	noopmetric "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/producer"
)

// recordStages are the six stages of a traced record, in order.
var recordStages = []string{SpanAppend, SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, SpanCallback}

// stageTally takes traced records' spans as the exporter does and keeps, per stage, each
// trace's time in it (summed over the attempts of a retried batch): no span is kept.
type stageTally struct {
	discardProcessor
	mu     sync.Mutex
	traces int
	spent  map[string][]time.Duration
}

func (s *stageTally) OnEndRecordSpans(spans []RecordSpan) {
	var root bool
	spent := make(map[string]time.Duration, len(recordStages))
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, SpanSendPrefix) {
			root = true
		} else if slices.Contains(recordStages, sp.Name) {
			spent[sp.Name] += time.Duration(sp.End - sp.Start)
		}
	}
	if !root {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces++
	for _, stage := range recordStages {
		s.spent[stage] = append(s.spent[stage], spent[stage])
	}
}

// check fails t when a stage lasted no time in most traces: a stage the producer does not
// measure where it happens reads zero in all of them.
func (s *stageTally) check(t *testing.T, minTraces int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.traces < minTraces {
		t.Fatalf("%d traces, want at least %d", s.traces, minTraces)
	}
	for _, stage := range recordStages {
		d := slices.Clone(s.spent[stage])
		slices.Sort(d)
		nonZero := 0
		for _, x := range d {
			if x > 0 {
				nonZero++
			}
		}
		t.Logf("%-16s > 0 in %4d of %d traces; median %v, p90 %v", stage, nonZero, s.traces, d[len(d)/2], d[len(d)*9/10])
		if 2*nonZero <= s.traces {
			t.Errorf("%s lasted no time in %d of %d traces: not measured where it happens", stage, s.traces-nonZero, s.traces)
		}
	}
}

// TestRealBrokerStagesMeasured sends real traffic through the producer and its observer to
// the real broker, at a low rate (a record every 50 ms: each its own batch, the sender asleep
// in between) and at a high one (records as fast as Send takes them, full batches, the sender
// busy), and wants every one of the six stages to last longer than zero in most traces. doSend
// read zero in all of them (stamped with the drain's time), and at a low rate completedReceive
// too (stamped at the poll that also took the write's report).
func TestRealBrokerStagesMeasured(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		records int
		every   time.Duration
		// minTraces: every record at the low rate; at the high one, well below the sample's
		// expected count (2 % of the records) so that only a broken count fails.
		minTraces int
	}{
		{"low rate", sdktrace.AlwaysSample(), 20, 50 * time.Millisecond, 20},
		{"high rate", newParentRatio(0.02), 50000, 0, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tally := &stageTally{spent: map[string][]time.Duration{}}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(ProviderSampler(tc.sampler)))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			obs, err := NewProducerObserver(tp, noopmetric.NewMeterProvider(),
				ObserverConfig{Sampler: tc.sampler, SpanProcessor: tally, ClientID: "kafkatrail-test"})
			if err != nil {
				t.Fatal(err)
			}
			topic := kafkatest.NewTopic(t, 1)
			p := newProducer(t, []string{bootstrap}, obs, nil)

			var acked, failed atomic.Int64
			var firstErr atomic.Value
			cb := func(_ producer.RecordMetadata, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				acked.Add(1)
			}
			value := bytes.Repeat([]byte("x"), 100)
			var tick <-chan time.Time
			if tc.every > 0 {
				ticker := time.NewTicker(tc.every)
				defer ticker.Stop()
				tick = ticker.C
			}
			start := time.Now()
			for i := range tc.records {
				if tick != nil && i > 0 {
					<-tick
				}
				if err := p.Send(context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Value: value}, cb); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			// A record's spans are handed over right after its callback, before its batch counts
			// as done for Flush: once Flush returns, every trace is in.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := p.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if n := acked.Load(); n != int64(tc.records) {
				t.Fatalf("%d of %d records acknowledged, %d failed (first: %v)", n, tc.records, failed.Load(), firstErr.Load())
			}
			t.Logf("%d records in %v", tc.records, time.Since(start).Round(time.Millisecond))
			tally.check(t, tc.minTraces)
		})
	}
}
