package producer

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/network"
)

// TestRealBrokerSASL produces through the broker's SASL_PLAINTEXT listener with each mechanism,
// configured by the Java property names, and reads the records back.
func TestRealBrokerSASL(t *testing.T) {
	bootstrap := kafkatest.SASLBootstrap(t)
	user, password := kafkatest.SASLCredentials(t)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 2)
			p := newTestProducer(t, []string{bootstrap}, func(c *Config) {
				c.SecurityProtocol = "SASL_PLAINTEXT"
				c.SASLMechanism = mech
				c.SASLUsername = user
				c.SASLPassword = password
			})
			recs := makeRecords(200, 50)
			mustProduceAll(t, p, topic, recs, 30*time.Second)
			checkRoundTrip(t, recs, consumeAll(t, []string{kafkatest.Bootstrap(t)}, topic, len(recs), 30*time.Second), 2)
		})
	}
}

// TestRealBrokerSASLWrongPassword: a wrong password fails Send with an authentication error that
// names the mechanism, well before max.block.ms, and the password appears in no error.
func TestRealBrokerSASLWrongPassword(t *testing.T) {
	bootstrap := kafkatest.SASLBootstrap(t)
	user, _ := kafkatest.SASLCredentials(t)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			const secret = "not-the-password-4711"
			p := newTestProducer(t, []string{bootstrap}, func(c *Config) {
				c.SecurityProtocol = "SASL_PLAINTEXT"
				c.SASLMechanism = mech
				c.SASLUsername = user
				c.SASLPassword = secret
				c.MaxBlockMs = 20000
			})
			start := time.Now()
			err := p.Send(context.Background(), &Record{Topic: "auth-test", Partition: PartitionAny, Value: []byte("v")}, nil)
			var ae *network.AuthenticationError
			if !errors.As(err, &ae) {
				t.Fatalf("Send error %v, want an AuthenticationError", err)
			}
			if !strings.Contains(err.Error(), mech) && !strings.Contains(strings.ToLower(err.Error()), "authentication") {
				t.Fatalf("error %q names neither the mechanism nor authentication", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error leaks the password: %q", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("authentication failure took %v to surface", d)
			}
		})
	}
}

// TestRealBrokerTLS produces through the broker's SSL listener, verifying its certificate against
// the test CA (ssl.ca.location), with and without a client certificate.
func TestRealBrokerTLS(t *testing.T) {
	bootstrap := kafkatest.SSLBootstrap(t)
	ca := kafkatest.CAFile(t)
	cert, key := kafkatest.ClientCertFiles(t)
	for _, mtls := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-auth", true: "mutual"}[mtls], func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			p := newTestProducer(t, []string{bootstrap}, func(c *Config) {
				c.SecurityProtocol = "SSL"
				c.SSLCALocation = ca
				if mtls {
					c.SSLCertificateLocation, c.SSLKeyLocation = cert, key
				}
			})
			recs := makeRecords(100, 50)
			mustProduceAll(t, p, topic, recs, 30*time.Second)
			checkRoundTrip(t, recs, consumeAll(t, []string{kafkatest.Bootstrap(t)}, topic, len(recs), 30*time.Second), 1)
		})
	}
}

// TestRealBrokerTLSWrongHostName: the broker's certificate names 127.0.0.1 and localhost; reached
// under another name (a dialer maps it to 127.0.0.1), hostname verification must refuse it.
func TestRealBrokerTLSWrongHostName(t *testing.T) {
	bootstrap := kafkatest.SSLBootstrap(t)
	_, port, _ := net.SplitHostPort(bootstrap)
	dial := func(ctx context.Context, netw, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, netw, net.JoinHostPort("127.0.0.1", port))
	}
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"kafka.wrong-name.test:" + port}
	cfg.SecurityProtocol = "SSL"
	cfg.SSLCALocation = kafkatest.CAFile(t)
	cfg.MaxBlockMs = 3000
	p, err := New(cfg, WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	err = p.Send(context.Background(), &Record{Topic: "tls-test", Partition: PartitionAny, Value: []byte("v")}, nil)
	if err == nil {
		t.Fatal("Send succeeded against a broker whose certificate does not name the host")
	}
	var ae *network.AuthenticationError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("error %v, want a TLS authentication error about the certificate", err)
	}
}
