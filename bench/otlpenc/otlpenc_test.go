// Package otlpenc compares ways of exporting a traced record's seven spans over OTLP/gRPC: the
// OpenTelemetry SDK's (today's path before telemetry.RecordSpan), the Collector's pdata, and
// kafkatrail's protowire encoder. It lives in the bench module so that pdata stays out of the
// main module's dependencies.
//
//	cd bench && go test -run '^$' -bench OTLP -benchmem ./otlpenc/
//
// Every figure is per traced record (ns/op, allocs/op), 100 records to an export request:
// "encode" builds the spans and serialises the request; "export" also sends it over gRPC to an
// in-process receiver on 127.0.0.1 that discards it undecoded.
package otlpenc

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/telemetry"
)

const perRequest = 100 // records to an export request

// stage is one of a record's spans as the producer knows it at the callback.
type stage struct {
	name  string
	attrs []attribute.KeyValue
}

var (
	sendAttrs = []attribute.KeyValue{
		attribute.String(telemetry.AttrMessagingSystem, "kafka"), attribute.String(telemetry.AttrMessagingOperationName, "send"),
		attribute.String(telemetry.AttrMessagingOperationType, "send"), attribute.String(telemetry.AttrMessagingDestinationName, "orders"),
		attribute.String(telemetry.AttrMessagingClientID, "kafkatrail-agent"), attribute.String(telemetry.AttrTraceReason, telemetry.TraceReasonSampled),
		attribute.String(telemetry.AttrMessagingPartitionID, "3"), attribute.Int64(telemetry.AttrMessagingKafkaOffset, 123456789),
	}
	attempt = []attribute.KeyValue{attribute.Int(telemetry.AttrAttempt, 1)}
	stages  = []stage{{telemetry.SpanAppend, nil}, {telemetry.SpanDrain, attempt},
		{telemetry.SpanDoSend, []attribute.KeyValue{attribute.Int(telemetry.AttrAttempt, 1), attribute.Int(telemetry.AttrNodeID, 1),
			attribute.Int(telemetry.AttrMessagingBatchCount, 100), attribute.Int(telemetry.AttrBatchBytes, 16384),
			attribute.Int(telemetry.AttrCorrelationID, 4242), attribute.Int(telemetry.AttrAPIVersion, 11)}},
		{telemetry.SpanCompletedSend, attempt}, {telemetry.SpanCompletedReceive, attempt}, {telemetry.SpanCallback, nil}}
	res = resource.NewSchemaless(attribute.String("service.name", "kafkatrail-agent"),
		attribute.String("host.name", "bench"), attribute.String("telemetry.sdk.language", "go"))
)

func ids(r int) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	var s trace.SpanID
	t[0], t[15], s[0], s[7] = byte(r), byte(r>>8), byte(r), 1
	return t, s
}

func spanID(r, i int) trace.SpanID {
	return trace.SpanID{byte(r), byte(r >> 8), byte(i), 2, 3, 4, 5, 6}
}

// discardCodec is the receiver's: requests are not decoded (the sink stands for a collector
// elsewhere), responses are empty.
type discardCodec struct{}

func (discardCodec) Name() string { return "proto" }
func (discardCodec) Marshal(any) (mem.BufferSlice, error) {
	return mem.BufferSlice{}, nil
}
func (discardCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

var _ encoding.CodecV2 = discardCodec{}

type sink struct {
	coltrace.UnimplementedTraceServiceServer
}

func (sink) Export(context.Context, *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// startSink serves an OTLP/gRPC trace receiver that discards, until the benchmark ends.
func startSink(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(discardCodec{}))
	coltrace.RegisterTraceServiceServer(srv, sink{})
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(srv.Stop)
	return l.Addr().String()
}

// sdkSpans builds a request's spans as the direct path did before RecordSpan: SpanStubs
// snapshotted into read-only spans.
func sdkSpans(out []sdktrace.ReadOnlySpan, now time.Time) []sdktrace.ReadOnlySpan {
	scope := instrumentation.Scope{Name: telemetry.InstrumentationName}
	for r := range perRequest {
		tid, send := ids(r)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: send, TraceFlags: trace.FlagsSampled})
		at := now
		for i, st := range stages {
			stub := tracetest.SpanStub{Name: st.name, SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: spanID(r, i), TraceFlags: trace.FlagsSampled}), Parent: sc,
				SpanKind: trace.SpanKindInternal, StartTime: at, EndTime: at.Add(100), Attributes: st.attrs,
				Resource: res, InstrumentationScope: scope}
			out = append(out, stub.Snapshot())
			at = at.Add(100)
		}
		stub := tracetest.SpanStub{Name: "send orders", SpanContext: sc, SpanKind: trace.SpanKindProducer, StartTime: now,
			EndTime: at, Attributes: sendAttrs, ChildSpanCount: len(stages), Resource: res, InstrumentationScope: scope}
		out = append(out, stub.Snapshot())
	}
	return out
}

