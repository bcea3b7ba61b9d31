package filetail

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// collectSink records what a Splitter produces; data is copied (the splitter reuses it).
type collectSink struct {
	got     []string
	maxSeen int
	failAt  int // return errStop at the failAt-th line (1-based), 0: never
}

var errStop = errors.New("stop")

func (c *collectSink) Line(l Line) error {
	c.maxSeen = max(c.maxSeen, len(l.Data))
	c.got = append(c.got, c.format(l))
	if c.failAt > 0 && len(c.got) == c.failAt {
		return errStop
	}
	return nil
}

// format is how a line is recorded.
func (*collectSink) format(l Line) string {
	s := fmt.Sprintf("%q %d-%d", l.Data, l.Start, l.End)
	if l.Truncated {
		s += " trunc"
	}
	if l.Part > 0 {
		s += fmt.Sprintf(" part %d/%d", l.Part, l.Parts)
	}
	return s
}

func (c *collectSink) Dropped(start, end int64) error {
	c.got = append(c.got, fmt.Sprintf("dropped %d-%d", start, end))
	return nil
}

// splitAll feeds input to a fresh splitter in reads of at most step bytes, then flushes if asked.
func splitAll(t *testing.T, input string, maxLine int, policy LongLinePolicy, step int, flush bool) *collectSink {
	t.Helper()
	s := NewSplitter(maxLine, policy, 8, 0)
	sink := &collectSink{}
	for rest := input; len(rest) > 0; {
		buf := s.Space()
		if len(buf) != 8 {
			t.Fatalf("space() = %d bytes, want the chunk size 8", len(buf))
		}
		k := copy(buf[:min(step, len(buf))], rest)
		rest = rest[k:]
		if err := s.Feed(k, sink); err != nil {
			t.Fatal(err)
		}
		if s.n > maxLine {
			t.Fatalf("splitter holds %d bytes, more than max %d", s.n, maxLine)
		}
		if len(s.buf) > maxLine+8 {
			t.Fatalf("buffer grew to %d bytes, more than max+chunk %d", len(s.buf), maxLine+8)
		}
	}
	if flush {
		if _, err := s.Flush(sink); err != nil {
			t.Fatal(err)
		}
	}
	if sink.maxSeen > maxLine {
		t.Fatalf("handler saw %d bytes, more than max %d", sink.maxSeen, maxLine)
	}
	return sink
}

func TestLineSplitter(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		max    int
		policy LongLinePolicy
		flush  bool
		want   []string
	}{
		{name: "lines", input: "a\nbc\n", max: 5, want: []string{`"a" 0-2`, `"bc" 2-5`}},
		{name: "empty lines", input: "\n\nx\n\n", max: 5, want: []string{`"" 0-1`, `"" 1-2`, `"x" 2-4`, `"" 4-5`}},
		{name: "crlf kept", input: "ab\r\n\r\n", max: 5, want: []string{`"ab\r" 0-4`, `"\r" 4-6`}},
		{name: "bytes pass as they are", input: "\x00\xff\t\n", max: 5, want: []string{`"\x00\xff\t" 0-4`}},
		{name: "partial not sent without flush", input: "ab\ncd", max: 5, want: []string{`"ab" 0-3`}},
		{name: "partial flushed", input: "ab\ncd", max: 5, flush: true, want: []string{`"ab" 0-3`, `"cd" 3-5`}},
		{name: "nothing to flush", input: "ab\n", max: 5, flush: true, want: []string{`"ab" 0-3`}},
		{name: "exactly max is not long", input: "abcde\n", max: 5, policy: LongLinesTruncate, want: []string{`"abcde" 0-6`}},
		{name: "truncate", input: "abcdefghijklmnopqrstuvwxyz\nok\n", max: 5, policy: LongLinesTruncate,
			want: []string{`"abcde" 0-27 trunc`, `"ok" 27-30`}},
		{name: "truncate max+1", input: "abcdef\nok\n", max: 5, policy: LongLinesTruncate,
			want: []string{`"abcde" 0-7 trunc`, `"ok" 7-10`}},
		{name: "truncate partial flushed", input: "x\nabcdefghij", max: 5, policy: LongLinesTruncate, flush: true,
			want: []string{`"x" 0-2`, `"abcde" 2-12 trunc`}},
		{name: "drop", input: "x\nabcdefghijklmnopqrstuvwxyz\nok\n", max: 5, policy: LongLinesDrop,
			want: []string{`"x" 0-2`, "dropped 2-29", `"ok" 29-32`}},
		{name: "drop partial flushed", input: "abcdefghij", max: 5, policy: LongLinesDrop, flush: true,
			want: []string{"dropped 0-10"}},
		{name: "split", input: "abcdefghijklm\nok\n", max: 5, policy: LongLinesSplit,
			want: []string{`"abcde" 0-5 part 1/0`, `"fghij" 5-10 part 2/0`, `"klm" 10-14 part 3/3`, `"ok" 14-17`}},
		{name: "split exact multiple", input: "abcdefghij\nok\n", max: 5, policy: LongLinesSplit,
			want: []string{`"abcde" 0-5 part 1/0`, `"fghij" 5-11 part 2/2`, `"ok" 11-14`}},
		{name: "split max+1", input: "abcdef\n", max: 5, policy: LongLinesSplit,
			want: []string{`"abcde" 0-5 part 1/0`, `"f" 5-7 part 2/2`}},
		{name: "split partial flushed", input: "abcdefg", max: 5, policy: LongLinesSplit, flush: true,
			want: []string{`"abcde" 0-5 part 1/0`, `"fg" 5-7 part 2/2`}},
		{name: "max 1", input: "abc\n\nd\n", max: 1, policy: LongLinesSplit,
			want: []string{`"a" 0-1 part 1/0`, `"b" 1-2 part 2/0`, `"c" 2-4 part 3/3`, `"" 4-5`, `"d" 5-7`}},
	}
	for _, tt := range tests {
		if tt.policy == "" {
			tt.policy = LongLinesSplit
		}
		// Every read size must give the same lines: chunk boundaries are invisible.
		for _, step := range []int{1, 2, 3, 5, 8} {
			t.Run(fmt.Sprintf("%s/step%d", tt.name, step), func(t *testing.T) {
				got := splitAll(t, tt.input, tt.max, tt.policy, step, tt.flush).got
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
				}
			})
		}
	}
}

