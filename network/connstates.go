package network

import (
	"math/rand/v2"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/backoff"
)

// ConnectionState is the lifecycle state of the connection to one node.
type ConnectionState int

// The states of a node connection, as in the Java client's ConnectionState.
const (
	// Disconnected: no connection; a new one may start once the reconnect backoff has passed.
	Disconnected ConnectionState = iota
	// Connecting: dialing, TLS handshake or SASL authentication in progress.
	Connecting
	// CheckingAPIVersions: connected; the ApiVersions request is in flight.
	CheckingAPIVersions
	// Ready: versions negotiated; requests may be sent.
	Ready
	// AuthenticationFailed: SASL failed; the node is treated as disconnected and retried only
	// after the reconnect backoff, so a wrong password does not become a retry storm.
	AuthenticationFailed
)

// String returns the Java name of the state.
func (s ConnectionState) String() string {
	switch s {
	case Disconnected:
		return "DISCONNECTED"
	case Connecting:
		return "CONNECTING"
	case CheckingAPIVersions:
		return "CHECKING_API_VERSIONS"
	case Ready:
		return "READY"
	case AuthenticationFailed:
		return "AUTHENTICATION_FAILED"
	}
	return "UNKNOWN"
}

// isDisconnected reports the states in which a new connection may be attempted.
func (s ConnectionState) isDisconnected() bool { return s == Disconnected || s == AuthenticationFailed }

// isConnected reports the states with an established connection.
func (s ConnectionState) isConnected() bool { return s == CheckingAPIVersions || s == Ready }

type nodeConnectionState struct {
	state              ConnectionState
	lastConnectAttempt time.Time
	// failedAttempts counts disconnections since the node was last READY; it drives the
	// reconnect backoff.
	failedAttempts   int
	reconnectBackoff time.Duration
	// failedConnectAttempts counts connection attempts that never completed; it drives the
	// connection setup timeout.
	failedConnectAttempts  int
	connectionSetupTimeout time.Duration
	authErr                error
	addr                   string
	// throttleUntil is when the broker's last throttle (KIP-219) ends: until then nothing is
	// sent on the connection.
	throttleUntil time.Time
}

// ClusterConnectionStates tracks each node's connection state, reconnect backoff and connection
// setup timeout, after the Java class of the same name.
//
// ClusterConnectionStates is not safe for concurrent use: the sender goroutine owns it.
type ClusterConnectionStates struct {
	nodes                  map[int32]*nodeConnectionState
	connecting             map[int32]struct{}
	reconnectBackoff       *backoff.Exponential
	connectionSetupTimeout *backoff.Exponential
	// onChange, when set, is called after every state transition (telemetry).
	onChange func(node int32, state ConnectionState)
}

// NewClusterConnectionStates returns states with reconnect backoff growing from reconnectBackoff to
// reconnectBackoffMax (reconnect.backoff.ms, reconnect.backoff.max.ms) and connection setup timeout
// from setupTimeout to setupTimeoutMax (socket.connection.setup.timeout.ms and .max.ms), both
// doubling with 20% jitter. rnd is the jitter's random source; nil means a randomly seeded one.
func NewClusterConnectionStates(reconnectBackoff, reconnectBackoffMax, setupTimeout, setupTimeoutMax time.Duration, rnd *rand.Rand) *ClusterConnectionStates {
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &ClusterConnectionStates{
		nodes:                  map[int32]*nodeConnectionState{},
		connecting:             map[int32]struct{}{},
		reconnectBackoff:       backoff.New(reconnectBackoff, backoff.Multiplier, reconnectBackoffMax, backoff.Jitter, rnd),
		connectionSetupTimeout: backoff.New(setupTimeout, backoff.Multiplier, setupTimeoutMax, backoff.Jitter, rnd),
	}
}

// State returns node's state; a node never seen is Disconnected.
func (s *ClusterConnectionStates) State(node int32) ConnectionState {
	if n := s.nodes[node]; n != nil {
		return n.state
	}
	return Disconnected
}

// CanConnect reports whether a connection to node may start now: never tried, or disconnected
// and the reconnect backoff has passed since the last attempt.
func (s *ClusterConnectionStates) CanConnect(node int32, now time.Time) bool {
	n := s.nodes[node]
	return n == nil || (n.state.isDisconnected() && now.Sub(n.lastConnectAttempt) >= n.reconnectBackoff)
}

// IsBlackedOut reports whether node is disconnected and still inside its reconnect backoff.
func (s *ClusterConnectionStates) IsBlackedOut(node int32, now time.Time) bool {
	n := s.nodes[node]
	return n != nil && n.state.isDisconnected() && now.Sub(n.lastConnectAttempt) < n.reconnectBackoff
}

