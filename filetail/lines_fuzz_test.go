package filetail

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"
)

// event is one thing a Splitter handed over, with its data copied.
type event struct {
	Line
	data    string
	dropped bool
}

type eventSink struct{ events []event }

func (s *eventSink) Line(l Line) error {
	s.events = append(s.events, event{Line: l, data: string(l.Data)})
	return nil
}

func (s *eventSink) Dropped(start, end int64) error {
	s.events = append(s.events, event{Line: Line{Start: start, End: end}, dropped: true})
	return nil
}

// FuzzSplitter feeds arbitrary bytes in arbitrary chunks through each long-line policy and checks
// the accounting: the spans handed over tile the input from its first byte to its last; each
// line is its span (less its newline) or, cut by the policy, a prefix of it; only a line longer
// than the limit is truncated, split or dropped; the parts of a split line are numbered in
// order and add up to it; no line is longer than the limit; and the held buffer stays within
// the limit plus one read.
//
// Then the same input goes through each multiline rule (a start pattern, a continue pattern,
// the java and python presets; max-lines from the chunk byte) under each policy, checked by
// checkJoined.
func FuzzSplitter(f *testing.F) {
	for _, seed := range []struct {
		input          string
		maxLine, chunk uint8
		steps          string
	}{
		{"a\nbc\n", 5, 8, "\x01"},
		{"\n\nx\n\n", 1, 1, "\x03\x01"},
		{"ab\r\n\r\n", 2, 4, ""},
		{"abcdefghijklmnopqrstuvwxyz\nok\n", 5, 8, "\x02\x05"},
		{"abcdefghij\nok\n", 5, 3, "\x07"},
		{"x\nabcdefghij", 5, 8, "\x01\x02\x03"},
		{"abcdefg", 5, 8, ""},
		{"\x00\xff\t\n" + string(bytes.Repeat([]byte("0123456789"), 40)) + "\nend", 64, 16, "\x10\x01"},
		{"S1\n a\n b\nS2\nx\n\tat y\n\t... 3 more\nCaused by: z\n", 8, 0x46, "\x03"},
		{"Traceback (most recent call last):\n  File \"a\"\nValueError: v\nnext\n", 16, 0xe8, "\x05\x01"},
		{"S\n" + string(bytes.Repeat([]byte(" continued line\n"), 12)) + "S\n", 20, 0x27, ""},
		{"m\na.B: x\n\tat c\nd.E\nf.G: long message here\n\tat h\ni.J\nk\n", 12, 0x43, "\x02\x01"},
		{"a.B\nc.D\n\tat e\nm\nf.G\n", 4, 0x02, ""},
	} {
		f.Add([]byte(seed.input), seed.maxLine, seed.chunk, []byte(seed.steps))
	}
	f.Fuzz(func(t *testing.T, input []byte, maxLine, chunk uint8, steps []byte) {
		limit, size := int(maxLine%64)+1, int(chunk%32)+1
		for _, policy := range []LongLinePolicy{LongLinesSplit, LongLinesTruncate, LongLinesDrop} {
			s := NewSplitter(limit, policy, size, 0)
			sink := &eventSink{}
			rest := input
			for i := 0; len(rest) > 0; i++ {
				buf := s.Space()
				if len(buf) != size {
					t.Fatalf("%s: Space() = %d bytes, want the chunk size %d", policy, len(buf), size)
				}
				step := len(buf)
				if len(steps) > 0 {
					step = min(step, int(steps[i%len(steps)])%size+1)
				}
				k := copy(buf[:step], rest)
				rest = rest[k:]
				if err := s.Feed(k, sink); err != nil {
					t.Fatal(err)
				}
				if s.n > limit || len(s.buf) > limit+size {
					t.Fatalf("%s: holds %d bytes in a buffer of %d; limit %d, chunk %d", policy, s.n, len(s.buf), limit, size)
				}
			}
			if _, err := s.Flush(sink); err != nil {
				t.Fatal(err)
			}
			checkEvents(t, input, limit, policy, sink.events)
		}
		maxLines := int(chunk/32) + 1
		for _, rule := range fuzzRules {
			for _, policy := range []LongLinePolicy{LongLinesSplit, LongLinesTruncate, LongLinesDrop} {
				m := rule.m
				m.MaxLines = maxLines
				s := NewSplitter(limit, policy, size, 0)
				s.JoinEvents(m)
				sink := &eventSink{}
				rest := input
				for i := 0; len(rest) > 0; i++ {
					buf := s.Space()
					step := len(buf)
					if len(steps) > 0 {
						step = min(step, int(steps[i%len(steps)])%size+1)
					}
					k := copy(buf[:step], rest)
					rest = rest[k:]
					if err := s.Feed(k, sink); err != nil {
						t.Fatal(err)
					}
					if s.n > limit || len(s.buf) > limit+size || cap(s.ev.buf) > limit {
						t.Fatalf("%s %s: holds %d line bytes in a buffer of %d and an event buffer of %d; limit %d, chunk %d",
							rule.name, policy, s.n, len(s.buf), cap(s.ev.buf), limit, size)
					}
				}
				if _, err := s.Flush(sink); err != nil {
					t.Fatal(err)
				}
				checkJoined(t, input, limit, maxLines, policy, rule, sink.events)
			}
		}
	})
}

