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
