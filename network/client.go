package network

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/internal/version"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// ClientSoftwareName and ClientSoftwareVersion are sent in ApiVersions (KIP-511) so brokers can
// tell kafkatrail clients apart in their metrics; the broker labels the client's KIP-714
// metrics with them too. The version is the build's (internal/version), made to match KIP-511's
// pattern by SanitizeSoftwareString: the broker closes the connection of a client whose name or
// version does not match it, and a developer's `go build` in a checkout with changes stamps
// "0.0.0-20261203161742-92430a21659f+dirty".
const ClientSoftwareName = "kafkatrail"

// ClientSoftwareVersion: see ClientSoftwareName.
var ClientSoftwareVersion = SanitizeSoftwareString(version.Version())

// SanitizeSoftwareString makes s match the pattern brokers check a client's software name and
// version against (ApiVersionsRequest.hasValidVersion, KIP-511:
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?) as librdkafka does
// (rd_kafka_sw_str_sanitize_inplace): every character other than a letter, a digit, '-' and '.'
// becomes '-', and what is not a letter or a digit is trimmed from both ends. What is left empty
// is "unknown".
func SanitizeSoftwareString(s string) string {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	b := []byte(s)
	for i, c := range b {
		if !alnum(c) && c != '-' && c != '.' {
			b[i] = '-'
		}
	}
	start, end := 0, len(b)
	for start < end && !alnum(b[start]) {
		start++
	}
	for end > start && !alnum(b[end-1]) {
		end--
	}
	if start == end {
		return "unknown"
	}
	return string(b[start:end])
}

var (
	// ErrDisconnected is wrapped by the error of every request that failed because its
	// connection closed before the response arrived. Such a request may have reached the
	// broker; it is retriable.
	ErrDisconnected = errors.New("network: disconnected")
	// ErrRequestTimedOut is wrapped (with ErrDisconnected) by the error of requests failed
	// because one of their connection's requests exceeded request.timeout.ms.
	ErrRequestTimedOut = errors.New("network: request timed out")
	// ErrConnectionSetupTimeout is the cause of a disconnection because connecting (dial, TLS,
	// SASL) took longer than socket.connection.setup.timeout.ms.
	ErrConnectionSetupTimeout = errors.New("network: connection setup timed out")
	// ErrNodeNotReady is the error of a request sent to a node that cannot take it now; call
	// Ready first.
	ErrNodeNotReady = errors.New("network: node not ready")
	// ErrClientClosed is the error of requests still in flight when the client closed.
	ErrClientClosed = errors.New("network: client closed")
)

// UnsupportedVersionError reports that the broker and kmsg share no version of an API, or that
// the shared version is below what the producer accepts (Produce v3, the first with record
// batches).
type UnsupportedVersionError struct {
	Node                 int32
	APIKey               int16
	BrokerMin, BrokerMax int16 // -1, -1 when the broker does not support the API at all
	ClientMin, ClientMax int16
}

// Error implements error.
func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("network: node %d supports %s v%d..v%d, client needs v%d..v%d",
		e.Node, kmsg.NameForKey(e.APIKey), e.BrokerMin, e.BrokerMax, e.ClientMin, e.ClientMax)
}

// Unwrap lets errors.Is(err, kerr.UnsupportedVersion) match.
func (e *UnsupportedVersionError) Unwrap() error { return kerr.UnsupportedVersion }

// minProduceVersion is the lowest Produce version we send: v3 introduced record batches (magic 2).
const minProduceVersion = 3

// ClientRequest is a request for NetworkClient.Send.
type ClientRequest struct {
	Destination int32
	// Body is the request; its version is set by Send after negotiation.
	Body kmsg.Request
	// ExpectResponse is false for acks=0 produce requests.
	ExpectResponse bool
	Created        time.Time
	// Timeout is request.timeout.ms for this request; 0 uses Config.RequestTimeout.
	Timeout time.Duration
	// Callback is invoked exactly once, from Poll, with the outcome.
	Callback func(*inflight.Response)
}

type versionRange struct{ min, max int16 }

