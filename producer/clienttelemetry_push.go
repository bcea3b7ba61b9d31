package producer

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// telemetryState is the Java client's ClientTelemetryState: where the KIP-714 exchange with the
// broker stands.
type telemetryState int8

const (
	telSubscriptionNeeded telemetryState = iota
	telSubscriptionInProgress
	telPushNeeded
	telPushInProgress
	telTerminatingPushNeeded
	telTerminatingPushInProgress
	telTerminated
)

func (s telemetryState) String() string {
	return [...]string{"SUBSCRIPTION_NEEDED", "SUBSCRIPTION_IN_PROGRESS", "PUSH_NEEDED", "PUSH_IN_PROGRESS",
		"TERMINATING_PUSH_NEEDED", "TERMINATING_PUSH_IN_PROGRESS", "TERMINATED"}[s]
}

func (s telemetryState) terminating() bool { return s >= telTerminatingPushNeeded }

// defaultPushInterval is ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS: the wait after a
// failure that gives no interval, and the interval of a subscription that gives none.
const defaultPushInterval = 5 * time.Minute

// never is Java's Integer.MAX_VALUE interval: telemetry is off for good.
const never = time.Duration(1<<63 - 1)

// Java's INITIAL_PUSH_JITTER_LOWER and _UPPER: the first push after a subscription waits
// between half and one and a half push intervals, so that clients started together do not
// push together.
const (
	initialPushJitterLower = 0.5
	initialPushJitterUpper = 1.5
)

// telemetrySubscription is a GetTelemetrySubscriptions answer (Java's ClientTelemetrySubscription).
type telemetrySubscription struct {
	instanceID [16]byte
	id         int32
	interval   time.Duration
	// codec is the first of the broker's accepted compression types that we know (all of
	// Kafka's are), CodecNone when it lists none.
	codec    accumulator.Codec
	delta    bool
	maxBytes int
	sel      selector
}

// telemetryPusher is the Java client's ClientTelemetryReporter.DefaultClientTelemetrySender and
// NetworkClient.TelemetrySender in one: it asks the broker for the client metrics
// subscription and pushes the producer's metrics as it asks. The sender goroutine owns it:
// runOnce calls maybeUpdate, which sends at most one request and says how long the poll may
// sleep; the responses come back through the request callbacks, from the same Poll.
type telemetryPusher struct {
	// instance is the client instance id the broker assigned (uuidString), read by
	// Producer.ClientInstanceID from any goroutine; nil before the first subscription.
	instance atomic.Pointer[string]

	client           KafkaClient
	metrics          *clientMetrics
	log              *slog.Logger
	requestTimeout   time.Duration
	reconnectBackoff time.Duration
	resource         []*commonpb.KeyValue
	// send hands a request to the client (Sender.sendRequest).
	send func(node int32, body kmsg.Request, now time.Time, cb func(*network.ClientResponse))
	// jitter returns a number in [0, 1); tests fix it.
	jitter func() float64

	state telemetryState
	sub   *telemetrySubscription
	// lastRequest and interval time the next request (Java's lastRequestMs and intervalMs);
	// lastRequest is zero until the first subscription answered.
	lastRequest time.Time
	interval    time.Duration
	// notBefore honours a response's throttle time.
	notBefore time.Time
	disabled  bool
	// node is the broker telemetry sticks to while it can take requests (KIP-714).
	node *metadata.Node
	// closeBy bounds the terminating push: after it, Close stops waiting for it.
	closeBy time.Time

	// pushes counts pushes the broker accepted, for tests and logs.
	pushes int
}

func newTelemetryPusher(client KafkaClient, m *clientMetrics, log *slog.Logger, cfg Config,
	send func(int32, kmsg.Request, time.Time, func(*network.ClientResponse))) *telemetryPusher {
	var res []*commonpb.KeyValue
	if cfg.TransactionalID != "" {
		// ClientTelemetryProvider's producer resource: transactional_id when set. client_id is
		// left out as in Java: the broker knows it from the request header.
		res = append(res, stringKV("transactional_id", cfg.TransactionalID))
	}
	return &telemetryPusher{
		client:           client,
		metrics:          m,
		log:              log,
		requestTimeout:   ms(cfg.RequestTimeoutMs),
		reconnectBackoff: ms(cfg.ReconnectBackoffMs),
		resource:         res,
		send:             send,
		jitter:           rand.Float64,
	}
}

