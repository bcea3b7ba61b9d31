package metadata

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Unix(1_000_000, 0)

func newTestMetadata(t *testing.T) *Metadata {
	t.Helper()
	m, err := New([]string{"127.0.0.1:9092", "localhost:9093"}, 5*time.Minute, 100*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type partitionSpec struct {
	partition, leader, epoch int32
	err                      int16
}

func response(topics map[string][]partitionSpec, topicErrors map[string]int16) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	// A version with reliable leader epochs (v9+) and topic ids (v10+), as brokers since
	// Kafka 2.8 answer.
	resp.SetVersion(resp.MaxVersion())
	for _, id := range []int32{1, 2} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "broker", 9090+id
		resp.Brokers = append(resp.Brokers, b)
	}
	for name, ps := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.ErrorCode = topicErrors[name]
		for _, p := range ps {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader, rp.LeaderEpoch, rp.ErrorCode = p.partition, p.leader, p.epoch, p.err
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for name, code := range topicErrors {
		if _, ok := topics[name]; !ok {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.ErrorCode = code
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

func TestNewBootstrap(t *testing.T) {
	m := newTestMetadata(t)
	c := m.Fetch()
	if !c.IsBootstrap() {
		t.Fatal("not a bootstrap cluster")
	}
	want := []Node{{ID: -1, Host: "127.0.0.1", Port: 9092}, {ID: -2, Host: "localhost", Port: 9093}}
	if !slices.Equal(c.Nodes(), want) {
		t.Fatalf("nodes = %v, want %v", c.Nodes(), want)
	}
	if m.TimeToNextUpdate(t0) != 0 {
		t.Fatal("first update not due at once")
	}
	for _, bad := range [][]string{nil, {"nohost"}, {"h:notaport"}, {":9092"}, {"h:70000"}} {
		if _, err := New(bad, time.Minute, time.Second, false); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestUpdateBuildsCluster(t *testing.T) {
	m := newTestMetadata(t)
	m.Update(response(map[string][]partitionSpec{
		"a": {{2, 2, 5, 0}, {0, 1, 3, 0}, {1, -1, -1, kerr.LeaderNotAvailable.Code}},
		"b": {{0, 2, 1, 0}},
	}, map[string]int16{"denied": kerr.TopicAuthorizationFailed.Code, "missing": kerr.UnknownTopicOrPartition.Code}), t0)

	c := m.Fetch()
	if c.IsBootstrap() || m.Version() != 1 {
		t.Fatalf("bootstrap %v, version %d", c.IsBootstrap(), m.Version())
	}
	if n, ok := c.Node(2); !ok || n.Addr() != "broker:9092" {
		t.Fatalf("node 2 = %v, %v", n, ok)
	}
	if got := c.PartitionCount("a"); got != 3 {
		t.Fatalf("partitions of a = %d", got)
	}
	if got := c.AvailablePartitions("a"); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("available partitions of a = %v (partition 1 has no leader)", got)
	}
	if leader, ok := c.LeaderFor(TopicPartition{"a", 2}); !ok || leader != 2 {
		t.Fatalf("leader a-2 = %d %v", leader, ok)
	}
	if _, ok := c.LeaderFor(TopicPartition{"a", 1}); ok {
		t.Fatal("a-1 has a leader")
	}
	if _, ok := c.LeaderFor(TopicPartition{"a", 9}); ok {
		t.Fatal("a-9 exists")
	}
	want := []TopicPartition{{"a", 2}, {"b", 0}}
	if got := c.PartitionsForNode(2); !slices.Equal(got, want) {
		t.Fatalf("partitions for node 2 = %v, want %v", got, want)
	}
	if !errors.Is(c.TopicError("denied"), kerr.TopicAuthorizationFailed) || !errors.Is(c.TopicError("missing"), kerr.UnknownTopicOrPartition) {
		t.Fatalf("topic errors: %v, %v", c.TopicError("denied"), c.TopicError("missing"))
	}
	if c.TopicError("a") != nil || c.PartitionCount("denied") != 0 {
		t.Fatal("healthy topic has an error, or denied topic has partitions")
	}
	if p, _ := c.Partition(TopicPartition{"a", 1}); !errors.Is(p.Err, kerr.LeaderNotAvailable) {
		t.Fatalf("partition error %v", p.Err)
	}
	// Invalid-metadata errors (LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION) ask again.
	if !m.UpdateRequested() {
		t.Fatal("no update requested after invalid metadata errors")
	}
}

func TestUpdateKeepsNewerLeaderEpoch(t *testing.T) {
	m := newTestMetadata(t)
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 7, 0}}}, nil), t0)
	m.Update(response(map[string][]partitionSpec{"a": {{0, 2, 6, 0}}}, nil), t0.Add(time.Second))
	if leader, _ := m.Fetch().LeaderFor(TopicPartition{"a", 0}); leader != 1 {
		t.Fatalf("leader %d from a stale epoch replaced the newer one", leader)
	}
	m.Update(response(map[string][]partitionSpec{"a": {{0, 2, 8, 0}}}, nil), t0.Add(2*time.Second))
	if leader, _ := m.Fetch().LeaderFor(TopicPartition{"a", 0}); leader != 2 {
		t.Fatalf("leader %d, want 2 at the newer epoch", leader)
	}
}

