package network

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// newFakeCluster starts an in-process kfake cluster on 127.0.0.1 with random ports.
func newFakeCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "events")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newTestClient returns a client bootstrapped at addrs, closed at the end of the test.
func newTestClient(t *testing.T, addrs []string, cfg Config) (*NetworkClient, *metadata.Metadata) {
	t.Helper()
	meta, err := metadata.New(addrs, 5*time.Minute, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "kafkatrail-test"
	}
	c := newClient(cfg, meta, rand.New(rand.NewPCG(1, 2)))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c, meta
}

// pollUntil polls c with the real clock until cond holds, failing the test after limit.
func pollUntil(t *testing.T, c *NetworkClient, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		c.Poll(20*time.Millisecond, time.Now())
	}
}

// awaitMetadata polls until the updater installed a real cluster (not the bootstrap one).
func awaitMetadata(t *testing.T, c *NetworkClient, meta *metadata.Metadata) *metadata.Cluster {
	t.Helper()
	pollUntil(t, c, 10*time.Second, "metadata", func() bool { return !meta.Fetch().IsBootstrap() })
	return meta.Fetch()
}

// awaitReady polls until node is ready for requests.
func awaitReady(t *testing.T, c *NetworkClient, node metadata.Node) {
	t.Helper()
	pollUntil(t, c, 10*time.Second, "node ready", func() bool { return c.Ready(node, time.Now()) })
}

// eventsLeader asks for the metadata of the topic "events" and returns the cluster's first
// node once c is ready to send to it.
func eventsLeader(t *testing.T, c *NetworkClient, meta *metadata.Metadata) metadata.Node {
	t.Helper()
	meta.Add("events", time.Now())
	leader := awaitMetadata(t, c, meta).Nodes()[0]
	awaitReady(t, c, leader)
	return leader
}

