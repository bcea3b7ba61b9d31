// Package kafkatest gives Go tests access to the real Apache Kafka broker that
// `make test` starts (scripts/kafka/broker.sh): its listener addresses, TLS
// material, and helpers to create throwaway topics and read them back.
//
// The broker's coordinates come from the environment that
// `scripts/kafka/broker.sh env` prints (KAFKA_BOOTSTRAP, KAFKA_SASL_BOOTSTRAP,
// KAFKA_SSL_BOOTSTRAP, KAFKA_CA_FILE, KAFKA_CLIENT_CERT, KAFKA_CLIENT_KEY,
// KAFKA_SASL_USER, KAFKA_SASL_PASSWORD). When a variable is missing the test
// fails with a message saying how to get a broker, except under `go test
// -short`, where tests that need the real broker are skipped.
package kafkatest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NotRunning is the failure message when the broker's environment is missing.
const NotRunning = "real broker not running: run `make test` (it starts one)"

// Default SASL credentials configured by scripts/kafka/broker.sh, for PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512.
const (
	DefaultSASLUser     = "alice"
	DefaultSASLPassword = "alice-secret"
)

func mustEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if testing.Short() {
		t.Skipf("needs the real Kafka broker (%s unset); skipped in -short mode", name)
	}
	t.Fatalf("%s (%s is not set)", NotRunning, name)
	return ""
}

// Lib returns the directory of the test broker's jars ($KAFKA_LIB), which the tests that run
// Java beside the broker use; like every real-broker helper, it skips the test under -short.
func Lib(t testing.TB) string { t.Helper(); return mustEnv(t, "KAFKA_LIB") }

// Bootstrap returns the PLAINTEXT listener address ($KAFKA_BOOTSTRAP).
func Bootstrap(t testing.TB) string { t.Helper(); return mustEnv(t, "KAFKA_BOOTSTRAP") }

// SASLBootstrap returns the SASL_PLAINTEXT listener address
// ($KAFKA_SASL_BOOTSTRAP); PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are enabled,
// see SASLCredentials.
func SASLBootstrap(t testing.TB) string { t.Helper(); return mustEnv(t, "KAFKA_SASL_BOOTSTRAP") }

// SASLCredentials returns the user and password accepted by every SASL
// mechanism on the SASL listener ($KAFKA_SASL_USER/$KAFKA_SASL_PASSWORD,
// defaulting to alice/alice-secret).
func SASLCredentials(t testing.TB) (user, password string) {
	t.Helper()
	SASLBootstrap(t)
	user, password = os.Getenv("KAFKA_SASL_USER"), os.Getenv("KAFKA_SASL_PASSWORD")
	if user == "" {
		user = DefaultSASLUser
	}
	if password == "" {
		password = DefaultSASLPassword
	}
	return user, password
}

// SSLBootstrap returns the SSL listener address ($KAFKA_SSL_BOOTSTRAP). Its
// certificate is signed by CAFile and is valid for 127.0.0.1 and localhost.
func SSLBootstrap(t testing.TB) string { t.Helper(); return mustEnv(t, "KAFKA_SSL_BOOTSTRAP") }

// MSKIAM returns the MSKIAM listener's address ($KAFKA_MSKIAM_BOOTSTRAP): OAUTHBEARER with AWS
// MSK IAM tokens, whose SigV4 signature the broker checks against the key pair returned
// ($KAFKA_MSKIAM_ACCESS_KEY, $KAFKA_MSKIAM_SECRET_KEY), as Amazon MSK checks IAM credentials.
func MSKIAM(t testing.TB) (bootstrap, accessKey, secretKey string) {
	t.Helper()
	return mustEnv(t, "KAFKA_MSKIAM_BOOTSTRAP"), mustEnv(t, "KAFKA_MSKIAM_ACCESS_KEY"), mustEnv(t, "KAFKA_MSKIAM_SECRET_KEY")
}

