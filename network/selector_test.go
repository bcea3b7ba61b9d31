package network

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/inflight"
)

// echoServer accepts connections on 127.0.0.1 and echoes every frame back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn) //nolint:errcheck
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func newTestSelector(t *testing.T, cfg Config) *Selector {
	t.Helper()
	s := NewSelector(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.CloseAll(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// connectedSelector is a test selector connected to addr as node 1.
func connectedSelector(t *testing.T, cfg Config, addr string) *Selector {
	t.Helper()
	s := newTestSelector(t, cfg)
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	pollSelector(t, s, "connected", func(r PollResult) bool { return len(r.Connected) == 1 })
	return s
}

// pollSelector polls until cond holds on the accumulated results.
func pollSelector(t *testing.T, s *Selector, what string, cond func(PollResult) bool) PollResult {
	t.Helper()
	var all PollResult
	deadline := time.Now().Add(5 * time.Second)
	for !cond(all) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		res := s.Poll(20 * time.Millisecond)
		all.Connected = append(all.Connected, res.Connected...)
		all.CompletedSends = append(all.CompletedSends, res.CompletedSends...)
		all.CompletedReceives = append(all.CompletedReceives, res.CompletedReceives...)
		all.Disconnected = append(all.Disconnected, res.Disconnected...)
	}
	return all
}

func frameOf(payload string) []byte {
	return append([]byte{0, 0, 0, byte(len(payload))}, payload...)
}

// wrappedConn hides the *net.TCPConn under a net.Conn: the selector cannot write to its socket
// itself, so every frame goes through the connection's writer goroutine (as with TLS).
type wrappedConn struct{ net.Conn }

func writerOnlyDialer(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return wrappedConn{conn}, nil
}

func TestSelectorSendReceive(t *testing.T) {
	addr := echoServer(t)
	s := newTestSelector(t, Config{Dialer: writerOnlyDialer})
	if err := s.Send(1, frameOf("x")); err == nil {
		t.Fatal("send before connecting accepted")
	}
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(1, addr); err == nil {
		t.Fatal("second connect to the same node accepted")
	}
	pollSelector(t, s, "connected", func(r PollResult) bool { return len(r.Connected) == 1 })
	if !s.IsChannelReady(1) {
		t.Fatal("channel not ready after connecting")
	}
	if err := s.Send(1, frameOf("hello")); err != nil {
		t.Fatal(err)
	}
	if s.IsChannelReady(1) {
		t.Fatal("channel ready while a send is in progress")
	}
	if err := s.Send(1, frameOf("again")); err == nil {
		t.Fatal("second send while the first is in progress accepted")
	}
	res := pollSelector(t, s, "echo", func(r PollResult) bool { return len(r.CompletedSends) == 1 && len(r.CompletedReceives) == 1 })
	if got := string(res.CompletedReceives[0].Payload); got != "hello" || res.CompletedReceives[0].Node != 1 {
		t.Fatalf("received %q from node %d", got, res.CompletedReceives[0].Node)
	}
}

// TestSelectorWritesItselfWhenTheSocketTakesTheFrame: on a plain TCP connection Send writes
// the frame to the socket itself (Java's Selector.write within poll); the next Poll reports
// it at once, whatever its timeout, and the channel is ready for the next frame meanwhile.
func TestSelectorWritesItselfWhenTheSocketTakesTheFrame(t *testing.T) {
	addr := echoServer(t)
	s := connectedSelector(t, Config{}, addr)
	before := time.Now()
	if err := s.Send(1, frameOf("hello")); err != nil {
		t.Fatal(err)
	}
	if !s.IsChannelReady(1) {
		t.Fatal("channel not ready after its frame was written whole")
	}
	res := s.Poll(time.Hour)
	if len(res.CompletedSends) != 1 || res.CompletedSends[0].Node != 1 {
		t.Fatalf("the poll after the write reported %+v", res)
	}
	if cs := res.CompletedSends[0]; cs.Started.Before(before) || cs.Written.Before(cs.Started) {
		t.Fatalf("send stamped %v..%v, Send called at %v", cs.Started, cs.Written, before)
	}
	if err := s.Send(1, frameOf("again")); err != nil {
		t.Fatal(err)
	}
	// The first poll may have brought the first echo already.
	early := res.CompletedReceives
	res = pollSelector(t, s, "both echoes", func(r PollResult) bool {
		return len(r.CompletedSends) == 1 && len(early)+len(r.CompletedReceives) == 2
	})
	received := append(early, res.CompletedReceives...)
	if a, b := string(received[0].Payload), string(received[1].Payload); a != "hello" || b != "again" {
		t.Fatalf("received %q, %q", a, b)
	}
}

// TestSelectorHandsTheRestOfAShortWriteToTheWriter: a frame larger than the socket takes
// without waiting is written in part by Send and the rest by the writer goroutine; the peer
// gets every byte in order, and the channel takes no other frame until the writer is done.
func TestSelectorHandsTheRestOfAShortWriteToTheWriter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 16 << 20 // far more than a loopback socket's buffers
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+size), size)[:4+size]
	for i := 4; i < len(frame); i++ {
		frame[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	release := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer conn.Close()
		<-release // read nothing until the selector's own write came back short
		b, _ := io.ReadAll(io.LimitReader(conn, int64(len(frame))))
		got <- b
	}()
	s := connectedSelector(t, Config{MaxReceiveBytes: size + 1}, ln.Addr().String())
	if err := s.Send(1, frame); err != nil {
		t.Fatal(err)
	}
	if s.IsChannelReady(1) || len(s.written) != 0 {
		t.Fatal("a frame the socket could not take whole was reported written")
	}
	if err := s.Send(1, frameOf("x")); err == nil {
		t.Fatal("second send accepted while the writer finishes the first")
	}
	close(release)
	pollSelector(t, s, "the writer's report", func(r PollResult) bool { return len(r.CompletedSends) == 1 })
	b := <-got
	if len(b) != len(frame) {
		t.Fatalf("peer read %d bytes, want %d", len(b), len(frame))
	}
	for i := range b {
		if b[i] != frame[i] {
			t.Fatalf("byte %d: got %d, want %d", i, b[i], frame[i])
		}
	}
}

