package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// RunStdin sends every line of r, then flushes and waits for every acknowledgement (up to the
// shutdown timeout). It returns nil only when every line was acknowledged; a *LinesFailedError
// counts the failures and carries the first. When ctx ends first, reading stops and what was
// read is still flushed.
//
// stdin cannot be re-read, so there is no checkpoint: the exit status is the guarantee.
func (a *Agent) RunStdin(ctx context.Context, r io.Reader) error {
	if f, ok := r.(*os.File); ok {
		// A blocked read on a pipe returns once its deadline passes: that is how a signal
		// interrupts reading stdin.
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
		defer stop()
	}
	mctx, stopMetrics := context.WithCancel(context.Background())
	metricsDone := make(chan struct{})
	go func() { defer close(metricsDone); a.reportMetrics(mctx) }()
	defer func() { stopMetrics(); <-metricsDone }()
	lr := newLineReader(r, a.cfg.EffectiveMaxLineBytes(), a.cfg.LongLines)
	var readErr error
	inSplit := false           // the line being read is the rest of a split long line
	onDelivery := a.onDelivery // a method value allocates each time it is taken: once, not per line
	for {
		line, err := lr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		if line.skipped {
			a.stats.LinesDropped.Add(1)
			a.logLongLine("stdin", line)
			continue
		}
		if line.long && !inSplit {
			// One count per long line: the parts after the first of a split line are not new.
			if a.cfg.LongLines == "split" {
				a.stats.LinesSplit.Add(1)
				inSplit = true
			} else {
				a.stats.LinesTruncated.Add(1)
			}
			a.logLongLine("stdin", line)
		} else if !line.long {
			inSplit = false
		}
		if err := a.sendLine(ctx, line.data, "", 0, onDelivery); err != nil {
			readErr = err
			break
		}
	}
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

func (a *Agent) logLongLine(source string, l stdinLine) {
	a.log.Warn("line longer than max-line-bytes", "source", source, "offset", l.start,
		"policy", a.cfg.LongLines, "max_line_bytes", a.cfg.EffectiveMaxLineBytes())
}

// stdinLine is one record's worth of a stream.
type stdinLine struct {
	data    []byte
	start   int64 // stream offset of the line's first byte
	long    bool  // the line was longer than the maximum (truncated or a split part)
	skipped bool  // dropped by long-lines=drop
}

// lineReader splits a stream into lines of at most max bytes, applying the long-line policy
// without ever holding more than max bytes of one line.
type lineReader struct {
	r      *bufio.Reader
	max    int
	policy string
	buf    []byte // the line being assembled, at most max bytes
	carry  []byte // split: the rest of a chunk that did not fit, read before the stream
	off    int64  // stream offset of the next unconsumed byte
	// discarding is set after a truncated or dropped line's head: the rest of it, up to its
	// newline, is skipped.
	discarding bool
}

func newLineReader(r io.Reader, max int, policy string) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max, policy: policy, buf: make([]byte, 0, min(max, 64<<10))}
}

// read returns the next piece of the current line (without its newline): complete reports that
// the line ends with it. err is io.EOF at the end of the stream.
func (lr *lineReader) read() (piece []byte, complete bool, err error) {
	if len(lr.carry) > 0 {
		piece, lr.carry = lr.carry, nil
		if i := bytes.IndexByte(piece, '\n'); i >= 0 {
			// What follows the newline stays for the next call (a reslice: piece stays intact).
			piece, lr.carry, complete = piece[:i], piece[i+1:], true
		}
		lr.off += int64(len(piece))
		if complete {
			lr.off++
		}
		return piece, complete, nil
	}
	piece, err = lr.r.ReadSlice('\n')
	lr.off += int64(len(piece))
	if err == nil {
		return piece[:len(piece)-1], true, nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		err = nil
	}
	return piece, false, err
}

// next returns the next line. At end of input a last line without a newline is returned,
// then io.EOF.
func (lr *lineReader) next() (stdinLine, error) {
	lr.buf = lr.buf[:0]
	start := lr.off
	for {
		piece, complete, err := lr.read()
		switch {
		case lr.discarding:
			if complete {
				lr.discarding = false
				start = lr.off
			}
		case len(piece) <= lr.max-len(lr.buf):
			lr.buf = append(lr.buf, piece...)
			if complete {
				return stdinLine{data: lr.buf, start: start}, nil
			}
		default:
			room := lr.max - len(lr.buf)
			lr.buf = append(lr.buf, piece[:room]...)
			switch lr.policy {
			case "split":
				// What did not fit starts the next part.
				rest := piece[room:]
				lr.off -= int64(len(rest))
				// rest may live in bufio's buffer or in the old carry: copy it to storage of
				// our own before the next read overwrites it.
				carry := make([]byte, 0, len(rest)+1+len(lr.carry))
				carry = append(carry, rest...)
				if complete {
					lr.off--
					carry = append(carry, '\n')
				}
				lr.carry = append(carry, lr.carry...)
				return stdinLine{data: lr.buf, start: start, long: true}, nil
			case "truncate":
				lr.discarding = !complete
				return stdinLine{data: lr.buf, start: start, long: true}, nil
			default: // drop
				lr.discarding = !complete
				return stdinLine{start: start, skipped: true}, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(lr.buf) > 0 && !lr.discarding {
				return stdinLine{data: lr.buf, start: start}, nil
			}
			return stdinLine{}, err
		}
	}
}
