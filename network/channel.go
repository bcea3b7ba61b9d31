package network

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FrameSizeError reports a response size prefix that is negative or above MaxReceiveBytes, the
// Java client's InvalidReceiveException. The connection is closed: after a bad size the stream
// cannot be resynchronised.
type FrameSizeError struct {
	Size, Max int32
}

// Error implements error.
func (e *FrameSizeError) Error() string {
	return fmt.Sprintf("network: invalid receive size %d (max %d)", e.Size, e.Max)
}

// readFrame reads one size-prefixed frame and returns its payload (without the size). Sizes that
// are negative or above maxSize fail with *FrameSizeError before anything is allocated.
func readFrame(r io.Reader, maxSize int32) ([]byte, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > maxSize {
		return nil, &FrameSizeError{Size: size, Max: maxSize}
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the peer closed in the middle of a frame
		}
		return nil, err
	}
	return buf, nil
}

type eventKind uint8

const (
	eventConnected eventKind = iota
	eventSendCompleted
	eventReceive
	eventDisconnected
)

// event is what a channel's goroutines report to the selector. ch identifies the connection (not
// just the node), so the selector can drop events from a connection it already closed while a new
// one to the same node is open.
type event struct {
	kind    eventKind
	ch      *channel
	payload []byte
	err     error
	// at is when a send's write returned or a receive's frame was fully read, read from
	// Config.Clock by the goroutine that did it: the sender goroutine may poll much later
	// (busy draining, or asleep until its next linger), and the stage ends when the I/O did.
	// started is when a send's write began.
	at, started time.Time
}

// channel is one connection to a broker, the Java KafkaChannel: a connect goroutine that dials,
// handshakes TLS and authenticates SASL, then becomes the writer; and a reader goroutine. Both
// report to the selector through its one events channel.
//
// The channel's methods are safe for concurrent use: the selector calls send and close from the
// sender goroutine while the channel's own goroutines run.
type channel struct {
	id     int32
	addr   string
	cfg    *Config
	events chan<- event

	// sendSlot holds at most one frame: the Java channel's single in-flight Send. The selector
	// never offers a second frame before the first one's send completed, so offering never blocks.
	sendSlot chan pendingSend

	// raw is the connection's socket when the sender goroutine may write to it itself
	// (tryWrite): a plain TCP connection without SASL. Set by the connect goroutine before it
	// emits Connected, read only by the selector after it handled that event.
	raw syscall.RawConn

	dead      chan struct{} // closed by kill: the connection is gone, goroutines exit
	abandoned chan struct{} // closed by abandon: the selector stopped listening, emits give up
	killOnce  sync.Once
	abandonMu sync.Once

	mu     sync.Mutex
	conn   net.Conn
	cancel context.CancelFunc // aborts the dial and TLS handshake
	killed bool

	// saslReplies carries the responses of a re-authentication from the reader to the writer,
	// which runs it (responses with a reserved correlation id, never emitted to the selector).
	saslReplies chan []byte
	// reauthAt is when the writer re-authenticates before its next frame (KIP-368); zero when
	// the broker set no session lifetime. Only the connect-and-write goroutine touches it.
	reauthAt time.Time
	// sessionLifetime is the lifetime of the connection's current SASL session.
	sessionLifetime time.Duration
	// reauthenticating is set by the writer while it re-authenticates, for the reader to count
	// the responses of requests in flight that arrive meanwhile (SASLStats).
	reauthenticating atomic.Bool
	// A read that fails during a re-authentication (the broker answers a refused one and
	// closes) leaves the connection to the writer, which then reports the broker's answer
	// rather than the EOF that followed it: the reader stores the error in readErr under
	// reauthMu, while reauthActive, and signals readFailed. reauthActive is set from the start
	// of a re-authentication until it succeeds; after a failure it stays set, as the writer
	// kills the connection.
	reauthMu     sync.Mutex
	reauthActive bool
	readErr      error
	readFailed   chan struct{}

	// epoch is a Config.Clock reading taken at creation; writeStarted is when the writer began
	// writing the frame it holds, in nanoseconds after epoch plus one, 0 while it holds none.
	// The sender goroutine reads it when an answer arrives before the writer's report of the
	// request's write (see NetworkClient.handleCompletedReceives).
	epoch        time.Time
	writeStarted atomic.Int64

	// Setup timestamps for telemetry. started is set before the connect goroutine starts; the
	// others are written by that goroutine before it emits Connected (or, on failure,
	// Disconnected), so the selector reads them safely when it handles that event.
	started, dialed, tlsDone, authenticated time.Time
	// peer is the connection's remote address (IP:port) once dialed: the advertised name
	// resolved, as ConnectionSetup.PeerAddr reports it.
	peer string
}

