package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// TestStartSendRootsAtTheRatio checks the observer's own decision for roots against the SDK
// sampler it stands for: the share of sampled records is the ratio (within five standard
// deviations), every sampled trace id is one TraceIDRatioBased at that ratio samples too (a
// downstream sampler of the ratio agrees), and its high half is random.
func TestStartSendRootsAtTheRatio(t *testing.T) {
	const p, n = 0.3, 20_000
	h := newHarness(t, newParentRatio(p))
	sdk := sdktrace.TraceIDRatioBased(p)
	r := &producer.Record{Topic: "orders", Value: []byte("v")}
	sampled := 0
	highs := map[uint64]bool{}
	for range n {
		rt, _ := h.obs.StartSend(t.Context(), r, time.Now())
		tr, ok := rt.(*recordTrace)
		if !ok || tr == nil {
			continue
		}
		sampled++
		id := tr.sc.TraceID()
		if d := sdk.ShouldSample(sdktrace.SamplingParameters{TraceID: id}).Decision; d != sdktrace.RecordAndSample {
			t.Fatalf("TraceIDRatioBased(%v) does not sample %s", p, id)
		}
		highs[binary.BigEndian.Uint64(id[:8])] = true
	}
	if sigma := math.Sqrt(n * p * (1 - p)); math.Abs(float64(sampled)-p*n) > 5*sigma {
		t.Errorf("%d of %d sampled, want %.0f ± %.0f", sampled, n, p*n, 5*sigma)
	}
	if delete(highs, 0); len(highs) < sampled-1 {
		t.Errorf("high halves of %d trace ids: %d distinct non-zero", sampled, len(highs))
	}
}

// TestSampleRootIsACoinPerRecord: the roots' picks must be what independent coins would give,
// not merely the right share: the gaps between picks have the geometric distribution's mean 1/p
// and variance (1-p)/p², and about a share p of them are 1 (a fixed period, or a uniform gap,
// of the same mean fails both).
func TestSampleRootIsACoinPerRecord(t *testing.T) {
	for _, p := range []float64{0.01, 0.3} {
		s := newParentRatio(p)
		var gaps []float64
		last := 0
		for i := 1; len(gaps) < 20_000; i++ {
			if _, ok := s.sampleRoot(); ok {
				gaps = append(gaps, float64(i-last))
				last = i
			}
		}
		var sum, ones float64
		for _, g := range gaps {
			sum += g
			if g == 1 {
				ones++
			}
		}
		n := float64(len(gaps))
		mean := sum / n
		var ss float64
		for _, g := range gaps {
			ss += (g - mean) * (g - mean)
		}
		variance := ss / (n - 1)
		wantMean, wantVar := 1/p, (1-p)/(p*p)
		// The mean of n gaps has standard deviation sqrt(var/n); allow 5 of them.
		if d := math.Abs(mean - wantMean); d > 5*math.Sqrt(wantVar/n) {
			t.Errorf("p=%v: mean gap %.3f, want %.3f", p, mean, wantMean)
		}
		if r := variance / wantVar; r < 0.9 || r > 1.1 {
			t.Errorf("p=%v: gap variance %.1f, want %.1f (geometric)", p, variance, wantVar)
		}
		if sigma := math.Sqrt(n * p * (1 - p)); math.Abs(ones-p*n) > 5*sigma {
			t.Errorf("p=%v: %v gaps of 1 in %v, want %.0f ± %.0f", p, ones, n, p*n, 5*sigma)
		}
	}
	s := newParentRatio(1)
	for range 1000 {
		if _, ok := s.sampleRoot(); !ok {
			t.Fatal("p=1: a record not picked")
		}
	}
	if _, ok := newParentRatio(0).sampleRoot(); ok {
		t.Fatal("p=0: a record picked")
	}
}

// TestStartSendRootTraceIDs checks that a sampled root record's trace uses all 128 bits.
func TestStartSendRootTraceIDs(t *testing.T) {
	h := newHarness(t, newParentRatio(1))
	r := &producer.Record{Topic: "orders", Value: []byte("v")}
	seen := map[trace.TraceID]bool{}
	for range 50 {
		rt, _ := h.obs.StartSend(t.Context(), r, time.Now())
		tr, ok := rt.(*recordTrace)
		if !ok || tr == nil {
			t.Fatal("ratio 1: record not traced")
		}
		id := tr.sc.TraceID()
		if binary.BigEndian.Uint64(id[:8]) == 0 {
			t.Fatalf("trace id %s: upper 64 bits zero", id)
		}
		seen[id] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct trace ids of 50", len(seen))
	}
}