// fuzzRules are the multiline rules FuzzSplitter tries: short patterns, so that random input
// matches them often.
var fuzzRules = []struct {
	name string
	m    Multiline
}{
	{"start ^S", Multiline{Start: regexp.MustCompile(`^S`)}},
	{"continue ^ ", Multiline{Continue: regexp.MustCompile(`^ `)}},
	{"java", Multiline{Preset: MultilineJava}},
	{"python", Multiline{Preset: MultilinePython}},
}

// checkJoined checks what an event splitter handed over against its input: the spans tile the
// input; a record is its span less the newline it ends with, or, truncated, a prefix of that;
// no record is longer than the limit or holds more than maxLines lines; a record that is not a
// later part of a split event begins where a line begins that the rule says starts an event
// (or at the first byte), and every such line begins a record; and only an event over a limit
// (bytes or lines) is truncated, split or dropped.
func checkJoined(t *testing.T, input []byte, limit, maxLines int, policy LongLinePolicy, rule struct {
	name string
	m    Multiline
}, events []event) {
	t.Helper()
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, %s, limit %d, max lines %d, record %d of %d (%+v): %s\ninput %q", rule.name, policy, limit, maxLines, i, len(events), events[i], fmt.Sprintf(format, args...), input)
	}
	// Where the rule starts events: classify every line as the splitter does (on its first
	// limit bytes), in order, since a rule may have state. A line that joins only if the next
	// one continues it (joinIfNext) may start an event when the next one does not (it does,
	// unless the event before it was long already, which keeps it): optional.
	starts, optional := map[int64]bool{0: true}, map[int64]bool{}
	j := rule.m.joiner()
	maybe := -1 // the offset of the last line, when it answered joinIfNext
	for off := 0; off < len(input); {
		line := input[off:]
		next := len(input)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		ans := j.joins(line[:min(len(line), limit)])
		if maybe >= 0 && ans != joinYes {
			optional[int64(maybe)] = true
		}
		maybe = -1
		switch ans {
		case joinNo:
			starts[int64(off)] = true
		case joinIfNext:
			maybe = off
		}
		off = next
	}
	if maybe >= 0 {
		optional[int64(maybe)] = true
	}
	long := func(event []byte) bool {
		event = bytes.TrimSuffix(event, []byte("\n"))
		return len(event) > limit || bytes.Count(event, []byte("\n"))+1 > maxLines
	}
	var off int64
	begun := map[int64]bool{}
	eventStart := int64(-1) // the first part's start, while a split event's parts come
	for i, e := range events {
		if e.Start != off || e.End <= e.Start || e.End > int64(len(input)) {
			fail(i, "span [%d,%d) does not follow at %d", e.Start, e.End, off)
		}
		off = e.End
		span := input[e.Start:e.End]
		record := bytes.TrimSuffix(span, []byte("\n"))
		if len(e.data) > limit {
			fail(i, "a record of %d bytes", len(e.data))
		}
		if !e.dropped && bytes.Count([]byte(e.data), []byte("\n"))+1 > maxLines {
			fail(i, "a record of %d lines", bytes.Count([]byte(e.data), []byte("\n"))+1)
		}
		if e.Part <= 1 {
			if !starts[e.Start] && !optional[e.Start] {
				fail(i, "an event begins at %d, not at a line that starts one", e.Start)
			}
			begun[e.Start] = true
		}
		switch {
		case e.dropped:
			if policy != LongLinesDrop || !long(span) {
				fail(i, "dropped an event that is not long: %q", span)
			}
		case e.Truncated:
			if policy != LongLinesTruncate || !long(span) || !bytes.HasPrefix(record, []byte(e.data)) {
				fail(i, "truncated %q to %q", span, e.data)
			}
		case e.Part > 0:
			if policy != LongLinesSplit {
				fail(i, "a part under %s", policy)
			}
			if e.data != string(record) {
				fail(i, "part %q is not its span %q", e.data, record)
			}
			if e.Part == 1 {
				eventStart = e.Start
			} else if eventStart < 0 {
				fail(i, "part %d without a first part", e.Part)
			}
			if e.Parts > 0 {
				if e.Parts != e.Part || e.Part < 2 || !long(input[eventStart:e.End]) {
					fail(i, "last part %d of %d of an event of %q", e.Part, e.Parts, input[eventStart:e.End])
				}
				eventStart = -1
			}
		default:
			if eventStart >= 0 {
				fail(i, "a split event's parts ended without a last part")
			}
			if e.data != string(record) {
				fail(i, "event %q is not its span %q", e.data, record)
			}
		}
	}
	if off != int64(len(input)) || eventStart >= 0 {
		t.Fatalf("%s, %s, limit %d: the records end at %d of %d bytes (a split event open: %v)\ninput %q", rule.name, policy, limit, off, len(input), eventStart >= 0, input)
	}
	for start := range starts {
		if start < int64(len(input)) && !begun[start] {
			t.Fatalf("%s, %s, limit %d, max lines %d: no event begins at the start line at %d\ninput %q", rule.name, policy, limit, maxLines, start, input)
		}
	}
}

