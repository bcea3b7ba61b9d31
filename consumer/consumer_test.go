package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/network"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKfake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// kfakeWithTopic starts a kfake cluster (newKfake) with topic created in it, of partitions
// partitions, and returns its bootstrap addresses.
func kfakeWithTopic(t *testing.T, ctx context.Context, topic string, partitions int32) []string {
	t.Helper()
	bootstrap := newKfake(t)
	if _, err := kadm.NewClient(kgoClient(t, bootstrap)).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	return bootstrap
}

func newTestClient(t *testing.T, bootstrap []string) *Client {
	t.Helper()
	c, err := NewClient(bootstrap, network.Config{ClientID: "consumer-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func kgoClient(t *testing.T, bootstrap []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceTransactions writes, through franz-go, to topic (3 partitions): committed
// transactions compressed with every codec, an aborted transaction whose records were written
// before the abort, interleaved with the committed ones of another producer, and records outside
// any transaction. It returns the values a read_committed reader must see, by partition in
// offset order.
func produceTransactions(t *testing.T, ctx context.Context, bootstrap []string, topic string) map[int32][]string {
	t.Helper()
	want := map[int32][]string{}
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	committer := kgoClient(t, bootstrap, kgo.TransactionalID(topic+"-c"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codecs[1]))
	aborter := kgoClient(t, bootstrap, kgo.TransactionalID(topic+"-a"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	plain := kgoClient(t, bootstrap, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	send := func(cl *kgo.Client, value string, partition int32, keep bool) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value), Key: []byte("k-" + value), Partition: partition}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", value, err)
		}
		if keep {
			want[partition] = append(want[partition], value)
		}
	}
	for round, codec := range codecs {
		cl := committer
		if round > 0 {
			cl = kgoClient(t, bootstrap, kgo.TransactionalID(fmt.Sprintf("%s-c%d", topic, round)),
				kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec))
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := aborter.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			p := int32(i % 3)
			send(cl, fmt.Sprintf("commit-%d-%02d", round, i), p, true)
			send(aborter, fmt.Sprintf("abort-%d-%02d", round, i), p, false)
			if i%10 == 0 {
				send(plain, fmt.Sprintf("plain-%d-%02d", round, i), p, true)
			}
		}
		if err := aborter.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort: %v", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	return want
}

func checkReadCommitted(t *testing.T, ctx context.Context, c *Client, topic string, want map[int32][]string) {
	t.Helper()
	got := map[int32][]string{}
	last := map[int32]int64{}
	err := c.ReadCommitted(ctx, topic, func(r Record) error {
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
		if string(r.Key) != "k-"+string(r.Value) {
			t.Fatalf("record %q has key %q", r.Value, r.Key)
		}
		got[r.Partition] = append(got[r.Partition], string(r.Value))
		return nil
	})
	if err != nil {
		t.Fatalf("ReadCommitted: %v", err)
	}
	for p := int32(0); p < 3; p++ {
		if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			t.Fatalf("partition %d:\n got %v\nwant %v", p, got[p], want[p])
		}
	}
}

// TestReadCommittedKfake reads committed, aborted and plain records in every codec from kfake:
// exactly the committed and plain ones, in offset order.
func TestReadCommittedKfake(t *testing.T) {
	ctx := testCtx(t)
	topic := "rc"
	bootstrap := kfakeWithTopic(t, ctx, topic, 3)
	want := produceTransactions(t, ctx, bootstrap, topic)
	checkReadCommitted(t, ctx, newTestClient(t, bootstrap), topic, want)
}

// TestReadCommittedStopsAtOpenTransaction: records of a transaction still open are past the
// last stable offset, and so are the committed records after them: not read.
func TestReadCommittedStopsAtOpenTransaction(t *testing.T) {
	ctx := testCtx(t)
	topic := "open"
	bootstrap := kfakeWithTopic(t, ctx, topic, 1)
	plain := kgoClient(t, bootstrap, kgo.DefaultProduceTopic(topic))
	open := kgoClient(t, bootstrap, kgo.TransactionalID("open-txn"), kgo.DefaultProduceTopic(topic))
	produce := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Key: []byte("k-" + v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(plain, "before")
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(open, "open")
	produce(plain, "after")
	checkReadCommitted(t, ctx, newTestClient(t, bootstrap), topic, map[int32][]string{0: {"before"}})
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	checkReadCommitted(t, ctx, newTestClient(t, bootstrap), topic, map[int32][]string{0: {"before", "open", "after"}})
}

func TestReadCommittedUnknownTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := newTestClient(t, newKfake(t)).ReadCommitted(ctx, "nope", func(Record) error { return nil })
	if err == nil {
		t.Fatal("reading a topic that does not exist succeeded")
	}
}

// testEnsureCompacted creates a compacted topic, finds it again, and refuses a topic that exists
// with cleanup.policy=delete.
func testEnsureCompacted(t *testing.T, bootstrap []string, topic string) {
	ctx := testCtx(t)
	c := newTestClient(t, bootstrap)
	created, err := c.EnsureCompactedTopic(ctx, topic)
	if err != nil || !created {
		t.Fatalf("first EnsureCompactedTopic = %v, %v; want created", created, err)
	}
	adm := kadm.NewClient(kgoClient(t, bootstrap))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic, topic+"-delete") })
	// CreateTopics answers once the controller has the topic; the broker that DescribeConfigs
	// asks may apply it a moment later (an empty config list until then).
	var configs []kadm.Config
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		policy, err := rc.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		configs = policy.Configs
		if slices.ContainsFunc(configs, func(cfg kadm.Config) bool {
			return cfg.Key == "cleanup.policy" && cfg.MaybeValue() == "compact"
		}) {
			break
		}
		if len(configs) > 0 || time.Now().After(deadline) {
			t.Fatalf("created topic's configs: %v", configs)
		}
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || len(td[topic].Partitions) != 1 {
		t.Fatalf("created topic: %v, %v; want 1 partition", td, err)
	}
	if created, err := c.EnsureCompactedTopic(ctx, topic); err != nil || created {
		t.Fatalf("second EnsureCompactedTopic = %v, %v; want found", created, err)
	}
	del := topic + "-delete"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, del); err != nil {
		t.Fatal(err)
	}
	_, err = c.EnsureCompactedTopic(ctx, del)
	var nc *NotCompactedError
	if !errors.As(err, &nc) || nc.Policy != "delete" || nc.Topic != del {
		t.Fatalf("EnsureCompactedTopic of a delete topic = %v; want a NotCompactedError", err)
	}
}

