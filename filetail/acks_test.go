package filetail

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testFile(start int64) *File {
	return newFile("test.log", FileID{}, start, &fileCounters{}, &fileCounters{}, new(atomic.Bool), nil, nil, slog.New(slog.DiscardHandler))
}

func TestAckTracker(t *testing.T) {
	type op struct {
		kind byte // 't' track, 'a' ack, 'f' fail
		end  int64
	}
	tests := []struct {
		name          string
		start         int64
		ops           []op
		wantCommitted int64
		wantInFlight  int
	}{
		{name: "nothing tracked", start: 7, wantCommitted: 7},
		{name: "in order", ops: []op{{'t', 10}, {'t', 20}, {'a', 10}, {'a', 20}}, wantCommitted: 20},
		{name: "head unacked holds the prefix", ops: []op{{'t', 10}, {'t', 20}, {'t', 30}, {'a', 20}, {'a', 30}},
			wantCommitted: 0, wantInFlight: 1},
		{name: "out of order completes", ops: []op{{'t', 10}, {'t', 20}, {'t', 30}, {'a', 30}, {'a', 20}, {'a', 10}},
			wantCommitted: 30},
		{name: "gap in the middle", ops: []op{{'t', 10}, {'t', 20}, {'t', 30}, {'a', 10}, {'a', 30}},
			wantCommitted: 10, wantInFlight: 1},
		{name: "duplicate and unknown acks ignored", ops: []op{{'t', 10}, {'t', 20}, {'a', 10}, {'a', 10}, {'a', 15}, {'a', 99}},
			wantCommitted: 10, wantInFlight: 1},
		{name: "track of an old end is a no-op", ops: []op{{'t', 10}, {'t', 10}, {'t', 5}, {'a', 10}}, wantCommitted: 10},
		{name: "resume offset", start: 100, ops: []op{{'t', 50}, {'t', 110}, {'a', 110}}, wantCommitted: 110},
		{name: "fail pins", ops: []op{{'t', 10}, {'t', 20}, {'t', 30}, {'a', 10}, {'f', 20}, {'a', 30}},
			wantCommitted: 10},
		{name: "fail at head pins before it", ops: []op{{'t', 10}, {'f', 10}, {'t', 20}, {'a', 20}}, wantCommitted: 0},
		{name: "after a fail, later lines are counted only", ops: []op{{'t', 10}, {'t', 20}, {'f', 10}, {'t', 30}, {'t', 40}, {'a', 40}},
			wantCommitted: 0, wantInFlight: 2},
		{name: "an earlier fail moves the pin back", ops: []op{{'t', 10}, {'t', 20}, {'t', 30}, {'f', 30}, {'f', 10}, {'a', 20}},
			wantCommitted: 0},
		{name: "a line acked before the fail of an earlier one", ops: []op{{'t', 10}, {'t', 20}, {'a', 20}, {'f', 10}},
			wantCommitted: 0},
		{name: "ack of a failed line is ignored", ops: []op{{'t', 10}, {'f', 10}, {'a', 10}}, wantCommitted: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFile(tt.start)
			for _, o := range tt.ops {
				switch o.kind {
				case 't':
					f.Track(o.end)
				case 'a':
					f.Ack(o.end)
				case 'f':
					f.Fail(o.end, errors.New("boom"))
				}
			}
			if got := f.Committed(); got != tt.wantCommitted {
				t.Errorf("Committed() = %d, want %d", got, tt.wantCommitted)
			}
			if got := f.acks.inFlight(); got != tt.wantInFlight {
				t.Errorf("inFlight() = %d, want %d", got, tt.wantInFlight)
			}
		})
	}
}