// NetworkClient is the producer's Kafka client, after the Java NetworkClient: it owns the
// connections (through a Selector), their states, the requests in flight and the metadata updater.
// Poll drives everything and runs callbacks.
//
// NetworkClient is not safe for concurrent use: the sender goroutine owns it. Only Wakeup may be
// called from other goroutines.
type NetworkClient struct {
	cfg       Config
	meta      *metadata.Metadata
	selector  *Selector
	states    *ClusterConnectionStates
	inFlight  *inflight.InFlightRequests
	updater   *defaultMetadataUpdater
	formatter *kmsg.RequestFormatter
	rnd       *rand.Rand

	correlation int32
	apiVersions map[int32]map[int16]versionRange
	// apiVersionsPending holds the ApiVersions version to send to nodes that connected (or
	// must retry at a lower version) and have not been sent one yet.
	apiVersionsPending map[int32]int16
	// sending is each node's request whose bytes are being written. A response can be read
	// before the writer reports its send complete, so completion is keyed to the request, not
	// to the newest in flight.
	sending map[int32]*inflight.Request
	// frames holds each node's frame being written, to return to framePool once the writer
	// reports it sent (never earlier: until then the writer goroutine may still read it).
	frames map[int32]*[]byte
	// aborted are responses decided in Send (version mismatch, not ready), delivered by the
	// next Poll so callbacks always run from Poll.
	aborted []*inflight.Response
	closed  bool
	obs     Observer // nil: no telemetry
}

// NewClient returns a client for the cluster in meta. Zero Config fields take the Java defaults.
func NewClient(cfg Config, meta *metadata.Metadata) *NetworkClient {
	return newClient(cfg, meta, nil)
}

// newClient lets tests fix the random source behind jitter and LeastLoadedNode.
func newClient(cfg Config, meta *metadata.Metadata, rnd *rand.Rand) *NetworkClient {
	cfg = cfg.withDefaults()
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	c := &NetworkClient{
		cfg:                cfg,
		meta:               meta,
		selector:           NewSelector(cfg),
		states:             NewClusterConnectionStates(cfg.ReconnectBackoff, cfg.ReconnectBackoffMax, cfg.SocketConnectionSetupTimeout, cfg.SocketConnectionSetupTimeoutMax, rnd),
		inFlight:           inflight.New(cfg.MaxInFlight),
		formatter:          kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		rnd:                rnd,
		apiVersions:        map[int32]map[int16]versionRange{},
		apiVersionsPending: map[int32]int16{},
		sending:            map[int32]*inflight.Request{},
		frames:             map[int32]*[]byte{},
		obs:                cfg.Observer,
	}
	c.updater = &defaultMetadataUpdater{client: c, meta: meta}
	if c.obs != nil {
		c.states.onChange = c.obs.ConnectionStateChanged
	}
	return c
}

// Ready reports whether node can take a request now. If not, and the node is disconnected with its
// reconnect backoff passed, it starts connecting.
func (c *NetworkClient) Ready(node metadata.Node, now time.Time) bool {
	if c.closed {
		return false
	}
	if c.IsReady(node.ID, now) {
		return true
	}
	if c.states.CanConnect(node.ID, now) {
		c.initiateConnect(node, now)
	}
	return false
}

// IsReady reports whether node can take a request now: no metadata update is due (the update goes
// first, as in the Java client) and the connection is READY, not throttled, with room in flight.
func (c *NetworkClient) IsReady(node int32, now time.Time) bool {
	return !c.updater.isUpdateDue(now) && c.canSendRequest(node, now)
}

// canSendRequest is Java's: a READY connection that its broker does not throttle (KIP-219,
// ClusterConnectionStates.isReady), whose channel is ready, with room in flight.
func (c *NetworkClient) canSendRequest(node int32, now time.Time) bool {
	return c.states.IsReady(node) && c.states.ThrottleDelay(node, now) == 0 && c.selector.IsChannelReady(node) &&
		c.inFlight.CanSendMore(node)
}

