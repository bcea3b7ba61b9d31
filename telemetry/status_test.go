package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kafkatrail/kafkatrail/producer"
)

// TestSetupExtraProcessorAndReader: with both exporters off, the extra span processor still
// gets every stage of a traced record and the extra reader the metrics (the status page's
// case: traces and /metrics with no collector at hand).
func TestSetupExtraProcessorAndReader(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	rec := tracetest.NewSpanRecorder()
	hist := NewHistograms() // the per-record histograms reach the extra reader as its producer
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	prov, err := Setup(context.Background(), Config{SampleRatio: Ratio(1), ExtraSpanProcessor: rec, ExtraMetricReader: reader, Histograms: hist})
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Shutdown(context.Background())
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), prov.Observer(), nil)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
	}
	for _, want := range []string{"send orders", SpanAppend, SpanDrain, SpanDoSend, SpanCompletedSend, SpanCompletedReceive, SpanCallback} {
		if names[want] == 0 {
			t.Errorf("span %q not seen by the extra processor; got %v", want, names)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	for _, want := range []string{MetricOperationDuration, MetricStageDuration, MetricInFlightRequests, MetricAgentFilesWatched} {
		if !seen[want] {
			t.Errorf("metric %s not read by the extra reader", want)
		}
	}
}

func TestObserverStatus(t *testing.T) {
	h := newHarness(t, nil)
	if s := h.obs.Status(); !s.MetadataAt.IsZero() || len(s.Nodes) != 0 {
		t.Fatalf("status before any connection: %+v", s)
	}
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	before := time.Now()
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	s := h.obs.Status()
	if s.MetadataAt.Before(before.Add(-time.Second)) {
		t.Errorf("metadata time %v, want after %v", s.MetadataAt, before)
	}
	var ready int
	for _, n := range s.Nodes {
		if n.Ready() {
			ready++
			if n.Addr == "" || n.LastError != "" || n.InFlight != 0 {
				t.Errorf("ready node %+v: want an address, no error, nothing in flight", n)
			}
		}
	}
	if ready == 0 {
		t.Errorf("no READY node in %+v", s.Nodes)
	}

	// A broker that refuses connections: the node's last error says so, and it is not ready.
	h2 := newHarness(t, nil)
	addr := closedPort(t)
	p2 := newProducer(t, []string{addr}, h2.obs, func(c *producer.Config) { c.MaxBlockMs = 300 })
	_ = p2.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny}, func(producer.RecordMetadata, error) {})
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := h2.obs.Status()
		if len(s.Nodes) > 0 && s.Nodes[0].LastError != "" {
			if n := s.Nodes[0]; n.Ready() || n.Addr != addr || !s.MetadataAt.IsZero() {
				t.Errorf("refused node %+v, metadata at %v", n, s.MetadataAt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection error after 10s: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSetupNothingExportedInstallsNoObserver: with both exporters none and nothing extra, the
// producer gets no observer (nothing would read it); with a reader, it does.
func TestSetupNothingExportedInstallsNoObserver(t *testing.T) {
	for _, withReader := range []bool{false, true} {
		t.Run(fmt.Sprintf("reader=%v", withReader), func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_TRACES_EXPORTER", "none")
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			cfg := Config{}
			if withReader {
				cfg.ExtraMetricReader = sdkmetric.NewManualReader()
			}
			prov, err := Setup(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prov.Shutdown(context.Background())
			c := newKfake(t, "orders")
			p, err := producer.New(func() producer.Config {
				pc := producer.DefaultConfig()
				pc.BootstrapServers = c.ListenAddrs()
				return pc
			}(), prov.ProducerOption())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
				t.Fatal(o.err)
			}
			if seen := len(prov.Observer().Status().Nodes) > 0; seen != withReader {
				t.Fatalf("the observer saw the broker connection: %v; want %v", seen, withReader)
			}
		})
	}
}

// TestWatchClientInstance: the client instance id the broker assigned reaches the metric
// readers as kafkatrail.producer.client.instance, once it is known; nothing before.
func TestWatchClientInstance(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	reader := sdkmetric.NewManualReader()
	prov, err := Setup(context.Background(), Config{ExtraMetricReader: reader})
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Shutdown(context.Background())
	var id atomic.Pointer[string]
	if err := prov.WatchClientInstance(func() string {
		if v := id.Load(); v != nil {
			return *v
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]metricdata.Metrics {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]metricdata.Metrics{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
		return out
	}
	if m, ok := read()[MetricClientInstance]; ok && len(m.Data.(metricdata.Gauge[int64]).DataPoints) > 0 {
		t.Fatalf("%s before the broker assigned an id: %+v", MetricClientInstance, m.Data)
	}
	v := "Ck1Zq2yTRbOq3J6z0l4mFw"
	id.Store(&v)
	m := read()[MetricClientInstance]
	g, ok := m.Data.(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 1 {
		t.Fatalf("%s = %+v, want one point of 1", MetricClientInstance, m.Data)
	}
	if got, _ := g.DataPoints[0].Attributes.Value(AttrClientInstanceID); got.AsString() != v {
		t.Fatalf("%s's %s = %q, want %q", MetricClientInstance, AttrClientInstanceID, got.AsString(), v)
	}
}
