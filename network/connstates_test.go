package network

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// newTestStates returns connection states with a fixed jitter source, and the time the test
// starts at: the tests move that clock by hand, so what they assert does not hang on the wall
// clock.
func newTestStates() (*ClusterConnectionStates, time.Time) {
	return NewClusterConnectionStates(100*time.Millisecond, 10*time.Second, 10*time.Second, 30*time.Second, rand.New(rand.NewPCG(3, 4))), time.Unix(100, 0)
}

// connecting returns new states (newTestStates) with node's first connection attempt begun.
func connecting(node int32) (*ClusterConnectionStates, time.Time) {
	s, now := newTestStates()
	s.Connecting(node, now, "b:9092")
	return s, now
}

// checkWithin fails the test unless d, what the states said of what, is within 20 % of center:
// the jitter they apply to backoffs and setup timeouts.
func checkWithin(t *testing.T, what string, d, center time.Duration) {
	t.Helper()
	if d < time.Duration(float64(center)*0.8) || d > time.Duration(float64(center)*1.2) {
		t.Fatalf("%s %v, want %v ± 20%%", what, d, center)
	}
}

func TestConnectionStatesLifecycle(t *testing.T) {
	s, now := newTestStates()
	const node = 1
	if !s.CanConnect(node, now) || s.IsDisconnected(node) || s.ConnectionDelay(node, now) != 0 {
		t.Fatal("an unknown node must be connectable and not count as failed")
	}
	s.Connecting(node, now, "b:9092")
	if s.State(node) != Connecting || s.CanConnect(node, now) || !s.IsPreparingConnection(node) {
		t.Fatalf("state %v after Connecting", s.State(node))
	}
	// Java's connectionDelay: while connecting, the connection setup timeout, so that the poll
	// wakes to find a connection that never completes (NetworkClient.handleTimedOutConnections).
	if d := s.ConnectionDelay(node, now); d != s.ConnectionSetupTimeout(node) || d == maxDuration {
		t.Fatalf("delay while connecting = %v, want the setup timeout %v", d, s.ConnectionSetupTimeout(node))
	}
	if ids := s.ConnectingNodes(); len(ids) != 1 || ids[0] != node {
		t.Fatalf("connecting nodes %v", ids)
	}
	s.CheckingAPIVersions(node)
	if s.State(node) != CheckingAPIVersions || len(s.ConnectingNodes()) != 0 || !s.IsPreparingConnection(node) {
		t.Fatalf("state %v", s.State(node))
	}
	if d := s.ConnectionDelay(node, now); d != maxDuration {
		t.Fatalf("delay once connected = %v, want none (a network event wakes the poll)", d)
	}
	s.Ready(node)
	if !s.IsReady(node) || s.IsPreparingConnection(node) {
		t.Fatal("not ready")
	}
	s.Disconnected(node, now)
	if s.State(node) != Disconnected || !s.IsDisconnected(node) || !s.IsBlackedOut(node, now) {
		t.Fatal("not disconnected")
	}
	checkWithin(t, "first backoff", s.ConnectionDelay(node, now), 100*time.Millisecond)
	checkWithin(t, "remaining backoff + 50ms", s.ConnectionDelay(node, now.Add(50*time.Millisecond))+50*time.Millisecond, 100*time.Millisecond)
	if !s.CanConnect(node, now.Add(120*time.Millisecond)) {
		t.Fatal("still blacked out after the longest jittered backoff")
	}
}

func TestConnectionStatesBackoffGrowsAndResets(t *testing.T) {
	s, now := newTestStates()
	const node = 2
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	for i, w := range want {
		s.Connecting(node, now, "b:9092")
		s.Disconnected(node, now)
		checkWithin(t, fmt.Sprintf("failure %d: backoff", i+1), s.ReconnectBackoff(node), w)
	}
	// Reaching READY resets the failure count.
	s.Connecting(node, now, "b:9092")
	s.CheckingAPIVersions(node)
	s.Ready(node)
	s.Disconnected(node, now)
	checkWithin(t, "backoff after READY (reset)", s.ReconnectBackoff(node), 100*time.Millisecond)
}

