package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/kafkatrail/kafkatrail/producer"
)

// RunTail follows the configured files until ctx ends, then stops reading, flushes and waits for
// acknowledgements (up to the shutdown timeout) and saves the checkpoints: each file's offset
// moves only past lines that Kafka acknowledged, and every line before them.
func (a *Agent) RunTail(ctx context.Context) error {
	t, err := NewTailer(TailerConfig{
		Globs:           a.cfg.Tail,
		StartAt:         a.cfg.StartAt,
		MaxLineBytes:    a.cfg.EffectiveMaxLineBytes(),
		LongLines:       a.cfg.LongLines,
		PartialLineIdle: a.cfg.PartialLineIdle,
		StateDir:        a.cfg.StateDir,
	}, a.handleFileLine, a.log.With("component", "tailer"))
	if err != nil {
		_ = a.shutdown()
		return err
	}
	a.tailer.Store(t)
	mctx, stopMetrics := context.WithCancel(context.Background())
	metricsDone := make(chan struct{})
	go func() { defer close(metricsDone); a.reportMetrics(mctx) }()
	defer func() { stopMetrics(); <-metricsDone }()
	runErr := t.Run(ctx)
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		a.log.Error("tailer stopped", "error", runErr)
	}
	closeErr := a.shutdown()
	saveErr := t.SaveCheckpoints()
	if saveErr != nil {
		a.log.Error("saving checkpoints at shutdown", "error", saveErr)
	}
	switch {
	case closeErr != nil:
		return closeErr
	case saveErr != nil:
		return fmt.Errorf("saving checkpoints: %w", saveErr)
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		return runErr
	}
	if err := a.result(); err != nil {
		return err
	}
	return ErrInterrupted
}

// SetTailGlobs changes the files followed from the next scan on (SIGHUP). Safe for concurrent
// use; a no-op before RunTail started.
func (a *Agent) SetTailGlobs(globs []string) error {
	if t := a.tailer.Load(); t != nil {
		return t.SetGlobs(globs)
	}
	return nil
}

// handleFileLine is the tailer's LineHandler: track the line, then send it; its callback
// acknowledges or fails the line in its file's tracker.
func (a *Agent) handleFileLine(ctx context.Context, f *File, line Line) error {
	end := line.End
	return a.sendLine(ctx, line.Data, f.Path, func(_ producer.RecordMetadata, err error) {
		if err != nil {
			if notBuffered(err) {
				return // sendLine offers the line again
			}
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				// Shutdown interrupted Send while it waited for buffer memory: the line was never
				// buffered. It pins the checkpoint, so the next start reads it again, but it is not
				// a delivery failure.
				f.Fail(end, err)
				return
			}
			f.Fail(end, err)
			if a.stats.fail(err) {
				a.log.Error("line not delivered: its file's checkpoint stops before it", "path", f.Path, "offset", end, "error", err)
			}
			return
		}
		f.Ack(end)
		a.stats.LinesAcked.Add(1)
	})
}