// TestLeaderHintEpochOutlivesALaggingResponse: a leader a produce response named (KIP-951) is
// not undone by a lagging broker's metadata at the epoch before it: the hint's epoch becomes
// the last seen one, as Java's Metadata.updatePartitionLeadership records it in
// lastSeenLeaderEpochs. It used to put the old leader back.
func TestLeaderHintEpochOutlivesALaggingResponse(t *testing.T) {
	m := newTestMetadata(t)
	tp := TopicPartition{"a", 0}
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 7, 0}}}, nil), t0)
	if changed := m.UpdatePartitionLeadership([]LeaderHint{{TopicPartition: tp, Leader: 2, LeaderEpoch: 8}}, nil); len(changed) != 1 {
		t.Fatalf("the hint changed %v", changed)
	}
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 7, 0}}}, nil), t0.Add(time.Second))
	if leader, _ := m.Fetch().LeaderFor(tp); leader != 2 {
		t.Fatalf("leader %d after a response at epoch 7, want 2 from the hint at epoch 8", leader)
	}
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 9, 0}}}, nil), t0.Add(2*time.Second))
	if leader, _ := m.Fetch().LeaderFor(tp); leader != 1 {
		t.Fatalf("leader %d after a response at epoch 9, want 1", leader)
	}
}

func TestUpdateWithoutBrokersIsAFailure(t *testing.T) {
	m := newTestMetadata(t)
	m.Update(kmsg.NewPtrMetadataResponse(), t0)
	if m.Version() != 0 || !m.Fetch().IsBootstrap() {
		t.Fatal("an empty response was installed")
	}
	if d := m.TimeToNextUpdate(t0); d != 100*time.Millisecond {
		t.Fatalf("next update in %v, want the refresh backoff", d)
	}
}

