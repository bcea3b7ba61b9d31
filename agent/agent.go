// Package agent is what `agent` runs: sources (followed files, stdin) whose lines become Kafka
// records through the producer, with a file's checkpoint advanced only past lines Kafka has
// acknowledged.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/producer"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// Agent connects sources to a producer. Create it with New, then call RunStdin or RunTail once.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	prod *producer.Producer
	pc   producer.Config // prod's configuration

	builders sync.Pool // *recordBuilder, one per concurrent sender of lines
	routing  *routing  // --topic template and --header; nil: a plain topic, no --header

	stats Stats

	bufferFullLogged atomic.Bool  // the "buffer full" warning is logged once per run
	timestampWarned  atomic.Bool  // so is the first line without a usable --timestamp-field
	readAhead        *readAhead   // file lines read and not yet acknowledged (--max-in-flight-bytes)
	limit            *rateLimiter // --max-lines-per-second, --max-bytes-per-second; nil: none

	tailer atomic.Pointer[filetail.Tailer] // set while RunTail runs, for SetTailGlobs and stats
	txn    atomic.Pointer[txnCommitter]    // set while RunTail runs with --exactly-once

	tel *telemetry.Provider // nil: no telemetry
}

// Stats counts lines through the agent. Safe for concurrent use.
type Stats struct {
	LinesRead atomic.Int64
	BytesRead atomic.Int64
	// LongLines counts stdin's long lines, by policy (a file's are in its FileStats).
	LongLines filetail.LongLineCounts
	// Encoding counts the lines --format and --timestamp-field fell back on.
	Encoding    EncodingStats
	_           [cacheLine]byte // read side above, delivery side below
	LinesAcked  atomic.Int64
	LinesFailed atomic.Int64

	mu       sync.Mutex
	firstErr error
}

// FirstError is the first delivery failure, nil if none.
func (s *Stats) FirstError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

func (s *Stats) fail(err error) bool {
	s.LinesFailed.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr == nil {
		s.firstErr = err
		return true
	}
	return false
}

// LinesFailedError reports that some lines were not delivered: the exit status of a stdin run.
type LinesFailedError struct {
	Failed, Read int64
	First        error
}

func (e *LinesFailedError) Error() string {
	return fmt.Sprintf("%d of %d lines were not delivered; first error: %v", e.Failed, e.Read, e.First)
}

func (e *LinesFailedError) Unwrap() error { return e.First }

// New validates cfg and starts the producer. tel, when not nil, traces records (a line's own
// trace context becomes the parent of its `send` span) and receives the agent's metrics.
func New(cfg Config, log *slog.Logger, tel *telemetry.Provider, opts ...producer.Option) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := cfg.ProducerConfig()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = append([]producer.Option{producer.WithLogger(log.With("component", "producer"))}, opts...)
	if tel != nil {
		opts = append(opts, tel.ProducerOption())
	}
	prod, err := producer.New(pc, opts...)
	if err != nil {
		return nil, err
	}
	ra := newReadAhead(cfg.EffectiveMaxInFlightBytes(pc))
	ra.log, ra.warnAfter = log, time.Duration(pc.MaxBlockMs)*time.Millisecond
	a := &Agent{cfg: cfg, log: log, prod: prod, pc: pc, tel: tel, readAhead: ra, routing: newRouting(&cfg),
		limit: newRateLimiter(cfg.MaxLinesPerSecond, cfg.MaxBytesPerSecond)}
	a.builders.New = func() any {
		b := newRecordBuilder(&a.cfg)
		b.enc.stats = &a.stats.Encoding
		b.routing = a.routing
		return b
	}
	return a, nil
}

// Stats returns the agent's counters.
func (a *Agent) Stats() *Stats { return &a.stats }

// FileStats returns a snapshot of each followed file, sorted by path; nil unless RunTail runs
// (or ran). Safe to call from any goroutine.
func (a *Agent) FileStats() []filetail.FileStats {
	if t := a.tailer.Load(); t != nil {
		return t.Stats().Files
	}
	return nil
}

// Connect fetches the topic's metadata, which connects to a broker, within max.block.ms and
// ctx: so that the agent is ready (and a wrong topic or broker is reported) before the first
// line arrives. Sending does the same when it has to. It returns nil if the agent stopped first.
//
// With a --topic template the topics are known only as lines arrive: Connect fetches the
// fallback topic's metadata if there is one, else only the brokers' (a metadata request for no
// topic, which creates none), and each new topic's metadata is fetched by its first line.
func (a *Agent) Connect(ctx context.Context) error {
	var err error
	switch {
	case !isTemplate(a.cfg.Topic):
		_, err = a.prod.PartitionsFor(ctx, a.cfg.Topic)
	case a.cfg.FallbackTopic != "":
		_, err = a.prod.PartitionsFor(ctx, a.cfg.FallbackTopic)
	default:
		err = a.prod.AwaitCluster(ctx)
	}
	if errors.Is(err, producer.ErrProducerClosed) || errors.Is(err, metadata.ErrClosed) {
		return nil
	}
	return err
}

