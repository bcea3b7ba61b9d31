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
	"github.com/kafkatrail/kafkatrail/network"
)

// The names of the metrics pushed to the broker (KIP-714). They are the Java producer's
// metric names as its TelemetryMetricNamingConvention turns them into OpenTelemetry names:
// "org.apache.kafka." + the group without "-metrics" + the name, dashes become dots (group
// producer-metrics, record-queue-time-avg -> org.apache.kafka.producer.record.queue.time.avg;
// producer-node-metrics, request-latency-avg -> org.apache.kafka.producer.node.request.latency.avg).
const (
	kipPrefix      = "org.apache.kafka.producer."
	kipNodePrefix  = kipPrefix + "node."
	kipTopicPrefix = kipPrefix + "topic."
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
	recordsSent, batchSplits  int64
	recordRetries, recordErrs int64

	requestLatency stat // produce requests, every node (producer-metrics request-latency)
	throttle       stat // produce-throttle-time
	queueTime      stat // record-queue-time: drain time minus the batch's creation
	batchSize      stat // batch-size, bytes of a drained batch
	perRequest     stat // records-per-request
	requestSize    stat // request-size: bytes of every request's frame
	compression    stat // compression-rate: a drained batch's size over its uncompressed size

	// open holds the nodes with an established connection (connection-count); inFlight each
	// node's requests in flight (requests-in-flight).
	open     map[int32]bool
	inFlight map[int32]int
	nodes    map[int32]*nodeMetrics
	topics   map[string]*topicMetrics

	// lastCollect is when collect last ran: the rates divide by the time since then.
	lastCollect time.Time
	// last holds each total's value at the last collect, by series: the rates' base, and with
	// delta temporality the base of the pushed value.
	last map[seriesKey]float64
}

// nodeMetrics is a broker's share (the Java producer-node-metrics group, the Selector's
// per-node sensors).
type nodeMetrics struct {
	requests, responses, bytesOut, bytesIn int64
	latency, size                          stat
}

// topicMetrics is a topic's share (producer-topic-metrics), counted per batch.
type topicMetrics struct {
	records, bytes, retries, errors int64
}

// maxTelemetryNodes and maxTelemetryTopics bound the per-node and per-topic series: a
// cluster's brokers with room for the bootstrap entries (negative ids) a producer starts with,
// and as many topics as a --topic template may route to by default and more.
const (
	maxTelemetryNodes  = 256
	maxTelemetryTopics = 1000
)

// seriesKey names one series of the last values: a metric with its node or topic, if any.
type seriesKey struct {
	name  string
	node  int32
	topic string
}

func newClientMetrics(now time.Time) *clientMetrics {
	return &clientMetrics{start: now, lastCollect: now, open: map[int32]bool{}, inFlight: map[int32]int{},
		nodes: map[int32]*nodeMetrics{}, topics: map[string]*topicMetrics{}, last: map[seriesKey]float64{}}
}

func (m *clientMetrics) node(id int32) *nodeMetrics {
	n := m.nodes[id]
	if n == nil {
		if len(m.nodes) >= maxTelemetryNodes {
			return nil
		}
		n = &nodeMetrics{}
		m.nodes[id] = n
	}
	return n
}

func (m *clientMetrics) topic(name string) *topicMetrics {
	t := m.topics[name]
	if t == nil {
		if len(m.topics) >= maxTelemetryTopics {
			return nil
		}
		t = &topicMetrics{}
		m.topics[name] = t
	}
	return t
}

// drained records a batch that goes into a produce request (Java's updateProduceRequestMetrics).
func (m *clientMetrics) drained(b *accumulator.ProducerBatch, now time.Time) {
	if m == nil {
		return
	}
	records := int64(b.RecordCount())
	m.recordsSent += records
	m.queueTime.record(float64(now.Sub(b.Created).Milliseconds()))
	m.batchSize.record(float64(b.EstimatedSize()))
	if u := b.UncompressedSize() + accumulator.RecordBatchOverhead; u > 0 {
		m.compression.record(float64(b.EstimatedSize()) / float64(u))
	}
	if t := m.topic(b.TopicPartition.Topic); t != nil {
		t.records += records
		t.bytes += int64(b.EstimatedSize())
	}
}

// produceRequest records the records of one produce request (records-per-request).
func (m *clientMetrics) produceRequest(batches []*accumulator.ProducerBatch) {
	if m == nil {
		return
	}
	n := 0
	for _, b := range batches {
		n += b.RecordCount()
	}
	m.perRequest.record(float64(n))
}

// retried records a batch's records going back to the queue (Java's recordRetries).
func (m *clientMetrics) retried(b *accumulator.ProducerBatch) {
	if m == nil {
		return
	}
	m.recordRetries += int64(b.RecordCount())
	if t := m.topic(b.TopicPartition.Topic); t != nil {
		t.retries += int64(b.RecordCount())
	}
}

