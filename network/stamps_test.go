package network

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
)

// TestStageStampsAreTheMomentsNotThePoll pins where a request's stage times come from: Queued
// is read in doSend (after the drain time the sender passed in), Written when the writer's
// write returned and Received when the reader had the response, even though the poll that
// reports both runs well after them. They were the drain time and the poll's time: doSend
// read zero in every trace, and at a low rate completedSend took the whole round trip while
// completedReceive read zero.
func TestStageStampsAreTheMomentsNotThePoll(t *testing.T) {
	cluster := newFakeCluster(t)
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{})
	leader := eventsLeader(t, c, meta)
	// Nothing of the set-up is left to report: the two events awaited below are the request's.
	pollUntil(t, c, 5*time.Second, "an idle client", func() bool { return c.InFlightRequestCount() == 0 && len(c.selector.events) == 0 })

	drained := time.Now()
	time.Sleep(2 * time.Millisecond) // the sender closing and compressing the batch
	sendCalled := time.Now()
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: leader.ID, Body: produceRequest("events", 0, []byte("x"), -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, drained)

	// No poll until both the write's report and the response are queued for one (the write
	// reported by Send itself when it wrote the frame).
	deadline := time.Now().Add(5 * time.Second)
	for len(c.selector.events)+len(c.selector.written) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events queued, want the send's and the response's", len(c.selector.events)+len(c.selector.written))
		}
		time.Sleep(time.Millisecond)
	}
	bothDone := time.Now()
	time.Sleep(20 * time.Millisecond) // the sender busy elsewhere, or asleep in a linger
	pollAt := time.Now()
	c.Poll(0, pollAt)
	if got == nil {
		t.Fatal("the response was not handled by the poll that had it queued")
	}
	r := got.Request
	if got.Err != nil || !r.SendComplete {
		t.Fatalf("response %+v", got)
	}
	if r.Queued.Before(sendCalled) {
		t.Fatalf("Queued %v is before Send was called (%v after the drain): doSend reads the drain time", r.Queued.Sub(drained), sendCalled.Sub(drained))
	}
	if r.Written.After(bothDone) || got.Received.After(bothDone) {
		t.Fatalf("Written %v, Received %v after both were done; the poll ran %v after: stamped at the poll",
			r.Written.Sub(bothDone), got.Received.Sub(bothDone), pollAt.Sub(bothDone))
	}
	if r.Written.Before(r.Queued) || got.Received.Before(r.Written) {
		t.Fatalf("Queued %v, Written +%v, Received +%v: out of order", r.Queued, r.Written.Sub(r.Queued), got.Received.Sub(r.Queued))
	}
}

// TestStageStampsStayOrderedWhenTheAnswerComesFirst: when the response is handled before the
// writer's report of its request (the report still queued, or stamped after the reader's
// read: the writer descheduled once its bytes were out), Written is the write's start when
// the writer told it, else the read time, so Queued <= Written <= Received holds, the late
// report changes nothing, and completedSend does not take the round trip (with
// completedReceive reading zero) because the writer's report came late.
func TestStageStampsStayOrderedWhenTheAnswerComesFirst(t *testing.T) {
	const node = 1
	queued := time.Now()
	started := queued.Add(time.Millisecond)
	read := queued.Add(3 * time.Millisecond)
	pollNow := queued.Add(50 * time.Millisecond)
	for _, tc := range []struct {
		name         string
		reportBefore bool // the writer's report is handled first, stamped after the read
		knownStart   bool // the writer published its write's start
		want         time.Time
	}{
		{"answer before the report", false, true, started},
		{"answer before the report, start unknown", false, false, read},
		{"report stamped after the read", true, true, started},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := threeNodeClient(t, queued)
			if tc.knownStart && !tc.reportBefore {
				ch := newChannel(node, "", c.selector.cfg, nil)
				// The channel exists before any write of its starts: its epoch is before queued
				// however late this subtest runs (a start before the epoch would read as none).
				ch.epoch = queued.Add(-time.Second)
				ch.writeStarted.Store(int64(started.Sub(ch.epoch)) + 1)
				c.selector.channels[node] = &selectorConn{ch: ch, connected: true, sendInProgress: true}
			}
			body := kmsg.NewPtrProduceRequest()
			body.SetVersion(7) // a non-flexible response header: the payload below is plain
			r := c.newRequest(node, body, true, false, queued, 0, nil, queued)
			r.CorrelationID = 42
			c.inFlight.Add(r)
			c.sending[node] = r
			lateReport := []CompletedSend{{Node: node, Started: started, Written: read.Add(time.Millisecond)}}

			var responses []*inflight.Response
			if tc.reportBefore {
				responses = c.handleCompletedSends(responses, lateReport)
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(7)
			payload := resp.AppendTo(binary.BigEndian.AppendUint32(nil, 42))
			responses = c.handleCompletedReceives(responses, []Receive{{Node: node, Payload: payload, Received: read}}, pollNow)
			if !tc.reportBefore {
				responses = c.handleCompletedSends(responses, lateReport)
			}
			if len(responses) != 1 || responses[0].Err != nil {
				t.Fatalf("responses %+v", responses)
			}
			got := responses[0]
			if !got.Received.Equal(read) {
				t.Fatalf("Received +%v, want the read's +%v (the poll's is +%v)", got.Received.Sub(queued), read.Sub(queued), pollNow.Sub(queued))
			}
			if !r.SendComplete || !r.Written.Equal(tc.want) {
				t.Fatalf("Written +%v (complete %v), want +%v (read at +%v)", r.Written.Sub(queued), r.SendComplete, tc.want.Sub(queued), read.Sub(queued))
			}
			if r.Queued.After(r.Written) || r.Written.After(got.Received) {
				t.Fatalf("Queued, Written, Received out of order")
			}
		})
	}
}

// TestAcksZeroCompletesAtItsWrite: a request that expects no response completes when its
// write did, not at the poll that learnt of it.
func TestAcksZeroCompletesAtItsWrite(t *testing.T) {
	const node = 1
	queued := time.Now()
	written := queued.Add(2 * time.Millisecond)
	c := threeNodeClient(t, queued)
	body := kmsg.NewPtrProduceRequest()
	r := c.newRequest(node, body, false, false, queued, 0, nil, queued)
	c.inFlight.Add(r)
	c.sending[node] = r
	responses := c.handleCompletedSends(nil, []CompletedSend{{Node: node, Written: written}})
	if len(responses) != 1 || !responses[0].Received.Equal(written) || !r.Written.Equal(written) {
		t.Fatalf("responses %+v, Written +%v; want one completed at the write, +%v", responses, r.Written.Sub(queued), written.Sub(queued))
	}
	if c.HasInFlightRequests(node) {
		t.Fatal("acks=0 request still in flight")
	}
}
