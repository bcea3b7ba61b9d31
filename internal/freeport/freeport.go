// Package freeport finds free TCP ports on 127.0.0.1 for the brokers and servers that tests and
// the benchmark start beside each other, so that runs sharing a machine do not collide. It is
// used by the main module's tests and by the bench and reliability modules (Go lets those
// import it: their module paths lie below this module's).
package freeport

import (
	"fmt"
	"net"
)

// Fixed..FixedEnd is where servers that stop and start again on the same ports (a broker
// stopped and resumed, killed and restarted) take theirs: below the kernel's ephemeral range
// (32768-60999 by default), from which every outgoing connection takes its local port. A port
// in that range, released while its broker is down, can be held by some client's connection or
// its TIME_WAIT when the broker comes back, and the broker's bind then fails. The three-node
// cluster (scripts/kafka/cluster.sh, from 29092) and the benchmark's brokers (29100-29900) sit
// just above.
const (
	Fixed    = 20000
	FixedEnd = 29000
)

// Base returns the first base port P of from, from+10, ... below to such that P..P+n-1 all
// accept a listener on 127.0.0.1 now (n = 8 for scripts/kafka/broker.sh's seven listeners and its KDC).
// Callers spread from (by PID or at random) so that parallel runs try different bases first.
// A port can still be taken between this check and its use: the scripts then exit 75 (busy).
func Base(from, to, n int) (int, error) {
	for base := from; base+n <= to; base += 10 {
		if free(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("freeport: no %d consecutive free ports on 127.0.0.1 in %d-%d", n, from, to)
}

// free reports whether ports base..base+n-1 can all be listened on.
func free(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
