package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/otel/trace"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/internal/grpctest"
	"github.com/kafkatrail/kafkatrail/producer"
)

// fakeCollector is an in-process OTLP/gRPC receiver for traces and metrics.
type fakeCollector struct {
	colltrace.UnimplementedTraceServiceServer

	mu       sync.Mutex
	spans    []string // span names
	services []string // service.name of every resource
	metrics  map[string]bool
	addr     string
}

func startCollector(t *testing.T) *fakeCollector {
	t.Helper()
	c := &fakeCollector{metrics: map[string]bool{}}
	c.addr = grpctest.Serve(t, func(srv *grpc.Server) { colltrace.RegisterTraceServiceServer(srv, c) })
	return c
}

func (c *fakeCollector) Export(_ context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.Resource.GetAttributes() {
			if kv.Key == "service.name" {
				c.services = append(c.services, kv.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, s.Name)
			}
		}
	}
	return &colltrace.ExportTraceServiceResponse{}, nil
}

// metricsExporter is the collector's metrics service; a type of its own because both
// services' methods are named Export.
type metricsExporter struct {
	collmetrics.UnimplementedMetricsServiceServer
	c *fakeCollector
}

func (m metricsExporter) Export(_ context.Context, req *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, x := range sm.Metrics {
				m.c.metrics[x.Name] = true
			}
		}
	}
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// clearOTelEnv unsets every OTEL_ variable a developer's shell may have, for this test.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(k, "")
	}
}

// TestSetupExportsOverOTLPgRPCByDefault runs a traced record through a producer wired the way
// the agent wires it, with nothing configured but the endpoint: spans and metrics must reach an
// OTLP/gRPC receiver by Shutdown, under OTEL_SERVICE_NAME.
func TestSetupExportsOverOTLPgRPCByDefault(t *testing.T) {
	clearOTelEnv(t)
	coll := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+coll.addr)
	t.Setenv("OTEL_SERVICE_NAME", "kafkatrail-test")
	// The metrics service listens on an endpoint of its own, which also exercises the per-signal variable.
	srvMetrics := startMetricsOnly(t, coll)
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://"+srvMetrics)

	sendOneTracedAndShutdown(t)

	coll.mu.Lock()
	defer coll.mu.Unlock()
	for _, want := range []string{"send orders", SpanAppend, SpanCallback, SpanConnect} {
		if !containsString(coll.spans, want) {
			t.Errorf("span %q not exported; got %v", want, coll.spans)
		}
	}
	if len(coll.services) == 0 || coll.services[0] != "kafkatrail-test" {
		t.Errorf("service.name %v, want kafkatrail-test", coll.services)
	}
	for _, want := range []string{MetricOperationDuration, MetricStageDuration, MetricInFlightRequests} {
		if !coll.metrics[want] {
			t.Errorf("metric %s not exported", want)
		}
	}
}

func startMetricsOnly(t *testing.T, c *fakeCollector) string {
	t.Helper()
	return grpctest.Serve(t, func(srv *grpc.Server) { collmetrics.RegisterMetricsServiceServer(srv, metricsExporter{c: c}) })
}

// TestShutdownIsBoundedWhenTheBackendIsDown: an exporter pointed at nothing must not hold the
// agent's exit past the shutdown timeout.
func TestShutdownIsBoundedWhenTheBackendIsDown(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+closedPort(t))
	prov, err := Setup(context.Background(), Config{SampleRatio: Ratio(1), ShutdownTimeout: 500 * time.Millisecond,
		ErrorLogger: slog.New(slog.DiscardHandler)}) // the failed exports are expected
	if err != nil {
		t.Fatal(err)
	}
	// Spans and metrics waiting for export.
	for i := 0; i < 100; i++ {
		_, span := prov.TracerProvider().Tracer("test").Start(markDecided(context.Background(), trace.TraceState{}), "s")
		span.End()
	}
	start := time.Now()
	_ = prov.Shutdown(context.Background()) // an error is expected: nothing could be exported
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v with a 500ms timeout", d)
	}
	start = time.Now()
	_ = prov.Shutdown(context.Background())
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("a second shutdown took %v: want it to return at once", d)
	}
}

