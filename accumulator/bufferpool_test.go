package accumulator

import (
	"context"
	"errors"
	"testing"
	"time"
)

// eventually polls cond until it holds or a generous deadline passes. Tests wait on conditions,
// never on fixed sleeps.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

type allocResult struct {
	id  int
	buf []byte
	err error
}

// startAllocation runs Allocate in a goroutine and waits until it is queued as the n-th waiter,
// which fixes the arrival order the FIFO tests rely on.
func startAllocation(t *testing.T, p *BufferPool, ctx context.Context, id, size int, deadline time.Time, n int, out chan<- allocResult) {
	t.Helper()
	go func() {
		buf, err := p.Allocate(ctx, size, deadline)
		out <- allocResult{id, buf, err}
	}()
	eventually(t, "allocation to queue", func() bool { return p.QueuedWaiters() == n })
}

func TestBufferPoolAccounting(t *testing.T) {
	const total, poolable = 1000, 100
	tests := []struct {
		name  string
		steps func(t *testing.T, p *BufferPool)
	}{
		{"poolable buffer is reused", func(t *testing.T, p *BufferPool) {
			b1 := mustAllocate(t, p, poolable)
			checkMemory(t, p, 900, 900)
			p.Deallocate(b1)
			checkMemory(t, p, 1000, 900) // on the free list, not unallocated
			b2 := mustAllocate(t, p, poolable)
			if &b1[:1][0] != &b2[:1][0] {
				t.Fatal("free-list buffer was not reused")
			}
			checkMemory(t, p, 900, 900)
			p.Deallocate(b2)
			checkMemory(t, p, 1000, 900)
		}},
		{"other sizes return bytes", func(t *testing.T, p *BufferPool) {
			b := mustAllocate(t, p, 250)
			if len(b) != 0 || cap(b) != 250 {
				t.Fatalf("len %d cap %d, want 0 and 250", len(b), cap(b))
			}
			checkMemory(t, p, 750, 750)
			p.Deallocate(b)
			checkMemory(t, p, 1000, 1000)
		}},
		{"free list is broken up for a larger request", func(t *testing.T, p *BufferPool) {
			var bufs [][]byte
			for range 10 {
				bufs = append(bufs, mustAllocate(t, p, poolable))
			}
			checkMemory(t, p, 0, 0)
			for _, b := range bufs {
				p.Deallocate(b)
			}
			checkMemory(t, p, 1000, 0)
			big := mustAllocate(t, p, 550)
			checkMemory(t, p, 450, 50) // six pooled buffers freed up, 50 bytes left over
			p.Deallocate(big)
			checkMemory(t, p, 1000, 600)
		}},
		{"whole memory", func(t *testing.T, p *BufferPool) {
			b := mustAllocate(t, p, total)
			checkMemory(t, p, 0, 0)
			p.Deallocate(b)
			checkMemory(t, p, 1000, 1000)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.steps(t, NewBufferPool(total, poolable, nil))
		})
	}
}

func mustAllocate(t *testing.T, p *BufferPool, size int) []byte {
	t.Helper()
	b, err := p.Allocate(context.Background(), size, time.Time{})
	if err != nil {
		t.Fatalf("Allocate(%d): %v", size, err)
	}
	return b
}

func checkMemory(t *testing.T, p *BufferPool, available, unallocated int64) {
	t.Helper()
	if got := p.AvailableMemory(); got != available {
		t.Errorf("AvailableMemory = %d, want %d", got, available)
	}
	if got := p.UnallocatedMemory(); got != unallocated {
		t.Errorf("UnallocatedMemory = %d, want %d", got, unallocated)
	}
}

func TestBufferPoolOversizeFailsAtOnce(t *testing.T) {
	p := NewBufferPool(1000, 100, nil)
	_, err := p.Allocate(context.Background(), 1001, time.Time{})
	if !errors.Is(err, ErrExceedsBufferMemory) {
		t.Fatalf("err = %v, want ErrExceedsBufferMemory", err)
	}
	checkMemory(t, p, 1000, 1000)
}