// timeToNextUpdate is DefaultClientTelemetrySender.timeToNextUpdate.
func (p *telemetryPusher) timeToNextUpdate(now time.Time) time.Duration {
	if p.disabled {
		return never
	}
	switch p.state {
	case telSubscriptionInProgress, telPushInProgress:
		return p.requestTimeout
	case telTerminatingPushInProgress, telTerminated:
		return never
	case telTerminatingPushNeeded:
		return 0
	}
	wait := p.lastRequest.Add(p.interval).Sub(now)
	if p.lastRequest.IsZero() {
		wait = 0
	}
	if t := p.notBefore.Sub(now); t > wait {
		wait = t
	}
	return max(wait, 0)
}

// maybeUpdate is NetworkClient.TelemetrySender.maybeUpdate: when a request is due, send it to
// the sticky node if that can take it, else pick the least loaded node (connecting to it if
// need be). It returns how long until it wants to be called again.
func (p *telemetryPusher) maybeUpdate(now time.Time) time.Duration {
	if wait := p.timeToNextUpdate(now); wait > 0 {
		return wait
	}
	if p.node == nil {
		n, ok := p.client.LeastLoadedNode(now)
		if !ok {
			return p.reconnectBackoff
		}
		p.node = &n
	}
	if !p.client.Ready(*p.node, now) {
		// KIP-714: a node that cannot take the request now is dropped; the next call picks
		// again (Ready started connecting to it if it could). A node in reconnect backoff is
		// looked at when its backoff ends, not every reconnect.backoff.ms.
		id := p.node.ID
		p.node = nil
		if !p.client.ConnectionFailed(id) {
			return p.reconnectBackoff // connecting, or connected with no room in flight
		}
		return max(p.client.ConnectionDelay(id, now), p.reconnectBackoff)
	}
	body := p.createRequest(now)
	if body == nil {
		return p.timeToNextUpdate(now)
	}
	terminating := p.state == telTerminatingPushInProgress
	p.send(p.node.ID, body, now, func(resp *network.ClientResponse) { p.handle(resp, terminating, now) })
	return p.requestTimeout
}

// createRequest is DefaultClientTelemetrySender.createRequest: the subscription request, or a
// push of the metrics now; nil when none is to be sent.
func (p *telemetryPusher) createRequest(now time.Time) kmsg.Request {
	switch p.state {
	case telSubscriptionNeeded:
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		if p.sub != nil {
			// A known instance id is kept; a zero one asks the broker to assign one.
			req.ClientInstanceID = p.sub.instanceID
		}
		p.state = telSubscriptionInProgress
		return req
	case telPushNeeded, telTerminatingPushNeeded:
		if p.sub == nil {
			p.state = telSubscriptionNeeded
			return nil
		}
		terminating := p.state == telTerminatingPushNeeded
		req := p.pushRequest(now, terminating)
		if terminating {
			p.state = telTerminatingPushInProgress
		} else {
			p.state = telPushInProgress
		}
		return req
	}
	return nil
}

// pushRequest collects the metrics, keeps those the subscription asks for, encodes them as
// OTLP MetricsData, compresses them with the subscription's codec and, beyond TelemetryMaxBytes,
// drops metrics from the end until the payload fits (the broker would refuse it whole with
// TELEMETRY_TOO_LARGE).
func (p *telemetryPusher) pushRequest(now time.Time, terminating bool) *kmsg.PushTelemetryRequest {
	sub := p.sub
	all, start := p.metrics.collect(now, sub.delta)
	points := all[:0]
	for _, pt := range all {
		if sub.sel.match(pt.name) {
			points = append(points, pt)
		}
	}
	codec, payload := p.encode(points, start, now)
	for sub.maxBytes > 0 && len(payload) > sub.maxBytes && len(points) > 0 {
		points = points[:len(points)*3/4]
		codec, payload = p.encode(points, start, now)
	}
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID = sub.instanceID
	req.SubscriptionID = sub.id
	req.Terminating = terminating
	req.CompressionType = int8(codec)
	req.Metrics = payload
	return req
}

