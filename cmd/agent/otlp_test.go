package main

import (
	"net"
	"testing"
	"time"
)

func TestFlushTimeoutIsShortWithoutACollector(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{l.Addr().String()}
	if d := telemetryFlushTimeout(env); d != 2*time.Second {
		t.Fatalf("a listening collector gets %v to flush, want 2s", d)
	}
	l.Close()
	if d := telemetryFlushTimeout(env); d >= time.Second {
		t.Fatalf("no collector: the exit waits %v", d)
	}
}
