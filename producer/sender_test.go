package producer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// mockClient stands in for the NetworkClient the way the Java client's MockClient does in
// SenderTest: requests are recorded on Send, and the test decides when and how each is answered.
// Poll runs the callbacks of the answers the test queued, oldest request first.
type mockClient struct {
	notReady map[int32]bool
	nodes    []metadata.Node
	pending  []*network.ClientRequest // sent, not answered
	answers  []answer
	sent     []*network.ClientRequest
	wakeups  int
	polls    []time.Duration // the timeout of every Poll
}

type answer struct {
	req          *network.ClientRequest
	body         kmsg.Response
	disconnected bool
}

func (m *mockClient) Ready(node metadata.Node, now time.Time) bool { return !m.notReady[node.ID] }
func (m *mockClient) ConnectionDelay(int32, time.Time) time.Duration {
	return time.Second
}
func (m *mockClient) ConnectionFailed(int32) bool { return false }
func (m *mockClient) PollDelay(node int32, now time.Time) time.Duration {
	return m.ConnectionDelay(node, now)
}
func (m *mockClient) Send(req *network.ClientRequest, now time.Time) {
	// The real client copies the request into its frame during Send and the Sender reuses the
	// encoded batches afterwards; keep a copy, as the wire would.
	if pr, ok := req.Body.(*kmsg.ProduceRequest); ok {
		cp := *pr
		cp.Topics = make([]kmsg.ProduceRequestTopic, len(pr.Topics))
		for ti, t := range pr.Topics {
			cp.Topics[ti] = t
			cp.Topics[ti].Partitions = make([]kmsg.ProduceRequestTopicPartition, len(t.Partitions))
			for pi, p := range t.Partitions {
				p.Records = append([]byte(nil), p.Records...)
				cp.Topics[ti].Partitions[pi] = p
			}
		}
		copied := *req
		copied.Body = &cp
		req = &copied
	}
	m.sent = append(m.sent, req)
	m.pending = append(m.pending, req)
}
func (m *mockClient) LeastLoadedNode(time.Time) (metadata.Node, bool) {
	if len(m.nodes) == 0 {
		return metadata.Node{}, false
	}
	return m.nodes[0], true
}
func (m *mockClient) InFlightRequestCount() int { return len(m.pending) }
func (m *mockClient) Wakeup()                   { m.wakeups++ }
func (m *mockClient) WakeIn(time.Duration)      { m.wakeups++ }
func (m *mockClient) Close() error              { return nil }

func (m *mockClient) Poll(timeout time.Duration, now time.Time) []*network.ClientResponse {
	m.polls = append(m.polls, timeout)
	var out []*network.ClientResponse
	// acks=0 requests complete as soon as they are "written".
	keep := m.pending[:0]
	for _, r := range m.pending {
		if !r.ExpectResponse {
			out = append(out, m.complete(answer{req: r}, now))
			continue
		}
		keep = append(keep, r)
	}
	m.pending = keep
	for _, a := range m.answers {
		out = append(out, m.complete(a, now))
	}
	m.answers = nil
	return out
}

func (m *mockClient) complete(a answer, now time.Time) *network.ClientResponse {
	resp := &network.ClientResponse{
		Request: &network.InFlightRequest{
			Destination:    a.req.Destination,
			Body:           a.req.Body,
			ExpectResponse: a.req.ExpectResponse,
			Created:        a.req.Created,
		},
		Body:         a.body,
		Received:     now,
		Disconnected: a.disconnected,
	}
	a.req.Callback(resp)
	return resp
}

// respond answers the oldest pending request with what build returns for it.
func (m *mockClient) respond(t *testing.T, build func(req kmsg.Request) kmsg.Response) {
	t.Helper()
	if len(m.pending) == 0 {
		t.Fatal("no request to answer")
	}
	req := m.pending[0]
	m.pending = m.pending[1:]
	m.answers = append(m.answers, answer{req: req, body: build(req.Body)})
}

func (m *mockClient) disconnect(t *testing.T) {
	t.Helper()
	if len(m.pending) == 0 {
		t.Fatal("no request to disconnect")
	}
	req := m.pending[0]
	m.pending = m.pending[1:]
	m.answers = append(m.answers, answer{req: req, disconnected: true})
}

