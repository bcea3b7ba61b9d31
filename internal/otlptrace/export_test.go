package otlptrace

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/internal/grpctest"
)

// TestOTLPTraceConfigFromEnv: the variables mean what they mean to the SDK's exporters
// (otlpconfig.getOptionsFromEnv), and gRPC is the protocol when none is set.
func TestOTLPTraceConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Config
		err  bool
	}{
		{name: "defaults", want: Config{protocol: "grpc", grpcTarget: "localhost:4317", httpHost: "localhost:4318",
			httpPath: "/v1/traces", timeout: 10 * time.Second}},
		{name: "base endpoint over http", env: map[string]string{"ENDPOINT": "http://collector:4317/base", "PROTOCOL": "http/protobuf"},
			want: Config{protocol: "http/protobuf", grpcTarget: "collector:4317", httpHost: "collector:4317",
				httpPath: "/base/v1/traces", insecure: true, timeout: 10 * time.Second}},
		{name: "the signal's endpoint as it is", env: map[string]string{"ENDPOINT": "http://a:1", "TRACES_ENDPOINT": "https://b:2/custom"},
			want: Config{protocol: "grpc", grpcTarget: "b:2", httpHost: "b:2", httpPath: "/custom", timeout: 10 * time.Second}},
		{name: "a signal endpoint without path is the root", env: map[string]string{"TRACES_ENDPOINT": "http://b:2"},
			want: Config{protocol: "grpc", grpcTarget: "b:2", httpHost: "b:2", httpPath: "/", insecure: true, timeout: 10 * time.Second}},
		{name: "insecure overrides the scheme", env: map[string]string{"ENDPOINT": "https://a:1", "TRACES_INSECURE": "TRUE"},
			want: Config{protocol: "grpc", grpcTarget: "a:1", httpHost: "a:1", httpPath: "/v1/traces", insecure: true, timeout: 10 * time.Second}},
		{name: "headers, gzip, timeout; the signal's win", env: map[string]string{
			"HEADERS": "a=1", "TRACES_HEADERS": "api-key=se%20cret, x=y ,bad", "COMPRESSION": "none", "TRACES_COMPRESSION": "gzip",
			"TIMEOUT": "2000", "TRACES_TIMEOUT": "1500", "PROTOCOL": "http/protobuf", "TRACES_PROTOCOL": "grpc"},
			want: Config{protocol: "grpc", grpcTarget: "localhost:4317", httpHost: "localhost:4318", httpPath: "/v1/traces",
				headers: map[string]string{"api-key": "se cret", "x": "y"}, gzip: true, timeout: 1500 * time.Millisecond}},
		{name: "http/json is not supported", env: map[string]string{"TRACES_PROTOCOL": "http/json"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k[len("OTEL_EXPORTER_OTLP_"):]] }
			prev := otel.GetErrorHandler()
			otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) // the malformed header is reported
			defer otel.SetErrorHandler(prev)
			got, err := ConfigFromEnv(getenv, os.ReadFile)
			if tc.err {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.retryInitial = retryInitialInterval
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// recordingTraceService is an OTLP/gRPC receiver that keeps each request and its metadata,
// and fails the first failures calls with code.
type recordingTraceService struct {
	colltrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	reqs     []*colltrace.ExportTraceServiceRequest
	md       []metadata.MD
	failures int
	code     codes.Code
	partial  *colltrace.ExportTracePartialSuccess
}

func (s *recordingTraceService) Export(ctx context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	s.md = append(s.md, md)
	if s.failures > 0 {
		s.failures--
		return nil, status.Error(s.code, "try again")
	}
	s.reqs = append(s.reqs, req)
	return &colltrace.ExportTraceServiceResponse{PartialSuccess: s.partial}, nil
}

// handled collects what otel.Handle receives during the test.
func handled(t *testing.T) func() []error {
	var mu sync.Mutex
	var errs []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

// TestOTLPExporterGRPC: a batch goes to an OTLP/gRPC receiver as one request that decodes to
// the encoder's spans, gzip-compressed, with the configured headers; UNAVAILABLE is retried;
// a partial success is reported, not failed.
func TestOTLPExporterGRPC(t *testing.T) {
	svc := &recordingTraceService{failures: 1, code: codes.Unavailable,
		partial: &colltrace.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "too old"}}
	comp := &compressionSeen{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.StatsHandler(comp))
	colltrace.RegisterTraceServiceServer(srv, svc)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	addr := l.Addr().String()
	errs := handled(t)
	cfg := Config{protocol: ProtocolGRPC, grpcTarget: addr, insecure: true, gzip: true,
		headers: map[string]string{"api-key": "secret"}, timeout: 10 * time.Second, retryInitial: time.Millisecond}
	res := resource.NewSchemaless()
	exp, err := NewExporter(cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	spans := testRecordSpans(3)
	if err := exp.Export(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.md) != 2 || len(svc.reqs) != 1 {
		t.Fatalf("%d calls, %d requests kept: want the UNAVAILABLE one retried once", len(svc.md), len(svc.reqs))
	}
	if got := svc.md[1].Get("api-key"); len(got) != 1 || got[0] != "secret" {
		t.Errorf("api-key header %v", got)
	}
	if got := comp.get(); got != "gzip" {
		t.Errorf("request compression %q, want gzip", got)
	}
	want := decodeRequest(t, NewTraceEncoder(res).Encode(spans))
	if !proto.Equal(svc.reqs[0], want) {
		t.Errorf("received request differs from the encoded spans")
	}
	if n := len(svc.reqs[0].ResourceSpans[0].ScopeSpans[0].Spans); n != len(spans) {
		t.Errorf("%d spans received, want %d", n, len(spans))
	}
	if e := errs(); len(e) != 1 || e[0].Error() != "OTLP partial success: too old (2 spans rejected)" {
		t.Errorf("reported %v, want the partial success", e)
	}
}

// compressionSeen is a gRPC server stats handler that notes the compression of requests.
type compressionSeen struct {
	mu  sync.Mutex
	got string
}

func (c *compressionSeen) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (c *compressionSeen) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		c.mu.Lock()
		c.got = h.Compression
		c.mu.Unlock()
	}
}
func (c *compressionSeen) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *compressionSeen) HandleConn(context.Context, stats.ConnStats) {}
func (c *compressionSeen) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got
}