func TestConnectionStatesSetupTimeout(t *testing.T) {
	const node = 3
	s, now := connecting(node)
	checkWithin(t, "setup timeout", s.ConnectionSetupTimeout(node), 10*time.Second)
	if s.IsConnectionSetupTimeout(node, now.Add(7*time.Second)) {
		t.Fatal("timed out before the shortest jittered setup timeout")
	}
	if !s.IsConnectionSetupTimeout(node, now.Add(13*time.Second)) {
		t.Fatal("not timed out after the longest jittered setup timeout")
	}
	// A failed attempt doubles the setup timeout, up to the max.
	s.Disconnected(node, now)
	checkWithin(t, "setup timeout after a failure", s.ConnectionSetupTimeout(node), 20*time.Second)
	s.Connecting(node, now, "b:9092")
	s.Disconnected(node, now)
	if d := s.ConnectionSetupTimeout(node); d > 30*time.Second || d < 24*time.Second {
		t.Fatalf("setup timeout after two failures %v, want capped near 30s", d)
	}
	// Connected resets it.
	s.Connecting(node, now, "b:9092")
	s.CheckingAPIVersions(node)
	checkWithin(t, "setup timeout after connecting", s.ConnectionSetupTimeout(node), 10*time.Second)
}

func TestConnectionStatesAuthenticationFailed(t *testing.T) {
	const node = 4
	s, now := connecting(node)
	s.Disconnected(node, now)
	s.AuthenticationFailed(node, now, errTest)
	if s.State(node) != AuthenticationFailed || !s.IsDisconnected(node) || s.AuthenticationError(node) != errTest {
		t.Fatalf("state %v, err %v", s.State(node), s.AuthenticationError(node))
	}
	// Two failures' worth of backoff, as in the Java client.
	checkWithin(t, "backoff after authentication failure", s.ConnectionDelay(node, now), 200*time.Millisecond)
	s.Connecting(node, now.Add(time.Second), "b:9092")
	if s.AuthenticationError(node) != nil {
		t.Fatal("authentication error outlived a new attempt")
	}
}

func TestConnectionStatesAddressChangeResets(t *testing.T) {
	s, now := newTestStates()
	for range 4 {
		s.Connecting(5, now, "old:9092")
		s.Disconnected(5, now)
	}
	s.Connecting(5, now, "new:9092")
	s.Disconnected(5, now)
	checkWithin(t, "backoff for a new address (the initial one)", s.ReconnectBackoff(5), 100*time.Millisecond)
}

func TestConnectionStateString(t *testing.T) {
	for st, want := range map[ConnectionState]string{
		Disconnected: "DISCONNECTED", Connecting: "CONNECTING", CheckingAPIVersions: "CHECKING_API_VERSIONS",
		Ready: "READY", AuthenticationFailed: "AUTHENTICATION_FAILED",
	} {
		if st.String() != want {
			t.Errorf("%d.String() = %q, want %q", st, st.String(), want)
		}
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("test")

// TestConnectionStatesThrottle: a broker's throttle (KIP-219) holds a connected node for its
// time, never moves back, and is what the poll waits for (Java's pollDelayMs).
func TestConnectionStatesThrottle(t *testing.T) {
	const node = 4
	s, now := connecting(node)
	s.CheckingAPIVersions(node)
	s.Ready(node)
	s.Throttle(node, now.Add(300*time.Millisecond))
	s.Throttle(node, now.Add(100*time.Millisecond)) // an older, shorter one does not shorten it
	if d := s.ThrottleDelay(node, now); d != 300*time.Millisecond {
		t.Fatalf("throttle delay %v, want 300ms", d)
	}
	if d := s.PollDelay(node, now.Add(100*time.Millisecond)); d != 200*time.Millisecond {
		t.Fatalf("poll delay of a throttled node %v, want the 200ms left", d)
	}
	if d := s.PollDelay(node, now.Add(time.Second)); d != maxDuration {
		t.Fatalf("poll delay once the throttle ended %v, want none", d)
	}
}
