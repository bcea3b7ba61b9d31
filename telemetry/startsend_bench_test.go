package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/producer"
)

// BenchmarkStartSendUnsampled is the per-record cost of the sampling decision for a record
// that is not traced (the 99 % at the default ratio).
func BenchmarkStartSendUnsampled(b *testing.B) {
	h := newHarness(b, newParentRatio(0)) // the decision is taken all the same
	r := &producer.Record{Topic: "orders"}
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if tr, _ := h.obs.StartSend(ctx, r, now); tr != nil {
			b.Fatal("sampled at ratio 0")
		}
	}
}