// ConnectionDelay returns how long the sender may wait for node (Java's
// ClusterConnectionStates.connectionDelay): the rest of the backoff when disconnected, 0 for an
// unknown node, the connection setup timeout while connecting (so that the poll wakes to find a
// connection that never completes: a blackholed broker), and a practically infinite wait once
// connected, because then only a network event can change anything.
func (s *ClusterConnectionStates) ConnectionDelay(node int32, now time.Time) time.Duration {
	n := s.nodes[node]
	switch {
	case n == nil:
		return 0
	case n.state == Connecting:
		return n.connectionSetupTimeout
	case n.state.isDisconnected():
		return max(n.reconnectBackoff-now.Sub(n.lastConnectAttempt), 0)
	}
	return maxDuration
}

// maxDuration stands for Java's Long.MAX_VALUE waits.
const maxDuration = time.Duration(1<<63 - 1)

// Connecting records that a connection to node (at addr) started at now.
func (s *ClusterConnectionStates) Connecting(node int32, now time.Time, addr string) {
	n := s.nodes[node]
	if n == nil || n.addr != addr {
		// A node whose address changed is a new broker behind an old id: its failures say
		// nothing about the new address, so it starts from fresh backoffs.
		n = &nodeConnectionState{
			reconnectBackoff:       s.reconnectBackoff.Backoff(0),
			connectionSetupTimeout: s.connectionSetupTimeout.Backoff(0),
		}
		s.nodes[node] = n
	}
	n.state = Connecting
	n.lastConnectAttempt = now
	n.addr = addr
	n.authErr = nil
	s.connecting[node] = struct{}{}
	s.changed(node, Connecting)
}

// CheckingAPIVersions records that node's connection is up and ApiVersions is in flight.
func (s *ClusterConnectionStates) CheckingAPIVersions(node int32) {
	n := s.nodeState(node)
	n.state = CheckingAPIVersions
	s.resetConnectionSetupTimeout(n)
	delete(s.connecting, node)
	s.changed(node, CheckingAPIVersions)
}

// Ready records that node may take requests; its failure counts reset.
func (s *ClusterConnectionStates) Ready(node int32) {
	n := s.nodeState(node)
	n.state = Ready
	n.authErr = nil
	n.failedAttempts = 0
	n.reconnectBackoff = s.reconnectBackoff.Backoff(0)
	s.resetConnectionSetupTimeout(n)
	delete(s.connecting, node)
	s.changed(node, Ready)
}

// Disconnected records that node's connection closed (or failed to open) at now, and grows the
// reconnect backoff; a failure while still connecting also grows the setup timeout.
func (s *ClusterConnectionStates) Disconnected(node int32, now time.Time) {
	n := s.nodeState(node)
	n.lastConnectAttempt = now
	s.updateReconnectBackoff(n)
	if n.state == Connecting {
		n.failedConnectAttempts++
		n.connectionSetupTimeout = s.connectionSetupTimeout.Backoff(n.failedConnectAttempts)
		delete(s.connecting, node)
	} else {
		s.resetConnectionSetupTimeout(n)
	}
	n.state = Disconnected
	s.changed(node, Disconnected)
}

// AuthenticationFailed records a SASL failure: the node counts as disconnected, keeps err for
// AuthenticationError, and waits out a grown reconnect backoff before the next attempt. As in the
// Java client it follows Disconnected, so an authentication failure grows the backoff twice.
func (s *ClusterConnectionStates) AuthenticationFailed(node int32, now time.Time, err error) {
	n := s.nodeState(node)
	n.state = AuthenticationFailed
	n.authErr = err
	n.lastConnectAttempt = now
	s.updateReconnectBackoff(n)
	delete(s.connecting, node)
	s.changed(node, AuthenticationFailed)
}

func (s *ClusterConnectionStates) changed(node int32, state ConnectionState) {
	if s.onChange != nil {
		s.onChange(node, state)
	}
}

func (s *ClusterConnectionStates) updateReconnectBackoff(n *nodeConnectionState) {
	n.reconnectBackoff = s.reconnectBackoff.Backoff(n.failedAttempts)
	n.failedAttempts++
}

func (s *ClusterConnectionStates) resetConnectionSetupTimeout(n *nodeConnectionState) {
	n.failedConnectAttempts = 0
	n.connectionSetupTimeout = s.connectionSetupTimeout.Backoff(0)
}

