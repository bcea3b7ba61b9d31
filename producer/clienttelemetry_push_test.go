package producer

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// telemetryFixture drives a telemetryPusher the way the sender does (maybeUpdate at a given
// now), with every request it sends kept for the test to answer.
type telemetryFixture struct {
	t      *testing.T
	client *mockClient
	m      *clientMetrics
	p      *telemetryPusher
	sent   []sentTelemetry
	start  time.Time
}

type sentTelemetry struct {
	body kmsg.Request
	cb   func(*network.ClientResponse)
}

func newTelemetryFixture(t *testing.T) *telemetryFixture {
	f := &telemetryFixture{t: t, client: &mockClient{nodes: []metadata.Node{{ID: 1, Host: "127.0.0.1", Port: 9092}}},
		start: time.Unix(1_700_000_000, 0)}
	f.m = newClientMetrics(f.start)
	cfg := DefaultConfig()
	f.p = newTelemetryPusher(f.client, f.m, slog.New(slog.DiscardHandler), cfg,
		func(_ int32, body kmsg.Request, _ time.Time, cb func(*network.ClientResponse)) {
			f.sent = append(f.sent, sentTelemetry{body, cb})
		})
	f.p.jitter = func() float64 { return 0 } // the first push after half an interval
	return f
}

// update calls maybeUpdate at start+at and returns the request it sent, nil if none.
func (f *telemetryFixture) update(at time.Duration) kmsg.Request {
	f.t.Helper()
	n := len(f.sent)
	f.p.maybeUpdate(f.start.Add(at))
	if len(f.sent) == n {
		return nil
	}
	return f.sent[len(f.sent)-1].body
}

// answer completes the last request sent with body (nil: with err) at start+at.
func (f *telemetryFixture) answer(at time.Duration, body kmsg.Response, err error) {
	f.t.Helper()
	if len(f.sent) == 0 {
		f.t.Fatal("no telemetry request to answer")
	}
	s := f.sent[len(f.sent)-1]
	resp := &network.ClientResponse{Request: &network.InFlightRequest{Destination: 1, Body: s.body}, Body: body, Received: f.start.Add(at), Err: err}
	if err != nil {
		resp.Disconnected = errors.Is(err, network.ErrDisconnected)
	}
	s.cb(resp)
}

var testInstanceID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func subscription(interval int32, metrics ...string) *kmsg.GetTelemetrySubscriptionsResponse {
	r := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	r.ClientInstanceID = testInstanceID
	r.SubscriptionID = 7
	r.PushIntervalMillis = interval
	r.AcceptedCompressionTypes = []int8{4, 3, 1} // zstd first, as the Java broker lists them
	r.TelemetryMaxBytes = 1 << 20
	r.DeltaTemporality = true
	r.RequestedMetrics = metrics
	return r
}

func pushAnswer(code int16) *kmsg.PushTelemetryResponse {
	r := kmsg.NewPtrPushTelemetryResponse()
	r.ErrorCode = code
	return r
}

// subscribe takes the fixture through its first subscription, answered at 0 with interval 1 s.
func (f *telemetryFixture) subscribe(metrics ...string) {
	f.t.Helper()
	req, ok := f.update(0).(*kmsg.GetTelemetrySubscriptionsRequest)
	if !ok {
		f.t.Fatalf("first request is not GetTelemetrySubscriptions: %v", f.sent)
	}
	if req.ClientInstanceID != ([16]byte{}) {
		f.t.Fatalf("first subscription request carries instance id %x, want zero (the broker assigns one)", req.ClientInstanceID)
	}
	f.answer(0, subscription(1000, metrics...), nil)
}

// decodePush decompresses and decodes a push's metrics.
func decodePush(t *testing.T, req *kmsg.PushTelemetryRequest) *metricspb.MetricsData {
	t.Helper()
	raw := req.Metrics
	if req.CompressionType == 4 {
		d, err := zstd.NewReader(bytes.NewReader(req.Metrics))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if raw, err = io.ReadAll(d); err != nil {
			t.Fatalf("zstd payload: %v", err)
		}
	} else if req.CompressionType != 0 {
		t.Fatalf("push compressed with %d, the test decodes zstd and none", req.CompressionType)
	}
	md := new(metricspb.MetricsData)
	if err := proto.Unmarshal(raw, md); err != nil {
		t.Fatal(err)
	}
	return md
}