// CAFile returns the path of the PEM CA certificate that signed the broker's
// (and the client's) certificate ($KAFKA_CA_FILE).
func CAFile(t testing.TB) string { t.Helper(); return mustEnv(t, "KAFKA_CA_FILE") }

// ClientCertFiles returns PEM files of a client certificate and its key,
// signed by CAFile ($KAFKA_CLIENT_CERT, $KAFKA_CLIENT_KEY). The SSL listener
// requests (does not require) client certificates.
func ClientCertFiles(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	return mustEnv(t, "KAFKA_CLIENT_CERT"), mustEnv(t, "KAFKA_CLIENT_KEY")
}

// TLSConfig returns a client TLS configuration trusting CAFile, with the
// client certificate from ClientCertFiles when clientCert is true.
func TLSConfig(t testing.TB, clientCert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(CAFile(t))
	if err != nil {
		t.Fatalf("kafkatest: reading CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("kafkatest: no certificate in CA file %s", CAFile(t))
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert {
		certFile, keyFile := ClientCertFiles(t)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatalf("kafkatest: loading client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// NewClient returns a kgo client seeded with Bootstrap (later options may
// override the seeds), closed when the test ends.
func NewClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(Bootstrap(t))}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kafkatest: kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// NewAdmin returns a kadm admin client on Bootstrap, closed when the test ends.
func NewAdmin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(NewClient(t))
}

// NewTopic creates a uniquely named topic with the given number of partitions
// (replication factor 1), waits until every partition has a leader, and
// deletes the topic when the test ends.
func NewTopic(t testing.TB, partitions int) string {
	t.Helper()
	if partitions < 1 {
		t.Fatalf("kafkatest: NewTopic: partitions must be >= 1, got %d", partitions)
	}
	adm := NewAdmin(t)
	name := topicName(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, name); err != nil {
		t.Fatalf("kafkatest: creating topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopic(ctx, name); err != nil {
			t.Logf("kafkatest: deleting topic %s: %v", name, err)
		}
	})

	// CreateTopics returns once the controller has the topic; wait until the
	// broker serves metadata with a leader for every partition.
	for {
		details, err := adm.ListTopics(ctx, name)
		if err == nil && topicReady(details[name], partitions) {
			return name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: topic %s has no leader for every partition after 30s (last error: %v)", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicReady(d kadm.TopicDetail, partitions int) bool {
	if d.Err != nil || len(d.Partitions) != partitions {
		return false
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// topicName builds a valid, unique topic name from the test name.
func topicName(t testing.TB) string {
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	base := b.String()
	if len(base) > 180 {
		base = base[:180]
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("kafkatest: random topic suffix: %v", err)
	}
	return "kt-" + base + "-" + hex.EncodeToString(rnd[:])
}

// Consume reads topic from the beginning of every partition (no consumer
// group) over Bootstrap until at least n records arrived or timeout passed,
// and returns every record read, in fetch order. It returns fewer than n
// records on timeout (and logs that); callers assert on the count.
func Consume(t testing.TB, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(Bootstrap(t)),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("kafkatest: kgo.NewClient: %v", err)
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Logf("kafkatest: consuming %s[%d]: %v", tp, p, err)
			}
		})
		recs = append(recs, fetches.Records()...)
		if ctx.Err() != nil {
			t.Logf("kafkatest: Consume(%s): %d of %d records after %v", topic, len(recs), n, timeout)
			break
		}
	}
	return recs
}

// ProduceError is a kfake control function's answer to req: every partition fails with the
// error code that code gives for it (0 for success), and no offset.
func ProduceError(req *kmsg.ProduceRequest, code func(kmsg.ProduceRequestTopicPartition) int16) *kmsg.ProduceResponse {
	return ProduceAnswer(req, code, -1)
}

// ProduceAnswer answers req: every partition with the error code that code gives for it and
// baseOffset.
func ProduceAnswer(req *kmsg.ProduceRequest, code func(kmsg.ProduceRequestTopicPartition) int16, baseOffset int64) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code(p)
			rp.BaseOffset = baseOffset
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
