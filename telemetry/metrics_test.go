package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// collect reads every metric the reader holds, by name.
func collect(t *testing.T, h *harness) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != InstrumentationName {
			t.Fatalf("metric scope %q, want %q", sm.Scope.Name, InstrumentationName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// kindOf names a metric's data the way MetricDesc.Kind does.
func kindOf(m metricdata.Metrics) string {
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64], metricdata.Histogram[int64]:
		return "histogram"
	case metricdata.Sum[int64]:
		if d.IsMonotonic {
			return "counter"
		}
		return "gauge"
	case metricdata.Sum[float64]:
		if d.IsMonotonic {
			return "counter"
		}
		return "gauge"
	case metricdata.Gauge[int64], metricdata.Gauge[float64]:
		return "gauge"
	}
	return "unknown"
}

// attrSets returns the attribute sets of a metric's data points, whatever its kind.
func attrSets(m metricdata.Metrics) []attribute.Set {
	for _, sets := range []func(metricdata.Aggregation) ([]attribute.Set, bool){
		histogramSets[float64], histogramSets[int64], sumSets[int64], sumSets[float64], gaugeSets[int64], gaugeSets[float64],
	} {
		if out, ok := sets(m.Data); ok {
			return out
		}
	}
	return nil
}

func histogramSets[N int64 | float64](a metricdata.Aggregation) ([]attribute.Set, bool) {
	d, ok := a.(metricdata.Histogram[N])
	return attrsOf(d.DataPoints, func(p *metricdata.HistogramDataPoint[N]) attribute.Set { return p.Attributes }), ok
}

func sumSets[N int64 | float64](a metricdata.Aggregation) ([]attribute.Set, bool) {
	d, ok := a.(metricdata.Sum[N])
	return attrsOf(d.DataPoints, pointAttrs[N]), ok
}

func gaugeSets[N int64 | float64](a metricdata.Aggregation) ([]attribute.Set, bool) {
	d, ok := a.(metricdata.Gauge[N])
	return attrsOf(d.DataPoints, pointAttrs[N]), ok
}

// attrsOf returns the attribute sets of points, as attrs reads one.
func attrsOf[P any](points []P, attrs func(*P) attribute.Set) []attribute.Set {
	out := make([]attribute.Set, 0, len(points))
	for i := range points {
		out = append(out, attrs(&points[i]))
	}
	return out
}

func pointAttrs[N int64 | float64](p *metricdata.DataPoint[N]) attribute.Set { return p.Attributes }

// sumOf adds up an int64 counter's points whose attributes include every one of want.
func sumOf(m metricdata.Metrics, want ...attribute.KeyValue) int64 {
	d, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return -1
	}
	var n int64
next:
	for _, p := range d.DataPoints {
		for _, kv := range want {
			if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
				continue next
			}
		}
		n += p.Value
	}
	return n
}