// nodeState returns node's record, creating a Disconnected one for a node never seen so that
// callers reacting to events need not care whether Connecting was recorded first.
func (s *ClusterConnectionStates) nodeState(node int32) *nodeConnectionState {
	n := s.nodes[node]
	if n == nil {
		n = &nodeConnectionState{
			reconnectBackoff:       s.reconnectBackoff.Backoff(0),
			connectionSetupTimeout: s.connectionSetupTimeout.Backoff(0),
		}
		s.nodes[node] = n
	}
	return n
}

// IsReady reports whether node is READY.
func (s *ClusterConnectionStates) IsReady(node int32) bool { return s.State(node) == Ready }

// Throttle records that node's broker asked, in a response, not to be sent to until until
// (KIP-219; Java's ClusterConnectionStates.throttle). The deadline never moves back.
func (s *ClusterConnectionStates) Throttle(node int32, until time.Time) {
	if n := s.nodes[node]; n != nil && n.throttleUntil.Before(until) {
		n.throttleUntil = until
	}
}

// ThrottleDelay returns how long node's throttle lasts after now (0: none).
func (s *ClusterConnectionStates) ThrottleDelay(node int32, now time.Time) time.Duration {
	if n := s.nodes[node]; n != nil && n.throttleUntil.After(now) {
		return n.throttleUntil.Sub(now)
	}
	return 0
}

// PollDelay is how long the sender may wait before node can take a request (Java's
// pollDelayMs): a connected node's throttle, else ConnectionDelay.
func (s *ClusterConnectionStates) PollDelay(node int32, now time.Time) time.Duration {
	if d := s.ThrottleDelay(node, now); d > 0 && s.IsConnected(node) {
		return d
	}
	return s.ConnectionDelay(node, now)
}

// IsConnected reports whether node's connection is established: CHECKING_API_VERSIONS or READY
// (Java's ConnectionState.isConnected).
func (s *ClusterConnectionStates) IsConnected(node int32) bool {
	st := s.State(node)
	return st == CheckingAPIVersions || st == Ready
}

// IsConnecting reports whether node is CONNECTING.
func (s *ClusterConnectionStates) IsConnecting(node int32) bool { return s.State(node) == Connecting }

// IsPreparingConnection reports whether node is connecting or checking API versions.
func (s *ClusterConnectionStates) IsPreparingConnection(node int32) bool {
	st := s.State(node)
	return st == Connecting || st == CheckingAPIVersions
}

// IsDisconnected reports whether node is DISCONNECTED or AUTHENTICATION_FAILED; a node never seen
// is not (it was never tried, so it has not failed).
func (s *ClusterConnectionStates) IsDisconnected(node int32) bool {
	n := s.nodes[node]
	return n != nil && n.state.isDisconnected()
}

// AuthenticationError returns the error of node's last SASL failure while it is in
// AUTHENTICATION_FAILED, else nil.
func (s *ClusterConnectionStates) AuthenticationError(node int32) error {
	if n := s.nodes[node]; n != nil && n.state == AuthenticationFailed {
		return n.authErr
	}
	return nil
}

// LastConnectAttempt returns when a connection to node was last attempted (zero if never).
func (s *ClusterConnectionStates) LastConnectAttempt(node int32) time.Time {
	if n := s.nodes[node]; n != nil {
		return n.lastConnectAttempt
	}
	return time.Time{}
}

// ReconnectBackoff returns node's current reconnect backoff (0 if never seen).
func (s *ClusterConnectionStates) ReconnectBackoff(node int32) time.Duration {
	if n := s.nodes[node]; n != nil {
		return n.reconnectBackoff
	}
	return 0
}

// ConnectionSetupTimeout returns node's current connection setup timeout.
func (s *ClusterConnectionStates) ConnectionSetupTimeout(node int32) time.Duration {
	return s.nodeState(node).connectionSetupTimeout
}

// IsConnectionSetupTimeout reports whether node has been CONNECTING longer than its setup timeout.
func (s *ClusterConnectionStates) IsConnectionSetupTimeout(node int32, now time.Time) bool {
	n := s.nodes[node]
	return n != nil && n.state == Connecting && now.Sub(n.lastConnectAttempt) > n.connectionSetupTimeout
}

// ConnectingNodes returns the nodes currently CONNECTING.
func (s *ClusterConnectionStates) ConnectingNodes() []int32 {
	ids := make([]int32, 0, len(s.connecting))
	for id := range s.connecting {
		ids = append(ids, id)
	}
	return ids
}

// Remove forgets node, as when it leaves the cluster.
func (s *ClusterConnectionStates) Remove(node int32) {
	delete(s.nodes, node)
	delete(s.connecting, node)
}
