package telemetry

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// ProducerStatus is what the observer last saw of the producer's brokers: for a status page
// and a readiness check. Status builds it from values the sender goroutine published (atomics,
// and the connection maps behind their rarely taken mutex), so reading it never slows the
// producer.
type ProducerStatus struct {
	// MetadataAt is when the last successful metadata response arrived; zero before the first.
	MetadataAt time.Time
	// Nodes are the broker nodes the producer connected to or tried to, by id (bootstrap
	// servers have negative ids until the metadata names the brokers).
	Nodes []NodeStatus
	// RecordAge is kafkatrail.producer.record.age over every topic, cumulative since the
	// producer started; empty when the histograms are the SDK's (a meter provider of one's own).
	RecordAge AgeHistogram
}

// AgeHistogram is a cumulative histogram of records' ages at acknowledgement, in seconds.
type AgeHistogram struct {
	Bounds []float64 // bucket upper bounds (inclusive); Counts has one bucket more, above them all
	Counts []uint64
	Count  uint64
	Sum    float64
}

// Since returns what h counted after prev, an earlier snapshot of the same histogram (h itself
// when prev is empty or from before a restart of the counts).
func (h AgeHistogram) Since(prev AgeHistogram) AgeHistogram {
	if len(prev.Counts) != len(h.Counts) || prev.Count > h.Count {
		return h
	}
	d := AgeHistogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - min(prev.Counts[i], h.Counts[i])
	}
	return d
}

// Quantile estimates the q-quantile (0 < q < 1) in seconds, interpolating linearly within its
// bucket as Prometheus's histogram_quantile does; the bucket above the last bound answers that
// bound. NaN when nothing was counted.
func (h AgeHistogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Counts) != len(h.Bounds)+1 {
		return math.NaN()
	}
	rank := q * float64(h.Count)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i == len(h.Bounds) {
				return h.Bounds[len(h.Bounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			return lo + (h.Bounds[i]-lo)*(rank-seen)/float64(c)
		}
		seen += float64(c)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// recordAge sums every topic's age series.
func (o *ProducerObserver) recordAge() AgeHistogram {
	var h AgeHistogram
	o.topics.Range(func(_, v any) bool {
		s, ok := v.(*topicAttrs).age.(*histSeries)
		if !ok {
			return true
		}
		if h.Counts == nil {
			h.Bounds, h.Counts = s.h.bounds, make([]uint64, len(s.counts))
		}
		for i := range s.counts {
			c := s.counts[i].Load()
			h.Counts[i] += c
			h.Count += c
		}
		h.Sum += float64(s.sumNs.Load()) / 1e9
		return true
	})
	return h
}

// NodeStatus is one broker node.
type NodeStatus struct {
	ID   int32
	Addr string // host:port of the last connection attempt; "" before one
	// State is the connection's state: DISCONNECTED, CONNECTING, CHECKING_API_VERSIONS,
	// READY or AUTHENTICATION_FAILED.
	State string
	// InFlight is the number of requests sent to the node and not answered.
	InFlight int64
	// LastError is why the last connection attempt failed; "" once one succeeded.
	LastError string
}

// Ready reports whether the node accepts requests.
func (n NodeStatus) Ready() bool { return n.State == "READY" }

// Status returns a snapshot of the brokers' connection states, their requests in flight and
// the time of the last metadata response.
func (o *ProducerObserver) Status() ProducerStatus {
	var s ProducerStatus
	if at := o.metadataAt.Load(); at != 0 {
		s.MetadataAt = time.Unix(0, at)
	}
	byID := map[int32]*NodeStatus{}
	get := func(id int32) *NodeStatus {
		n := byID[id]
		if n == nil {
			n = &NodeStatus{ID: id, State: "DISCONNECTED"}
			byID[id] = n
		}
		return n
	}
	o.conn.mu.Lock()
	for id, st := range o.conn.states {
		get(id).State = st.String()
	}
	for id, addr := range o.conn.addrs {
		get(id).Addr = addr
	}
	for id, e := range o.conn.lastErr {
		get(id).LastError = e
	}
	o.conn.mu.Unlock()
	o.inFlight.Range(func(k, v any) bool {
		get(k.(int32)).InFlight = v.(*atomic.Int64).Load()
		return true
	})
	for _, n := range byID {
		s.Nodes = append(s.Nodes, *n)
	}
	slices.SortFunc(s.Nodes, func(a, b NodeStatus) int { return int(a.ID) - int(b.ID) })
	s.RecordAge = o.recordAge()
	return s
}
