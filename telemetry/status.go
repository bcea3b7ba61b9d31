package telemetry

import (
	"slices"
	"sync/atomic"
	"time"
)

// ProducerStatus is what the observer last saw of the producer's brokers: for a status page
// and a readiness check. Status builds it from values the sender goroutine published (atomics,
// and the connection maps behind their rarely taken mutex), so reading it never slows the
// producer.
type ProducerStatus struct {
	// MetadataAt is when the last successful metadata response arrived; zero before the first.
	MetadataAt time.Time
	// Nodes are the broker nodes the producer connected to or tried to, by id (bootstrap
	// servers have negative ids until the metadata names the brokers).
	Nodes []NodeStatus
}

// NodeStatus is one broker node.
type NodeStatus struct {
	ID   int32
	Addr string // host:port of the last connection attempt; "" before one
	// State is the connection's state: DISCONNECTED, CONNECTING, CHECKING_API_VERSIONS,
	// READY or AUTHENTICATION_FAILED.
	State string
	// InFlight is the number of requests sent to the node and not answered.
	InFlight int64
	// LastError is why the last connection attempt failed; "" once one succeeded.
	LastError string
}

// Ready reports whether the node accepts requests.
func (n NodeStatus) Ready() bool { return n.State == "READY" }

// Status returns a snapshot of the brokers' connection states, their requests in flight and
// the time of the last metadata response.
func (o *ProducerObserver) Status() ProducerStatus {
	var s ProducerStatus
	if at := o.metadataAt.Load(); at != 0 {
		s.MetadataAt = time.Unix(0, at)
	}
	byID := map[int32]*NodeStatus{}
	get := func(id int32) *NodeStatus {
		n := byID[id]
		if n == nil {
			n = &NodeStatus{ID: id, State: "DISCONNECTED"}
			byID[id] = n
		}
		return n
	}
	o.conn.mu.Lock()
	for id, st := range o.conn.states {
		get(id).State = st.String()
	}
	for id, addr := range o.conn.addrs {
		get(id).Addr = addr
	}
	for id, e := range o.conn.lastErr {
		get(id).LastError = e
	}
	o.conn.mu.Unlock()
	o.inFlight.Range(func(k, v any) bool {
		get(k.(int32)).InFlight = v.(*atomic.Int64).Load()
		return true
	})
	for _, n := range byID {
		s.Nodes = append(s.Nodes, *n)
	}
	slices.SortFunc(s.Nodes, func(a, b NodeStatus) int { return int(a.ID) - int(b.ID) })
	return s
}
