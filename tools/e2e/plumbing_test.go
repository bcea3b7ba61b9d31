package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// TestPlumbing proves the backends without the agent: a tiny OpenTelemetry SDK emitter
// sends one trace over OTLP/gRPC to Jaeger and a counter and a histogram (with an exemplar)
// over OTLP/HTTP to Prometheus, then finds them through Jaeger's and Prometheus's HTTP
// APIs under the names the dashboards expect (counters end in _total, units are suffixes,
// service.name is the job label).
func TestPlumbing(t *testing.T) {
	jaegerURL, jaegerOTLP, promURL, promOTLP := observability(t)

	service := uniqueName("kafkatrail-e2e-plumbing")
	// The signal-specific endpoint is used as is (no /v1/metrics appended), as
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is.
	traceID := emit(t, service, jaegerOTLP, promOTLP)
	verifyEmitted(t, service, traceID, jaegerURL, promURL)
}

// TestCollectorConfig runs configs/otel-collector.yaml (with the Jaeger binary, itself an
// OpenTelemetry Collector build that has every component the file uses) between the
// emitter and the backends: traces must reach Jaeger and metrics Prometheus through it.
func TestCollectorConfig(t *testing.T) {
	jaegerURL, jaegerOTLP, promURL, promOTLP := observability(t)
	bin := backend(t, "JAEGER_BIN")

	grpcAddr, httpAddr := closedAddr(t), closedAddr(t)
	cmd := exec.Command(bin, "--config", "../../configs/otel-collector.yaml")
	cmd.Env = append(os.Environ(),
		"OTELCOL_GRPC_LISTEN="+grpcAddr,
		"OTELCOL_HTTP_LISTEN="+httpAddr,
		"JAEGER_OTLP_GRPC="+strings.TrimPrefix(jaegerOTLP, "http://"),
		"PROMETHEUS_OTLP="+strings.TrimSuffix(promOTLP, "/v1/metrics"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	err := poll(context.Background(), 20*time.Second, 100*time.Millisecond, func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("collector exited: %v", err)
		default:
		}
		for _, a := range []string{grpcAddr, httpAddr} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return false, err
			}
			c.Close()
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("collector with configs/otel-collector.yaml not listening on %s and %s: %v\n%s", grpcAddr, httpAddr, err, out.String())
	}

	service := uniqueName("kafkatrail-e2e-collector")
	traceID := emit(t, service, "http://"+grpcAddr, "http://"+httpAddr+"/v1/metrics")
	verifyEmitted(t, service, traceID, jaegerURL, promURL)
	if t.Failed() {
		t.Logf("collector output:\n%s", truncate(out.String(), 4000))
	}
}

// emit sends, as service, one trace over OTLP/gRPC to traceEndpoint and a counter and a
// histogram (recorded inside the span, so it carries an exemplar) over OTLP/HTTP to
// metricsEndpoint (used as is), for 2 s. It returns the trace id.
func emit(t *testing.T, service, traceEndpoint, metricsEndpoint string) string {
	t.Helper()
	ctx := context.Background()
	res := resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceInstanceID("emitter-1"))
	texp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(traceEndpoint))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(texp))
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(metricsEndpoint))
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(500*time.Millisecond))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))

	tracer := tp.Tracer("github.com/kafkatrail/kafkatrail/tools/e2e")
	meter := mp.Meter("github.com/kafkatrail/kafkatrail/tools/e2e")
	counter, err := meter.Int64Counter("kafkatrail.e2e.plumbing.events", metric.WithUnit("{event}"))
	if err != nil {
		t.Fatal(err)
	}
	hist, err := meter.Float64Histogram("kafkatrail.e2e.plumbing.duration", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	attrs := metric.WithAttributes(attribute.String("messaging.destination.name", "plumbing"))

	spanCtx, span := tracer.Start(ctx, "send plumbing")
	traceID := span.SpanContext().TraceID().String()
	for i := 0; i < 8; i++ {
		counter.Add(spanCtx, 1, attrs)
		hist.Record(spanCtx, 0.003+float64(i)*0.001, attrs)
		time.Sleep(250 * time.Millisecond)
	}
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("trace export to %s: %v", traceEndpoint, err)
	}
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatalf("metric export to %s: %v", metricsEndpoint, err)
	}
	return traceID
}

