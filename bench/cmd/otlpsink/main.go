// Command otlpsink is the benchmark's stand-in for a telemetry backend: an OTLP/gRPC receiver
// on 127.0.0.1 that accepts traces, metrics and logs, counts them and throws them away, so
// that the tracing-cost runs of make bench pay the agent's real export cost (serialisation and
// gRPC) without a collector's own work. On SIGTERM or SIGINT it prints its counts as one JSON
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
)

type counts struct {
	TraceRequests  atomic.Int64
	Spans          atomic.Int64
	MetricRequests atomic.Int64
	DataPoints     atomic.Int64
	LogRecords     atomic.Int64
}

type traces struct {
	coltrace.UnimplementedTraceServiceServer
	c *counts
}

func (s traces) Export(_ context.Context, r *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.c.TraceRequests.Add(1)
	var n int64
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += int64(len(ss.Spans))
		}
	}
	s.c.Spans.Add(n)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metrics struct {
	colmetrics.UnimplementedMetricsServiceServer
	c *counts
}

func (s metrics) Export(_ context.Context, r *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	s.c.MetricRequests.Add(1)
	var n int64
	for _, rm := range r.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			n += int64(len(sm.Metrics))
		}
	}
	s.c.DataPoints.Add(n)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

type logs struct {
	collogs.UnimplementedLogsServiceServer
	c *counts
}

func (s logs) Export(_ context.Context, r *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	var n int64
	for _, rl := range r.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			n += int64(len(sl.LogRecords))
		}
	}
	s.c.LogRecords.Add(n)
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
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	coltrace.RegisterTraceServiceServer(srv, traces{c: c})
	colmetrics.RegisterMetricsServiceServer(srv, metrics{c: c})
	collogs.RegisterLogsServiceServer(srv, logs{c: c})
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
		"metric_requests": c.MetricRequests.Load(),
		"metrics":         c.DataPoints.Load(),
		"log_records":     c.LogRecords.Load(),
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