// TestOTThresholdMatchesTheCollector: the sampling threshold and its tracestate form for a
// probability are those of the OpenTelemetry Collector's pkg/sampling (ProbabilityToThreshold
// and Threshold.TValue, v0.165.1, at full precision), the reference implementation of the
// specification's "TraceState: Probability Sampling"; the values below are its output.
func TestOTThresholdMatchesTheCollector(t *testing.T) {
	for _, c := range []struct {
		p      float64
		th     uint64
		tvalue string
	}{
		{1, 0, "0"},
		{0.5, 36028797018963968, "8"},
		{0.25, 54043195528445952, "c"},
		{0.1, 64851834634135142, "e6666666666666"},
		{0.01, 71337018097548657, "fd70a3d70a3d71"},
		{0.001, 71985536443890008, "ffbe76c8b43958"},
		{1.0 / 3, 48038396025285292, "aaaaaaaaaaaaac"},
		{1e-6, 72057521980333898, "ffffef39085f4a"},
		{math.Ldexp(1, -56), 72057594037927935, "ffffffffffffff"},
		{0.999, 72057594037928, "004189374bc6a8"},
	} {
		th, ok := otThreshold(c.p)
		if !ok || th != c.th || formatThreshold(th) != c.tvalue {
			t.Errorf("p=%v: threshold %d %q (%v), want %d %q", c.p, th, formatThreshold(th), ok, c.th, c.tvalue)
		}
	}
	if _, ok := otThreshold(math.Ldexp(1, -57)); ok {
		t.Error("p=2^-57: a threshold, want none (below the smallest expressible probability)")
	}
	if s := newParentRatio(1e-20); s.thValue != "" {
		t.Errorf("ratio 1e-20: threshold %q, want none", s.thValue)
	} else if ts, h := s.traceState(); ts.Len() != 0 || h != nil {
		t.Errorf("ratio 1e-20: tracestate %q (header %q), want none", ts, h)
	}
}

// TestTraceStateHeader: the header value traceState builds by hand is the tracestate's own
// form, as traceStateValue makes it from a span context, with rv's 14 digits zero-padded.
func TestTraceStateHeader(t *testing.T) {
	for _, p := range []float64{1, 0.5, 0.01, 1e-6} {
		s := newParentRatio(p)
		for range 200 {
			ts, h := s.traceState()
			want := traceStateValue(trace.NewSpanContext(trace.SpanContextConfig{TraceState: ts}))
			if string(h) != string(want) || !strings.HasPrefix(string(h), "ot="+s.thValue+";rv:") || len(h) != len("ot="+s.thValue+";rv:")+14 {
				t.Fatalf("p=%v: header %q, tracestate %q", p, h, want)
			}
		}
	}
}