func (p *telemetryPusher) encode(points []point, start, now time.Time) (accumulator.Codec, []byte) {
	raw, err := proto.Marshal(metricsData(points, p.resource, start, now, p.sub.delta))
	if err != nil {
		p.log.Warn("client telemetry: encoding the metrics", "error", err)
		return accumulator.CodecNone, nil
	}
	if p.sub.codec == accumulator.CodecNone {
		return accumulator.CodecNone, raw
	}
	out, err := accumulator.Compress(p.sub.codec, raw)
	if err != nil {
		// As Java: a payload that does not compress goes uncompressed.
		return accumulator.CodecNone, raw
	}
	return p.sub.codec, out
}

// handle takes a telemetry request's outcome: a response (handleResponse for either API) or
// a failure (handleFailedRequest). terminating marks the terminating push, whose outcome,
// whatever it is, ends telemetry.
func (p *telemetryPusher) handle(resp *network.ClientResponse, terminating bool, sent time.Time) {
	now := resp.Received
	if now.IsZero() {
		now = sent
	}
	if terminating {
		if r, ok := resp.Body.(*kmsg.PushTelemetryResponse); ok && resp.Err == nil && r.ErrorCode == 0 {
			p.pushes++
		}
		p.state = telTerminated
		return
	}
	if resp.Err != nil || resp.Disconnected || resp.TimedOut || resp.Body == nil {
		p.handleFailedRequest(resp, now)
		return
	}
	if t, ok := resp.Body.(interface{ Throttle() (int32, bool) }); ok {
		if ms, _ := t.Throttle(); ms > 0 {
			p.notBefore = now.Add(time.Duration(ms) * time.Millisecond)
		}
	}
	switch body := resp.Body.(type) {
	case *kmsg.GetTelemetrySubscriptionsResponse:
		p.handleSubscription(body, now)
	case *kmsg.PushTelemetryResponse:
		p.handlePush(body, now)
	}
}

// handleFailedRequest is DefaultClientTelemetrySender.handleFailedRequest. A broker without the
// APIs (UnsupportedVersionError) is asked again after the default interval, as Java does; the
// producer may have moved to a broker that has them by then. A disconnection or timeout waits
// for the subscription's interval (Java turns telemetry off for good on those: a broker restart
// would end the producer's pushes).
func (p *telemetryPusher) handleFailedRequest(resp *network.ClientResponse, now time.Time) {
	if p.state.terminating() {
		return
	}
	if errors.Is(resp.Err, network.ErrClientClosed) {
		p.state = telTerminated
		return
	}
	wait := defaultPushInterval
	var uv *network.UnsupportedVersionError
	if !errors.As(resp.Err, &uv) && p.sub != nil {
		wait = p.sub.interval
	}
	p.log.Debug("client telemetry: request failed", "error", resp.Err, "retry_in", wait)
	p.node = nil
	p.updateError(wait, now)
	p.state = telSubscriptionNeeded
}

// errorInterval is ClientTelemetryUtils.maybeFetchErrorIntervalMs: the wait before the next
// subscription request after an error code, never for the errors retrying cannot mend.
func (p *telemetryPusher) errorInterval(code int16) time.Duration {
	switch kerr.ErrorForCode(code) {
	case kerr.InvalidRequest, kerr.InvalidRecord, kerr.UnsupportedVersion:
		return never
	case kerr.UnknownSubscriptionID, kerr.UnsupportedCompressionType:
		return 0
	case kerr.TelemetryTooLarge, kerr.ThrottlingQuotaExceeded:
		if p.sub != nil {
			return p.sub.interval
		}
		return defaultPushInterval
	}
	return never
}

func (p *telemetryPusher) updateError(interval time.Duration, now time.Time) {
	p.interval = interval
	p.lastRequest = now
	if interval == never {
		p.disabled = true
		p.log.Warn("client telemetry: the broker's answer rules out pushing; telemetry off")
	}
}

