package network

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRebootstrapRequired pins the handling of a metadata response's top-level
// REBOOTSTRAP_REQUIRED (KIP-1102, Metadata v13): as NetworkClient.DefaultMetadataUpdater.
// handleSuccessfulResponse and handleRebootstrap do, the client closes its connections to the
// known brokers, forgets them (Metadata.rebootstrap) and starts again from bootstrap.servers,
// without installing the response. The error used to be ignored.
func TestRebootstrapRequired(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	meta.Add("events", time.Now())
	pollUntil(t, c, 10*time.Second, "topic metadata", func() bool { return meta.Fetch().PartitionCount("events") == 3 })
	broker := meta.Fetch().Nodes()[0]
	awaitReady(t, c, broker)

	var answered atomic.Int32
	cluster.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.GetVersion() < 13 {
			t.Errorf("metadata request v%d, want v13 (the first with a top-level error code)", req.GetVersion())
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ErrorCode = kerr.RebootstrapRequired.Code
		// Brokers a client that ignored the error would install.
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 99, "127.0.0.1", 1
		resp.Brokers = append(resp.Brokers, b)
		answered.Add(1)
		return resp, nil, true
	})
	meta.RequestUpdate()
	pollUntil(t, c, 10*time.Second, "the rebootstrap", func() bool {
		if _, bogus := meta.Fetch().Node(99); bogus {
			t.Fatal("the response that asked for a rebootstrap was installed")
		}
		return meta.Fetch().IsBootstrap()
	})
	if answered.Load() != 1 {
		t.Fatalf("%d REBOOTSTRAP_REQUIRED answers", answered.Load())
	}
	if st := c.ConnectionState(broker.ID); st != Disconnected {
		t.Fatalf("connection to node %d is %v after the rebootstrap, want closed", broker.ID, st)
	}
	// Back through the bootstrap servers to the real cluster.
	pollUntil(t, c, 10*time.Second, "metadata after the rebootstrap", func() bool {
		cl := meta.Fetch()
		_, ok := cl.Node(broker.ID)
		return !cl.IsBootstrap() && ok && cl.PartitionCount("events") == 3
	})
}

// deadBrokersResponse is a metadata response naming only brokers nobody listens at (port 1 of
// 127.0.0.1 refuses connections): a cluster that moved away from every address the client knows.
func deadBrokersResponse() *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	for _, id := range []int32{41, 42} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "127.0.0.1", 1
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

// TestRebootstrapWhenNoKnownBrokerCanBeReached: every broker the metadata names refuses
// connections (the cluster came back on other addresses behind the bootstrap name): once all
// are in reconnect backoff, the client goes back to bootstrap.servers and finds the cluster
// (KIP-899, Java's DefaultMetadataUpdater.maybeUpdate). It used to try the dead brokers forever.
func TestRebootstrapWhenNoKnownBrokerCanBeReached(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	meta.Update(deadBrokersResponse(), time.Now())
	if meta.Fetch().IsBootstrap() {
		t.Fatal("the dead brokers' metadata was not installed")
	}
	meta.Add("events", time.Now())
	meta.RequestUpdate()
	pollUntil(t, c, 20*time.Second, "metadata from the cluster behind the bootstrap address", func() bool {
		cl := meta.Fetch()
		_, dead := cl.Node(41)
		return !cl.IsBootstrap() && !dead && cl.PartitionCount("events") == 3
	})
}

// TestRebootstrapNoneStaysWithTheKnownBrokers: with metadata.recovery.strategy=none the client
// does not go back to the bootstrap servers by itself.
func TestRebootstrapNoneStaysWithTheKnownBrokers(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{NoRebootstrap: true, ReconnectBackoff: 10 * time.Millisecond, ReconnectBackoffMax: 20 * time.Millisecond})
	meta.Update(deadBrokersResponse(), time.Now())
	meta.RequestUpdate()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		c.Poll(20*time.Millisecond, time.Now())
		if cl := meta.Fetch(); cl.IsBootstrap() {
			t.Fatal("rebootstrapped with metadata.recovery.strategy=none")
		}
	}
}

// TestRebootstrapAfterTheTrigger: brokers that stay connected but give no usable metadata (an
// answer without brokers, a failed update) for metadata.recovery.rebootstrap.trigger.ms make
// the client rebootstrap, closing their connections (KIP-1102); the cluster, answering again,
// is found through the bootstrap servers.
func TestRebootstrapAfterTheTrigger(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{RebootstrapTrigger: 300 * time.Millisecond})
	meta.Add("events", time.Now())
	pollUntil(t, c, 10*time.Second, "topic metadata", func() bool { return meta.Fetch().PartitionCount("events") == 3 })
	broker := meta.Fetch().Nodes()[0]
	awaitReady(t, c, broker)
	var empty atomic.Bool
	empty.Store(true)
	cluster.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !empty.Load() {
			return nil, nil, false
		}
		return req.ResponseKind().(*kmsg.MetadataResponse), nil, true // no brokers: a failed update
	})
	start := time.Now()
	meta.RequestUpdate()
	pollUntil(t, c, 10*time.Second, "the rebootstrap", func() bool { return meta.Fetch().IsBootstrap() })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("rebootstrapped %v after the updates began to fail, before the 300ms trigger", d)
	}
	empty.Store(false)
	pollUntil(t, c, 10*time.Second, "metadata after the rebootstrap", func() bool {
		cl := meta.Fetch()
		return !cl.IsBootstrap() && cl.PartitionCount("events") == 3
	})
}
