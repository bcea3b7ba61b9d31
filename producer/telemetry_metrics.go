package producer

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/network"
)

// The names of the metrics pushed to the broker (KIP-714). They are the Java producer's
// metric names as its TelemetryMetricNamingConvention turns them into OpenTelemetry names:
// "org.apache.kafka." + the group without "-metrics" + the name, dashes become dots (group
// producer-metrics, record-queue-time-avg -> org.apache.kafka.producer.record.queue.time.avg;
// producer-node-metrics, request-latency-avg -> org.apache.kafka.producer.node.request.latency.avg).
const (
	kipPrefix     = "org.apache.kafka.producer."
	kipNodePrefix = kipPrefix + "node."
)

// stat is one Avg and Max pair of the Java client's Sensors (queue-time, produce-throttle-time,
// request-latency, batch-size): the samples since the last push, so avg and max describe the push
// interval (the Java client's SampledStat keeps two 30 s windows instead).
type stat struct {
	n        int64
	sum, max float64
}

func (s *stat) record(v float64) {
	s.n++
	s.sum += v
	if s.n == 1 || v > s.max {
		s.max = v
	}
}

// avgMax returns the interval's average and maximum and starts a new interval. With no sample
// both are NaN, as the Java client's Avg and Max report an empty window.
func (s *stat) avgMax() (avg, max float64) {
	if s.n == 0 {
		return math.NaN(), math.NaN()
	}
	avg, max = s.sum/float64(s.n), s.max
	*s = stat{}
	return avg, max
}

// clientMetrics keeps the numbers the producer pushes to the broker: counters and Avg/Max
// stats the Java Sender's SenderMetrics and the Selector's metrics keep. Every method is
// called on the sender goroutine (the network Observer methods too: the NetworkClient calls
// them from its owner's goroutine) once per batch, request or connection, never per record; so
// nothing here locks. A nil *clientMetrics (enable.metrics.push=false) records nothing.
type clientMetrics struct {
	start time.Time
	pool  *accumulator.BufferPool

	connCreations, connCloses int64
	requests, bytesOut        int64
	responses, bytesIn        int64
	recordsSent, batches      int64
	recordRetries, recordErrs int64

	requestLatency stat // produce requests, every node (producer-metrics request-latency)
	nodeLatency    map[int32]*stat
	throttle       stat // produce-throttle-time
	queueTime      stat // record-queue-time: drain time minus the batch's creation
	batchSize      stat // batch-size, bytes of a drained batch

	// lastCollect is when collect last ran: the rates divide by the time since then.
	lastCollect time.Time
	// last holds each total's value at the last collect: the rates' base, and with delta
	// temporality the base of the pushed value.
	last map[string]float64
}

func newClientMetrics(now time.Time) *clientMetrics {
	return &clientMetrics{start: now, lastCollect: now, nodeLatency: map[int32]*stat{}, last: map[string]float64{}}
}

// drained records a batch that goes into a produce request (Java's updateProduceRequestMetrics).
func (m *clientMetrics) drained(b *accumulator.ProducerBatch, now time.Time) {
	if m == nil {
		return
	}
	m.batches++
	m.recordsSent += int64(b.RecordCount())
	m.queueTime.record(float64(now.Sub(b.Created).Milliseconds()))
	m.batchSize.record(float64(b.EstimatedSize()))
}

// retried records a batch's records going back to the queue (Java's recordRetries).
func (m *clientMetrics) retried(b *accumulator.ProducerBatch) {
	if m != nil {
		m.recordRetries += int64(b.RecordCount())
	}
}

// failed records a batch's records failing (Java's recordErrors).
func (m *clientMetrics) failed(b *accumulator.ProducerBatch) {
	if m != nil {
		m.recordErrs += int64(b.RecordCount())
	}
}

// produceResponse records a produce response's latency (created to received, Java's
// requestLatencyMs) for its node and the producer, and its throttle time.
func (m *clientMetrics) produceResponse(resp *inflight.Response, throttleMs int32) {
	if m == nil {
		return
	}
	latency := float64(resp.Received.Sub(resp.Request.Created).Milliseconds())
	m.requestLatency.record(latency)
	n := m.nodeLatency[resp.Request.Destination]
	if n == nil {
		if len(m.nodeLatency) >= maxTelemetryNodes {
			return
		}
		n = &stat{}
		m.nodeLatency[resp.Request.Destination] = n
	}
	n.record(latency)
	m.throttle.record(float64(throttleMs))
}

