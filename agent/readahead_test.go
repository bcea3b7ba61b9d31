package agent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
