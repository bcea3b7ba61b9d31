// Package agent is what `agent` runs: sources (followed files, stdin) whose lines become Kafka
// records through the producer, with a file's checkpoint advanced only past lines Kafka has
// acknowledged.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
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

	// inputs are the sources of lines that run, each with its pipeline: the implicit one of
	// the flags first when there is one, then the file's `inputs:` (newInputs). A reload
	// (ApplyInputs) replaces the slice, never changes it, under inputsMu; retired holds the
	// inputs it stopped, whose line counts stay in TopicStats. Read it with inputList.
	inputsMu sync.RWMutex
	inputs   []*input
	retired  []*input
	// reloadMu serializes the reloads of a RunTail (ApplyInputs) with each other and with the
	// run's end; run is the RunTail in progress (nil before and after), under reloadMu.
	reloadMu sync.Mutex
	run      *tailRun

	stats Stats

	bufferFullLogged atomic.Bool  // the "buffer full" warning is logged once per run
	timestampWarned  atomic.Bool  // so is the first line without a usable --timestamp-field
	readAhead        *readAhead   // file lines read and not yet acknowledged (--max-in-flight-bytes)
	limit            *rateLimiter // --max-lines-per-second, --max-bytes-per-second; nil: none

	// redo sends failed lines again and keeps dead letters (redeliver.go); its goroutine runs
	// from startRedo to stopRedo.
	redo     *redelivery
	stopRedo func()

	txn atomic.Pointer[txnCommitter] // set while RunTail runs with --exactly-once

	tel *telemetry.Provider // nil: no telemetry

	filtered filterCountsBySource // lines the filters left out, by source

	// stdin is what an input with stdin: true reads in RunTail (SetStdin; nil: os.Stdin);
	// stdinRead counts the lines and bytes read from it, for its metrics.
	stdin     io.Reader
	stdinRead struct{ lines, bytes atomic.Int64 }
}

// Stats counts lines through the agent. Safe for concurrent use.
type Stats struct {
	LinesRead atomic.Int64
	BytesRead atomic.Int64
	// Container counts what decoding stdin's container framing met (a file's is in its
	// FileStats).
	Container filetail.ContainerCounts
	// LongLines counts stdin's long lines, by policy (a file's are in its FileStats).
	LongLines filetail.LongLineCounts
	// Encoding counts the lines --format and --timestamp-field fell back on.
	Encoding linerecord.EncodingStats
	_        [cacheLine]byte // read side above, delivery side below
	// LinesAcked counts the lines Kafka acknowledged; with --exactly-once, those whose
	// transaction committed (a line of an aborted transaction is read and sent again).
	LinesAcked atomic.Int64
	// LinesFiltered counts the lines --include-lines and --exclude-lines left out (by file and
	// reason in the metrics).
	LinesFiltered atomic.Int64
	// LinesFailed counts the lines lost: stdin's lines not delivered (stdin cannot be read
	// again). A file's line is never lost: LinesUnsent counts those this run did not deliver
	// before it stopped, whose files' checkpoints stay before them for the next start.
	LinesFailed, LinesUnsent atomic.Int64
	// LinesDeadLettered counts the lines refused for good and kept in a dead-letter destination;
	// LinesResent the times a failed line was sent again.
	LinesDeadLettered, LinesResent atomic.Int64

	mu       sync.Mutex
	firstErr error
}

// FirstError is the first delivery failure, nil if none.
func (s *Stats) FirstError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

// firstError keeps err as the first delivery failure, reporting whether it was.
func (s *Stats) firstError(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr == nil {
		s.firstErr = err
		return true
	}
	return false
}

// DeadLetteredError reports that every line was acknowledged or kept as a dead letter, and
// some were dead-lettered: none was lost. The exit status of a stdin run tells it apart.
type DeadLetteredError struct {
	DeadLettered, Read int64
	Where              string // the dead-letter topic and file
}