// TestLineSplitterContinuesAfterFlush pins that a flushed partial line is not sent again when the
// file grows: what follows is a new line.
func TestLineSplitterContinuesAfterFlush(t *testing.T) {
	s := NewSplitter(10, LongLinesSplit, 8, 0)
	sink := &collectSink{}
	feed := func(data string) {
		k := copy(s.Space(), data)
		if err := s.Feed(k, sink); err != nil {
			t.Fatal(err)
		}
	}
	feed("abc")
	if _, err := s.Flush(sink); err != nil {
		t.Fatal(err)
	}
	feed("def\ng\n")
	want := []string{`"abc" 0-3`, `"def" 3-7`, `"g" 7-9`}
	if !reflect.DeepEqual(sink.got, want) {
		t.Fatalf("got %q, want %q", sink.got, want)
	}
}

func TestLineSplitterSinkError(t *testing.T) {
	s := NewSplitter(10, LongLinesSplit, 8, 0)
	sink := &collectSink{failAt: 1}
	k := copy(s.Space(), "a\nb\n")
	if err := s.Feed(k, sink); !errors.Is(err, errStop) {
		t.Fatalf("feed error = %v, want the sink's", err)
	}
	if len(sink.got) != 1 {
		t.Fatalf("lines after the error: %q", sink.got)
	}
}

// TestLineSplitterHugeLine streams a 50 MB line through each policy: the splitter's memory stays
// at max + one chunk and no line handed over is longer than max.
func TestLineSplitterHugeLine(t *testing.T) {
	const maxLine, chunk, size = 1 << 20, 64 << 10, 50 << 20
	for _, policy := range []LongLinePolicy{LongLinesTruncate, LongLinesSplit, LongLinesDrop} {
		t.Run(string(policy), func(t *testing.T) {
			s := NewSplitter(maxLine, policy, chunk, 0)
			sink := &countSink{}
			for fed := 0; fed < size; {
				buf := s.Space()
				k := min(len(buf), size-fed)
				for i := range buf[:k] {
					buf[i] = 'x'
				}
				fed += k
				if err := s.Feed(k, sink); err != nil {
					t.Fatal(err)
				}
				if len(s.buf) > maxLine+chunk {
					t.Fatalf("buffer grew to %d", len(s.buf))
				}
			}
			k := copy(s.Space(), "\nok\n")
			if err := s.Feed(k, sink); err != nil {
				t.Fatal(err)
			}
			if sink.maxSeen > maxLine {
				t.Fatalf("a line of %d bytes reached the handler", sink.maxSeen)
			}
			want := map[LongLinePolicy][2]int{ // lines, dropped
				LongLinesTruncate: {2, 0}, LongLinesSplit: {size/maxLine + 1, 0}, LongLinesDrop: {1, 1},
			}[policy]
			if sink.lines != want[0] || sink.drops != want[1] {
				t.Fatalf("lines %d dropped %d, want %v", sink.lines, sink.drops, want)
			}
			if sink.bytes != map[LongLinePolicy]int{LongLinesTruncate: maxLine + 2, LongLinesSplit: size + 2, LongLinesDrop: 2}[policy] {
				t.Fatalf("handed over %d bytes", sink.bytes)
			}
			if sink.lastEnd != size+4 {
				t.Fatalf("last end %d, want %d", sink.lastEnd, size+4)
			}
		})
	}
}

type countSink struct {
	lines, drops, bytes, maxSeen int
	lastEnd                      int64
}

func (c *countSink) Line(l Line) error {
	c.lines++
	c.bytes += len(l.Data)
	c.maxSeen = max(c.maxSeen, len(l.Data))
	c.lastEnd = l.End
	return nil
}

func (c *countSink) Dropped(_, end int64) error {
	c.drops++
	c.lastEnd = end
	return nil
}