// TestOTLPExporterGRPCDoesNotRetryPermanentErrors: INVALID_ARGUMENT fails at once.
func TestOTLPExporterGRPCDoesNotRetryPermanentErrors(t *testing.T) {
	svc := &recordingTraceService{failures: 5, code: codes.InvalidArgument}
	addr := grpctest.Serve(t, func(srv *grpc.Server) { colltrace.RegisterTraceServiceServer(srv, svc) })
	exp, err := NewExporter(Config{protocol: ProtocolGRPC, grpcTarget: addr, insecure: true,
		timeout: 10 * time.Second, retryInitial: time.Millisecond}, resource.Empty())
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	if err := exp.Export(context.Background(), testRecordSpans(1)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("error %v, want InvalidArgument", err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.md) != 1 {
		t.Fatalf("%d calls, want 1", len(svc.md))
	}
}

// TestOTLPExporterHTTP: http/protobuf POSTs the same request to the traces path, gzip-encoded
// with the headers; 503 is retried after its Retry-After, 400 is not.
func TestOTLPExporterHTTP(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var bodies [][]byte
	var status400 atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.URL.Path != "/base/v1/traces" || r.Method != http.MethodPost ||
			r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("Content-Encoding") != "gzip" ||
			r.Header.Get("Api-Key") != "secret" {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		if status400.Load() {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		resp, _ := proto.Marshal(&colltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(resp)
	}))
	defer srv.Close()
	getenv := func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/base", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=secret"}[k]
	}
	cfg, err := ConfigFromEnv(getenv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.retryInitial = time.Millisecond
	res := resource.NewSchemaless()
	exp, err := NewExporter(cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	spans := testRecordSpans(2)
	if err := exp.Export(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want the 503 retried once", n)
	}
	mu.Lock()
	got := decodeRequest(t, bodies[0])
	mu.Unlock()
	if !proto.Equal(got, decodeRequest(t, NewTraceEncoder(res).Encode(spans))) {
		t.Fatal("received request differs from the encoded spans")
	}

	status400.Store(true)
	err = exp.Export(context.Background(), spans)
	if err == nil || calls.Load() != 3 {
		t.Fatalf("error %v after %d calls: want a 400 to fail at once", err, calls.Load())
	}
}

// TestOTLPExporterRetriesWithinTheDeadline: a backend that keeps answering UNAVAILABLE makes
// the export fail by its deadline, not retry past it.
func TestOTLPExporterRetriesWithinTheDeadline(t *testing.T) {
	svc := &recordingTraceService{failures: 1 << 30, code: codes.Unavailable}
	addr := grpctest.Serve(t, func(srv *grpc.Server) { colltrace.RegisterTraceServiceServer(srv, svc) })
	exp, err := NewExporter(Config{protocol: ProtocolGRPC, grpcTarget: addr, insecure: true,
		timeout: 300 * time.Millisecond, retryInitial: 10 * time.Millisecond}, resource.Empty())
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	start := time.Now()
	err = exp.Export(context.Background(), testRecordSpans(1))
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the export to fail", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("export took %v with a 300ms timeout", d)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.md) < 2 {
		t.Fatalf("%d calls: want retries", len(svc.md))
	}
}

