package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// TestExportFailuresLoggedOnceThenRecovery runs Setup's exporters, both OTLP/gRPC, against an
// address where no collector listens, with short intervals: however many exports fail, each
// signal's failure is one warning that says how to turn its export off, and nothing else
// reaches the log above debug (the metric reader hands every failure to otel.Handle). Once a
// collector listens there, each signal logs one info line that its export works again.
func TestExportFailuresLoggedOnceThenRecovery(t *testing.T) {
	clearOTelEnv(t)
	addr := closedPort(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	prev := otel.GetErrorHandler()
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	logs := testkit.NewLogs()
	prov, err := Setup(context.Background(), Config{SampleRatio: Ratio(1), ShutdownTimeout: 2 * time.Second,
		ErrorLogger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })

	// A span to export at every interval.
	stop := make(chan struct{})
	spansDone := make(chan struct{})
	go func() {
		defer close(spansDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, span := prov.TracerProvider().Tracer("test").Start(markDecided(context.Background(), trace.TraceState{}), "s")
				span.End()
			}
		}
	}()
	defer func() {
		close(stop)
		<-spansDone
	}()

	// Four failed exports of each signal: the first is the warning, the next three at debug.
	for _, signal := range []string{"traces", "metrics"} {
		logs.WaitCount(t, 15*time.Second, slog.LevelDebug, "exporting "+signal+" failed again", 3)
	}
	warns := logs.All(slog.LevelWarn)
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want one per signal:\n%s", len(warns), logs.String())
	}
	for _, want := range []struct{ signal, hint string }{
		{"traces", "OTEL_TRACES_EXPORTER=none"}, {"metrics", "OTEL_METRICS_EXPORTER=none"},
	} {
		w := logs.Records(slog.LevelWarn, "exporting "+want.signal+" to ")
		if len(w) != 1 || !strings.Contains(w[0].Message, want.hint) || !strings.Contains(w[0].Message, addr) {
			t.Errorf("%s: warnings %v, want one naming %s and saying %s", want.signal, w, addr, want.hint)
		}
	}

	// The status page's account of it: both exports failing, since the first failure.
	st := prov.Status()
	if len(st.Exports) != 2 || st.Exports[0].Signal != "traces" || st.Exports[1].Signal != "metrics" {
		t.Fatalf("Status().Exports = %+v, want traces and metrics", st.Exports)
	}
	for _, e := range st.Exports {
		if e.FailingSince.IsZero() || e.FailedExports < 4 || e.Exports < e.FailedExports || e.LastError == "" || !strings.Contains(e.Endpoint, addr) {
			t.Errorf("%s export status %+v, want failing for 4 exports or more, with the error and %s", e.Signal, e, addr)
		}
	}

	// A collector comes up where the exporters send.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening where the exporters send: %v", err)
	}
	coll := &fakeCollector{metrics: map[string]bool{}}
	srv := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(srv, coll)
	collmetrics.RegisterMetricsServiceServer(srv, metricsExporter{c: coll})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	// The trace exporter names its gRPC target, the metric exporter the variable as given.
	for signal, endpoint := range map[string]string{"traces": addr, "metrics": "http://" + addr} {
		rec := logs.Wait(t, 20*time.Second, slog.LevelInfo, "exporting "+signal+" to "+endpoint+" works again after ")
		if rec.Level != slog.LevelInfo || rec.Attrs["failed_exports"].Int64() < 4 || rec.Attrs["failed_for"].Duration() <= 0 {
			t.Errorf("%s recovery: %v %q %v", signal, rec.Level, rec.Message, rec.Attrs)
		}
	}
	if n := len(logs.All(slog.LevelWarn)); n != 2 {
		t.Errorf("%d warnings in all, want the first two only:\n%s", n, logs.String())
	}
	for _, e := range prov.Status().Exports {
		if !e.FailingSince.IsZero() || e.FailedExports != 0 || e.LastError == "" {
			t.Errorf("%s export status after recovery %+v, want working, the last error kept", e.Signal, e)
		}
	}
}

// TestExportHealthWithoutLogger: without an ErrorLogger the exporters are not wrapped and
// their errors reach otel.Handle as they are.
func TestExportHealthWithoutLogger(t *testing.T) {
	h := newExportHealth(nil, "traces", "x")
	if h != nil {
		t.Fatal("an export health without a logger")
	}
	boom := errors.New("boom")
	if err := h.done(boom); err != boom {
		t.Fatalf("done(%v) = %v, want the error as it is", boom, err)
	}
	var exp spanExporter = encodeExporter{}
	if got := withSpanHealth(exp, nil); got != exp {
		t.Fatalf("span exporter wrapped without health")
	}
}
