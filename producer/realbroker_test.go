package producer

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

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// realRecords is how many records each codec's real-broker round trip sends: a million, as the
// producer-stack issue asks, unless -short.
func realRecords(t *testing.T) int {
	if testing.Short() {
		return 20000
	}
	return 1_000_000
}

// TestRealBrokerRoundTrip sends records with acks=all and idempotence to a real Apache Kafka
// broker, once per codec, and reads them back with two independent consumers: franz-go's kgo and
// kcat (librdkafka). Every record is compared: key, value, header, partition, order.
func TestRealBrokerRoundTrip(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	n := realRecords(t)
	recs := makeRecords(n, 100)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			const partitions = 6
			topic := kafkatest.NewTopic(t, partitions)
			p := newTestProducer(t, []string{bootstrap}, func(c *Config) { c.CompressionType = codec })
			start := time.Now()
			res := produceAll(t, p, topic, recs, 5*time.Minute)
			if err := res.firstError(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d records acknowledged in %v (%.0f records/s)", codec, n, time.Since(start),
				float64(n)/time.Since(start).Seconds())
			// Offsets reported to callbacks must be the ones the consumer sees.
			got := consumeAll(t, []string{bootstrap}, topic, n, 3*time.Minute)
			checkRoundTrip(t, recs, got, partitions)
			checkCallbackOffsets(t, res, got)
			checkWithKcat(t, bootstrap, topic, recs, partitions)
		})
	}
}

// TestRealBrokerCompressionLevels: batches compressed at the codecs' non-default levels
// (compression.gzip.level, compression.lz4.level: LZ4 HC, compression.zstd.level) are ones the
// real broker takes, and franz-go reads every record back as sent.
func TestRealBrokerCompressionLevels(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	recs := makeRecords(5000, 100)
	for _, tc := range []struct {
		codec string
		level func(*Config)
	}{
		{"gzip", func(c *Config) { c.CompressionGzipLevel = 1 }},
		{"gzip", func(c *Config) { c.CompressionGzipLevel = 9 }},
		{"lz4", func(c *Config) { c.CompressionLz4Level = 1 }},
		{"lz4", func(c *Config) { c.CompressionLz4Level = 17 }},
		{"zstd", func(c *Config) { c.CompressionZstdLevel = -5 }},
		{"zstd", func(c *Config) { c.CompressionZstdLevel = 19 }},
	} {
		var probe Config
		tc.level(&probe)
		name := fmt.Sprintf("%s-%d", tc.codec, probe.CompressionGzipLevel+probe.CompressionLz4Level+probe.CompressionZstdLevel)
		t.Run(name, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			p := newTestProducer(t, []string{bootstrap}, func(c *Config) { c.CompressionType = tc.codec; tc.level(c) })
			res := produceAll(t, p, topic, recs, time.Minute)
			if err := res.firstError(); err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, recs, consumeAll(t, []string{bootstrap}, topic, len(recs), time.Minute), 1)
		})
	}
}

// checkCallbackOffsets compares each callback's partition and offset with where the consumer
// found the record.
func checkCallbackOffsets(t *testing.T, res *results, got []*kgo.Record) {
	t.Helper()
	for _, r := range got {
		i, _ := strconv.Atoi(string(r.Headers[0].Value))
		m := res.metas[i]
		if m.Partition != r.Partition || m.Offset != r.Offset {
			t.Fatalf("record %d: callback said %d/%d, consumer found it at %d/%d", i, m.Partition, m.Offset, r.Partition, r.Offset)
		}
	}
}

// checkWithKcat reads the topic with kcat and compares every record with what was sent.
func checkWithKcat(t *testing.T, bootstrap, topic string, sent []testRecord, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p\t%k\t%h\t%s\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kcat: %v (is it installed? `make deps`)", err)
	}
	seen := make([]bool, len(sent))
	last := map[int]int{}
	count := 0
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 4)
		if len(f) != 4 {
			t.Fatalf("kcat line %q", sc.Text())
		}
		part, _ := strconv.Atoi(f[0])
		i, err := strconv.Atoi(strings.TrimPrefix(f[2], "i="))
		if err != nil || i < 0 || i >= len(sent) {
			t.Fatalf("kcat header %q", f[2])
		}
		if seen[i] {
			t.Fatalf("kcat read record %d twice", i)
		}
		seen[i] = true
		if f[1] != sent[i].key || f[3] != sent[i].value {
			t.Fatalf("kcat record %d: %q/%q", i, f[1], f[3])
		}
		if want := keyPartition([]byte(sent[i].key), partitions); int32(part) != want {
			t.Fatalf("kcat: record %d on partition %d, want %d", i, part, want)
		}
		if l, ok := last[part]; ok && i < l {
			t.Fatalf("kcat: partition %d out of order", part)
		}
		last[part] = i
		count++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kcat: %v: %s", err, stderr.String())
	}
	if count != len(sent) {
		t.Fatalf("kcat read %d records, sent %d", count, len(sent))
	}
}