func metricsByName(md *metricspb.MetricsData) map[string]*metricspb.Metric {
	out := map[string]*metricspb.Metric{}
	for _, rm := range md.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
	}
	return out
}

// TestTelemetrySubscribeAndPush: the subscription comes first, the first push waits the
// jittered half interval, then pushes follow every interval after each answer, zstd-compressed
// as the broker prefers, with only the requested prefix and delta sums.
func TestTelemetrySubscribeAndPush(t *testing.T) {
	f := newTelemetryFixture(t)
	f.subscribe(kipPrefix + "record.")
	if req := f.update(499 * time.Millisecond); req != nil {
		t.Fatalf("sent %T before the jittered first push (0.5 intervals)", req)
	}
	f.m.recordsSent = 10
	req, ok := f.update(500 * time.Millisecond).(*kmsg.PushTelemetryRequest)
	if !ok {
		t.Fatal("no push at half the interval")
	}
	if req.ClientInstanceID != testInstanceID || req.SubscriptionID != 7 || req.Terminating || req.CompressionType != 4 {
		t.Fatalf("push: instance %x subscription %d terminating %v compression %d", req.ClientInstanceID, req.SubscriptionID, req.Terminating, req.CompressionType)
	}
	got := metricsByName(decodePush(t, req))
	for name := range got {
		if !strings.HasPrefix(name, kipPrefix+"record.") {
			t.Errorf("pushed %s, not asked for", name)
		}
	}
	send := got[kipPrefix+"record.send.total"].GetSum()
	if send == nil || send.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA || send.DataPoints[0].GetAsDouble() != 10 {
		t.Fatalf("record.send.total = %v, want a delta sum of 10", got[kipPrefix+"record.send.total"])
	}
	if req := f.update(600 * time.Millisecond); req != nil {
		t.Fatalf("sent %T while the push is in flight", req)
	}
	f.answer(600*time.Millisecond, pushAnswer(0), nil)
	if req := f.update(1599 * time.Millisecond); req != nil {
		t.Fatalf("sent %T before an interval since the last push's answer", req)
	}
	f.m.recordsSent = 15
	req, ok = f.update(1600 * time.Millisecond).(*kmsg.PushTelemetryRequest)
	if !ok {
		t.Fatal("no second push one interval after the first's answer")
	}
	if v := metricsByName(decodePush(t, req))[kipPrefix+"record.send.total"].GetSum().DataPoints[0].GetAsDouble(); v != 5 {
		t.Fatalf("second delta record.send.total = %v, want 5", v)
	}
}

// TestTelemetryCumulative: without delta temporality a sum is the total since the producer
// started, with its start time.
func TestTelemetryCumulative(t *testing.T) {
	f := newTelemetryFixture(t)
	f.update(0)
	sub := subscription(1000, "*")
	sub.DeltaTemporality = false
	f.answer(0, sub, nil)
	for i, want := range []float64{3, 8} {
		f.m.recordsSent = int64(want)
		at := time.Duration(500+1000*i) * time.Millisecond
		req, ok := f.update(at).(*kmsg.PushTelemetryRequest)
		if !ok {
			t.Fatalf("push %d not sent at %v", i, at)
		}
		m := metricsByName(decodePush(t, req))[kipPrefix+"record.send.total"].GetSum()
		if m.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE ||
			m.DataPoints[0].GetAsDouble() != want || m.DataPoints[0].StartTimeUnixNano != uint64(f.start.UnixNano()) {
			t.Fatalf("push %d: record.send.total %v, want cumulative %v from the start", i, m, want)
		}
		f.answer(at, pushAnswer(0), nil)
	}
}

