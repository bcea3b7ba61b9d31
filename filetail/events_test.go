package filetail

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// joinAll feeds input to a fresh event splitter in reads of every size from 1 to the chunk and
// checks that each gives the same records (an event split across reads is the same event), then
// returns them.
func joinAll(t *testing.T, input string, m Multiline, maxLine int, policy LongLinePolicy) []string {
	t.Helper()
	var first []string
	for step := 1; step <= 16; step++ {
		s := NewSplitter(maxLine, policy, 16, 0)
		s.JoinEvents(m)
		sink := &collectSink{}
		for rest := input; len(rest) > 0; {
			buf := s.Space()
			k := copy(buf[:min(step, len(buf))], rest)
			rest = rest[k:]
			if err := s.Feed(k, sink); err != nil {
				t.Fatal(err)
			}
			if len(s.ev.buf) > maxLine || s.n > maxLine {
				t.Fatalf("holds %d event bytes and %d line bytes, more than max %d", len(s.ev.buf), s.n, maxLine)
			}
		}
		if _, err := s.Flush(sink); err != nil {
			t.Fatal(err)
		}
		if sink.maxSeen > maxLine {
			t.Fatalf("a record of %d bytes, more than max %d", sink.maxSeen, maxLine)
		}
		if step == 1 {
			first = sink.got
		} else if !reflect.DeepEqual(sink.got, first) {
			t.Fatalf("reads of %d bytes:\n%s\nreads of 1 byte:\n%s", step, strings.Join(sink.got, "\n"), strings.Join(first, "\n"))
		}
	}
	return first
}

