package filetail

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Multiline is how a Splitter joins lines into events (Config.Multiline): a Java stack trace or
// a Python traceback becomes one record. The zero value joins nothing: every line is a record.
//
// An event is a span of whole lines, [Line.Start, Line.End): its Data is those bytes as they are
// in the source, less the newline that ends the span. The long-line policy applies to the whole
// event: an event longer than the byte limit, or of more than MaxLines lines, is truncated (to
// its first MaxLines lines and at most the byte limit; Truncated is set and End is past the whole
// event), split into parts (each within both limits; a part cut at a line's end leaves its
// newline out, as every record does) or dropped whole.
type Multiline struct {
	// Preset is a built-in rule: MultilineJava or MultilinePython; empty for none.
	Preset MultilinePreset
	// Start: a line that matches starts an event, and every other line continues the event
	// before it.
	Start *regexp.Regexp
	// Continue: a line that matches continues the event before it, and every other line starts
	// an event. At most one of Preset, Start and Continue is set.
	Continue *regexp.Regexp
	// MaxLines is the most lines an event holds whole (default DefaultMultilineMaxLines).
	MaxLines int
	// Timeout is how long a held event waits for its next line once the source has stopped
	// growing (default DefaultMultilineTimeout): the last event of a burst is not held back until
	// the next one.
	Timeout time.Duration
}

// The multiline defaults.
const (
	DefaultMultilineMaxLines = 500
	DefaultMultilineTimeout  = time.Second
)

// MultilinePreset names a built-in multiline rule.
type MultilinePreset string

// The presets.
const (
	// MultilineJava: a line matching JavaContinuePattern continues the event before it, and so
	// does a line that names a Throwable (JavaThrowablePattern) when the line after it
	// continues it: logback's and log4j2's layouts print the exception's first line after the
	// message, its frames after that, and the three are one event. One empty line right after
	// a stack trace ends it and is part of it (log4j2's default configuration prints one).
	MultilineJava MultilinePreset = "java"
	// MultilinePython: a line beginning with PythonTracebackHead starts a traceback; in it,
	// every indented line continues the event, and so does the first line that is not indented
	// if it matches PythonFinalPattern (the exception), which ends the traceback. Outside a
	// traceback every line is an event.
	MultilinePython MultilinePreset = "python"
)

// The presets' patterns, documented in the README.
const (
	// JavaContinuePattern matches the lines of a Java stack trace after its first: an indented
	// "at ..." frame, "... N more" and logback's "... N common frames omitted", "Caused by: ..."
	// and an indented "Suppressed: ...".
	JavaContinuePattern = `^(?:\s+at\s|\s*\.\.\. \d+ (?:more|common frames omitted)|\s*Caused by:|\s+Suppressed:)`
	// JavaThrowablePattern matches the first line of an exception as Throwable.toString prints
	// it: a class's dotted name, and ": message" when it has one (java.lang.IllegalStateException:
	// boom, com.acme.PaymentDeclined). Only a frame on the next line makes it join the event
	// before it, so a line of that shape with no stack trace after it stays an event of its own.
	JavaThrowablePattern = `^(?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*(?::\s.*|:)?\r?$`
	// PythonTracebackHead begins a Python traceback.
	PythonTracebackHead = "Traceback (most recent call last):"
	// PythonFinalPattern matches a traceback's last line: the exception's name (dotted), with or
	// without ": message" (ValueError: bad, KeyboardInterrupt, requests.exceptions.HTTPError: 500).
	PythonFinalPattern = `^[A-Za-z_][\w.]*(?::.*)?\r?$`
)

var (
	javaContinue  = regexp.MustCompile(JavaContinuePattern)
	javaThrowable = regexp.MustCompile(JavaThrowablePattern)
	pythonFinal   = regexp.MustCompile(PythonFinalPattern)
	pythonHead    = []byte(PythonTracebackHead)
)

// Valid reports an error unless p is empty or one of the presets.
func (p MultilinePreset) Valid() error {
	switch p {
	case "", MultilineJava, MultilinePython:
		return nil
	}
	return fmt.Errorf("must be %s or %s, got %q", MultilineJava, MultilinePython, string(p))
}

// Enabled reports whether m joins lines at all.
func (m *Multiline) Enabled() bool { return m.Preset != "" || m.Start != nil || m.Continue != nil }

func (m *Multiline) setDefaults() {
	if m.Enabled() {
		m.MaxLines = cmp.Or(m.MaxLines, DefaultMultilineMaxLines)
		m.Timeout = cmp.Or(m.Timeout, DefaultMultilineTimeout)
	}
}

