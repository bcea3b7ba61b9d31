package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLogHandlerAddsTraceAndSpanIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	log.InfoContext(ctx, "inside a span")
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")

	dec := json.NewDecoder(&buf)
	var lines []map[string]any
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3", len(lines))
	}
	if lines[0][LogKeyTraceID] != "4bf92f3577b34da6a3ce929d0e0e4736" || lines[0][LogKeySpanID] != "00f067aa0ba902b7" ||
		lines[0]["component"] != "test" {
		t.Fatalf("line in a span: %v", lines[0])
	}
	for _, l := range lines[1:] {
		if _, ok := l[LogKeyTraceID]; ok {
			t.Fatalf("line without a span has a trace id: %v", l)
		}
	}
	if !NewLogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})).Enabled(ctx, slog.LevelWarn) ||
		NewLogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})).Enabled(ctx, slog.LevelInfo) {
		t.Fatal("Enabled does not follow the wrapped handler")
	}
}
