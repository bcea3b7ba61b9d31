package consumer

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readEmpty reads topic (which holds nothing) with a deadline; the reader used to hang on a
// leader it could not reach, however long the deadline.
func readEmpty(t *testing.T, c *Client, topic string, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.ReadCommitted(ctx, topic, func(r Record) error {
		t.Errorf("record at %d/%d in an empty topic", r.Partition, r.Offset)
		return nil
	})
}

// TestReadCommittedLeaderGoneToAnotherBroker pins the fix of the exactly-once agent hanging when
// the state topic's leader was down at its start: the client had learned the leader (node X),
// X went away and its partition moved, and roundTrip kept trying X, first connecting, then, once
// the metadata no longer named X, spinning on a node it could not find. As the Java consumer
// does (ConsumerNetworkClient.checkDisconnects, then a metadata refresh and a retry after the
// backoff), the request now fails as disconnected and is retried at the partition's new leader.
func TestReadCommittedLeaderGoneToAnotherBroker(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	leader := kf.LeaderFor("state", 0)
	other := 1 - leader
	// Bootstrapped through the other broker only, the client never connects to the leader
	// before it goes away.
	c := newTestClient(t, []string{kf.ListenAddrs()[other]})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := c.leader(ctx, "state", 0); err != nil || got != leader {
		t.Fatalf("leader = %d, %v; want %d", got, err, leader)
	}
	if err := kf.RemoveNode(leader); err != nil { // its listener closes; the partition moves
		t.Fatal(err)
	}
	if err := readEmpty(t, c, "state", 10*time.Second); err != nil {
		t.Fatalf("ReadCommitted after the leader went away: %v", err)
	}
}

// TestReadCommittedLeaderMissingFromBrokers: a metadata response naming a leader that is not
// among its brokers (a broker between shutting down and leaving the metadata) is a partition
// without a leader, to ask about again, not a node to wait for.
func TestReadCommittedLeaderMissingFromBrokers(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	host, portStr, _ := net.SplitHostPort(kf.ListenAddrs()[0])
	port, _ := strconv.Atoi(portStr)
	var answered atomic.Int32
	kf.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mreq := req.(*kmsg.MetadataRequest)
		if len(mreq.Topics) == 0 {
			return nil, nil, false // brokers only: kfake answers, and the control stays
		}
		// Handled: the control is dropped, so only the first answer about the topic is doctored.
		resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("state")
		rt.TopicID = [16]byte{15: 1}
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Leader, rp.LeaderEpoch = 7, 0 // not a broker of this response
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		answered.Add(1)
		return resp, nil, true
	})
	c := newTestClient(t, kf.ListenAddrs())
	if err := readEmpty(t, c, "state", 10*time.Second); err != nil {
		t.Fatalf("ReadCommitted: %v", err)
	}
	if answered.Load() != 1 {
		t.Fatalf("%d doctored metadata answers, want 1", answered.Load())
	}
}
