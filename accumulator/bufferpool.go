package accumulator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrBufferExhausted is returned (wrapped) when buffer.memory stayed exhausted until
// max.block.ms passed. The producer fails the record with it; sending again later may succeed.
var ErrBufferExhausted = errors.New("buffer memory exhausted")

// ErrExceedsBufferMemory is returned (wrapped) for an allocation larger than buffer.memory,
// which could never succeed however long it waited.
var ErrExceedsBufferMemory = errors.New("allocation exceeds buffer.memory")

// ErrClosed is returned by Append and by a waiting allocation once the accumulator is closed.
var ErrClosed = errors.New("accumulator: closed while a send was in progress")

// BufferPool bounds the memory of batches waiting to be sent to buffer.memory, as the Java
// producer's BufferPool does. Buffers of exactly the poolable size (batch.size) are kept on a
// free list and reused; other sizes are allocated and left to the GC, only their bytes counted.
//
// It is fair: allocations that must wait queue in arrival order, and freed memory goes to the
// oldest waiter until it has all it asked for, so a large request is not starved by small ones.
// While anyone waits, a new request queues too rather than taking memory the head is gathering.
// The queue is bounded by the callers: each waits at most until its deadline (max.block.ms) or
// its context ends, then fails and gives back what it had gathered.
//
// BufferPool is safe for concurrent use.
type BufferPool struct {
	totalMemory  int64
	poolableSize int
	now          func() time.Time

	mu        sync.Mutex
	free      [][]byte // len 0, cap poolableSize
	nonPooled int64    // memory neither handed out nor on the free list
	waiters   []*poolWaiter
	closed    bool
	exhausted int64
	waitTime  time.Duration
}

// poolWaiter is one blocked allocation. Its channel holds at most one wake-up; a wake-up that
// finds the waiter gone is harmless because whoever leaves the queue passes memory on to the
// next waiter.
type poolWaiter struct{ wake chan struct{} }

// NewBufferPool returns a pool of totalMemory bytes that recycles buffers of poolableSize.
// now times the waits for the wait-time metric; nil means time.Now.
func NewBufferPool(totalMemory int64, poolableSize int, now func() time.Time) *BufferPool {
	if now == nil {
		now = time.Now
	}
	return &BufferPool{totalMemory: totalMemory, poolableSize: poolableSize, now: now, nonPooled: totalMemory}
}

// Allocate returns a buffer with length 0 and capacity exactly size, blocking while the pool
// lacks the memory: until the deadline (a zero deadline waits for ctx alone; a past one does
// not wait), until ctx ends, or until the pool is closed. Give the buffer back with Deallocate.
func (p *BufferPool) Allocate(ctx context.Context, size int, deadline time.Time) ([]byte, error) {
	buf, _, err := p.allocate(ctx, size, deadline)
	return buf, err
}

// allocate is Allocate, also reporting whether it had to wait, so Append knows its notion of
// now went stale.
func (p *BufferPool) allocate(ctx context.Context, size int, deadline time.Time) ([]byte, bool, error) {
	if int64(size) > p.totalMemory {
		return nil, false, fmt.Errorf("accumulator: %w: %d bytes requested, buffer.memory is %d", ErrExceedsBufferMemory, size, p.totalMemory)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, ErrClosed
	}
	if len(p.waiters) == 0 {
		if size == p.poolableSize && len(p.free) > 0 {
			buf := p.popFreeLocked()
			p.mu.Unlock()
			return buf, false, nil
		}
		if p.nonPooled+int64(len(p.free))*int64(p.poolableSize) >= int64(size) {
			p.freeUpLocked(size)
			p.nonPooled -= int64(size)
			p.signalNextLocked()
			p.mu.Unlock()
			return make([]byte, 0, size), false, nil
		}
	}
	buf, err := p.waitLocked(ctx, size, deadline)
	// Whether this waiter got its memory or gave up, what is left may serve the next one.
	p.signalNextLocked()
	p.mu.Unlock()
	if err != nil {
		return nil, true, err
	}
	if buf == nil {
		buf = make([]byte, 0, size)
	}
	return buf, true, nil
}