func (m *Multiline) validate() error {
	var errs []error
	if err := m.Preset.Valid(); err != nil {
		errs = append(errs, fmt.Errorf("agent: multiline %w", err))
	}
	set := 0
	for _, on := range []bool{m.Preset != "", m.Start != nil, m.Continue != nil} {
		if on {
			set++
		}
	}
	if set > 1 {
		errs = append(errs, errors.New("agent: multiline: set one of a preset, a start pattern and a continue pattern"))
	}
	if m.MaxLines < 0 || m.Timeout < 0 {
		errs = append(errs, fmt.Errorf("agent: multiline max lines (%d) and timeout (%v) must not be negative", m.MaxLines, m.Timeout))
	}
	return errors.Join(errs...)
}

// joiner decides, line by line, where events begin.
type joiner interface {
	// joins says whether line (its first bytes, if it is longer than the byte limit) continues
	// the event before it: joinYes, joinNo, or joinIfNext (only if the line after it answers
	// joinYes). It is asked about every line, also the first of a stream (whose answer does not
	// matter), so that a rule with state sees them all.
	joins(line []byte) join
	// reset forgets the state: the stream starts again.
	reset()
}

// join is a joiner's answer.
type join uint8

const (
	joinNo join = iota
	joinYes
	joinIfNext
)

func joinIf(b bool) join {
	if b {
		return joinYes
	}
	return joinNo
}

func (m *Multiline) joiner() joiner {
	switch {
	case m.Start != nil:
		return &patternJoiner{re: m.Start, starts: true}
	case m.Continue != nil:
		return &patternJoiner{re: m.Continue}
	case m.Preset == MultilineJava:
		return &javaJoiner{}
	case m.Preset == MultilinePython:
		return &pythonJoiner{}
	}
	return nil
}

// patternJoiner: a line that matches starts an event (starts) or continues one.
type patternJoiner struct {
	re     *regexp.Regexp
	starts bool
}

func (p *patternJoiner) joins(line []byte) join { return joinIf(p.re.Match(line) != p.starts) }
func (p *patternJoiner) reset()                 {}

// javaJoiner is MultilineJava. inTrace says the last line was a stack trace's (a frame, a
// cause): one blank line after it ends the trace and belongs to it, as log4j2's default
// configuration prints one after every exception.
type javaJoiner struct{ inTrace bool }

func (j *javaJoiner) joins(line []byte) join {
	inTrace := j.inTrace
	j.inTrace = false
	switch {
	case javaContinue.Match(line):
		j.inTrace = true
		return joinYes
	case javaThrowable.Match(line):
		return joinIfNext
	case inTrace && len(bytes.TrimSuffix(line, []byte("\r"))) == 0:
		return joinYes
	}
	return joinNo
}

func (j *javaJoiner) reset() { j.inTrace = false }

// pythonJoiner is MultilinePython.
type pythonJoiner struct{ inTraceback bool }

func (p *pythonJoiner) joins(line []byte) join {
	if bytes.HasPrefix(line, pythonHead) {
		p.inTraceback = true
		return joinNo
	}
	if !p.inTraceback {
		return joinNo
	}
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
		return joinYes // a frame, or its source line
	}
	p.inTraceback = false
	return joinIf(pythonFinal.Match(line))
}

func (p *pythonJoiner) reset() { p.inTraceback = false }

// events is a Splitter's event assembler: the line layer below it cuts whole lines (a line longer
// than the limit in parts, so that every byte reaches it and memory stays bounded), and it joins
// them into events and applies the long-line policy to each event. It holds at most max bytes of
// one event.
type events struct {
	max, maxLines int
	policy        LongLinePolicy
	timeout       time.Duration
	rule          joiner
	out           LineSink // the sink of the Feed or Flush call in progress

	buf       []byte    // the held event's bytes (the current part's when splitting); at most max
	held      bool      // an event has started and was not handed over
	mode      splitMode // modeNormal, modeSplitting (parts handed over), modeTruncating, modeDropping
	start     int64     // offset of the event's first byte
	partStart int64     // offset of buf[0]
	end       int64     // offset just past the event's last line so far (its newline)
	nl        bool      // that line ended with a newline: a separator goes before the next line
	partLines int       // lines begun in the held part (modeNormal, modeSplitting)
	part      int       // parts handed over (modeSplitting)
	midLine   bool      // the last Line was an earlier part of a long line: the next one continues it
	written   int64     // the event's first line's Line.Written, Time and Stream
	time      int64
	stream    Stream

	// mapped is set when the lines' bytes are not the file's (a container runtime's framing was
	// taken off them): a part cut inside a line cannot end at the offset of its last byte, and
	// ends at the start of that line instead (see partEnd). lineStart is the Start of the Line
	// being put.
	mapped    bool
	lineStart int64

	// tent says the held event's last line joined it only if the next line continues it
	// (joinIfNext): otherwise it becomes an event of its own (unjoin). tentCut is the event's
	// length in buf before it, tentAt where its bytes begin (after the newline that joined it);
	// tentEnd is where the event ended before it; tentStart, tentWritten, tentTime and
	// tentStream are the line's own. Only a whole event (modeNormal) joins so.
	tent                                      bool
	tentCut, tentAt                           int
	tentEnd, tentStart, tentWritten, tentTime int64
	tentStream                                Stream
}

