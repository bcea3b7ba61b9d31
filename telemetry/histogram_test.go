package telemetry

import (
	"context"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

// histogramPoint collects reader's data point of the histogram name with attrs.
func histogramPoint(t *testing.T, reader sdkmetric.Reader, name string, attrs attribute.Set) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T", name, m.Data)
			}
			if h.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: temporality %v", name, h.Temporality)
			}
			for _, p := range h.DataPoints {
				if p.Attributes.Equals(&attrs) {
					return p
				}
			}
		}
	}
	t.Fatalf("no %s point with %v", name, attrs.ToSlice())
	return metricdata.HistogramDataPoint[float64]{}
}

// TestHistogramsMatchTheSDK records the same durations, from several goroutines, into the
// SDK's histogram and into Histograms: both must export the same counts, buckets (bounds are
// upper-inclusive), sum and extremes, and an exemplar for a measurement in a sampled span's
// context.
func TestHistogramsMatchTheSDK(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "")
	hist := NewHistograms()
	own := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	sdk := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdk), sdkmetric.WithReader(own))
	defer mp.Shutdown(context.Background())
	ref, err := mp.Meter("ref").Float64Histogram("ref", metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		t.Fatal(err)
	}
	attrs := attribute.NewSet(attribute.String(AttrStage, StageAppend), attribute.String(AttrMessagingDestinationName, "t"))
	mine := hist.duration(MetricStageDuration, "d", durationBuckets).series(attrs)
	theirs := sdkDurations{ref}.series(attrs)

	// Every bound exactly (upper-inclusive), just above each, zero, negative and huge values.
	var values []time.Duration
	for _, b := range durationBuckets {
		ns := time.Duration(math.Round(b * 1e9))
		values = append(values, ns, ns+1)
	}
	values = append(values, 0, -time.Millisecond, 3*time.Hour, 42*time.Microsecond)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 250 {
				d := values[(g*250+i)%len(values)]
				mine.record(trace.SpanContext{}, d)
				theirs.record(trace.SpanContext{}, d)
			}
		})
	}
	wg.Wait()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	mine.record(sc, 7*time.Millisecond)
	theirs.record(sc, 7*time.Millisecond)

	got := histogramPoint(t, own, MetricStageDuration, attrs)
	want := histogramPoint(t, sdk, "ref", attrs)
	if got.Count != want.Count || got.Count != 1001 {
		t.Errorf("count %d, the SDK's %d (want 1001)", got.Count, want.Count)
	}
	for i := range want.BucketCounts {
		if got.BucketCounts[i] != want.BucketCounts[i] {
			t.Errorf("bucket %d (≤ %v): %d, the SDK's %d", i, bound(want.Bounds, i), got.BucketCounts[i], want.BucketCounts[i])
		}
	}
	if math.Abs(got.Sum-want.Sum) > 1e-6 {
		t.Errorf("sum %v, the SDK's %v", got.Sum, want.Sum)
	}
	gmin, _ := got.Min.Value()
	wmin, _ := want.Min.Value()
	gmax, _ := got.Max.Value()
	wmax, _ := want.Max.Value()
	if gmin != wmin || gmax != wmax {
		t.Errorf("min/max %v/%v, the SDK's %v/%v", gmin, gmax, wmin, wmax)
	}
	if len(got.Exemplars) != 1 || len(want.Exemplars) != 1 {
		t.Fatalf("exemplars: %d, the SDK's %d; want 1 each (one sampled measurement)", len(got.Exemplars), len(want.Exemplars))
	}
	if ex := got.Exemplars[0]; trace.TraceID(ex.TraceID) != sc.TraceID() || trace.SpanID(ex.SpanID) != sc.SpanID() || ex.Value != 0.007 {
		t.Errorf("exemplar %+v, want trace %s span %s value 0.007", ex, sc.TraceID(), sc.SpanID())
	}
}

func bound(bounds []float64, i int) any {
	if i < len(bounds) {
		return bounds[i]
	}
	return "+Inf"
}

