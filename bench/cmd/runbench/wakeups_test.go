package main

import (
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// waitHere blocks on ch n times, each receive a wakeup at this function.
func waitHere(ch <-chan struct{}, n int, done chan<- struct{}) {
	for range n {
		<-ch
	}
	close(done)
}

// TestCountWakeups: a goroutine woken 40 times inside the window is counted 40 times, at the
// function it waited in, and wakeups outside the window are not.
func TestCountWakeups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wake := func(n int) {
		ch, done := make(chan struct{}), make(chan struct{})
		go waitHere(ch, n, done)
		for range n {
			time.Sleep(time.Millisecond) // let it block again
			ch <- struct{}{}
		}
		<-done
	}
	wake(5) // before the window
	time.Sleep(200 * time.Millisecond)
	from := time.Since(start)
	wake(40)
	length := time.Since(start) - from + 20*time.Millisecond
	time.Sleep(200 * time.Millisecond)
	wake(5) // after it
	trace.Stop()
	f.Close()

	c, err := countWakeups(path, from, length)
	if err != nil {
		t.Fatal(err)
	}
	var at int
	for place, n := range c.ByPlace {
		if strings.Contains(place, "waitHere") {
			at += n
		}
	}
	if at != 40 {
		t.Fatalf("wakeups at waitHere = %d, want 40 (all: %v)", at, c.ByPlace)
	}
	if _, err := countWakeups(path, from, time.Hour); err == nil {
		t.Fatal("a window past the trace's end was counted")
	}
}
