package network

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// readyFakeNode bootstraps a client at b, fetches metadata for "events" and waits until node 1
// (the fake broker under its own id) is ready.
func readyFakeNode(t *testing.T, b *fakeBroker, cfg Config) (*NetworkClient, metadata.Node) {
	t.Helper()
	c, meta := newTestClient(t, []string{b.addr()}, cfg)
	meta.Add("events", time.Now())
	cl := awaitMetadata(t, c, meta)
	node, ok := cl.Node(1)
	if !ok {
		t.Fatalf("fake broker missing from metadata: %v", cl.Nodes())
	}
	awaitReady(t, c, node)
	return c, node
}

// sendAndWait sends one produce request to node and polls until its callback ran.
func sendAndWait(t *testing.T, c *NetworkClient, node metadata.Node) *inflight.Response {
	t.Helper()
	return sendAndWaitBody(t, c, node, produceRequest("events", 0, []byte("x"), -1))
}

// sendAndWaitBody sends body to node and polls until its callback ran.
func sendAndWaitBody(t *testing.T, c *NetworkClient, node metadata.Node, body kmsg.Request) *inflight.Response {
	t.Helper()
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: node.ID, Body: body, ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	pollUntil(t, c, 5*time.Second, "response", func() bool { return got != nil })
	return got
}

func TestClientCorrelationIDMismatchClosesConnection(t *testing.T) {
	b := startFakeBroker(t, 0, func(w io.Writer, req fakeRequest) {
		writeResponse(w, req, req.correlation+1, req.body.ResponseKind())
	})
	c, node := readyFakeNode(t, b, Config{})
	got := sendAndWait(t, c, node)
	var mismatch *CorrelationIDMismatchError
	if !errors.As(got.Err, &mismatch) || !got.Disconnected || !errors.Is(got.Err, ErrDisconnected) {
		t.Fatalf("response = %+v, want a correlation id mismatch", got)
	}
	if mismatch.Expected != got.Request.CorrelationID || mismatch.Got != mismatch.Expected+1 {
		t.Fatalf("mismatch = %+v", mismatch)
	}
	if c.ConnectionState(node.ID) != Disconnected || c.selector.Has(node.ID) {
		t.Fatal("connection not closed after a correlation id mismatch")
	}
}

func TestClientMaxReceiveBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int32
	}{
		{"too large", 1 << 30},
		{"negative", -5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFakeBroker(t, 0, func(w io.Writer, req fakeRequest) {
				w.Write(binary.BigEndian.AppendUint32(nil, uint32(tc.size))) //nolint:errcheck
			})
			c, node := readyFakeNode(t, b, Config{MaxReceiveBytes: 4096})
			got := sendAndWait(t, c, node)
			var sizeErr *FrameSizeError
			if !errors.As(got.Err, &sizeErr) || !got.Disconnected {
				t.Fatalf("response = %+v, want a frame size error", got)
			}
			if sizeErr.Size != tc.size || sizeErr.Max != 4096 {
				t.Fatalf("size error = %+v", sizeErr)
			}
		})
	}
}

func TestClientAPIVersionsDowngrade(t *testing.T) {
	b := startFakeBroker(t, 2, func(w io.Writer, req fakeRequest) {
		writeResponse(w, req, req.correlation, req.body.ResponseKind())
	})
	c, node := readyFakeNode(t, b, Config{})
	var versions []int16
	for _, r := range b.seen() {
		if r.key == kmsg.ApiVersions.Int16() {
			versions = append(versions, r.version)
		}
	}
	max := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	if len(versions) < 2 || versions[0] != max || versions[1] != 2 {
		t.Fatalf("ApiVersions versions sent = %v, want v%d then v2", versions, max)
	}
	if c.ConnectionState(node.ID) != Ready {
		t.Fatal("node not READY after the downgraded ApiVersions")
	}
	// The produce version is negotiated down to the broker's max (9) from kmsg's.
	got := sendAndWait(t, c, node)
	if got.Err != nil || got.Request.APIVersion != 9 {
		t.Fatalf("produce v%d: %v", got.Request.APIVersion, got.Err)
	}
}

func TestClientUnsupportedVersion(t *testing.T) {
	b := startFakeBroker(t, 0, nil)
	c, node := readyFakeNode(t, b, Config{})
	// The fake broker supports no DescribeConfigs at all.
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: node.ID, Body: kmsg.NewPtrDescribeConfigsRequest(), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	c.Poll(0, time.Now())
	var uv *UnsupportedVersionError
	if got == nil || !errors.As(got.Err, &uv) || uv.BrokerMax != -1 {
		t.Fatalf("response = %+v, want an unsupported version error", got)
	}
	if c.InFlightRequestCount() != 0 {
		t.Fatal("an unsent request is in flight")
	}
	// Produce below v3 is refused even when the broker would take it.
	c.cfg.MaxVersions = map[int16]int16{0: 2}
	got = nil
	c.Send(&ClientRequest{Destination: node.ID, Body: produceRequest("events", 0, nil, -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	c.Poll(0, time.Now())
	if got == nil || !errors.As(got.Err, &uv) || uv.ClientMin != 3 {
		t.Fatalf("response = %+v, want produce < v3 refused", got)
	}
}

func TestClientSendToUnreadyNode(t *testing.T) {
	b := startFakeBroker(t, 0, nil)
	c, _ := newTestClient(t, []string{b.addr()}, Config{})
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: 42, Body: produceRequest("events", 0, nil, -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	c.Poll(time.Second, time.Now())
	if got == nil || !errors.Is(got.Err, ErrNodeNotReady) {
		t.Fatalf("response = %+v, want ErrNodeNotReady", got)
	}
}

func TestClientCloseFailsInFlight(t *testing.T) {
	hold := make(chan struct{})
	b := startFakeBroker(t, 0, func(io.Writer, fakeRequest) { <-hold })
	defer close(hold)
	c, node := readyFakeNode(t, b, Config{})
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: node.ID, Body: produceRequest("events", 0, nil, -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	pollUntil(t, c, 5*time.Second, "send completed", func() bool { return c.IsReady(node.ID, time.Now()) })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got == nil || !errors.Is(got.Err, ErrClientClosed) {
		t.Fatalf("response = %+v, want ErrClientClosed", got)
	}
}

// TestClientResponseThenCloseInOnePoll pins that a response read just before the broker closed
// the connection is delivered, not failed as disconnected, when both land in the same Poll.
func TestClientResponseThenCloseInOnePoll(t *testing.T) {
	b := startFakeBroker(t, 0, func(w io.Writer, req fakeRequest) {
		writeResponse(w, req, req.correlation, req.body.ResponseKind())
		w.(io.Closer).Close()
	})
	c, node := readyFakeNode(t, b, Config{})
	var got *inflight.Response
	c.Send(&ClientRequest{Destination: node.ID, Body: produceRequest("events", 0, nil, -1), ExpectResponse: true,
		Callback: func(r *inflight.Response) { got = r }}, time.Now())
	time.Sleep(200 * time.Millisecond) // let the response and the close both queue up
	c.Poll(0, time.Now())
	pollUntil(t, c, 5*time.Second, "response", func() bool { return got != nil })
	if got.Err != nil || got.Disconnected || got.Body == nil {
		t.Fatalf("response = %+v, want the broker's answer", got)
	}
	pollUntil(t, c, 5*time.Second, "disconnect", func() bool { return c.ConnectionFailed(node.ID) })
}