// TestSetupAppliesTheExemplarFilter: OTEL_METRICS_EXEMPLAR_FILTER reaches the Histograms
// Setup is given.
func TestSetupAppliesTheExemplarFilter(t *testing.T) {
	hist := NewHistograms()
	p, err := Setup(context.Background(), Config{Histograms: hist,
		Env: &Env{TracesExporter: "none", MetricsExporter: "none", ExemplarFilter: "always_off"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	if hist.exemplar != exemplarsAlwaysOff {
		t.Fatalf("exemplar filter %v, want always_off", hist.exemplar)
	}
}

// TestHistogramsExemplarFilter: always_off keeps no exemplar even in a sampled context;
// always_on keeps one without a span.
func TestHistogramsExemplarFilter(t *testing.T) {
	attrs := attribute.NewSet(attribute.String(AttrStage, StageAppend))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	for _, tc := range []struct {
		filter string
		sc     trace.SpanContext
		want   int
	}{
		{"always_off", sc, 0},
		{"always_on", trace.SpanContext{}, 1},
		{"trace_based", trace.SpanContext{}, 0},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			hist := NewHistograms()
			hist.setExemplarFilter(tc.filter)
			reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			hist.duration("h", "", durationBuckets).series(attrs).record(tc.sc, time.Millisecond)
			if p := histogramPoint(t, reader, "h", attrs); len(p.Exemplars) != tc.want {
				t.Errorf("%d exemplars, want %d", len(p.Exemplars), tc.want)
			}
		})
	}
}

// BenchmarkLatencyRecord is one per-record histogram measurement, the SDK's against ours:
//
//	go test -run '^$' -bench LatencyRecord -benchmem ./telemetry/
func BenchmarkLatencyRecord(b *testing.B) {
	attrs := attribute.NewSet(attribute.String(AttrStage, StageAppend), attribute.String(AttrMessagingDestinationName, "t"))
	hist := NewHistograms()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))))
	defer mp.Shutdown(context.Background())
	ref, err := mp.Meter("ref").Float64Histogram("ref", metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		s    durationSeries
	}{
		{"sdk", sdkDurations{ref}.series(attrs)},
		{"own", hist.duration("own", "", durationBuckets).series(attrs)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				bc.s.record(trace.SpanContext{}, time.Duration(i&0xffff)*time.Microsecond)
			}
		})
	}
}

// TestDurationBatchMatchesRecord: a batch gathered locally and added at once leaves the series
// as recording each value would (counts per bucket, sum, extremes).
func TestDurationBatchMatchesRecord(t *testing.T) {
	hist := NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	one := attribute.NewSet(attribute.String("way", "one"))
	batch := attribute.NewSet(attribute.String("way", "batch"))
	h := hist.duration("h", "", durationBuckets)
	each, all := h.get(one), h.get(batch)
	for round := range 3 { // the second and third batches must merge with what is there
		local := all.newBatch()
		for i := range 500 {
			d := time.Duration((i*7919+round*104729)%3_000_000) * time.Microsecond // 0 to 3 s
			each.record(trace.SpanContext{}, d)
			local.add(int64(d))
		}
		all.addBatch(&local)
	}
	a, b := histogramPoint(t, reader, "h", one), histogramPoint(t, reader, "h", batch)
	amin, _ := a.Min.Value()
	bmin, _ := b.Min.Value()
	amax, _ := a.Max.Value()
	bmax, _ := b.Max.Value()
	if a.Count != 1500 || b.Count != a.Count || a.Sum != b.Sum || amin != bmin || amax != bmax {
		t.Fatalf("one by one: n=%d sum=%v min=%v max=%v; batched: n=%d sum=%v min=%v max=%v", a.Count, a.Sum, amin, amax, b.Count, b.Sum, bmin, bmax)
	}
	for i := range a.BucketCounts {
		if a.BucketCounts[i] != b.BucketCounts[i] {
			t.Errorf("bucket %d: %d one by one, %d batched", i, a.BucketCounts[i], b.BucketCounts[i])
		}
	}
}

// TestRecordUntimedIsZero: an untimed measurement reads as recording 0 s would (count, first
// bucket, sum, minimum), beside timed ones.
func TestRecordUntimedIsZero(t *testing.T) {
	hist := NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	zero := attribute.NewSet(attribute.String("way", "zero"))
	untimed := attribute.NewSet(attribute.String("way", "untimed"))
	h := hist.duration("h", "", durationBuckets)
	a, b := h.get(zero), h.get(untimed)
	for i := range 300 {
		d := time.Duration(i*i+1) * time.Millisecond // never 0: the minimum must come from the untimed
		a.record(trace.SpanContext{}, d)
		b.record(trace.SpanContext{}, d)
		if i%3 == 0 {
			a.record(trace.SpanContext{}, 0)
			b.recordUntimed()
		}
	}
	pa, pb := histogramPoint(t, reader, "h", zero), histogramPoint(t, reader, "h", untimed)
	amin, _ := pa.Min.Value()
	bmin, _ := pb.Min.Value()
	amax, _ := pa.Max.Value()
	bmax, _ := pb.Max.Value()
	if pa.Count != 400 || pb.Count != pa.Count || pa.Sum != pb.Sum || amin != bmin || amax != bmax || bmin != 0 {
		t.Fatalf("0 s recorded: n=%d sum=%v min=%v max=%v; untimed: n=%d sum=%v min=%v max=%v", pa.Count, pa.Sum, amin, amax, pb.Count, pb.Sum, bmin, bmax)
	}
	for i := range pa.BucketCounts {
		if pa.BucketCounts[i] != pb.BucketCounts[i] {
			t.Errorf("bucket %d: %d recorded, %d untimed", i, pa.BucketCounts[i], pb.BucketCounts[i])
		}
	}
}

