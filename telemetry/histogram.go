package telemetry

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

// Histograms aggregates the producer's latency histograms, the ones recorded once per record
// (the read and append stages, the end-to-end send duration and the record's age:
// kafkatrail.producer.stage.duration, messaging.client.operation.duration and
// kafkatrail.producer.record.age), and hands them to metric readers as an
// sdkmetric.Producer: build every reader with sdkmetric.WithProducer(h) (Setup does it for the
// readers it builds).
//
// Why not the SDK's histograms: a Record there resolves and de-duplicates its attribute set,
// looks the series up in a map and takes a lock, ~150-250 ns; twice per record that was a third
// of the agent's CPU. Here a series is a pointer the observer keeps per topic, and a Record is
// an atomic add to a bucket, the sum and (rarely) the extremes: ~15 ns. The output is what the
// SDK would export for the same instruments: cumulative explicit-bucket histograms with min,
// max, and one exemplar per bucket (the last sampled measurement), following
// OTEL_METRICS_EXEMPLAR_FILTER (trace_based by default, always_on, always_off); a reader that
// wants delta takes ProducerFor(DeltaTemporality) instead.
type Histograms struct {
	scope    instrumentation.Scope
	exemplar exemplarFilter
	now      func() time.Time // exemplars' times; time.Now but in tests

	mu    sync.Mutex
	hists []*durationHistogram
}

// NewHistograms returns an empty set of histograms; the observer adds its instruments to it.
func NewHistograms() *Histograms {
	return &Histograms{
		scope:    instrumentation.Scope{Name: InstrumentationName},
		exemplar: exemplarsTraceBased, // Setup applies OTEL_METRICS_EXEMPLAR_FILTER
		now:      time.Now,
	}
}

type exemplarFilter int

const (
	exemplarsTraceBased exemplarFilter = iota // measurements in a sampled span's context
	exemplarsAlwaysOn
	exemplarsAlwaysOff
)

// setExemplarFilter applies OTEL_METRICS_EXEMPLAR_FILTER's value as the SDK reads it. Setup
// calls it before it makes the observer, so before anything is recorded: the recording reads
// the filter without a lock.
func (h *Histograms) setExemplarFilter(name string) {
	switch name {
	case "always_on":
		h.exemplar = exemplarsAlwaysOn
	case "always_off":
		h.exemplar = exemplarsAlwaysOff
	default:
		h.exemplar = exemplarsTraceBased
	}
}

// durationHistogram is one instrument: a name, bucket boundaries and a series per attribute set.
type durationHistogram struct {
	owner    *Histograms
	name     string
	desc     string
	bounds   []float64 // seconds, exported
	boundsNs []int64   // the same in nanoseconds, compared against on Record

	mu      sync.Mutex
	byAttrs map[attribute.Distinct]*histSeries
	order   []*histSeries // creation order, so that exports are stable
}

// duration returns a histogram of durations in seconds with the given bucket boundaries.
func (h *Histograms) duration(name, desc string, bounds []float64) *durationHistogram {
	if len(bounds)+1 > maxBuckets {
		panic("telemetry: too many histogram bounds") // a programming error: the bounds are ours
	}
	d := &durationHistogram{owner: h, name: name, desc: desc, bounds: bounds,
		boundsNs: make([]int64, len(bounds)), byAttrs: map[attribute.Distinct]*histSeries{}}
	for i, b := range bounds {
		d.boundsNs[i] = int64(math.Round(b * 1e9))
	}
	h.mu.Lock()
	h.hists = append(h.hists, d)
	h.mu.Unlock()
	return d
}

// get returns the series of attrs, creating it on first use. The observer keeps the series of
// the common attribute sets, so this map is consulted once per topic, and on failures.
func (d *durationHistogram) get(attrs attribute.Set) *histSeries {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.byAttrs[attrs.Equivalent()]; ok {
		return s
	}
	s := &histSeries{h: d, attrs: attrs, start: time.Now(), counts: make([]atomic.Uint64, len(d.bounds)+1),
		exAt: make([]atomic.Int64, len(d.bounds)+1)}
	s.min.Store(math.MaxInt64)
	s.max.Store(math.MinInt64)
	d.byAttrs[attrs.Equivalent()] = s
	d.order = append(d.order, s)
	return s
}