// recordSpans builds a request's spans as the direct path does now.
func recordSpans(out []telemetry.RecordSpan, now int64) []telemetry.RecordSpan {
	for r := range perRequest {
		tid, send := ids(r)
		at := now
		for i, st := range stages {
			out = append(out, telemetry.RecordSpan{TraceID: tid, SpanID: spanID(r, i), ParentSpanID: send,
				Flags: trace.FlagsSampled, Name: st.name, Kind: trace.SpanKindInternal, Start: at, End: at + 100,
				Attributes: st.attrs})
			at += 100
		}
		out = append(out, telemetry.RecordSpan{TraceID: tid, SpanID: send, Flags: trace.FlagsSampled, Name: "send orders",
			Kind: trace.SpanKindProducer, Start: now, End: at, Attributes: sendAttrs})
	}
	return out
}

// putAttrs copies attributes into a pdata map (the producer's are strings and ints).
func putAttrs(m pcommon.Map, attrs []attribute.KeyValue) {
	m.EnsureCapacity(len(attrs))
	for _, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.STRING:
			m.PutStr(string(kv.Key), kv.Value.AsString())
		case attribute.INT64:
			m.PutInt(string(kv.Key), kv.Value.AsInt64())
		case attribute.BOOL:
			m.PutBool(string(kv.Key), kv.Value.AsBool())
		case attribute.FLOAT64:
			m.PutDouble(string(kv.Key), kv.Value.AsFloat64())
		}
	}
}

// pdataTraces builds a request's spans with the Collector's pdata.
func pdataTraces(now int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	putAttrs(rs.Resource().Attributes(), res.Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(telemetry.InstrumentationName)
	spans := ss.Spans()
	spans.EnsureCapacity(perRequest * (len(stages) + 1))
	for r := range perRequest {
		tid, send := ids(r)
		at := now
		for i, st := range stages {
			s := spans.AppendEmpty()
			s.SetTraceID(pcommon.TraceID(tid))
			s.SetSpanID(pcommon.SpanID(spanID(r, i)))
			s.SetParentSpanID(pcommon.SpanID(send))
			s.SetName(st.name)
			s.SetKind(ptrace.SpanKindInternal)
			s.SetStartTimestamp(pcommon.Timestamp(at))
			s.SetEndTimestamp(pcommon.Timestamp(at + 100))
			putAttrs(s.Attributes(), st.attrs)
			at += 100
		}
		s := spans.AppendEmpty()
		s.SetTraceID(pcommon.TraceID(tid))
		s.SetSpanID(pcommon.SpanID(send))
		s.SetName("send orders")
		s.SetKind(ptrace.SpanKindProducer)
		s.SetStartTimestamp(pcommon.Timestamp(now))
		s.SetEndTimestamp(pcommon.Timestamp(at))
		putAttrs(s.Attributes(), sendAttrs)
	}
	return td
}

// marshalClient serialises each export as the SDK's gRPC client does and sends it nowhere.
type marshalClient struct{}

func (marshalClient) Start(context.Context) error { return nil }
func (marshalClient) Stop(context.Context) error  { return nil }
func (marshalClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	_, err := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: rs})
	return err
}

// rawCodec sends telemetry.TraceEncoder's bytes as they are, as the agent's exporter does.
type rawCodec struct{}

func (rawCodec) Name() string                       { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }

func dial(b *testing.B, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

// BenchmarkOTLPCandidates: see the package comment.
func BenchmarkOTLPCandidates(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	b.Run("sdk/encode", func(b *testing.B) {
		exp := otlptrace.NewUnstarted(marshalClient{})
		var spans []sdktrace.ReadOnlySpan
		b.ReportAllocs()
		for i := 0; i < b.N; i += perRequest {
			spans = sdkSpans(spans[:0], now)
			if err := exp.ExportSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk/export", func(b *testing.B) {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(startSink(b)), otlptracegrpc.WithInsecure())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = exp.Shutdown(ctx) })
		var spans []sdktrace.ReadOnlySpan
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += perRequest {
			spans = sdkSpans(spans[:0], now)
			if err := exp.ExportSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pdata/encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i += perRequest {
			req := ptraceotlp.NewExportRequestFromTraces(pdataTraces(now.UnixNano()))
			if _, err := req.MarshalProto(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pdata/export", func(b *testing.B) {
		client := ptraceotlp.NewGRPCClient(dial(b, startSink(b)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += perRequest {
			req := ptraceotlp.NewExportRequestFromTraces(pdataTraces(now.UnixNano()))
			if _, err := client.Export(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protowire/encode", func(b *testing.B) {
		enc := telemetry.NewTraceEncoder(res)
		var spans []telemetry.RecordSpan
		b.ReportAllocs()
		for i := 0; i < b.N; i += perRequest {
			spans = recordSpans(spans[:0], now.UnixNano())
			enc.Encode(spans)
		}
	})
	b.Run("protowire/export", func(b *testing.B) {
		conn := dial(b, startSink(b))
		enc := telemetry.NewTraceEncoder(res)
		var spans []telemetry.RecordSpan
		var resp []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += perRequest {
			spans = recordSpans(spans[:0], now.UnixNano())
			body := enc.Encode(spans)
			if err := conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &body, &resp,
				grpc.ForceCodec(rawCodec{})); err != nil {
				b.Fatal(err)
			}
		}
	})
}