func TestSetupWithExportersOff(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	prov, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Shutdown(context.Background())
	r := &producer.Record{Topic: "t"}
	for i := 0; i < 1000; i++ {
		if tr, _ := prov.Observer().StartSend(context.Background(), r, time.Now()); tr != nil {
			t.Fatal("a record was traced with OTEL_TRACES_EXPORTER=none")
		}
	}
}

func TestOTLPProtocolChoice(t *testing.T) {
	for _, tc := range []struct {
		exporter, signalProto, proto string
		grpc                         bool
	}{
		{"", "", "", true},
		{"otlp", "", "", true},
		{"otlp", "", "http/protobuf", false},
		{"otlp", "http/protobuf", "", false},
		{"", "grpc", "", false}, // an explicit choice goes through autoexport, which honours it
		{"console", "", "", false},
		{"none", "", "", false},
	} {
		t.Setenv("OTEL_TRACES_EXPORTER", tc.exporter)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tc.signalProto)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.proto)
		env := ReadEnv(os.Getenv)
		if got := env.otlpOverGRPC(env.TracesExporter, env.TracesProtocol); got != tc.grpc {
			t.Errorf("%+v: our gRPC default %v, want %v", tc, got, tc.grpc)
		}
	}
}

func TestSamplerConfiguration(t *testing.T) {
	for _, tc := range []struct {
		ratio        *float64
		env, arg     string
		desc         string // substring of the sampler's description
		tracing, bad bool
	}{
		{nil, "", "", "TraceIDRatioBased{0.01}", true, false},
		{Ratio(0.25), "always_on", "", "TraceIDRatioBased{0.25}", true, false}, // the flag wins
		{Ratio(0), "", "", "TraceIDRatioBased{0}", true, false},                // parent-based: a sampled line still traces,
		{Ratio(1.5), "", "", "", false, true},
		{nil, "always_on", "", "AlwaysOnSampler", true, false},
		{nil, "always_off", "", "AlwaysOffSampler", false, false},
		{nil, "traceidratio", "0.5", "TraceIDRatioBased{0.5}", true, false},
		{nil, "parentbased_traceidratio", "0.1", "ParentBased{root:TraceIDRatioBased{0.1}", true, false},
		{nil, "parentbased_traceidratio", "", "TraceIDRatioBased{1}", true, false},
		{nil, "parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler", true, false},
		{nil, "traceidratio", "lots", "", false, true},
		{nil, "jaeger_remote", "", "", false, true},
	} {
		t.Setenv("OTEL_TRACES_SAMPLER", tc.env)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
		s, tracing, err := samplerFromConfig(tc.ratio, ReadEnv(os.Getenv))
		if tc.bad {
			if err == nil {
				t.Errorf("%+v: no error", tc)
			}
			continue
		}
		if err != nil || tracing != tc.tracing || !strings.Contains(s.Description(), tc.desc) {
			t.Errorf("%+v: sampler %v, tracing %v, error %v", tc, s.Description(), tracing, err)
		}
	}
}

// TestSetupExportsTracesOverHTTP: with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf and
// gzip, a traced record's spans and the connection's reach an OTLP/HTTP receiver by Shutdown.
func TestSetupExportsTracesOverHTTP(t *testing.T) {
	clearOTelEnv(t)
	var mu sync.Mutex
	var names []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req colltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		mu.Unlock()
	}))
	defer srv.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	sendOneTracedAndShutdown(t)
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"send orders", SpanAppend, SpanDoSend, SpanCallback, SpanConnect} {
		if !containsString(names, want) {
			t.Errorf("span %q not exported; got %v", want, names)
		}
	}
}

// sendOneTracedAndShutdown sets telemetry up from the environment with every record traced,
// sends one record through a producer to an in-process kfake broker, closes the producer and
// shuts telemetry down: what Setup exported is then at its receivers.
func sendOneTracedAndShutdown(t *testing.T) {
	t.Helper()
	prov, err := Setup(context.Background(), Config{SampleRatio: Ratio(1), ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := newKfake(t, "orders")
	cfg := producer.DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	p, err := producer.New(cfg, prov.ProducerOption())
	if err != nil {
		t.Fatal(err)
	}
	o := newOutcome()
	_ = p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, o.callback)
	o.wait(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := prov.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
