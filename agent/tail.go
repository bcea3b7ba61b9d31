package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/producer"
)

// RunTail follows the configured files of every input until ctx ends, then stops reading,
// flushes and waits for acknowledgements (up to the shutdown timeout) and saves the
// checkpoints: each file's offset moves only past lines that Kafka acknowledged, and every line
// before them. Each input has a tailer of its own, all reading at once into the one producer;
// one that fails stops them all. ApplyInputs starts, stops and restarts inputs meanwhile.
func (a *Agent) RunTail(ctx context.Context) error {
	defer a.sizeReadAhead(ctx)()
	if a.cfg.ExactlyOnce {
		return a.runTailExactlyOnce(ctx)
	}
	run := &tailRun{}
	run.ctx, run.end = context.WithCancelCause(ctx)
	defer run.end(nil)
	for _, in := range a.inputList() {
		if err := a.startInput(run, in); err != nil {
			run.fail(err)
			run.wg.Wait()
			_ = a.shutdown()
			return err
		}
	}
	stopMetrics := a.startMetrics()
	defer stopMetrics()
	a.startRedo()
	a.reloadMu.Lock()
	a.run = run
	a.reloadMu.Unlock()

	<-run.ctx.Done()
	a.reloadMu.Lock() // a reload in progress ends first: it watches run.ctx
	a.run = nil
	a.reloadMu.Unlock()
	run.wg.Wait()
	runErr := run.failed()
	if runErr != nil {
		a.log.Error("tailer stopped", "error", runErr)
	}
	closeErr := a.shutdown()
	var saveErr error
	for _, in := range a.inputList() {
		if t := in.tailer.Load(); t != nil {
			if err := t.SaveCheckpoints(); err != nil && saveErr == nil {
				saveErr = err
			}
		}
	}
	if saveErr != nil {
		a.log.Error("saving checkpoints at shutdown", "error", saveErr)
	}
	switch {
	case closeErr != nil:
		return closeErr
	case saveErr != nil:
		return fmt.Errorf("saving checkpoints: %w", saveErr)
	case runErr != nil:
		return runErr
	}
	var deadLettered *DeadLetteredError
	if err := a.result(); err != nil && !errors.As(err, &deadLettered) {
		return err // a dead letter is not an error of a tailing run: nothing was lost
	}
	return ErrInterrupted
}

// startStdinInput reads stdin as input in while run goes on (readStdinInput). The end of stdin
// ends that input alone: the files' inputs go on until the run ends.
func (a *Agent) startStdinInput(run *tailRun, in *input) {
	ctx, stop := context.WithCancel(run.ctx)
	in.cancel, in.done = stop, make(chan struct{})
	r := a.stdin
	if r == nil {
		r = os.Stdin
	}
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		defer close(in.done)
		err := a.readStdinInput(ctx, in, r)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			a.inputLog(in).Error("reading stdin", "error", err)
		default:
			a.inputLog(in).Info("stdin ended: the other inputs go on", "lines", a.stdinRead.lines.Load())
		}
	}()
}

// tailRun is a RunTail in progress: the context its inputs' tailers run under, ended by the
// caller's or by a tailer's error (fail), and the tailers' goroutines.
type tailRun struct {
	ctx context.Context
	end context.CancelCauseFunc
	wg  sync.WaitGroup
	err atomic.Pointer[error] // the first tailer's error
}

// fail ends the run with a tailer's error.
func (r *tailRun) fail(err error) {
	r.err.CompareAndSwap(nil, &err)
	r.end(err)
}

// failed is the first tailer's error, nil when none failed.
func (r *tailRun) failed() error {
	if err := r.err.Load(); err != nil {
		return *err
	}
	return nil
}

// startInput starts in's tailer in run: a tailer's error ends the run. An input that reads
// stdin reads it until it ends; the other inputs go on.
func (a *Agent) startInput(run *tailRun, in *input) error {
	if in.cfg.Stdin {
		a.startStdinInput(run, in)
		return nil
	}
	t, err := filetail.NewTailer(in.tailerConfig(), a.fileLines(in), a.inputLog(in).With("component", "tailer"))
	if err != nil {
		if in.name != ImplicitInput {
			err = fmt.Errorf("input %s: %w", in.name, err)
		}
		return err
	}
	ctx, stop := context.WithCancel(run.ctx)
	in.cancel, in.done = stop, make(chan struct{})
	in.tailer.Store(t)
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		defer close(in.done)
		if err := t.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			if in.name != ImplicitInput {
				err = fmt.Errorf("input %s: %w", in.name, err)
			}
			run.fail(err) // the other inputs stop too: the run ends with this error
		}
	}()
	return nil
}