// maxTelemetryNodes bounds the per-node series: a cluster's brokers, with room for the
// bootstrap entries (negative ids) a producer starts with.
const maxTelemetryNodes = 256

// ConnectionStateChanged implements network.Observer: a connection closing counts as Java's
// Selector connection-close.
func (m *clientMetrics) ConnectionStateChanged(node int32, state network.ConnectionState) {
	if state == network.Disconnected {
		m.connCloses++
	}
}

// ConnectionSetupDone implements network.Observer: an established connection counts as
// Java's Selector connection-creation.
func (m *clientMetrics) ConnectionSetupDone(s network.ConnectionSetup) {
	if s.Err == nil {
		m.connCreations++
	}
}

// RequestSent implements network.Observer (request-total, outgoing-byte-total).
func (m *clientMetrics) RequestSent(r *inflight.Request, bytes int) {
	m.requests++
	m.bytesOut += int64(bytes)
}

// RequestDone implements network.Observer (response-total, incoming-byte-total).
func (m *clientMetrics) RequestDone(r *inflight.Request, body kmsg.Response, received time.Time, bytes int, err error) {
	if body != nil {
		m.responses++
		m.bytesIn += int64(bytes)
	}
}

// InFlightRequests implements network.Observer.
func (m *clientMetrics) InFlightRequests(node int32, count int) {}

// point is one data point of the push, before the name filter and the encoding.
type point struct {
	name   string
	node   int32 // node_id attribute when isNode
	isNode bool
	sum    bool // a monotonic Sum (a Java total); otherwise a Gauge
	value  float64
}