// verifyEmitted finds what emit sent: the trace in Jaeger, the translated metric names in
// Prometheus (counters end in _total, units are suffixes, job = service.name) and the
// exemplar that links the histogram to the trace.
func verifyEmitted(t *testing.T, service, traceID, jaegerURL, promURL string) {
	t.Helper()
	ctx := context.Background()
	err := poll(ctx, 20*time.Second, 200*time.Millisecond, func() (bool, error) {
		var r jaegerTraces
		if err := getJSON(ctx, jaegerURL, "/api/traces/"+traceID, nil, &r); err != nil {
			return false, err
		}
		if len(r.Data) != 1 || len(r.Data[0].Spans) != 1 {
			return false, fmt.Errorf("trace %s: %d traces", traceID, len(r.Data))
		}
		sp := r.Data[0].Spans[0]
		if sp.OperationName != "send plumbing" || r.Data[0].Processes[sp.ProcessID].ServiceName != service {
			return false, fmt.Errorf("span %q of service %q", sp.OperationName, r.Data[0].Processes[sp.ProcessID].ServiceName)
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("Jaeger: %v", err)
	}

	for _, expr := range []string{
		fmt.Sprintf(`kafkatrail_e2e_plumbing_events_total{job=%q, messaging_destination_name="plumbing"}`, service),
		fmt.Sprintf(`rate(kafkatrail_e2e_plumbing_events_total{job=%q}[1m])`, service),
		fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (rate(kafkatrail_e2e_plumbing_duration_seconds_bucket{job=%q}[1m])))`, service),
	} {
		err := poll(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, error) {
			n, err := promQuery(ctx, promURL, expr)
			return n > 0, err
		})
		if err != nil {
			t.Errorf("Prometheus: %s: %v", expr, err)
		}
	}

	err = poll(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, error) {
		ids, err := promExemplarTraceIDs(ctx, promURL,
			fmt.Sprintf(`kafkatrail_e2e_plumbing_duration_seconds_bucket{job=%q}`, service), time.Minute)
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			if id == traceID {
				return true, nil
			}
		}
		return false, fmt.Errorf("exemplar trace ids %v, want %s", ids, traceID)
	})
	if err != nil {
		t.Errorf("Prometheus exemplars: %v", err)
	}
}

// promQuery runs an instant PromQL query and returns the number of series (or 1 for a
// scalar) it returned.
func promQuery(ctx context.Context, base, expr string) (int, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     any    `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, base, "/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	switch v := r.Data.Result.(type) {
	case []any:
		return len(v), nil
	case nil:
		return 0, nil
	default:
		return 1, nil
	}
}

// promExemplarTraceIDs returns the trace_id of every exemplar of the series matching expr in
// the last window.
func promExemplarTraceIDs(ctx context.Context, base, expr string, window time.Duration) ([]string, error) {
	var r struct {
		Status string `json:"status"`
		Data   []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	now := time.Now()
	q := url.Values{"query": {expr}, "start": {fmt.Sprint(now.Add(-window).Unix())}, "end": {fmt.Sprint(now.Unix() + 1)}}
	if err := getJSON(ctx, base, "/api/v1/query_exemplars", q, &r); err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range r.Data {
		for _, e := range s.Exemplars {
			if id := e.Labels["trace_id"]; id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// Jaeger's /api/traces answer.
type jaegerTraces struct {
	Data []jaegerTrace `json:"data"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64  `json:"startTime"` // µs
	Duration  int64  `json:"duration"`  // µs
	ProcessID string `json:"processID"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

type jaegerProcess struct {
	ServiceName string `json:"serviceName"`
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}