// produceAnswer answers every partition of a ProduceRequest with code and baseOffset.
func produceAnswer(code int16, baseOffset int64) func(kmsg.Request) kmsg.Response {
	return func(r kmsg.Request) kmsg.Response {
		return kafkatest.ProduceAnswer(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return code }, baseOffset)
	}
}

func initProducerIDAnswer(id int64, epoch int16) func(kmsg.Request) kmsg.Response {
	return func(kmsg.Request) kmsg.Response {
		resp := kmsg.NewPtrInitProducerIDResponse()
		resp.ProducerID = id
		resp.ProducerEpoch = epoch
		return resp
	}
}

// senderFixture is a Sender with a mock client, one broker (node 1) leading every partition of
// topic "t", and a clock the test moves by hand.
type senderFixture struct {
	t      *testing.T
	cfg    Config
	client *mockClient
	meta   *metadata.Metadata
	acc    *accumulator.RecordAccumulator
	sender *Sender
	now    time.Time
}

func newSenderFixture(t *testing.T, partitions int, mutate func(*Config)) *senderFixture {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"127.0.0.1:9092"}
	cfg.EnableIdempotence = false
	cfg.LingerMs = 0
	mutate(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &senderFixture{t: t, cfg: cfg, now: time.Unix(1_700_000_000, 0)}
	clock := func() time.Time { return f.now }
	meta, err := metadata.New(cfg.BootstrapServers, ms(cfg.MetadataMaxAgeMs), ms(cfg.RetryBackoffMs), true)
	if err != nil {
		t.Fatal(err)
	}
	var parts []kmsg.MetadataResponseTopicPartition
	for i := 0; i < partitions; i++ {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		p.Leader = 1
		p.Replicas = []int32{1}
		p.ISR = []int32{1}
		parts = append(parts, p)
	}
	meta.Add("t", f.now)
	meta.Update(topicMetadata(parts...), f.now)
	if meta.Fetch().PartitionCount("t") != partitions {
		t.Fatalf("metadata fixture has %d partitions", meta.Fetch().PartitionCount("t"))
	}
	f.meta = meta
	f.client = &mockClient{nodes: []metadata.Node{{ID: 1, Host: "127.0.0.1", Port: 9092}}}
	f.acc = accumulator.New(cfg.accumulatorConfig(clock))
	acks, _ := parseAcks(cfg.Acks)
	f.sender = newSender(cfg, acks, f.client, f.acc, meta, slog.New(slog.DiscardHandler), clock)
	return f
}

// topicMetadata is a metadata response naming broker 1 (127.0.0.1:9092) and topic "t" with
// partitions.
func topicMetadata(partitions ...kmsg.MetadataResponseTopicPartition) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
	resp.Brokers = append(resp.Brokers, b)
	topic := kmsg.NewMetadataResponseTopic()
	name := "t"
	topic.Topic = &name
	topic.Partitions = partitions
	resp.Topics = append(resp.Topics, topic)
	return resp
}

// outcome collects what a record's callback reported.
type outcome struct {
	calls int
	meta  RecordMetadata
	err   error
}

func (o *outcome) cb(m RecordMetadata, err error) { o.calls++; o.meta, o.err = m, err }

func (f *senderFixture) append(partition int32, value string) *outcome {
	f.t.Helper()
	o := &outcome{}
	tp := metadata.TopicPartition{Topic: "t", Partition: partition}
	if _, err := f.acc.Append(context.Background(), tp, accumulator.AppendRecord{Timestamp: f.now,
		Value: []byte(value), Callback: o.cb, MaxBlockDeadline: f.now.Add(time.Minute), Now: f.now}); err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *senderFixture) runOnce() { f.sender.runOnce(f.now) }

// answeredWith sends one record and has the broker answer its request with code.
func (f *senderFixture) answeredWith(code int16) *outcome {
	f.t.Helper()
	o := f.append(0, "v")
	f.runOnce()
	f.client.respond(f.t, produceAnswer(code, -1))
	f.runOnce()
	return o
}

func (f *senderFixture) lastProduce() *kmsg.ProduceRequest {
	f.t.Helper()
	for i := len(f.client.sent) - 1; i >= 0; i-- {
		if r, ok := f.client.sent[i].Body.(*kmsg.ProduceRequest); ok {
			return r
		}
	}
	f.t.Fatal("no produce request was sent")
	return nil
}

