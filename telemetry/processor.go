package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// droppingProcessor puts a bounded queue in front of a blocking batch span processor, so that
// ending a span never waits for the exporter and a span that finds the queue full is dropped
// and counted (the SDK's own batch processor drops silently). One goroutine, owned by the
// processor and stopped by Shutdown, moves spans from the queue to the batch processor, which
// may block it while an export is slow: that is what fills the queue.
type droppingProcessor struct {
	next    sdktrace.SpanProcessor
	queue   chan sdktrace.ReadOnlySpan
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}

	dropped     atomic.Int64
	dropCounter metric.Int64Counter
	stopOnce    sync.Once
}

func newDroppingProcessor(next sdktrace.SpanProcessor, size int, dropCounter metric.Int64Counter) *droppingProcessor {
	p := &droppingProcessor{
		next:        next,
		queue:       make(chan sdktrace.ReadOnlySpan, size),
		flushes:     make(chan chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		dropCounter: dropCounter,
	}
	go p.run()
	return p
}

func (p *droppingProcessor) run() {
	defer close(p.done)
	for {
		select {
		case s := <-p.queue:
			p.next.OnEnd(s)
		case ack := <-p.flushes:
			p.drain()
			close(ack)
		case <-p.stop:
			p.drain()
			return
		}
	}
}

// drain hands on what is queued now, without waiting for more.
func (p *droppingProcessor) drain() {
	for {
		select {
		case s := <-p.queue:
			p.next.OnEnd(s)
		default:
			return
		}
	}
}

// OnStart does nothing: the batch processor needs only ended spans.
func (p *droppingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span for export, or drops and counts it when the queue is full or the
// processor has shut down. It never blocks.
func (p *droppingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-p.stop:
		p.drop()
		return
	default:
	}
	select {
	case p.queue <- s:
	default:
		p.drop()
	}
}

func (p *droppingProcessor) drop() {
	p.dropped.Add(1)
	if p.dropCounter != nil {
		p.dropCounter.Add(context.Background(), 1)
	}
}

// Dropped returns how many spans were dropped.
func (p *droppingProcessor) Dropped() int64 { return p.dropped.Load() }

// ForceFlush hands everything queued to the batch processor and has it export, within ctx.
func (p *droppingProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case p.flushes <- ack:
		select {
		case <-ack:
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.next.ForceFlush(ctx)
}

// Shutdown stops the queue's goroutine after it handed on what was queued, then shuts the
// batch processor down (which exports what it holds), all within ctx.
func (p *droppingProcessor) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-ctx.Done():
		// The goroutine is blocked in a slow export; the batch processor's shutdown below
		// abandons that export at ctx's deadline, which releases it.
	}
	return p.next.Shutdown(ctx)
}
