package kafkatest_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

type pos struct {
	partition int32
	offset    int64
}

// produce writes n records (keys k-i, values prefix-%05d) with acks=all and
// idempotence, and returns value by partition/offset.
func produce(t *testing.T, cl *kgo.Client, topic, prefix string, n int) map[pos]string {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: topic,
			Key:   []byte("k-" + strconv.Itoa(i)),
			Value: fmt.Appendf(nil, "%s-%05d", prefix, i),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	want := make(map[pos]string, n)
	for _, r := range recs {
		p := pos{r.Partition, r.Offset}
		if _, dup := want[p]; dup {
			t.Fatalf("two produced records acknowledged at %s[%d]@%d", topic, p.partition, p.offset)
		}
		want[p] = string(r.Value)
	}
	return want
}

// checkSame compares what was read (partition/offset -> value) with what was produced.
func checkSame(t *testing.T, reader string, want, got map[pos]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s read %d records, want %d", reader, len(got), len(want))
	}
	bad := 0
	for p, v := range want {
		if g, ok := got[p]; !ok || g != v {
			if bad++; bad <= 5 {
				t.Errorf("%s at partition %d offset %d: got %q (present %v), want %q", reader, p.partition, p.offset, g, ok, v)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in all", reader, bad)
	}
}

func fromKgo(t *testing.T, recs []*kgo.Record) map[pos]string {
	t.Helper()
	got := make(map[pos]string, len(recs))
	for _, r := range recs {
		p := pos{r.Partition, r.Offset}
		if _, dup := got[p]; dup {
			t.Errorf("kgo read partition %d offset %d twice", p.partition, p.offset)
		}
		got[p] = string(r.Value)
	}
	return got
}

// TestRealBrokerRoundTrip produces 1000 records with kgo (acks=all, idempotent)
// to a new 3-partition topic and reads them back with kgo and with kcat
// (librdkafka), comparing partition, offset and value of every record.
func TestRealBrokerRoundTrip(t *testing.T) {
	const n = 1000
	topic := kafkatest.NewTopic(t, 3)
	cl := kafkatest.NewClient(t,
		kgo.RequiredAcks(kgo.AllISRAcks()), // kgo's default, made explicit
		kgo.ProducerLinger(5*time.Millisecond),
	)
	want := produce(t, cl, topic, "value", n)

	perPartition := map[int32]int{}
	for p := range want {
		perPartition[p.partition]++
	}
	if len(perPartition) != 3 {
		t.Errorf("records landed in partitions %v, want all of 0..2", perPartition)
	}

	t.Run("kgo", func(t *testing.T) {
		recs := kafkatest.Consume(t, topic, n, 30*time.Second)
		checkSame(t, "kgo", want, fromKgo(t, recs))
	})

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Fatal("kcat not installed: run `make deps` (apt-get install -y kcat)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", kafkatest.Bootstrap(t), "-t", topic,
			"-o", "beginning", "-e", "-q", "-f", `%p\t%o\t%s\n`)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, stderr.String())
		}
		got := map[pos]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), "\t", 3)
			if len(f) != 3 {
				t.Fatalf("kcat line %q: want partition<TAB>offset<TAB>value", sc.Text())
			}
			part, err1 := strconv.ParseInt(f[0], 10, 32)
			off, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("kcat line %q: bad partition or offset", sc.Text())
			}
			got[pos{int32(part), off}] = f[2]
		}
		checkSame(t, "kcat", want, got)
	})
}

// TestSecureListeners produces through the SASL_PLAINTEXT listener with every
// enabled mechanism and through the SSL listener (with and without a client
// certificate), then reads the records back over PLAINTEXT.
func TestSecureListeners(t *testing.T) {
	user, password := kafkatest.SASLCredentials(t)
	cases := []struct {
		name string
		opts func(t *testing.T) []kgo.Opt
	}{
		{"SASL-PLAIN", func(t *testing.T) []kgo.Opt {
			return saslOpts(t, plain.Auth{User: user, Pass: password}.AsMechanism())
		}},
		{"SASL-SCRAM-SHA-256", func(t *testing.T) []kgo.Opt {
			return saslOpts(t, scram.Auth{User: user, Pass: password}.AsSha256Mechanism())
		}},
		{"SASL-SCRAM-SHA-512", func(t *testing.T) []kgo.Opt {
			return saslOpts(t, scram.Auth{User: user, Pass: password}.AsSha512Mechanism())
		}},
		{"SSL", func(t *testing.T) []kgo.Opt {
			return []kgo.Opt{kgo.SeedBrokers(kafkatest.SSLBootstrap(t)), kgo.DialTLSConfig(kafkatest.TLSConfig(t, false))}
		}},
		{"SSL-client-cert", func(t *testing.T) []kgo.Opt {
			return []kgo.Opt{kgo.SeedBrokers(kafkatest.SSLBootstrap(t)), kgo.DialTLSConfig(kafkatest.TLSConfig(t, true))}
		}},
		{"SSL-localhost", func(t *testing.T) []kgo.Opt {
			// The broker advertises 127.0.0.1; the certificate is also valid for localhost.
			cfg := kafkatest.TLSConfig(t, false)
			cfg.ServerName = "localhost"
			return []kgo.Opt{kgo.SeedBrokers(kafkatest.SSLBootstrap(t)), kgo.DialTLSConfig(cfg)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			cl := kafkatest.NewClient(t, append(tc.opts(t), kgo.DefaultProduceTopic(topic))...)
			want := produce(t, cl, topic, tc.name, 20)
			checkSame(t, "kgo", want, fromKgo(t, kafkatest.Consume(t, topic, len(want), 30*time.Second)))
		})
	}

	t.Run("SASL-wrong-password", func(t *testing.T) {
		cl := kafkatest.NewClient(t, saslOpts(t, scram.Auth{User: user, Pass: "wrong"}.AsSha256Mechanism())...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("SCRAM with a wrong password was accepted")
		}
	})
}

func saslOpts(t *testing.T, m sasl.Mechanism) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(kafkatest.SASLBootstrap(t)), kgo.SASL(m)}
}
