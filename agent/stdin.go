package agent

import (
	"context"
	"io"
	"os"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/producer"
)

// RunStdin sends every line of r, then flushes and waits for every acknowledgement (up to the
// shutdown timeout). It returns nil only when every line was acknowledged; a *LinesFailedError
// counts the lines lost and carries the first failure; a *DeadLetteredError says that none was
// lost and some were dead-lettered. When ctx ends first, reading stops and what was
// read is still flushed.
//
// stdin cannot be re-read, so there is no checkpoint: the exit status is the guarantee.
func (a *Agent) RunStdin(ctx context.Context, r io.Reader) error {
	if f, ok := r.(*os.File); ok {
		// A blocked read on a pipe returns once its deadline passes: that is how a signal
		// interrupts reading stdin (and how a held multiline event is sent when stdin is idle).
		pf, restore := pollable(f)
		defer restore()
		sf := &stdinFile{f: pf}
		stop := context.AfterFunc(ctx, sf.stop)
		defer stop()
		r = sf
	}
	stopMetrics := a.startMetrics()
	defer stopMetrics()
	src := &lineOrigin{in: a.inputList()[0]} // --stdin is the implicit input, the only one
	src.delivered = func(md producer.RecordMetadata, err error) { a.lineDelivered(ctx, src, md, err) }
	sink := &stdinSink{a: a, ctx: ctx, src: src}
	a.startRedo()
	readErr := a.readStdin(r, sink)
	if ctx.Err() != nil {
		a.log.Info("stopped reading stdin", "reason", context.Cause(ctx))
	} else if readErr != nil {
		a.log.Error("reading stdin", "error", readErr)
	}
	closeErr := a.shutdown()
	if err := a.result(); err != nil {
		return err
	}
	if closeErr != nil {
		return closeErr
	}
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return readErr
}

// readStdin splits r into lines under the long-line policy, handing each to sink, until r ends
// (nil) or fails, or sink fails (sendLine: the run's context ended).
func (a *Agent) readStdin(r io.Reader, sink filetail.LineSink) error {
	s := filetail.NewSplitter(a.cfg.EffectiveMaxLineBytes(), filetail.LongLinePolicy(a.cfg.LongLines), stdinChunk, 0)
	s.JoinEvents(a.cfg.multilineRule())
	// Stdin has no path: only a container-format set explicitly applies (empty: off).
	s.DecodeContainer(filetail.ContainerFormat(a.cfg.ContainerFormat), &a.stats.Container)
	return s.ReadLines(r, sink)
}

// stdinChunk is the size of one read of stdin.
const stdinChunk = 64 << 10

// stdinSink sends stdin's lines and counts its long ones (one count and one log per long line,
// whatever it became).
type stdinSink struct {
	a   *Agent
	ctx context.Context
	src *lineOrigin
}

// Line sends l; its error is the context's, when the run ends.
func (s *stdinSink) Line(l filetail.Line) error {
	if s.a.stats.LongLines.CountLine(l) {
		s.a.logLongLine(l.Start)
	}
	if err := s.src.in.limit.wait(s.ctx, len(l.Data)); err != nil {
		return err
	}
	if err := s.a.redo.waitClear(s.ctx, s.src); err != nil {
		return err
	}
	return s.a.sendLine(s.ctx, l, "", l.End, nil, s.src)
}

// Dropped counts a long line that long-lines=drop skipped.
func (s *stdinSink) Dropped(start, _ int64) error {
	s.a.stats.LongLines.CountDropped()
	s.a.logLongLine(start)
	return nil
}

func (a *Agent) logLongLine(offset int64) {
	a.log.Warn("line longer than max-line-bytes", "source", "stdin", "offset", offset,
		"policy", a.cfg.LongLines, "max_line_bytes", a.cfg.EffectiveMaxLineBytes())
}