func newChannel(id int32, addr string, cfg *Config, events chan<- event) *channel {
	return &channel{
		id:          id,
		addr:        addr,
		cfg:         cfg,
		events:      events,
		sendSlot:    make(chan pendingSend, 1),
		saslReplies: make(chan []byte, 1),
		readFailed:  make(chan struct{}, 1),
		dead:        make(chan struct{}),
		abandoned:   make(chan struct{}),
		epoch:       cfg.Clock(),
	}
}

// writeStart returns when the writer began writing the frame it holds, zero when it holds none.
func (ch *channel) writeStart() time.Time {
	if d := ch.writeStarted.Load(); d > 0 {
		return ch.epoch.Add(time.Duration(d - 1))
	}
	return time.Time{}
}

// start launches the connect goroutine; wg lets the selector wait for every goroutine at shutdown.
func (ch *channel) start(wg *sync.WaitGroup) {
	ctx, cancel := context.WithCancel(context.Background())
	ch.mu.Lock()
	ch.cancel = cancel
	ch.mu.Unlock()
	ch.started = time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		ch.connectAndWrite(ctx, wg)
	}()
}

// emit hands ev to the selector. It blocks while the events channel is full, which is the
// backpressure on a connection that reads faster than the sender goroutine polls; it gives up
// once the selector abandoned this channel, so no goroutine outlives its connection.
func (ch *channel) emit(ev event) bool {
	ev.ch = ch
	select {
	case ch.events <- ev:
		return true
	case <-ch.abandoned:
		return false
	}
}

// kill closes the connection once. With notify, the cause is reported to the selector as a
// Disconnected event; a close the selector asked for is not reported back.
func (ch *channel) kill(err error, notify bool) {
	ch.killOnce.Do(func() {
		ch.mu.Lock()
		ch.killed = true
		if ch.conn != nil {
			ch.conn.Close()
		}
		if ch.cancel != nil {
			ch.cancel()
		}
		ch.mu.Unlock()
		close(ch.dead)
		if notify {
			ch.emit(event{kind: eventDisconnected, err: err})
		}
	})
}

// abandon tells the channel's goroutines the selector will not read their events any more.
func (ch *channel) abandon() { ch.abandonMu.Do(func() { close(ch.abandoned) }) }

// setup describes the connection attempt for telemetry; see the timestamps' comment for when
// it may be called.
func (ch *channel) setup(end time.Time, err error) ConnectionSetup {
	s := ConnectionSetup{Node: ch.id, Addr: ch.addr, PeerAddr: ch.peer, Start: ch.started, Dialed: ch.dialed,
		TLSDone: ch.tlsDone, Authenticated: ch.authenticated, End: end, TLS: ch.cfg.TLS != nil, Err: err}
	if ch.cfg.SASL != nil {
		s.SASLMechanism = ch.cfg.SASL.Mechanism
	}
	return s
}

// close is the selector closing the connection: no Disconnected event follows.
func (ch *channel) close() {
	ch.abandon()
	ch.kill(errors.New("network: connection closed locally"), false)
}

// pendingSend is what is left of a frame for the writer goroutine to write, and when its write
// began (zero: when the writer begins it).
type pendingSend struct {
	frame   []byte
	started time.Time
}

// send offers the rest of a frame to the writer. The selector guarantees the slot is empty.
func (ch *channel) send(p pendingSend) {
	select {
	case ch.sendSlot <- p:
	case <-ch.dead:
	}
}

// tryWrite is the Java Selector's write within poll: the sender goroutine writes the frame to
// the socket itself, without waiting, and returns how many bytes left. A socket that takes the
// whole frame (the common case: its send buffer holds several requests) saves the writer
// goroutine's wakeup and the selector's wakeup for its report. A short write (a full send
// buffer) or an error leaves the rest to the writer goroutine, which waits for the socket and
// reports an error as it always does.
func (ch *channel) tryWrite(frame []byte) int {
	written := 0
	err := ch.raw.Write(func(fd uintptr) bool {
		for written < len(frame) {
			n, err := syscall.Write(int(fd), frame[written:])
			if err == syscall.EINTR {
				continue
			}
			if n <= 0 || err != nil {
				return true // EAGAIN or a failure: the writer goroutine takes over
			}
			written += n
		}
		return true
	})
	if err != nil { // the connection is closed: the writer reports why
		return 0
	}
	return written
}

