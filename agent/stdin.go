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
	stopMetrics := a.startMetrics()
	defer stopMetrics()
	a.startRedo()
	readErr := a.readStdinInput(ctx, a.inputList()[0], r) // the only input: StdinOnly
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

// readStdinInput reads r, standard input, as input in: it splits r into lines under the
// input's long-line policy and multiline rule, sending each, until r ends (nil) or fails, or
// ctx ends (its error).
func (a *Agent) readStdinInput(ctx context.Context, in *input, r io.Reader) error {
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
	src := &lineOrigin{in: in}
	src.delivered = func(md producer.RecordMetadata, err error) { a.lineDelivered(ctx, src, md, err) }
	return a.readStdin(&in.cfg, r, &stdinSink{a: a, ctx: ctx, src: src})
}

// readStdin splits r into lines under c's long-line policy and multiline rule, handing each to
// sink, until r ends (nil) or fails, or sink fails (sendLine: the run's context ended).
func (a *Agent) readStdin(c *Config, r io.Reader, sink filetail.LineSink) error {
	s := filetail.NewSplitter(c.EffectiveMaxLineBytes(), filetail.LongLinePolicy(c.LongLines), stdinChunk, 0)
	s.JoinEvents(c.multilineRule())
	// Stdin has no path: only a container-format set explicitly applies (empty: off).
	s.DecodeContainer(filetail.ContainerFormat(c.ContainerFormat), &a.stats.Container)
	return s.ReadLines(r, sink)
}

// StdinOnly reports that the agent's one input reads standard input: RunStdin runs it, and
// the run ends with stdin. An agent with inputs that follow files too runs RunTail, which
// reads stdin beside them (SetStdin).
func (a *Agent) StdinOnly() bool {
	inputs := a.inputList()
	return len(inputs) == 1 && inputs[0].cfg.Stdin
}

// SetStdin is what an input with stdin: true reads while RunTail runs (os.Stdin unless set).
// Call it before RunTail.
func (a *Agent) SetStdin(r io.Reader) { a.stdin = r }

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
	s.a.stdinRead.lines.Add(1)
	s.a.stdinRead.bytes.Add(int64(len(l.Data)))
	if s.a.stats.LongLines.CountLine(l) {
		s.a.logLongLine(s.src.in, l.Start)
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
	s.a.logLongLine(s.src.in, start)
	return nil
}

func (a *Agent) logLongLine(in *input, offset int64) {
	a.inputLog(in).Warn("line longer than max-line-bytes", "source", "stdin", "offset", offset,
		"policy", in.cfg.LongLines, "max_line_bytes", in.cfg.EffectiveMaxLineBytes())
}
