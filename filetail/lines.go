package filetail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// Line is one line a Splitter hands over: of a followed file, or of the agent's stdin (where
// offsets count from the stream's first byte). With multiline events (JoinEvents) it is one
// event: Data holds its lines with the newlines between them, and Start..End spans them all.
type Line struct {
	// Data is the line without its trailing '\n' (a preceding '\r' is kept: bytes pass as they
	// are). It is only valid during the handler call: the follower reuses its buffer, so the
	// handler copies what it keeps (producer.Send copies).
	Data []byte
	// Start is the file offset of Data's first byte.
	Start int64
	// End is the offset just past the line (after its newline, or the file size for a last line
	// without one): the checkpoint value once this line and every line before it are acknowledged.
	End int64
	// Truncated is set when long-lines=truncate cut the line to MaxLineBytes (an event to its
	// byte or line limit); End is still past the whole line.
	Truncated bool
	// Part is the 1-based index of a long-lines=split chunk (0 for a line that was not split).
	// Parts is set on the last part only, to the number of parts; it is 0 on the earlier ones,
	// because a line is streamed and its length is unknown until its newline. An earlier part's
	// End is the end of its own chunk, so a restart resumes after the last acknowledged chunk.
	Part, Parts int
	// Written is when the line was written as far as its reader knows, Unix ns (0: unknown):
	// for a file, its modification time at the read that completed the line (the stat before
	// it: an upper bound for the bytes written before it, so an age measured from it is a lower
	// bound); for stdin, when that read returned. An event's is its first line's.
	Written int64
	// Time is when a container runtime wrote the line, Unix ns (0: not a container's line): its
	// framing's time, the first piece's for a line it wrote in pieces (Config.ContainerFormat).
	Time int64
	// Stream is the standard stream a container wrote the line to (StreamUnknown: not a
	// container's line).
	Stream Stream
}

// LongLinePolicy is what happens to a line longer than the limit (Config.LongLines).
type LongLinePolicy string

// Long-line policies.
const (
	LongLinesTruncate LongLinePolicy = "truncate" // the first MaxLineBytes are sent, the rest skipped
	LongLinesSplit    LongLinePolicy = "split"    // sent in parts of MaxLineBytes: nothing is lost
	LongLinesDrop     LongLinePolicy = "drop"     // skipped whole
)

// Valid reports an error unless p is one of the policies.
func (p LongLinePolicy) Valid() error {
	switch p {
	case LongLinesTruncate, LongLinesSplit, LongLinesDrop:
		return nil
	}
	return fmt.Errorf("must be %s, %s or %s, got %q", LongLinesTruncate, LongLinesSplit, LongLinesDrop, string(p))
}

// LongLineCounts counts long lines by policy: one count per long line, however many records
// it became. The file path keeps one per file and one for all files, stdin one of its own.
type LongLineCounts struct {
	Truncated, Split, Dropped atomic.Uint64
}

// CountLine counts l if it is a long line (truncated, or the first part of a split one) and
// reports whether it did: the caller logs the long line then, once.
func (c *LongLineCounts) CountLine(l Line) bool {
	switch {
	case l.Truncated:
		c.Truncated.Add(1)
	case l.Part == 1:
		c.Split.Add(1)
	default:
		return false
	}
	return true
}

// CountDropped counts a line that LongLinesDrop skipped.
func (c *LongLineCounts) CountDropped() { c.Dropped.Add(1) }

// LineSink receives what a Splitter produces. An error stops the splitter and is returned from
// Feed, Flush or ReadLines unchanged.
type LineSink interface {
	// Line hands over a line; l.Data is only valid during the call.
	Line(l Line) error
	// Dropped reports a long line skipped by LongLinesDrop, [start, end).
	Dropped(start, end int64) error
}

type splitMode uint8

const (
	modeNormal     splitMode = iota // buf holds the start of the current line (at most max bytes)
	modeSplitting                   // parts were emitted; buf holds the rest of the line so far
	modeTruncating                  // buf[:max] holds the line's first bytes; the rest is skipped
	modeDropping                    // the rest of the line is skipped; buf is empty
)

