package testkit

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxLogRecords bounds what a Logs keeps: a test that logs more asserts on the first ones.
const maxLogRecords = 100000

// LogRecord is one record a Logs kept: its level, message and attributes (those of the
// logger's With first), by key; groups are ignored.
type LogRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]slog.Value
}

// Logs keeps the records logged through its Logger, for tests that assert what was logged
// (and how often), and lets them wait until a record appears. Safe for concurrent use.
type Logs struct {
	mu   sync.Mutex
	recs []LogRecord
	// changed is closed and replaced at every record, to wake Wait.
	changed chan struct{}
}

// NewLogs returns an empty Logs.
func NewLogs() *Logs { return &Logs{changed: make(chan struct{})} }

// Logger returns a logger at debug level whose records l keeps.
func (l *Logs) Logger() *slog.Logger { return slog.New(logsHandler{l: l}) }

// Records returns the records kept so far at level or above whose message contains substr.
func (l *Logs) Records(level slog.Level, substr string) []LogRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogRecord
	for _, r := range l.recs {
		if r.Level >= level && strings.Contains(r.Message, substr) {
			out = append(out, r)
		}
	}
	return out
}

// All returns every record kept so far at level or above.
func (l *Logs) All(level slog.Level) []LogRecord { return l.Records(level, "") }

// Wait waits until a record at level or above whose message contains substr is kept, and
// returns the first such; it fails the test when timeout passes first, showing what was logged.
func (l *Logs) Wait(t testing.TB, timeout time.Duration, level slog.Level, substr string) LogRecord {
	t.Helper()
	return l.WaitCount(t, timeout, level, substr, 1)[0]
}

// WaitCount waits until at least n records at level or above whose messages contain substr
// are kept, and returns them all; it fails the test when timeout passes first.
func (l *Logs) WaitCount(t testing.TB, timeout time.Duration, level slog.Level, substr string, n int) []LogRecord {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if recs := l.Records(level, substr); len(recs) >= n {
			return recs
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d %v records containing %q within %v, want %d; logged:\n%s",
				len(l.Records(level, substr)), level, substr, timeout, n, l.String())
			return nil
		}
	}
}

// String lists the records kept, one a line.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		b.WriteString(r.Level.String())
		b.WriteByte(' ')
		b.WriteString(r.Message)
		for k, v := range r.Attrs {
			b.WriteString(" " + k + "=" + v.String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (l *Logs) add(r LogRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) < maxLogRecords {
		l.recs = append(l.recs, r)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// logsHandler is a Logs' slog.Handler, with the attributes of With.
type logsHandler struct {
	l     *Logs
	attrs []slog.Attr
}

func (h logsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logsHandler) Handle(_ context.Context, r slog.Record) error {
	rec := LogRecord{Level: r.Level, Message: r.Message, Attrs: map[string]slog.Value{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve()
		return true
	})
	h.l.add(rec)
	return nil
}

func (h logsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logsHandler{l: h.l, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...)}
}

func (h logsHandler) WithGroup(string) slog.Handler { return h }