// TestTelemetryPushErrors: the KIP's error handling, as ClientTelemetryUtils.maybeFetchErrorIntervalMs.
func TestTelemetryPushErrors(t *testing.T) {
	for _, tc := range []struct {
		err *kerr.Error
		// resubscribeAfter is when the next GetTelemetrySubscriptions goes, after the error's
		// answer at 500 ms; negative: never (telemetry off).
		resubscribeAfter time.Duration
	}{
		{kerr.UnknownSubscriptionID, 0},
		{kerr.UnsupportedCompressionType, 0},
		{kerr.TelemetryTooLarge, time.Second},
		{kerr.ThrottlingQuotaExceeded, time.Second},
		{kerr.InvalidRecord, -1},
		{kerr.InvalidRequest, -1},
		{kerr.UnsupportedVersion, -1},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			f := newTelemetryFixture(t)
			f.subscribe("*")
			if _, ok := f.update(500 * time.Millisecond).(*kmsg.PushTelemetryRequest); !ok {
				t.Fatal("no push")
			}
			f.answer(500*time.Millisecond, pushAnswer(tc.err.Code), nil)
			if tc.resubscribeAfter < 0 {
				if req := f.update(time.Hour); req != nil {
					t.Fatalf("sent %T after %s: telemetry should be off", req, tc.err.Message)
				}
				if !f.p.disabled {
					t.Fatal("not disabled")
				}
				return
			}
			if tc.resubscribeAfter > 0 {
				if req := f.update(500*time.Millisecond + tc.resubscribeAfter - time.Millisecond); req != nil {
					t.Fatalf("sent %T before the interval", req)
				}
			}
			req, ok := f.update(500*time.Millisecond + tc.resubscribeAfter).(*kmsg.GetTelemetrySubscriptionsRequest)
			if !ok {
				t.Fatalf("no new subscription request %v after %s", tc.resubscribeAfter, tc.err.Message)
			}
			if req.ClientInstanceID != testInstanceID {
				t.Fatalf("re-subscription carries instance id %x, want the assigned %x", req.ClientInstanceID, testInstanceID)
			}
		})
	}
}

// TestTelemetryBrokerWithoutAPIs: a broker whose ApiVersions lacks the APIs fails the request
// in the client (UnsupportedVersionError); nothing is pushed, the next attempt waits the default
// interval, and Close sends nothing.
func TestTelemetryBrokerWithoutAPIs(t *testing.T) {
	f := newTelemetryFixture(t)
	if _, ok := f.update(0).(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatal("no subscription request")
	}
	f.answer(0, nil, &network.UnsupportedVersionError{Node: 1, APIKey: 71, BrokerMin: -1, BrokerMax: -1})
	if req := f.update(defaultPushInterval - time.Millisecond); req != nil {
		t.Fatalf("sent %T again before the default push interval", req)
	}
	if _, ok := f.update(defaultPushInterval).(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatal("no new subscription request after the default push interval")
	}
	f.answer(defaultPushInterval, nil, &network.UnsupportedVersionError{Node: 1, APIKey: 71, BrokerMin: -1, BrokerMax: -1})
	f.p.initiateClose(f.start.Add(defaultPushInterval))
	if f.p.closing(f.start.Add(defaultPushInterval)) {
		t.Fatal("Close waits for a terminating push without a subscription")
	}
}

// TestTelemetryNoMetricsRequested: an empty RequestedMetrics means no push; the subscription is
// asked for again after its interval.
func TestTelemetryNoMetricsRequested(t *testing.T) {
	f := newTelemetryFixture(t)
	f.subscribe()
	if req := f.update(999 * time.Millisecond); req != nil {
		t.Fatalf("sent %T with nothing subscribed", req)
	}
	if _, ok := f.update(time.Second).(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatal("subscription not asked for again after its interval")
	}
}

// TestTelemetryTerminatingPush: Close's push goes at once with Terminating set; its answer ends
// telemetry, and Close stops waiting for it after the request timeout if it cannot be sent.
func TestTelemetryTerminatingPush(t *testing.T) {
	f := newTelemetryFixture(t)
	f.subscribe("*")
	now := f.start.Add(100 * time.Millisecond)
	f.p.initiateClose(now)
	if !f.p.closing(now) {
		t.Fatal("not waiting for the terminating push")
	}
	req, ok := f.update(100 * time.Millisecond).(*kmsg.PushTelemetryRequest)
	if !ok || !req.Terminating {
		t.Fatalf("no terminating push at once on close (got %v)", req)
	}
	if f.p.closing(now) {
		t.Fatal("still closing with the terminating push in flight (its request keeps the sender running)")
	}
	f.answer(150*time.Millisecond, pushAnswer(0), nil)
	if f.p.state != telTerminated || f.p.pushes != 1 {
		t.Fatalf("after the terminating push's answer: state %v, pushes %d", f.p.state, f.p.pushes)
	}
	if req := f.update(time.Hour); req != nil {
		t.Fatalf("sent %T after the terminating push", req)
	}

	// A node that never becomes ready: Close gives up at the request timeout.
	g := newTelemetryFixture(t)
	g.subscribe("*")
	g.client.notReady = map[int32]bool{1: true}
	g.p.initiateClose(g.start)
	if g.update(0) != nil {
		t.Fatal("sent to a node that is not ready")
	}
	if !g.p.closing(g.start.Add(g.p.requestTimeout - time.Millisecond)) {
		t.Fatal("gave up on the terminating push before the request timeout")
	}
	if g.p.closing(g.start.Add(g.p.requestTimeout)) {
		t.Fatal("Close still waits for the terminating push after the request timeout")
	}
}