// handleSubscription is DefaultClientTelemetrySender.handleResponse(GetTelemetrySubscriptionsResponse).
func (p *telemetryPusher) handleSubscription(r *kmsg.GetTelemetrySubscriptionsResponse, now time.Time) {
	if p.state.terminating() {
		return
	}
	if r.ErrorCode != 0 {
		p.state = telSubscriptionNeeded
		p.updateError(p.errorInterval(r.ErrorCode), now)
		return
	}
	if r.ClientInstanceID == ([16]byte{}) {
		// ClientTelemetryUtils.validateClientInstanceId: a broker must assign one.
		p.state = telSubscriptionNeeded
		p.updateError(defaultPushInterval, now)
		return
	}
	interval := time.Duration(r.PushIntervalMillis) * time.Millisecond
	if interval <= 0 {
		interval = defaultPushInterval
	}
	sub := &telemetrySubscription{
		instanceID: r.ClientInstanceID,
		id:         r.SubscriptionID,
		interval:   interval,
		codec:      accumulator.CodecNone,
		delta:      r.DeltaTemporality,
		maxBytes:   int(r.TelemetryMaxBytes),
		sel:        newSelector(r.RequestedMetrics),
	}
	// ClientTelemetryUtils.preferredCompressionType: the first of the broker's list (its order
	// of preference), none included; unknown ids are skipped, as getCompressionTypesFromAcceptedList
	// does.
	for _, c := range r.AcceptedCompressionTypes {
		if codec := accumulator.Codec(c); codec >= accumulator.CodecNone && codec <= accumulator.CodecZstd {
			sub.codec = codec
			break
		}
	}
	if p.sub != nil && p.sub.delta != sub.delta {
		p.metrics.resetDelta(now)
	}
	if p.sub == nil || p.sub.id != sub.id {
		p.log.Info("client telemetry subscription", "client_instance_id", uuidString(sub.instanceID),
			"subscription_id", sub.id, "push_interval", sub.interval, "metrics", r.RequestedMetrics,
			"compression", sub.codec.String(), "delta", sub.delta)
	}
	p.sub = sub
	if id := uuidString(sub.instanceID); p.instance.Load() == nil || *p.instance.Load() != id {
		p.instance.Store(&id)
	}
	p.lastRequest = now
	if sub.sel.none() {
		// Nothing asked for: look again after the interval.
		p.state = telSubscriptionNeeded
		p.interval = sub.interval
		return
	}
	p.state = telPushNeeded
	// updateSubscriptionResult: the first push is staggered over 0.5..1.5 intervals.
	f := initialPushJitterLower + p.jitter()*(initialPushJitterUpper-initialPushJitterLower)
	p.interval = time.Duration(f * float64(sub.interval)).Round(time.Millisecond)
}

// handlePush is DefaultClientTelemetrySender.handleResponse(PushTelemetryResponse).
func (p *telemetryPusher) handlePush(r *kmsg.PushTelemetryResponse, now time.Time) {
	if p.state.terminating() {
		// A push sent before Close began: its answer no longer matters.
		return
	}
	if r.ErrorCode != 0 {
		p.log.Debug("client telemetry: push refused", "error", kerr.ErrorForCode(r.ErrorCode))
		p.state = telSubscriptionNeeded
		p.updateError(p.errorInterval(r.ErrorCode), now)
		return
	}
	p.pushes++
	p.lastRequest = now
	p.interval = p.sub.interval
	p.state = telPushNeeded
}

// initiateClose is DefaultClientTelemetrySender.initiateClose: with a subscription, one last
// push with Terminating set, which Close waits for at most the request timeout.
func (p *telemetryPusher) initiateClose(now time.Time) {
	if p.disabled || p.lastRequest.IsZero() || p.sub == nil || p.state == telSubscriptionNeeded || p.state.terminating() {
		p.state = telTerminated
		return
	}
	p.state = telTerminatingPushNeeded
	p.closeBy = now.Add(p.requestTimeout)
}

// closing reports that the terminating push is still to be sent (Close keeps the sender
// running for it until closeBy); once sent, its request in flight keeps Close waiting.
func (p *telemetryPusher) closing(now time.Time) bool {
	if p == nil || p.state != telTerminatingPushNeeded {
		return false
	}
	if !now.Before(p.closeBy) {
		p.state = telTerminated
		return false
	}
	return true
}

// uuidString writes a Kafka Uuid as Uuid.toString does (base64url, no padding), the form the
// broker's logs and kafka-client-metrics --list show.
func uuidString(u [16]byte) string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ClientInstanceID is the client instance id the broker assigned this producer for its
// client metrics (KIP-714: Java's KafkaProducer.clientInstanceId), in Kafka's Uuid form; "" before
// the first subscription, or with enable.metrics.push=false. The broker labels the metrics
// it receives with it, so it joins them with the producer's own telemetry. Safe for
// concurrent use.
func (p *Producer) ClientInstanceID() string {
	if p.sender == nil || p.sender.telemetry == nil {
		return ""
	}
	if id := p.sender.telemetry.instance.Load(); id != nil {
		return *id
	}
	return ""
}