func (ch *channel) connectAndWrite(ctx context.Context, wg *sync.WaitGroup) {
	conn, err := ch.connect(ctx)
	if err != nil {
		ch.kill(err, true)
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok && ch.cfg.SASL == nil {
		// Not with SASL: the writer re-authenticates between frames (KIP-368). Not with TLS:
		// conn is then a *tls.Conn, whose records only it can write.
		if raw, err := tcp.SyscallConn(); err == nil {
			ch.raw = raw
		}
	}
	if !ch.emit(event{kind: eventConnected}) {
		ch.kill(nil, false)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch.read(conn)
	}()
	ch.write(conn)
}

// connect dials, handshakes TLS and authenticates SASL. The connection is published to kill
// before the handshakes, so that closing the channel (setup timeout, shutdown) unblocks them.
func (ch *channel) connect(ctx context.Context) (net.Conn, error) {
	conn, err := ch.cfg.Dialer(ctx, "tcp", ch.addr)
	if err != nil {
		return nil, fmt.Errorf("network: dial %s: %w", ch.addr, err)
	}
	ch.dialed = time.Now()
	if ra := conn.RemoteAddr(); ra != nil {
		ch.peer = ra.String()
	}
	ch.mu.Lock()
	if ch.killed {
		ch.mu.Unlock()
		conn.Close()
		return nil, errors.New("network: connection closed while dialing")
	}
	ch.conn = conn
	ch.mu.Unlock()

	if ch.cfg.TLS != nil {
		tlsCfg := ch.cfg.TLS.Clone()
		if tlsCfg.ServerName == "" {
			host, _, err := net.SplitHostPort(ch.addr)
			if err != nil {
				return nil, fmt.Errorf("network: tls: %w", err)
			}
			tlsCfg.ServerName = host // hostname verification, as ssl.endpoint.identification.algorithm=https
		}
		tlsConn := tls.Client(conn, tlsCfg)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			var verifyErr *tls.CertificateVerificationError
			if errors.As(err, &verifyErr) {
				// A certificate we refuse will be refused again: like Java's
				// SslAuthenticationException, this is an authentication failure (no retry storm,
				// waiters fail fast), not a connection to retry.
				return nil, &AuthenticationError{Node: ch.id, Mechanism: "TLS", Message: "broker certificate refused", Err: err}
			}
			return nil, fmt.Errorf("network: tls handshake with %s: %w", ch.addr, err)
		}
		ch.mu.Lock()
		ch.conn = tlsConn
		killed := ch.killed
		ch.mu.Unlock()
		if killed {
			tlsConn.Close()
			return nil, errors.New("network: connection closed during tls handshake")
		}
		conn = tlsConn
		ch.tlsDone = time.Now()
	}
	if ch.cfg.SASL != nil {
		s := connSASLSession(conn, ch.cfg.SASL, ch.cfg.ClientID, ch.cfg.MaxReceiveBytes)
		s.host = hostOf(ch.addr)
		if err := s.authenticate(ctx, ch.cfg.SASL); err != nil {
			return nil, ch.nameNode(err)
		}
		ch.authenticated = time.Now()
		ch.sessionLifetime = s.sessionLifetime
		ch.reauthAt = reauthenticationTime(ch.authenticated, s.sessionLifetime)
		ch.cfg.SASL.authentications.Add(1)
		ch.cfg.SASL.lastSessionLifetime.Store(s.sessionLifetime.Milliseconds())
	}
	return conn, nil
}

// nameNode fills the node into an authentication error.
func (ch *channel) nameNode(err error) error {
	var authErr *AuthenticationError
	if errors.As(err, &authErr) {
		authErr.Node = ch.id
	}
	return err
}