// TestTelemetryMaxBytes: a payload over TelemetryMaxBytes is cut to fit.
func TestTelemetryMaxBytes(t *testing.T) {
	f := newTelemetryFixture(t)
	f.update(0)
	sub := subscription(1000, "")
	sub.AcceptedCompressionTypes = nil
	sub.TelemetryMaxBytes = 300
	f.answer(0, sub, nil)
	req, ok := f.update(500 * time.Millisecond).(*kmsg.PushTelemetryRequest)
	if !ok {
		t.Fatal("no push")
	}
	if len(req.Metrics) > 300 || len(req.Metrics) == 0 || req.CompressionType != 0 {
		t.Fatalf("payload of %d bytes compressed %d, want 1..300 uncompressed", len(req.Metrics), req.CompressionType)
	}
	if n := len(metricsByName(decodePush(t, req))); n == 0 {
		t.Fatal("no metric left in the cut payload")
	}
}

// TestTelemetryThrottle: a response's throttle time holds the next request back.
func TestTelemetryThrottle(t *testing.T) {
	f := newTelemetryFixture(t)
	f.update(0)
	sub := subscription(1000, "*")
	sub.ThrottleMillis = 2000
	f.answer(0, sub, nil)
	if req := f.update(1999 * time.Millisecond); req != nil {
		t.Fatalf("sent %T while throttled", req)
	}
	if _, ok := f.update(2 * time.Second).(*kmsg.PushTelemetryRequest); !ok {
		t.Fatal("no push after the throttle time")
	}
}

// TestTelemetryStatsNaN: an interval without a sample reports NaN for avg and max, as the Java
// client's Avg and Max do over an empty window, and a sample starts a new interval.
func TestTelemetryStatsNaN(t *testing.T) {
	var s stat
	if a, m := s.avgMax(); !math.IsNaN(a) || !math.IsNaN(m) {
		t.Fatalf("empty: %v %v", a, m)
	}
	s.record(2)
	s.record(6)
	if a, m := s.avgMax(); a != 4 || m != 6 {
		t.Fatalf("avg %v max %v, want 4 6", a, m)
	}
	if a, _ := s.avgMax(); !math.IsNaN(a) {
		t.Fatal("the interval did not restart")
	}
}

// TestSenderTelemetryNeverHoldsProduceBack: with a subscription request unanswered and then a
// push in flight, the sender still sends the produce requests in the same iterations, and
// the producer's numbers (records drained, queue time, the produce response's latency) reach
// the push.
func TestSenderTelemetryNeverHoldsProduceBack(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	s := f.sender
	s.metrics = newClientMetrics(f.now)
	s.telemetry = newTelemetryPusher(f.client, s.metrics, slog.New(slog.DiscardHandler), f.cfg, s.sendTelemetryRequest)
	s.telemetry.jitter = func() float64 { return 0 }

	f.append(0, "a")
	f.runOnce()
	if len(f.client.sent) != 2 {
		t.Fatalf("first iteration sent %d requests, want GetTelemetrySubscriptions and Produce", len(f.client.sent))
	}
	if _, ok := f.client.sent[0].Body.(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatalf("first request %T", f.client.sent[0].Body)
	}
	if _, ok := f.client.sent[1].Body.(*kmsg.ProduceRequest); !ok {
		t.Fatalf("second request %T, want the produce request beside the pending subscription", f.client.sent[1].Body)
	}
	// Answer the produce request (the second pending) first, then the subscription.
	sub, produce := f.client.pending[0], f.client.pending[1]
	f.client.pending = nil
	f.now = f.now.Add(20 * time.Millisecond)
	f.client.answers = append(f.client.answers,
		answer{req: produce, body: produceAnswer(0, 0)(produce.Body)},
		answer{req: sub, body: subscription(1000, kipPrefix)})
	f.client.Poll(0, f.now)

	f.now = f.now.Add(500 * time.Millisecond)
	f.append(0, "b")
	f.runOnce()
	var push *kmsg.PushTelemetryRequest
	produced := 0
	for _, r := range f.client.sent[2:] {
		switch b := r.Body.(type) {
		case *kmsg.PushTelemetryRequest:
			push = b
		case *kmsg.ProduceRequest:
			produced++
		}
	}
	if push == nil || produced != 1 {
		t.Fatalf("second iteration: push %v, %d produce requests; want both", push != nil, produced)
	}
	got := metricsByName(decodePush(t, push))
	// The push is built first in the iteration, before the second record is drained.
	if v := got[kipPrefix+"record.send.total"].GetSum().DataPoints[0].GetAsDouble(); v != 1 {
		t.Errorf("record.send.total = %v, want the 1 record drained before the push", v)
	}
	lat := got[kipNodePrefix+"request.latency.max"].GetGauge().DataPoints[0]
	if lat.GetAsDouble() != 20 || lat.Attributes[0].GetValue().GetStringValue() != "node-1" {
		t.Errorf("node.request.latency.max = %v, want 20 ms for node_id node-1", lat)
	}
	if _, ok := got[kipPrefix+"record.queue.time.avg"]; !ok {
		t.Errorf("no record.queue.time.avg in %v", got)
	}
}