// waitLocked queues for size bytes and gathers them as they are freed. It returns a free-list
// buffer when one satisfied the whole request, nil when the memory was gathered as bytes. On
// failure every byte gathered goes back, so a timed-out waiter leaks nothing.
func (p *BufferPool) waitLocked(ctx context.Context, size int, deadline time.Time) ([]byte, error) {
	w := &poolWaiter{wake: make(chan struct{}, 1)}
	p.waiters = append(p.waiters, w)
	defer p.removeWaiterLocked(w)

	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(deadline.Sub(p.now()))
		defer t.Stop()
		timeout = t.C
	}

	accumulated := 0
	for accumulated < size {
		p.mu.Unlock()
		start := p.now()
		var err error
		select {
		case <-w.wake:
		case <-timeout:
			err = errExhaustedTimeout
		case <-ctx.Done():
			err = ctx.Err()
		}
		waited := p.now().Sub(start)
		p.mu.Lock()
		p.waitTime += waited

		if p.closed {
			err = ErrClosed
		}
		if err != nil {
			p.nonPooled += int64(accumulated)
			switch {
			case errors.Is(err, errExhaustedTimeout):
				p.exhausted++
				return nil, fmt.Errorf("accumulator: %w: failed to allocate %d bytes within max.block.ms "+
					"(buffer.memory %d bytes, %d available, batch.size %d)",
					ErrBufferExhausted, size, p.totalMemory, p.availableLocked(), p.poolableSize)
			case errors.Is(err, ErrClosed):
				return nil, err
			default:
				return nil, fmt.Errorf("accumulator: waiting for %d bytes of buffer memory: %w", size, err)
			}
		}

		if accumulated == 0 && size == p.poolableSize && len(p.free) > 0 {
			return p.popFreeLocked(), nil
		}
		p.freeUpLocked(size - accumulated)
		got := min(int64(size-accumulated), p.nonPooled)
		p.nonPooled -= got
		accumulated += int(got)
	}
	return nil, nil
}

// errExhaustedTimeout marks the deadline firing inside waitLocked; callers see ErrBufferExhausted.
var errExhaustedTimeout = errors.New("deadline")

func (p *BufferPool) popFreeLocked() []byte {
	last := len(p.free) - 1
	buf := p.free[last]
	p.free[last] = nil
	p.free = p.free[:last]
	return buf
}

// freeUpLocked turns free-list buffers back into plain bytes until size bytes are unpooled or the
// free list is empty, for a request the free list cannot serve as is.
func (p *BufferPool) freeUpLocked(size int) {
	for len(p.free) > 0 && p.nonPooled < int64(size) {
		p.nonPooled += int64(cap(p.popFreeLocked()))
	}
}

func (p *BufferPool) removeWaiterLocked(w *poolWaiter) {
	for i, x := range p.waiters {
		if x == w {
			copy(p.waiters[i:], p.waiters[i+1:])
			p.waiters[len(p.waiters)-1] = nil
			p.waiters = p.waiters[:len(p.waiters)-1]
			return
		}
	}
}

// signalNextLocked wakes the oldest waiter if any memory is available to it.
func (p *BufferPool) signalNextLocked() {
	if len(p.waiters) > 0 && (p.nonPooled > 0 || len(p.free) > 0) {
		p.wakeLocked(p.waiters[0])
	}
}

func (p *BufferPool) wakeLocked(w *poolWaiter) {
	select {
	case w.wake <- struct{}{}:
	default: // already has a wake-up pending
	}
}

// Deallocate returns a buffer from Allocate. A buffer of the poolable size goes to the free
// list; any other size returns its bytes. The oldest waiter is woken either way.
func (p *BufferPool) Deallocate(buf []byte) {
	if buf == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cap(buf) == p.poolableSize {
		p.free = append(p.free, buf[:0])
	} else {
		p.nonPooled += int64(cap(buf))
	}
	if len(p.waiters) > 0 {
		p.wakeLocked(p.waiters[0])
	}
}

// Close fails every waiting and future allocation with ErrClosed. Deallocate keeps working, so
// batches still in flight can return their memory.
func (p *BufferPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.waiters {
		p.wakeLocked(w)
	}
}

// TotalMemory returns buffer.memory, the buffer-total-bytes metric.
func (p *BufferPool) TotalMemory() int64 { return p.totalMemory }

// PoolableSize returns the size of the buffers the free list keeps (batch.size).
func (p *BufferPool) PoolableSize() int { return p.poolableSize }

// AvailableMemory returns the memory not handed out, free list included: the
// buffer-available-bytes metric.
func (p *BufferPool) AvailableMemory() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.availableLocked()
}

func (p *BufferPool) availableLocked() int64 {
	return p.nonPooled + int64(len(p.free))*int64(p.poolableSize)
}

// UnallocatedMemory returns the memory neither handed out nor held on the free list.
func (p *BufferPool) UnallocatedMemory() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nonPooled
}

// QueuedWaiters returns the number of allocations blocked waiting for memory, the
// waiting-threads metric. Above zero the pool is exhausted and Ready sends every partition.
func (p *BufferPool) QueuedWaiters() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// ExhaustedCount returns how many allocations failed because max.block.ms passed, the
// buffer-exhausted-total metric.
func (p *BufferPool) ExhaustedCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exhausted
}

// WaitTime returns the total time allocations spent blocked, bufferpool-wait-time-ns-total.
func (p *BufferPool) WaitTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitTime
}
