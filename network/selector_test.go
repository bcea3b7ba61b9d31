package network

import (
	"context"
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

func TestSelectorSendReceive(t *testing.T) {
	addr := echoServer(t)
	s := newTestSelector(t, Config{})
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

func TestSelectorDropsEventsOfClosedConnection(t *testing.T) {
	addr := echoServer(t)
	s := newTestSelector(t, Config{})
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	pollSelector(t, s, "connected", func(r PollResult) bool { return len(r.Connected) == 1 })
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