// PollDelay returns how long the sender may wait before node can take a request: its
// broker's throttle while connected (KIP-219), else ConnectionDelay (Java's pollDelayMs).
func (c *NetworkClient) PollDelay(node int32, now time.Time) time.Duration {
	return c.states.PollDelay(node, now)
}

// maybeThrottle is Java's NetworkClient.maybeThrottle: a response that carries a throttle time
// the client must honour (KIP-219: the response versions where the broker answers first and
// throttles after) holds the connection back that long.
func (c *NetworkClient) maybeThrottle(node int32, body kmsg.Response, now time.Time) {
	tr, ok := body.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	if ms, clientThrottles := tr.Throttle(); ms > 0 && clientThrottles {
		c.states.Throttle(node, now.Add(time.Duration(ms)*time.Millisecond))
	}
}

// ConnectionDelay returns how long until node may be connected to: the rest of its reconnect
// backoff, 0 if it may connect now, the connection setup timeout while connecting, or a
// practically infinite wait once connected (ClusterConnectionStates.ConnectionDelay).
func (c *NetworkClient) ConnectionDelay(node int32, now time.Time) time.Duration {
	return c.states.ConnectionDelay(node, now)
}

// ConnectionFailed reports whether the last connection to node failed or closed.
func (c *NetworkClient) ConnectionFailed(node int32) bool { return c.states.IsDisconnected(node) }

// AuthenticationError returns node's SASL failure (an *AuthenticationError), nil if none.
func (c *NetworkClient) AuthenticationError(node int32) error {
	return c.states.AuthenticationError(node)
}

// ConnectionState returns node's connection state.
func (c *NetworkClient) ConnectionState(node int32) ConnectionState { return c.states.State(node) }

// InFlightRequestCount returns the number of requests in flight to all nodes.
func (c *NetworkClient) InFlightRequestCount() int { return c.inFlight.Count() }

// HasInFlightRequests reports whether node has requests in flight.
func (c *NetworkClient) HasInFlightRequests(node int32) bool { return !c.inFlight.IsEmpty(node) }

// InFlightRequestCountFor returns the number of requests in flight to node.
func (c *NetworkClient) InFlightRequestCountFor(node int32) int { return c.inFlight.CountFor(node) }

// Wakeup makes a blocked Poll return. Safe for concurrent use.
func (c *NetworkClient) Wakeup() { c.selector.Wakeup() }

// WakeIn makes a blocked Poll, or the next one, return within d at the latest (Selector.WakeIn).
// Safe for concurrent use.
func (c *NetworkClient) WakeIn(d time.Duration) { c.selector.WakeIn(d) }

func (c *NetworkClient) initiateConnect(node metadata.Node, now time.Time) {
	addr := node.Addr()
	c.states.Connecting(node.ID, now, addr)
	if err := c.selector.Connect(node.ID, addr); err != nil {
		// Only a connection the selector still holds makes Connect fail; drop it and let the
		// backoff decide the next attempt.
		c.selector.Close(node.ID)
		c.states.Disconnected(node.ID, now)
		c.meta.RequestUpdate()
	}
}

// Send queues req for its destination, which must be ready (see Ready). Failures decided here
// (node not ready, no common version) complete the request from the next Poll.
func (c *NetworkClient) Send(req *ClientRequest, now time.Time) {
	fail := func(err error) {
		r := c.newRequest(req.Destination, req.Body, req.ExpectResponse, false, req.Created, req.Timeout, req.Callback, now)
		c.aborted = append(c.aborted, &inflight.Response{Request: r, Received: now, Err: err})
	}
	switch {
	case c.closed:
		fail(ErrClientClosed)
		return
	case !c.canSendRequest(req.Destination, now):
		fail(fmt.Errorf("%w: node %d", ErrNodeNotReady, req.Destination))
		return
	}
	if err := c.negotiateVersion(req.Destination, req.Body); err != nil {
		fail(err)
		return
	}
	c.doSend(c.newRequest(req.Destination, req.Body, req.ExpectResponse, false, req.Created, req.Timeout, req.Callback, now))
}

