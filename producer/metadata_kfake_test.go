package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendOne sends one record to topic's partition 0 and waits for its callback.
func sendOne(t *testing.T, p *Producer, topic, value string, wait time.Duration) error {
	t.Helper()
	res := newResults(1)
	rec := &Record{Topic: topic, Partition: 0, Value: []byte(value)}
	if err := p.Send(context.Background(), rec, res.callback(0)); err != nil {
		return err
	}
	res.wait(t, wait)
	return res.firstError()
}

// TestKfakeRecreatedTopicReachesItsNewLeader pins the fix of a recreated topic staying on its old
// leader: the old topic's leader epoch (3) is above the new one's (1), and the epoch guard kept
// the old leader until delivery.timeout.ms, whatever the brokers answered. The Java client
// (Metadata.updateLatestMetadata) takes the new epoch when the topic id changed.
func TestKfakeRecreatedTopicReachesItsNewLeader(t *testing.T) {
	c := newKfake(t, 1, kfake.NumBrokers(2))
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) {
		cfg.EnableIdempotence = false // a recreated partition starts its sequences over
		cfg.LingerMs = 0
		cfg.RequestTimeoutMs = 2000
		cfg.DeliveryTimeoutMs = 5000
	})
	if err := sendOne(t, p, "t", "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Three leader moves: the topic's epoch is 3 and the producer learns it from NOT_LEADER.
	for range 3 {
		other := 1 - c.LeaderFor("t", 0)
		if err := c.MoveTopicPartition("t", 0, other); err != nil {
			t.Fatal(err)
		}
		if err := sendOne(t, p, "t", "moved", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	oldLeader := c.LeaderFor("t", 0)
	if err := c.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	// The new topic's leader is the other broker, at epoch 1 (or 0): below the old topic's 3.
	if c.LeaderFor("t", 0) == oldLeader {
		if err := c.MoveTopicPartition("t", 0, 1-oldLeader); err != nil {
			t.Fatal(err)
		}
	}
	if err := sendOne(t, p, "t", "after", 10*time.Second); err != nil {
		t.Fatalf("send to the recreated topic: %v", err)
	}
}

// TestKfakeRebootstrapRequiredKeepsDelivering: after a metadata response asks for a rebootstrap
// (KIP-1102), the producer goes back to bootstrap.servers and keeps delivering.
func TestKfakeRebootstrapRequiredKeepsDelivering(t *testing.T) {
	c := newKfake(t, 3)
	p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.LingerMs = 0 })
	if err := sendOne(t, p, "t", "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{})
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ErrorCode = kerr.RebootstrapRequired.Code
		close(answered)
		return resp, nil, true
	})
	version := p.meta.Version()
	p.meta.RequestUpdate()
	p.client.Wakeup()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no metadata request after RequestUpdate")
	}
	for i := range 3 {
		if err := sendOne(t, p, "t", fmt.Sprint("after-", i), 10*time.Second); err != nil {
			t.Fatalf("send after the rebootstrap: %v", err)
		}
	}
	if p.meta.Version() < version+2 {
		t.Fatalf("metadata version %d -> %d: no rebootstrap and new metadata", version, p.meta.Version())
	}
}
