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
	// A ratio so small that no record of the run is sampled, yet the countdown is kept.
	h := newHarness(b, newParentRatio(1e-12))
	r := &producer.Record{Topic: "orders"}
	// A context a few parents deep, as the agent's run context is (signals, cancellation, a
	// value): looking for a span walks all of them unless the observer remembers the context.
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, 1))
	defer cancel()
	ctx, cancel2 := context.WithCancelCause(ctx)
	defer cancel2(nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if tr, _ := h.obs.StartSend(ctx, r, now); tr != nil {
			b.Fatal("sampled at ratio 0")
		}
	}
}
