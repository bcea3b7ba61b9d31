package freeport

import (
	"fmt"
	"net"
	"os"
	"testing"
)

func TestBaseSkipsABusyBase(t *testing.T) {
	from, err := Base(40000, 41000, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Take the third port of the base found: the next call must move on by a step of 10.
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", from+2))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := Base(from, 41000, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got <= from || (got-from)%10 != 0 {
		t.Fatalf("Base(%d, ...) with %d taken = %d, want a later base in steps of 10", from, from+2, got)
	}
	if _, err := Base(from, from+4, 4); err == nil {
		t.Fatalf("Base(%d, %d, 4) with %d taken: no error", from, from+4, from+2)
	}
}

// TestFixedBelowTheEphemeralRange reads this machine's ephemeral port range: the ports that
// brokers resume on must lie outside it, or a client's connection can hold one meanwhile.
func TestFixedBelowTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	if FixedEnd > lo && Fixed <= hi {
		t.Fatalf("Fixed..FixedEnd = %d-%d overlaps the ephemeral range %d-%d", Fixed, FixedEnd, lo, hi)
	}
}
