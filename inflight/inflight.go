// Package inflight holds InFlightRequests, the per-node record of requests that were handed to
// the network and have not been answered yet, after the Java client's class of the same name.
package inflight

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one request sent (or being sent) to a node. NetworkClient fills it in doSend and
// completes it exactly once, through Callback, with a Response.
type Request struct {
	// Destination is the node the request was sent to.
	Destination int32
	// CorrelationID is the id written in the request header; the response must echo it.
	CorrelationID int32
	// APIKey and APIVersion are the negotiated key and version the request was encoded with.
	APIKey     int16
	APIVersion int16
	// Body is the request as sent, with its version set.
	Body kmsg.Request
	// ExpectResponse is false for produce requests with acks=0: the broker sends nothing back,
	// so the request completes as soon as its last byte leaves the socket.
	ExpectResponse bool
	// Internal marks requests NetworkClient sends on its own behalf (ApiVersions, metadata):
	// their responses are handled inside the client and not returned from Poll.
	Internal bool
	// Created is when the caller built the request. Queued is when doSend, the request
	// framed, handed it to its connection: a clock read there, never before the now doSend was
	// given. Written is when the connection's writer saw the write of its last byte return
	// (or, when the answer was read before that, the write's start: the writer was
	// descheduled once its bytes were out, see NetworkClient's writtenBefore). Each is
	// the moment it names, not the time of the poll that learnt of it, and Queued <= Written
	// <= the response's Received. They feed the lifecycle spans.
	Created, Queued, Written time.Time
	// WriteStarted is when the connection's writer began writing the request, zero until
	// known: Written when the writer's clock read after its write came later than the answer.
	WriteStarted time.Time
	// Timeout is request.timeout.ms for this request, measured from Queued (Java's
	// InFlightRequest.sendTimeMs).
	Timeout time.Duration
	// SendComplete is set once the request's bytes have fully left the socket. A node accepts no
	// new request while its newest one is still being written (one send per connection).
	SendComplete bool
	// Callback is invoked by NetworkClient exactly once with the request's outcome.
	Callback func(*Response)
}

// Response is the outcome of a Request: a decoded body, or a disconnection, a timeout or an error.
type Response struct {
	// Request is the request this response completes.
	Request *Request
	// Body is the decoded response, nil when there is none (acks=0, disconnect, error).
	Body kmsg.Response
	// Received is when the response's last byte was read, by the connection's reader, however
	// long before the poll that matched it to its request; for an acks=0 request, when its
	// write finished; for a request that failed without a response, when the client failed it.
	// The sender takes it as the time of what it decides about the response.
	Received time.Time
	// Disconnected reports that the connection closed before a response arrived; the request
	// may or may not have reached the broker, so the caller treats it as retriable.
	Disconnected bool
	// TimedOut reports that the request waited longer than its Timeout; the connection was
	// closed because of it, so Disconnected is also set.
	TimedOut bool
	// Err explains a failed request (disconnection cause, version mismatch, decode error).
	Err error
}

// InFlightRequests is the set of requests sent and not yet answered, as a deque per node with the
// newest request at the head. Responses on one connection arrive in send order, so the oldest
// request is the one the next response answers.
//
// InFlightRequests is not safe for concurrent use: the sender goroutine owns it.
type InFlightRequests struct {
	maxPerConnection int
	// requests holds each node's requests oldest first; the "head" of the Java deque (newest)
	// is the slice's last element, so adding and completing the newest are appends and truncations.
	requests map[int32][]*Request
	count    int
}

// New returns an empty InFlightRequests that lets at most maxPerConnection requests wait per node
// (max.in.flight.requests.per.connection).
func New(maxPerConnection int) *InFlightRequests {
	return &InFlightRequests{maxPerConnection: maxPerConnection, requests: make(map[int32][]*Request)}
}

// Add records r as the newest request of its destination.
func (f *InFlightRequests) Add(r *Request) {
	f.requests[r.Destination] = append(f.requests[r.Destination], r)
	f.count++
}

// CompleteNext removes and returns the oldest request of node, the one the next response
// answers, or nil when none waits.
func (f *InFlightRequests) CompleteNext(node int32) *Request {
	q := f.requests[node]
	if len(q) == 0 {
		return nil
	}
	r := q[0]
	q[0] = nil // let the request be collected while the backing array lives on
	f.setQueue(node, q[1:])
	f.count--
	return r
}

// CompleteLastSent removes and returns the newest request of node, or nil when none waits. It
// completes requests that expect no response (acks=0), which are always the newest when their
// send completes because a connection writes one request at a time.
func (f *InFlightRequests) CompleteLastSent(node int32) *Request {
	q := f.requests[node]
	if len(q) == 0 {
		return nil
	}
	r := q[len(q)-1]
	q[len(q)-1] = nil
	f.setQueue(node, q[:len(q)-1])
	f.count--
	return r
}

func (f *InFlightRequests) setQueue(node int32, q []*Request) {
	if len(q) == 0 {
		delete(f.requests, node)
		return
	}
	f.requests[node] = q
}

// LastSent returns the newest request of node without removing it, or nil.
func (f *InFlightRequests) LastSent(node int32) *Request {
	q := f.requests[node]
	if len(q) == 0 {
		return nil
	}
	return q[len(q)-1]
}

// CanSendMore reports whether node may take another request: it has none in flight, or its newest
// request has fully left the socket and fewer than the maximum are waiting. Requiring the newest
// send to be complete keeps one write per connection in progress, like KafkaChannel's single Send.
func (f *InFlightRequests) CanSendMore(node int32) bool {
	q := f.requests[node]
	return len(q) == 0 || (q[len(q)-1].SendComplete && len(q) < f.maxPerConnection)
}

// Count returns the number of requests in flight to all nodes.
func (f *InFlightRequests) Count() int { return f.count }

// CountFor returns the number of requests in flight to node.
func (f *InFlightRequests) CountFor(node int32) int { return len(f.requests[node]) }

// IsEmpty reports whether node has no request in flight.
func (f *InFlightRequests) IsEmpty(node int32) bool { return len(f.requests[node]) == 0 }

// Nodes returns the nodes with requests in flight, sorted.
func (f *InFlightRequests) Nodes() []int32 {
	nodes := slices.AppendSeq(make([]int32, 0, len(f.requests)), maps.Keys(f.requests))
	slices.Sort(nodes)
	return nodes
}

// ClearAll removes and returns every request of node, oldest first, so that failing them on a
// disconnect runs callbacks in send order.
func (f *InFlightRequests) ClearAll(node int32) []*Request {
	q := f.requests[node]
	delete(f.requests, node)
	f.count -= len(q)
	return q
}

// NodesWithTimedOutRequests returns the nodes with a request that has waited longer than its
// Timeout since it was queued (Java's hasExpiredRequest: now - sendTimeMs > requestTimeoutMs).
// Every request is judged, not only the oldest: requests carry their own timeouts (a produce
// request's request.timeout.ms, a metadata request's), so a newer one may be late first.
func (f *InFlightRequests) NodesWithTimedOutRequests(now time.Time) []int32 {
	var nodes []int32
	for node, q := range f.requests {
		for _, r := range q {
			if now.Sub(r.Queued) > r.Timeout {
				nodes = append(nodes, node)
				break
			}
		}
	}
	slices.Sort(nodes) // map order is random; callers and tests want a stable order
	return nodes
}
