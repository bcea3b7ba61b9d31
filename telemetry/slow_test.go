package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// newSlowHarness is newHarness with a latency threshold and head sampling that traces nothing.
func newSlowHarness(t *testing.T, slowerThan time.Duration) *harness {
	t.Helper()
	return newHarnessWith(t, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), ObserverConfig{SlowerThan: slowerThan})
}

// A record slower than the threshold gets its whole trace although head sampling said no: the
// send span marked slow, every attempt's stages tiling it. A fast record gets none.
func TestSlowRecordIsTraced(t *testing.T) {
	h := newSlowHarness(t, 100*time.Millisecond)
	c := newKfake(t, "slow", "fast")
	var faults atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !producesTo(r, "slow") || faults.Add(1) > 1 {
			return nil, nil, false
		}
		// The first attempt is answered late and with a retriable error: the record is
		// delivered by its second attempt, 150 ms or more after Send.
		c.SleepControl(func() { time.Sleep(150 * time.Millisecond) })
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)

	fast := sendOne(t, p, context.Background(), &producer.Record{Topic: "fast", Partition: producer.PartitionAny, Value: []byte("f")})
	if fast.err != nil {
		t.Fatal(fast.err)
	}
	if n := sendSpans(h); n != 0 {
		t.Fatalf("a fast record with head sampling off left %d send spans", n)
	}

	start := time.Now()
	slow := sendOne(t, p, context.Background(), &producer.Record{Topic: "slow", Partition: producer.PartitionAny, Value: []byte("s")})
	if slow.err != nil {
		t.Fatal(slow.err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("the slow record took %v: the injected delay did not apply", took)
	}
	parent, children := recordTraceOf(t, h, "send slow")
	checkStages(t, parent, children, retriedStages)
	wantAttr(t, parent, AttrTraceReason, TraceReasonSlow)
	wantAttr(t, parent, AttrTraceThreshold, 0.1)
	wantAttr(t, parent, AttrMessagingKafkaOffset, slow.md.Offset)
	wantAttr(t, parent, AttrMessagingPartitionID, "0")
	wantAttr(t, children[4], AttrErrorType, "NOT_LEADER_OR_FOLLOWER")
	if d := parent.EndTime().Sub(parent.StartTime()); d < 150*time.Millisecond {
		t.Fatalf("the slow record's send span lasts %v, want its latency (150 ms or more)", d)
	}
	if n := sendSpans(h); n != 1 {
		t.Fatalf("%d send spans ended, want the slow record's only", n)
	}
}

func sendSpans(h *harness) int {
	n := 0
	for _, s := range h.spans.Ended() {
		if strings.HasPrefix(s.Name(), SpanSendPrefix) {
			n++
		}
	}
	return n
}

// A head-sampled record says so.
func TestSampledRecordHasReason(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	parent := sendOrder(t, h, c)
	wantAttr(t, parent, AttrTraceReason, TraceReasonSampled)
}

// In p99 mode the threshold is unknown until a window of latencies is in, then follows them;
// a record far slower than the rest is traced.
func TestSlowerThanP99(t *testing.T) {
	h := newSlowHarness(t, SlowerThanP99)
	c := newKfake(t, "orders")
	var delayNext atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if delayNext.CompareAndSwap(true, false) {
			c.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	if got := h.obs.SlowThreshold(); got != 0 {
		t.Fatalf("threshold %v before any latency", got)
	}
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for h.obs.SlowThreshold() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no p99 threshold after 20 s of records")
		}
		for range 500 {
			_ = p.Send(ctx, &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, nil)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	th := h.obs.SlowThreshold()
	if th >= 300*time.Millisecond {
		t.Fatalf("p99 threshold %v: not below the delay to come", th)
	}
	h.spans.Reset()
	delayNext.Store(true)
	o := sendOne(t, p, ctx, &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("late")})
	if o.err != nil {
		t.Fatal(o.err)
	}
	parent, children := recordTraceOf(t, h, "send orders")
	checkTiling(t, parent, children)
	wantAttr(t, parent, AttrTraceReason, TraceReasonSlow)
	if v, _ := attrOf(parent, AttrTraceThreshold); v.AsFloat64() <= 0 || v.AsFloat64() >= 0.3 {
		t.Fatalf("threshold attribute %v, want the p99 below 0.3 s", v.AsFloat64())
	}
}