// sizeReadAhead raises the read-ahead's default limit to what the producer can have in flight
// (Config.MaxInFlightBytesFor) once the topic's partition count is known: a plain --topic's,
// or a template's --fallback-topic's (a template's other topics are not known in advance); the
// first input's.
// PartitionsFor waits for metadata the first line fetches anyway; a broker that cannot be
// reached yet is asked again each second. It returns the function that stops it and waits.
func (a *Agent) sizeReadAhead(ctx context.Context) (stop func()) {
	first := &a.inputList()[0].cfg
	topic := first.Topic
	if linerecord.IsTemplate(topic) {
		topic = first.FallbackTopic
	}
	if a.cfg.MaxInFlightBytes > 0 || topic == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := a.prod.PartitionsFor(ctx, topic)
			if err == nil {
				limit := a.cfg.MaxInFlightBytesFor(a.pc, n)
				a.readAhead.setLimit(limit)
				a.log.Debug("read-ahead sized", "topic", topic, "partitions", n, "max_in_flight_bytes", limit)
				return
			}
			if errors.Is(err, producer.ErrProducerClosed) || errors.Is(err, metadata.ErrClosed) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (in *input) tailerConfig() filetail.Config {
	c := &in.cfg
	return filetail.Config{
		Globs:              c.Tail,
		StartAt:            filetail.StartPosition(c.StartAt),
		MaxLineBytes:       c.EffectiveMaxLineBytes(),
		LongLines:          filetail.LongLinePolicy(c.LongLines),
		PartialLineIdle:    c.PartialLineIdle,
		CheckpointInterval: c.CheckpointInterval,
		StateDir:           c.StateDir,
		Multiline:          c.multilineRule(),
		ContainerFormat:    filetail.ContainerFormat(c.ContainerFormat),
	}
}

// inputLog is the agent's logger, with the input's name when there are several.
func (a *Agent) inputLog(in *input) *slog.Logger {
	if len(a.inputList()) == 1 && in.name == ImplicitInput {
		return a.log
	}
	return a.log.With("input", in.name)
}

// runTailExactlyOnce is RunTail with --exactly-once: the positions come from the state topic,
// lines are sent in transactions that the committer commits with the positions, and the run
// ends with a last commit. A transaction that must abort (a line a broker refused for good, a
// line not delivered within delivery.timeout.ms: an outage) is aborted and a new round starts
// from the last commit in the same process, as a restart would (resumeAfterAbort); a fenced
// producer, a fatal error or a failure at the stop ends the run with an error.
func (a *Agent) runTailExactlyOnce(ctx context.Context) error {
	txnID := a.cfg.EffectiveTransactionalID()
	positions, err := a.startExactlyOnce(ctx)
	if err != nil {
		_ = a.shutdown()
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		return a.failureError(err, txnID)
	}
	stopMetrics := a.startMetrics()
	defer stopMetrics()
	var prev *txnCommitter
	var pause time.Duration // before the next round, while rounds abort without getting further
	for round := 1; ; round++ {
		c, runErr := a.exactlyOnceRound(ctx, txnID, positions, prev)
		if runErr == nil {
			a.log.Info("exactly-once: last transaction committed", "transactional_id", txnID, "commits", c.commits.Load())
			if err := a.shutdown(); err != nil {
				return err
			}
			return ErrInterrupted
		}
		resumed, abortErr := a.resumeAfterAbort(ctx, c, runErr)
		if !resumed {
			if abortErr != nil {
				runErr = abortErr
			}
			runErr = a.failureError(runErr, txnID)
			a.log.Error("exactly-once run stopped", "transactional_id", txnID, "error", runErr)
			_ = a.shutdown()
			return runErr
		}
		progress := c.commits.Load() > 0 || c.newPending.Load() > 0
		if progress {
			pause = 0
		} else {
			pause = min(max(2*pause, time.Second), stopProbeMax)
		}
		if c.newPending.Load() > 0 {
			a.log.Warn("exactly-once: the transaction aborted for a line Kafka refused for good: resuming from the last commit in this process, where that line goes to the dead-letter destination instead",
				"transactional_id", txnID, "round", round+1, "lines_to_dead_letter", c.pendingCount(), "error", runErr)
		} else {
			a.log.Warn("exactly-once: the transaction aborted: resuming from the last commit in this process; its lines are read and sent again (nothing lost, nothing twice at read_committed)",
				"transactional_id", txnID, "round", round+1, "lines_to_send_again", c.lines.Load(), "after", pause, "error", runErr)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
		// Each input's positions of the last commit; with none yet (a first run that aborted
		// before its first commit), where the aborted round began reading each file, so that a
		// file it started at its end (--start-at end) is not skipped past what that round read.
		for _, p := range c.parts {
			if len(p.committed) > 0 {
				positions[p.in.name] = slices.Collect(maps.Values(p.committed))
			} else if p.t != nil {
				positions[p.in.name] = p.t.Starts()
			}
		}
		prev = c
	}
}

// resumeAfterAbort aborts the transaction of an exactly-once round that ended with runErr and
// reports whether the run goes on in a new round from the last commit, as a restart would but
// without one: when the transaction was abortable (a line not delivered in it: refused for good,
// or not delivered within delivery.timeout.ms) and the run was not stopped. The next round
// dead-letters the lines a broker refused (dead-letter-pending.json) instead of sending them,
// and sends the others again. The abort is tried until the transaction coordinator answers (an
// outage may last); abortErr is its error when it cannot be done. It readies the agent for the
// next round: every callback of the aborted transaction has come (Flush), the redelivery is
// stopped and emptied, and runs again with the round.
func (a *Agent) resumeAfterAbort(ctx context.Context, c *txnCommitter, runErr error) (resumed bool, abortErr error) {
	var abortable *producer.TransactionAbortableError
	if ctx.Err() != nil || c == nil || !errors.As(runErr, &abortable) {
		return false, nil
	}
	c.ended.Store(true)
	c.savePending()
	for {
		err := a.prod.AbortTransaction(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false, nil // stopped: failureError aborts within the shutdown timeout
		}
		if !stillGoing(err) {
			return false, err
		}
		a.log.Warn("exactly-once: the abort is still waiting for the transaction coordinator", "error", err)
	}
	fctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	if err := a.prod.Flush(fctx); err != nil {
		return false, err
	}
	a.stopRedo()
	a.redo.reopen()
	return true, nil
}

// exactlyOnceRound runs one exactly-once round: a tailer per input, each from its positions
// (when positions has its name; else its checkpoints.json and --start-at), sends lines into
// transactions that a committer commits, until ctx ends (then the last commit; nil) or a
// transaction cannot commit (its error, the transaction still to abort).
func (a *Agent) exactlyOnceRound(ctx context.Context, txnID string, positions map[string][]filetail.Checkpoint, prev *txnCommitter) (*txnCommitter, error) {
	c := newTxnCommitter(a, txnID, positions, prev)
	for _, p := range c.parts {
		tc := p.in.tailerConfig()
		tc.CommittedOnly, tc.CommittedOf = true, p.committedOffset
		if entries, found := positions[p.in.name]; found {
			tc.Initial, tc.UseInitial = entries, true
		} else {
			a.inputLog(p.in).Info("exactly-once: the state topic has no position of this transactional-id: starting from checkpoints.json (if any) and --start-at",
				"transactional_id", txnID)
		}
		t, err := filetail.NewTailer(tc, c.fileLines(p), a.inputLog(p.in).With("component", "tailer"))
		if err != nil {
			return nil, err
		}
		p.t = t
	}
	if err := a.prod.BeginTransaction(); err != nil {
		return nil, err
	}
	c.open = true
	for _, p := range c.parts {
		p.in.tailer.Store(p.t)
	}
	a.txn.Store(c)

	// Who stops what, in this order:
	//   - ctx (the caller's: a signal) ends runCtx, which stops the tailers' reading and the
	//     committer's loop; a commit that fails ends runCtx too, so that the tailers stop
	//     reading into a transaction that cannot commit, and so does a tailer that fails.
	//   - Once both have stopped, no line is being sent: the last commit covers every line
	//     read. It runs under commitCtx, like every commit, which ends ShutdownTimeout after
	//     ctx, so that a cluster that is gone cannot hold the agent after SIGTERM.
	//   - The producer is closed (shutdown) only after the last commit.
	commitCtx, stopCommits := context.WithCancel(context.Background())
	defer stopCommits()
	stopGrace := context.AfterFunc(ctx, func() {
		grace := time.NewTimer(a.cfg.ShutdownTimeout)
		defer grace.Stop()
		select {
		case <-grace.C:
			stopCommits()
		case <-commitCtx.Done(): // the run ended first
		}
	})
	defer stopGrace()
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	committerErr := make(chan error, 1)
	go func() {
		err := c.run(runCtx, commitCtx) // nil once runCtx ended
		if err != nil {
			stopRun(err)
		}
		committerErr <- err
	}()
	// Each tailer's Run returns nil when runCtx ended, else a handler's error (fenced, say),
	// which stops the others.
	tailerErrs := make(chan error, len(c.parts))
	for _, p := range c.parts {
		go func() {
			err := p.t.Run(runCtx)
			if err != nil {
				stopRun(err)
			}
			tailerErrs <- err
		}()
	}
	var runErr error
	for range c.parts {
		if err := <-tailerErrs; err != nil && runErr == nil {
			runErr = err
		}
	}
	stopRun(nil) // the committer's loop stops too
	if err := <-committerErr; err != nil {
		runErr = err
	} else if runErr == nil {
		runErr = c.commit(commitCtx, true)
	}
	return c, runErr
}

// SetTailGlobs changes the files the implicit input follows from the next scan on (SIGHUP).
// Safe for concurrent use; a no-op before RunTail started, and without an implicit input.
func (a *Agent) SetTailGlobs(globs []string) error { return a.SetInputGlobs(ImplicitInput, globs) }

// SetInputGlobs changes the files input name follows from the next scan on (SIGHUP): an input
// of the configuration read again that also ran before. Safe for concurrent use; a no-op
// before RunTail started, and for a name the agent does not run (a new input starts with the
// next start).
func (a *Agent) SetInputGlobs(name string, globs []string) error {
	for _, in := range a.inputs {
		if t := in.tailer.Load(); t != nil && in.name == name {
			return t.SetGlobs(globs)
		}
	}
	return nil
}

// fileLines is input in's tailer's FileHandler: each line of f is sent, its record's value
// taking its bytes from the read-ahead budget first (sendLine); the delivery callback, one
// closure for all of f's lines (the record's tag says which line it was), acknowledges or fails
// the line in f's tracker.
func (a *Agent) fileLines(in *input) filetail.FileHandler {
	return func(f *filetail.File) filetail.LineHandler { return a.fileLinesOf(in, f) }
}

func (a *Agent) fileLinesOf(in *input, f *filetail.File) filetail.LineHandler {
	send := a.fileSender(in, f)
	return func(ctx context.Context, line filetail.Line) error {
		if err := in.limit.wait(ctx, len(line.Data)); err != nil {
			return err // the run is ending while the rate limit pauses reading
		}
		return send(ctx, line)
	}
}

// fileSender is fileLines without the rate limit. A line waits while lines of f read before it wait to
// be sent again (see redelivery), so that f's lines go out in their order.
func (a *Agent) fileSender(in *input, f *filetail.File) filetail.LineHandler {
	src := &lineOrigin{in: in, file: f}
	return func(ctx context.Context, line filetail.Line) error {
		if src.delivered == nil { // bound at the first line: only f's follower sends them, with one ctx
			src.delivered = func(md producer.RecordMetadata, err error) { a.lineDelivered(ctx, src, md, err) }
		}
		if err := a.redo.waitClear(ctx, src); err != nil {
			return err
		}
		return a.sendLine(ctx, line, f.Path, line.End, a.readAhead, src)
	}
}
