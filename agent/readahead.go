package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMinInFlightBytes is the floor of the default --max-in-flight-bytes.
const DefaultMinInFlightBytes = 2 << 20

// readAhead bounds the bytes of file lines read and not yet acknowledged, across every followed
// file: a follower takes its line's record value size before sending it (the line, or the
// envelope --format made of it) and its delivery callback gives the same number back; a
// follower that finds the budget spent waits, so reading pauses. The files are the
// durable buffer, so holding more of them in memory than keeps the brokers busy buys nothing
// but memory (each buffered 100-byte line costs about 230 bytes of heap: see DESIGN.md).
//
// take is lock-free while the budget has room; only a follower that must wait, and a give that
// may wake it, take the mutex.
//
// Waiting is the normal state at full speed (the brokers set the pace), so it is not logged;
// a wait longer than warnAfter (max.block.ms, where the producer would report its own buffer
// full) is, once per pause, and so is the end of the pause (when the last take that waited
// that long gets its bytes).
type readAhead struct {
	limit   atomic.Int64 // raised once the topic's partitions are known (Agent.sizeReadAhead)
	used    atomic.Int64
	waiting atomic.Bool // a follower is, or is about to be, waiting on wake

	mu   sync.Mutex
	wake chan struct{} // closed by give when bytes come back while someone waits

	log       *slog.Logger // nil: pauses are not logged
	warnAfter time.Duration
	warned    atomic.Bool  // a pause was logged and its end not yet
	long      atomic.Int32 // takes waiting for longer than warnAfter: the pause ends with the last
}

func newReadAhead(limit int64) *readAhead {
	r := &readAhead{}
	r.limit.Store(limit)
	return r
}

// setLimit changes the limit; a take waiting for room sees a higher one at the next give.
func (r *readAhead) setLimit(limit int64) { r.limit.Store(limit) }

// take reserves n bytes, waiting while they would exceed the limit (a line larger than the
// limit goes when nothing else is in flight). It returns ctx's error if ctx ends first.
func (r *readAhead) take(ctx context.Context, n int64) error {
	if u := r.used.Add(n); u <= r.limit.Load() || u == n {
		return nil
	}
	r.used.Add(-n)
	var waitStart time.Time // set when this take first waits
	var long bool           // this take waited longer than warnAfter (counted in r.long)
	r.mu.Lock()
	for {
		// Announce the wait before trying again: a give after this sees it and wakes us; a give
		// before it freed bytes the next try sees.
		r.waiting.Store(true)
		if u := r.used.Add(n); u <= r.limit.Load() || u == n {
			r.mu.Unlock()
			if long && r.long.Add(-1) == 0 && r.warned.CompareAndSwap(true, false) {
				r.log.Info("reading resumed", "paused_for", time.Since(waitStart).Round(time.Millisecond))
			}
			return nil
		}
		if r.used.Add(-n) == 0 {
			continue // nothing in flight to wait for: another taker's passing try failed ours
		}
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake := r.wake
		r.mu.Unlock()
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		if err := r.wait(ctx, wake, waitStart, &long); err != nil {
			if long && r.long.Add(-1) == 0 {
				r.warned.Store(false) // the run is ending: no resume to report
			}
			return err
		}
		r.mu.Lock()
	}
}

// wait waits for wake or the end of ctx. A take whose waits have lasted warnAfter since
// waitStart (its first) becomes long, and the first long take of a pause logs that reading is
// paused.
func (r *readAhead) wait(ctx context.Context, wake <-chan struct{}, waitStart time.Time, long *bool) error {
	if r.log != nil && r.warnAfter > 0 && !*long {
		t := time.NewTimer(r.warnAfter - time.Since(waitStart))
		defer t.Stop()
		select {
		case <-wake:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			*long = true
			r.long.Add(1)
			if r.warned.CompareAndSwap(false, true) {
				r.log.Warn("reading paused: lines read and not yet acknowledged fill --max-in-flight-bytes; brokers are slow or down",
					"in_flight_bytes", r.used.Load(), "max_in_flight_bytes", r.limit.Load(), "paused_for", time.Since(waitStart).Round(time.Millisecond))
			}
		}
	}
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give returns n bytes taken before, waking the followers waiting for room.
func (r *readAhead) give(n int64) {
	r.used.Add(-n)
	if !r.waiting.Load() {
		return
	}
	r.mu.Lock()
	r.waiting.Store(false) // the woken try again, and announce again if they must wait
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	r.mu.Unlock()
}