func TestTimeToNextUpdate(t *testing.T) {
	tests := []struct {
		name  string
		setup func(m *Metadata)
		at    time.Time
		want  time.Duration
	}{
		{"fresh metadata waits for max age", func(m *Metadata) { m.Update(response(nil, nil), t0) }, t0.Add(time.Minute), 4 * time.Minute},
		{"max age passed", func(m *Metadata) { m.Update(response(nil, nil), t0) }, t0.Add(6 * time.Minute), 0},
		{"requested, inside backoff", func(m *Metadata) { m.Update(response(nil, nil), t0); m.RequestUpdate() }, t0.Add(30 * time.Millisecond), 70 * time.Millisecond},
		{"requested, backoff passed", func(m *Metadata) { m.Update(response(nil, nil), t0); m.RequestUpdate() }, t0.Add(time.Second), 0},
		{"failed attempt backs off", func(m *Metadata) { m.FailedUpdate(t0) }, t0.Add(40 * time.Millisecond), 60 * time.Millisecond},
		{"new topic skips the backoff", func(m *Metadata) { m.Update(response(nil, nil), t0); m.Add("t", t0) }, t0, 0},
		{"known topic does not", func(m *Metadata) {
			m.Add("t", t0)
			m.Update(response(map[string][]partitionSpec{"t": {{0, 1, 0, 0}}}, nil), t0)
			m.Add("t", t0)
		}, t0.Add(time.Minute), 4 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetadata(t)
			tt.setup(m)
			if got := m.TimeToNextUpdate(tt.at); got != tt.want {
				t.Fatalf("TimeToNextUpdate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUpdateForKeepsLaterRequest(t *testing.T) {
	m := newTestMetadata(t)
	m.Update(response(nil, nil), t0)
	m.RequestUpdate()
	_, requestVersion := m.NewRequestAndVersion()
	m.RequestUpdate() // e.g. NOT_LEADER seen while the request was in flight
	m.UpdateFor(requestVersion, response(nil, nil), t0.Add(time.Second))
	if !m.UpdateRequested() {
		t.Fatal("a response to an older request satisfied a newer update request")
	}
	_, requestVersion = m.NewRequestAndVersion()
	m.UpdateFor(requestVersion, response(nil, nil), t0.Add(2*time.Second))
	if m.UpdateRequested() {
		t.Fatal("update still requested after a response to the latest request")
	}
}

func TestTopicsExpireWhenIdle(t *testing.T) {
	m := newTestMetadata(t)
	m.Add("kept", t0)
	m.Add("idle", t0)
	m.Update(response(map[string][]partitionSpec{"kept": {{0, 1, 0, 0}}, "idle": {{0, 1, 0, 0}}}, nil), t0)
	later := t0.Add(DefaultMaxIdle + time.Second)
	m.Add("kept", later.Add(-time.Minute))
	m.Update(response(map[string][]partitionSpec{"kept": {{0, 1, 0, 0}}, "idle": {{0, 1, 0, 0}}}, nil), later)
	if got := m.Topics(); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("topics = %v, want the idle one dropped", got)
	}
	// A new topic is kept until a response mentions it, however long that takes.
	m.Add("slow", later)
	m.Update(response(nil, nil), later.Add(DefaultMaxIdle+time.Hour))
	if !slices.Contains(m.Topics(), "slow") {
		t.Fatal("a new topic expired before any response named it")
	}
}

func TestNewRequest(t *testing.T) {
	req := NewRequest(nil, false)
	if req.Topics == nil || len(req.Topics) != 0 {
		t.Fatal("no topics must be an empty list, not null (null means all topics)")
	}
	req = NewRequest([]string{"a", "b"}, true)
	if len(req.Topics) != 2 || *req.Topics[1].Topic != "b" || !req.AllowAutoTopicCreation {
		t.Fatalf("request = %+v", req)
	}
}

func TestAwaitUpdate(t *testing.T) {
	t.Run("wakes on update", func(t *testing.T) {
		m := newTestMetadata(t)
		v := m.RequestUpdate()
		done := make(chan error, 1)
		go func() { done <- m.AwaitUpdate(context.Background(), v, time.Time{}) }()
		time.Sleep(10 * time.Millisecond)
		m.Update(response(nil, nil), t0)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("AwaitUpdate did not wake")
		}
	})
	t.Run("already newer", func(t *testing.T) {
		m := newTestMetadata(t)
		m.Update(response(nil, nil), t0)
		if err := m.AwaitUpdate(context.Background(), 0, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		m := newTestMetadata(t)
		if err := m.AwaitUpdate(context.Background(), 0, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrAwaitTimeout) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		m := newTestMetadata(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := m.AwaitUpdate(ctx, 0, time.Time{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("failed update does not wake", func(t *testing.T) {
		m := newTestMetadata(t)
		m.FailedUpdate(t0)
		if err := m.AwaitUpdate(context.Background(), 0, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrAwaitTimeout) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("fatal error until an update", func(t *testing.T) {
		m := newTestMetadata(t)
		fatal := errors.New("authentication failed")
		m.FatalError(fatal)
		for range 2 { // every waiter fails fast, not just the first
			if err := m.AwaitUpdate(context.Background(), 0, time.Now().Add(time.Second)); err != fatal {
				t.Fatalf("err = %v", err)
			}
		}
		m.Update(response(nil, nil), t0)
		if err := m.AwaitUpdate(context.Background(), 1, time.Now().Add(10*time.Millisecond)); !errors.Is(err, ErrAwaitTimeout) {
			t.Fatalf("wait after a successful update: %v", err)
		}
	})
	t.Run("close", func(t *testing.T) {
		m := newTestMetadata(t)
		done := make(chan error, 1)
		go func() { done <- m.AwaitUpdate(context.Background(), 0, time.Time{}) }()
		m.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestConcurrentReadersAndWriter(t *testing.T) {
	m := newTestMetadata(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := m.Fetch()
				_ = c.PartitionCount("a")
				_ = c.AvailablePartitions("a")
				m.Add("a", t0)
				_ = m.TimeToNextUpdate(t0)
			}
		}()
	}
	for i := range 200 {
		m.Update(response(map[string][]partitionSpec{"a": {{0, 1, int32(i), 0}}}, nil), t0)
	}
	close(stop)
	for range 4 {
		<-done
	}
	if m.Version() != 200 {
		t.Fatalf("version %d", m.Version())
	}
}

// withTopicID sets topic's id in resp.
func withTopicID(resp *kmsg.MetadataResponse, topic string, id byte) *kmsg.MetadataResponse {
	for i := range resp.Topics {
		if *resp.Topics[i].Topic == topic {
			resp.Topics[i].TopicID = [16]byte{15: id}
		}
	}
	return resp
}

// TestUpdateRecreatedTopicTakesNewLeader pins the rules of the Java client's
// Metadata.updateLatestMetadata: a leader epoch older than the last seen one is ignored (a
// lagging broker), unless the topic id changed, which means the topic was deleted and created
// again and its epochs started over; an old topic id that is unknown counts as changed.
func TestUpdateRecreatedTopicTakesNewLeader(t *testing.T) {
	tp := TopicPartition{"a", 0}
	leader := func(m *Metadata) (int32, int32) {
		t.Helper()
		p, ok := m.Fetch().Partition(tp)
		if !ok {
			t.Fatal("partition a-0 missing")
		}
		return p.Leader, p.LeaderEpoch
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := func(leader, epoch int32) map[string][]partitionSpec {
		return map[string][]partitionSpec{"a": {{0, leader, epoch, 0}}}
	}

	// updated is a new Metadata interested in "a" that took resps, the i-th at at(i).
	updated := func(t *testing.T, resps ...*kmsg.MetadataResponse) *Metadata {
		m := newTestMetadata(t)
		m.Add("a", t0)
		for i, r := range resps {
			m.Update(r, at(i))
		}
		return m
	}
	id := withTopicID

	t.Run("new topic id", func(t *testing.T) {
		m := updated(t, id(response(a(1, 7), nil), "a", 1), id(response(a(2, 0), nil), "a", 2))
		if l, e := leader(m); l != 2 || e != 0 {
			t.Fatalf("recreated topic: leader %d epoch %d, want the new topic's leader 2 at epoch 0", l, e)
		}
		// From then on the guard works for the new topic's epochs.
		m.Update(id(response(a(2, 3), nil), "a", 2), at(2))
		m.Update(id(response(a(1, 2), nil), "a", 2), at(3))
		if l, e := leader(m); l != 2 || e != 3 {
			t.Fatalf("stale epoch of the same topic id: leader %d epoch %d, want 2 at 3", l, e)
		}
	})
	t.Run("old topic id unknown", func(t *testing.T) {
		m := updated(t, response(a(1, 7), nil) /* no topic id */, id(response(a(2, 0), nil), "a", 2))
		if l, _ := leader(m); l != 2 {
			t.Fatalf("leader %d, want 2: a topic id where none was known resets the epoch", l)
		}
	})
	t.Run("deleted in between", func(t *testing.T) {
		m := updated(t, id(response(a(1, 7), nil), "a", 1),
			response(nil, map[string]int16{"a": kerr.UnknownTopicOrPartition.Code}),
			id(response(a(2, 0), nil), "a", 2))
		if l, _ := leader(m); l != 2 {
			t.Fatalf("leader %d, want 2 after delete and create", l)
		}
	})
	t.Run("same topic id keeps the newer epoch", func(t *testing.T) {
		m := updated(t, id(response(a(1, 7), nil), "a", 1), id(response(a(2, 6), nil), "a", 1))
		if l, e := leader(m); l != 1 || e != 7 {
			t.Fatalf("leader %d epoch %d from a stale epoch, want 1 at 7", l, e)
		}
	})
	t.Run("no topic id in the new response keeps the newer epoch", func(t *testing.T) {
		m := updated(t, id(response(a(1, 7), nil), "a", 1), response(a(2, 6), nil))
		if l, _ := leader(m); l != 1 {
			t.Fatalf("leader %d, want 1: without a topic id nothing says the topic changed", l)
		}
	})
	t.Run("unreliable epochs before v9", func(t *testing.T) {
		old := response(a(2, 6), nil)
		old.SetVersion(8)
		m := updated(t, response(a(1, 7), nil), old)
		if l, e := leader(m); l != 2 || e != -1 {
			t.Fatalf("v8 response: leader %d epoch %d, want 2 without an epoch (Java's withoutLeaderEpoch)", l, e)
		}
	})
}

// TestUpdateRequestsUpdateOnEveryInvalidMetadataError checks errors the list used to miss
// (LISTENER_NOT_FOUND, INCONSISTENT_TOPIC_ID: InvalidMetadataException subclasses in Java) ask
// for another update, and one it wrongly held (UNKNOWN_LEADER_EPOCH, a RetriableException:
// the broker lags behind us) does not.
func TestUpdateRequestsUpdateOnEveryInvalidMetadataError(t *testing.T) {
	for _, tt := range []struct {
		err  *kerr.Error
		want bool
	}{
		{kerr.ListenerNotFound, true},
		{kerr.InconsistentTopicID, true},
		{kerr.PreferredLeaderNotAvailable, true},
		{kerr.UnknownLeaderEpoch, false},
		{kerr.NotEnoughReplicas, false},
	} {
		t.Run(tt.err.Message, func(t *testing.T) {
			m := newTestMetadata(t)
			m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 0, tt.err.Code}}}, nil), t0)
			if m.UpdateRequested() != tt.want {
				t.Fatalf("partition error %v: update requested %v, want %v", tt.err, m.UpdateRequested(), tt.want)
			}
		})
	}
}

func TestSetMaxIdle(t *testing.T) {
	m := newTestMetadata(t)
	m.SetMaxIdle(5 * time.Second)
	m.Add("a", t0)
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 0, 0}}}, nil), t0)
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 0, 0}}}, nil), t0.Add(4*time.Second))
	if !slices.Contains(m.Topics(), "a") {
		t.Fatal("topic dropped before metadata.max.idle.ms")
	}
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 0, 0}}}, nil), t0.Add(5*time.Second))
	if slices.Contains(m.Topics(), "a") {
		t.Fatal("topic kept after metadata.max.idle.ms")
	}
}