// batchOf decodes the record batch sent for partition in req.
func batchOf(t *testing.T, req *kmsg.ProduceRequest, partition int32) kmsg.RecordBatch {
	t.Helper()
	for _, tt := range req.Topics {
		for _, p := range tt.Partitions {
			if p.Partition == partition {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(p.Records); err != nil {
					t.Fatalf("decoding batch: %v", err)
				}
				return b
			}
		}
	}
	t.Fatalf("partition %d not in request", partition)
	return kmsg.RecordBatch{}
}

func TestSenderProducesAndCompletesCallback(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	o := f.append(0, "hello")
	f.runOnce()
	if got := len(f.client.pending); got != 1 {
		t.Fatalf("in flight after runOnce = %d, want 1", got)
	}
	req := f.lastProduce()
	if req.Acks != -1 || req.TimeoutMillis != 30000 {
		t.Fatalf("acks=%d timeout=%d, want -1 and 30000", req.Acks, req.TimeoutMillis)
	}
	if b := batchOf(t, req, 0); b.NumRecords != 1 || b.ProducerID != -1 {
		t.Fatalf("batch has %d records and producer id %d, want 1 and -1", b.NumRecords, b.ProducerID)
	}
	if o.calls != 0 {
		t.Fatal("callback ran before the response")
	}
	f.client.respond(t, produceAnswer(0, 42))
	f.runOnce()
	if o.calls != 1 || o.err != nil || o.meta.Offset != 42 || o.meta.Partition != 0 {
		t.Fatalf("callback: calls=%d err=%v meta=%+v, want one success at offset 42", o.calls, o.err, o.meta)
	}
	if f.acc.HasIncomplete() {
		t.Fatal("accumulator still has incomplete batches")
	}
}

func TestSenderRetriesRetriableErrorsAndRefreshesMetadata(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	o := f.answeredWith(kerr.NotLeaderForPartition.Code)
	if o.calls != 0 {
		t.Fatalf("a retriable error reached the callback: %v", o.err)
	}
	if !f.meta.UpdateRequested() {
		t.Fatal("NOT_LEADER_OR_FOLLOWER did not request a metadata update")
	}
	// Within retry.backoff.ms (less its 20 % jitter) nothing is resent; after it (and the
	// jitter) the batch goes.
	f.now = f.now.Add(50 * time.Millisecond)
	f.runOnce()
	if len(f.client.sent) != 1 {
		t.Fatalf("resent during retry backoff: %d requests", len(f.client.sent))
	}
	f.now = f.now.Add(80 * time.Millisecond)
	f.runOnce()
	if len(f.client.sent) != 2 {
		t.Fatalf("requests after backoff = %d, want 2", len(f.client.sent))
	}
	f.client.respond(t, produceAnswer(0, 7))
	f.runOnce()
	if o.calls != 1 || o.err != nil || o.meta.Offset != 7 {
		t.Fatalf("callback calls=%d err=%v offset=%d, want one success at 7", o.calls, o.err, o.meta.Offset)
	}
}

func TestSenderRetriesAfterDisconnect(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	o := f.append(0, "v")
	f.runOnce()
	f.client.disconnect(t)
	f.runOnce()
	if o.calls != 0 {
		t.Fatalf("disconnect reached the callback: %v", o.err)
	}
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 1))
	f.runOnce()
	if o.calls != 1 || o.err != nil {
		t.Fatalf("callback calls=%d err=%v, want one success", o.calls, o.err)
	}
}

func TestSenderFailsNonRetriableErrorWithItsName(t *testing.T) {
	f := newSenderFixture(t, 1, func(*Config) {})
	o := f.answeredWith(kerr.TopicAuthorizationFailed.Code)
	if o.calls != 1 || !errors.Is(o.err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("callback calls=%d err=%v, want TOPIC_AUTHORIZATION_FAILED", o.calls, o.err)
	}
	if !strings.Contains(o.err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("error %q does not name the broker's error", o.err)
	}
	if len(f.client.sent) != 1 {
		t.Fatalf("a non-retriable error was retried: %d requests", len(f.client.sent))
	}
}