// negotiateVersion sets body's version to the highest both sides support: kmsg's MaxVersion (lowered
// by Config.MaxVersions) and the node's ApiVersions range.
func (c *NetworkClient) negotiateVersion(node int32, body kmsg.Request) error {
	key := body.Key()
	clientMax := body.MaxVersion()
	if capped, ok := c.cfg.MaxVersions[key]; ok && capped < clientMax {
		clientMax = capped
	}
	var clientMin int16
	if key == kmsg.Produce.Int16() {
		clientMin = minProduceVersion
	}
	broker, ok := c.apiVersions[node][key]
	if !ok {
		return &UnsupportedVersionError{Node: node, APIKey: key, BrokerMin: -1, BrokerMax: -1, ClientMin: clientMin, ClientMax: clientMax}
	}
	version := min(clientMax, broker.max)
	if version < broker.min || version < clientMin {
		return &UnsupportedVersionError{Node: node, APIKey: key, BrokerMin: broker.min, BrokerMax: broker.max, ClientMin: clientMin, ClientMax: clientMax}
	}
	body.SetVersion(version)
	return nil
}

func (c *NetworkClient) newRequest(node int32, body kmsg.Request, expectResponse, internal bool, created time.Time, timeout time.Duration, cb func(*inflight.Response), now time.Time) *inflight.Request {
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	if created.IsZero() {
		created = now
	}
	return &inflight.Request{
		Destination:    node,
		APIKey:         body.Key(),
		APIVersion:     body.GetVersion(),
		Body:           body,
		ExpectResponse: expectResponse,
		Internal:       internal,
		Created:        created,
		Queued:         now,
		Timeout:        timeout,
		Callback:       cb,
	}
}

// nextCorrelationID returns the next id, wrapping to 0 before the ids reserved for the SASL
// exchange (Java's NetworkClient skips SaslClientAuthenticator's reserved ids too), so ids stay
// non-negative and a re-authentication's responses are never taken for a request's.
func (c *NetworkClient) nextCorrelationID() int32 {
	id := c.correlation
	if c.correlation >= minReservedCorrelationID-1 {
		c.correlation = 0
	} else {
		c.correlation++
	}
	return id
}

// latest returns the later of a and b (a zero time is before any other).
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// framePool recycles request frames, so a produce request does not allocate its size again:
// kmsg appends the whole request, records included, into the frame.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// doSend frames r with the next correlation id, records it in flight and hands it to the
// selector. The caller checked canSendRequest and set the version.
func (c *NetworkClient) doSend(r *inflight.Request) {
	r.CorrelationID = c.nextCorrelationID()
	r.APIVersion = r.Body.GetVersion()
	buf := framePool.Get().(*[]byte)
	frame := c.formatter.AppendRequest((*buf)[:0], r.Body, r.CorrelationID)
	*buf = frame
	// Queued is read now, with the request framed and about to be handed to its connection
	// (Java's NetworkClient.doSend builds the Send, then Selector.send). Java's InFlightRequest
	// keeps the now doSend was given as its sendTimeMs; for a produce request that is the
	// sender's loop time, the batch's Drained too, so everything between (closing and
	// compressing the batch, building and encoding the request) would read as no time at all.
	// Never before the caller's now, whatever its clock: the stages must not overlap.
	// request.timeout.ms counts from here, as Java's does from sendTimeMs.
	r.Queued = latest(r.Queued, c.cfg.Clock())
	c.inFlight.Add(r)
	c.sending[r.Destination] = r
	if err := c.selector.Send(r.Destination, frame); err != nil {
		// canSendRequest rules this out; undo rather than leave a request that never completes.
		c.inFlight.CompleteLastSent(r.Destination)
		delete(c.sending, r.Destination)
		framePool.Put(buf) // never handed to a writer
		c.aborted = append(c.aborted, &inflight.Response{Request: r, Received: r.Queued, Err: err})
		return
	}
	c.frames[r.Destination] = buf
	if c.obs != nil {
		c.obs.RequestSent(r, len(frame))
		c.noteInFlight(r.Destination)
	}
}