// TestSelectorDropsDirectWritesOfAClosedConnection: a send written by Send on a connection
// closed before the next Poll is not reported, as the events of a closed connection are not.
func TestSelectorDropsDirectWritesOfAClosedConnection(t *testing.T) {
	addr := echoServer(t)
	s := connectedSelector(t, Config{}, addr)
	if err := s.Send(1, frameOf("hello")); err != nil {
		t.Fatal(err)
	}
	s.Close(1)
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	if res := s.Poll(0); len(res.CompletedSends) != 0 {
		t.Fatalf("send of the closed connection reported: %+v", res.CompletedSends)
	}
}

func TestSelectorDropsEventsOfClosedConnection(t *testing.T) {
	addr := echoServer(t)
	s := connectedSelector(t, Config{}, addr)
	old := s.channels[1].ch
	s.Close(1)
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	// An event the old connection queued before it noticed the close must not count for the new
	// one.
	res := PollResult{}
	s.handle(event{kind: eventDisconnected, ch: old, err: errors.New("late")}, &res)
	s.handle(event{kind: eventReceive, ch: old, payload: []byte("late")}, &res)
	if len(res.Disconnected) != 0 || len(res.CompletedReceives) != 0 || s.channels[1] == nil {
		t.Fatalf("stale events applied: %+v", res)
	}
	pollSelector(t, s, "reconnected", func(r PollResult) bool { return len(r.Connected) == 1 })
}

func TestSelectorRemoteClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
		}
	}()
	s := newTestSelector(t, Config{})
	if err := s.Connect(1, ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	res := pollSelector(t, s, "disconnect", func(r PollResult) bool { return len(r.Disconnected) == 1 })
	if !errors.Is(res.Disconnected[0].Err, io.EOF) || s.Has(1) {
		t.Fatalf("disconnection %+v", res.Disconnected)
	}
}

