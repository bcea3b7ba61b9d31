package network

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
)

// Observer is told what the network layer does, for telemetry: connection states and setups,
// every request sent and completed, and the requests in flight per node. Every method is called
// from the goroutine that owns the NetworkClient (the sender's), synchronously, so an
// implementation must be quick and must not call back into the client. A nil Config.Observer
// costs nothing.
type Observer interface {
	// ConnectionStateChanged reports that node's connection moved to state.
	ConnectionStateChanged(node int32, state ConnectionState)
	// ConnectionSetupDone reports a connection attempt that ended: established (TCP, TLS and
	// SASL done; ApiVersions follows) or failed (Err set).
	ConnectionSetupDone(s ConnectionSetup)
	// RequestSent reports a request queued for its connection (doSend); bytes is its frame size.
	RequestSent(r *inflight.Request, bytes int)
	// RequestDone reports a request sent by RequestSent that completed: with a response read at
	// received (body decoded, bytes its frame size, err a decode error), or without one (err
	// says why: disconnection, timeout, close). Internal requests (ApiVersions, Metadata) are
	// reported too.
	RequestDone(r *inflight.Request, body kmsg.Response, received time.Time, bytes int, err error)
	// InFlightRequests reports the number of requests now in flight to node.
	InFlightRequests(node int32, count int)
}

// ConnectionSetup describes one connection attempt, from its start to the connection being
// established or failing. Times of steps not taken (no TLS, no SASL, failed earlier) are zero.
type ConnectionSetup struct {
	Node int32
	Addr string
	// PeerAddr is the connection's remote address once TCP connected (Addr resolved: IP:port),
	// "" before.
	PeerAddr string
	// Start is when the attempt began; Dialed when TCP connected; TLSDone when the TLS
	// handshake finished; Authenticated when SASL finished; End when the attempt ended either way.
	Start, Dialed, TLSDone, Authenticated, End time.Time
	// TLS tells whether the connection uses TLS; SASLMechanism is the SASL mechanism, "" without.
	TLS           bool
	SASLMechanism string
	// Err is why the attempt failed; nil when the connection was established.
	Err error
}

// noteInFlight reports node's in-flight count after a change.
func (c *NetworkClient) noteInFlight(node int32) {
	if c.obs != nil {
		c.obs.InFlightRequests(node, c.inFlight.CountFor(node))
	}
}

// noteDone reports a completed request.
func (c *NetworkClient) noteDone(r *inflight.Request, body kmsg.Response, received time.Time, bytes int, err error) {
	if c.obs != nil {
		c.obs.RequestDone(r, body, received, bytes, err)
	}
}