// TestBufferPoolFIFO queues several waiters in a known order and frees one buffer at a time:
// each must go to the oldest waiter.
func TestBufferPoolFIFO(t *testing.T) {
	p := NewBufferPool(300, 100, nil)
	held := [][]byte{mustAllocate(t, p, 100), mustAllocate(t, p, 100), mustAllocate(t, p, 100)}
	const waiters = 5
	results := make(chan allocResult, waiters)
	for i := range waiters {
		startAllocation(t, p, context.Background(), i, 100, time.Time{}, i+1, results)
	}
	for i := range waiters {
		p.Deallocate(held[0])
		held = held[1:]
		r := <-results
		if r.err != nil || r.id != i {
			t.Fatalf("buffer %d went to waiter %d (err %v), want waiter %d", i, r.id, r.err, i)
		}
		held = append(held, r.buf)
	}
	for _, b := range held {
		p.Deallocate(b)
	}
	checkMemory(t, p, 300, 0)
	if p.QueuedWaiters() != 0 {
		t.Fatalf("QueuedWaiters = %d", p.QueuedWaiters())
	}
}

// TestBufferPoolGathersForOldest: a large request at the head gathers freed memory while a
// small request behind it waits, even though each freed buffer alone would satisfy the latter.
func TestBufferPoolGathersForOldest(t *testing.T) {
	p := NewBufferPool(300, 100, nil)
	held := [][]byte{mustAllocate(t, p, 100), mustAllocate(t, p, 100), mustAllocate(t, p, 100)}
	results := make(chan allocResult, 2)
	startAllocation(t, p, context.Background(), 0, 250, time.Time{}, 1, results)
	startAllocation(t, p, context.Background(), 1, 100, time.Time{}, 2, results)
	p.Deallocate(held[0])
	eventually(t, "head to gather 100 bytes", func() bool { return p.AvailableMemory() == 0 })
	p.Deallocate(held[1])
	eventually(t, "head to gather 200 bytes", func() bool { return p.AvailableMemory() == 0 })
	select {
	case r := <-results:
		t.Fatalf("waiter %d finished before the head had its memory", r.id)
	default:
	}
	p.Deallocate(held[2])
	r := <-results
	if r.id != 0 || r.err != nil || cap(r.buf) != 250 {
		t.Fatalf("first served: waiter %d cap %d err %v, want waiter 0 with 250 bytes", r.id, cap(r.buf), r.err)
	}
	// The 50 bytes left go to waiter 1, now the head, which still waits for 50 more.
	eventually(t, "waiter 1 to gather the rest", func() bool { return p.AvailableMemory() == 0 })
	select {
	case r := <-results:
		t.Fatalf("waiter %d served with only 50 bytes free", r.id)
	default:
	}
	p.Deallocate(r.buf)
	r = <-results
	if r.id != 1 || r.err != nil {
		t.Fatalf("second served: waiter %d err %v", r.id, r.err)
	}
	p.Deallocate(r.buf)
	checkMemory(t, p, 300, 200)
}