func TestSelectorWakeup(t *testing.T) {
	s := newTestSelector(t, Config{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.Wakeup()
		s.Wakeup() // never blocks, even with a wakeup pending
	}()
	start := time.Now()
	s.Poll(10 * time.Second)
	if time.Since(start) > 5*time.Second {
		t.Fatal("Wakeup did not interrupt Poll")
	}
}

// TestSelectorWakeIn: a WakeIn while Poll blocks cuts its wait to the time asked for (and a
// later time leaves a shorter wait alone); one before Poll shortens the next Poll; Poll returns
// no sooner than the time asked for.
func TestSelectorWakeIn(t *testing.T) {
	s := newTestSelector(t, Config{})
	// polled is how long after start a Poll(timeout) begun now returned; during runs once it
	// waits.
	polled := func(start time.Time, timeout time.Duration, during func()) time.Duration {
		t.Helper()
		done := make(chan time.Duration, 1)
		go func() {
			s.Poll(timeout)
			done <- time.Since(start)
		}()
		if during != nil {
			waitFor(t, func() bool { s.waitMu.Lock(); defer s.waitMu.Unlock(); return s.waiting })
			during()
		}
		select {
		case d := <-done:
			return d
		case <-time.After(30 * time.Second):
			t.Fatal("Poll did not return")
			return 0
		}
	}
	if d := polled(time.Now(), time.Hour, func() { s.WakeIn(time.Hour + time.Minute); s.WakeIn(30 * time.Millisecond) }); d < 30*time.Millisecond || d > 20*time.Second {
		t.Fatalf("WakeIn(30ms) during Poll(1h): returned after %v", d)
	}
	before := time.Now()
	s.WakeIn(40 * time.Millisecond)
	if d := polled(before, time.Hour, nil); d < 40*time.Millisecond || d > 20*time.Second {
		t.Fatalf("WakeIn(40ms) before Poll(1h): returned after %v", d)
	}
	// Taken by that Poll: the next waits its own timeout.
	if d := polled(time.Now(), 60*time.Millisecond, func() { s.WakeIn(time.Hour) }); d < 60*time.Millisecond || d > 20*time.Second {
		t.Fatalf("Poll(60ms) with WakeIn(1h): returned after %v", d)
	}
}

func TestSelectorIdleExpiry(t *testing.T) {
	addr := echoServer(t)
	s := newTestSelector(t, Config{ConnectionsMaxIdle: time.Minute})
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	for _, id := range []int32{1, 2} {
		if err := s.Connect(id, addr); err != nil {
			t.Fatal(err)
		}
	}
	pollSelector(t, s, "connected", func(r PollResult) bool { return len(r.Connected) == 2 })
	now = now.Add(30 * time.Second)
	if err := s.Send(2, frameOf("keepalive")); err != nil {
		t.Fatal(err)
	}
	pollSelector(t, s, "echo", func(r PollResult) bool { return len(r.CompletedReceives) == 1 })
	now = now.Add(31 * time.Second) // node 1 idle 61s, node 2 31s
	res := s.Poll(0)
	if len(res.Disconnected) != 1 || res.Disconnected[0].Node != 1 || !errors.Is(res.Disconnected[0].Err, ErrConnectionIdle) {
		t.Fatalf("disconnected = %+v, want node 1 idle", res.Disconnected)
	}
	if !s.Has(2) || s.Has(1) {
		t.Fatal("wrong connection closed")
	}
	if res := s.Poll(0); len(res.Disconnected) != 0 {
		t.Fatalf("node 2 closed while active: %+v", res.Disconnected)
	}
}

func TestClientIdleExpiryDisconnects(t *testing.T) {
	b := startFakeBroker(t, 0, nil)
	c, node := readyFakeNode(t, b, Config{ConnectionsMaxIdle: time.Minute})
	now := time.Now()
	c.selector.now = func() time.Time { return now.Add(2 * time.Minute) }
	// One idle connection closes per Poll: the bootstrap one (-1) first, then node 1.
	c.Poll(0, now)
	c.Poll(0, now)
	if c.ConnectionState(node.ID) != Disconnected || c.ConnectionState(-1) != Disconnected {
		t.Fatalf("state %v after idle expiry", c.ConnectionState(node.ID))
	}
}

// TestLeastLoadedNode drives connection states and in-flight counts directly.
func TestLeastLoadedNode(t *testing.T) {
	now := time.Unix(1000, 0)
	type nodeSetup struct {
		state    ConnectionState
		inFlight int
		blocked  bool // disconnected inside the backoff
	}
	tests := []struct {
		name  string
		nodes map[int32]nodeSetup
		want  int32 // -1: none
	}{
		{"idle ready node wins", map[int32]nodeSetup{1: {state: Ready, inFlight: 2}, 2: {state: Ready}, 3: {state: Connecting}}, 2},
		{"fewest in flight", map[int32]nodeSetup{1: {state: Ready, inFlight: 3}, 2: {state: Ready, inFlight: 1}, 3: {state: Ready, inFlight: 2}}, 2},
		{"connecting before connectable", map[int32]nodeSetup{1: {state: Disconnected, blocked: true}, 2: {state: Connecting}, 3: {}}, 2},
		{"connectable, skipping backoff", map[int32]nodeSetup{1: {state: Disconnected, blocked: true}, 2: {}, 3: {state: Disconnected, blocked: true}}, 2},
		{"all in backoff", map[int32]nodeSetup{1: {blocked: true}, 2: {blocked: true}, 3: {blocked: true}}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := threeNodeMetadata(t, now)
			for seed := range uint64(10) { // the random start must not change the choice
				c := newClient(Config{}, meta, rand.New(rand.NewPCG(seed, seed)))
				for id, n := range tt.nodes {
					switch {
					case n.blocked:
						c.states.Connecting(id, now, "127.0.0.1:1")
						c.states.Disconnected(id, now)
					case n.state == Connecting:
						c.states.Connecting(id, now, "127.0.0.1:1")
					case n.state == Ready:
						c.states.Connecting(id, now, "127.0.0.1:1")
						c.states.Ready(id)
						c.selector.channels[id] = &selectorConn{ch: newChannel(id, "", c.selector.cfg, nil), connected: true}
						for range n.inFlight {
							c.inFlight.Add(&inflight.Request{Destination: id, SendComplete: true})
						}
					}
				}
				got, ok := c.LeastLoadedNode(now)
				if (tt.want == -1) == ok || (ok && got.ID != tt.want) {
					t.Fatalf("seed %d: LeastLoadedNode = %v, %v; want %d", seed, got.ID, ok, tt.want)
				}
			}
		})
	}
}

// waitFor waits up to 10 s for cond, checking every millisecond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
