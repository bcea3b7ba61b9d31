package telemetry

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stuckExporter blocks every export until released, like a backend that stopped answering.
type stuckExporter struct {
	release chan struct{}
	entered chan struct{}
}

func (e *stuckExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *stuckExporter) Shutdown(context.Context) error { return nil }

// TestSpanQueueDropsInsteadOfBlocking: with the exporter stuck, ending spans never blocks;
// what the bounded queue cannot hold is dropped and counted in kafkatrail.telemetry.spans.dropped.
func TestSpanQueueDropsInsteadOfBlocking(t *testing.T) {
	exp := &stuckExporter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	dropped, err := mp.Meter(InstrumentationName).Int64Counter(MetricSpansDropped)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 8
	q := newExportProcessor(sdkExporter{exp: exp}, limit, exportOptions{batch: 1, delay: time.Millisecond, timeout: time.Hour}, dropped)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("test")

	const n = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			_, s := tr.Start(context.Background(), "s")
			s.End()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ending spans blocked behind a stuck exporter")
	}
	// The export in progress and the queue hold limit spans together.
	if got := q.Dropped(); got != n-limit {
		t.Fatalf("%d of %d spans dropped, want all but the %d the processor holds", got, n, limit)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricSpansDropped {
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					counted += p.Value
				}
			}
		}
	}
	if counted != q.Dropped() {
		t.Fatalf("%s = %d, processor dropped %d", MetricSpansDropped, counted, q.Dropped())
	}

	// Shutdown within its deadline even though the export never returns by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = tp.Shutdown(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v with a 300ms deadline", d)
	}
	close(exp.release)
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the queue's goroutine did not stop")
	}
	_ = mp.Shutdown(context.Background())
}