// TestSampledRootsCarryTheirProbability: a root record the ratio sampler picks carries
// `ot=th:…;rv:…` in its span context and in a tracestate header beside its traceparent, with
// an explicit randomness value the threshold keeps (a consistent sampler downstream at the same
// probability keeps the trace) and uniform among those (its mean within five standard
// deviations); a record whose log line carried its own context gets no tracestate of ours.
func TestSampledRootsCarryTheirProbability(t *testing.T) {
	const p, n = 0.25, 8000
	h := newHarness(t, newParentRatio(p))
	th, _ := otThreshold(p)
	r := &producer.Record{Topic: "orders", Value: []byte("v"), Headers: []producer.Header{{Key: "source.path", Value: []byte("/a")}}}
	var rvs []float64
	for range n {
		rt, headers := h.obs.StartSend(t.Context(), r, time.Now())
		tr, ok := rt.(*recordTrace)
		if !ok || tr == nil {
			continue
		}
		ot := tr.sc.TraceState().Get("ot")
		var rv uint64
		if _, err := fmt.Sscanf(ot, "th:c;rv:%x", &rv); err != nil || len(ot) != len("th:c;rv:")+14 {
			t.Fatalf("ot=%q, want th:c;rv: and 14 hex digits", ot)
		}
		if rv < th || rv >= otMaxAdjustedCount {
			t.Fatalf("rv %x outside [%x, 2^56): a consistent sampler at %v would drop the trace", rv, th, p)
		}
		rvs = append(rvs, float64(rv))
		var names []string
		for _, hd := range headers {
			names = append(names, hd.Key)
			if hd.Key == TraceStateHeader && string(hd.Value) != "ot="+ot {
				t.Fatalf("tracestate header %q, want %q", hd.Value, "ot="+ot)
			}
		}
		if want := []string{"source.path", DefaultTraceHeader, TraceStateHeader}; !slices.Equal(names, want) {
			t.Fatalf("headers %v, want %v", names, want)
		}
	}
	if len(rvs) < n/8 {
		t.Fatalf("%d of %d records sampled at %v", len(rvs), n, p)
	}
	var sum float64
	for _, v := range rvs {
		sum += v
	}
	width := float64(otMaxAdjustedCount - th)
	mean, want := sum/float64(len(rvs)), float64(th)+width/2
	if sigma := width / math.Sqrt(12*float64(len(rvs))); math.Abs(mean-want) > 5*sigma {
		t.Errorf("rv mean %.4g, want %.4g ± %.2g (uniform over what the threshold keeps)", mean, want, 5*sigma)
	}

	const line = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ContextWithLineTrace(t.Context(), []byte(line))
	rt, headers := h.obs.StartSend(ctx, &producer.Record{Topic: "orders", Value: []byte("v")}, time.Now())
	tr, ok := rt.(*recordTrace)
	if !ok || tr == nil {
		t.Fatal("a record of a sampled line not traced")
	}
	if ts := tr.sc.TraceState(); ts.Len() != 0 {
		t.Errorf("a record of a line's trace: tracestate %q, want the line's (none)", ts)
	}
	for _, hd := range headers {
		if hd.Key == TraceStateHeader {
			t.Errorf("a record of a line's trace has a tracestate header %q", hd.Value)
		}
	}
}

// TestTraceStateOnEveryStageAndOnlyForSampledTraces: every span of a sampled record's trace,
// as exported, has its `ot=th:8;rv:…`; a slow record traced at its callback (not picked by
// probability: its adjusted count is unknown) has none. Both ways spans are made: straight to
// the span processor (Setup's) and through the tracer.
func TestTraceStateOnEveryStageAndOnlyForSampledTraces(t *testing.T) {
	for _, viaTracer := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaTracer=%v", viaTracer), func(t *testing.T) { testTraceStateOnEveryStage(t, viaTracer) })
	}
}

func testTraceStateOnEveryStage(t *testing.T, viaTracer bool) {
	// Each record is sampled, or slow.
	h := newHarnessVia(t, newParentRatio(0.5), ObserverConfig{SlowerThan: time.Nanosecond}, viaTracer)
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	for i := range 40 {
		if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny,
			Value: []byte(strconv.Itoa(i))}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	states := map[trace.TraceID]string{}
	reasons := map[trace.TraceID]string{}
	for _, s := range h.spans.Ended() {
		id := s.SpanContext().TraceID()
		if prev, ok := states[id]; ok && prev != s.SpanContext().TraceState().String() {
			t.Fatalf("trace %s: tracestate %q on %s, %q on another span", id, s.SpanContext().TraceState(), s.Name(), prev)
		}
		states[id] = s.SpanContext().TraceState().String()
		if s.Name() == "send orders" {
			v, _ := attrOf(s, AttrTraceReason)
			reasons[id] = v.AsString()
		}
	}
	count := map[string]int{}
	for id, reason := range reasons {
		count[reason]++
		switch st := states[id]; reason {
		case TraceReasonSampled:
			if !strings.HasPrefix(st, "ot=th:8;rv:") {
				t.Errorf("sampled trace %s: tracestate %q, want ot=th:8;rv:…", id, st)
			}
		default:
			if st != "" {
				t.Errorf("%s trace %s: tracestate %q, want none", reason, id, st)
			}
		}
	}
	if count[TraceReasonSampled] == 0 || count[TraceReasonSlow] == 0 || len(reasons) != 40 {
		t.Fatalf("traces by reason %v of 40 records, want both kinds", count)
	}
}