func TestSenderGivesUpAfterRetries(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.Retries = 2 })
	o := f.append(0, "v")
	for attempt := 0; attempt < 3; attempt++ {
		f.runOnce()
		f.client.respond(t, produceAnswer(kerr.RequestTimedOut.Code, -1))
		f.runOnce()
		f.now = f.now.Add(time.Second)
	}
	if len(f.client.sent) != 3 {
		t.Fatalf("sent %d times, want 1 + retries(2)", len(f.client.sent))
	}
	if o.calls != 1 || !errors.Is(o.err, kerr.RequestTimedOut) {
		t.Fatalf("callback calls=%d err=%v, want REQUEST_TIMED_OUT", o.calls, o.err)
	}
}

func TestSenderSplitsBatchOnMessageTooLarge(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.BatchSize = 400 })
	// Four records of ~40 bytes share one batch; the broker refuses it as too large.
	var outs []*outcome
	for i := 0; i < 4; i++ {
		outs = append(outs, f.append(0, strings.Repeat("x", 30)))
	}
	f.runOnce()
	if first := batchOf(t, f.lastProduce(), 0); first.NumRecords != 4 {
		t.Fatalf("first batch has %d records, want 4", first.NumRecords)
	}
	f.client.respond(t, produceAnswer(kerr.MessageTooLarge.Code, -1))
	f.runOnce()
	for i, o := range outs {
		if o.calls != 0 {
			t.Fatalf("record %d completed on MESSAGE_TOO_LARGE instead of being split: %v", i, o.err)
		}
	}
	// Answer every request until all records are delivered.
	deadline := 50
	for delivered := 0; delivered < len(outs) && deadline > 0; deadline-- {
		f.now = f.now.Add(200 * time.Millisecond)
		f.runOnce()
		for len(f.client.pending) > 0 {
			f.client.respond(t, produceAnswer(0, 100))
		}
		f.runOnce()
		delivered = 0
		for _, o := range outs {
			if o.calls == 1 && o.err == nil {
				delivered++
			}
		}
	}
	for i, o := range outs {
		if o.calls != 1 || o.err != nil {
			t.Fatalf("record %d: calls=%d err=%v, want delivered once", i, o.calls, o.err)
		}
	}
}

func TestSenderExpiresBatchesAfterDeliveryTimeout(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.DeliveryTimeoutMs = 30100; c.RequestTimeoutMs = 30000 })
	f.client.notReady = map[int32]bool{1: true}
	o := f.append(0, "v")
	f.runOnce()
	if o.calls != 0 {
		t.Fatal("expired too early")
	}
	f.now = f.now.Add(30100 * time.Millisecond)
	f.runOnce()
	var dte *DeliveryTimeoutError
	if o.calls != 1 || !errors.As(o.err, &dte) {
		t.Fatalf("callback calls=%d err=%v, want a DeliveryTimeoutError", o.calls, o.err)
	}
	if !strings.Contains(o.err.Error(), "delivery.timeout.ms") {
		t.Fatalf("error %q does not name delivery.timeout.ms", o.err)
	}
}

func TestSenderExpiresInFlightBatchOnce(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.DeliveryTimeoutMs = 30100; c.RequestTimeoutMs = 30000 })
	o := f.append(0, "v")
	f.runOnce()
	f.now = f.now.Add(31 * time.Second)
	f.runOnce()
	if o.calls != 1 {
		t.Fatalf("in-flight batch past delivery.timeout.ms: calls=%d", o.calls)
	}
	// The late response must not call the callback again, and must free the batch.
	f.client.respond(t, produceAnswer(0, 5))
	f.runOnce()
	if o.calls != 1 {
		t.Fatalf("callback ran %d times, want exactly once", o.calls)
	}
	if f.acc.HasIncomplete() {
		t.Fatal("late response did not free the expired batch")
	}
}

func TestSenderAcksZeroCompletesWithoutResponse(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.Acks = "0" })
	o := f.append(0, "v")
	f.runOnce()
	f.runOnce()
	if o.calls != 1 || o.err != nil || o.meta.Offset != -1 {
		t.Fatalf("acks=0 callback calls=%d err=%v offset=%d, want success with offset -1", o.calls, o.err, o.meta.Offset)
	}
	if f.lastProduce().Acks != 0 {
		t.Fatal("request did not carry acks=0")
	}
}

