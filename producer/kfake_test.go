package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// newKfake starts an in-process cluster on 127.0.0.1 with topic "t" of partitions partitions.
func newKfake(t *testing.T, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newTestProducer is a producer for bootstrap with the default configuration as mutate (may be
// nil) changes it and opts, closed when the test ends.
func newTestProducer(t *testing.T, bootstrap []string, mutate func(*Config), opts ...Option) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BootstrapServers = bootstrap
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, append([]Option{testLogger(t)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseAtCleanup(t, 30*time.Second, p.Close)
	return p
}

// testLogger logs through t at debug level when KAFKATRAIL_TEST_DEBUG is set, else discards.
func testLogger(t testing.TB) Option {
	if os.Getenv("KAFKATRAIL_TEST_DEBUG") == "" {
		return WithLogger(slog.New(slog.DiscardHandler))
	}
	return WithLogger(slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// results tracks callbacks: each record index must complete exactly once.
type results struct {
	mu      sync.Mutex
	calls   []int
	metas   []RecordMetadata
	errs    []error
	pending atomic.Int64
	done    chan struct{}
}

func newResults(n int) *results {
	r := &results{calls: make([]int, n), metas: make([]RecordMetadata, n), errs: make([]error, n), done: make(chan struct{})}
	r.pending.Store(int64(n))
	if n == 0 {
		close(r.done)
	}
	return r
}

func (r *results) callback(i int) Callback {
	return func(m RecordMetadata, err error) {
		r.mu.Lock()
		r.calls[i]++
		r.metas[i], r.errs[i] = m, err
		first := r.calls[i] == 1
		r.mu.Unlock()
		if first && r.pending.Add(-1) == 0 {
			close(r.done)
		}
	}
}

// wait blocks until every callback ran, or fails the test at the deadline.
func (r *results) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		t.Fatalf("%d callbacks still pending after %v", r.pending.Load(), d)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		if c != 1 {
			t.Fatalf("record %d: callback ran %d times, want exactly once", i, c)
		}
	}
}

func (r *results) firstError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, err := range r.errs {
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
	return nil
}

type testRecord struct {
	key, value string
	header     string
}

func makeRecords(n, valueSize int) []testRecord {
	out := make([]testRecord, n)
	for i := range out {
		v := fmt.Sprintf("value-%09d-", i)
		if len(v) < valueSize {
			v += strings.Repeat("x", valueSize-len(v))
		}
		out[i] = testRecord{key: fmt.Sprintf("key-%d", i%1000), value: v, header: fmt.Sprint(i)}
	}
	return out
}

// produceAll sends every record to topic and waits for all callbacks.
func produceAll(t *testing.T, p *Producer, topic string, recs []testRecord, wait time.Duration) *results {
	t.Helper()
	res := newResults(len(recs))
	ctx := context.Background()
	for i, r := range recs {
		rec := &Record{Topic: topic, Partition: PartitionAny, Key: []byte(r.key), Value: []byte(r.value),
			Headers: []Header{{Key: "i", Value: []byte(r.header)}}}
		_ = p.Send(ctx, rec, res.callback(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	res.wait(t, wait)
	return res
}

// mustProduceAll is produceAll where every record must be acknowledged.
func mustProduceAll(t *testing.T, p *Producer, topic string, recs []testRecord, wait time.Duration) *results {
	t.Helper()
	res := produceAll(t, p, topic, recs, wait)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	return res
}

// consumeAll reads n records of topic from the start with franz-go's kgo consumer.
func consumeAll(t *testing.T, bootstrap []string, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// checkRoundTrip compares what a consumer read with what was sent: every record once, with its
// key, value and header, on the partition murmur2 chose, in send order within the partition.
func checkRoundTrip(t *testing.T, sent []testRecord, got []*kgo.Record, partitions int) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("consumed %d records, sent %d", len(got), len(sent))
	}
	seen := make([]bool, len(sent))
	lastIndex := map[int32]int{}
	for _, r := range got {
		if len(r.Headers) != 1 || r.Headers[0].Key != "i" {
			t.Fatalf("record at %d/%d has headers %v", r.Partition, r.Offset, r.Headers)
		}
		var i int
		if _, err := fmt.Sscan(string(r.Headers[0].Value), &i); err != nil || i < 0 || i >= len(sent) {
			t.Fatalf("bad index header %q", r.Headers[0].Value)
		}
		if seen[i] {
			t.Fatalf("record %d consumed twice (duplicate at %d/%d)", i, r.Partition, r.Offset)
		}
		seen[i] = true
		if string(r.Key) != sent[i].key || string(r.Value) != sent[i].value {
			t.Fatalf("record %d: key/value %q/%q, sent %q/%q", i, r.Key, r.Value[:min(len(r.Value), 30)], sent[i].key, sent[i].value[:min(len(sent[i].value), 30)])
		}
		if want := keyPartition([]byte(sent[i].key), partitions); r.Partition != want {
			t.Fatalf("record %d with key %q on partition %d, murmur2 says %d", i, sent[i].key, r.Partition, want)
		}
		if last, ok := lastIndex[r.Partition]; ok && i < last {
			t.Fatalf("partition %d out of order: record %d after %d", r.Partition, i, last)
		}
		lastIndex[r.Partition] = i
	}
}

func TestKfakeRoundTripEveryCodec(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			c := newKfake(t, 3)
			p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.CompressionType = codec })
			recs := makeRecords(5000, 100)
			mustProduceAll(t, p, "t", recs, 30*time.Second)
			checkRoundTrip(t, recs, consumeAll(t, c.ListenAddrs(), "t", len(recs), 30*time.Second), 3)
		})
	}
}

