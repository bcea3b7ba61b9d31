package filetail

import (
	"os"
	"strings"
	"testing"
	"time"
)

// writtenSink keeps each line's text and Written.
type writtenSink struct {
	lines   []string
	written []int64
}

func (w *writtenSink) Line(l Line) error {
	w.lines, w.written = append(w.lines, string(l.Data)), append(w.written, l.Written)
	return nil
}
func (*writtenSink) Dropped(int64, int64) error { return nil }

// A tailed file's lines carry its modification time at the stat before their read: lines
// already in the file when it is found, the time it was last written.
func TestTailerLinesCarryTheFileModificationTime(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "old one\nold two\n")
	mod := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "the first lines", func() bool { return r.count() == 2 })
	appendLog(t, path, "new\n")
	waitFor(t, "the appended line", func() bool { return r.count() == 3 })
	rt.stopOK(t)
	lines := r.snapshot()
	for _, l := range lines[:2] {
		if l.Written != mod.UnixNano() {
			t.Fatalf("line %q written %v, want the file's modification time %v", l.data, time.Unix(0, l.Written), mod)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines[2].Written; got <= mod.UnixNano() || got > fi.ModTime().UnixNano() || got > lines[2].at.UnixNano() {
		t.Fatalf("appended line written %v: want after %v, at most the file's last write %v and its read %v",
			time.Unix(0, got), mod, fi.ModTime(), lines[2].at)
	}
}

// ReadLines (stdin) stamps each line with the time of the read that completed it; an event
// carries its first line's.
func TestReadLinesStampsTheReadTime(t *testing.T) {
	before := time.Now().UnixNano()
	s := NewSplitter(1000, LongLinesSplit, 64, 0)
	sink := &writtenSink{}
	if err := s.ReadLines(strings.NewReader("a\nb\n"), sink); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixNano()
	if len(sink.written) != 2 {
		t.Fatalf("lines %q", sink.lines)
	}
	for i, w := range sink.written {
		if w < before || w > after {
			t.Fatalf("line %q written %d, want within the read [%d, %d]", sink.lines[i], w, before, after)
		}
	}

	ev := NewSplitter(1000, LongLinesSplit, 64, 0)
	ev.JoinEvents(Multiline{Preset: MultilineJava, Timeout: time.Second})
	esink := &writtenSink{}
	feed := func(text string, written int64) {
		ev.SetWritten(written)
		k := copy(ev.Space(), text)
		if err := ev.Feed(k, esink); err != nil {
			t.Fatal(err)
		}
	}
	feed("Exception in thread main\n", 100)
	feed("\tat a.b(C.java:1)\n", 200)
	feed("next\n", 300)
	if _, err := ev.Flush(esink); err != nil {
		t.Fatal(err)
	}
	if len(esink.written) != 2 || esink.written[0] != 100 || esink.written[1] != 300 {
		t.Fatalf("events %q written %v, want the first line's time for each: [100 300]", esink.lines, esink.written)
	}
}
