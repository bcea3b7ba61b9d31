package network

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrConnectionIdle is the cause of a disconnection the selector made because the connection was
// idle longer than connections.max.idle.ms.
var ErrConnectionIdle = errors.New("network: connection idle longer than connections.max.idle.ms")

// eventQueueSize bounds the selector's events channel. Each connection has at most one send in
// progress plus its connect and disconnect events, and receives are bounded by the requests in
// flight, so a few events per connection are pending at most; 1024 leaves room for hundreds of
// connections before a reader ever blocks.
const eventQueueSize = 1024

// Receive is one response frame read from a node: the payload after the size prefix.
type Receive struct {
	Node    int32
	Payload []byte
	// Received is when the frame's last byte was read, by the connection's reader goroutine
	// (Config.Clock), however long before the Poll that reports it.
	Received time.Time
}

// CompletedSend is a request frame fully written to a node.
type CompletedSend struct {
	Node int32
	// Started and Written are when the write of the frame began and when it returned, on the
	// connection's writer goroutine (Config.Clock), however long before the Poll that reports it.
	Started, Written time.Time
}

// directSend is a send the sender goroutine wrote itself (Selector.Send), on the connection ch.
type directSend struct {
	ch *channel
	CompletedSend
}

// Disconnection is a connection the selector lost, with its cause.
type Disconnection struct {
	Node int32
	Err  error
}

// PollResult is what one Selector.Poll observed, by kind, each in arrival order.
type PollResult struct {
	Connected         []int32
	CompletedSends    []CompletedSend
	CompletedReceives []Receive
	Disconnected      []Disconnection
	// Setups are the connection attempts that ended, established or failed (telemetry).
	Setups []ConnectionSetup
}

// selectorConn is the selector's record of one channel.
type selectorConn struct {
	ch             *channel
	connected      bool
	sendInProgress bool
	lastActive     time.Time
}

// Selector multiplexes the connections, after the Java Selector: Connect, Send and Close act on a
// node's channel; Poll waits for their goroutines' events.
//
// Selector is not safe for concurrent use: the sender goroutine owns it. Only Wakeup may be called
// from other goroutines.
//
// Why the bounded events channel cannot deadlock: the channels' goroutines are the only senders
// and block only on it (or give up once abandoned); the sender goroutine is the only receiver and
// never waits for a channel goroutine while holding anything they need: Send offers to an empty
// one-slot buffer, Close only closes. Poll drains everything queued each call, so a reader blocked
// on a full queue is released by the next Poll.
type Selector struct {
	cfg *Config
	// written holds the sends the sender goroutine wrote to their sockets itself since the
	// last Poll, which reports them first.
	written  []directSend
	events   chan event
	wakeup   chan struct{}
	channels map[int32]*selectorConn
	wg       sync.WaitGroup
	now      func() time.Time

	// waitMu guards the sender's wait against WakeIn from the goroutines that send: waiting
	// while Poll blocks, until waitUntil, on timer; wakeBy is a WakeIn's time that came while
	// Poll did not block, for the next one.
	waitMu    sync.Mutex
	waiting   bool
	waitUntil time.Time
	timer     *time.Timer
	wakeBy    time.Time
}

// NewSelector returns a selector whose connections use cfg (dialer, TLS, SASL, MaxReceiveBytes,
// ConnectionsMaxIdle); zero fields take the defaults.
func NewSelector(cfg Config) *Selector {
	cfg = cfg.withDefaults()
	return &Selector{
		cfg:      &cfg,
		events:   make(chan event, eventQueueSize),
		wakeup:   make(chan struct{}, 1),
		channels: map[int32]*selectorConn{},
		now:      time.Now,
	}
}

// Connect starts connecting to node at addr. The outcome arrives through Poll: Connected once TLS
// and SASL are done, or Disconnected with the cause.
func (s *Selector) Connect(node int32, addr string) error {
	if _, ok := s.channels[node]; ok {
		return fmt.Errorf("network: already connected or connecting to node %d", node)
	}
	ch := newChannel(node, addr, s.cfg, s.events)
	s.channels[node] = &selectorConn{ch: ch, lastActive: s.now()}
	ch.start(&s.wg)
	return nil
}

// Send hands one size-prefixed frame to node's connection. It fails when the node is not
// connected or its previous send has not completed: a connection writes one request at a time.
func (s *Selector) Send(node int32, frame []byte) error {
	c := s.channels[node]
	switch {
	case c == nil || !c.connected:
		return fmt.Errorf("network: send to node %d: not connected", node)
	case c.sendInProgress:
		return fmt.Errorf("network: send to node %d: previous send still in progress", node)
	}
	started := time.Time{}
	if c.ch.raw != nil {
		started = s.cfg.Clock()
		n := c.ch.tryWrite(frame)
		if n == len(frame) {
			// The last byte left: completedSend ends here (Java's Selector.write, within poll).
			c.lastActive = s.now()
			s.written = append(s.written, directSend{c.ch, CompletedSend{Node: node, Started: started, Written: s.cfg.Clock()}})
			return nil
		}
		frame = frame[n:]
	}
	c.sendInProgress = true
	c.ch.send(pendingSend{frame: frame, started: started})
	return nil
}

// writeStarted returns when node's connection began writing the frame it holds, zero when it
// holds none (or there is no connection).
func (s *Selector) writeStarted(node int32) time.Time {
	if c := s.channels[node]; c != nil {
		return c.ch.writeStart()
	}
	return time.Time{}
}

// IsChannelReady reports whether node is connected (TLS and SASL done) and can take a send now.
func (s *Selector) IsChannelReady(node int32) bool {
	c := s.channels[node]
	return c != nil && c.connected && !c.sendInProgress
}

