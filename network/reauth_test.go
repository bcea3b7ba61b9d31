package network

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
)

// TestReauthenticationDeliversInFlightResponsesInOrder: the fake broker grants 1 s sessions and
// holds the answers of the first produce requests until the connection re-authenticates, then
// sends them before its SaslHandshake answer, as a broker does for requests read before the
// handshake. The client must deliver all of them, in order, and the request that triggered the
// re-authentication after them; the exchange's own responses must never reach the requests.
func TestReauthenticationDeliversInFlightResponsesInOrder(t *testing.T) {
	const held = 3
	var (
		mu         sync.Mutex
		handshakes = map[io.Writer]int{}
		waiting    = map[io.Writer][]fakeRequest{}
		offsets    = map[io.Writer]int64{}
	)
	answerProduce := func(w io.Writer, req fakeRequest) {
		resp := req.body.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.body.(*kmsg.ProduceRequest).Topics {
			topic := kmsg.NewProduceResponseTopic()
			topic.Topic = rt.Topic
			p := kmsg.NewProduceResponseTopicPartition()
			p.BaseOffset = offsets[w]
			offsets[w]++
			topic.Partitions = append(topic.Partitions, p)
			resp.Topics = append(resp.Topics, topic)
		}
		writeResponse(w, req, req.correlation, resp)
	}
	b := startFakeBroker(t, 0, func(w io.Writer, req fakeRequest) {
		mu.Lock()
		defer mu.Unlock()
		switch body := req.body.(type) {
		case *kmsg.SASLHandshakeRequest:
			handshakes[w]++
			if handshakes[w] > 1 {
				for _, r := range waiting[w] {
					answerProduce(w, r)
				}
				waiting[w] = nil
			}
			resp := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
			resp.SupportedMechanisms = []string{SASLPlain}
			writeResponse(w, req, req.correlation, resp)
		case *kmsg.SASLAuthenticateRequest:
			resp := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.SessionLifetimeMillis = 1000
			writeResponse(w, req, req.correlation, resp)
		case *kmsg.ProduceRequest:
			if handshakes[w] == 1 && len(waiting[w]) < held {
				waiting[w] = append(waiting[w], req)
				return
			}
			answerProduce(w, req)
		}
	})
	sasl := &SASLConfig{Mechanism: SASLPlain, Username: "alice", Password: "alice-secret"}
	c, node := readyFakeNode(t, b, Config{SASL: sasl})
	authenticated := time.Now()

	var got []*inflight.Response
	send := func() {
		pollUntil(t, c, 5*time.Second, "ready to send", func() bool { return c.IsReady(node.ID, time.Now()) })
		c.Send(&ClientRequest{Destination: node.ID, Body: produceRequest("events", 0, []byte("v"), -1), ExpectResponse: true,
			Callback: func(r *inflight.Response) { got = append(got, r) }}, time.Now())
	}
	for range held {
		send()
	}
	// The session's re-authentication time: 85-95 % of 1 s, but no sooner than the broker's
	// one second between re-authentications.
	pollUntil(t, c, 3*time.Second, "the re-authentication time", func() bool {
		return time.Since(authenticated) > minReauthenticationInterval+100*time.Millisecond
	})
	if len(got) != 0 {
		t.Fatalf("%d responses before the re-authentication; the broker held them", len(got))
	}
	send()
	pollUntil(t, c, 5*time.Second, "every response", func() bool { return len(got) == held+1 })
	for i, r := range got {
		if r.Err != nil {
			t.Fatalf("response %d: %v", i, r.Err)
		}
		if off := r.Body.(*kmsg.ProduceResponse).Topics[0].Partitions[0].BaseOffset; off != int64(i) {
			t.Fatalf("response %d has offset %d: out of order", i, off)
		}
		if i > 0 && r.Request.CorrelationID <= got[i-1].Request.CorrelationID {
			t.Fatalf("callbacks out of request order: %d after %d", r.Request.CorrelationID, got[i-1].Request.CorrelationID)
		}
	}
	st := sasl.Stats()
	if st.Reauthentications < 1 || st.ResponsesDuringReauthentication != held || st.SessionLifetime != time.Second {
		t.Fatalf("stats %+v; want a re-authentication during which the %d held responses arrived", st, held)
	}
	if c.ConnectionState(node.ID) != Ready {
		t.Fatalf("connection state %v after the re-authentication", c.ConnectionState(node.ID))
	}
}