func newEvents(m *Multiline, maxLine int, policy LongLinePolicy) *events {
	return &events{
		max: maxLine, maxLines: max(m.MaxLines, 1), policy: policy, timeout: m.Timeout,
		rule: m.joiner(),
	}
}

func (e *events) reset() {
	e.held, e.midLine, e.mode, e.tent = false, false, modeNormal, false
	e.buf = e.buf[:0]
	if e.rule != nil {
		e.rule.reset()
	}
}

// Line takes a line (or a part of a long one) from the line layer.
func (e *events) Line(l Line) error {
	if e.rule == nil && !e.midLine && !e.held && l.Part == 0 && len(l.Data) <= e.max {
		return e.out.Line(l) // a container's whole line within the limit: as it is, not copied
	}
	newline := l.End > l.Start+int64(len(l.Data)) // the line layer splits: it never truncates
	rest := e.midLine
	e.midLine = l.Part > 0 && l.Parts == 0
	e.lineStart = l.Start
	if !rest {
		j := joinNo // no rule: every line is an event
		if e.rule != nil {
			j = e.rule.joins(l.Data)
		}
		if e.tent {
			// The line before joined only if this one continues it.
			if j == joinYes || e.mode != modeNormal {
				e.tent = false
			} else if err := e.unjoin(); err != nil {
				return err
			}
		}
		if !e.held || j == joinNo {
			if err := e.emit(); err != nil {
				return err
			}
			e.begin(l.Start)
			e.written, e.time, e.stream = l.Written, l.Time, l.Stream
		} else {
			cut, end := len(e.buf), e.end
			if err := e.nextLine(); err != nil {
				return err
			}
			if j == joinIfNext && e.mode == modeNormal && l.Part == 0 {
				e.tent, e.tentCut, e.tentAt, e.tentEnd = true, cut, len(e.buf), end
				e.tentStart, e.tentWritten, e.tentTime, e.tentStream = l.Start, l.Written, l.Time, l.Stream
			}
		}
		e.partLines++
	}
	if err := e.put(l.Data); err != nil {
		return err
	}
	if e.tent && e.mode != modeNormal {
		e.tent = false // the event turned long with it: it stays joined
	}
	e.end, e.nl = l.End, newline
	if e.rule == nil && !e.midLine {
		return e.emit() // whole: nothing can join it
	}
	return nil
}

// Dropped passes a drop on; the line layer below splits, so it does not drop.
func (e *events) Dropped(start, end int64) error { return e.out.Dropped(start, end) }

func (e *events) begin(off int64) {
	e.held, e.mode, e.part, e.partLines, e.nl = true, modeNormal, 0, 0, false
	e.start, e.partStart, e.end = off, off, off
	e.buf = e.buf[:0]
}

// nextLine makes room for a line that continues the held event: the line limit first, then the
// newline between the two lines.
func (e *events) nextLine() error {
	if e.mode == modeNormal || e.mode == modeSplitting {
		if e.partLines >= e.maxLines {
			// Cut before this line: the held part ends with the newline before it.
			e.turnLong()
			if e.mode == modeSplitting {
				if err := e.emitPart(len(e.buf), e.end); err != nil {
					return err
				}
				e.nl = false
			}
		}
	}
	if !e.nl {
		return nil
	}
	e.nl = false
	if len(e.buf) == e.max && (e.mode == modeNormal || e.mode == modeSplitting) {
		// Full, and the newline follows: the event is long, and a part ends with the newline.
		e.turnLong()
		if e.mode == modeSplitting {
			return e.emitPart(len(e.buf), e.partEnd(e.partStart+int64(len(e.buf))+1, e.end))
		}
		return nil
	}
	return e.put([]byte{'\n'})
}

