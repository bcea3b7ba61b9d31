package telemetry

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/producer"
)

// recordTraceOf returns the send span named name and its children in the order they were
// created (which is lifecycle order), failing unless there is exactly one such send span.
func recordTraceOf(t *testing.T, h *harness, name string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	var parent sdktrace.ReadOnlySpan
	ended := h.spans.Ended()
	for _, s := range ended {
		if s.Name() == name {
			if parent != nil {
				t.Fatalf("two %q spans", name)
			}
			parent = s
		}
	}
	if parent == nil {
		t.Fatalf("no %q span among %v", name, spanNames(ended))
	}
	var children []sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			children = append(children, s)
		}
	}
	return parent, children
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// retriedStages are the children of a record delivered by its second attempt.
var retriedStages = []string{"append",
	"drain", "doSend", "completedSend", "completedReceive",
	"drain", "doSend", "completedSend", "completedReceive",
	"callback"}

// checkStages asserts the children are the stages want, in order, tiling the parent.
func checkStages(t *testing.T, parent sdktrace.ReadOnlySpan, children []sdktrace.ReadOnlySpan, want []string) {
	t.Helper()
	if got := spanNames(children); !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	checkTiling(t, parent, children)
}

// checkTiling asserts the children cover the parent exactly: the first starts with it, each
// starts where the previous ended, the last ends with it; so their durations add up.
func checkTiling(t *testing.T, parent sdktrace.ReadOnlySpan, children []sdktrace.ReadOnlySpan) {
	t.Helper()
	at := parent.StartTime()
	var sum time.Duration
	for _, c := range children {
		if !c.StartTime().Equal(at) {
			t.Fatalf("%s starts at %v, previous stage ended at %v", c.Name(), c.StartTime(), at)
		}
		if c.EndTime().Before(c.StartTime()) {
			t.Fatalf("%s ends before it starts", c.Name())
		}
		if c.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Fatalf("%s is in another trace", c.Name())
		}
		sum += c.EndTime().Sub(c.StartTime())
		at = c.EndTime()
	}
	if !at.Equal(parent.EndTime()) {
		t.Fatalf("stages end at %v, the send span at %v", at, parent.EndTime())
	}
	if total := parent.EndTime().Sub(parent.StartTime()); sum != total {
		t.Fatalf("stages add up to %v, the send span lasts %v", sum, total)
	}
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string, want any) {
	t.Helper()
	v, ok := attrOf(s, key)
	if !ok {
		t.Fatalf("%s has no %s; attributes %v", s.Name(), key, s.Attributes())
	}
	if got := v.AsInterface(); got != want {
		t.Fatalf("%s: %s = %v (%T), want %v (%T)", s.Name(), key, got, got, want, want)
	}
}

func TestTraceSuccess(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testTraceSuccess(t, newHarness(t, sdktrace.AlwaysSample())) })
	t.Run("via tracer", func(t *testing.T) {
		testTraceSuccess(t, newHarnessVia(t, sdktrace.AlwaysSample(), ObserverConfig{}, true))
	})
}