// failed records a batch's records failing (Java's recordErrors).
func (m *clientMetrics) failed(b *accumulator.ProducerBatch) {
	if m == nil {
		return
	}
	m.recordErrs += int64(b.RecordCount())
	if t := m.topic(b.TopicPartition.Topic); t != nil {
		t.errors += int64(b.RecordCount())
	}
}

// split records a batch split after MESSAGE_TOO_LARGE (batch-split).
func (m *clientMetrics) split() {
	if m != nil {
		m.batchSplits++
	}
}

// produceResponse records a produce response's latency (created to received, Java's
// requestLatencyMs) for its node and the producer, and its throttle time.
func (m *clientMetrics) produceResponse(resp *network.ClientResponse, throttleMs int32) {
	if m == nil {
		return
	}
	latency := float64(resp.Received.Sub(resp.Request.Created).Milliseconds())
	m.requestLatency.record(latency)
	if n := m.node(resp.Request.Destination); n != nil {
		n.latency.record(latency)
	}
	m.throttle.record(float64(throttleMs))
}

// ConnectionStateChanged implements network.Observer: a connection closing counts as Java's
// Selector connection-close.
func (m *clientMetrics) ConnectionStateChanged(node int32, state network.ConnectionState) {
	if state == network.Disconnected || state == network.AuthenticationFailed {
		m.connCloses++
		delete(m.open, node)
	}
}

// ConnectionSetupDone implements network.Observer: an established connection counts as
// Java's Selector connection-creation.
func (m *clientMetrics) ConnectionSetupDone(s network.ConnectionSetup) {
	if s.Err == nil {
		m.connCreations++
		m.open[s.Node] = true
	}
}

// RequestSent implements network.Observer (request-total, outgoing-byte-total, per node too).
func (m *clientMetrics) RequestSent(r *network.InFlightRequest, bytes int) {
	m.requests++
	m.bytesOut += int64(bytes)
	m.requestSize.record(float64(bytes))
	if n := m.node(r.Destination); n != nil {
		n.requests++
		n.bytesOut += int64(bytes)
		n.size.record(float64(bytes))
	}
}

// RequestDone implements network.Observer (response-total, incoming-byte-total, per node too).
func (m *clientMetrics) RequestDone(r *network.InFlightRequest, body kmsg.Response, received time.Time, bytes int, err error) {
	if body == nil {
		return
	}
	m.responses++
	m.bytesIn += int64(bytes)
	if n := m.node(r.Destination); n != nil {
		n.responses++
		n.bytesIn += int64(bytes)
	}
}

// InFlightRequests implements network.Observer (requests-in-flight).
func (m *clientMetrics) InFlightRequests(node int32, count int) {
	if count == 0 {
		delete(m.inFlight, node)
		return
	}
	m.inFlight[node] = count
}

// point is one data point of the push, before the name filter and the encoding.
type point struct {
	name   string
	node   int32 // node_id attribute when isNode
	topic  string
	isNode bool
	sum    bool // a monotonic Sum (a Java total); otherwise a Gauge
	value  float64
}

// collector builds one collect's points.
type collector struct {
	m      *clientMetrics
	delta  bool
	secs   float64
	points []point
}

// total adds a Java Meter's pair: name.total (a Sum, cumulative or since the last collect)
// and name.rate (a Gauge, per second since the last collect).
func (c *collector) total(k seriesKey, v int64) {
	prev := c.m.last[k]
	c.m.last[k] = float64(v)
	rate := 0.0
	if c.secs > 0 {
		rate = (float64(v) - prev) / c.secs
	}
	pushed := float64(v)
	if c.delta {
		pushed -= prev
	}
	isNode := k.topic == "" && k.node != noNode
	c.points = append(c.points,
		point{name: k.name + ".total", node: k.node, isNode: isNode, topic: k.topic, sum: true, value: pushed},
		point{name: k.name + ".rate", node: k.node, isNode: isNode, topic: k.topic, value: rate})
}

// sum adds a Java CumulativeSum: a Sum without a rate.
func (c *collector) sum(name string, v float64) {
	k := seriesKey{name: name, node: noNode}
	prev := c.m.last[k]
	c.m.last[k] = v
	if c.delta {
		v -= prev
	}
	c.points = append(c.points, point{name: name, sum: true, value: v})
}

func (c *collector) gauge(name string, v float64) {
	c.points = append(c.points, point{name: name, value: v})
}

// avgMax adds a stat's name.avg and name.max Gauges, for node if it is not noNode.
func (c *collector) avgMax(name string, node int32, s *stat) {
	avg, max := s.avgMax()
	isNode := node != noNode
	c.points = append(c.points, point{name: name + ".avg", node: node, isNode: isNode, value: avg},
		point{name: name + ".max", node: node, isNode: isNode, value: max})
}

// noNode marks a series that is not a node's (node ids of bootstrap entries are negative).
const noNode = math.MinInt32

