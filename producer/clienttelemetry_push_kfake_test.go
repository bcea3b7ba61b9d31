package producer

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// kfakeTelemetry answers a kfake cluster's telemetry requests with a subscription of its own
// (200 ms, lz4, cumulative, one prefix) and keeps every push.
type kfakeTelemetry struct {
	mu            sync.Mutex
	subscriptions int
	pushes        []*kmsg.PushTelemetryRequest
}

func (k *kfakeTelemetry) snapshot() (int, []*kmsg.PushTelemetryRequest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.subscriptions, append([]*kmsg.PushTelemetryRequest(nil), k.pushes...)
}

// TestKfakeTelemetryPushThroughTheProducer runs the whole wiring of New: the pusher in the
// sender loop, the network observer beside none, the terminating push in Close; and with
// enable.metrics.push=false, that nothing asks at all.
func TestKfakeTelemetryPushThroughTheProducer(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		name := "enabled"
		if !enabled {
			name = "disabled"
		}
		t.Run(name, func(t *testing.T) {
			c := newKfake(t, 1)
			k := &kfakeTelemetry{}
			c.ControlKey(71, func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				k.mu.Lock()
				k.subscriptions++
				k.mu.Unlock()
				r := subscription(200, kipPrefix+"record.")
				r.AcceptedCompressionTypes = []int8{3} // lz4
				r.DeltaTemporality = false
				return r, nil, true
			})
			c.ControlKey(72, func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				k.mu.Lock()
				k.pushes = append(k.pushes, req.(*kmsg.PushTelemetryRequest))
				k.mu.Unlock()
				return pushAnswer(0), nil, true
			})
			p := newTestProducer(t, c.ListenAddrs(), func(cfg *Config) { cfg.EnableMetricsPush = enabled })
			const n = 20
			mustProduceAll(t, p, "t", makeRecords(n, 10), 10*time.Second)
			if enabled {
				deadline := time.Now().Add(10 * time.Second)
				for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if _, pushes := k.snapshot(); len(pushes) >= 2 {
						break
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			subs, pushes := k.snapshot()
			if !enabled {
				if subs != 0 || len(pushes) != 0 {
					t.Fatalf("enable.metrics.push=false: %d subscription requests, %d pushes", subs, len(pushes))
				}
				return
			}
			if len(pushes) < 3 {
				t.Fatalf("%d pushes, want at least two and the terminating one", len(pushes))
			}
			for i, push := range pushes {
				if push.Terminating != (i == len(pushes)-1) {
					t.Fatalf("push %d of %d: terminating %v", i, len(pushes), push.Terminating)
				}
				if push.CompressionType != 3 {
					t.Fatalf("push %d compressed with %d, want lz4 (3)", i, push.CompressionType)
				}
			}
			raw, err := io.ReadAll(lz4.NewReader(bytes.NewReader(pushes[len(pushes)-1].Metrics)))
			if err != nil {
				t.Fatalf("lz4 payload: %v", err)
			}
			md := new(metricspb.MetricsData)
			if err := proto.Unmarshal(raw, md); err != nil {
				t.Fatal(err)
			}
			got := metricsByName(md)
			for name := range got {
				if !strings.HasPrefix(name, kipPrefix+"record.") {
					t.Errorf("pushed %s, not subscribed", name)
				}
			}
			send := got[kipPrefix+"record.send.total"].GetSum()
			retries := got[kipPrefix+"record.retry.total"].GetSum()
			if send == nil || retries == nil || send.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE ||
				send.DataPoints[0].GetAsDouble() != n+retries.DataPoints[0].GetAsDouble() {
				t.Fatalf("terminating push: record.send.total %v, record.retry.total %v; want cumulative %d plus the retries", send, retries, n)
			}
		})
	}
}
