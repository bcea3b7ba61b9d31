package telemetry

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/internal/otlptrace"
	"github.com/kafkatrail/kafkatrail/producer"
)

// discardProcessor ends the pipeline: spans are built and ended, then forgotten, so the
// benchmark measures what tracing costs the producer, not an exporter.
type discardProcessor struct{}

func (discardProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardProcessor) Shutdown(context.Context) error                  { return nil }
func (discardProcessor) ForceFlush(context.Context) error                { return nil }

// OnEndRecordSpans takes records' spans as Setup's processors do: as they are built.
func (discardProcessor) OnEndRecordSpans([]RecordSpan) {}

// encodeExporter encodes each batch as the OTLP exporter does and sends it nowhere: with it the
// export costs what it costs, minus the transport. bytes, when set, counts what would be sent.
type encodeExporter struct {
	enc   *otlptrace.TraceEncoder
	bytes *atomic.Int64
}

func (e encodeExporter) Export(_ context.Context, spans []RecordSpan) error {
	b := e.enc.Encode(spans)
	if e.bytes != nil {
		e.bytes.Add(int64(len(b)))
	}
	return nil
}

func (encodeExporter) Shutdown(context.Context) error { return nil }

// BenchmarkSendTracing measures Send to acknowledgement of 100-byte records against an
// in-process kfake broker, without telemetry and with the observer at three sampling ratios:
//
//	go test -run '^$' -bench SendTracing -benchmem ./telemetry/
//
// allocs/op counts every allocation of the process per record: the producer's, the sender's
// and kfake's, amortised over flushes of 1000 records; the differences between sub-benchmarks
// are what telemetry costs ("+export" adds the OTLP exporter: spans encoded, not sent). "off"
// is the observer with metrics and no tracing; an unsampled record allocates nothing for tracing (TestUnsampledRecordIsUntouched pins it to zero).
func BenchmarkSendTracing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		observe bool
		sampler sdktrace.Sampler
		// batchSize, when set, is batch.size instead of 1 MiB (batches then go as they fill:
		// about 130 records of 100 bytes at 16 KiB); batchStages is ObserverConfig.BatchStages.
		batchSize   int
		batchStages bool
	}{
		{name: "none"},
		{name: "off", observe: true},
		{name: "1%", observe: true, sampler: newParentRatio(0.01)}, // what Setup builds
		{name: "100%", observe: true, sampler: sdktrace.AlwaysSample()},
		{name: "1%+export", observe: true, sampler: newParentRatio(0.01)},
		{name: "100%+export", observe: true, sampler: sdktrace.AlwaysSample()},
		// The two forms of a batch's stages, with batches of a realistic size.
		{name: "1%+export/16KiB/stages-per-record", observe: true, sampler: newParentRatio(0.01), batchSize: 16384},
		{name: "1%+export/16KiB/stages-per-batch", observe: true, sampler: newParentRatio(0.01), batchSize: 16384, batchStages: true},
		{name: "100%+export/16KiB/stages-per-record", observe: true, sampler: sdktrace.AlwaysSample(), batchSize: 16384},
		{name: "100%+export/16KiB/stages-per-batch", observe: true, sampler: sdktrace.AlwaysSample(), batchSize: 16384, batchStages: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newKfake(b, "bench")
			cfg := producer.DefaultConfig()
			cfg.BootstrapServers = c.ListenAddrs()
			cfg.LingerMs = 1000     // batches go at each Flush, not while the loop appends
			cfg.BatchSize = 1 << 20 // and never fill up in between
			if bc.batchSize > 0 {
				cfg.BatchSize = bc.batchSize
			}
			var opts []producer.Option
			var exported *exportProcessor
			var wire atomic.Int64 // the export requests' bytes
			if bc.observe {
				hist := NewHistograms() // as Setup builds it
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))))
				defer mp.Shutdown(context.Background())
				s := bc.sampler
				if s == nil {
					s = sdktrace.NeverSample()
				}
				var sink sdktrace.SpanProcessor = discardProcessor{}
				if strings.Contains(bc.name, "+export") {
					// What Setup builds, with a limit a window's spans stay under (each window is
					// exported before the next begins): every span is exported.
					ep := newExportProcessor(encodeExporter{otlptrace.NewTraceEncoder(resource.Default()), &wire}, 1<<16, exportOptions{batch: 2048, delay: defaultExportDelay, timeout: defaultExportTimeout}, nil)
					defer func() {
						_ = ep.Shutdown(context.Background())
						if ep.Dropped() > 0 {
							b.Fatalf("%d spans dropped", ep.Dropped())
						}
					}()
					exported = ep
					sink = ep
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(ProviderSampler(s)), sdktrace.WithSpanProcessor(sink))
				defer tp.Shutdown(context.Background())
				obs, err := NewProducerObserver(tp, mp, ObserverConfig{Sampler: bc.sampler, SpanProcessor: sink, Histograms: hist, BatchStages: bc.batchStages})
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, producer.WithObserver(obs))
			}
			p, err := producer.New(cfg, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx := context.Background()
			rec := &producer.Record{Topic: "bench", Partition: producer.PartitionAny, Value: make([]byte, 100)}
			var failed error
			cb := func(_ producer.RecordMetadata, err error) {
				if err != nil {
					failed = err // the sender goroutine runs every callback; Flush orders it before the read
				}
			}
			// Warm up: metadata, connection, producer id.
			if err := p.Send(ctx, rec, cb); err != nil {
				b.Fatal(err)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}

			if exported != nil {
				if err := exported.ForceFlush(ctx); err != nil {
					b.Fatal(err)
				}
				wire.Store(0) // the warm-up's
			}

			const window = 1000
			b.ReportAllocs()
			cpu := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = p.Send(ctx, rec, cb)
				if i%window == window-1 || i == b.N-1 {
					if err := p.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					if exported != nil {
						// The export goroutine's work is part of the cost: each window's spans
						// are exported before the next window starts.
						if err := exported.ForceFlush(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.StopTimer()
			// The process's CPU, every goroutine's (kfake's too, the same in every case): what
			// the elapsed time hides when the export goroutine runs beside the sender.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			if exported != nil {
				b.ReportMetric(float64(wire.Load())/float64(b.N), "otlp-B/op")
			}
			if failed != nil {
				b.Fatal(failed)
			}
		})
	}
}

// processCPU is the CPU time the process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