// Splitter cuts a stream of bytes (a file from an offset, or stdin) into lines and applies the
// long-line policy. Memory is bounded whatever the lines: it never holds more than maxLine bytes
// of one line plus one read chunk, so a 50 MB line costs no more than a short one. The caller
// reads into Space and hands the bytes over with Feed (a follower, which checks the file between
// reads), or lets ReadLines do both (stdin). Not safe for concurrent use: one goroutine owns it.
type Splitter struct {
	max    int
	policy LongLinePolicy
	chunk  int

	buf  []byte // buf[:n]: bytes of the current line not yet handed over (see splitMode)
	n    int
	mode splitMode

	off       int64 // file offset of the next byte to be read (just past the bytes fed so far)
	written   int64 // SetWritten's: every Line handed over carries it
	lineStart int64 // file offset of the current line's first byte
	partStart int64 // modeSplitting: file offset of buf[0]
	part      int   // modeSplitting: parts emitted so far

	// ev joins lines into events (JoinEvents), or the pieces of a container's message
	// (DecodeContainer); nil: every line is a record. With it, the fields above split long lines
	// whatever the policy (so that every byte reaches ev), and ev applies the policy to whole
	// events.
	ev *events
	// cont takes a container runtime's framing off each line before ev (DecodeContainer); nil:
	// lines are as they are.
	cont *containerLines
}

// NewSplitter returns a splitter of lines of at most maxLine bytes (longer ones go by policy)
// that reads chunk bytes at a time, the next of them at stream offset off.
func NewSplitter(maxLine int, policy LongLinePolicy, chunk int, off int64) *Splitter {
	s := &Splitter{max: maxLine, policy: policy, chunk: chunk}
	s.Reset(off)
	return s
}

// JoinEvents makes s join lines into events by m (nothing changes if m is not Enabled). Call it
// before the first Feed.
func (s *Splitter) JoinEvents(m Multiline) {
	if !m.Enabled() {
		return
	}
	m.setDefaults()
	policy := s.policy
	if s.ev != nil {
		policy = s.ev.policy // DecodeContainer's event layer has the configured policy
	}
	s.ev = newEvents(&m, s.max, policy)
	s.policy = LongLinesSplit // every byte of a long line reaches the event
	if s.cont != nil {
		s.cont.out, s.ev.mapped = s.ev, true
	}
}

// DecodeContainer makes s take the framing of container format f off every line (nothing
// changes if f is empty or off), counting into counts (nil ones are skipped). Call it before the
// first Feed; it may come before or after JoinEvents.
func (s *Splitter) DecodeContainer(f ContainerFormat, counts ...*ContainerCounts) {
	if f == "" || f == ContainerOff {
		return
	}
	if s.ev == nil {
		// Without multiline events, every message is an event of its own: the event layer joins
		// its pieces and applies the long-line policy to it.
		s.ev = newEvents(&Multiline{}, s.max, s.policy)
		s.policy = LongLinesSplit
	}
	s.ev.mapped = true
	s.cont = newContainerLines(f, s.ev, counts)
}

// ContainerFormat is the format s decodes: the configured one, or, for auto, what a line
// decided (auto until then); off when s decodes nothing.
func (s *Splitter) ContainerFormat() ContainerFormat {
	if s.cont == nil {
		return ContainerOff
	}
	return s.cont.format
}

// readDeadliner is a reader whose blocked Read can be made to return (an *os.File on a pipe).
type readDeadliner interface {
	SetReadDeadline(t time.Time) error
}