// Has reports whether the selector holds a connection (or a connection attempt) to node.
func (s *Selector) Has(node int32) bool { return s.channels[node] != nil }

// Close closes node's connection. No Disconnected event follows: the caller knows.
func (s *Selector) Close(node int32) {
	if c := s.channels[node]; c != nil {
		delete(s.channels, node)
		c.ch.close()
	}
}

// Wakeup makes a blocked or the next Poll return at once. Safe for concurrent use; it never blocks.
func (s *Selector) Wakeup() {
	select {
	case s.wakeup <- struct{}{}:
	default: // a wakeup is already pending; one is enough
	}
}

// WakeIn makes a blocked Poll, or the next one, return within d at the latest: a wakeup at a
// time rather than at once, for what becomes due later (a new batch's linger.ms). A Poll due to
// return sooner is left alone, so a burst of calls costs the sender no wakeup of its own. Safe
// for concurrent use; it never blocks.
func (s *Selector) WakeIn(d time.Duration) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	t := s.now().Add(d)
	if s.waiting {
		if t.Before(s.waitUntil) {
			s.waitUntil = t
			s.timer.Reset(max(t.Sub(s.now()), 0))
		}
		return
	}
	if s.wakeBy.IsZero() || t.Before(s.wakeBy) {
		s.wakeBy = t
	}
}

// Poll waits up to timeout for the first event (or a Wakeup, or the time a WakeIn asked for),
// then takes every event already queued without waiting, and closes the longest-idle connection
// if it passed connections.max.idle.ms.
func (s *Selector) Poll(timeout time.Duration) PollResult {
	var res PollResult
	if len(s.written) > 0 {
		for _, w := range s.written {
			if c := s.channels[w.Node]; c != nil && c.ch == w.ch { // not closed since
				res.CompletedSends = append(res.CompletedSends, w.CompletedSend)
			}
		}
		clear(s.written)
		s.written = s.written[:0]
		timeout = 0 // the caller acts on them now, as on any event
	}
	if timeout > 0 {
		s.wait(timeout, &res)
	}
	// Drain non-blockingly, at most a queue's worth, so a fast connection cannot keep Poll
	// from returning.
drain:
	for range eventQueueSize {
		select {
		case ev := <-s.events:
			s.handle(ev, &res)
		default:
			break drain
		}
	}
	s.maybeCloseIdle(&res)
	return res
}

// wait blocks up to timeout (shortened to a pending WakeIn's time) for an event, a Wakeup or a
// WakeIn's time. The timer is the selector's own, reset for each wait: WakeIn moves it while the
// sender waits.
func (s *Selector) wait(timeout time.Duration, res *PollResult) {
	s.waitMu.Lock()
	now := s.now()
	if !s.wakeBy.IsZero() {
		timeout = min(timeout, s.wakeBy.Sub(now))
		s.wakeBy = time.Time{}
	}
	if timeout <= 0 {
		s.waitMu.Unlock()
		return
	}
	s.waiting, s.waitUntil = true, now.Add(timeout)
	if s.timer == nil {
		s.timer = time.NewTimer(timeout)
	} else {
		s.timer.Reset(timeout)
	}
	s.waitMu.Unlock()
	select {
	case ev := <-s.events:
		s.handle(ev, res)
	case <-s.wakeup:
	case <-s.timer.C:
	}
	s.waitMu.Lock()
	s.waiting = false
	s.timer.Stop()
	s.waitMu.Unlock()
}

func (s *Selector) handle(ev event, res *PollResult) {
	node := ev.ch.id
	c := s.channels[node]
	if c == nil || c.ch != ev.ch {
		return // from a connection already closed; a newer one may hold the node id
	}
	c.lastActive = s.now()
	switch ev.kind {
	case eventConnected:
		c.connected = true
		res.Connected = append(res.Connected, node)
		res.Setups = append(res.Setups, c.ch.setup(c.lastActive, nil))
	case eventSendCompleted:
		c.sendInProgress = false
		res.CompletedSends = append(res.CompletedSends, CompletedSend{Node: node, Started: ev.started, Written: ev.at})
	case eventReceive:
		res.CompletedReceives = append(res.CompletedReceives, Receive{Node: node, Payload: ev.payload, Received: ev.at})
	case eventDisconnected:
		if !c.connected {
			res.Setups = append(res.Setups, c.ch.setup(c.lastActive, ev.err))
		}
		delete(s.channels, node)
		c.ch.abandon()
		res.Disconnected = append(res.Disconnected, Disconnection{Node: node, Err: ev.err})
	}
}

// maybeCloseIdle closes the least recently active connection when it has been idle longer than
// connections.max.idle.ms: one per Poll, as the Java Selector does.
func (s *Selector) maybeCloseIdle(res *PollResult) {
	if s.cfg.ConnectionsMaxIdle <= 0 {
		return
	}
	var oldest *selectorConn
	for _, c := range s.channels {
		if c.connected && (oldest == nil || c.lastActive.Before(oldest.lastActive)) {
			oldest = c
		}
	}
	if oldest == nil || s.now().Sub(oldest.lastActive) <= s.cfg.ConnectionsMaxIdle {
		return
	}
	node := oldest.ch.id
	s.Close(node)
	res.Disconnected = append(res.Disconnected, Disconnection{Node: node, Err: ErrConnectionIdle})
}

// CloseAll closes every connection and waits for their goroutines until ctx ends.
func (s *Selector) CloseAll(ctx context.Context) error {
	for node := range s.channels {
		s.Close(node)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("network: waiting for connection goroutines: %w", ctx.Err())
	}
}