// TestKfakeRoundTripEveryAcks covers acks=0 and acks=1 (without idempotence, which needs
// acks=all) next to the default acks=all.
func TestKfakeRoundTripEveryAcks(t *testing.T) {
	for _, acks := range []string{"0", "1", "all"} {
		t.Run("acks="+acks, func(t *testing.T) {
			c := newKfake(t, 3)
			var seen atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if want := map[string]int16{"0": 0, "1": 1, "all": -1}[acks]; r.(*kmsg.ProduceRequest).Acks != want {
					seen.Store(-1 << 20)
				}
				seen.Add(1)
				return nil, nil, false
			})
			p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) {
				cfg.Acks = acks
				cfg.EnableIdempotence = acks == "all"
			})
			recs := makeRecords(3000, 50)
			res := mustProduceAll(t, p, "t", recs, 30*time.Second)
			for i, m := range res.metas {
				if acks == "0" && m.Offset != -1 {
					t.Fatalf("acks=0 record %d reports offset %d; the broker sends none", i, m.Offset)
				}
				if acks != "0" && m.Offset < 0 {
					t.Fatalf("acks=%s record %d has no offset", acks, i)
				}
			}
			checkRoundTrip(t, recs, consumeAll(t, c.ListenAddrs(), "t", len(recs), 30*time.Second), 3)
			// Checked after the records were consumed: with acks=0 the callbacks run when the
			// bytes leave the socket, possibly before the broker has looked at the request.
			if seen.Load() <= 0 {
				t.Fatalf("produce requests did not carry acks=%s", acks)
			}
		})
	}
}

