package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// TestRealBrokerRefusedRecordLeavesNoGap is a single-broker case: a topic whose max.message.bytes
// (6000) refuses one 8,000-byte record for good (MESSAGE_TOO_LARGE) amid short ones, with
// batch.size 4096. Only that record fails; every short record before and after it is written,
// once, in order.
func TestRealBrokerRefusedRecordLeavesNoGap(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	adm := kafkatest.NewAdmin(t)
	topic := fmt.Sprintf("kt-refused-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := "6000"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &limit}, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic)
	})
	p := newTestProducer(t, []string{bootstrap}, func(c *Config) {
		c.BatchSize = 4096
		c.LingerMs = 5
		c.DeliveryTimeoutMs = 30000
		c.RequestTimeoutMs = 10000
	})
	const before, after = 500, 2000
	n := before + 1 + after
	res := newResults(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("line %05d %s", i, strings.Repeat("x", 40))
		if i == before {
			v = strings.Repeat("L", 8000)
		}
		rec := &Record{Topic: topic, Partition: PartitionAny, Value: []byte(v)}
		_ = p.Send(context.Background(), rec, res.callback(i))
	}
	res.wait(t, 60*time.Second)
	elapsed := time.Since(start)
	for i, err := range res.errs {
		switch {
		case i == before && !errors.Is(err, kerr.MessageTooLarge):
			t.Fatalf("the long record: %v, want MESSAGE_TOO_LARGE", err)
		case i != before && err != nil:
			t.Fatalf("short record %d failed: %v", i, err)
		}
	}
	got := kafkatest.Consume(t, topic, n-1, 30*time.Second)
	if len(got) != n-1 {
		t.Fatalf("%d records in the topic, want %d", len(got), n-1)
	}
	want := 0
	for _, r := range got {
		if want == before {
			want++
		}
		if exp := fmt.Sprintf("line %05d ", want); !strings.HasPrefix(string(r.Value), exp) {
			t.Fatalf("record at offset %d is %.12q, want %q (lost, duplicated or reordered)", r.Offset, r.Value, exp)
		}
		want++
	}
	t.Logf("%d short records delivered around a refused one in %v", n-1, elapsed)
}