// put appends bytes of the held event, applying the policy once they pass the limit.
func (e *events) put(b []byte) error {
	for len(b) > 0 {
		if e.mode == modeTruncating || e.mode == modeDropping {
			return nil
		}
		if len(e.buf) == e.max {
			// Full, and a byte follows.
			e.turnLong()
			if e.mode == modeSplitting {
				// A full part ending with the newline between two lines leaves it out.
				data := len(e.buf)
				if e.buf[data-1] == '\n' {
					data--
				}
				if err := e.emitPart(data, e.partEnd(e.partStart+int64(len(e.buf)), e.lineStart)); err != nil {
					return err
				}
				e.partLines = 1
			}
			continue
		}
		k := min(e.max-len(e.buf), len(b))
		if need := len(e.buf) + k; need > cap(e.buf) {
			// Grow by doubling, never past max: a long event costs max bytes, a short one little.
			grown := make([]byte, len(e.buf), min(max(need, 2*cap(e.buf), 256), e.max))
			copy(grown, e.buf)
			e.buf = grown
		}
		e.buf = append(e.buf, b[:k]...)
		b = b[k:]
	}
	return nil
}

// turnLong applies the policy to the held event, found longer than a limit.
func (e *events) turnLong() {
	if e.mode != modeNormal {
		return
	}
	switch e.policy {
	case LongLinesTruncate:
		e.mode = modeTruncating
	case LongLinesDrop:
		e.mode = modeDropping
		e.buf = e.buf[:0]
	default:
		e.mode, e.part = modeSplitting, 0
	}
}

// partEnd is where a part cut now ends: natural, the file offset just past its bytes, when the
// lines are the file's bytes; else (mapped) where a restart must begin for nothing after the
// part to be lost: the end of the last whole line in it, or the start of the line it holds the
// beginning of (sent again whole after a restart). A part never ends at or before its start: a
// line so long that two parts cut it (a container's raw line longer than twice the limit) has
// its later parts end a byte after the last, inside the line.
func (e *events) partEnd(natural, mapped int64) int64 {
	if !e.mapped {
		return natural
	}
	return max(mapped, e.partStart+1)
}

// emitPart hands over buf[:data] as an earlier part of a split event, ending at end, and empties
// the buffer: the next part begins at end.
func (e *events) emitPart(data int, end int64) error {
	e.part++
	l := Line{Data: e.buf[:data], Start: e.partStart, End: end, Part: e.part, Written: e.written, Time: e.time, Stream: e.stream}
	e.partStart, e.partLines = end, 0
	err := e.out.Line(l)
	e.buf = e.buf[:0]
	return err
}

// unjoin hands over the held event without its tentative last line, which becomes the held
// event, alone.
func (e *events) unjoin() error {
	e.tent = false
	first := Line{Data: e.buf[:e.tentCut], Start: e.start, End: e.tentEnd, Written: e.written, Time: e.time, Stream: e.stream}
	if err := e.out.Line(first); err != nil { // the sink is done with the bytes when it returns
		return err
	}
	e.buf = e.buf[:copy(e.buf, e.buf[e.tentAt:])]
	e.start, e.partStart, e.partLines = e.tentStart, e.tentStart, 1
	e.written, e.time, e.stream = e.tentWritten, e.tentTime, e.tentStream
	return nil
}

// emit hands over the held event, if any: two, when its last line joined it only tentatively
// (no line came to continue it).
func (e *events) emit() error {
	if !e.held {
		return nil
	}
	if e.tent {
		if err := e.unjoin(); err != nil {
			return err
		}
	}
	e.held = false
	switch e.mode {
	case modeDropping:
		return e.out.Dropped(e.start, e.end)
	case modeTruncating:
		return e.out.Line(Line{Data: e.buf, Start: e.start, End: e.end, Truncated: true, Written: e.written, Time: e.time, Stream: e.stream})
	case modeSplitting:
		e.part++
		return e.out.Line(Line{Data: e.buf, Start: e.partStart, End: e.end, Part: e.part, Parts: e.part, Written: e.written, Time: e.time, Stream: e.stream})
	}
	return e.out.Line(Line{Data: e.buf, Start: e.start, End: e.end, Written: e.written, Time: e.time, Stream: e.stream})
}