func TestKfakeRetriesInjectedErrorsWithoutDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(kmsg.Request) (kmsg.Response, error, bool)
	}{
		{"NOT_LEADER_OR_FOLLOWER", func(r kmsg.Request) (kmsg.Response, error, bool) {
			return produceError(r, kerr.NotLeaderForPartition.Code), nil, true
		}},
		{"REQUEST_TIMED_OUT", func(r kmsg.Request) (kmsg.Response, error, bool) {
			return produceError(r, kerr.RequestTimedOut.Code), nil, true
		}},
		{"dropped connection", func(kmsg.Request) (kmsg.Response, error, bool) {
			return nil, errors.New("injected disconnect"), true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKfake(t, 3)
			var injected atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				if injected.Add(1) <= 3 {
					c.KeepControl()
					return tc.inject(r)
				}
				return nil, nil, false
			})
			p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.RetryBackoffMs = 10 })
			recs := makeRecords(2000, 50)
			mustProduceAll(t, p, "t", recs, 30*time.Second)
			if injected.Load() < 3 {
				t.Fatalf("only %d produce requests reached the fault", injected.Load())
			}
			checkRoundTrip(t, recs, consumeAll(t, c.ListenAddrs(), "t", len(recs), 30*time.Second), 3)
		})
	}
}

// produceError answers every partition of a ProduceRequest with code.
func produceError(r kmsg.Request, code int16) kmsg.Response {
	return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return code })
}

func TestKfakeSlowResponseTimesOutAndRetries(t *testing.T) {
	c := newKfake(t, 1)
	var slowed atomic.Bool
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if slowed.CompareAndSwap(false, true) {
			// Hold the first produce request past request.timeout.ms; the client must give up on
			// the connection and retry on a new one.
			c.SleepControl(func() { <-release })
			return nil, errors.New("released"), true
		}
		return nil, nil, false
	})
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) {
		cfg.RequestTimeoutMs = 500
		cfg.DeliveryTimeoutMs = 20000
		cfg.LingerMs = 0
	})
	recs := makeRecords(10, 10)
	mustProduceAll(t, p, "t", recs, 20*time.Second)
	checkRoundTrip(t, recs, consumeAll(t, c.ListenAddrs(), "t", len(recs), 10*time.Second), 1)
}

func TestKfakeTopicAuthorizationFailsFastWithName(t *testing.T) {
	c := newKfake(t, 1)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
	})
	p := newTestProducer(t, c.ListenAddrs(), nil)
	res := produceAll(t, p, "t", makeRecords(3, 10), 10*time.Second)
	err := res.firstError()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("error %v, want TOPIC_AUTHORIZATION_FAILED by name", err)
	}
}

func TestKfakeUnknownTopicWithoutAutoCreateFailsAfterMaxBlock(t *testing.T) {
	c := newKfake(t, 1)
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.MaxBlockMs = 300 })
	start := time.Now()
	res := newResults(1)
	err := p.Send(context.Background(), &Record{Topic: "missing", Partition: PartitionAny, Value: []byte("v")}, res.callback(0))
	res.wait(t, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "max.block.ms") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Send error %v, want one naming the topic and max.block.ms", err)
	}
	if !errors.Is(res.firstError(), err) && res.firstError().Error() != "record 0: "+err.Error() {
		t.Fatalf("callback error %v differs from Send's %v", res.firstError(), err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatalf("failed after %v, before max.block.ms", time.Since(start))
	}
}

func TestKfakeOversizedRecordFailsAloneThroughCallback(t *testing.T) {
	c := newKfake(t, 1)
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.MaxRequestSize = 10000 })
	res := newResults(3)
	ctx := context.Background()
	_ = p.Send(ctx, &Record{Topic: "t", Partition: PartitionAny, Value: []byte("small-1"), Tag: 100}, res.callback(0))
	err := p.Send(ctx, &Record{Topic: "t", Partition: PartitionAny, Value: make([]byte, 20000), Tag: 101}, res.callback(1))
	_ = p.Send(ctx, &Record{Topic: "t", Partition: PartitionAny, Value: []byte("small-2"), Tag: 102}, res.callback(2))
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, 10*time.Second)
	var tooLarge *RecordTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Key != "max.request.size" {
		t.Fatalf("Send error %v, want RecordTooLargeError naming max.request.size", err)
	}
	if res.errs[1] == nil || res.errs[0] != nil || res.errs[2] != nil {
		t.Fatalf("errors %v: want only the oversized record to fail", res.errs)
	}
	// Each callback gets its record's tag and value size, the one that failed in Send too.
	for i, size := range []int{7, 20000, 7} {
		if m := res.metas[i]; m.Tag != int64(100+i) || m.SerializedValueSize != size {
			t.Errorf("record %d: tag %d value size %d, want %d and %d", i, m.Tag, m.SerializedValueSize, 100+i, size)
		}
	}
	if got := consumeAll(t, c.ListenAddrs(), "t", 2, 10*time.Second); len(got) != 2 {
		t.Fatalf("consumed %d records, want the 2 small ones", len(got))
	}
}

