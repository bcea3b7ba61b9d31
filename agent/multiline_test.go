package agent

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
)

func TestValidateMultiline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		key    string
	}{
		{"unknown preset", func(c *Config) { c.Multiline = "ruby" }, "multiline"},
		{"preset and pattern", func(c *Config) { c.Multiline, c.MultilineStart = "java", "^x" }, "multiline"},
		{"start and continue", func(c *Config) { c.MultilineStart, c.MultilineContinue = "^x", "^y" }, "multiline-continue"},
		{"bad start", func(c *Config) { c.MultilineStart = "^(unclosed" }, "multiline-start"},
		{"bad continue", func(c *Config) { c.MultilineContinue = "[a-" }, "multiline-continue"},
		{"timeout", func(c *Config) { c.Multiline, c.MultilineTimeout = "java", 0 }, "multiline-timeout"},
		{"max lines", func(c *Config) { c.MultilineMaxLines = 0 }, "multiline-max-lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Brokers, c.Topic = []string{"127.0.0.1:9092"}, "t"
			tc.mutate(&c)
			var ce *ConfigError
			found := false
			for _, e := range unjoin(c.Validate()) {
				if errors.As(e, &ce) && ce.Key == tc.key {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %v does not name %s", c.Validate(), tc.key)
			}
		})
	}
	c := DefaultConfig()
	c.Brokers, c.Topic, c.Multiline = []string{"127.0.0.1:9092"}, "t", "python"
	if err := c.Validate(); err != nil {
		t.Fatalf("multiline=python refused: %v", err)
	}
}

// stdin and files share the splitter: the stdin path joins a Java stack trace into one record,
// with the line logged before it (the exception's first line follows its message).
func TestStdinMultiline(t *testing.T) {
	input := "first\njava.lang.Exception: x\n\tat a.b(C.java:1)\nCaused by: y\n\t... 1 more\nlast"
	a := &Agent{cfg: Config{MaxLineBytes: 1000, LongLines: "split", Multiline: "java", MultilineMaxLines: 500, MultilineTimeout: time.Hour}}
	c := &stdinLines{t: t, max: 1000}
	if err := a.readStdin(&a.cfg, strings.NewReader(input), c); err != nil {
		t.Fatal(err)
	}
	want := []string{"first\njava.lang.Exception: x\n\tat a.b(C.java:1)\nCaused by: y\n\t... 1 more", "last"}
	if strings.Join(c.lines, "|") != strings.Join(want, "|") {
		t.Fatalf("records %q\nwant %q", c.lines, want)
	}
}

// lineChan hands the records of a splitter to a test as they come.
type lineChan chan string

func (c lineChan) Line(l filetail.Line) error { c <- string(l.Data); return nil }
func (c lineChan) Dropped(int64, int64) error { return nil }

func nextRecord(t *testing.T, c lineChan, within time.Duration) string {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(within):
		t.Fatalf("no record within %v", within)
		return ""
	}
}

// An event held while a read of the stdin pipe blocks is sent once stdin has been idle for the
// multiline timeout, without the writer closing the pipe or writing the next line.
func TestStdinMultilineIdleFlush(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	a := &Agent{cfg: Config{MaxLineBytes: 1000, LongLines: "split", Multiline: "java", MultilineMaxLines: 500, MultilineTimeout: 200 * time.Millisecond}}
	c := make(lineChan, 10)
	done := make(chan error, 1)
	go func() { done <- a.readStdin(&a.cfg, &stdinFile{f: pr}, c) }()

	start := time.Now()
	if _, err := pw.WriteString("boom\n\tat x\n"); err != nil {
		t.Fatal(err)
	}
	if got := nextRecord(t, c, 5*time.Second); got != "boom\n\tat x" {
		t.Fatalf("first record %q", got)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the event was sent after %v, before the timeout: it did not wait for a continuation", waited)
	}
	// The reader goes on: a continuation written now begins an event of its own (the event
	// before was sent), and the next one ends it.
	if _, err := pw.WriteString("\tat y\nnext\n"); err != nil {
		t.Fatal(err)
	}
	if got := nextRecord(t, c, 5*time.Second); got != "\tat y" {
		t.Fatalf("second record %q", got)
	}
	pw.Close()
	if got := nextRecord(t, c, 5*time.Second); got != "next" {
		t.Fatalf("last record %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A signal (stop) interrupts the read while an event is held and the idle deadline is set: the
// held event is sent and reading ends, although the splitter set its own deadline after the
// stop's.
func TestStdinMultilineStopWhileHeld(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	a := &Agent{cfg: Config{MaxLineBytes: 1000, LongLines: "split", Multiline: "java", MultilineMaxLines: 500, MultilineTimeout: time.Hour}}
	c := make(lineChan, 10)
	sf := &stdinFile{f: pr}
	done := make(chan error, 1)
	go func() { done <- a.readStdin(&a.cfg, sf, c) }()
	if _, err := pw.WriteString("one\nboom\n\tat x\n"); err != nil {
		t.Fatal(err)
	}
	if got := nextRecord(t, c, 5*time.Second); got != "one" {
		t.Fatalf("first record %q", got)
	}
	sf.stop()
	if got := nextRecord(t, c, 5*time.Second); got != "boom\n\tat x" {
		t.Fatalf("held event %q", got)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("reading ended with %v, want the stop's deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading did not stop")
	}
}
