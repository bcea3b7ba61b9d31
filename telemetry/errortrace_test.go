package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// TestFailedRecordsAreTraced: with head sampling that traces nothing, a record the broker
// refuses (MESSAGE_TOO_LARGE), one refused for authorization (TOPIC_AUTHORIZATION_FAILED) and
// one whose topic does not exist (it fails in Send) each leave a send span marked
// kafkatrail.trace.reason=error, with the error; a burst of failures leaves at most
// DefaultErrorTracesPerSecond of them in a second; a record delivered leaves none.
func TestFailedRecordsAreTraced(t *testing.T) {
	h := newHarnessWith(t, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), ObserverConfig{})
	c := newKfake(t, "ok", "refused", "denied")
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch {
		case producesTo(r, "refused"):
			return produceError(r, kerr.MessageTooLarge.Code), nil, true
		case producesTo(r, "denied"):
			return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
		}
		return nil, nil, false
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, func(cfg *producer.Config) { cfg.MaxBlockMs = 300 })
	send := func(topic string) error {
		return sendOne(t, p, context.Background(), &producer.Record{Topic: topic, Partition: producer.PartitionAny, Value: []byte("v")}).err
	}
	if err := send("ok"); err != nil {
		t.Fatal(err)
	}
	if n := sendSpans(h); n != 0 {
		t.Fatalf("a delivered record left %d send spans with head sampling off", n)
	}
	for _, tc := range []struct{ topic, errType string }{
		{"refused", "MESSAGE_TOO_LARGE"},
		{"denied", "TOPIC_AUTHORIZATION_FAILED"},
		{"missing", "UNKNOWN_TOPIC_OR_PARTITION"}, // no such topic: it fails in Send
	} {
		if err := send(tc.topic); err == nil {
			t.Fatalf("a record to %s was delivered", tc.topic)
		}
		s := onlySend(t, h, "send "+tc.topic)
		wantAttr(t, s, AttrTraceReason, TraceReasonError)
		wantAttr(t, s, AttrErrorType, tc.errType)
		// The description is the message, not error.type again (the conventions).
		if st := s.Status(); st.Code != codes.Error || st.Description == "" || strings.HasPrefix(st.Description, tc.errType) {
			t.Errorf("%s: status %+v, want Error with the message and not %s again", s.Name(), st, tc.errType)
		}
	}

	// A burst: 50 records refused in one batch are traced DefaultErrorTracesPerSecond at most.
	// (Not MESSAGE_TOO_LARGE: a batch the stub refuses whatever its size would be split again
	// and again until delivery.timeout.ms.)
	o := newOutcome()
	for range 50 {
		_ = p.Send(context.Background(), &producer.Record{Topic: "denied", Partition: 0, Value: []byte("v")}, o.callback)
	}
	_ = p.Flush(context.Background())
	n := 0
	for _, s := range h.spans.Ended() {
		if s.Name() == "send denied" {
			n++
		}
	}
	if n-1 > DefaultErrorTracesPerSecond {
		t.Fatalf("%d traces of denied records after a burst of 50, want at most %d a second", n-1, DefaultErrorTracesPerSecond)
	}
	if n < 2 {
		t.Fatalf("no failed record of the burst was traced")
	}
}

// onlySend returns the one span named name, failing unless there is exactly one.
func onlySend(t *testing.T, h *harness, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
		names = append(names, s.Name())
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %s", len(found), name, strings.Join(names, ", "))
	}
	return found[0]
}