// produceRequest builds a minimal acks=-1 produce request of one uncompressed record.
func produceRequest(topic string, partition int32, value []byte, acks int16) *kmsg.ProduceRequest {
	rec := kmsg.NewRecord()
	rec.Value = value
	raw := rec.AppendTo(nil)
	rec.Length = int32(len(raw) - 1) // everything after the 1-byte varint of the zero length
	records := rec.AppendTo(nil)

	batch := kmsg.NewRecordBatch()
	batch.Magic = 2
	batch.ProducerID = -1
	batch.ProducerEpoch = -1
	batch.FirstSequence = -1
	batch.NumRecords = 1
	now := time.Now().UnixMilli()
	batch.FirstTimestamp, batch.MaxTimestamp = now, now
	batch.Records = records
	batch.Length = int32(49 + len(records))
	encoded := batch.AppendTo(nil)
	crc := crc32.Checksum(encoded[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(encoded[17:21], crc)

	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = encoded
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestClientConnectsNegotiatesAndFetchesMetadata(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})

	cl := awaitMetadata(t, c, meta)
	if len(cl.Nodes()) != 1 {
		t.Fatalf("nodes = %v, want one broker", cl.Nodes())
	}
	// The bootstrap node (-1) answered ApiVersions before the metadata request could go out.
	if got := c.ConnectionState(-1); got != Ready {
		t.Fatalf("bootstrap node state = %v, want READY", got)
	}
	lo, hi, ok := c.APIVersions(-1, kmsg.Produce.Int16())
	if !ok || lo > 3 || hi < 3 {
		t.Fatalf("produce versions %d..%d (known %v)", lo, hi, ok)
	}
	// With no topic of interest the request asks for brokers only; adding one fetches it.
	meta.Add("events", time.Now())
	version := meta.Version()
	pollUntil(t, c, 10*time.Second, "topic metadata", func() bool { return meta.Version() > version })
	cl = meta.Fetch()
	if got := cl.PartitionCount("events"); got != 3 {
		t.Fatalf("partitions of events = %d, want 3", got)
	}
	if leader, ok := cl.LeaderFor(metadata.TopicPartition{Topic: "events", Partition: 0}); !ok || leader != cl.Nodes()[0].ID {
		t.Fatalf("leader of events-0 = %d, %v", leader, ok)
	}
}

func TestClientUnknownTopicError(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	awaitMetadata(t, c, meta)
	meta.Add("missing", time.Now())
	version := meta.Version()
	pollUntil(t, c, 10*time.Second, "topic metadata", func() bool { return meta.Version() > version })
	if err := meta.Fetch().TopicError("missing"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("TopicError = %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

func TestClientProduce(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	meta.Add("events", time.Now())
	cl := awaitMetadata(t, c, meta)
	leaderID, ok := cl.LeaderFor(metadata.TopicPartition{Topic: "events", Partition: 1})
	if !ok {
		t.Fatal("no leader for events-1")
	}
	leader, _ := cl.Node(leaderID)
	awaitReady(t, c, leader)

	var got []*inflight.Response
	for i := range 3 {
		c.Send(&ClientRequest{
			Destination:    leader.ID,
			Body:           produceRequest("events", 1, []byte{byte(i)}, -1),
			ExpectResponse: true,
			Callback:       func(r *inflight.Response) { got = append(got, r) },
		}, time.Now())
		// One write at a time per connection: the next request waits for this one's send.
		pollUntil(t, c, 5*time.Second, "send completed", func() bool { return c.Ready(leader, time.Now()) || len(got) == 3 })
	}
	pollUntil(t, c, 10*time.Second, "produce responses", func() bool { return len(got) == 3 })
	for i, r := range got {
		if r.Err != nil {
			t.Fatalf("response %d: %v", i, r.Err)
		}
		resp := r.Body.(*kmsg.ProduceResponse)
		if r.Request.APIVersion < 3 || resp.GetVersion() != r.Request.APIVersion {
			t.Fatalf("version %d, response version %d", r.Request.APIVersion, resp.GetVersion())
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("produce error: %v", err)
		}
		if p.BaseOffset != int64(i) {
			t.Fatalf("response %d base offset %d: out of order", i, p.BaseOffset)
		}
		if !r.Request.SendComplete || r.Request.Written.IsZero() || r.Received.Before(r.Request.Queued) {
			t.Fatalf("request stage times not recorded: %+v", r.Request)
		}
	}
	if c.InFlightRequestCount() != 0 {
		t.Fatalf("in flight = %d after all responses", c.InFlightRequestCount())
	}
}

func TestClientProduceAcksZeroCompletesOnSend(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	leader := eventsLeader(t, c, meta)
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: leader.ID, Body: produceRequest("events", 0, []byte("x"), 0),
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	pollUntil(t, c, 5*time.Second, "acks=0 completion", func() bool { return got != nil })
	if got.Err != nil || got.Body != nil || !got.Request.SendComplete {
		t.Fatalf("acks=0 response = %+v", got)
	}
	if c.HasInFlightRequests(leader.ID) {
		t.Fatal("acks=0 request still in flight")
	}
}

func TestClientRequestTimeoutClosesConnection(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{RequestTimeout: 300 * time.Millisecond})
	leader := eventsLeader(t, c, meta)

	release := make(chan struct{})
	defer close(release)
	cluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.SleepControl(func() { <-release })
		return nil, errors.New("dropped"), true
	})
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: leader.ID, Body: produceRequest("events", 0, []byte("x"), -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	pollUntil(t, c, 5*time.Second, "request timeout", func() bool { return got != nil })
	if !got.TimedOut || !got.Disconnected || !errors.Is(got.Err, ErrRequestTimedOut) || !errors.Is(got.Err, ErrDisconnected) {
		t.Fatalf("response = %+v, want timed out and disconnected", got)
	}
	if c.ConnectionState(leader.ID) != Disconnected || c.HasInFlightRequests(leader.ID) {
		t.Fatalf("state %v, in flight %d", c.ConnectionState(leader.ID), c.InFlightRequestCountFor(leader.ID))
	}
	// The node comes back after its reconnect backoff.
	awaitReady(t, c, leader)
}

func TestClientDisconnectFailsAllInFlight(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	leader := eventsLeader(t, c, meta)

	// Hold the first produce request, then fail the connection when it is released: the broker
	// closes the connection when a control function returns an error.
	held := make(chan struct{})
	release := make(chan struct{})
	cluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		close(held)
		cluster.SleepControl(func() { <-release })
		return nil, errors.New("broker goes away"), true
	})
	var got []*inflight.Response
	cb := func(r *inflight.Response) { got = append(got, r) }
	for i := range 3 {
		c.Send(&ClientRequest{Destination: leader.ID, Body: produceRequest("events", 0, []byte{byte(i)}, -1), ExpectResponse: true, Callback: cb}, time.Now())
		pollUntil(t, c, 5*time.Second, "send completed", func() bool { return c.Ready(leader, time.Now()) })
	}
	<-held
	if n := c.InFlightRequestCountFor(leader.ID); n != 3 {
		t.Fatalf("in flight = %d, want 3", n)
	}
	close(release)
	pollUntil(t, c, 5*time.Second, "disconnect", func() bool { return len(got) == 3 })
	for i, r := range got {
		if !r.Disconnected || r.TimedOut || !errors.Is(r.Err, ErrDisconnected) {
			t.Fatalf("response %d = %+v, want disconnected", i, r)
		}
		if i > 0 && r.Request.CorrelationID < got[i-1].Request.CorrelationID {
			t.Fatal("failed requests not oldest first")
		}
	}
	if !meta.UpdateRequested() {
		t.Fatal("disconnect did not request a metadata update")
	}
}