// TestAckTrackerRandomOrder acknowledges many lines in random order from several goroutines, as
// producer callbacks do: the committed offset is always an acknowledged prefix, and reaches the
// last line at the end.
func TestAckTrackerRandomOrder(t *testing.T) {
	const lines = 20000
	f := testFile(0)
	ends := make([]int64, lines)
	for i := range ends {
		ends[i] = int64(i+1) * 10
		f.Track(ends[i])
	}
	perm := rand.Perm(lines)
	var acked [lines]atomic.Bool
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < lines; i += workers {
				idx := perm[i]
				acked[idx].Store(true)
				f.Ack(ends[idx])
				// The committed prefix never passes an unacknowledged line.
				if c := f.Committed(); c > 0 && !acked[c/10-1].Load() {
					t.Errorf("committed %d but that line is not acked", c)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := f.Committed(); got != ends[lines-1] {
		t.Fatalf("Committed() = %d, want %d", got, ends[lines-1])
	}
	if got := f.acks.inFlight(); got != 0 {
		t.Fatalf("inFlight() = %d", got)
	}
	if got := f.counts.linesAcked.Load(); got != lines {
		t.Fatalf("acked count = %d", got)
	}
	// The ring gave back the memory of the burst.
	if len(f.acks.ring) > 4*minRing {
		t.Fatalf("ring still has %d entries", len(f.acks.ring))
	}
}

// TestAckTrackerBoundedAfterFail: a failed line pins the offset; lines after it must not grow the
// ring for the rest of the run.
func TestAckTrackerBoundedAfterFail(t *testing.T) {
	f := testFile(0)
	f.Track(1)
	f.Fail(1, errors.New("record too large"))
	for end := int64(2); end < 100000; end++ {
		f.Track(end)
		f.Ack(end)
	}
	if len(f.acks.ring) > minRing {
		t.Fatalf("ring grew to %d entries after a failure", len(f.acks.ring))
	}
	if f.Committed() != 0 || f.counts.linesFailed.Load() != 1 || f.counts.linesAcked.Load() != 99998 {
		t.Fatalf("committed %d failed %d acked %d", f.Committed(), f.counts.linesFailed.Load(), f.counts.linesAcked.Load())
	}
}

// TestIdleSignalQuietWhileASaveIsScheduled: an Ack that leaves its file with nothing in flight
// tells Run, unless Run has a save scheduled already; and never blocks.
func TestIdleSignalQuietWhileASaveIsScheduled(t *testing.T) {
	s := newIdleSignal()
	f := newFile("test.log", FileID{}, 0, &fileCounters{}, &fileCounters{}, new(atomic.Bool), s, nil, slog.New(slog.DiscardHandler))
	f.Track(10)
	f.Ack(10)
	if len(s.ch) != 1 {
		t.Fatal("an Ack that left nothing in flight did not tell Run")
	}
	f.Track(20)
	f.Ack(20) // told already: the signal is pending, the Ack does not block
	<-s.ch
	s.scheduled.Store(true)
	f.Track(30)
	f.Ack(30)
	if len(s.ch) != 0 {
		t.Fatal("an Ack told Run while a save was scheduled")
	}
	s.scheduled.Store(false)
	f.Track(40)
	f.Ack(40)
	if len(s.ch) != 1 {
		t.Fatal("an Ack after the scheduled save did not tell Run")
	}
}

// TestOldestUnacked: the age of the oldest line read and not acknowledged follows the head of
// the unacknowledged lines, keeps growing while nothing is acknowledged (an outage), counts a
// failed line (it pins the checkpoint), and is 0 once every line has its outcome; across the
// inbox's drain and the stamps' 32-bit wrap.
func TestOldestUnacked(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := newReadClock(func() time.Time { return now })
	f := newFile("test.log", FileID{}, 0, &fileCounters{}, &fileCounters{}, new(atomic.Bool), nil, clock, slog.New(slog.DiscardHandler))
	var g *File
	at := func(d time.Duration) {
		now = now.Add(d)
		f.markRead()
		if g != nil {
			g.markRead()
		}
	}
	want := func(d time.Duration) {
		t.Helper()
		if got := f.OldestUnacked(); got != d {
			t.Fatalf("OldestUnacked = %v, want %v", got, d)
		}
	}
	want(0)
	f.Track(10) // read at 0 s
	at(time.Second)
	f.Track(20) // at 1 s
	for i := range inboxSize + 10 {
		f.Track(int64(30 + i)) // at 1 s, through a full inbox
	}
	at(2 * time.Second)
	want(3 * time.Second) // line 10, read 3 s ago
	at(30 * time.Second)
	want(33 * time.Second) // nothing acknowledged: it keeps growing
	f.Ack(20)
	want(33 * time.Second) // the head is still line 10
	f.Ack(10)
	want(32 * time.Second) // then the lines read at 1 s
	for i := range inboxSize + 10 {
		f.Ack(int64(30 + i))
	}
	want(0)

	// A failed line stays unacknowledged: the checkpoint is pinned at it.
	f.Track(1000)
	at(5 * time.Second)
	f.Fail(1000, errors.New("refused"))
	want(5 * time.Second)

	// The stamps wrap at 2^32 ms; the age does not.
	g = newFile("test.log", FileID{}, 0, &fileCounters{}, &fileCounters{}, new(atomic.Bool), nil, clock, slog.New(slog.DiscardHandler))
	now = clock.base.Add(time.Duration(1<<32-500) * time.Millisecond)
	g.markRead()
	g.Track(10)
	at(time.Second)
	if got := g.OldestUnacked(); got != time.Second {
		t.Fatalf("across the wrap: OldestUnacked = %v, want 1s", got)
	}
	if testFile(0).OldestUnacked() != 0 {
		t.Fatal("a File without a read clock has an age")
	}
}