// checkEvents checks what a splitter handed over against its input (see FuzzSplitter).
func checkEvents(t *testing.T, input []byte, limit int, policy LongLinePolicy, events []event) {
	t.Helper()
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, limit %d, event %d of %d (%+v): %s\ninput %q", policy, limit, i, len(events), events[i], fmt.Sprintf(format, args...), input)
	}
	var off int64
	var whole []byte // split: the parts of the current line so far
	for i, e := range events {
		if e.Start != off || e.End <= e.Start || e.End > int64(len(input)) {
			fail(i, "span [%d,%d) does not follow at %d", e.Start, e.End, off)
		}
		off = e.End
		span := input[e.Start:e.End]
		line := bytes.TrimSuffix(span, []byte("\n"))
		if bytes.IndexByte(line, '\n') >= 0 {
			fail(i, "the span holds a newline before its end")
		}
		if len(e.data) > limit {
			fail(i, "a line of %d bytes", len(e.data))
		}
		switch {
		case e.dropped:
			if policy != LongLinesDrop || len(line) <= limit {
				fail(i, "dropped a line of %d bytes", len(line))
			}
		case e.Truncated:
			if policy != LongLinesTruncate || len(line) <= limit || e.data != string(line[:limit]) {
				fail(i, "truncated a line of %d bytes to %q", len(line), e.data)
			}
		case e.Part > 0:
			if policy != LongLinesSplit || e.Part != len(whole)/limit+1 || len(whole)%limit != 0 {
				fail(i, "part %d after %d bytes of the line", e.Part, len(whole))
			}
			if e.data != string(line) {
				fail(i, "part %q is not its span %q", e.data, line)
			}
			whole = append(whole, line...)
			if e.Parts == 0 {
				if len(e.data) != limit || len(span) != limit {
					fail(i, "an earlier part of %d bytes", len(e.data))
				}
				continue
			}
			if e.Parts != e.Part || len(whole) <= limit {
				fail(i, "last part %d of %d, a line of %d bytes", e.Part, e.Parts, len(whole))
			}
		default:
			if e.data != string(line) {
				fail(i, "line %q is not its span %q", e.data, line)
			}
		}
		if len(whole) > 0 && e.Parts == 0 && e.Part == 0 {
			fail(i, "a split line's parts ended without a last part")
		}
		whole = whole[:0]
	}
	if off != int64(len(input)) {
		t.Fatalf("%s, limit %d: the events end at %d of %d bytes\ninput %q", policy, limit, off, len(input), input)
	}
	if len(whole) > 0 {
		t.Fatalf("%s, limit %d: a split line ended without its last part\ninput %q", policy, limit, input)
	}
}
