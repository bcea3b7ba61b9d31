package network

import (
	"crypto/x509"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// produceToRealBroker fetches metadata for topic through c, produces n records to partition 0 of
// its leader (one request at a time) and returns their values.
func produceToRealBroker(t *testing.T, c *NetworkClient, meta *metadata.Metadata, topic, prefix string, n int) map[string]bool {
	t.Helper()
	meta.Add(topic, time.Now())
	tp := metadata.TopicPartition{Topic: topic, Partition: 0}
	pollUntil(t, c, 30*time.Second, "topic leader", func() bool {
		_, ok := meta.Fetch().LeaderFor(tp)
		return ok
	})
	leaderID, _ := meta.Fetch().LeaderFor(tp)
	leader, _ := meta.Fetch().Node(leaderID)
	awaitReady(t, c, leader)
	values := map[string]bool{}
	for i := range n {
		value := fmt.Sprintf("%s-%d", prefix, i)
		values[value] = true
		got := sendAndWaitBody(t, c, leader, produceRequest(topic, 0, []byte(value), -1))
		if got.Err != nil {
			t.Fatalf("produce %d: %v", i, got.Err)
		}
		p := got.Body.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if p.BaseOffset != int64(i) {
			t.Fatalf("produce %d: base offset %d", i, p.BaseOffset)
		}
		awaitReady(t, c, leader)
	}
	return values
}

func checkConsumed(t *testing.T, topic string, want map[string]bool) {
	t.Helper()
	for _, r := range kafkatest.Consume(t, topic, len(want), 30*time.Second) {
		if !want[string(r.Value)] {
			t.Fatalf("consumed %q, not produced", r.Value)
		}
		delete(want, string(r.Value))
	}
	if len(want) > 0 {
		t.Fatalf("not consumed: %v", want)
	}
}

// TestRealBrokerPlaintext produces through NetworkClient to the real Apache Kafka broker that
// `make test` starts and reads the records back with another client.
func TestRealBrokerPlaintext(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1)
	c, meta := newTestClient(t, []string{kafkatest.Bootstrap(t)}, Config{})
	want := produceToRealBroker(t, c, meta, topic, "plain", 10)
	checkConsumed(t, topic, want)
}

// TestRealBrokerSecurity authenticates with every SASL mechanism the broker enables and connects
// over TLS verifying its certificate; a wrong password and a wrong server name must fail.
func TestRealBrokerSecurity(t *testing.T) {
	user, password := kafkatest.SASLCredentials(t)
	for _, mechanism := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run("SASL-"+mechanism, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			c, meta := newTestClient(t, []string{kafkatest.SASLBootstrap(t)}, Config{
				SASL: &SASLConfig{Mechanism: mechanism, Username: user, Password: password},
			})
			checkConsumed(t, topic, produceToRealBroker(t, c, meta, topic, mechanism, 5))
		})
	}
	t.Run("SASL-wrong-password", func(t *testing.T) {
		c, _ := newTestClient(t, []string{kafkatest.SASLBootstrap(t)}, Config{
			SASL:             &SASLConfig{Mechanism: SASLScramSHA256, Username: user, Password: "wrong"},
			ReconnectBackoff: time.Second, ReconnectBackoffMax: 5 * time.Second,
		})
		pollUntil(t, c, 30*time.Second, "authentication failure", func() bool { return c.AuthenticationError(-1) != nil })
		var authErr *AuthenticationError
		if err := c.AuthenticationError(-1); !errors.As(err, &authErr) || !errors.Is(err, kerr.SaslAuthenticationFailed) || authErr.Message == "" {
			t.Fatalf("authentication error = %v", err)
		}
		if !c.states.IsBlackedOut(-1, time.Now()) {
			t.Fatal("no reconnect backoff after an authentication failure")
		}
	})
	t.Run("TLS", func(t *testing.T) {
		topic := kafkatest.NewTopic(t, 1)
		c, meta := newTestClient(t, []string{kafkatest.SSLBootstrap(t)}, Config{TLS: kafkatest.TLSConfig(t, false)})
		checkConsumed(t, topic, produceToRealBroker(t, c, meta, topic, "tls", 5))
	})
	t.Run("TLS-wrong-server-name", func(t *testing.T) {
		cfg := kafkatest.TLSConfig(t, false)
		cfg.ServerName = "not-the-broker.example.com"
		err := connectOnce(t, Config{TLS: cfg}, kafkatest.SSLBootstrap(t))
		var hostErr x509.HostnameError
		if !errors.As(err, &hostErr) {
			t.Fatalf("connect with a wrong server name: %v, want a hostname error", err)
		}
	})
}
