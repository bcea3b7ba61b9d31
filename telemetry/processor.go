package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Defaults of the span export, as the SDK's batch span processor has them; OTEL_BSP_* overrides
// them as it does there. The batch size is the exception: without
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE a batch is half the queue, not the SDK's 512: each export request costs the agent and the
// receiver far more than the spans in it, and the other half of the queue takes spans while
// one batch is exported.
const (
	defaultExportDelay   = 5 * time.Second  // OTEL_BSP_SCHEDULE_DELAY
	defaultExportTimeout = 30 * time.Second // OTEL_BSP_EXPORT_TIMEOUT
)

// exportProcessor batches ended spans and exports them on its own goroutine. It is what the
// SDK's batch span processor does, with three differences the producer needs:
//
//   - ending a span never blocks: spans beyond the bound (queued plus being exported) are
//     dropped and counted (the SDK's processor drops silently, or blocks the caller);
//   - a traced record's seven finished spans go in with one lock (OnEndSpans), and the export
//     goroutine is woken once per batch, not once per span: at 1 % sampling a producer ends
//     ~40,000 spans a second, and handing each over twice (into a queue of this processor's,
//     then into the SDK processor's channel) cost ~3 % of the agent's CPU;
//   - a traced record is queued whole, as the values its spans are made of (TracedRecord),
//     and its spans are made on the export goroutine: the sender goroutine that completes the
//     record copies one value and takes one lock. Spans of the tracer path are queued as
//     RecordSpans (the SDK's are converted on entry);
//   - spans are exported by the protowire encoder (internal/otlptrace) rather than transformed into
//     protobuf structs and marshalled by reflection.
//
// The limit counts spans: a record takes room for all of its spans, or is dropped whole.
//
// Spans are exported when a batch is queued, every delay, at ForceFlush and at Shutdown.
type exportProcessor struct {
	exp     spanExporter
	limit   int // spans held: queued and being exported
	batch   int
	delay   time.Duration
	timeout time.Duration

	mu           sync.Mutex
	queue        []RecordSpan
	spare        []RecordSpan // the last export's slice, emptied, for the next queue
	records      []TracedRecord
	spareRecords []TracedRecord
	queued       int  // spans queued: len(queue) and the records' spans
	exporting    int  // spans taken by the export in progress
	kicked       bool // a full batch was signalled and not yet taken
	closed       bool

	kick    chan struct{} // capacity 1: a full batch is waiting
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// exportCtx is every export's parent: Shutdown cancels it when its own deadline passes, so
	// an export stuck on a dead backend lets the goroutine finish.
	exportCtx    context.Context
	cancelExport context.CancelFunc

	// made is where the export goroutine makes the queued records' spans, and arena their
	// attribute lists, both reused from export to export; arena only when the exporter keeps
	// nothing of what it is given (keepsSpans false).
	made       []RecordSpan
	arena      spanArena
	keepsSpans bool

	dropped     atomic.Int64
	dropCounter metric.Int64Counter
	stopOnce    sync.Once
}

// exportOptions are an exportProcessor's batch size (0: half its limit), export delay and
// export timeout.
type exportOptions struct {
	batch          int
	delay, timeout time.Duration
}

// exportOptionsOf takes OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_SCHEDULE_DELAY and
// OTEL_BSP_EXPORT_TIMEOUT from env, falling back to the defaults for a variable unset or not
// a positive integer, as the SDK's batch span processor does.
func exportOptionsOf(env Env) exportOptions {
	o := exportOptions{batch: 0, delay: defaultExportDelay, timeout: defaultExportTimeout}
	if env.BSPMaxExportBatchSize > 0 {
		o.batch = env.BSPMaxExportBatchSize
	}
	if env.BSPScheduleDelay > 0 {
		o.delay = env.BSPScheduleDelay
	}
	if env.BSPExportTimeout > 0 {
		o.timeout = env.BSPExportTimeout
	}
	return o
}

// spanExporter is where an exportProcessor's batches go: the OTLP exporter (internal/otlptrace), or
// an SDK exporter for the other kinds (sdkExporter). Only the processor's goroutine exports.
type spanExporter interface {
	Export(ctx context.Context, spans []RecordSpan) error
	Shutdown(ctx context.Context) error
}

// sdkExporter hands batches to an SDK span exporter (console, or the one a test gives) as
// read-only views of the spans.
type sdkExporter struct {
	exp sdktrace.SpanExporter
	res *resource.Resource
}

func (s sdkExporter) Export(ctx context.Context, spans []RecordSpan) error {
	return s.exp.ExportSpans(ctx, readOnlySpans(spans, s.res))
}

func (s sdkExporter) Shutdown(ctx context.Context) error { return s.exp.Shutdown(ctx) }

// mayKeepSpans reports whether exp may keep what it is given after an export returns: an SDK
// exporter may (an in-memory one keeps the spans' attribute lists), the OTLP encoder does not.
func mayKeepSpans(exp spanExporter) bool {
	switch e := exp.(type) {
	case sdkExporter:
		return true
	case healthSpanExporter:
		return mayKeepSpans(e.spanExporter)
	}
	return false
}