// onDelivery is the callback of every stdin line: count, and log the first failure.
func (a *Agent) onDelivery(md producer.RecordMetadata, err error) {
	if err == nil {
		a.stats.LinesAcked.Add(1)
		a.countDelivered(md.Topic, nil)
		return
	}
	if notBuffered(err) {
		return
	}
	a.countDelivered(md.Topic, err)
	if a.stats.fail(err) {
		a.log.Error("line not delivered", "error", err)
	}
}

// sendLine sends one line (read from path, or stdin when path is "") and reports its outcome to cb.
// It blocks while the producer's buffer is full, which pauses reading: backpressure.
//
// With budget (file lines: the read-ahead), the record's value size is taken from it before the
// record is sent; the callback gives back md.SerializedValueSize, the same number, so the budget
// stays balanced whatever --format made of the line.
//
// A line that could not even be buffered because buffer.memory stayed full for max.block.ms (a
// broker slow or down for longer than that) is offered again until it fits or ctx ends: for a
// log shipper that is backpressure, not a failure. Callbacks ignore that error for this reason.
func (a *Agent) sendLine(ctx context.Context, line filetail.Line, path string, tag int64, budget *readAhead, cb producer.Callback) error {
	b := a.builders.Get().(*recordBuilder)
	defer a.builders.Put(b)
	rec := b.buildLine(line, path)
	rec.Tag = tag
	a.maybeWarnTimestamp(b, line, path)
	if budget != nil {
		if err := budget.take(ctx, int64(len(rec.Value))); err != nil {
			return err // the run is ending: the line stays unread as far as the checkpoint knows
		}
	}
	a.stats.LinesRead.Add(1)
	a.stats.BytesRead.Add(int64(len(line.Data)))
	if b.routing != nil {
		if err := b.rs.err; err != nil {
			// No topic for this line and no fallback: it fails alone, as a line Kafka refused.
			cb(unroutedMetadata(rec), err)
			return nil
		}
		if tc := b.rs.counts; tc != nil {
			tc.sent.Add(1)
		}
	}
	if tp := b.lineTrace; tp != nil && a.tel != nil {
		// The line's own trace continues: its context is the parent of the record's send span,
		// and, in the record's trace header (recordBuilder.build), the record's creation context.
		ctx = telemetry.ContextWithLineTrace(ctx, tp)
	}
	for {
		err := a.prod.Send(ctx, rec, cb)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, producer.ErrBufferExhausted):
			if a.bufferFullLogged.CompareAndSwap(false, true) {
				a.log.Warn("producer buffer full for max.block.ms: brokers are slow or down; reading stays paused", "error", err)
			}
			continue
		default:
			return nil // the callback got it
		}
	}
}

// notBuffered reports an error that sendLine retries itself, which callbacks must ignore.
func notBuffered(err error) bool { return errors.Is(err, producer.ErrBufferExhausted) }

// shutdown flushes and closes the producer within the shutdown timeout: everything buffered is
// delivered or failed through its callback.
func (a *Agent) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	err := a.prod.Close(ctx)
	a.log.Info("producer closed", "took", time.Since(start).Round(time.Millisecond),
		"lines_read", a.stats.LinesRead.Load(), "lines_acked", a.stats.LinesAcked.Load(),
		"lines_failed", a.stats.LinesFailed.Load())
	a.stats.Encoding.maybeLog(a.log, &a.cfg)
	if err != nil {
		return fmt.Errorf("shutdown: not every line was acknowledged within %v (shutdown-timeout): %w",
			a.cfg.ShutdownTimeout, err)
	}
	return nil
}

// result turns the counters into the run's outcome.
func (a *Agent) result() error {
	if n := a.stats.LinesFailed.Load(); n > 0 {
		return &LinesFailedError{Failed: n, Read: a.stats.LinesRead.Load(), First: a.stats.FirstError()}
	}
	return nil
}

// cacheLine separates fields written by different goroutines for every line.
const cacheLine = 64

// ErrInterrupted is returned when a run was stopped by its context before its input ended.
var ErrInterrupted = errors.New("interrupted")