// reauthenticate runs the SASL exchange again on an established connection, before the
// broker's session ends (KIP-368; Java's KafkaChannel.maybeBeginClientReauthentication, which
// also starts it when the channel is about to write). The writer runs it between two frames, so
// no request is written meanwhile; responses to the requests already in flight keep flowing to
// the selector in order, while the reader hands the exchange's own responses (reserved
// correlation ids) to saslReplies. A failure closes the connection with its error: an
// *AuthenticationError fails the node as an initial one does.
func (ch *channel) reauthenticate(conn net.Conn) error {
	timeout := time.NewTimer(ch.cfg.RequestTimeout)
	defer timeout.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ch.dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	s := newSASLSession(ch.cfg.SASL, ch.cfg.ClientID,
		func(b []byte) error { _, err := conn.Write(b); return err },
		func() ([]byte, error) {
			select {
			case b := <-ch.saslReplies:
				return b, nil
			case <-ch.readFailed:
				// The reader queues a reply before it reads on and fails: take it first.
				select {
				case b := <-ch.saslReplies:
					return b, nil
				default:
				}
				ch.reauthMu.Lock()
				err := ch.readErr
				ch.reauthMu.Unlock()
				return nil, err
			case <-ch.dead:
				return nil, errors.New("network: connection closed during re-authentication")
			case <-timeout.C:
				return nil, fmt.Errorf("network: re-authentication with node %d: no response within %v", ch.id, ch.cfg.RequestTimeout)
			}
		})
	s.minTokenValidity = ch.sessionLifetime
	s.host = hostOf(ch.addr)
	ch.reauthMu.Lock()
	ch.reauthActive = true
	ch.reauthMu.Unlock()
	ch.reauthenticating.Store(true)
	err := s.authenticate(ctx, ch.cfg.SASL)
	ch.reauthenticating.Store(false)
	if err != nil {
		// reauthActive stays set: the reader, failing now that the broker closes, leaves the
		// connection to the writer, which kills it with this error.
		return fmt.Errorf("network: re-authentication with node %d (%s): %w", ch.id, ch.addr, ch.nameNode(err))
	}
	ch.reauthMu.Lock()
	ch.reauthActive = false
	readErr := ch.readErr
	ch.reauthMu.Unlock()
	if readErr != nil {
		return readErr // the reader stopped after the exchange's last reply
	}
	ch.sessionLifetime = s.sessionLifetime
	// From the end of the exchange, as the first authentication's (Java's
	// ReauthInfo.setAuthenticationEndAndSessionReauthenticationTimes).
	ch.reauthAt = reauthenticationTime(time.Now(), s.sessionLifetime)
	ch.cfg.SASL.reauthentications.Add(1)
	ch.cfg.SASL.lastSessionLifetime.Store(s.sessionLifetime.Milliseconds())
	return nil
}

// read reads frames until the connection fails, reporting each as a receive with the time it
// was fully read. A bufio.Reader saves a syscall per size prefix.
func (ch *channel) read(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 32<<10)
	for {
		payload, err := readFrame(br, ch.cfg.MaxReceiveBytes)
		// The frame's last byte is in: completedReceive ends here, not when a poll takes it
		// (the Java Selector stamps its receives as it reads them too: attemptRead's
		// currentTimeMs, handed to addToCompletedReceives).
		read := ch.cfg.Clock()
		if err != nil {
			err = fmt.Errorf("network: read from node %d (%s): %w", ch.id, ch.addr, err)
			ch.reauthMu.Lock()
			handOver := ch.reauthActive
			if handOver {
				ch.readErr = err
			}
			ch.reauthMu.Unlock()
			if handOver {
				ch.readFailed <- struct{}{} // buffered, sent once: this goroutine ends here
				return
			}
			ch.kill(err, true)
			return
		}
		if len(payload) >= 4 && isReservedCorrelationID(int32(binary.BigEndian.Uint32(payload))) {
			// A re-authentication's response: the writer waits for it.
			select {
			case ch.saslReplies <- payload:
			case <-ch.dead:
				return
			}
			continue
		}
		if ch.reauthenticating.Load() {
			ch.cfg.SASL.responsesDuringReauth.Add(1)
		}
		if !ch.emit(event{kind: eventReceive, payload: payload, at: read}) {
			return
		}
	}
}

// write writes one frame at a time from the send slot and reports each completed write, with
// the time its write returned.
func (ch *channel) write(conn net.Conn) {
	for {
		select {
		case p := <-ch.sendSlot:
			if !ch.reauthAt.IsZero() && !time.Now().Before(ch.reauthAt) {
				if err := ch.reauthenticate(conn); err != nil {
					ch.kill(err, true)
					return
				}
			}
			started := p.started
			if started.IsZero() {
				started = ch.cfg.Clock()
			}
			ch.writeStarted.Store(int64(started.Sub(ch.epoch)) + 1)
			if _, err := conn.Write(p.frame); err != nil {
				ch.kill(fmt.Errorf("network: write to node %d (%s): %w", ch.id, ch.addr, err), true)
				return
			}
			// The last byte left: completedSend ends here, whenever the sender goroutine polls
			// (Java's Selector.write reads the time as the send completes, for
			// recordCompletedSend).
			written := ch.cfg.Clock()
			ch.writeStarted.Store(0)
			if !ch.emit(event{kind: eventSendCompleted, at: written, started: started}) {
				return
			}
		case <-ch.dead:
			return
		}
	}
}

// hostOf is the host part of a host:port address (the address itself when it has no port).
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
