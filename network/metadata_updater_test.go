package network

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// threeNodeMetadata is metadata that knows brokers 1, 2 and 3 (all at 127.0.0.1:1) as of now.
func threeNodeMetadata(t *testing.T, now time.Time) *metadata.Metadata {
	t.Helper()
	meta, err := metadata.New([]string{"127.0.0.1:1"}, time.Minute, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	for _, id := range []int32{1, 2, 3} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "127.0.0.1", 1
		resp.Brokers = append(resp.Brokers, b)
	}
	meta.Update(resp, now)
	return meta
}

// threeNodeClient returns a client whose metadata names nodes 1, 2 and 3 (at a closed port),
// with no connection to any.
func threeNodeClient(t *testing.T, now time.Time) *NetworkClient {
	t.Helper()
	c := newClient(Config{}, threeNodeMetadata(t, now), rand.New(rand.NewPCG(1, 2)))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestMetadataUpdateWaitsForAnyConnectionInProgress pins DefaultMetadataUpdater.maybeUpdate(now,
// node): when the node chosen for the update cannot take it, the updater waits while any
// node's connection is being set up rather than opening another; it checked only the chosen
// node.
func TestMetadataUpdateWaitsForAnyConnectionInProgress(t *testing.T) {
	now := time.Unix(1000, 0)
	c := threeNodeClient(t, now)
	c.states.Connecting(1, now, "127.0.0.1:1") // e.g. the sender connecting to a leader
	node2, _ := c.meta.Fetch().Node(2)
	if got := c.updater.maybeUpdateNode(node2, now); got != c.cfg.ReconnectBackoff {
		t.Fatalf("maybeUpdate(node 2) = %v while node 1 connects, want the reconnect backoff %v", got, c.cfg.ReconnectBackoff)
	}
	if st := c.ConnectionState(2); st != Disconnected {
		t.Fatalf("node 2 is %v: a second connection was opened while node 1's was in progress", st)
	}
	// Nothing connecting: the chosen node gets a connection.
	c.states.Disconnected(1, now)
	if got := c.updater.maybeUpdateNode(node2, now); got != c.cfg.ReconnectBackoff || c.ConnectionState(2) != Connecting {
		t.Fatalf("maybeUpdate(node 2) = %v, node 2 %v; want a connection and the reconnect backoff", got, c.ConnectionState(2))
	}
}

// TestMetadataUpdateWaitsForAPIVersionsOfChosenNode: a chosen node checking API versions, with
// no connection being set up, is left to the network event that ends the check (Java returns
// Long.MAX_VALUE), with no new connection.
func TestMetadataUpdateWaitsForAPIVersionsOfChosenNode(t *testing.T) {
	now := time.Unix(1000, 0)
	c := threeNodeClient(t, now)
	c.states.Connecting(2, now, "127.0.0.1:1")
	c.states.CheckingAPIVersions(2)
	node2, _ := c.meta.Fetch().Node(2)
	if got := c.updater.maybeUpdateNode(node2, now); got != maxDuration {
		t.Fatalf("maybeUpdate(node 2 checking API versions) = %v, want to wait for its network event", got)
	}
	for _, id := range []int32{1, 3} {
		if st := c.ConnectionState(id); st != Disconnected {
			t.Fatalf("node %d is %v", id, st)
		}
	}
}