func TestSenderMutesPartitionWithOneInFlight(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.MaxInFlightRequestsPerConnection = 1; c.BatchSize = 100 })
	f.sendTwo(strings.Repeat("a", 80), strings.Repeat("b", 80)) // a batch each
	if n := len(f.client.sent); n != 1 {
		t.Fatalf("with max.in.flight=1 the partition had %d requests in flight, want 1", n)
	}
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.runOnce()
	if n := len(f.client.sent); n != 2 {
		t.Fatalf("after the response %d requests were sent, want 2", n)
	}
}

func TestIdempotentProducerStampsSequences(t *testing.T) {
	f := newSenderFixture(t, 2, func(c *Config) { c.EnableIdempotence = true })
	f.append(0, "a")
	f.runOnce()
	init, ok := f.client.sent[0].Body.(*kmsg.InitProducerIDRequest)
	if !ok {
		t.Fatalf("first request is %T, want InitProducerId", f.client.sent[0].Body)
	}
	if init.ProducerID != -1 {
		t.Fatalf("first InitProducerId asks for id %d, want -1 (a new id)", init.ProducerID)
	}
	f.client.respond(t, initProducerIDAnswer(7, 0))
	f.runOnce()
	f.runOnce()
	b := batchOf(t, f.lastProduce(), 0)
	if b.ProducerID != 7 || b.ProducerEpoch != 0 || b.FirstSequence != 0 {
		t.Fatalf("first batch pid=%d epoch=%d seq=%d, want 7/0/0", b.ProducerID, b.ProducerEpoch, b.FirstSequence)
	}
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.append(0, "b")
	f.append(1, "c")
	f.runOnce()
	req := f.lastProduce()
	if b := batchOf(t, req, 0); b.FirstSequence != 1 {
		t.Fatalf("second batch of partition 0 has sequence %d, want 1", b.FirstSequence)
	}
	if b := batchOf(t, req, 1); b.FirstSequence != 0 {
		t.Fatalf("first batch of partition 1 has sequence %d, want 0", b.FirstSequence)
	}
}

// An OUT_OF_ORDER_SEQUENCE_NUMBER for the batch the broker expects next is a real gap: the
// producer bumps its epoch locally, without InitProducerId (Java bumpIdempotentProducerEpoch),
// and the batch goes again at sequence 0 under the new epoch.
func TestIdempotentProducerBumpsEpochOnOutOfOrderSequence(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.EnableIdempotence = true })
	o := f.append(0, "a")
	f.runOnce()
	f.client.respond(t, initProducerIDAnswer(7, 0))
	f.runOnce()
	f.runOnce()
	f.client.respond(t, produceAnswer(kerr.OutOfOrderSequenceNumber.Code, -1))
	f.runOnce()
	if o.calls != 0 {
		t.Fatalf("OUT_OF_ORDER_SEQUENCE_NUMBER reached the callback: %v", o.err)
	}
	sent := len(f.client.sent)
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	if len(f.client.sent) != sent+1 {
		t.Fatalf("%d requests after the bump, want the retried produce only", len(f.client.sent)-sent)
	}
	if _, ok := f.client.sent[sent].Body.(*kmsg.InitProducerIDRequest); ok {
		t.Fatal("an idempotent epoch bump sent InitProducerId; Java bumps locally")
	}
	b := batchOf(t, f.lastProduce(), 0)
	if b.ProducerID != 7 || b.ProducerEpoch != 1 || b.FirstSequence != 0 {
		t.Fatalf("retried batch pid=%d epoch=%d seq=%d, want 7/1/0", b.ProducerID, b.ProducerEpoch, b.FirstSequence)
	}
	f.client.respond(t, produceAnswer(0, 3))
	f.runOnce()
	if o.calls != 1 || o.err != nil || o.meta.Offset != 3 {
		t.Fatalf("callback calls=%d err=%v offset=%d, want one success at 3", o.calls, o.err, o.meta.Offset)
	}
}

func TestIdempotentProducerFatalOnClusterAuthorization(t *testing.T) {
	f := newSenderFixture(t, 1, func(c *Config) { c.EnableIdempotence = true })
	o := f.append(0, "a")
	f.runOnce()
	f.client.respond(t, func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrInitProducerIDResponse()
		r.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return r
	})
	f.runOnce()
	f.runOnce()
	if o.calls != 1 || !errors.Is(o.err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("callback calls=%d err=%v, want CLUSTER_AUTHORIZATION_FAILED", o.calls, o.err)
	}
}

