package agent

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultMinInFlightBytes is the floor of the default --max-in-flight-bytes.
const DefaultMinInFlightBytes = 2 << 20

// readAhead bounds the bytes of file lines read and not yet acknowledged, across every followed
// file: a follower takes a line's bytes before sending it and its delivery callback gives them
// back; a follower that finds the budget spent waits, so reading pauses. The files are the
// durable buffer, so holding more of them in memory than keeps the brokers busy buys nothing
// but memory (each buffered 100-byte line costs about 230 bytes of heap: see DESIGN.md).
//
// take is lock-free while the budget has room; only a follower that must wait, and a give that
// may wake it, take the mutex.
type readAhead struct {
	limit   int64
	used    atomic.Int64
	waiting atomic.Bool // a follower is, or is about to be, waiting on wake

	mu   sync.Mutex
	wake chan struct{} // closed by give when bytes come back while someone waits
}

func newReadAhead(limit int64) *readAhead { return &readAhead{limit: limit} }

// take reserves n bytes, waiting while they would exceed the limit (a line larger than the
// limit goes when nothing else is in flight). It returns ctx's error if ctx ends first.
func (r *readAhead) take(ctx context.Context, n int64) error {
	if u := r.used.Add(n); u <= r.limit || u == n {
		return nil
	}
	r.used.Add(-n)
	r.mu.Lock()
	for {
		// Announce the wait before trying again: a give after this sees it and wakes us; a give
		// before it freed bytes the next try sees.
		r.waiting.Store(true)
		if u := r.used.Add(n); u <= r.limit || u == n {
			r.mu.Unlock()
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
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
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
