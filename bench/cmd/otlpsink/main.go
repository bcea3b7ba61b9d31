// Command otlpsink is the benchmark's stand-in for a telemetry backend: an OTLP/gRPC receiver
// on 127.0.0.1 that accepts traces, metrics and logs, counts them (without decoding them: see
// countingCodec) and throws them away, so that the tracing-cost runs of make bench pay the
// agent's real export cost (serialisation and gRPC) without a collector's own work. On SIGTERM or SIGINT it prints its counts as one JSON
// line on standard output and exits.
//
//	otlpsink --listen 127.0.0.1:4317
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

type counts struct {
	TraceRequests  atomic.Int64
	Spans          atomic.Int64
	TraceBytes     atomic.Int64 // the trace requests' encoded size (uncompressed)
	MetricRequests atomic.Int64
	DataPoints     atomic.Int64
	LogRecords     atomic.Int64
}

// countingCodec counts the items of an export request without decoding it: the sink stands
// for a collector on another machine, so its CPU should not compete with the agent's on the
// benchmark's two cores (decoding 140k spans into Go structs cost 0.8 CPU seconds, as much as
// the agent spent exporting them). Requests reach the handlers empty; responses are encoded
// by the proto codec.
type countingCodec struct {
	c     *counts
	proto encoding.CodecV2
}

func (countingCodec) Name() string { return "proto" }

func (k countingCodec) Marshal(v any) (mem.BufferSlice, error) { return k.proto.Marshal(v) }

func (k countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var n *atomic.Int64
	switch v.(type) {
	case *coltrace.ExportTraceServiceRequest:
		n = &k.c.Spans
	case *colmetrics.ExportMetricsServiceRequest:
		n = &k.c.DataPoints
	case *collogs.ExportLogsServiceRequest:
		n = &k.c.LogRecords
	default:
		return k.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	items, err := countItems(buf.ReadOnlyData())
	if err != nil {
		return err
	}
	n.Add(items)
	if n == &k.c.Spans {
		k.c.TraceBytes.Add(int64(len(buf.ReadOnlyData())))
	}
	return nil
}

// countItems counts the spans (metrics, log records) of an OTLP export request. The three
// requests share a shape: field 1 repeats Resource{Spans,Metrics,Logs}, whose field 2 repeats
// Scope{Spans,Metrics,Logs}, whose field 2 repeats the items.
func countItems(b []byte) (int64, error) {
	var n int64
	err := eachMessage(b, 1, func(resource []byte) error {
		return eachMessage(resource, 2, func(scope []byte) error {
			return eachMessage(scope, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachMessage calls fn with every length-delimited field numbered num in b.
func eachMessage(b []byte, num protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if f == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := fn(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
}

type traces struct {
	coltrace.UnimplementedTraceServiceServer
	c *counts
}

func (s traces) Export(context.Context, *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.c.TraceRequests.Add(1)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metrics struct {
	colmetrics.UnimplementedMetricsServiceServer
	c *counts
}

func (s metrics) Export(context.Context, *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	s.c.MetricRequests.Add(1)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

type logs struct {
	collogs.UnimplementedLogsServiceServer
}

func (logs) Export(context.Context, *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	return &collogs.ExportLogsServiceResponse{}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4317", "address to listen on (keep it on loopback)")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
	c := &counts{}
	codec := countingCodec{c: c, proto: encoding.GetCodecV2("proto")}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.ForceServerCodecV2(codec))
	coltrace.RegisterTraceServiceServer(srv, traces{c: c})
	colmetrics.RegisterMetricsServiceServer(srv, metrics{c: c})
	collogs.RegisterLogsServiceServer(srv, logs{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Stop()
	}()
	fmt.Fprintln(os.Stderr, "otlpsink: listening on", ln.Addr())
	_ = srv.Serve(ln)
	out := map[string]int64{
		"trace_requests":  c.TraceRequests.Load(),
		"spans":           c.Spans.Load(),
		"trace_bytes":     c.TraceBytes.Load(),
		"metric_requests": c.MetricRequests.Load(),
		"metrics":         c.DataPoints.Load(),
		"log_records":     c.LogRecords.Load(),
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