func TestKfakeCloseDeliversEverythingBuffered(t *testing.T) {
	c := newKfake(t, 2)
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	cfg.LingerMs = 1000 // records wait in the accumulator until Close makes them sendable
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := makeRecords(500, 20)
	res := newResults(len(recs))
	for i, r := range recs {
		if err := p.Send(context.Background(), &Record{Topic: "t", Partition: PartitionAny, Key: []byte(r.key),
			Value: []byte(r.value), Headers: []Header{{Key: "i", Value: []byte(r.header)}}}, res.callback(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("late")}, nil); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("Send after Close: %v, want ErrProducerClosed", err)
	}
	checkRoundTrip(t, recs, consumeAll(t, c.ListenAddrs(), "t", len(recs), 10*time.Second), 2)
}

func TestKfakeCloseDeadlineFailsWhatIsLeft(t *testing.T) {
	c := newKfake(t, 1)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true // never succeeds
	})
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := newResults(5)
	for i := 0; i < 5; i++ {
		_ = p.Send(context.Background(), &Record{Topic: "t", Partition: PartitionAny, Value: []byte("v")}, res.callback(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close returned %v, want the deadline", err)
	}
	res.wait(t, 5*time.Second)
	for i, err := range res.errs {
		if !errors.Is(err, ErrProducerClosed) {
			t.Fatalf("record %d: %v, want ErrProducerClosed", i, err)
		}
	}
}

func TestKfakePartitionsFor(t *testing.T) {
	c := newKfake(t, 3)
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.MaxBlockMs = 300 })
	if n, err := p.PartitionsFor(context.Background(), "t"); n != 3 || err != nil {
		t.Fatalf("PartitionsFor(t) = %d, %v; want 3 partitions", n, err)
	}
	if n, err := p.PartitionsFor(context.Background(), "missing"); err == nil || !strings.Contains(err.Error(), "max.block.ms") {
		t.Fatalf("PartitionsFor(missing) = %d, %v; want an error naming max.block.ms", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PartitionsFor(context.Background(), "t"); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("after Close: %v, want ErrProducerClosed", err)
	}
}

// A record whose delivery.timeout.ms passed while it waited to be sent (here the sender
// goroutine, on which callbacks run, was held by the previous record's callback) fails with a
// DeliveryTimeoutError and must not be written: an agent that sends failed lines again would
// otherwise find them in the log twice.
func TestKfakeRecordExpiredBeforeItsSendIsNotWritten(t *testing.T) {
	c := newKfake(t, 1)
	const deliveryTimeout = 1500 * time.Millisecond
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) {
		cfg.LingerMs = 0
		cfg.RequestTimeoutMs = int(deliveryTimeout.Milliseconds())
		cfg.DeliveryTimeoutMs = int(deliveryTimeout.Milliseconds())
	})
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the producer's close, which waits for the callback
	send := func(value string, cb Callback) {
		t.Helper()
		if err := p.Send(context.Background(), &Record{Topic: "t", Partition: 0, Value: []byte(value)}, cb); err != nil {
			t.Fatalf("send %s: %v", value, err)
		}
	}

	entered := make(chan error, 1)
	send("first", func(_ RecordMetadata, err error) { entered <- err; <-release })
	select {
	case err := <-entered:
		if err != nil {
			t.Fatalf("first record: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first record's callback did not run")
	}
	late := newResults(1)
	send("late", late.callback(0))
	// Its batch was created before Send returned: after this long it has expired when the
	// sender, released, next looks at it (a wait for a deadline to pass, not for an event).
	time.Sleep(deliveryTimeout + 50*time.Millisecond)
	releaseOnce()
	late.wait(t, 10*time.Second)
	var dte *DeliveryTimeoutError
	lateErr := late.firstError()
	if !errors.As(lateErr, &dte) {
		t.Fatalf("late record: %v, want a DeliveryTimeoutError", lateErr)
	}

	after := newResults(1)
	send("after", after.callback(0))
	after.wait(t, 10*time.Second)
	if err := after.firstError(); err != nil {
		t.Fatal(err)
	}
	// A late record written would sit between the other two.
	var values []string
	for _, r := range consumeAll(t, c.ListenAddrs(), "t", 2, 10*time.Second) {
		values = append(values, string(r.Value))
	}
	if got := strings.Join(values, " "); got != "first after" {
		t.Fatalf("the log holds %q, want \"first after\": the record whose callback reported %v was written", got, lateErr)
	}
}