func (e *DeadLetteredError) Error() string {
	return fmt.Sprintf("%d of %d lines were refused by Kafka and dead-lettered (%s); none was lost", e.DeadLettered, e.Read, e.Where)
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

// LinesUnsentError reports that a tailing run stopped before some of its files' lines were
// delivered: none is lost (their checkpoints stay before them), the next start sends them.
type LinesUnsentError struct {
	Unsent, Read int64
	First        error
}

func (e *LinesUnsentError) Error() string {
	return fmt.Sprintf("%d of %d lines were not delivered before the stop (none is lost: their files' checkpoints stay before them, and the next start sends them); first error: %v",
		e.Unsent, e.Read, e.First)
}

func (e *LinesUnsentError) Unwrap() error { return e.First }

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
	if (len(cfg.Tail) > 0 || len(cfg.Inputs) > 0) && !cfg.ExactlyOnce {
		// A file's line that expires is sent again (redeliver.go): its partition's younger
		// records expire with it, so that they are sent again after it, in order, rather than
		// written before it. (stdin's expired lines are lost, and an exactly-once transaction
		// aborts: neither sends them again.)
		opts = append(opts, producer.WithExpiryInOrder())
	}
	if tel != nil {
		opts = append(opts, tel.ProducerOption())
	}
	prod, err := producer.New(pc, opts...)
	if err != nil {
		return nil, err
	}
	ra := newReadAhead(cfg.EffectiveMaxInFlightBytes(pc))
	ra.log, ra.warnAfter = log, time.Duration(pc.MaxBlockMs)*time.Millisecond
	a := &Agent{cfg: cfg, log: log, prod: prod, pc: pc, tel: tel, readAhead: ra,
		limit: newRateLimiter(cfg.MaxLinesPerSecond, cfg.MaxBytesPerSecond)}
	if a.inputs, err = newInputs(&cfg, &a.stats.Encoding, a.limit, a.topicTemplate); err != nil {
		_ = prod.Close(context.Background())
		return nil, err // Validate has said so already
	}
	a.redo = newRedelivery(a)
	if err := a.redo.dlf.repair(); err != nil {
		// The first dead letter tries again, and stops sending if the file still cannot be written.
		log.Warn("dead-letter file: cannot check its end", "file", a.redo.dlf.path, "error", err)
	}
	a.stopRedo = func() {}
	return a, nil
}

// inputList returns the inputs that run now; the slice is never changed (a reload replaces it).
func (a *Agent) inputList() []*input {
	a.inputsMu.RLock()
	defer a.inputsMu.RUnlock()
	return a.inputs
}

// Stats returns the agent's counters.
func (a *Agent) Stats() *Stats { return &a.stats }

// FileStats returns a snapshot of each followed file, every input's, sorted by path (a file
// two inputs follow is there twice); nil unless RunTail runs (or ran). Safe to call from any
// goroutine.
func (a *Agent) FileStats() []filetail.FileStats {
	var out []filetail.FileStats
	for _, f := range a.InputFileStats() {
		out = append(out, f.FileStats)
	}
	return out
}

// InputFileStats is a followed file's snapshot with the input that follows it ("" when the
// agent has one input).
type InputFileStats struct {
	Input string
	filetail.FileStats
}

// InputFileStats is FileStats with each file's input, sorted by path, then input.
func (a *Agent) InputFileStats() []InputFileStats {
	var out []InputFileStats
	inputs := a.inputList()
	for _, in := range inputs {
		t := in.tailer.Load()
		if t == nil {
			continue
		}
		name := in.name
		if len(inputs) == 1 {
			name = ""
		}
		for _, f := range t.Stats().Files {
			out = append(out, InputFileStats{Input: name, FileStats: f})
		}
	}
	if len(inputs) > 1 {
		slices.SortStableFunc(out, func(x, y InputFileStats) int {
			return cmp.Or(strings.Compare(x.Path, y.Path), strings.Compare(x.Input, y.Input))
		})
	}
	return out
}

