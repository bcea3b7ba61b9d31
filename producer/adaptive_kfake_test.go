package producer

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// slowWrites delays every write of a connection: a broker behind it answers slowly while
// staying alive.
type slowWrites struct {
	net.Conn
	delay time.Duration
}

func (c slowWrites) Write(b []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(b)
}

type slowListener struct {
	net.Listener
	delay time.Duration
}

func (l slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return slowWrites{c, l.delay}, nil
}

// keylessShareOfSlowBroker sends keyless records for d to a topic of two partitions, one led
// by a broker whose answers take 50 ms each, and returns the share of the acknowledged records
// that went to that broker's partition.
func keylessShareOfSlowBroker(t *testing.T, adaptive bool, d time.Duration) float64 {
	t.Helper()
	var listeners atomic.Int32
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, "t"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil || listeners.Add(1) != 2 {
				return ln, err
			}
			return slowListener{ln, 50 * time.Millisecond}, nil // the second broker, node 1
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for p, node := range []int32{0, 1} {
		if err := c.MoveTopicPartition("t", int32(p), node); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()[:1]
	cfg.PartitionerAdaptivePartitioningEnable = adaptive
	cfg.BufferMemory, cfg.BatchSize = 256<<10, 4096 // a small buffer: the slow broker's queue drains in a few seconds at the end
	p, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	var mu sync.Mutex
	acked := map[int32]int{}
	value := make([]byte, 512)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		err := p.Send(context.Background(), &Record{Topic: "t", Partition: PartitionAny, Value: value}, func(md RecordMetadata, err error) {
			if err == nil {
				mu.Lock()
				acked[md.Partition]++
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	total := acked[0] + acked[1]
	if total == 0 {
		t.Fatal("no record acknowledged")
	}
	t.Logf("adaptive=%v: %d records to the fast broker's partition, %d to the slow one's", adaptive, acked[0], acked[1])
	return float64(acked[1]) / float64(total)
}

// TestAdaptivePartitioningAvoidsASlowBroker: keyless records go mostly to the partition whose
// broker takes batches, not to the one whose queue grows behind a slow broker (KIP-794). The
// uniform sticky draw, the same run without it, gives the slow broker its even share, which
// then holds buffer.memory and every Send.
func TestAdaptivePartitioningAvoidsASlowBroker(t *testing.T) {
	uniform := keylessShareOfSlowBroker(t, false, 1500*time.Millisecond)
	adaptive := keylessShareOfSlowBroker(t, true, 1500*time.Millisecond)
	if adaptive > 0.35 || adaptive > uniform-0.1 {
		t.Fatalf("the slow broker's partition took %.2f of the records with adaptive partitioning, %.2f without: want well below an even share", adaptive, uniform)
	}
}