// Poll updates metadata if due, waits up to timeout for network events, handles them and runs the
// callbacks of every request completed. now is the caller's clock; the selector waits in real
// time, and the handlers see now plus the time the wait took. A request's stage times are not
// this poll's: Written and Received are the connection's own readings of Config.Clock, taken
// when the write returned and when the response was read.
func (c *NetworkClient) Poll(timeout time.Duration, now time.Time) []*inflight.Response {
	if len(c.aborted) > 0 {
		// Complete what Send already decided before waiting, as the Java client does with
		// abortedSends, so a caller is not held up by a wait for an unrelated event.
		responses := c.aborted
		c.aborted = nil
		c.completeResponses(responses)
		return responses
	}
	if c.closed {
		return nil
	}
	metadataTimeout := c.updater.maybeUpdate(now)
	start := time.Now()
	res := c.selector.Poll(min(timeout, metadataTimeout, c.cfg.RequestTimeout))
	updatedNow := now.Add(time.Since(start))

	var responses []*inflight.Response
	responses = c.handleCompletedSends(responses, res.CompletedSends)
	responses = c.handleCompletedReceives(responses, res.CompletedReceives, updatedNow)
	responses = c.handleDisconnections(responses, res.Disconnected, updatedNow)
	if c.obs != nil {
		for _, s := range res.Setups {
			c.obs.ConnectionSetupDone(s)
		}
	}
	c.handleConnections(res.Connected)
	c.handleInitiateAPIVersionsRequests(updatedNow)
	responses = c.handleTimedOutConnections(responses, updatedNow)
	responses = c.handleTimedOutRequests(responses, updatedNow)
	responses = c.updater.handleRebootstrap(responses, updatedNow)
	c.completeResponses(responses)
	return responses
}

func (c *NetworkClient) completeResponses(responses []*inflight.Response) {
	for _, r := range responses {
		if r.Request.Callback != nil {
			r.Request.Callback(r)
		}
	}
}

// handleCompletedSends marks requests whose bytes left the socket, at the time the writer's
// write returned (not this poll's, which may come long after), and completes those that expect
// no response (acks=0) as of then.
func (c *NetworkClient) handleCompletedSends(responses []*inflight.Response, sends []CompletedSend) []*inflight.Response {
	for _, send := range sends {
		node := send.Node
		if buf := c.frames[node]; buf != nil {
			delete(c.frames, node)
			framePool.Put(buf)
		}
		r := c.sending[node]
		if r == nil {
			continue // already answered: the response was read before the send was reported
		}
		delete(c.sending, node)
		r.SendComplete = true
		r.WriteStarted = send.Started
		r.Written = latest(send.Written, r.Queued)
		if !r.ExpectResponse && c.inFlight.LastSent(node) == r {
			// acks=0: the write is all there is; the request completed when it did.
			c.inFlight.CompleteLastSent(node)
			c.noteInFlight(node)
			c.noteDone(r, nil, r.Written, 0, nil)
			responses = append(responses, &inflight.Response{Request: r, Received: r.Written})
		}
	}
	return responses
}