func testTraceSuccess(t *testing.T, h *harness) {
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny,
		Key: []byte("k"), Value: []byte("v"), Headers: []producer.Header{{Key: "app", Value: []byte("x")}}})
	if o.err != nil {
		t.Fatal(o.err)
	}

	parent, children := recordTraceOf(t, h, "send orders")
	if got, want := spanNames(children), []string{"append", "drain", "doSend", "completedSend", "completedReceive", "callback"}; !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	checkTiling(t, parent, children)
	if parent.SpanKind() != trace.SpanKindProducer || parent.Parent().IsValid() {
		t.Fatalf("send span kind %v, parent %v: want a PRODUCER root", parent.SpanKind(), parent.Parent())
	}
	wantAttr(t, parent, AttrMessagingSystem, "kafka")
	wantAttr(t, parent, AttrMessagingOperationName, "send")
	wantAttr(t, parent, AttrMessagingDestinationName, "orders")
	wantAttr(t, parent, AttrMessagingPartitionID, "0")
	wantAttr(t, parent, AttrMessagingKafkaOffset, o.md.Offset)
	wantAttr(t, parent, AttrMessagingClientID, "kafkatrail-test")
	wantAttr(t, parent, AttrMessagingKafkaKey, "k")
	wantAttr(t, parent, AttrMessagingKafkaClusterID, "kfake")
	host, port, _ := net.SplitHostPort(c.ListenAddrs()[0]) // kfake advertises its listener
	wantAttr(t, parent, AttrServerAddress, host)
	wantAttr(t, parent, AttrServerPort, int64(mustAtoi(t, port)))
	if parent.Status().Code == codes.Error {
		t.Fatalf("send span status %v", parent.Status())
	}
	for _, s := range children[1:5] {
		wantAttr(t, s, AttrAttempt, int64(1))
	}
	// The request's attributes are on its doSend only.
	doSend := children[2]
	wantAttr(t, doSend, AttrNodeID, int64(0))
	wantAttr(t, doSend, AttrMessagingBatchCount, int64(1))
	for _, k := range []string{AttrCorrelationID, AttrAPIVersion, AttrBatchBytes} {
		if _, ok := attrOf(doSend, k); !ok {
			t.Fatalf("%s has no %s", doSend.Name(), k)
		}
	}
	for _, s := range children[3:5] {
		if n := len(s.Attributes()); n != 1 {
			t.Fatalf("%s has %d attributes %v, want only %s", s.Name(), n, s.Attributes(), AttrAttempt)
		}
	}

	// The record carries the send span's context, so a consumer continues the trace; the
	// caller's own header is kept.
	rec := consumeOne(t, c.ListenAddrs(), "orders")
	var tp, app string
	for _, hd := range rec.Headers {
		switch hd.Key {
		case DefaultTraceHeader:
			tp = string(hd.Value)
		case "app":
			app = string(hd.Value)
		}
	}
	sc := parent.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; tp != want || app != "x" {
		t.Fatalf("headers %v: want traceparent %s and app=x", rec.Headers, want)
	}
}

func TestTraceRetryShowsEveryAttempt(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	var faults atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		faults.Add(1)
		return produceError(r, kerr.NotLeaderForPartition.Code), nil, true // once: not kept
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")})
	if o.err != nil || faults.Load() != 1 {
		t.Fatalf("callback error %v after %d injected faults, want success after 1", o.err, faults.Load())
	}

	parent, children := recordTraceOf(t, h, "send orders")
	checkStages(t, parent, children, retriedStages)
	for i, s := range children[1:9] {
		wantAttr(t, s, AttrAttempt, int64(i/4+1))
	}
	wantAttr(t, children[4], AttrErrorType, "NOT_LEADER_OR_FOLLOWER")
	if children[4].Status().Code != codes.Error {
		t.Fatalf("failed attempt's completedReceive has status %v", children[4].Status())
	}
	if _, ok := attrOf(children[8], AttrErrorType); ok {
		t.Fatal("successful attempt's completedReceive has error.type")
	}
	c1, _ := attrOf(children[2], AttrCorrelationID)
	c2, _ := attrOf(children[6], AttrCorrelationID)
	if c1.AsInt64() == c2.AsInt64() {
		t.Fatalf("both attempts have correlation id %d: want one request per attempt", c1.AsInt64())
	}
	if _, ok := attrOf(parent, AttrErrorType); ok || parent.Status().Code == codes.Error {
		t.Fatal("a record delivered on retry has an error on its send span")
	}
}

func TestTraceFailureHasErrorType(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
	})
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")})
	if !errors.Is(o.err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("callback error %v, want TOPIC_AUTHORIZATION_FAILED", o.err)
	}

	parent, children := recordTraceOf(t, h, "send orders")
	if got, want := spanNames(children), []string{"append", "drain", "doSend", "completedSend", "completedReceive", "callback"}; !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	checkTiling(t, parent, children)
	wantAttr(t, parent, AttrErrorType, "TOPIC_AUTHORIZATION_FAILED")
	wantAttr(t, children[4], AttrErrorType, "TOPIC_AUTHORIZATION_FAILED")
	// The status has the message; error.type has the name, which the description does not repeat.
	if st := parent.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "Not authorized") ||
		strings.Contains(st.Description, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("send span status %v, want Error with the broker's message and without the error's name", st)
	}
	if _, ok := attrOf(parent, AttrMessagingKafkaOffset); ok {
		t.Fatal("a failed record has an offset")
	}
}