// TestKfakeRecordErrorsFailOnlyTheNamedRecord: a batch refused with INVALID_RECORD that names
// one record (KIP-467 record errors) fails that record with the broker's code and message, and
// the others with ErrBatchHadInvalidRecords (Java's Sender.failBatch with record errors), so a
// caller can tell the invalid record from its innocent neighbours. Every callback gets the
// record's content (RecordMetadata.Record).
func TestKfakeRecordErrorsFailOnlyTheNamedRecord(t *testing.T) {
	c := newKfake(t, 1)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, kerr.InvalidRecord.Code, -1
				msg := "Compacted topic cannot accept message without key"
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = 1, &msg
				rp.ErrorRecords = append(rp.ErrorRecords, er)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.LingerMs = 50 })
	res := newResults(3)
	ctx := context.Background()
	for i := range 3 {
		_ = p.Send(ctx, &Record{Topic: "t", Partition: PartitionAny, Value: fmt.Appendf(nil, "v%d", i)}, func(md RecordMetadata, err error) {
			if md.Record == nil || string(md.Record.Value) != fmt.Sprintf("v%d", i) {
				t.Errorf("record %d: callback's Record %+v, want its value", i, md.Record)
			}
			res.callback(i)(md, err)
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, 10*time.Second)
	if err := res.errs[1]; !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "without key") {
		t.Errorf("named record: %v, want INVALID_RECORD with the broker's message", err)
	}
	for _, i := range []int{0, 2} {
		if err := res.errs[i]; !errors.Is(err, ErrBatchHadInvalidRecords) || errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("record %d: %v, want ErrBatchHadInvalidRecords and not INVALID_RECORD", i, err)
		}
	}
}

// TestKfakeThrottleHoldsTheNode: a produce response that carries a throttle time the client must
// honour (KIP-219: v6 and later) keeps the producer from sending to that broker until the
// throttle ends (Java's NetworkClient.maybeThrottle, ClusterConnectionStates.isReady). The
// throttle time used to be only a metric: the next request went at once.
func TestKfakeThrottleHoldsTheNode(t *testing.T) {
	c := newKfake(t, 1)
	const throttle = 400 * time.Millisecond
	var mu sync.Mutex
	var answered, second time.Time
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if answered.IsZero() {
			resp := kafkatest.ProduceAnswer(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return 0 }, 0)
			resp.ThrottleMillis = int32(throttle / time.Millisecond)
			answered = time.Now()
			return resp, nil, true
		}
		if second.IsZero() {
			second = time.Now()
		}
		return nil, nil, false
	})
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	p, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for i, v := range []string{"first", "second"} {
		res := sendValues(t, p, "t", []string{v})
		res.wait(t, 10*time.Second)
		if err := res.firstError(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := second.Sub(answered); gap < throttle-50*time.Millisecond {
		t.Fatalf("the next produce request came %v after a response that throttled the client for %v", gap, throttle)
	}
}