// histSeries is one attribute set's cumulative histogram. Writers only add atomically; a
// reader may see a measurement's bucket before its sum, which the next collection settles.
type histSeries struct {
	h      *durationHistogram
	attrs  attribute.Set
	start  time.Time
	counts []atomic.Uint64 // len(bounds)+1: the last counts values above every bound
	sumNs  atomic.Int64
	min    atomic.Int64
	max    atomic.Int64
	// untimed counts measurements of 0 s recorded without a duration (recordUntimed): they
	// join the first bucket, and the minimum, when the series is read.
	untimed atomic.Uint64

	exMu      sync.Mutex
	exemplars []exemplarSlot // per bucket, the last one kept; nil until the first
	// exAt is, per bucket, when (Unix ns) its exemplar was last replaced: a bucket takes at
	// most one exemplar per exemplarEvery, so that a burst of traced records (at 100 %
	// sampling, every record) costs a load each rather than a context lookup and a lock.
	exAt []atomic.Int64
}

// exemplarEvery is how often a bucket's exemplar may be replaced: far more often than any
// reader collects, so the exemplar exported is still one of the latest.
const exemplarEvery = 100 * time.Millisecond

// record adds one duration. sc is the span context an exemplar links to (invalid: none).
func (s *histSeries) record(sc trace.SpanContext, d time.Duration) {
	ns := int64(d)
	i := bucketOf(s.h.boundsNs, ns)
	s.counts[i].Add(1)
	s.sumNs.Add(ns)
	s.extremes(ns, ns)
	switch s.h.owner.exemplar {
	case exemplarsAlwaysOff:
		return
	case exemplarsTraceBased:
		if !sc.IsSampled() {
			return // the common case: an untraced record
		}
	}
	now := s.h.owner.now()
	if last := s.exAt[i].Load(); last != 0 && now.UnixNano()-last < int64(exemplarEvery) {
		return
	}
	s.exAt[i].Store(now.UnixNano())
	// The ids are kept as arrays: slices of them (what metricdata.Exemplar holds) would be two
	// allocations a traced record's every stage; collect makes those.
	ex := exemplarSlot{at: now, v: d.Seconds(), traced: sc.IsValid(), tid: sc.TraceID(), sid: sc.SpanID()}
	s.exMu.Lock()
	if s.exemplars == nil {
		s.exemplars = make([]exemplarSlot, len(s.counts))
	}
	s.exemplars[i] = ex
	s.exMu.Unlock()
}

// recordUntimed adds a measurement of 0 s: one atomic add, where record's bucket search, sum
// and extremes cost several.
func (s *histSeries) recordUntimed() { s.untimed.Add(1) }

// exemplarSlot is a bucket's last exemplar.
type exemplarSlot struct {
	at     time.Time // zero: none yet
	v      float64
	traced bool // tid and sid are set
	tid    trace.TraceID
	sid    trace.SpanID
}

// exemplar is the slot as the metrics SDK's data.
func (x *exemplarSlot) exemplar() metricdata.Exemplar[float64] {
	ex := metricdata.Exemplar[float64]{Time: x.at, Value: x.v}
	if x.traced {
		tid, sid := x.tid, x.sid
		ex.TraceID, ex.SpanID = tid[:], sid[:]
	}
	return ex
}

// maxBuckets bounds a histogram's buckets, so that a durationBatch lives on the stack.
const maxBuckets = 32

// durationBatch gathers measurements of one series locally (one goroutine, no atomics) to add
// them at once: the sender records every record of a completed batch.
type durationBatch struct {
	bounds   []int64
	counts   [maxBuckets]uint64
	sum      int64
	min, max int64
	n        uint64
	// last is the bucket of the last measurement: a batch's records have nearly the same
	// latencies, so the next one is checked against its bounds before any search.
	last int
}

func (s *histSeries) newBatch() durationBatch {
	return durationBatch{bounds: s.h.boundsNs, min: math.MaxInt64, max: math.MinInt64}
}