func wantRecords(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const javaTrace = "2026-01-01 12:00:00 ERROR request failed\n" +
	"java.lang.IllegalStateException: boom\n" +
	"\tat com.example.App.handle(App.java:42)\n" +
	"\tat com.example.App.main(App.java:7)\n" +
	"Caused by: java.io.IOException: disk\r\n" +
	"\tat com.example.Disk.write(Disk.java:3)\n" +
	"\t... 2 more\n" +
	"\tSuppressed: java.lang.Exception: close\n" +
	"\t\tat com.example.Disk.close(Disk.java:9)\n" +
	"\t... 1 common frames omitted\n" +
	"2026-01-01 12:00:01 INFO next\n"

// TestMultilineJava: the message, the exception's first line after it and the stack trace are
// one event; the next line starts another.
func TestMultilineJava(t *testing.T) {
	got := joinAll(t, javaTrace, Multiline{Preset: MultilineJava}, 1000, LongLinesSplit)
	last := len(javaTrace) - len("2026-01-01 12:00:01 INFO next\n")
	wantRecords(t, got,
		quoteSpan(javaTrace[:last], 0),
		quoteSpan(javaTrace[last:], last))
}

// The exceptions logback (ThrowableProxyConverter) and log4j2 (%xEx, its default) append to a
// message with their default layouts, without and with "Caused by" and "Suppressed".
var (
	logbackTraces = []string{
		"java.lang.IllegalStateException: boom\n" +
			"\tat com.example.App.handle(App.java:42)\n" +
			"\tat com.example.App.main(App.java:12)\n",
		"java.lang.IllegalStateException: boom\n" +
			"\tat com.example.App.handle(App.java:42)\n" +
			"\tat com.example.App.main(App.java:12)\n" +
			"Caused by: java.io.IOException: disk full\n" +
			"\tat com.example.Store.write(Store.java:7)\n" +
			"\tat com.example.App.handle(App.java:40)\n" +
			"\t... 1 common frames omitted\n",
		"com.example.PaymentDeclined$Insufficient: card 42\n" +
			"\tat com.example.Pay.charge(Pay.java:3)\n" +
			"\tSuppressed: java.lang.RuntimeException: close failed\n" +
			"\t\tat com.example.Store.close(Store.java:9)\n" +
			"\t\t... 1 common frames omitted\n" +
			"Caused by: java.net.SocketTimeoutException\n" +
			"\tat java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288)\n" +
			"\t... 1 common frames omitted\n",
	}
	log4j2Traces = []string{
		"java.lang.IllegalStateException: boom\n" +
			"\tat com.example.App.handle(App.java:42) ~[classes/:?]\n" +
			"\tat com.example.App.main(App.java:12) [classes/:?]\n",
		"java.lang.IllegalStateException: boom\n" +
			"\tat com.example.App.handle(App.java:42) ~[classes/:?]\n" +
			"Caused by: java.io.IOException: disk full\n" +
			"\tat com.example.Store.write(Store.java:7) ~[classes/:?]\n" +
			"\t... 2 more\n",
		"java.lang.IllegalStateException: boom\n" +
			"\tat com.example.App.handle(App.java:42) ~[classes/:?]\n" +
			"\tSuppressed: java.lang.RuntimeException: close failed\n" +
			"\t\tat com.example.Store.close(Store.java:9) ~[classes/:?]\n" +
			"\t\t... 1 more\n" +
			"Caused by: java.io.IOException: disk full\n" +
			"\tat com.example.Store.write(Store.java:7) ~[classes/:?]\n" +
			"\t... 2 more\n",
	}
)

// TestMultilineJavaLayouts: with logback's and log4j2's default layouts, a message logged with
// an exception is one event (the message, the exception's first line, its stack trace and its
// causes and suppressed exceptions), between the lines logged before and after it; so is a
// stack trace printed alone (Throwable.printStackTrace), at the start of a stream.
func TestMultilineJavaLayouts(t *testing.T) {
	for _, layout := range []struct {
		name, before, message, after string
		traces                       []string
	}{
		{"logback", "10:15:29.999 [main] INFO  com.example.App - started\n", "10:15:30.123 [main] ERROR com.example.App - request failed\n",
			"10:15:31.000 [main] INFO  com.example.App - next\n", logbackTraces},
		{"log4j2", "10:15:29.999 [main] INFO  com.example.App - started\n", "10:15:30.123 [main] ERROR com.example.App - request failed\n",
			"10:15:31.000 [main] INFO  com.example.App - next\n", log4j2Traces},
	} {
		for i, trace := range layout.traces {
			t.Run(fmt.Sprintf("%s/%d", layout.name, i), func(t *testing.T) {
				input := layout.before + layout.message + trace + layout.after
				got := joinAll(t, input, Multiline{Preset: MultilineJava}, 4000, LongLinesSplit)
				event := len(layout.before) + len(layout.message) + len(trace)
				wantRecords(t, got,
					quoteSpan(layout.before, 0),
					quoteSpan(input[len(layout.before):event], len(layout.before)),
					quoteSpan(layout.after, event))
				alone := joinAll(t, trace+layout.after, Multiline{Preset: MultilineJava}, 4000, LongLinesSplit)
				wantRecords(t, alone, quoteSpan(trace, 0), quoteSpan(layout.after, len(trace)))
			})
		}
	}
}

// TestMultilineJavaThrowableShapeAlone: a line shaped like an exception's first line joins the
// event before it only when a frame follows it: without one (another log line next, or the end
// of the input) it is an event of its own, and so are the lines around it.
func TestMultilineJavaThrowableShapeAlone(t *testing.T) {
	input := "12:00 INFO config loaded\ncom.example.Settings: reloaded\n12:01 INFO next\njava.lang.String\n"
	got := joinAll(t, input, Multiline{Preset: MultilineJava}, 1000, LongLinesSplit)
	wantRecords(t, got,
		`"12:00 INFO config loaded" 0-25`,
		`"com.example.Settings: reloaded" 25-56`,
		`"12:01 INFO next" 56-72`,
		`"java.lang.String" 72-89`)
	// Two lines of that shape in a row, then a frame: the second is the exception.
	input = "12:00 ERROR failed\ncom.example.Note: x\njava.lang.IllegalStateException: boom\n\tat a.B.c(B.java:1)\n"
	got = joinAll(t, input, Multiline{Preset: MultilineJava}, 1000, LongLinesSplit)
	wantRecords(t, got,
		`"12:00 ERROR failed" 0-19`,
		quoteSpan("com.example.Note: x\njava.lang.IllegalStateException: boom\n\tat a.B.c(B.java:1)\n", 19))
}

// quoteSpan is a record of the lines s (ending with a newline) from off, as collectSink writes it.
func quoteSpan(s string, off int) string {
	return (&collectSink{}).format(Line{Data: []byte(strings.TrimSuffix(s, "\n")), Start: int64(off), End: int64(off + len(s))})
}

func TestMultilinePython(t *testing.T) {
	trace := "Traceback (most recent call last):\n" +
		"  File \"app.py\", line 3, in <module>\n" +
		"    main()\n" +
		"  File \"app.py\", line 2, in main\n" +
		"\traise ValueError(\"bad\")\n" +
		"ValueError: bad\n"
	input := "INFO:root:start\n  indented outside a traceback\n" + trace + "after\n" +
		"Traceback (most recent call last):\n  File \"x\", line 1\n2026 not the exception\n"
	got := joinAll(t, input, Multiline{Preset: MultilinePython}, 1000, LongLinesSplit)
	off := len("INFO:root:start\n  indented outside a traceback\n")
	wantRecords(t, got,
		`"INFO:root:start" 0-16`,
		`"  indented outside a traceback" 16-47`,
		quoteSpan(trace, off),
		quoteSpan("after\n", off+len(trace)),
		quoteSpan("Traceback (most recent call last):\n  File \"x\", line 1\n", off+len(trace)+6),
		quoteSpan("2026 not the exception\n", off+len(trace)+6+54))
}

func TestMultilineCustom(t *testing.T) {
	input := "pre\n  orphan\n2026 a\n  a1\n  a2\n2026 b\n2026 c\n  c1"
	starts := joinAll(t, input, Multiline{Start: regexp.MustCompile(`^\d{4} `)}, 1000, LongLinesSplit)
	continues := joinAll(t, input, Multiline{Continue: regexp.MustCompile(`^\s`)}, 1000, LongLinesSplit)
	want := []string{`"pre\n  orphan" 0-13`, `"2026 a\n  a1\n  a2" 13-30`, `"2026 b" 30-37`, `"2026 c\n  c1" 37-48`}
	wantRecords(t, starts, want...)
	wantRecords(t, continues, want...)
}

// The policy applies to the whole event: by bytes (the limit is 10) and by lines (at most 3).
func TestMultilineLongEvents(t *testing.T) {
	cont := Multiline{Continue: regexp.MustCompile(`^ `), MaxLines: 3}
	for _, tc := range []struct {
		name   string
		input  string
		policy LongLinePolicy
		want   []string
	}{
		{"bytes split", "abcdef\n gh\n ij\nk\n", LongLinesSplit, []string{
			`"abcdef\n gh" 0-11 part 1/0`, `" ij" 11-15 part 2/2`, `"k" 15-17`}},
		{"bytes split mid-line", "abcdefgh\n ijklmnopqrstuvwxyz\nk\n", LongLinesSplit, []string{
			`"abcdefgh\n " 0-10 part 1/0`, `"ijklmnopqr" 10-20 part 2/0`, `"stuvwxyz" 20-29 part 3/3`, `"k" 29-31`}},
		{"bytes split at the newline", "abcdefghij\n k\n", LongLinesSplit, []string{
			`"abcdefghij" 0-11 part 1/0`, `" k" 11-14 part 2/2`}},
		{"bytes truncate", "abcdef\n gh\n ij\nk\n", LongLinesTruncate, []string{
			`"abcdef\n gh" 0-15 trunc`, `"k" 15-17`}},
		{"bytes drop", "abcdef\n gh\n ij\nk\n", LongLinesDrop, []string{`dropped 0-15`, `"k" 15-17`}},
		{"long first line", "abcdefghijklmnopqrstuvwxyz\n 1\nk\n", LongLinesSplit, []string{
			`"abcdefghij" 0-10 part 1/0`, `"klmnopqrst" 10-20 part 2/0`, `"uvwxyz\n 1" 20-30 part 3/3`, `"k" 30-32`}},
		{"lines split", "a\n b\n c\n d\n e\nk\n", LongLinesSplit, []string{
			`"a\n b\n c" 0-8 part 1/0`, `" d\n e" 8-14 part 2/2`, `"k" 14-16`}},
		{"lines truncate", "a\n b\n c\n d\n e\nk\n", LongLinesTruncate, []string{`"a\n b\n c" 0-14 trunc`, `"k" 14-16`}},
		{"lines drop", "a\n b\n c\n d\n e\nk\n", LongLinesDrop, []string{`dropped 0-14`, `"k" 14-16`}},
		{"three lines are whole", "a\n b\n c\nk\n", LongLinesDrop, []string{`"a\n b\n c" 0-8`, `"k" 8-10`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRecords(t, joinAll(t, tc.input, cont, 10, tc.policy), tc.want...)
		})
	}
}

// An event waits for the line after it; FlushEvent (the idle timeout) hands it over, but not
// while a line has started after it: that line may still continue it.
func TestMultilineFlushEvent(t *testing.T) {
	s := NewSplitter(100, LongLinesSplit, 64, 0)
	s.JoinEvents(Multiline{Preset: MultilineJava})
	sink := &collectSink{}
	feed := func(b string) {
		t.Helper()
		if err := s.Feed(copy(s.Space(), b), sink); err != nil {
			t.Fatal(err)
		}
	}
	feed("x\n\tat a\n")
	if len(sink.got) != 0 || !s.EventWaiting() || s.Pending() {
		t.Fatalf("got %q, waiting %v, pending %v; want an event waiting", sink.got, s.EventWaiting(), s.Pending())
	}
	feed("\tat b") // no newline yet
	if ok, _ := s.FlushEvent(sink); ok || s.EventWaiting() {
		t.Fatalf("FlushEvent handed over an event while a line had started: %q", sink.got)
	}
	feed("\n")
	if ok, err := s.FlushEvent(sink); !ok || err != nil {
		t.Fatalf("FlushEvent = %v, %v", ok, err)
	}
	wantRecords(t, sink.got, `"x\n\tat a\n\tat b" 0-14`)
	feed("\tat c\n") // after a flushed event, a continuation line begins an event of its own
	if ok, _ := s.Flush(sink); !ok {
		t.Fatal("Flush found nothing")
	}
	wantRecords(t, sink.got, `"x\n\tat a\n\tat b" 0-14`, `"\tat c" 14-20`)
	if ok, _ := s.Flush(sink); ok {
		t.Fatal("a second Flush found something")
	}
}

func TestMultilineValidate(t *testing.T) {
	re := regexp.MustCompile(`x`)
	for _, m := range []Multiline{
		{Preset: "ruby"},
		{Start: re, Continue: re},
		{Preset: MultilineJava, Start: re},
		{Start: re, MaxLines: -1},
	} {
		if err := m.validate(); err == nil {
			t.Errorf("%+v: no error", m)
		}
	}
}

// An event far over the byte limit (5 MiB of continuation lines, limit 1 MiB) costs at most the
// limit in the event buffer and the limit plus a read in the line buffer, under every policy;
// split sends all of it.
func TestMultilineHugeEventBoundedMemory(t *testing.T) {
	const limit, chunk = 1 << 20, 64 << 10
	var b strings.Builder
	b.WriteString("start\n")
	for b.Len() < 5<<20 {
		b.WriteString(" continued " + strings.Repeat("x", 500) + "\n")
	}
	event := b.String()
	input := event + "next\n"
	for _, policy := range []LongLinePolicy{LongLinesSplit, LongLinesTruncate, LongLinesDrop} {
		t.Run(string(policy), func(t *testing.T) {
			s := NewSplitter(limit, policy, chunk, 0)
			s.JoinEvents(Multiline{Continue: regexp.MustCompile(`^ `), MaxLines: 1 << 20})
			var total, records, newlineEnds int
			sink := &funcSink{line: func(l Line) {
				total += len(l.Data)
				records++
				if input[l.End-1] == '\n' {
					newlineEnds++ // a record leaves out the newline its span ends with
				}
			}}
			for rest := input; len(rest) > 0; {
				k := copy(s.Space(), rest)
				rest = rest[k:]
				if err := s.Feed(k, sink); err != nil {
					t.Fatal(err)
				}
				if cap(s.ev.buf) > limit || len(s.buf) > limit+chunk {
					t.Fatalf("event buffer %d, line buffer %d: over the limit %d (+ a read)", cap(s.ev.buf), len(s.buf), limit)
				}
			}
			if _, err := s.Flush(sink); err != nil {
				t.Fatal(err)
			}
			switch policy {
			case LongLinesSplit:
				// Every byte, but the newline that ends a record's span.
				if total+newlineEnds != len(input) || records < 6 {
					t.Fatalf("split sent %d bytes in %d records (%d ending at a newline) of %d", total, records, newlineEnds, len(input))
				}
			case LongLinesTruncate:
				if records != 2 || total != limit+len("next") {
					t.Fatalf("truncate sent %d records of %d bytes", records, total)
				}
			case LongLinesDrop:
				if records != 1 || total != len("next") || sink.dropped != 1 {
					t.Fatalf("drop sent %d records of %d bytes, dropped %d", records, total, sink.dropped)
				}
			}
		})
	}
}

type funcSink struct {
	line    func(Line)
	dropped int
}

func (f *funcSink) Line(l Line) error          { f.line(l); return nil }
func (f *funcSink) Dropped(int64, int64) error { f.dropped++; return nil }

// TestMultilineJavaFlushTentative: an event whose last line joined only if a frame follows is
// handed over, when the source goes quiet first, as two events: the line was not continued.
func TestMultilineJavaFlushTentative(t *testing.T) {
	s := NewSplitter(100, LongLinesSplit, 64, 0)
	s.JoinEvents(Multiline{Preset: MultilineJava})
	sink := &collectSink{}
	if err := s.Feed(copy(s.Space(), "12:00 INFO a\ncom.example.B: c\n"), sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.got) != 0 || !s.EventWaiting() {
		t.Fatalf("got %q, waiting %v; want the event held", sink.got, s.EventWaiting())
	}
	if ok, err := s.FlushEvent(sink); !ok || err != nil {
		t.Fatalf("FlushEvent = %v, %v", ok, err)
	}
	wantRecords(t, sink.got, `"12:00 INFO a" 0-13`, `"com.example.B: c" 13-30`)
}

// TestMultilineJavaBlankLineAfterTrace: one empty line right after a stack trace ends it and is
// part of its event (log4j2's default configuration prints one after every exception); an
// empty line anywhere else, and a second one, is an event of its own.
func TestMultilineJavaBlankLineAfterTrace(t *testing.T) {
	input := "a\njava.lang.X: y\n\tat b\n\n\nc\n\nd\n"
	got := joinAll(t, input, Multiline{Preset: MultilineJava}, 1000, LongLinesSplit)
	wantRecords(t, got,
		quoteSpan("a\njava.lang.X: y\n\tat b\n\n", 0),
		quoteSpan("\n", 24),
		quoteSpan("c\n", 25),
		quoteSpan("\n", 27),
		quoteSpan("d\n", 28))
}
