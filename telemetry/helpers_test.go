package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/producer"
)

// harness is an observer recording into a span recorder and a manual metric reader.
type harness struct {
	obs    *ProducerObserver
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newHarness(t testing.TB, sampler sdktrace.Sampler) *harness {
	t.Helper()
	return newHarnessWith(t, sampler, ObserverConfig{})
}

// newHarnessWith is newHarness with more of the observer's configuration (its Sampler and
// ClientID are set here).
func newHarnessWith(t testing.TB, sampler sdktrace.Sampler, cfg ObserverConfig) *harness {
	t.Helper()
	return newHarnessVia(t, sampler, cfg, false)
}

// newHarnessVia is newHarnessWith where viaTracer makes records' spans go through the tracer
// (an observer built without a SpanProcessor) rather than straight to the processor.
func newHarnessVia(t testing.TB, sampler sdktrace.Sampler, cfg ObserverConfig, viaTracer bool) *harness {
	t.Helper()
	// As Setup does: the per-record latency histograms are the observer's own, read through
	// the reader's producer.
	if cfg.Histograms == nil {
		cfg.Histograms = NewHistograms()
	}
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(sdkmetric.WithProducer(cfg.Histograms))}
	providerSampler := sampler
	if providerSampler == nil {
		providerSampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(ProviderSampler(providerSampler)), sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.mp = mp
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cfg.Sampler, cfg.ClientID = sampler, "kafkatrail-test"
	if !viaTracer {
		// As Setup does: records' spans go straight to the provider's processor.
		cfg.SpanProcessor = h.spans
	}
	obs, err := NewProducerObserver(tp, mp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// newKfake starts an in-process cluster of one broker with the given topics of one partition.
func newKfake(t testing.TB, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newProducer(t testing.TB, bootstrap []string, obs producer.Observer, mutate func(*producer.Config)) *producer.Producer {
	t.Helper()
	cfg := producer.DefaultConfig()
	cfg.BootstrapServers = bootstrap
	cfg.RetryBackoffMs = 10
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := producer.New(cfg, producer.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseAtCleanup(t, 10*time.Second, p.Close)
	return p
}

// outcome collects one record's callback.
type outcome struct {
	once sync.Once
	done chan struct{}
	md   producer.RecordMetadata
	err  error
}

func newOutcome() *outcome { return &outcome{done: make(chan struct{})} }

func (o *outcome) callback(md producer.RecordMetadata, err error) {
	o.once.Do(func() {
		o.md, o.err = md, err
		close(o.done)
	})
}

func (o *outcome) wait(t testing.TB) {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(20 * time.Second):
		t.Fatal("callback did not run within 20s")
	}
}

// sendOne sends a record with ctx and waits for its callback and for its batch to be done, so
// that its trace has ended (the sender creates the spans right after the callback returns,
// before the batch counts as done for Flush).
func sendOne(t testing.TB, p *producer.Producer, ctx context.Context, r *producer.Record) *outcome {
	t.Helper()
	o := newOutcome()
	_ = p.Send(ctx, r, o.callback)
	o.wait(t)
	fctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return o
}

// closedPort returns a loopback address nothing listens on: connecting to it is refused.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// produceError answers every partition of a produce request with code.
func produceError(r kmsg.Request, code int16) kmsg.Response {
	return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return code })
}

// producesTo reports whether a produce request writes to topic.
func producesTo(r kmsg.Request, topic string) bool {
	for _, t := range r.(*kmsg.ProduceRequest).Topics {
		if t.Topic == topic {
			return true
		}
	}
	return false
}

// sendOrder sends one record to topic "orders" of c through a producer with h's observer, and
// returns the record's send span once its trace has ended.
func sendOrder(t *testing.T, h *harness, c *kfake.Cluster) sdktrace.ReadOnlySpan {
	t.Helper()
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	parent, _ := recordTraceOf(t, h, "send orders")
	return parent
}
