package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// BenchmarkSendToAck measures Send-to-acknowledgement throughput of 100-byte records against the
// real broker, for this producer and for franz-go's kgo with the same settings (acks=all,
// idempotence, linger 5 ms, batch.size 16384, no compression), in the same run:
//
//	make broker-start; eval "$(scripts/kafka/broker.sh env)"
//	go test -run '^$' -bench SendToAck -benchtime 500000x -count 3 ./producer/
//
// Compare the records/s of the two sub-benchmarks of one invocation; absolute figures on a shared
// machine mean little.
func BenchmarkSendToAck(b *testing.B) {
	bootstrap := kafkatest.Bootstrap(b)
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}

	// kafkatrail-push-off is enable.metrics.push=false: against "kafkatrail", the cost of the KIP-714
	// counters (and of the pushes, if the broker has a subscription for the client).
	for _, push := range []bool{true, false} {
		name := "kafkatrail"
		if !push {
			name = "kafkatrail-push-off"
		}
		b.Run(name, func(b *testing.B) { benchSendToAck(b, bootstrap, value, push) })
	}
	b.Run("kgo", func(b *testing.B) {
		topic := kafkatest.NewTopic(b, 6)
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProducerBatchMaxBytes(16384), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedBytes(32<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		ctx := context.Background()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		var acks benchAcks
		cb := func(_ *kgo.Record, err error) { acks.done(err) }
		// kgo takes ownership of the record until its promise runs: one per Send.
		acks.run(b, len(value), func() { cl.Produce(ctx, &kgo.Record{Value: value}, cb) })
	})
}

// benchAcks waits for a benchmark's b.N acknowledgements and keeps the last failure.
type benchAcks struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	failed error
}

// done is a record's callback: the record is acknowledged, or failed with err.
func (a *benchAcks) done(err error) {
	if err != nil {
		a.mu.Lock()
		a.failed = err
		a.mu.Unlock()
	}
	a.wg.Done()
}

// run times b.N sends of size-byte records up to their last acknowledgement, reports the
// records per second, and fails the benchmark if any record failed.
func (a *benchAcks) run(b *testing.B, size int, send func()) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	a.wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		send()
	}
	a.wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		b.Fatal(a.failed)
	}
}

// benchSendToAck is BenchmarkSendToAck's kafkatrail producer, with enable.metrics.push as push.
func benchSendToAck(b *testing.B, bootstrap string, value []byte, push bool) {
	topic := kafkatest.NewTopic(b, 6)
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{bootstrap}
	cfg.EnableMetricsPush = push
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx := context.Background()
	// Warm up: metadata and producer id.
	if err := p.Send(ctx, &Record{Topic: topic, Partition: PartitionAny, Value: value}, nil); err != nil {
		b.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	var acks benchAcks
	cb := func(_ RecordMetadata, err error) { acks.done(err) }
	rec := &Record{Topic: topic, Partition: PartitionAny, Value: value}
	acks.run(b, len(value), func() { _ = p.Send(ctx, rec, cb) })
}