// TestBufferPoolFailedWaitReturnsMemory: a waiter that gathered part of its memory and then
// gives up (deadline, cancelled context, closed pool) must give all of it back and pass it on.
func TestBufferPoolFailedWaitReturnsMemory(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // deadline after start; 0 = no deadline
		end     func(cancel context.CancelFunc, p *BufferPool)
		wantErr error
	}{
		{"deadline", 300 * time.Millisecond, func(context.CancelFunc, *BufferPool) {}, ErrBufferExhausted},
		{"context cancelled", 0, func(cancel context.CancelFunc, _ *BufferPool) { cancel() }, context.Canceled},
		{"pool closed", 0, func(_ context.CancelFunc, p *BufferPool) { p.Close() }, ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewBufferPool(300, 100, nil)
			held := [][]byte{mustAllocate(t, p, 100), mustAllocate(t, p, 100), mustAllocate(t, p, 100)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var deadline time.Time
			if tt.timeout > 0 {
				deadline = time.Now().Add(tt.timeout)
			}
			results := make(chan allocResult, 2)
			startAllocation(t, p, ctx, 0, 300, deadline, 1, results)
			p.Deallocate(held[0])
			p.Deallocate(held[1])
			eventually(t, "head to gather 200 bytes", func() bool { return p.AvailableMemory() == 0 })
			tt.end(cancel, p)
			r := <-results
			if !errors.Is(r.err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", r.err, tt.wantErr)
			}
			checkMemory(t, p, 200, 200)
			if p.QueuedWaiters() != 0 {
				t.Fatalf("QueuedWaiters = %d after the waiter left", p.QueuedWaiters())
			}
			p.Deallocate(held[2])
			checkMemory(t, p, 300, 200)
			if tt.wantErr == ErrBufferExhausted && p.ExhaustedCount() != 1 {
				t.Fatalf("ExhaustedCount = %d, want 1", p.ExhaustedCount())
			}
		})
	}
}

// TestBufferPoolFailedHeadPassesMemoryOn: when the head gives up, memory it gathered goes to the
// next waiter rather than sitting idle.
func TestBufferPoolFailedHeadPassesMemoryOn(t *testing.T) {
	p := NewBufferPool(300, 100, nil)
	held := [][]byte{mustAllocate(t, p, 100), mustAllocate(t, p, 100), mustAllocate(t, p, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan allocResult, 2)
	startAllocation(t, p, ctx, 0, 300, time.Time{}, 1, results)
	startAllocation(t, p, context.Background(), 1, 150, time.Time{}, 2, results)
	p.Deallocate(held[0])
	p.Deallocate(held[1])
	eventually(t, "head to gather 200 bytes", func() bool { return p.AvailableMemory() == 0 })
	cancel()
	// Both finish now, in either order on the channel.
	var byID [2]allocResult
	for range 2 {
		r := <-results
		byID[r.id] = r
	}
	if !errors.Is(byID[0].err, context.Canceled) {
		t.Fatalf("waiter 0: err %v, want cancelled", byID[0].err)
	}
	r := byID[1]
	if r.err != nil || cap(r.buf) != 150 {
		t.Fatalf("waiter 1: cap %d err %v, want 150 bytes", cap(r.buf), r.err)
	}
	p.Deallocate(r.buf)
	p.Deallocate(held[2])
	checkMemory(t, p, 300, 200)
}

func TestBufferPoolDeadline(t *testing.T) {
	p := NewBufferPool(100, 100, nil)
	held := mustAllocate(t, p, 100)
	tests := []struct {
		name  string
		after time.Duration
	}{
		{"already passed", -time.Second},
		{"passes while waiting", 20 * time.Millisecond},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Allocate(context.Background(), 100, time.Now().Add(tt.after))
			if !errors.Is(err, ErrBufferExhausted) {
				t.Fatalf("err = %v, want ErrBufferExhausted", err)
			}
			if got := p.ExhaustedCount(); got != int64(i+1) {
				t.Fatalf("ExhaustedCount = %d, want %d", got, i+1)
			}
		})
	}
	p.Deallocate(held)
	checkMemory(t, p, 100, 0)
	if p.WaitTime() <= 0 {
		t.Fatalf("WaitTime = %v, want the blocked time counted", p.WaitTime())
	}
}

func TestBufferPoolClosedRejects(t *testing.T) {
	p := NewBufferPool(100, 100, nil)
	b := mustAllocate(t, p, 100)
	p.Close()
	if _, err := p.Allocate(context.Background(), 10, time.Time{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	p.Deallocate(b) // memory still comes back after close
	checkMemory(t, p, 100, 0)
}
