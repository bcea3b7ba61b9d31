package inflight

import (
	"slices"
	"testing"
	"time"
)

func req(node, corr int32, sendComplete bool) *Request {
	return &Request{Destination: node, CorrelationID: corr, SendComplete: sendComplete, ExpectResponse: true}
}

func corrIDs(rs []*Request) []int32 {
	var ids []int32
	for _, r := range rs {
		ids = append(ids, r.CorrelationID)
	}
	return ids
}

func TestCompleteOrder(t *testing.T) {
	tests := []struct {
		name     string
		complete func(f *InFlightRequests) *Request
		want     int32
		left     []int32
	}{
		{"CompleteNext takes the oldest", func(f *InFlightRequests) *Request { return f.CompleteNext(1) }, 10, []int32{11, 12}},
		{"CompleteLastSent takes the newest", func(f *InFlightRequests) *Request { return f.CompleteLastSent(1) }, 12, []int32{10, 11}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(5)
			for _, id := range []int32{10, 11, 12} {
				f.Add(req(1, id, true))
			}
			f.Add(req(2, 20, true))
			got := tt.complete(f)
			if got == nil || got.CorrelationID != tt.want {
				t.Fatalf("completed %v, want correlation id %d", got, tt.want)
			}
			if f.Count() != 3 || f.CountFor(1) != 2 || f.CountFor(2) != 1 {
				t.Fatalf("counts: total %d node1 %d node2 %d", f.Count(), f.CountFor(1), f.CountFor(2))
			}
			if left := corrIDs(f.ClearAll(1)); !slices.Equal(left, tt.left) {
				t.Fatalf("left %v, want %v", left, tt.left)
			}
		})
	}
}

func TestCompleteEmpty(t *testing.T) {
	f := New(5)
	if f.CompleteNext(1) != nil || f.CompleteLastSent(1) != nil || f.LastSent(1) != nil {
		t.Fatal("empty node returned a request")
	}
	if !f.IsEmpty(1) || f.Count() != 0 || len(f.ClearAll(1)) != 0 {
		t.Fatal("empty node not empty")
	}
}

func TestLastSent(t *testing.T) {
	f := New(5)
	f.Add(req(1, 1, true))
	f.Add(req(1, 2, false))
	if got := f.LastSent(1).CorrelationID; got != 2 {
		t.Fatalf("LastSent = %d, want 2", got)
	}
	if f.CountFor(1) != 2 {
		t.Fatal("LastSent removed a request")
	}
}

func TestCanSendMore(t *testing.T) {
	tests := []struct {
		name     string
		max      int
		requests []*Request
		want     bool
	}{
		{"empty", 1, nil, true},
		{"newest still writing", 5, []*Request{req(1, 1, true), req(1, 2, false)}, false},
		{"newest written, under max", 5, []*Request{req(1, 1, true), req(1, 2, true)}, true},
		{"at max", 2, []*Request{req(1, 1, true), req(1, 2, true)}, false},
		{"max one, one written", 1, []*Request{req(1, 1, true)}, false},
		{"other node busy", 1, []*Request{req(2, 1, false)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(tt.max)
			for _, r := range tt.requests {
				f.Add(r)
			}
			if got := f.CanSendMore(1); got != tt.want {
				t.Fatalf("CanSendMore = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClearAllOldestFirst(t *testing.T) {
	f := New(5)
	for _, id := range []int32{1, 2, 3} {
		f.Add(req(7, id, true))
	}
	if got := corrIDs(f.ClearAll(7)); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("ClearAll = %v, want oldest first", got)
	}
	if f.Count() != 0 || !f.IsEmpty(7) {
		t.Fatal("ClearAll left requests")
	}
}

func TestNodesWithTimedOutRequests(t *testing.T) {
	base := time.Unix(1000, 0)
	timeout := 30 * time.Second
	at := func(node int32, queued time.Time) *Request {
		return &Request{Destination: node, Queued: queued, Timeout: timeout}
	}
	tests := []struct {
		name     string
		requests []*Request
		now      time.Time
		want     []int32
	}{
		{"none", nil, base, nil},
		{"exactly the timeout is not late", []*Request{at(1, base)}, base.Add(timeout), nil},
		{"oldest late", []*Request{at(1, base), at(1, base.Add(20*time.Second))}, base.Add(timeout + time.Millisecond), []int32{1}},
		// Every request is judged (Java's hasExpiredRequest): a newer request with a shorter
		// timeout is late while the oldest, with a longer one, is not.
		{"newer late with its own timeout", []*Request{
			{Destination: 1, Queued: base, Timeout: time.Minute},
			{Destination: 1, Queued: base.Add(time.Second), Timeout: 5 * time.Second},
		}, base.Add(7 * time.Second), []int32{1}},
		{"none late", []*Request{at(1, base), at(1, base.Add(time.Second))}, base.Add(timeout), nil},
		{"several nodes sorted", []*Request{at(3, base), at(1, base), at(2, base.Add(time.Minute))}, base.Add(time.Minute), []int32{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(5)
			for _, r := range tt.requests {
				f.Add(r)
			}
			if got := f.NodesWithTimedOutRequests(tt.now); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