func TestEnsureCompactedTopicKfake(t *testing.T) {
	testEnsureCompacted(t, newKfake(t), "state")
}

// TestRealBrokerReadCommitted runs the transactions against the real Apache Kafka broker.
func TestRealBrokerReadCommitted(t *testing.T) {
	bootstrap := []string{kafkatest.Bootstrap(t)}
	topic := kafkatest.NewTopic(t, 3)
	ctx := testCtx(t)
	want := produceTransactions(t, ctx, bootstrap, topic)
	waitStable(t, ctx, kadm.NewClient(kgoClient(t, bootstrap)), topic)
	checkReadCommitted(t, ctx, newTestClient(t, bootstrap), topic, want)
}

// waitStable waits until every partition's last stable offset is its high watermark. A real
// broker answers EndTxn before the transaction's markers are written, so right after a commit
// the last stable offset may still stop short of the committed records, and a read_committed
// reader rightly stops there.
func waitStable(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) {
	t.Helper()
	for {
		stable, err1 := adm.ListCommittedOffsets(ctx, topic)
		end, err2 := adm.ListEndOffsets(ctx, topic)
		done := err1 == nil && err2 == nil
		if done {
			end.Each(func(o kadm.ListedOffset) {
				if s, ok := stable.Lookup(o.Topic, o.Partition); !ok || s.Err != nil || o.Err != nil || s.Offset != o.Offset {
					done = false
				}
			})
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("last stable offsets of %s never reached the high watermarks: %v %v", topic, err1, err2)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRealBrokerEnsureCompactedTopic(t *testing.T) {
	bootstrap := []string{kafkatest.Bootstrap(t)}
	testEnsureCompacted(t, bootstrap, fmt.Sprintf("kafkatrail-state-test-%d", time.Now().UnixNano()))
}
