package producer

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// withClock replaces the producer's clock (Send's and the sender's).
func withClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// metadataWithTopic is a metadata response naming topic with partitions partitions, all led by
// node 1.
func metadataWithTopic(topic string, partitions int) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(resp.MaxVersion())
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 1
	resp.Brokers = append(resp.Brokers, b)
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(topic)
	for i := range partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader = int32(i), 1
		rt.Partitions = append(rt.Partitions, p)
	}
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// idleTestProducer is a producer whose brokers never answer (127.0.0.1:1) and whose clock the
// test moves; the test installs metadata itself, as the sender would on a response. It does not
// rebootstrap (metadata.recovery.strategy=none): with every broker refusing, the sender would
// otherwise replace the installed metadata with the bootstrap servers' (KIP-899) whenever its
// goroutine got there first, and the topic would vanish at a moment of the scheduler's choosing.
func idleTestProducer(t *testing.T, idle time.Duration) (*Producer, *atomic.Pointer[time.Time]) {
	t.Helper()
	var clock atomic.Pointer[time.Time]
	start := time.Unix(1_700_000_000, 0)
	clock.Store(&start)
	p := newTestProducer(t, []string{"127.0.0.1:1"}, func(c *Config) {
		c.MetadataMaxIdleMs = int(idle.Milliseconds())
		c.MetadataRecoveryStrategy = "none"
	}, withClock(func() time.Time { return *clock.Load() }))
	return p, &clock
}

// busyTopicProducer is idleTestProducer with topic "busy" (3 partitions) in its metadata, added
// and updated at the clock's start, which it returns.
func busyTopicProducer(t *testing.T, idle time.Duration) (*Producer, *atomic.Pointer[time.Time], time.Time) {
	t.Helper()
	p, clock := idleTestProducer(t, idle)
	now := *clock.Load()
	p.meta.Add("busy", now)
	p.meta.Update(metadataWithTopic("busy", 3), now)
	return p, clock, now
}

// viewAt sets the producer's clock to now and takes the busy topic's view at now, as Send does.
func viewAt(p *Producer, clock *atomic.Pointer[time.Time], now time.Time) error {
	tick := now
	clock.Store(&tick) // a copy: the sender goroutine reads the stored time while the caller moves now
	_, _, err := p.view(context.Background(), "busy", PartitionAny, now, now.Add(time.Second))
	return err
}

// TestBusyTopicStaysInMetadata pins the fix of an actively used topic falling out of metadata:
// Send added a topic to metadata only while it was unknown, so metadata.max.idle.ms after the
// first send the refresh dropped it, however busy, and sends then blocked on a metadata fetch.
// Java's KafkaProducer.waitOnMetadata calls metadata.add(topic, nowMs) on every send.
func TestBusyTopicStaysInMetadata(t *testing.T) {
	const idle = 5 * time.Second
	p, clock, now := busyTopicProducer(t, idle)
	// One view per 100 ms for twice the idle time, with a refresh every second (as
	// metadata.max.age.ms or any other topic's arrival would cause).
	for step := range 100 {
		now = now.Add(100 * time.Millisecond)
		if err := viewAt(p, clock, now); err != nil {
			t.Fatalf("after %v: %v", time.Duration(step+1)*100*time.Millisecond, err)
		}
		if step%10 == 9 {
			p.meta.Update(metadataWithTopic("busy", 3), now)
			if !slices.Contains(p.meta.Topics(), "busy") {
				t.Fatalf("after %v of sends every 100 ms the topic fell out of metadata (metadata.max.idle.ms %v)",
					time.Duration(step+1)*100*time.Millisecond, idle)
			}
		}
	}
	// And once unused for longer than metadata.max.idle.ms, it goes.
	now = now.Add(2 * idle)
	p.meta.Update(metadataWithTopic("busy", 3), now)
	if slices.Contains(p.meta.Topics(), "busy") {
		t.Fatal("an idle topic stayed in metadata")
	}
}

// TestBusyTopicStaysInMetadataWithoutRefreshes is the same with no refresh between the first
// metadata and the one after the idle time: Send's fast path, which reuses the topic's view of
// an unchanged snapshot, must keep the topic too.
func TestBusyTopicStaysInMetadataWithoutRefreshes(t *testing.T) {
	const idle = 5 * time.Second
	p, clock, now := busyTopicProducer(t, idle)
	for range 70 {
		now = now.Add(100 * time.Millisecond)
		if err := viewAt(p, clock, now); err != nil {
			t.Fatal(err)
		}
	}
	p.meta.Update(metadataWithTopic("busy", 3), now)
	if !slices.Contains(p.meta.Topics(), "busy") {
		t.Fatal("a topic sent to every 100 ms fell out of metadata at the first refresh after metadata.max.idle.ms")
	}
}

// BenchmarkSendView measures what Send pays for metadata on its hot path: the topic's view of
// an unchanged snapshot, from many goroutines (the agent sends about a million lines a second).
func BenchmarkSendView(b *testing.B) {
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"127.0.0.1:1"}
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	now := time.Now()
	p.meta.Add("t", now)
	p.meta.Update(metadataWithTopic("t", 6), now)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := p.clock()
			if _, _, err := p.view(ctx, "t", PartitionAny, now, now.Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// twoTopicProducer is a producer whose metadata knows topics t and u, of 6 partitions each.
func twoTopicProducer(tb testing.TB) *Producer {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"127.0.0.1:1"}
	p, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	now := time.Now()
	p.meta.Add("t", now)
	p.meta.Add("u", now)
	resp := metadataWithTopic("t", 6)
	u := resp.Topics[0]
	u.Topic = kmsg.StringPtr("u")
	resp.Topics = append(resp.Topics, u)
	p.meta.Update(resp, now)
	return p
}

// Records sent to two topics in turn (the agent's --topic template) find each topic's view
// without building one again: no allocation, no metadata lock per record.
func TestSendViewOfTopicsInTurnAllocatesNothing(t *testing.T) {
	p := twoTopicProducer(t)
	ctx := context.Background()
	topics := []string{"t", "u"}
	i := 0
	view := func() {
		i++
		now := p.clock()
		if v, _, err := p.view(ctx, topics[i%2], PartitionAny, now, now.Add(time.Minute)); err != nil || v.topic != topics[i%2] || v.n != 6 {
			t.Fatalf("view %v, %v", v, err)
		}
	}
	view()
	view()
	if n := testing.AllocsPerRun(1000, view); n != 0 {
		t.Fatalf("%v allocations per record sent to two topics in turn, want 0", n)
	}
	// A new snapshot drops the old views: they would show its partitions as they were.
	before := p.views.Load()
	p.meta.Update(metadataWithTopic("t", 3), time.Now())
	now := p.clock()
	if v, _, err := p.view(ctx, "t", PartitionAny, now, now.Add(time.Minute)); err != nil || v.n != 3 {
		t.Fatalf("view after a metadata update: %v, %v; want 3 partitions", v, err)
	}
	if after := p.views.Load(); after == before || len(after.byTopic) != 1 {
		t.Fatalf("views after a metadata update: %+v", after)
	}
}

// BenchmarkSendViewTopicsInTurn is BenchmarkSendView for records sent to two topics in turn.
func BenchmarkSendViewTopicsInTurn(b *testing.B) {
	p := twoTopicProducer(b)
	ctx := context.Background()
	topics := []string{"t", "u"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		now := p.clock()
		if _, _, err := p.view(ctx, topics[i%2], PartitionAny, now, now.Add(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
}