func newExportProcessor(exp spanExporter, limit int, o exportOptions, dropCounter metric.Int64Counter) *exportProcessor {
	p := &exportProcessor{
		exp:         exp,
		limit:       limit,
		batch:       min(cmp.Or(o.batch, max(limit/2, 1)), limit),
		delay:       o.delay,
		timeout:     o.timeout,
		kick:        make(chan struct{}, 1),
		flushes:     make(chan chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		dropCounter: dropCounter,
	}
	p.keepsSpans = mayKeepSpans(exp)
	p.exportCtx, p.cancelExport = context.WithCancel(context.Background())
	go p.run()
	return p
}

func (p *exportProcessor) run() {
	defer close(p.done)
	timer := time.NewTimer(p.delay)
	defer timer.Stop()
	for {
		select {
		case <-p.kick:
			p.export()
		case <-timer.C:
			p.export()
			timer.Reset(p.delay)
		case ack := <-p.flushes:
			p.export()
			close(ack)
		case <-p.stop:
			p.export()
			return
		}
	}
}

// export takes every queued span and record and sends their spans to the exporter in batches.
// The queues and spare slices swap places: what ends meanwhile goes into the spares, nothing
// is copied.
func (p *exportProcessor) export() {
	p.mu.Lock()
	spans, records := p.queue, p.records
	p.queue, p.spare = p.spare[:0], nil
	p.records, p.spareRecords = p.spareRecords[:0], nil
	p.exporting, p.queued = p.queued, 0
	p.kicked = false
	p.mu.Unlock()

	if p.exportCtx.Err() != nil && len(spans)+len(records) > 0 {
		// Shutdown gave up waiting: what is left goes unexported, reported once.
		otel.Handle(fmt.Errorf("telemetry: %d spans not exported: shutdown deadline passed", p.exporting))
	} else {
		// The tracer path's spans, then the records' spans made a batch at a time: what is
		// made at once (and its attribute lists) is bounded by the batch, not by the queue.
		p.exportBatches(spans)
		arena := &p.arena
		if p.keepsSpans {
			arena = nil
		}
		made := p.made[:0]
		for i := range records {
			if len(made) > 0 && len(made)+records[i].spans > p.batch {
				made = p.exportMade(made)
			}
			made = records[i].appendSpans(made, arena, true)
		}
		p.made = p.exportMade(made)
	}
	clear(spans)
	clear(records)
	p.mu.Lock()
	p.exporting = 0
	p.spare = spans[:0]
	p.spareRecords = records[:0]
	p.mu.Unlock()
}

// exportMade exports the records' spans made, empties the slice and the arena, and returns
// the slice for more.
func (p *exportProcessor) exportMade(made []RecordSpan) []RecordSpan {
	p.exportBatches(made)
	clear(made)
	p.arena.reset()
	return made[:0]
}

// exportBatches hands spans to the exporter in batches of at most p.batch.
func (p *exportProcessor) exportBatches(spans []RecordSpan) {
	for rest := spans; len(rest) > 0; {
		n := min(len(rest), p.batch)
		ctx, cancel := context.WithTimeout(p.exportCtx, p.timeout)
		if err := p.exp.Export(ctx, rest[:n]); err != nil {
			otel.Handle(err)
		}
		cancel()
		rest = rest[n:]
	}
}

// OnStart does nothing: only ended spans are exported.
func (p *exportProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span of the tracer path for export, or drops and counts it when the
// processor holds its limit or has shut down. It never blocks.
func (p *exportProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.OnEndRecordSpans([]RecordSpan{recordSpanOf(s)})
}

// OnEndRecordSpans queues spans (sampled, all of them: a record's) as OnEnd does, with one
// lock: they are copied into the queue.
func (p *exportProcessor) OnEndRecordSpans(spans []RecordSpan) {
	p.mu.Lock()
	take := 0
	if !p.closed {
		take = max(min(len(spans), p.limit-p.exporting-p.queued), 0)
	}
	p.queue = append(p.queue, spans[:take]...)
	p.queued += take
	kick := p.kickLocked()
	p.mu.Unlock()
	p.kickAndCount(kick, len(spans)-take)
}

// OnEndTracedRecord queues a copy of record r for its spans to be made and exported, or drops
// and counts them all when they do not fit. It never blocks (TracedRecordProcessor).
func (p *exportProcessor) OnEndTracedRecord(r *TracedRecord) {
	p.mu.Lock()
	fits := !p.closed && p.exporting+p.queued+r.spans <= p.limit
	if fits {
		p.records = append(p.records, *r)
		p.queued += r.spans
	}
	kick := p.kickLocked()
	p.mu.Unlock()
	dropped := 0
	if !fits {
		dropped = r.spans
	}
	p.kickAndCount(kick, dropped)
}

// kickLocked reports whether a full batch is queued and not yet signalled, and marks it
// signalled. p.mu is held.
func (p *exportProcessor) kickLocked() bool {
	if !p.kicked && p.queued >= p.batch {
		p.kicked = true
		return true
	}
	return false
}

// kickAndCount wakes the export goroutine when kick is set, and counts dropped spans.
func (p *exportProcessor) kickAndCount(kick bool, dropped int) {
	if kick {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	if dropped > 0 {
		p.dropped.Add(int64(dropped))
		if p.dropCounter != nil {
			p.dropCounter.Add(context.Background(), int64(dropped))
		}
	}
}

// Dropped returns how many spans were dropped.
func (p *exportProcessor) Dropped() int64 { return p.dropped.Load() }

// ForceFlush exports everything queued, within ctx.
func (p *exportProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case p.flushes <- ack:
		select {
		case <-ack:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops taking spans, exports what is queued and shuts the exporter down, all within
// ctx: when ctx ends first, the export in progress is abandoned.
func (p *exportProcessor) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.stop)
	})
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		err = ctx.Err()
		p.cancelExport() // the goroutine's exports now fail at once, and it ends
	}
	if serr := p.exp.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}