func TestClientReconnectBackoff(t *testing.T) {
	// Nothing listens on the address (a closed listener's port), so every attempt fails.
	cluster := newFakeCluster(t)
	addr := cluster.ListenAddrs()[0]
	cluster.Close()
	c, _ := newTestClient(t, []string{addr}, Config{ReconnectBackoff: 100 * time.Millisecond, ReconnectBackoffMax: time.Second})
	node := metadata.Node{ID: 7, Host: "127.0.0.1", Port: 1}
	host, port := splitAddr(t, addr)
	node.Host, node.Port = host, port

	start := time.Now()
	if c.Ready(node, start) {
		t.Fatal("ready before connecting")
	}
	pollUntil(t, c, 5*time.Second, "connection failure", func() bool { return c.ConnectionFailed(node.ID) })
	failedAt := c.states.LastConnectAttempt(node.ID)
	delay := c.ConnectionDelay(node.ID, failedAt)
	if delay < 80*time.Millisecond || delay > 120*time.Millisecond {
		t.Fatalf("first backoff %v, want 100ms ± 20%%", delay)
	}
	// Inside the backoff, Ready does not dial again.
	if c.Ready(node, failedAt.Add(delay/2)); c.ConnectionState(node.ID) != Disconnected {
		t.Fatal("Ready connected inside the backoff")
	}
	if c.Ready(node, failedAt.Add(delay)); c.ConnectionState(node.ID) != Connecting {
		t.Fatal("Ready did not reconnect after the backoff")
	}
	pollUntil(t, c, 5*time.Second, "second failure", func() bool { return c.ConnectionFailed(node.ID) })
	second := c.ConnectionDelay(node.ID, c.states.LastConnectAttempt(node.ID))
	if second < 160*time.Millisecond || second > 240*time.Millisecond {
		t.Fatalf("second backoff %v, want 200ms ± 20%%", second)
	}
}

func TestSanitizeSoftwareString(t *testing.T) {
	for in, want := range map[string]string{
		"0.1.0": "0.1.0",
		"dev":   "dev",
		"0.0.0-20261203161742-92430a21659f+dirty": "0.0.0-20261203161742-92430a21659f-dirty",
		"1.2.3+incompatible":                      "1.2.3-incompatible",
		"-v1.0_beta-":                             "v1.0-beta",
		"+++":                                     "unknown",
		"":                                        "unknown",
	} {
		if got := SanitizeSoftwareString(in); got != want {
			t.Errorf("SanitizeSoftwareString(%q) = %q, want %q", in, got, want)
		}
	}
}