func TestRebootstrap(t *testing.T) {
	m := newTestMetadata(t)
	m.Add("a", t0)
	m.Update(response(map[string][]partitionSpec{"a": {{0, 1, 7, 0}}}, nil), t0)
	v := m.Version()
	m.Rebootstrap()
	c := m.Fetch()
	if !c.IsBootstrap() || len(c.Nodes()) != 2 || c.PartitionCount("a") != 0 {
		t.Fatalf("after Rebootstrap: bootstrap %v, nodes %v", c.IsBootstrap(), c.Nodes())
	}
	if m.Version() != v+1 || !m.UpdateRequested() {
		t.Fatalf("version %d (was %d), update requested %v: waiters must look again", m.Version(), v, m.UpdateRequested())
	}
	if !slices.Contains(m.Topics(), "a") {
		t.Fatal("the topics of interest were forgotten")
	}
}

// TestRefreshBackoffGrowsAfterFailures: with retry.backoff.max.ms, each failed refresh doubles
// the wait before the next (20 % jitter), up to the maximum; a success starts again at
// retry.backoff.ms (KIP-580, Java's Metadata.refreshBackoff and attempts). It used to retry a
// cluster that does not answer every retry.backoff.ms.
func TestRefreshBackoffGrowsAfterFailures(t *testing.T) {
	m := newTestMetadata(t) // retry.backoff.ms 100 ms
	m.SetRefreshBackoffMax(time.Second, rand.New(rand.NewPCG(9, 9)))
	m.RequestUpdate()
	at := t0
	for i, term := range []time.Duration{100, 200, 400, 800, 1000} {
		m.FailedUpdate(at)
		term *= time.Millisecond
		lo, hi := time.Duration(float64(term)*0.8), min(time.Duration(float64(term)*1.2), time.Second)
		if term == time.Second {
			lo = 800 * time.Millisecond
		}
		if d := m.TimeToNextUpdate(at); d < lo || d > hi {
			t.Fatalf("after %d failed refreshes: next in %v, want within [%v, %v]", i+1, d, lo, hi)
		}
		at = at.Add(hi)
	}
	m.Update(response(nil, nil), at)
	m.RequestUpdate()
	if d := m.TimeToNextUpdate(at); d < 80*time.Millisecond || d > 120*time.Millisecond {
		t.Fatalf("after a success: next requested refresh in %v, want retry.backoff.ms ± 20%%", d)
	}
}