// TestExemplarsRateLimitedPerBucket: a bucket's exemplar is replaced at most once per
// exemplarEvery; another bucket is not held back by it.
func TestExemplarsRateLimitedPerBucket(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "")
	hist := NewHistograms()
	at := time.Unix(1_800_000_000, 0)
	hist.now = func() time.Time { return at }
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hist))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	attrs := attribute.NewSet(attribute.String(AttrStage, StageAppend))
	s := hist.duration("h", "", durationBuckets).series(attrs)
	traced := func(id byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{id}, SpanID: trace.SpanID{id}, TraceFlags: trace.FlagsSampled})
	}
	exemplarOf := func(bucketValue float64) byte {
		t.Helper()
		for _, ex := range histogramPoint(t, reader, "h", attrs).Exemplars {
			if ex.Value == bucketValue {
				return ex.TraceID[0]
			}
		}
		return 0
	}
	s.record(traced(1), 7*time.Millisecond)
	at = at.Add(exemplarEvery / 2)
	s.record(traced(2), 7*time.Millisecond)  // same bucket, too soon: kept out
	s.record(traced(3), 70*time.Millisecond) // another bucket: its first
	if got := exemplarOf(0.007); got != 1 {
		t.Fatalf("exemplar of trace %d within %v of the first, want it to stay trace 1", got, exemplarEvery/2)
	}
	if got := exemplarOf(0.07); got != 3 {
		t.Fatalf("other bucket: exemplar of trace %d, want 3", got)
	}
	at = at.Add(exemplarEvery)
	s.record(traced(4), 7*time.Millisecond)
	if got := exemplarOf(0.007); got != 4 {
		t.Fatalf("exemplar of trace %d %v later, want 4", got, exemplarEvery)
	}
}

// TestDeltaPreferenceGivesDeltaHistograms: with OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
// =delta, the OTLP reader Setup builds exports every histogram as delta, kafkatrail's own
// (Histograms) as the SDK's: each collection has what was recorded since the one before, and a
// series with nothing new is left out. With base2_exponential_bucket_histogram asked for, Setup
// leaves its own histograms out (they are explicit-bucket only).
func TestDeltaPreferenceGivesDeltaHistograms(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // never reached: collected by hand
	hist := NewHistograms()
	reader, own, _, err := newMetricReader(context.Background(), hist, nil, nil, ReadEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	if !own {
		t.Fatal("an explicit-bucket exporter left the own histograms out")
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		// Its last export has nowhere to go: do not wait for it.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_ = mp.Shutdown(ctx)
	}()
	ref, err := mp.Meter("ref").Float64Histogram("ref")
	if err != nil {
		t.Fatal(err)
	}
	attrs := attribute.NewSet(attribute.String(AttrStage, StageAppend))
	mine := hist.duration(MetricStageDuration, "d", durationBuckets).series(attrs)
	collect := func() map[string]metricdata.Histogram[float64] {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]metricdata.Histogram[float64]{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
					out[m.Name] = h
				}
			}
		}
		return out
	}
	count := func(h metricdata.Histogram[float64]) uint64 {
		var n uint64
		for _, p := range h.DataPoints {
			n += p.Count
		}
		return n
	}
	for range 3 {
		mine.record(trace.SpanContext{}, time.Millisecond)
		ref.Record(context.Background(), 0.001)
	}
	first := collect()
	for range 2 {
		mine.record(trace.SpanContext{}, 2*time.Millisecond)
		ref.Record(context.Background(), 0.002)
	}
	second := collect()
	third := collect()
	for name, want := range map[string][3]uint64{MetricStageDuration: {3, 2, 0}, "ref": {3, 2, 0}} {
		for i, h := range []metricdata.Histogram[float64]{first[name], second[name], third[name]} {
			if len(h.DataPoints) > 0 && h.Temporality != metricdata.DeltaTemporality {
				t.Errorf("%s, collection %d: temporality %v, want delta", name, i+1, h.Temporality)
			}
			if n := count(h); n != want[i] {
				t.Errorf("%s, collection %d: %d measurements, want %d", name, i+1, n, want[i])
			}
		}
	}
	if p := second[MetricStageDuration].DataPoints; len(p) == 1 && (p[0].Sum < 0.0039 || p[0].Sum > 0.0041 || p[0].BucketCounts[0] != 0) {
		t.Errorf("the second delta point: sum %v, buckets %v; want the two 2 ms measurements only", p[0].Sum, p[0].BucketCounts)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram")
	if _, own, _, err := newMetricReader(context.Background(), NewHistograms(), nil, nil, ReadEnv(os.Getenv)); err != nil || own {
		t.Errorf("base2 exponential asked for: own histograms %v (err %v), want left out", own, err)
	}
}