// handleCompletedReceives matches each response to its node's oldest request, checks the
// correlation id and decodes it. A mismatch closes the connection.
func (c *NetworkClient) handleCompletedReceives(responses []*inflight.Response, receives []Receive, now time.Time) []*inflight.Response {
	// closed holds nodes this loop closed for a protocol error: their later receives belong to
	// requests already failed. (A node the selector reports disconnected in this same Poll still
	// has its earlier receives handled here, before handleDisconnections, as in the Java client.)
	var closed map[int32]bool
	closeNode := func(node int32, cause error, failed *inflight.Request) {
		if closed == nil {
			closed = map[int32]bool{}
		}
		closed[node] = true
		c.selector.Close(node)
		if failed != nil {
			responses = c.failRequest(responses, failed, now, fmt.Errorf("%w: %w", ErrDisconnected, cause), false)
		}
		responses = c.processDisconnection(responses, node, now, cause, false)
	}
	for _, recv := range receives {
		if closed[recv.Node] {
			continue
		}
		r := c.inFlight.CompleteNext(recv.Node)
		c.noteInFlight(recv.Node)
		if r == nil {
			closeNode(recv.Node, fmt.Errorf("network: node %d sent a response with no request in flight", recv.Node), nil)
			continue
		}
		// The response's own read time (its reader's stamp), not this poll's: a response that
		// waited in the queue while the sender goroutine was busy or asleep was still read then.
		received := latest(recv.Received, r.Queued)
		if c.sending[recv.Node] == r {
			// The answer proves the request was written even if the writer's report is
			// still queued (or not made yet).
			delete(c.sending, recv.Node)
			r.SendComplete = true
			r.WriteStarted = c.selector.writeStarted(recv.Node)
			r.Written = writtenBefore(r, received)
		} else if r.Written.After(received) {
			r.Written = writtenBefore(r, received)
		}
		body, err := parseResponse(recv.Node, r.Body, r.CorrelationID, recv.Payload)
		var mismatch *CorrelationIDMismatchError
		if errors.As(err, &mismatch) {
			closeNode(recv.Node, err, r)
			continue
		}
		c.noteDone(r, body, received, len(recv.Payload)+4, err)
		if err == nil {
			c.maybeThrottle(recv.Node, body, received)
		}
		switch {
		case r.APIKey == kmsg.ApiVersions.Int16() && r.Internal:
			responses = c.handleAPIVersionsResponse(responses, r, body, err, now)
		case r.APIKey == kmsg.Metadata.Int16() && r.Internal:
			c.updater.handleResponse(body, err, now)
		default:
			responses = append(responses, &inflight.Response{Request: r, Body: body, Received: received, Err: err})
		}
	}
	return responses
}

// writtenBefore is when r's write finished, given that its answer was read at received before
// the writer reported the write (or with the writer's clock read after its write later than
// the read). The writer was descheduled once its bytes were out, typically on loopback, where
// the broker's thread its write wakes may take its CPU: its write's return comes late by as much
// as the round trip, and completedSend would take the round trip while completedReceive read
// zero. The write finished between its start and the read; its start is the estimate, as a
// socket takes a request of a few batches whole within microseconds. Without a known start
// (the writer between its write and its report), the read is the bound.
func writtenBefore(r *inflight.Request, received time.Time) time.Time {
	if s := r.WriteStarted; !s.IsZero() && !s.After(received) {
		return latest(s, r.Queued)
	}
	return received
}

// handleAPIVersionsResponse records the node's versions and makes it READY. A broker answering
// UNSUPPORTED_VERSION lists its own ApiVersions range; the request is retried at that version (or
// v0), like the Java client.
func (c *NetworkClient) handleAPIVersionsResponse(responses []*inflight.Response, r *inflight.Request, body kmsg.Response, decodeErr error, now time.Time) []*inflight.Response {
	node := r.Destination
	if decodeErr != nil {
		c.selector.Close(node)
		return c.processDisconnection(responses, node, now, fmt.Errorf("network: api versions: %w", decodeErr), false)
	}
	resp := body.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if r.APIVersion == 0 || !errors.Is(err, kerr.UnsupportedVersion) {
			c.selector.Close(node)
			return c.processDisconnection(responses, node, now, fmt.Errorf("network: api versions: %w", err), false)
		}
		var retry int16
		for _, k := range resp.ApiKeys {
			if k.ApiKey == kmsg.ApiVersions.Int16() {
				retry = k.MaxVersion
			}
		}
		if retry >= r.APIVersion {
			retry = 0 // the broker contradicts itself; v0 is always understood
		}
		c.apiVersionsPending[node] = retry
		return responses
	}
	versions := make(map[int16]versionRange, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		versions[k.ApiKey] = versionRange{min: k.MinVersion, max: k.MaxVersion}
	}
	c.apiVersions[node] = versions
	c.states.Ready(node)
	return responses
}