// Connect fetches the topic's metadata, which connects to a broker, within max.block.ms and
// ctx: so that the agent is ready (and a wrong topic or broker is reported) before the first
// line arrives. Sending does the same when it has to. It returns nil if the agent stopped first.
//
// With a --topic template the topics are known only as lines arrive: Connect fetches the
// fallback topic's metadata if there is one, else only the brokers' (a metadata request for no
// topic, which creates none), and each new topic's metadata is fetched by its first line. With
// several inputs, every input's topic.
func (a *Agent) Connect(ctx context.Context) error {
	for _, in := range a.inputList() {
		var err error
		switch c := &in.cfg; {
		case !linerecord.IsTemplate(c.Topic):
			_, err = a.prod.PartitionsFor(ctx, c.Topic)
		case c.FallbackTopic != "":
			_, err = a.prod.PartitionsFor(ctx, c.FallbackTopic)
		default:
			err = a.prod.AwaitCluster(ctx)
		}
		if errors.Is(err, producer.ErrProducerClosed) || errors.Is(err, metadata.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lineDelivered is the outcome of the first send of a line of src (a file's line ends at
// md.Tag). Acknowledged: the line is done, and its record's value size goes back to the
// read-ahead budget (what sendLine took: the value, which with --format json is larger than
// the line). Failed: classify gives it its fate, and the redelivery sends it again or keeps it
// as a dead letter; the budget stays taken until then, which bounds what the redelivery holds.
func (a *Agent) lineDelivered(ctx context.Context, src *lineOrigin, md producer.RecordMetadata, err error) {
	if err == nil {
		a.lineAcked(src, md)
		return
	}
	if notBuffered(err) {
		return // sendLine offers the line again, with this same callback
	}
	budget := int64(max(md.SerializedValueSize, 0))
	f, reason := classify(err, src.templated())
	if src.file == nil && f != fateDeadLetter {
		// stdin cannot be read again and has no file to wait on: a line that expired or met a
		// refusal about the configuration (a wrong password, a missing ACL or topic) is lost,
		// counted, and the exit status says so, rather than the run waiting for the cluster or
		// the configuration to change. Only its dead letters are kept.
		f = fateGivenUp
	}
	// With --exactly-once only a line the client refused is kept in the transaction; any other
	// failure aborts it (poison.go).
	if (a.cfg.ExactlyOnce && !a.deadLetterInTransaction(src, md, err, f, reason)) || f == fateGivenUp ||
		(errors.Is(err, context.Canceled) && ctx.Err() != nil) ||
		!a.redo.add(src, md, err, f, reason, budget) {
		a.lineGivenUp(src, md.Topic, md.Tag, budget, err)
	}
}

// ClientInstanceID is the client instance id the broker assigned the agent's producer for its
// client metrics (KIP-714), "" until it did. Safe for concurrent use.
func (a *Agent) ClientInstanceID() string { return a.prod.ClientInstanceID() }

// topicTemplate tells the telemetry which template a topic's name came from
// (messaging.destination.template), as a template names it for the first time.
func (a *Agent) topicTemplate(topic, template string) {
	if a.tel == nil {
		return
	}
	if obs := a.tel.Observer(); obs != nil {
		obs.SetDestinationTemplate(topic, template)
	}
}

// templated reports a topic template of src's input: a line's topic comes from the line.
func (src *lineOrigin) templated() bool { return src.in.line.rules.Templated() }

// lineAcked is the end of a line Kafka acknowledged, sent once or again. With --exactly-once
// it is counted as acknowledged only once its transaction commits (txnLedger).
func (a *Agent) lineAcked(src *lineOrigin, md producer.RecordMetadata) {
	if src.file != nil {
		a.readAhead.give(int64(max(md.SerializedValueSize, 0)))
		src.file.Ack(md.Tag)
		if c := a.txn.Load(); c != nil {
			c.ledger.acked(src, md.Topic)
			return
		}
	}
	a.stats.LinesAcked.Add(1)
	a.countOutcome(src, md.Topic, linerecord.OutcomeAcked)
}

// lineGivenUp is the end of a line (its record was for topic) with no outcome in this run. A
// file's line is not lost: its file's checkpoint stays before it. With --exactly-once its
// transaction aborts and the next round reads it again; else the agent is stopping and the
// next start sends it (counted in LinesUnsent). A stdin line is lost, and counted as failed.
func (a *Agent) lineGivenUp(src *lineOrigin, topic string, end, budget int64, err error) {
	if src.file != nil {
		a.readAhead.give(budget)
		src.file.Unsent(end)
		if c := a.txn.Load(); c != nil {
			c.lineUnsent(src, end, err)
			return
		}
		if errors.Is(err, context.Canceled) {
			// Shutdown interrupted Send while it waited for buffer memory: the line was never
			// buffered. Its checkpoint stays before it all the same.
			return
		}
		a.stats.LinesUnsent.Add(1)
		if a.stats.firstError(err) {
			a.log.Warn("line not delivered before the stop: its file's checkpoint stays before it, and the next start sends it (and the lines after it)",
				"source", sourceName(src), "offset", end, "error", err)
		}
		return
	}
	a.stats.LinesFailed.Add(1)
	a.countOutcome(src, topic, linerecord.OutcomeFailed)
	if a.stats.firstError(err) {
		a.log.Error("line lost: stdin's line was not delivered, and stdin cannot be read again", "offset", end, "error", err)
	}
}

// sendLine sends one line of src (read from path, or stdin when path is "") and reports its
// outcome to src.delivered. A line the input's filters leave out is not sent: it is done at
// once (lineFiltered).
// It blocks while the producer's buffer is full, which pauses reading: backpressure.
//
// With budget (file lines: the read-ahead), the record's value size is taken from it before the
// record is sent; the callback gives back md.SerializedValueSize, the same number, so the budget
// stays balanced whatever --format made of the line.
//
// A line that could not even be buffered because buffer.memory stayed full for max.block.ms (a
// broker slow or down for longer than that) is offered again until it fits or ctx ends: for a
// log shipper that is backpressure, not a failure. Callbacks ignore that error for this reason.
func (a *Agent) sendLine(ctx context.Context, line filetail.Line, path string, tag int64, budget *readAhead, src *lineOrigin) error {
	p := src.in.line
	b := p.builder()
	defer p.put(b)
	rec, unrouted := b.Build(line, path)
	if left, ok := unrouted.(*linerecord.Filtered); ok {
		a.lineFiltered(src, path, tag, left.Reason)
		return nil
	}
	cb := src.delivered
	rec.Tag = tag
	a.maybeWarnTimestamp(src.in, b, line, path)
	if budget != nil {
		if err := budget.take(ctx, int64(len(rec.Value))); err != nil {
			return err // the run is ending: the line stays unread as far as the checkpoint knows
		}
	}
	if !src.replay {
		a.stats.LinesRead.Add(1)
		a.stats.BytesRead.Add(int64(len(line.Data)))
	}
	if unrouted != nil {
		// No topic for this line and no fallback: it fails alone, as a line Kafka refused.
		cb(linerecord.UnroutedMetadata(rec), unrouted)
		return nil
	}
	if src.replay {
		a.stats.LinesResent.Add(1) // its first send was in a transaction that aborted
	} else {
		b.CountSent()
	}
	if tp := b.LineTrace(); tp != nil && a.tel != nil {
		// The line's own trace continues: its context is the parent of the record's send span,
		// and, in the record's trace header (linerecord.Builder.Build), the record's creation context.
		ctx = telemetry.ContextWithLineTrace(ctx, tp)
	}
	return a.sendRecord(ctx, rec, cb)
}

// sendRecord sends rec with cb, offering it again while buffer.memory stays full for
// max.block.ms (backpressure, not a failure) until it is buffered, fails through cb, or ctx
// ends (ctx's error).
func (a *Agent) sendRecord(ctx context.Context, rec *producer.Record, cb producer.Callback) error {
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

// settle waits, until ctx ends, for every line sent to have its outcome and every line the
// redelivery holds to be resolved: Flush, then whatever failed in it is sent again (it goes
// out after linger.ms) or dead-lettered. A stopped agent (fateStop) is not waited for.
func (a *Agent) settle(ctx context.Context) {
	if err := a.prod.Flush(ctx); err != nil {
		return
	}
	a.redo.settle(ctx)
}

// startRedo starts the redelivery's goroutine for a run; stopRedo (called by shutdown) ends it
// and gives up what it still holds.
func (a *Agent) startRedo() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.redo.run(ctx)
	}()
	a.stopRedo = sync.OnceFunc(func() { cancel(); <-done })
}

// notBuffered reports an error that sendLine retries itself, which callbacks must ignore.
func notBuffered(err error) bool { return errors.Is(err, producer.ErrBufferExhausted) }

// shutdown flushes and closes the producer within the shutdown timeout: everything buffered is
// delivered or failed through its callback.
//
// Before the producer closes, lines that failed are still sent again and dead letters kept
// (settle), within the same timeout; what is left then is given up.
func (a *Agent) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	a.settle(ctx)
	a.stopRedo()
	err := a.prod.Close(ctx)
	a.log.Info("producer closed", "took", time.Since(start).Round(time.Millisecond),
		"lines_read", a.stats.LinesRead.Load(), "lines_acked", a.stats.LinesAcked.Load(),
		"lines_failed", a.stats.LinesFailed.Load(), "lines_unsent", a.stats.LinesUnsent.Load(),
		"lines_dead_lettered", a.stats.LinesDeadLettered.Load(),
		"lines_filtered", a.stats.LinesFiltered.Load(),
		"lines_resent", a.stats.LinesResent.Load())
	logEncoding(&a.stats.Encoding, a.log, &a.cfg)
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
	if n := a.stats.LinesUnsent.Load(); n > 0 {
		return &LinesUnsentError{Unsent: n, Read: a.stats.LinesRead.Load(), First: a.stats.FirstError()}
	}
	if n := a.stats.LinesDeadLettered.Load(); n > 0 {
		where := "file " + a.redo.dlf.path
		if t := a.cfg.DeadLetterTopic; t != "" {
			where = "topic " + t + ", else " + where
		}
		return &DeadLetteredError{DeadLettered: n, Read: a.stats.LinesRead.Load(), Where: where}
	}
	return nil
}

// cacheLine separates fields written by different goroutines for every line.
const cacheLine = 64

// ErrInterrupted is returned when a run was stopped by its context before its input ended.
var ErrInterrupted = errors.New("interrupted")
