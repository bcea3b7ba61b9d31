package telemetry

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/producer"
)

// TestRealBrokerTraces sends a traced record through each of the real broker's listeners and
// checks the record's six tiled stages and the connect span's steps: dial, then TLS and SASL
// where the listener has them, then ApiVersions.
func TestRealBrokerTraces(t *testing.T) {
	user, password := kafkatest.SASLCredentials(t)
	for _, tc := range []struct {
		name      string
		bootstrap func(testing.TB) string
		config    func(*producer.Config)
		steps     []string
	}{
		{"PLAINTEXT", kafkatest.Bootstrap, nil, []string{SpanDial, SpanAPIVersions}},
		{"SASL_PLAINTEXT", kafkatest.SASLBootstrap, func(c *producer.Config) {
			c.SecurityProtocol, c.SASLMechanism, c.SASLUsername, c.SASLPassword = "SASL_PLAINTEXT", "SCRAM-SHA-256", user, password
		}, []string{SpanDial, SpanSASLAuthenticate, SpanAPIVersions}},
		{"SSL", kafkatest.SSLBootstrap, func(c *producer.Config) {
			c.SecurityProtocol, c.SSLCALocation = "SSL", kafkatest.CAFile(t)
		}, []string{SpanDial, SpanTLSHandshake, SpanAPIVersions}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bootstrap := tc.bootstrap(t)
			topic := kafkatest.NewTopic(t, 1)
			writable(t, topic)
			h := newHarness(t, sdktrace.AlwaysSample())
			p := newProducer(t, []string{bootstrap}, h.obs, tc.config)
			if o := sendOne(t, p, context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
				t.Fatal(o.err)
			}
			parent, children := recordTraceOf(t, h, SpanSendPrefix+topic)
			if got, want := spanNames(children), []string{"append", "drain", "doSend", "completedSend", "completedReceive", "callback"}; !slices.Equal(got, want) {
				t.Fatalf("stages %v, want %v (attempts' errors: %v)", got, want, attemptErrors(children))
			}
			checkTiling(t, parent, children)
			// The conventions' attributes on real traffic: the leader is the one broker, whose
			// advertised address on this listener is the bootstrap address; the cluster id is
			// the broker's.
			host, port, _ := net.SplitHostPort(bootstrap)
			wantAttr(t, parent, AttrServerAddress, host)
			wantAttr(t, parent, AttrServerPort, int64(mustAtoi(t, port)))
			if tc.name == "PLAINTEXT" {
				wantAttr(t, parent, AttrMessagingKafkaClusterID, realClusterID(t, bootstrap))
			}
			leader := []attribute.KeyValue{attribute.String(AttrMessagingDestinationName, topic),
				attribute.String(AttrMessagingPartitionID, "0"), attribute.String(AttrServerAddress, host),
				attribute.Int(AttrServerPort, mustAtoi(t, port))}
			if n := sumOf(collect(t, h)[MetricSentMessages], leader...); n != 1 {
				t.Fatalf("%s with partition and leader %s = %d, want 1", MetricSentMessages, bootstrap, n)
			}

			var connects int
			for _, s := range h.spans.Ended() {
				if s.Name() != SpanConnect {
					continue
				}
				connects++
				var steps []sdktrace.ReadOnlySpan
				for _, c := range h.spans.Ended() {
					if c.Parent().SpanID() == s.SpanContext().SpanID() {
						steps = append(steps, c)
					}
				}
				if got := spanNames(steps); !slices.Equal(got, tc.steps) {
					t.Fatalf("connect steps %v, want %v", got, tc.steps)
				}
			}
			if connects == 0 {
				t.Fatal("no connect span")
			}
		})
	}
}

// writable waits until the new topic takes a record (sent by a client of its own on the
// PLAINTEXT listener): its metadata has a leader before the leader's replica takes produce
// requests, and a record sent in between is retried (NOT_LEADER_OR_FOLLOWER), which would add
// attempts to a trace that should have one.
func writable(t *testing.T, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Bootstrap(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		t.Fatalf("topic %s takes no record: %v", topic, err)
	}
}

// attemptErrors are the error.type of the completedReceive stages among spans.
func attemptErrors(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		if s.Name() != SpanCompletedReceive {
			continue
		}
		e := "none"
		for _, kv := range s.Attributes() {
			if kv.Key == AttrErrorType {
				e = kv.Value.Emit()
			}
		}
		out = append(out, e)
	}
	return out
}

// realClusterID asks the broker at bootstrap for its cluster id, with a client of its own.
func realClusterID(t *testing.T, bootstrap string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || resp.ClusterID == nil || *resp.ClusterID == "" {
		t.Fatalf("the broker's cluster id: %v", err)
	}
	return *resp.ClusterID
}
