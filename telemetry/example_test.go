package telemetry_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/kafkatrail/kafkatrail/producer"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// Example wires telemetry into a program that produces log lines, the way the agent does.
func Example() {
	ctx := context.Background()
	ratio := 0.05 // --trace-sample-ratio, when the user gave it
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceName: "kafkatrail-agent",
		SampleRatio: &ratio,
		ClientID:    "kafkatrail",
		ErrorLogger: slog.Default(),
	})
	if err != nil {
		panic(err)
	}
	defer tel.Shutdown(ctx) // after the producer closed: flushes the last records' spans

	log := slog.New(tel.Logger(slog.NewJSONHandler(os.Stderr, nil)))
	cfg := producer.DefaultConfig()
	cfg.BootstrapServers = []string{"127.0.0.1:9092"}
	p, err := producer.New(cfg, producer.WithLogger(log), tel.ProducerOption())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	// A line that carries a W3C trace context continues that trace.
	traceparent := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	lineCtx := telemetry.ContextWithLineTrace(ctx, traceparent)
	_ = p.Send(lineCtx, &producer.Record{Topic: "logs", Partition: producer.PartitionAny, Value: []byte("a line")}, nil)

	// Per-file agent metrics.
	f := tel.Agent().File("/var/log/app.log")
	defer f.Close()
	f.Read(1, 7)
}