// APIVersions returns the version range node supports for key, once its ApiVersions response
// arrived.
func (c *NetworkClient) APIVersions(node int32, key int16) (minVersion, maxVersion int16, ok bool) {
	v, ok := c.apiVersions[node][key]
	return v.min, v.max, ok
}

// handleDisconnections fails the requests of connections the selector lost.
func (c *NetworkClient) handleDisconnections(responses []*inflight.Response, lost []Disconnection, now time.Time) []*inflight.Response {
	for _, d := range lost {
		responses = c.processDisconnection(responses, d.Node, now, d.Err, false)
	}
	return responses
}

// processDisconnection moves node to DISCONNECTED (or AUTHENTICATION_FAILED), fails its requests
// in flight, oldest first, and asks for a metadata update: a lost broker may mean a moved leader.
func (c *NetworkClient) processDisconnection(responses []*inflight.Response, node int32, now time.Time, cause error, timedOut bool) []*inflight.Response {
	c.states.Disconnected(node, now)
	delete(c.apiVersions, node)
	delete(c.apiVersionsPending, node)
	delete(c.sending, node)
	// A frame the writer may still hold is left to the GC rather than recycled.
	delete(c.frames, node)
	var authErr *AuthenticationError
	if errors.As(cause, &authErr) {
		c.states.AuthenticationFailed(node, now, authErr)
		c.meta.FatalError(authErr)
	}
	var err error
	if timedOut {
		err = fmt.Errorf("%w (%w): node %d: %w", ErrRequestTimedOut, ErrDisconnected, node, cause)
	} else {
		err = fmt.Errorf("%w: node %d: %w", ErrDisconnected, node, cause)
	}
	for _, r := range c.inFlight.ClearAll(node) {
		responses = c.failRequest(responses, r, now, err, timedOut)
	}
	c.noteInFlight(node)
	c.updater.handleServerDisconnect(node)
	return responses
}

// failRequest completes r as disconnected. Internal requests complete inside the client.
func (c *NetworkClient) failRequest(responses []*inflight.Response, r *inflight.Request, now time.Time, err error, timedOut bool) []*inflight.Response {
	// now is the caller's loop time plus the poll's wait, which can be behind the clock read
	// when r was queued or written in the same sender iteration: a request does not fail
	// before it was sent.
	now = latest(now, latest(r.Queued, r.Written))
	c.noteDone(r, nil, now, 0, err)
	if r.Internal {
		if r.APIKey == kmsg.Metadata.Int16() {
			c.updater.handleFailure(now)
		}
		return responses
	}
	return append(responses, &inflight.Response{Request: r, Received: now, Disconnected: true, TimedOut: timedOut, Err: err})
}

// handleConnections moves newly connected nodes to CHECKING_API_VERSIONS; their ApiVersions
// request goes out next.
func (c *NetworkClient) handleConnections(connected []int32) {
	for _, node := range connected {
		// One poll can report a connection as made and then lost (something in front of the
		// broker accepted and closed it at once); handleDisconnections has already run. Moving
		// such a node to CHECKING_API_VERSIONS would leave it there with no channel, never
		// reconnected.
		if !c.selector.Has(node) || c.states.IsDisconnected(node) {
			continue
		}
		c.states.CheckingAPIVersions(node)
		c.apiVersionsPending[node] = kmsg.NewPtrApiVersionsRequest().MaxVersion()
	}
}

func (c *NetworkClient) handleInitiateAPIVersionsRequests(now time.Time) {
	for node, version := range c.apiVersionsPending {
		if !c.selector.IsChannelReady(node) || !c.inFlight.CanSendMore(node) {
			continue
		}
		delete(c.apiVersionsPending, node)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(version)
		req.ClientSoftwareName = ClientSoftwareName
		req.ClientSoftwareVersion = ClientSoftwareVersion
		c.doSend(c.newRequest(node, req, true, true, now, 0, nil, now))
	}
}