// TestTelemetryDisconnected: a push lost to a disconnection asks for the subscription again
// after its interval, keeping the instance id, on a node picked again (Java turns telemetry
// off here; see handleFailedRequest).
func TestTelemetryDisconnected(t *testing.T) {
	f := newTelemetryFixture(t)
	f.subscribe("*")
	if _, ok := f.update(500 * time.Millisecond).(*kmsg.PushTelemetryRequest); !ok {
		t.Fatal("no push")
	}
	f.answer(600*time.Millisecond, nil, network.ErrDisconnected)
	if f.p.node != nil {
		t.Fatal("the sticky node is kept after a disconnection")
	}
	if req := f.update(1599 * time.Millisecond); req != nil {
		t.Fatalf("sent %T before the interval", req)
	}
	req, ok := f.update(1600 * time.Millisecond).(*kmsg.GetTelemetrySubscriptionsRequest)
	if !ok || req.ClientInstanceID != testInstanceID {
		t.Fatalf("no re-subscription with the instance id after the interval (got %v)", req)
	}
}

// TestTelemetryTemporalityChange: a subscription that switches to delta starts a new ledger
// (Java's metricsReset): its first delta is the whole total, as Java's LastValueTracker gives
// for a metric it has no previous value of, not the change since the last cumulative push.
func TestTelemetryTemporalityChange(t *testing.T) {
	f := newTelemetryFixture(t)
	f.update(0)
	sub := subscription(1000, "*")
	sub.DeltaTemporality = false
	f.answer(0, sub, nil)
	f.m.recordsSent = 4
	f.update(500 * time.Millisecond)
	f.answer(500*time.Millisecond, pushAnswer(kerr.UnknownSubscriptionID.Code), nil)
	if _, ok := f.update(500 * time.Millisecond).(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatal("no re-subscription")
	}
	f.m.recordsSent = 9
	f.answer(600*time.Millisecond, subscription(1000, "*"), nil) // delta now
	f.m.recordsSent = 11
	req, ok := f.update(1100 * time.Millisecond).(*kmsg.PushTelemetryRequest)
	if !ok {
		t.Fatal("no push after the new subscription")
	}
	if v := metricsByName(decodePush(t, req))[kipPrefix+"record.send.total"].GetSum().DataPoints[0].GetAsDouble(); v != 11 {
		t.Fatalf("first delta after the switch = %v, want the whole total 11 (a new ledger), not 11-4", v)
	}
}

// TestTelemetryJitterBounds: the first push waits 0.5 to 1.5 push intervals.
func TestTelemetryJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		jitter float64
		first  time.Duration
	}{{0, 500 * time.Millisecond}, {0.5, time.Second}, {0.999, 1499 * time.Millisecond}} {
		f := newTelemetryFixture(t)
		f.p.jitter = func() float64 { return tc.jitter }
		f.subscribe("*")
		if req := f.update(tc.first - time.Millisecond); req != nil {
			t.Fatalf("jitter %v: pushed before %v", tc.jitter, tc.first)
		}
		if _, ok := f.update(tc.first).(*kmsg.PushTelemetryRequest); !ok {
			t.Fatalf("jitter %v: no push at %v", tc.jitter, tc.first)
		}
	}
}