func (db *durationBatch) add(ns int64) {
	i := db.last
	if (i > 0 && ns <= db.bounds[i-1]) || (i < len(db.bounds) && ns > db.bounds[i]) {
		i = bucketOf(db.bounds, ns)
		db.last = i
	}
	db.counts[i]++
	db.sum += ns
	db.min = min(db.min, ns)
	db.max = max(db.max, ns)
	db.n++
}

// addBatch adds what db gathered to the series (no exemplars: a batch's traced records are
// recorded one by one, in their spans' contexts).
func (s *histSeries) addBatch(db *durationBatch) {
	if db.n == 0 {
		return
	}
	for i, c := range db.counts[:len(s.counts)] {
		if c > 0 {
			s.counts[i].Add(c)
		}
	}
	s.sumNs.Add(db.sum)
	s.extremes(db.min, db.max)
}

// bucketOf is the index of the bucket ns falls in: buckets are upper-inclusive, as
// OpenTelemetry's explicit-bucket histograms are, and the last one is above every bound.
func bucketOf(bounds []int64, ns int64) int {
	i := 0
	for i < len(bounds) && ns > bounds[i] {
		i++
	}
	return i
}

// extremes lowers the series' minimum to lo and raises its maximum to hi where they pass them.
func (s *histSeries) extremes(lo, hi int64) {
	for v := s.min.Load(); lo < v && !s.min.CompareAndSwap(v, lo); v = s.min.Load() {
	}
	for v := s.max.Load(); hi > v && !s.max.CompareAndSwap(v, hi); v = s.max.Load() {
	}
}

// Produce returns the histograms' cumulative data points: sdkmetric.Producer.
func (h *Histograms) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	h.mu.Lock()
	hists := append([]*durationHistogram(nil), h.hists...)
	h.mu.Unlock()
	now := time.Now()
	sm := metricdata.ScopeMetrics{Scope: h.scope}
	for _, d := range hists {
		d.mu.Lock()
		series := append([]*histSeries(nil), d.order...)
		d.mu.Unlock()
		var points []metricdata.HistogramDataPoint[float64]
		for _, s := range series {
			if p, ok := s.point(now); ok {
				points = append(points, p)
			}
		}
		if len(points) == 0 {
			continue // as the SDK: an instrument nothing was recorded in is not exported
		}
		sm.Metrics = append(sm.Metrics, metricdata.Metrics{Name: d.name, Description: d.desc, Unit: "s",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: points}})
	}
	if len(sm.Metrics) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{sm}, nil
}

func (s *histSeries) point(now time.Time) (metricdata.HistogramDataPoint[float64], bool) {
	counts := make([]uint64, len(s.counts))
	untimed := s.untimed.Load()
	counts[0] = untimed
	var n uint64
	for i := range s.counts {
		counts[i] += s.counts[i].Load()
		n += counts[i]
	}
	if n == 0 {
		return metricdata.HistogramDataPoint[float64]{}, false
	}
	lo, hi := s.min.Load(), s.max.Load()
	if untimed > 0 {
		lo, hi = min(lo, 0), max(hi, 0)
	}
	p := metricdata.HistogramDataPoint[float64]{
		Attributes: s.attrs, StartTime: s.start, Time: now, Count: n,
		Bounds: s.h.bounds, BucketCounts: counts,
		Min: metricdata.NewExtrema(float64(lo) / 1e9),
		Max: metricdata.NewExtrema(float64(hi) / 1e9),
		Sum: float64(s.sumNs.Load()) / 1e9,
	}
	s.exMu.Lock()
	for i := range s.exemplars {
		if ex := &s.exemplars[i]; !ex.at.IsZero() {
			p.Exemplars = append(p.Exemplars, ex.exemplar())
		}
	}
	s.exMu.Unlock()
	return p, true
}

// durations is a latency histogram the observer records into: its own (Histograms) when Setup
// built it, or an SDK instrument of the meter provider it was given.
type durations interface {
	// series returns the recorder of one attribute set; callers keep the common ones.
	series(attrs attribute.Set) durationSeries
}