// collect takes every metric's value now (Java's KafkaMetricsCollector.collect): totals as
// Sums, cumulative since start or, with delta, since the last collect; rates, averages,
// maxima and the gauges as Gauges. It starts the stats' next interval.
func (m *clientMetrics) collect(now time.Time, delta bool) (points []point, start time.Time) {
	c := &collector{m: m, delta: delta, secs: now.Sub(m.lastCollect).Seconds()}
	for _, t := range []struct {
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
		{"batch.split", m.batchSplits},
	} {
		c.total(seriesKey{name: kipPrefix + t.name, node: noNode}, t.v)
	}
	c.avgMax(kipPrefix+"record.queue.time", noNode, &m.queueTime)
	c.avgMax(kipPrefix+"produce.throttle.time", noNode, &m.throttle)
	c.avgMax(kipPrefix+"request.latency", noNode, &m.requestLatency)
	c.avgMax(kipPrefix+"batch.size", noNode, &m.batchSize)
	c.avgMax(kipPrefix+"request.size", noNode, &m.requestSize)
	perRequest, _ := m.perRequest.avgMax()
	c.gauge(kipPrefix+"records.per.request.avg", perRequest)
	compression, _ := m.compression.avgMax()
	c.gauge(kipPrefix+"compression.rate.avg", compression)
	c.gauge(kipPrefix+"connection.count", float64(len(m.open)))
	inFlight := 0
	for _, n := range m.inFlight {
		inFlight += n
	}
	c.gauge(kipPrefix+"requests.in.flight", float64(inFlight))
	if m.pool != nil {
		c.gauge(kipPrefix+"buffer.total.bytes", float64(m.pool.TotalMemory()))
		c.gauge(kipPrefix+"buffer.available.bytes", float64(m.pool.AvailableMemory()))
		c.sum(kipPrefix+"bufferpool.wait.time.ns.total", float64(m.pool.WaitTime().Nanoseconds()))
		c.total(seriesKey{name: kipPrefix + "buffer.exhausted", node: noNode}, m.pool.ExhaustedCount())
		c.gauge(kipPrefix+"waiting.threads", float64(m.pool.QueuedWaiters()))
	}
	nodes := make([]int32, 0, len(m.nodes))
	for id := range m.nodes {
		nodes = append(nodes, id)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	for _, id := range nodes {
		n := m.nodes[id]
		c.total(seriesKey{name: kipNodePrefix + "request", node: id}, n.requests)
		c.total(seriesKey{name: kipNodePrefix + "response", node: id}, n.responses)
		c.total(seriesKey{name: kipNodePrefix + "outgoing.byte", node: id}, n.bytesOut)
		c.total(seriesKey{name: kipNodePrefix + "incoming.byte", node: id}, n.bytesIn)
		c.avgMax(kipNodePrefix+"request.latency", id, &n.latency)
		c.avgMax(kipNodePrefix+"request.size", id, &n.size)
	}
	topics := make([]string, 0, len(m.topics))
	for name := range m.topics {
		topics = append(topics, name)
	}
	sort.Strings(topics)
	for _, name := range topics {
		t := m.topics[name]
		c.total(seriesKey{name: kipTopicPrefix + "record.send", node: noNode, topic: name}, t.records)
		c.total(seriesKey{name: kipTopicPrefix + "byte", node: noNode, topic: name}, t.bytes)
		c.total(seriesKey{name: kipTopicPrefix + "record.retry", node: noNode, topic: name}, t.retries)
		c.total(seriesKey{name: kipTopicPrefix + "record.error", node: noNode, topic: name}, t.errors)
	}
	start = m.start
	if delta {
		start = m.lastCollect
	}
	m.lastCollect = now
	return c.points, start
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
		switch {
		case p.isNode:
			// The Java client's node-id tag: "node-" and the id (node--1 for a bootstrap entry).
			dp.Attributes = []*commonpb.KeyValue{stringKV("node_id", "node-"+strconv.Itoa(int(p.node)))}
		case p.topic != "":
			dp.Attributes = []*commonpb.KeyValue{stringKV("topic", p.topic)}
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

var (
	_ network.Observer = (*clientMetrics)(nil)
	_ network.Observer = networkObservers{}
)

// networkObservers tells two network observers the same events: the telemetry's, the node
// health log's (nodehealth.go) and the client metrics', joined in pairs.
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

func (o networkObservers) RequestSent(r *network.InFlightRequest, bytes int) {
	o.a.RequestSent(r, bytes)
	o.b.RequestSent(r, bytes)
}

func (o networkObservers) RequestDone(r *network.InFlightRequest, body kmsg.Response, received time.Time, bytes int, err error) {
	o.a.RequestDone(r, body, received, bytes, err)
	o.b.RequestDone(r, body, received, bytes, err)
}

func (o networkObservers) InFlightRequests(node int32, count int) {
	o.a.InFlightRequests(node, count)
	o.b.InFlightRequests(node, count)
}
