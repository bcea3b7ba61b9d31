package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/agent"
)

// syncBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestProgressLineShowsCountsAndClears(t *testing.T) {
	var stats agent.Stats
	stats.LinesRead.Store(120)
	stats.LinesAcked.Store(100)
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); progress(ctx, &out, &stats, 5*time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "sent 120  acked 100") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line after 5 s: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(out.String(), "in flight 20") {
		t.Fatalf("progress line lacks the in-flight count: %q", out.String())
	}
	cancel()
	<-done
	if !strings.HasSuffix(out.String(), "\r\033[K") {
		t.Fatalf("progress line not cleared at the end: %q", out.String())
	}
}