// durationSeries records durations into one attribute set of a histogram.
type durationSeries interface {
	// record records d; an exemplar, if one is kept, links to sc when it is valid.
	record(sc trace.SpanContext, d time.Duration)
	// recordUntimed records a measurement of 0 s, one that was not timed.
	recordUntimed()
}

func (d *durationHistogram) series(attrs attribute.Set) durationSeries { return d.get(attrs) }

// sdkDurations is a durations over an SDK (or any API) histogram.
type sdkDurations struct{ h metric.Float64Histogram }

func (d sdkDurations) series(attrs attribute.Set) durationSeries {
	return sdkSeries{h: d.h, opts: []metric.RecordOption{metric.WithAttributeSet(attrs)}}
}

type sdkSeries struct {
	h    metric.Float64Histogram
	opts []metric.RecordOption
}

func (s sdkSeries) record(sc trace.SpanContext, d time.Duration) {
	ctx := context.Background()
	if sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	s.h.Record(ctx, d.Seconds(), s.opts...)
}

func (s sdkSeries) recordUntimed() { s.h.Record(context.Background(), 0, s.opts...) }

// ProducerFor is h as the producer of a reader that wants histograms in temporality t (its
// exporter's Temporality(InstrumentKindHistogram): OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
// for an OTLP exporter). h itself is cumulative; for delta, the producer keeps what it exported
// last, per series, and exports the difference, so that one export never mixes the SDK's
// delta instruments with cumulative histograms. Each reader needs its own.
func (h *Histograms) ProducerFor(t metricdata.Temporality) sdkmetric.Producer {
	if t != metricdata.DeltaTemporality {
		return h
	}
	return &deltaHistograms{h: h, last: map[deltaKey]deltaState{}}
}

// deltaHistograms turns h's cumulative points into delta ones for one reader.
type deltaHistograms struct {
	h *Histograms

	mu   sync.Mutex
	last map[deltaKey]deltaState
}

// deltaKey is a series: its instrument and attribute set.
type deltaKey struct {
	name  string
	attrs attribute.Distinct
}

// deltaState is what a series had when it was last exported.
type deltaState struct {
	at     time.Time
	count  uint64
	sum    float64
	counts []uint64
}

// Produce implements sdkmetric.Producer: each series' point is the change since the last
// Produce (from the series' start the first time), without min and max (a delta interval's
// extremes are not known from cumulative ones: they are optional), with the exemplars taken in
// the interval. A series with nothing new is left out, as the SDK leaves out a delta series
// that recorded nothing.
func (d *deltaHistograms) Produce(ctx context.Context) ([]metricdata.ScopeMetrics, error) {
	sms, err := d.h.Produce(ctx)
	if err != nil || len(sms) == 0 {
		return sms, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for si := range sms {
		metrics := sms[si].Metrics[:0]
		for _, m := range sms[si].Metrics {
			hist := m.Data.(metricdata.Histogram[float64])
			points := hist.DataPoints[:0]
			for _, p := range hist.DataPoints {
				k := deltaKey{m.Name, p.Attributes.Equivalent()}
				prev, seen := d.last[k]
				d.last[k] = deltaState{at: p.Time, count: p.Count, sum: p.Sum, counts: slices.Clone(p.BucketCounts)}
				if seen {
					if p.Count == prev.count {
						continue
					}
					p.StartTime, p.Count, p.Sum = prev.at, p.Count-prev.count, p.Sum-prev.sum
					for i := range p.BucketCounts {
						p.BucketCounts[i] -= prev.counts[i]
					}
					p.Exemplars = slices.DeleteFunc(p.Exemplars, func(e metricdata.Exemplar[float64]) bool { return !e.Time.After(prev.at) })
				}
				p.Min, p.Max = metricdata.Extrema[float64]{}, metricdata.Extrema[float64]{}
				points = append(points, p)
			}
			if len(points) == 0 {
				continue
			}
			hist.Temporality, hist.DataPoints = metricdata.DeltaTemporality, points
			m.Data = hist
			metrics = append(metrics, m)
		}
		sms[si].Metrics = metrics
	}
	return sms, nil
}