// TestMetricsHaveTheDocumentedNamesAndUnits drives a producer through success, a dropped
// connection, a retry, a broker failure and a connection that cannot be made, then checks that
// every producer and network metric in Metrics was produced with its documented kind, unit and
// attribute keys.
func TestMetricsHaveTheDocumentedNamesAndUnits(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders", "denied")
	var produced atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch {
		case producesTo(r, "denied"):
			return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
		case produced.Add(1) == 1:
			return nil, errors.New("injected: drop the connection"), true
		case produced.Load() == 2:
			return produceError(r, kerr.NotLeaderForPartition.Code), nil, true
		}
		return nil, nil, false
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, func(cfg *producer.Config) { cfg.CompressionType = "gzip" })
	for i := 0; i < 3; i++ {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte(strings.Repeat("v", 200)),
			Written: time.Now().Add(-time.Millisecond)}); o.err != nil {
			t.Fatalf("record %d: %v", i, o.err)
		}
	}
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "denied", Partition: producer.PartitionAny, Value: []byte("v")}); o.err == nil {
		t.Fatal("record to the denied topic succeeded")
	}
	// A second producer that cannot connect: connection failures, and a record failed in Send.
	bad := newProducer(t, []string{closedPort(t)}, h.obs, func(cfg *producer.Config) { cfg.MaxBlockMs = 300 })
	o := newOutcome()
	_ = bad.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, o.callback)
	o.wait(t)

	got := collect(t, h)
	for _, d := range Metrics {
		if strings.HasPrefix(d.Name, "kafkatrail.agent.") || d.Name == MetricSpansDropped || d.Name == MetricClientInstance {
			continue // AgentMetrics, Setup's span queue and WatchClientInstance; tested on their own
		}
		m, ok := got[d.Name]
		if !ok {
			t.Errorf("%s: not produced", d.Name)
			continue
		}
		if m.Unit != d.Unit {
			t.Errorf("%s: unit %q, documented %q", d.Name, m.Unit, d.Unit)
		}
		if k := kindOf(m); k != d.Kind {
			t.Errorf("%s: kind %s, documented %s", d.Name, k, d.Kind)
		}
		if m.Description == "" {
			t.Errorf("%s: no description", d.Name)
		}
		for _, set := range attrSets(m) {
			for _, kv := range set.ToSlice() {
				if !containsString(d.Attrs, string(kv.Key)) {
					t.Errorf("%s: attribute %s is not documented (documented: %v)", d.Name, kv.Key, d.Attrs)
				}
			}
		}
	}
	for name := range got {
		if !documented(name) {
			t.Errorf("%s: produced but not in Metrics", name)
		}
	}

	// A few values that pin the semantics down.
	dest := attribute.String(AttrMessagingDestinationName, "orders")
	// Every record attempted counts in sent.messages, the failed ones with their error.type;
	// the one that failed in Send (no metadata) was never attempted: records.failed only (the
	// conventions: sent.messages MUST NOT count messages created but not sent).
	if n := sumOf(got[MetricSentMessages], dest); n != 3 {
		t.Errorf("%s = %d for orders, want 3 (acknowledged; not the one failed in Send)", MetricSentMessages, n)
	}
	if n := sumOf(got[MetricSentMessages], dest, attribute.String(AttrErrorType, ErrorTypeMetadata)); n != 0 {
		t.Errorf("%s = %d for orders with error.type %s, want 0: the record never left Send", MetricSentMessages, n, ErrorTypeMetadata)
	}
	if n := sumOf(got[MetricSentMessages], attribute.String(AttrMessagingDestinationName, "denied"),
		attribute.String(AttrErrorType, "TOPIC_AUTHORIZATION_FAILED")); n != 1 {
		t.Errorf("%s = %d for the denied topic with its error.type, want 1", MetricSentMessages, n)
	}
	if n := sumOf(got[MetricRecordsRetried], dest, attribute.String(AttrErrorType, "NOT_LEADER_OR_FOLLOWER")); n != 1 {
		t.Errorf("%s = %d for NOT_LEADER_OR_FOLLOWER, want 1", MetricRecordsRetried, n)
	}
	if n := sumOf(got[MetricRecordsRetried], dest, attribute.String(AttrErrorType, ErrorTypeDisconnected)); n != 1 {
		t.Errorf("%s = %d for a dropped connection, want 1", MetricRecordsRetried, n)
	}
	if n := sumOf(got[MetricRecordsFailed], attribute.String(AttrMessagingDestinationName, "denied"),
		attribute.String(AttrErrorType, "TOPIC_AUTHORIZATION_FAILED")); n != 1 {
		t.Errorf("%s = %d for the denied topic, want 1", MetricRecordsFailed, n)
	}
	if n := sumOf(got[MetricRecordsFailed], dest, attribute.String(AttrErrorType, ErrorTypeMetadata)); n != 1 {
		t.Errorf("%s = %d for a metadata timeout, want 1", MetricRecordsFailed, n)
	}
	if n := sumOf(got[MetricConnectionCloses]); n < 1 {
		t.Errorf("%s = %d after a dropped connection", MetricConnectionCloses, n)
	}
	if n := sumOf(got[MetricConnectionFailures], attribute.String(AttrErrorType, ErrorTypeConnection)); n < 1 {
		t.Errorf("%s = %d after a refused connection", MetricConnectionFailures, n)
	}
	stages := map[string]bool{}
	for _, set := range attrSets(got[MetricStageDuration]) {
		v, _ := set.Value(AttrStage)
		stages[v.AsString()] = true
	}
	for _, s := range stageNames {
		if !stages[s] {
			t.Errorf("%s has no stage=%s", MetricStageDuration, s)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func documented(name string) bool {
	for _, d := range Metrics {
		if d.Name == name {
			return true
		}
	}
	return false
}

func TestAgentMetrics(t *testing.T) {
	h := newHarness(t, nil)
	a, err := NewAgentMetrics(h.mp)
	if err != nil {
		t.Fatal(err)
	}
	f := a.File("/var/log/app.log")
	f.Read(10, 1000)
	f.Truncated()
	f.Split()
	f.Dropped("too_long", 1)
	f.ContainerLines("joined", 3)
	f.ContainerLines("malformed", 1)
	f.SetPosition(5000, 1000, 400)
	in := a.File(StdinPath)
	in.Read(1, 5)
	a.RateLimitWait(time.Second)
	a.RateLimitWait(500 * time.Millisecond)
	tm := a.Topic("logs-api")
	tm.Lines(5, 3, 1)
	tm.Lines(0, 1, 0)
	a.Unrouted("missing", 2)
	a.EncodingFallback("timestamp", 3)
	a.SASLAuthentications(2, false)
	a.SASLAuthentications(1, true)
	a.TokenFetches(2, false)
	a.TokenFetches(1, true)
	a.DeadLettered("too_large", "file", 2)
	a.DeadLettered("too_large", "topic", 1)
	a.Resent(4)
	a.SendingStopped(true)

	got := collect(t, h)
	for _, d := range Metrics {
		if !strings.HasPrefix(d.Name, "kafkatrail.agent.") {
			continue
		}
		m, ok := got[d.Name]
		if !ok {
			t.Errorf("%s: not produced", d.Name)
			continue
		}
		if m.Unit != d.Unit || kindOf(m) != d.Kind {
			t.Errorf("%s: %s in %q, documented %s in %q", d.Name, kindOf(m), m.Unit, d.Kind, d.Unit)
		}
	}
	dest := attribute.String(AttrMessagingDestinationName, "logs-api")
	if s, k, f := sumOf(got[MetricAgentLinesSent], dest), sumOf(got[MetricAgentLinesAcked], dest), sumOf(got[MetricAgentLinesFailed], dest); s != 5 || k != 4 || f != 1 {
		t.Errorf("topic lines sent %d, acked %d, failed %d; want 5, 4, 1", s, k, f)
	}
	if n := sumOf(got[MetricAgentLinesUnrouted], attribute.String(AttrDropReason, "missing")); n != 2 {
		t.Errorf("unrouted %d, want 2", n)
	}
	if n := sumOf(got[MetricAgentLinesEncodingFallback], attribute.String(AttrDropReason, "timestamp")); n != 3 {
		t.Errorf("encoding fallbacks %d, want 3", n)
	}
	if c, r := sumOf(got[MetricAgentSASLAuthentications], attribute.String(AttrDropReason, "connect")),
		sumOf(got[MetricAgentSASLAuthentications], attribute.String(AttrDropReason, "reauthenticate")); c != 2 || r != 1 {
		t.Errorf("SASL authentications %d on connect and %d re-authentications, want 2 and 1", c, r)
	}
	if all, failed := sumOf(got[MetricAgentSASLTokenFetches]), sumOf(got[MetricAgentSASLTokenFetches], attribute.String(AttrErrorType, "token_fetch_failed")); all != 3 || failed != 1 {
		t.Errorf("token fetches %d, %d failed; want 3, 1 failed", all, failed)
	}
	if f, tp := sumOf(got[MetricAgentLinesDeadLettered], attribute.String(AttrDeadLetterDestination, "file")),
		sumOf(got[MetricAgentLinesDeadLettered], attribute.String(AttrDeadLetterDestination, "topic")); f != 2 || tp != 1 {
		t.Errorf("dead letters %d to the file and %d to the topic, want 2 and 1", f, tp)
	}
	if n := sumOf(got[MetricAgentLinesResent]); n != 4 {
		t.Errorf("resent %d, want 4", n)
	}
	if p := got[MetricAgentSendingStopped].Data.(metricdata.Gauge[int64]).DataPoints; len(p) != 1 || p[0].Value != 1 {
		t.Errorf("sending stopped %+v, want one point of 1", p)
	}
	// Standard input is kafkatrail.input="stdin", never a log.file.path of "-".
	if n := sumOf(got[MetricAgentBytesRead], attribute.String(AttrInput, "stdin")); n != 5 {
		t.Errorf("bytes read from stdin %d, want 5", n)
	}
	if n := sumOf(got[MetricAgentBytesRead], attribute.String(AttrLogFilePath, StdinPath)); n != 0 {
		t.Errorf("bytes read with log.file.path=%q: %d, want no such series", StdinPath, n)
	}
	path := attribute.String(AttrLogFilePath, "/var/log/app.log")
	if j, m := sumOf(got[MetricAgentContainerLines], attribute.String(AttrDropReason, "joined")),
		sumOf(got[MetricAgentContainerLines], attribute.String(AttrDropReason, "malformed")); j != 3 || m != 1 {
		t.Errorf("container lines joined %d, malformed %d; want 3, 1", j, m)
	}
	if n := sumOf(got[MetricAgentBytesRead], path); n != 1000 {
		t.Errorf("bytes read %d, want 1000", n)
	}
	if w := got[MetricAgentRateLimitWait].Data.(metricdata.Sum[float64]).DataPoints; len(w) != 1 || w[0].Value != 1.5 {
		t.Errorf("rate limit wait %+v, want one point of 1.5 s", w)
	}
	gauge := func(name string) int64 {
		for _, p := range got[name].Data.(metricdata.Gauge[int64]).DataPoints {
			_, stdin := p.Attributes.Value(AttrInput)
			if v, ok := p.Attributes.Value(AttrLogFilePath); (!ok && !stdin) || v.AsString() == "/var/log/app.log" {
				return p.Value
			}
		}
		return -1
	}
	if b, l, w := gauge(MetricAgentFileBehind), gauge(MetricAgentCheckpointLag), gauge(MetricAgentFilesWatched); b != 4000 || l != 600 || w != 2 {
		t.Errorf("behind %d, checkpoint lag %d, files watched %d; want 4000, 600, 2", b, l, w)
	}
	f.Close()
	in.Close()
	got = collect(t, h)
	if w := gauge(MetricAgentFilesWatched); w != 0 {
		t.Errorf("files watched %d after closing both, want 0", w)
	}
}

// TestAgentMetricsByInput: two inputs that follow one file report it as two series, told apart
// by kafkatrail.agent.input, their drops too.
func TestAgentMetricsByInput(t *testing.T) {
	h := newHarness(t, nil)
	a, err := NewAgentMetrics(h.mp)
	if err != nil {
		t.Fatal(err)
	}
	all, errs := a.InputFile("default", "/var/log/app.log"), a.InputFile("errors", "/var/log/app.log")
	all.Read(30, 3000)
	errs.Read(30, 3000)
	errs.Dropped("not_included", 20)
	got := collect(t, h)
	path := attribute.String(AttrLogFilePath, "/var/log/app.log")
	for input, want := range map[string]int64{"default": 30, "errors": 30} {
		if n := sumOf(got[MetricAgentLinesRead], path, attribute.String(AttrAgentInput, input)); n != want {
			t.Errorf("input %s: %d lines read, want %d", input, n, want)
		}
	}
	if n := sumOf(got[MetricAgentLinesRead], path); n != 60 {
		t.Errorf("%d lines read of the file in all, want 60", n)
	}
	if n := sumOf(got[MetricAgentLinesDropped], attribute.String(AttrAgentInput, "errors"), attribute.String(AttrDropReason, "not_included")); n != 20 {
		t.Errorf("%d lines dropped by input errors, want 20", n)
	}
}

// TestSentMessagesLeavesOutRecordsNeverSent: a record whose batch expired in its queue, never
// drained into a request (its leader's connection never became ready), was not attempted:
// messaging.client.sent.messages MUST NOT count it (the conventions), records.failed does.
func TestSentMessagesLeavesOutRecordsNeverSent(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "stuck"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.MoveTopicPartition("stuck", 0, 1); err != nil {
		t.Fatal(err)
	}
	// Node 1, the leader, closes every connection at ApiVersions: it never becomes ready.
	c.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() == 1 {
			return nil, errors.New("injected: node 1 refuses"), true
		}
		return nil, nil, false
	})
	p := newProducer(t, []string{c.ListenAddrs()[0]}, h.obs, func(cfg *producer.Config) {
		cfg.LingerMs, cfg.RequestTimeoutMs, cfg.DeliveryTimeoutMs = 0, 300, 800
	})
	o := newOutcome()
	_ = p.Send(context.Background(), &producer.Record{Topic: "stuck", Partition: 0, Value: []byte("v")}, o.callback)
	o.wait(t)
	var expired *producer.DeliveryTimeoutError
	if !errors.As(o.err, &expired) {
		t.Fatalf("the record's outcome: %v, want a delivery timeout", o.err)
	}
	// The batch's metrics are recorded after the records' callbacks (BatchDone).
	dest := attribute.String(AttrMessagingDestinationName, "stuck")
	var got map[string]metricdata.Metrics
	deadline := time.Now().Add(10 * time.Second)
	for got = collect(t, h); sumOf(got[MetricRecordsFailed], dest) != 1 && time.Now().Before(deadline); got = collect(t, h) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := sumOf(got[MetricRecordsFailed], dest); n != 1 {
		t.Errorf("%s = %d, want 1", MetricRecordsFailed, n)
	}
	if n := sumOf(got[MetricSentMessages], dest); n > 0 { // -1: no point at all
		t.Errorf("%s = %d for a record never sent, want none", MetricSentMessages, n)
	}
}