func TestTraceFailureInSendHasAppendAndCallback(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, func(cfg *producer.Config) { cfg.MaxRequestSize = 1000 })
	o := newOutcome()
	err := p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: make([]byte, 2000)}, o.callback)
	o.wait(t)
	if err == nil {
		t.Fatal("Send accepted a record larger than max.request.size")
	}
	parent, children := recordTraceOf(t, h, "send orders")
	if got, want := spanNames(children), []string{"append", "callback"}; !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	checkTiling(t, parent, children)
	wantAttr(t, parent, AttrErrorType, ErrorTypeRecordTooLarge)
}

// TestTraceLineContextIsTheCreationContext pins what the agent does with a line that carried
// its own trace context: that context is the record's creation context and stays in its
// header unchanged, sampled or not, so a consumer sees the same parent either way; the send
// span of a sampled record is the line span's child, of kind CLIENT (only the transport), and
// links to it, as the conventions' "Producer spans" say.
func TestTraceLineContextIsTheCreationContext(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		testLineContext(t, newHarness(t, sdktrace.ParentBased(sdktrace.NeverSample())))
	})
	t.Run("via tracer", func(t *testing.T) {
		testLineContext(t, newHarnessVia(t, sdktrace.ParentBased(sdktrace.NeverSample()), ObserverConfig{}, true))
	})
}

func testLineContext(t *testing.T, h *harness) {
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	send := func(line string) {
		t.Helper()
		// As the agent sends a line carrying a traceparent: the context in ctx and in the header.
		ctx := ContextWithLineTrace(context.Background(), []byte(line))
		if o := sendOne(t, p, ctx, &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v"),
			Headers: []producer.Header{{Key: DefaultTraceHeader, Value: []byte(line)}}}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	const sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const unsampled = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-00"
	send(sampled)
	send(unsampled)

	parent, children := recordTraceOf(t, h, "send orders") // exactly one: the unsampled line has none
	if got := parent.Parent(); got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		got.SpanID().String() != "00f067aa0ba902b7" || !got.IsRemote() {
		t.Fatalf("send span's parent %v, want the line's span", got)
	}
	if parent.SpanKind() != trace.SpanKindClient {
		t.Fatalf("send span kind %v, want CLIENT: its context is not the record's creation context", parent.SpanKind())
	}
	if l := parent.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" ||
		l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("send span links %+v, want one to the line's span", l)
	}
	if len(children) != 6 {
		t.Fatalf("stages %v, want six", spanNames(children))
	}

	// Both records carry their line's traceparent, untouched and not duplicated.
	recs := consumeN(t, c.ListenAddrs(), "orders", 2)
	for i, want := range []string{sampled, unsampled} {
		var got []string
		for _, hd := range recs[i].Headers {
			if hd.Key == DefaultTraceHeader {
				got = append(got, string(hd.Value))
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("record %d: traceparent headers %q, want exactly the line's %s", i, got, want)
		}
	}
}

func TestUnsampledRecordIsUntouched(t *testing.T) {
	for name, sampler := range map[string]sdktrace.Sampler{
		"tracing off": nil,
		"never":       sdktrace.NeverSample(),
		"ratio 0":     sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, sampler)
			r := &producer.Record{Topic: "orders", Headers: []producer.Header{{Key: "a", Value: []byte("b")}}}
			ctx := context.Background()
			allocs := testing.AllocsPerRun(1000, func() {
				tr, headers := h.obs.StartSend(ctx, r, time.Time{})
				if tr != nil || len(headers) != 1 || &headers[0] != &r.Headers[0] {
					t.Fatal("an unsampled record was traced or its headers replaced")
				}
			})
			if allocs != 0 {
				t.Fatalf("StartSend for an unsampled record allocates %v times, want 0", allocs)
			}
		})
	}
}