// handleTimedOutConnections closes connections stuck CONNECTING past their setup timeout.
func (c *NetworkClient) handleTimedOutConnections(responses []*inflight.Response, now time.Time) []*inflight.Response {
	for _, node := range c.states.ConnectingNodes() {
		if c.states.IsConnectionSetupTimeout(node, now) {
			c.selector.Close(node)
			responses = c.processDisconnection(responses, node, now,
				fmt.Errorf("%w after %v", ErrConnectionSetupTimeout, c.states.ConnectionSetupTimeout(node)), false)
		}
	}
	return responses
}

// handleTimedOutRequests closes the connection of every node whose oldest request exceeded its
// timeout, failing all its requests: a late response would leave the connection's order unknown.
func (c *NetworkClient) handleTimedOutRequests(responses []*inflight.Response, now time.Time) []*inflight.Response {
	for _, node := range c.inFlight.NodesWithTimedOutRequests(now) {
		c.selector.Close(node)
		responses = c.processDisconnection(responses, node, now,
			errors.New("a request exceeded request.timeout.ms"), true)
	}
	return responses
}

// LeastLoadedNode returns the node best placed to take a request: starting at a random offset,
// the first READY node with nothing in flight, else the READY node with the fewest requests in
// flight, else a node already connecting, else the node that may connect now and was tried least
// recently. Nodes inside their reconnect backoff are skipped. ok is false when none qualifies.
func (c *NetworkClient) LeastLoadedNode(now time.Time) (metadata.Node, bool) {
	nodes := c.meta.Fetch().Nodes()
	if len(nodes) == 0 {
		return metadata.Node{}, false
	}
	var foundReady, foundConnecting, foundCanConnect *metadata.Node
	fewest := math.MaxInt
	offset := c.rnd.IntN(len(nodes))
	for i := range nodes {
		n := &nodes[(offset+i)%len(nodes)]
		switch {
		case c.canSendRequest(n.ID, now):
			count := c.inFlight.CountFor(n.ID)
			if count == 0 {
				return *n, true
			}
			if count < fewest {
				fewest, foundReady = count, n
			}
		case c.states.IsPreparingConnection(n.ID):
			foundConnecting = n
		case c.states.CanConnect(n.ID, now):
			if foundCanConnect == nil || c.states.LastConnectAttempt(n.ID).Before(c.states.LastConnectAttempt(foundCanConnect.ID)) {
				foundCanConnect = n
			}
		}
	}
	for _, n := range []*metadata.Node{foundReady, foundConnecting, foundCanConnect} {
		if n != nil {
			return *n, true
		}
	}
	return metadata.Node{}, false
}

// anyConnectionReady reports whether a broker the metadata names has a READY connection
// (Java's LeastLoadedNode.atLeastOneConnectionReady): then a rebootstrap is not needed, whatever
// LeastLoadedNode found.
func (c *NetworkClient) anyConnectionReady() bool {
	for _, n := range c.meta.Fetch().Nodes() {
		if c.states.IsReady(n.ID) {
			return true
		}
	}
	return false
}

// Close closes every connection, waits for their goroutines (up to 10 seconds) and fails the
// requests still in flight with ErrClientClosed, running their callbacks so none is lost.
func (c *NetworkClient) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.selector.CloseAll(ctx)
	now := c.cfg.Clock()
	responses := c.aborted
	c.aborted = nil
	for _, node := range c.inFlight.Nodes() {
		for _, r := range c.inFlight.ClearAll(node) {
			c.noteDone(r, nil, now, 0, ErrClientClosed)
			if !r.Internal {
				responses = append(responses, &inflight.Response{Request: r, Received: now, Disconnected: true, Err: ErrClientClosed})
			}
		}
		c.noteInFlight(node)
	}
	c.completeResponses(responses)
	return err
}

// ClientResponse is Java's ClientResponse: a request's outcome as the sender sees it (the
// response body, or why there is none: disconnected, timed out, failed), with the request it
// answers. The producer reads responses through this name and imports network only; the type
// lives in package inflight, whose InFlightRequests track them.
type ClientResponse = inflight.Response

// InFlightRequest is a request sent and not yet answered, as the Observer is told of it.
type InFlightRequest = inflight.Request