// collect takes every metric's value now (Java's KafkaMetricsCollector.collect): totals as
// Sums, cumulative since start or, with delta, since the last collect; rates, averages,
// maxima and the buffer gauges as Gauges. It starts the stats' next interval.
func (m *clientMetrics) collect(now time.Time, delta bool) (points []point, start time.Time) {
	secs := now.Sub(m.lastCollect).Seconds()
	totals := []struct {
		name string
		v    int64
	}{
		{"connection.creation", m.connCreations},
		{"connection.close", m.connCloses},
		{"request", m.requests},
		{"response", m.responses},
		{"outgoing.byte", m.bytesOut},
		{"incoming.byte", m.bytesIn},
		{"record.send", m.recordsSent},
		{"record.retry", m.recordRetries},
		{"record.error", m.recordErrs},
	}
	for _, t := range totals {
		name := kipPrefix + t.name
		v := float64(t.v)
		prev := m.last[name]
		rate := 0.0
		if secs > 0 {
			rate = (v - prev) / secs
		}
		pushed := v
		if delta {
			pushed = v - prev
		}
		m.last[name] = v
		points = append(points,
			point{name: name + ".total", sum: true, value: pushed},
			point{name: name + ".rate", value: rate})
	}
	pairs := []struct {
		name string
		s    *stat
	}{
		{"record.queue.time", &m.queueTime},
		{"produce.throttle.time", &m.throttle},
		{"request.latency", &m.requestLatency},
		{"batch.size", &m.batchSize},
	}
	for _, p := range pairs {
		avg, max := p.s.avgMax()
		points = append(points, point{name: kipPrefix + p.name + ".avg", value: avg}, point{name: kipPrefix + p.name + ".max", value: max})
	}
	nodes := make([]int32, 0, len(m.nodeLatency))
	for id := range m.nodeLatency {
		nodes = append(nodes, id)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	for _, id := range nodes {
		avg, max := m.nodeLatency[id].avgMax()
		points = append(points,
			point{name: kipNodePrefix + "request.latency.avg", node: id, isNode: true, value: avg},
			point{name: kipNodePrefix + "request.latency.max", node: id, isNode: true, value: max})
	}
	if m.pool != nil {
		points = append(points,
			point{name: kipPrefix + "buffer.total.bytes", value: float64(m.pool.TotalMemory())},
			point{name: kipPrefix + "buffer.available.bytes", value: float64(m.pool.AvailableMemory())},
			point{name: kipPrefix + "bufferpool.wait.time.ns.total", sum: true, value: m.poolWait(delta)})
	}
	start = m.start
	if delta {
		start = m.lastCollect
	}
	m.lastCollect = now
	return points, start
}

// poolWait is the buffer pool's bufferpool-wait-time-ns-total (a Java CumulativeSum), as pushed.
func (m *clientMetrics) poolWait(delta bool) float64 {
	const name = kipPrefix + "bufferpool.wait.time.ns.total"
	v := float64(m.pool.WaitTime().Nanoseconds())
	prev := m.last[name]
	m.last[name] = v
	if delta {
		return v - prev
	}
	return v
}

// resetDelta forgets the values last pushed, so the next delta push counts from now (Java's
// metricsReset when a subscription changes its temporality).
func (m *clientMetrics) resetDelta(now time.Time) {
	for k := range m.last {
		delete(m.last, k)
	}
	m.lastCollect = now
}

// selector is a subscription's RequestedMetrics (ClientTelemetryUtils.getSelectorFromRequestedMetrics):
// none for an empty list, all for a single "*", else the names with one of the prefixes (an
// empty prefix, the KIP's "all", matches every name).
type selector struct {
	all      bool
	prefixes []string
}

func newSelector(requested []string) selector {
	if len(requested) == 1 && requested[0] == "*" {
		return selector{all: true}
	}
	return selector{prefixes: requested}
}

func (s selector) none() bool { return !s.all && len(s.prefixes) == 0 }

func (s selector) match(name string) bool {
	if s.all {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// metricsData encodes points as an OTLP MetricsData (opentelemetry-proto metrics/v1), one
// ResourceMetrics for all of them: the Java client writes one per metric, each with the same
// resource, which a receiver reads the same way.
func metricsData(points []point, res []*commonpb.KeyValue, start, now time.Time, delta bool) *metricspb.MetricsData {
	temporality := metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	if delta {
		temporality = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	startNs, nowNs := uint64(start.UnixNano()), uint64(now.UnixNano())
	metrics := make([]*metricspb.Metric, 0, len(points))
	for _, p := range points {
		dp := &metricspb.NumberDataPoint{TimeUnixNano: nowNs, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: p.value}}
		if p.isNode {
			dp.Attributes = []*commonpb.KeyValue{stringKV("node_id", strconv.Itoa(int(p.node)))}
		}
		m := &metricspb.Metric{Name: p.name}
		if p.sum {
			dp.StartTimeUnixNano = startNs
			m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{
				DataPoints: []*metricspb.NumberDataPoint{dp}, AggregationTemporality: temporality, IsMonotonic: true}}
		} else {
			m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{dp}}}
		}
		metrics = append(metrics, m)
	}
	return &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     &resourcepb.Resource{Attributes: res},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: metrics}},
	}}}
}

func stringKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// networkObservers tells two network observers the same events: the telemetry's and the
// client metrics'.
type networkObservers struct{ a, b network.Observer }

// joinNetworkObservers returns b alone when a is nil, else both.
func joinNetworkObservers(a, b network.Observer) network.Observer {
	if a == nil {
		return b
	}
	return networkObservers{a, b}
}

func (o networkObservers) ConnectionStateChanged(node int32, state network.ConnectionState) {
	o.a.ConnectionStateChanged(node, state)
	o.b.ConnectionStateChanged(node, state)
}

func (o networkObservers) ConnectionSetupDone(s network.ConnectionSetup) {
	o.a.ConnectionSetupDone(s)
	o.b.ConnectionSetupDone(s)
}

func (o networkObservers) RequestSent(r *inflight.Request, bytes int) {
	o.a.RequestSent(r, bytes)
	o.b.RequestSent(r, bytes)
}

func (o networkObservers) RequestDone(r *inflight.Request, body kmsg.Response, received time.Time, bytes int, err error) {
	o.a.RequestDone(r, body, received, bytes, err)
	o.b.RequestDone(r, body, received, bytes, err)
}

func (o networkObservers) InFlightRequests(node int32, count int) {
	o.a.InFlightRequests(node, count)
	o.b.InFlightRequests(node, count)
}
