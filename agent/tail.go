package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	la := getLineAck()
	la.a, la.ctx, la.f, la.end = a, ctx, f, line.End
	// Send calls the callback exactly once per call, so la goes back to the pool from there
	// (except after a buffer-exhausted attempt that ctx ended: then the garbage collector has it).
	return a.sendLine(ctx, line.Data, f.Path, la.done)
}

// lineAck is a file line's delivery callback. Callbacks are pooled, each with its method value
// bound once, because a closure per line would be the file path's only allocation per line.
type lineAck struct {
	a    *Agent
	ctx  context.Context
	f    *File
	end  int64
	done producer.Callback // la.onDelivery, bound once
}

var lineAckPool sync.Pool

func getLineAck() *lineAck {
	if v := lineAckPool.Get(); v != nil {
		return v.(*lineAck)
	}
	la := new(lineAck)
	la.done = la.onDelivery
	return la
}

func (la *lineAck) release() {
	la.a, la.ctx, la.f = nil, nil, nil
	lineAckPool.Put(la)
}

func (la *lineAck) onDelivery(_ producer.RecordMetadata, err error) {
	a, ctx, f, end := la.a, la.ctx, la.f, la.end
	if err != nil && notBuffered(err) {
		return // sendLine offers the line again, with this same callback
	}
	la.release()
	if err != nil {
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
}