// The histogram's buckets bound a latency within 12.5 %, and its quantile is the upper bound
// of the bucket holding it.
func TestLatencyHistogram(t *testing.T) {
	for range 100000 {
		d := time.Duration(rand.Int64N(int64(time.Hour)))
		i := latencyBucket(d)
		up := bucketUpper(i)
		lo := time.Duration(0)
		if i > 0 {
			lo = bucketUpper(i - 1)
		}
		if d < lo || d >= up+time.Microsecond || (d > 8*time.Microsecond && float64(up-lo) > 0.125*float64(lo)+1e3) {
			t.Fatalf("%v in bucket %d [%v, %v)", d, i, lo, up)
		}
	}
	var h latencyHistogram
	for range 990 {
		h.add(time.Millisecond)
	}
	for range 10 {
		h.add(100 * time.Millisecond)
	}
	if got := h.quantile(0.99); got < time.Millisecond || got > 1200*time.Microsecond {
		t.Fatalf("p99 %v, want just above 1ms", got)
	}
	if got := h.quantile(0.995); got < 100*time.Millisecond || got > 113*time.Millisecond {
		t.Fatalf("p99.5 %v, want just above 100ms", got)
	}
	h.decay()
	if h.total != 500 {
		t.Fatalf("total %v after decay, want 500", h.total)
	}
}

// exemplarTraceIDs returns, per stage (and "e2e" for the end-to-end latency), the trace ids of
// the exemplars the histograms hold.
func exemplarTraceIDs(t *testing.T, h *harness) map[string][]string {
	t.Helper()
	got := collect(t, h)
	out := map[string][]string{}
	add := func(key string, dp metricdata.HistogramDataPoint[float64]) {
		for _, e := range dp.Exemplars {
			out[key] = append(out[key], hex.EncodeToString(e.TraceID))
		}
	}
	for _, dp := range got[MetricStageDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		stage, _ := dp.Attributes.Value(AttrStage)
		add(stage.AsString(), dp)
	}
	for _, dp := range got[MetricOperationDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		add("e2e", dp)
	}
	return out
}

// A sampled record's trace id is an exemplar of every stage's histogram and of the end-to-end
// latency; a slow record's, of the end-to-end latency.
func TestLatencyExemplarsLinkToTraces(t *testing.T) {
	t.Run("sampled", func(t *testing.T) {
		h := newHarness(t, sdktrace.AlwaysSample())
		c := newKfake(t, "orders")
		parent := sendOrder(t, h, c)
		id := parent.SpanContext().TraceID().String()
		// The sender reports the attempt's stages right after completing the batch, which
		// may be after Flush returned: wait for them.
		deadline := time.Now().Add(10 * time.Second)
		for {
			ex := exemplarTraceIDs(t, h)
			var missing []string
			for _, key := range []string{StageAppend, StageDrain, StageDoSend, StageCompletedSend, StageCompletedReceive, "e2e"} {
				if !slices.Contains(ex[key], id) {
					missing = append(missing, fmt.Sprintf("%s: %v", key, ex[key]))
				}
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("exemplars without the record's trace id %s after 10 s: %v", id, missing)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("slow", func(t *testing.T) {
		h := newSlowHarness(t, 50*time.Millisecond)
		c := newKfake(t, "orders")
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.SleepControl(func() { time.Sleep(100 * time.Millisecond) })
			return nil, nil, false
		})
		parent := sendOrder(t, h, c)
		id := parent.SpanContext().TraceID().String()
		if ex := exemplarTraceIDs(t, h); !slices.Contains(ex["e2e"], id) {
			t.Fatalf("end-to-end exemplar trace ids %v, want the slow record's %s", ex["e2e"], id)
		}
	})
}