// Regression: a broker with no state for this producer on a partition accepts any first
// sequence. With two batches in flight, a NOT_LEADER_OR_FOLLOWER on the first (right after topic
// creation) let the second be written first, and the first could then only land after it: the
// real-broker round trip found records out of order. Until a partition's first batch is
// acknowledged, only one batch may be in flight for it.
func TestIdempotentFirstBatchOfPartitionGoesAlone(t *testing.T) {
	f := idempotentFixture(t, 1, nil)
	f.sendTwo(strings.Repeat("a", 60), strings.Repeat("b", 60)) // a batch each
	if n := len(f.client.pending); n != 1 {
		t.Fatalf("%d produce requests in flight before the partition's first ack, want 1", n)
	}
	f.client.respond(t, produceAnswer(kerr.NotLeaderForPartition.Code, -1))
	f.runOnce()
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	if b := batchOf(t, f.lastProduce(), 0); b.FirstSequence != 0 {
		t.Fatalf("after NOT_LEADER the batch with sequence %d went first, want 0", b.FirstSequence)
	}
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	f.runOnce()
	if b := batchOf(t, f.lastProduce(), 0); b.FirstSequence != 1 {
		t.Fatalf("second batch has sequence %d, want 1", b.FirstSequence)
	}
}

// An OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next expected one only means an
// earlier batch has not landed yet: it is retried without an epoch bump (Java's canRetry).
func TestIdempotentOutOfOrderBehindAGapRetriesWithoutBump(t *testing.T) {
	f := idempotentFixture(t, 1, nil)
	first := f.append(0, strings.Repeat("a", 60))
	f.runOnce()
	f.client.respond(t, produceAnswer(0, 0))
	f.runOnce()
	if first.calls != 1 || first.err != nil {
		t.Fatalf("first record: calls=%d err=%v", first.calls, first.err)
	}
	f.twoInFlight(strings.Repeat("b", 60), strings.Repeat("c", 60)) // sequences 1 and 2
	f.client.respond(t, produceAnswer(kerr.NotLeaderForPartition.Code, -1))
	f.client.respond(t, produceAnswer(kerr.OutOfOrderSequenceNumber.Code, -1))
	f.runOnce()
	if !f.sender.txn.hasProducerID() {
		t.Fatal("an out-of-order batch behind a gap requested an epoch bump")
	}
	f.now = f.now.Add(200 * time.Millisecond)
	f.runOnce()
	if b := batchOf(t, f.lastProduce(), 0); b.FirstSequence != 1 || b.ProducerEpoch != 0 {
		t.Fatalf("retry sent sequence %d epoch %d, want 1 under epoch 0", b.FirstSequence, b.ProducerEpoch)
	}
}

// TestExpiryInOrderTakesTheYoungerBatches: with WithExpiryInOrder, a batch that expires takes
// its partition's younger batch with it (failed with Behind), so that a caller sending both
// again keeps their order; without it the younger one stays queued for its own deadline.
func TestExpiryInOrderTakesTheYoungerBatches(t *testing.T) {
	for _, inOrder := range []bool{false, true} {
		f := newSenderFixture(t, 2, func(c *Config) {
			c.MaxInFlightRequestsPerConnection = 1
			c.DeliveryTimeoutMs = 30000
			c.RequestTimeoutMs = 30000
		})
		f.sender.expireInOrder = inOrder
		older := f.append(0, "older")
		f.runOnce() // in flight, unanswered
		f.now = f.now.Add(5 * time.Second)
		younger := f.append(0, "younger")
		other := f.append(1, "another partition")
		f.now = f.now.Add(25*time.Second + time.Millisecond)
		f.runOnce()
		var expired *DeliveryTimeoutError
		if older.calls != 1 || !errors.As(older.err, &expired) || expired.Behind {
			t.Fatalf("in order %v: the older batch: %d calls, %v; want its own expiry", inOrder, older.calls, older.err)
		}
		switch {
		case inOrder && (younger.calls != 1 || !errors.As(younger.err, &expired) || !expired.Behind):
			t.Errorf("in order: the younger batch: %d calls, %v; want failed behind the older one", younger.calls, younger.err)
		case !inOrder && younger.calls != 0:
			t.Errorf("not in order: the younger batch completed (%v) before its own deadline", younger.err)
		}
		if other.calls != 0 && other.err != nil {
			t.Errorf("in order %v: another partition's batch failed: %v", inOrder, other.err)
		}
	}
}