func TestConnectionSpans(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	c := newKfake(t, "orders")
	p := newProducer(t, c.ListenAddrs(), h.obs, nil)
	if o := sendOne(t, p, context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}); o.err != nil {
		t.Fatal(o.err)
	}
	var connects, metadata int
	for _, s := range h.spans.Ended() {
		switch s.Name() {
		case SpanConnect:
			connects++
			if s.SpanKind() != trace.SpanKindClient || s.Status().Code == codes.Error {
				t.Fatalf("connect span kind %v status %v", s.SpanKind(), s.Status())
			}
			var names []string
			for _, ch := range h.spans.Ended() {
				if ch.Parent().SpanID() == s.SpanContext().SpanID() {
					names = append(names, ch.Name())
				}
			}
			if !slices.Equal(names, []string{SpanDial, SpanAPIVersions}) {
				t.Fatalf("connect children %v, want dial and ApiVersions", names)
			}
		case SpanMetadata:
			metadata++
		}
	}
	// The bootstrap connection, then the broker's own (node 0, a new id for the same address).
	if connects < 1 || metadata < 1 {
		t.Fatalf("%d connect and %d Metadata spans, want at least one of each", connects, metadata)
	}
}

func TestFailedConnectionSpan(t *testing.T) {
	h := newHarness(t, sdktrace.AlwaysSample())
	addr := closedPort(t)
	p := newProducer(t, []string{addr}, h.obs, func(cfg *producer.Config) { cfg.MaxBlockMs = 300 })
	o := newOutcome()
	_ = p.Send(context.Background(), &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}, o.callback)
	o.wait(t)
	for _, s := range h.spans.Ended() {
		if s.Name() != SpanConnect {
			continue
		}
		if s.Status().Code != codes.Error {
			t.Fatalf("failed connect has status %v", s.Status())
		}
		wantAttr(t, s, AttrErrorType, ErrorTypeConnection)
		return
	}
	t.Fatalf("no connect span among %v", spanNames(h.spans.Ended()))
}

// consumeOne reads the first record of topic.
func consumeOne(t *testing.T, bootstrap []string, topic string) *kgo.Record {
	t.Helper()
	return consumeN(t, bootstrap, topic, 1)[0]
}

// consumeN reads topic's first n records, in order (the test topics have one partition).
func consumeN(t *testing.T, bootstrap []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records consumed within 20s", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out[:n]
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// uncomparableCtx is a context whose dynamic type cannot be compared with ==.
type uncomparableCtx struct {
	context.Context
	_ []int
}

// TestStartSendContextCache: StartSend remembers the last context that held no span, and
// that memory never hides a parent: a context carrying a sampled line trace is traced right
// after a spanless one was remembered, and contexts of an uncomparable type work too.
func TestStartSendContextCache(t *testing.T) {
	h := newHarness(t, newParentRatio(0)) // roots are never traced: only a sampled parent is
	rec := &producer.Record{Topic: "orders", Partition: producer.PartitionAny, Value: []byte("v")}
	const line = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	bg := context.Background()
	for i, tc := range []struct {
		name  string
		ctx   context.Context
		trace bool
	}{
		{"spanless", bg, false},
		{"spanless again (remembered)", bg, false},
		{"a sampled line trace on top of it", ContextWithLineTrace(bg, []byte(line)), true},
		{"spanless, uncomparable", uncomparableCtx{Context: bg}, false},
		{"spanless, uncomparable, again", uncomparableCtx{Context: bg}, false},
		{"a sampled line trace, uncomparable", uncomparableCtx{Context: ContextWithLineTrace(bg, []byte(line))}, true},
		{"spanless after all that", bg, false},
	} {
		tr, _ := h.obs.StartSend(tc.ctx, rec, time.Now())
		if got := tr != nil; got != tc.trace {
			t.Fatalf("%d (%s): traced %v, want %v", i, tc.name, got, tc.trace)
		}
	}
}
