package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

// TestReadAheadBounds: many takers and givers never hold more than the limit at once, every
// take is eventually granted, and the budget ends empty.
func TestReadAheadBounds(t *testing.T) {
	const limit, takers, each = 1000, 4, 2000
	r := newReadAhead(limit)
	var held, peak atomic.Int64
	gives := make(chan int64, takers*each)
	var wg sync.WaitGroup
	for range takers {
		wg.Go(func() {
			for i := range each {
				n := int64(1 + i%300)
				if err := r.take(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				h := held.Add(n)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				gives <- n
			}
		})
	}
	done := make(chan struct{})
	go func() { // the delivery callbacks: one goroutine, as the producer's sender
		defer close(done)
		for range takers * each {
			n := <-gives
			held.Add(-n)
			r.give(n)
		}
	}()
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("takes and gives did not finish: a waiter was not woken")
	}
	if p := peak.Load(); p > limit {
		t.Errorf("peak %d bytes held, limit %d", p, limit)
	}
	if u := r.used.Load(); u != 0 {
		t.Errorf("%d bytes still taken after every give", u)
	}
}

// TestReadAheadLargeAndCancel: a take larger than the limit goes alone; a waiting take ends
// with its context.
func TestReadAheadLargeAndCancel(t *testing.T) {
	r := newReadAhead(100)
	if err := r.take(context.Background(), 500); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.take(ctx, 10) }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("take after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting take did not end with its context")
	}
	r.give(500)
	if err := r.take(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
}

func producerConfigForTest(batch int, buffer int64) producer.Config {
	pc := producer.DefaultConfig()
	pc.BatchSize, pc.BufferMemory = batch, buffer
	return pc
}

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// TestReadAheadLogsLongPauses: a take that waits longer than warnAfter logs that reading is
// paused, once however many takers wait, and the end of that pause is logged once; a short
// wait logs nothing.
func TestReadAheadLogsLongPauses(t *testing.T) {
	rec := &logRecorder{}
	r := newReadAhead(100)
	r.log, r.warnAfter = slog.New(rec), 50*time.Millisecond
	if err := r.take(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	// A short pause: given back before warnAfter.
	short := make(chan error, 1)
	go func() { short <- r.take(context.Background(), 100) }()
	waitFor(t, "the taker to wait", func() bool { return r.waiting.Load() })
	r.give(100)
	if err := <-short; err != nil {
		t.Fatal(err)
	}
	// A long pause, with two takers waiting.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- r.take(context.Background(), 60) }()
	}
	waitFor(t, "the pause warning", func() bool { return rec.count("reading paused") > 0 })
	time.Sleep(3 * r.warnAfter) // room for a wrong second warning (the assertion below); not a wait for an outcome
	if n := rec.count("reading paused"); n != 1 {
		t.Fatalf("%d pause warnings with two takers waiting, want 1", n)
	}
	r.give(100)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	r.give(60)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if p, res := rec.count("reading paused"), rec.count("reading resumed"); p != 1 || res != 1 {
		t.Fatalf("%d pause and %d resume messages, want 1 and 1: %v", p, res, rec.msgs)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReadAheadBalancedWithEnvelope: the read-ahead budget takes and gives back the same bytes
// when the record's value is larger than the line (an envelope): after every line is
// acknowledged nothing is held, and the budget was never passed. It took the line's length
// and gave back the value's, so the budget drifted below zero and stopped bounding anything.
func TestReadAheadBalancedWithEnvelope(t *testing.T) {
	lineData := []byte(`{"n":"012345678901234567890123456789012345678"}` + "\n") // 50 bytes with the newline
	for _, tc := range []struct {
		name, format string
		exactlyOnce  bool
	}{
		{"json", linerecord.FormatJSON, false},
		{"json-merge", linerecord.FormatJSONMerge, false},
		{"json exactly-once", linerecord.FormatJSON, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const lines = 1000
			a, _, _ := newFileAgent(t, 3, bytes.Repeat(lineData, lines), func(cfg *Config) {
				cfg.MaxInFlightBytes, cfg.Format, cfg.ExactlyOnce = 2000, tc.format, tc.exactlyOnce
				cfg.CommitInterval = 100 * time.Millisecond
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.RunTail(ctx) }()
			var peak, low int64
			waitForFile(t, a, 30*time.Second, func(fs filetail.FileStats) bool {
				u := a.readAhead.used.Load()
				peak, low = max(peak, u), min(low, u)
				return fs.LinesAcked == lines
			})
			cancel()
			if err := <-done; !errors.Is(err, ErrInterrupted) {
				t.Fatalf("RunTail: %v", err)
			}
			if u := a.readAhead.used.Load(); u != 0 || low < 0 {
				t.Errorf("read-ahead holds %d bytes after every line was acknowledged (lowest %d), want 0", u, low)
			}
			if peak > 2000 {
				t.Errorf("%d bytes held at once, budget 2000", peak)
			}
		})
	}
}