// ReadLines reads r to its end, handing every line to sink; a last line without a newline is
// handed over at io.EOF. It returns the sink's error, or r's (never io.EOF): after a read error
// a started line is not handed over.
//
// When events are joined and r has SetReadDeadline (a pipe), a held event is handed over once r
// has been idle for the multiline timeout: each read while an event waits has that deadline, and
// one that passes hands the event over and reads on. A deadline that someone else set (to stop
// the read) makes the read after that fail too, and ReadLines returns its error.
func (s *Splitter) ReadLines(r io.Reader, sink LineSink) error {
	dl, _ := r.(readDeadliner)
	armed := false // the current read has the idle deadline
	for {
		if dl != nil && s.ev != nil && s.ev.timeout > 0 {
			switch {
			case s.EventWaiting():
				armed = dl.SetReadDeadline(time.Now().Add(s.ev.timeout)) == nil
			case armed:
				armed = false
				if err := dl.SetReadDeadline(time.Time{}); err != nil {
					return err
				}
			}
		}
		k, err := r.Read(s.Space())
		if k > 0 {
			s.written = time.Now().UnixNano() // a pipe keeps no write times: the read's
			if herr := s.Feed(k, sink); herr != nil {
				return herr
			}
		}
		if errors.Is(err, io.EOF) {
			_, err = s.Flush(sink)
			return err
		}
		if armed && errors.Is(err, os.ErrDeadlineExceeded) {
			if _, err := s.FlushEvent(sink); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
	}
}

// SetWritten sets when the bytes fed next were written, Unix ns, as the reader knows it: the
// lines they complete carry it in Line.Written. ReadLines sets it itself, to each read's time.
func (s *Splitter) SetWritten(ns int64) { s.written = ns }

// Reset forgets any partial line and continues at stream offset off.
func (s *Splitter) Reset(off int64) {
	s.n, s.mode, s.part = 0, modeNormal, 0
	s.off, s.lineStart, s.partStart = off, off, off
	if s.ev != nil {
		s.ev.reset()
	}
	if s.cont != nil {
		s.cont.reset()
	}
	// Start small; grow only while a long partial line needs it, and give the memory back after.
	if size := s.chunk + min(s.max, s.chunk); len(s.buf) != size {
		s.buf = make([]byte, size)
	}
}

// Space returns where the next read goes: at most one chunk, after the held bytes.
func (s *Splitter) Space() []byte {
	if need := s.n + s.chunk; need > len(s.buf) {
		grown := make([]byte, min(max(need, 2*len(s.buf)), s.max+s.chunk))
		copy(grown, s.buf[:s.n])
		s.buf = grown
	}
	return s.buf[s.n : s.n+s.chunk]
}

// Pending reports whether a line has started but not ended (no newline yet), or a container's
// message was written in pieces and its last piece has not come yet: Flush would hand it over.
func (s *Splitter) Pending() bool { return s.linePending() || (s.cont != nil && s.cont.open) }

// linePending reports whether a line has started but not ended.
func (s *Splitter) linePending() bool { return s.n > 0 || s.mode != modeNormal }

// EventWaiting reports whether an event of whole lines is held, waiting for the line after it
// (which decides whether it continues), and no line has started after it: FlushEvent would
// hand it over.
func (s *Splitter) EventWaiting() bool { return s.ev != nil && s.ev.held && !s.Pending() }

// FlushEvent hands over the event EventWaiting reports, and reports whether there was one: the
// source has been idle for the multiline timeout. A started line is left for Flush, which hands
// it over with the event it belongs to.
func (s *Splitter) FlushEvent(sink LineSink) (bool, error) {
	if !s.EventWaiting() {
		return false, nil
	}
	s.ev.out = sink
	return true, s.ev.emit()
}

// Feed consumes k bytes just read into Space(), handing over every line they complete.
func (s *Splitter) Feed(k int, sink LineSink) error {
	if s.ev != nil {
		s.ev.out, sink = sink, s.ev
	}
	if s.cont != nil {
		sink = s.cont // and on to ev
	}
	n0 := s.n
	s.n += k
	// base maps a buf index at or after n0 (the new bytes, where every newline is: the held bytes
	// were searched before) to its file offset.
	base := s.off - int64(n0)
	s.off += int64(k)

	begin := 0 // buf index of the current line's (or part's) first held byte
	scan := n0
	for {
		i := bytes.IndexByte(s.buf[scan:s.n], '\n')
		if i < 0 {
			break
		}
		nl := scan + i
		end := base + int64(nl) + 1
		if err := s.endLine(begin, nl, end, sink); err != nil {
			return err
		}
		begin, scan = nl+1, nl+1
		s.lineStart, s.partStart = end, end
	}

	// No newline in buf[begin:n]: the current line continues in the next read.
	keep := s.n - begin
	switch s.mode {
	case modeTruncating:
		keep = s.max // the kept prefix; begin is 0 here (set when the line turned long)
	case modeDropping:
		keep = 0
	default:
		if keep > s.max {
			if err := s.turnLong(begin, keep, sink); err != nil {
				return err
			}
			begin, keep = s.heldAfterTurn(begin, keep)
		}
	}
	copy(s.buf, s.buf[begin:begin+keep])
	s.n = keep
	return nil
}

// turnLong applies the policy to a line found longer than max without its newline: held is the
// number of its bytes in buf from begin.
func (s *Splitter) turnLong(begin, held int, sink LineSink) error {
	switch s.policy {
	case LongLinesTruncate:
		s.mode = modeTruncating
	case LongLinesDrop:
		s.mode = modeDropping
	default:
		if s.mode == modeNormal {
			s.mode, s.part, s.partStart = modeSplitting, 0, s.lineStart
		}
		// Emit full chunks while at least one byte follows, so the last part is never empty.
		for held > s.max {
			if err := s.emitPart(s.buf[begin:begin+s.max], false, sink); err != nil {
				return err
			}
			begin += s.max
			held -= s.max
		}
	}
	return nil
}

// heldAfterTurn says which bytes stay in buf after turnLong.
func (s *Splitter) heldAfterTurn(begin, held int) (int, int) {
	switch s.mode {
	case modeTruncating:
		return begin, s.max
	case modeDropping:
		return begin, 0
	default: // splitting: the tail after the emitted parts
		parts := (held - 1) / s.max
		return begin + parts*s.max, held - parts*s.max
	}
}

func (s *Splitter) emitPart(data []byte, last bool, sink LineSink) error {
	s.part++
	l := Line{Data: data, Start: s.partStart, End: s.partStart + int64(len(data)), Part: s.part, Written: s.written}
	if last {
		l.Parts = s.part
	}
	s.partStart = l.End
	return sink.Line(l)
}

// endLine hands over the line whose newline is at buf[nl] and ends at file offset end.
func (s *Splitter) endLine(begin, nl int, end int64, sink LineSink) error {
	mode := s.mode
	s.mode = modeNormal
	switch mode {
	case modeTruncating:
		return sink.Line(Line{Data: s.buf[:s.max], Start: s.lineStart, End: end, Truncated: true, Written: s.written})
	case modeDropping:
		return sink.Dropped(s.lineStart, end)
	}
	data := s.buf[begin:nl]
	if len(data) > s.max || mode == modeSplitting {
		switch s.policy {
		case LongLinesTruncate:
			return sink.Line(Line{Data: data[:s.max], Start: s.lineStart, End: end, Truncated: true, Written: s.written})
		case LongLinesDrop:
			return sink.Dropped(s.lineStart, end)
		}
		if mode == modeNormal {
			s.part, s.partStart = 0, s.lineStart
		}
		for len(data) > s.max {
			if err := s.emitPart(data[:s.max], false, sink); err != nil {
				return err
			}
			data = data[s.max:]
		}
		s.part++
		return sink.Line(Line{Data: data, Start: s.partStart, End: end, Part: s.part, Parts: s.part, Written: s.written})
	}
	return sink.Line(Line{Data: data, Start: s.lineStart, End: end, Written: s.written})
}

// Flush hands over a started line that has no newline (yet) as if it ended at the bytes read so
// far, and continues after it: if the file grows later, what follows is a new line, and nothing
// is sent twice. A held event is handed over too, with that line if it continues it. It reports
// whether there was anything to flush.
func (s *Splitter) Flush(sink LineSink) (bool, error) {
	if s.ev != nil {
		s.ev.out = sink
		held := s.ev.held
		var lines LineSink = s.ev
		if s.cont != nil {
			lines = s.cont
		}
		line, err := s.flushLine(lines) // the started line joins the event, or begins one
		if err != nil {
			return true, err
		}
		if s.cont != nil {
			// A message whose last piece has not come within the idle time goes as it is.
			if err := s.cont.endMessage(); err != nil {
				return true, err
			}
		}
		return held || line, s.ev.emit()
	}
	return s.flushLine(sink)
}

func (s *Splitter) flushLine(sink LineSink) (bool, error) {
	if !s.linePending() {
		return false, nil
	}
	mode := s.mode
	data := s.buf[:s.n]
	start := s.lineStart
	s.mode, s.n = modeNormal, 0
	s.lineStart, s.partStart = s.off, s.off
	var err error
	switch mode {
	case modeNormal:
		err = sink.Line(Line{Data: data, Start: start, End: s.off, Written: s.written})
	case modeSplitting:
		s.part++
		partStart := s.off - int64(len(data))
		err = sink.Line(Line{Data: data, Start: partStart, End: s.off, Part: s.part, Parts: s.part, Written: s.written})
	case modeTruncating:
		err = sink.Line(Line{Data: data[:s.max], Start: start, End: s.off, Truncated: true, Written: s.written})
	case modeDropping:
		err = sink.Dropped(start, s.off)
	}
	return true, err
}

// Shrink gives back the memory a long line made the buffer grow to, once nothing is held.
func (s *Splitter) Shrink() {
	if size := s.chunk + min(s.max, s.chunk); s.n == 0 && len(s.buf) > size {
		s.buf = make([]byte, size)
	}
	if s.ev != nil && !s.ev.held && cap(s.ev.buf) > s.chunk {
		s.ev.buf = nil
	}
	if s.cont != nil && cap(s.cont.scratch) > s.chunk {
		s.cont.scratch = nil
	}
	if s.cont != nil && cap(s.cont.members) > 64 {
		s.cont.members = nil // an object with many keys is not docker's
	}
}