// TestDecodePartialSuccess reads the response's partial_success as the generated types write it.
func TestDecodePartialSuccess(t *testing.T) {
	b, err := proto.Marshal(&colltrace.ExportTraceServiceResponse{PartialSuccess: &colltrace.ExportTracePartialSuccess{
		RejectedSpans: 7, ErrorMessage: "too old"}})
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 99, protowire.VarintType) // a field from a newer version
	b = protowire.AppendVarint(b, 1)
	if n, msg, ok := decodePartialSuccess(b); !ok || n != 7 || msg != "too old" {
		t.Fatalf("got %d %q %v, want 7 \"too old\" true", n, msg, ok)
	}
	if _, _, ok := decodePartialSuccess(nil); ok {
		t.Fatal("an empty response has no partial success")
	}
}

// testSpans returns n records' spans as the producer makes them (a send span and two stages,
// a shared encoded block on one), for the exporter's tests.
func testRecordSpans(n int) []Span {
	base := time.Now().UnixNano()
	topic := []attribute.KeyValue{attribute.String("messaging.system", "kafka"), attribute.String("messaging.destination.name", "orders")}
	block := NewAttrBlock(topic)
	var out []Span
	for r := range n {
		var tid trace.TraceID
		tid[0], tid[15] = byte(r+1), 1
		send := trace.SpanID{1, byte(r + 1)}
		at := base + int64(r)*1000
		out = append(out,
			Span{TraceID: tid, SpanID: trace.SpanID{2, byte(r + 1)}, ParentSpanID: send, Flags: trace.FlagsSampled,
				Name: "append", Kind: trace.SpanKindInternal, Start: at, End: at + 100},
			Span{TraceID: tid, SpanID: trace.SpanID{3, byte(r + 1)}, ParentSpanID: send, Flags: trace.FlagsSampled,
				Name: "callback", Kind: trace.SpanKindInternal, Start: at + 100, End: at + 200,
				Attributes: []attribute.KeyValue{attribute.Int("kafkatrail.attempt", 1)}},
			Span{TraceID: tid, SpanID: send, Flags: trace.FlagsSampled, Name: "send orders", Kind: trace.SpanKindProducer,
				Start: at, End: at + 200, Attributes: append(slices.Clip(topic), attribute.Int64("messaging.kafka.offset", int64(r))), Encoded: block})
	}
	return out
}

// decodeRequest decodes an encoded request with the generated OTLP types.
func decodeRequest(t testing.TB, b []byte) *colltrace.ExportTraceServiceRequest {
	t.Helper()
	var req colltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("the request does not decode: %v", err)
	}
	return &req
}
