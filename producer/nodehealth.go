package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/network"
)

// nodeWarnEvery is how often a node that stays unreachable is warned about again: often
// enough that a log read at any moment shows the outage is still on, rarely enough that a
// long outage does not fill the log (the producer retries a down node up to every
// reconnect.backoff.max.ms).
const nodeWarnEvery = 30 * time.Second

// errAPIVersionsFailed is the cause of a connection that opened but was lost before its
// ApiVersions exchange finished: the broker accepted the connection and is not usable yet.
var errAPIVersionsFailed = errors.New("connection lost before ApiVersions completed")

// nodeHealth logs when a broker becomes unreachable and when it is reachable again, from the
// network layer's connection events (it is a network.Observer beside the telemetry one).
//
// It mirrors the Java NetworkClient's processDisconnection, which logs at WARN a connection
// that "could not be established" and at ERROR one that "failed authentication", and
// DefaultMetadataUpdater.handleServerDisconnect, which warns when a bootstrap broker is lost
// before metadata came. Java warns on every failed attempt; here a node's first failed
// attempt warns, and while it stays down the warning is repeated at most every
// nodeWarnEvery with the number of attempts that failed since, so an outage is a handful of
// lines. The node's first successful connection after a warning (READY: ApiVersions done)
// logs at INFO how long it was unreachable, counted from the first attempt that failed. A
// connection that closes (a broker that went away, an idle connection) logs nothing by itself,
// as in Java (the Selector logs it at debug): only an attempt to connect again that fails does.
//
// The Java Sender logs each retried batch at WARN; kafkatrail keeps that at debug
// (Sender.completeBatch): during an outage every batch in flight is retried, and the node's
// warning already says that its partitions' records wait and retry.
//
// nodeHealth is not safe for concurrent use: the network client calls it on the sender
// goroutine. It keeps an entry per node id it has seen (broker ids, bounded by the cluster).
type nodeHealth struct {
	log   *slog.Logger
	now   func() time.Time
	nodes map[int32]*nodeLink
	// bootstrap is the outage the bootstrap servers (nodes -1, -2, ...) share: before the
	// first metadata response no broker is known by id, and "no broker reachable" is one
	// fact, however many bootstrap servers refuse.
	bootstrap outage
}

var _ network.Observer = (*nodeHealth)(nil)

// nodeLink is what nodeHealth knows of one node's connection.
type nodeLink struct {
	addr  string
	state network.ConnectionState
	// attemptStart is when the connection attempt in progress (or the last one) began.
	attemptStart time.Time
	// causePending is set when an attempt ended while connecting: its cause comes in
	// ConnectionSetupDone from the same poll, unless the client closed it (setup timeout).
	causePending bool
	// out is the node's outage: its own, or for a bootstrap server the one they share.
	out *outage
}

// outage is one node's time unreachable (or, for the bootstrap servers, no broker's).
type outage struct {
	// since is when the outage began (its first failed attempt's start); zero while the node
	// is reachable.
	since time.Time
	// warned: a warning was logged for this outage, at lastWarn; sinceWarn attempts failed
	// after it, and failures in the whole outage.
	warned              bool
	lastWarn            time.Time
	sinceWarn, failures int
}

// newNodeHealth returns the logger of node outages, or nil when log would drop warnings
// anyway (the default logger discards): then the network layer is not observed for it.
func newNodeHealth(log *slog.Logger, now func() time.Time) *nodeHealth {
	if log == nil || !log.Enabled(context.Background(), slog.LevelWarn) {
		return nil
	}
	return &nodeHealth{log: log, now: now, nodes: map[int32]*nodeLink{}}
}

func (h *nodeHealth) link(node int32) *nodeLink {
	n := h.nodes[node]
	if n == nil {
		n = &nodeLink{out: &outage{}}
		if node < 0 {
			n.out = &h.bootstrap
		}
		h.nodes[node] = n
	}
	return n
}

// ConnectionStateChanged follows node's connection: an attempt starting, ending while
// connecting or while checking API versions (failures), or READY (reachable).
func (h *nodeHealth) ConnectionStateChanged(node int32, state network.ConnectionState) {
	n := h.link(node)
	prev := n.state
	n.state = state
	switch {
	case state == network.Connecting:
		if n.causePending {
			// The previous attempt ended with no setup report: the client closed it when
			// socket.connection.setup.timeout.ms passed.
			h.failed(node, n, network.ErrConnectionSetupTimeout)
		}
		n.attemptStart = h.now()
	case state == network.Ready:
		h.reachable(node, n)
	case state == network.Disconnected && prev == network.Connecting:
		n.causePending = true
	case state == network.Disconnected && prev == network.CheckingAPIVersions:
		h.failed(node, n, errAPIVersionsFailed)
	}
}

// ConnectionSetupDone takes a failed attempt's cause.
func (h *nodeHealth) ConnectionSetupDone(s network.ConnectionSetup) {
	n := h.link(s.Node)
	n.addr = s.Addr
	if s.Err == nil {
		return
	}
	h.failed(s.Node, n, s.Err)
}

// RequestSent is not needed here.
func (h *nodeHealth) RequestSent(*network.InFlightRequest, int) {}

// RequestDone is not needed here.
func (h *nodeHealth) RequestDone(*network.InFlightRequest, kmsg.Response, time.Time, int, error) {}

// InFlightRequests is not needed here.
func (h *nodeHealth) InFlightRequests(int32, int) {}

// failed counts a failed attempt to reach node and warns when this is the outage's first, or
// when the last warning is nodeWarnEvery old.
func (h *nodeHealth) failed(node int32, n *nodeLink, cause error) {
	n.causePending = false
	o := n.out
	now := h.now()
	if o.since.IsZero() {
		o.since = n.attemptStart
		if o.since.IsZero() {
			o.since = now
		}
	}
	o.failures++
	o.sinceWarn++
	if o.warned && now.Sub(o.lastWarn) < nodeWarnEvery {
		return
	}
	repeat, since, down := o.warned, o.sinceWarn, now.Sub(o.since)
	o.warned, o.lastWarn, o.sinceWarn = true, now, 0

	level := slog.LevelWarn
	var authErr *network.AuthenticationError
	auth := errors.As(cause, &authErr)
	if auth {
		level = slog.LevelError
	}
	var msg string
	switch {
	case node < 0 && !repeat:
		msg = fmt.Sprintf("no broker reachable: bootstrap server %s unreachable: %v; records wait for metadata (max.block.ms)", n.addr, cause)
	case node < 0:
		msg = fmt.Sprintf("no broker reachable yet after %s: bootstrap server %s: %v; %d failed connection attempts since the last warning",
			roundDuration(down), n.addr, cause, since)
	case auth && !repeat:
		msg = fmt.Sprintf("%s failed authentication: %v", nodeName(node, n.addr), cause)
	case !repeat:
		msg = fmt.Sprintf("%s unreachable: %v; records for its partitions wait and retry", nodeName(node, n.addr), cause)
	default:
		msg = fmt.Sprintf("%s still unreachable after %s: %v; %d failed connection attempts since the last warning",
			nodeName(node, n.addr), roundDuration(down), cause, since)
	}
	attrs := []slog.Attr{slog.Int("node", int(node)), slog.String("address", n.addr), slog.String("error", cause.Error())}
	if repeat {
		attrs = append(attrs, slog.Int("failed_attempts", since), slog.Duration("down", down))
	}
	h.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// reachable ends node's outage: one line at INFO if it was warned about.
func (h *nodeHealth) reachable(node int32, n *nodeLink) {
	n.causePending = false
	o := n.out
	if o.warned {
		down := h.now().Sub(o.since)
		var msg string
		if node < 0 {
			msg = fmt.Sprintf("bootstrap server %s reachable after %s", n.addr, roundDuration(down))
		} else {
			msg = fmt.Sprintf("%s reachable again after %s", nodeName(node, n.addr), roundDuration(down))
		}
		h.log.LogAttrs(context.Background(), slog.LevelInfo, msg, slog.Int("node", int(node)), slog.String("address", n.addr),
			slog.Duration("down", down), slog.Int("failed_attempts", o.failures))
	}
	*o = outage{}
}

// nodeName names a broker as the Java client's log does: "broker node 2 (127.0.0.1:9093)", or
// without the address when no attempt reported it yet.
func nodeName(node int32, addr string) string {
	if addr == "" {
		return fmt.Sprintf("broker node %d", node)
	}
	return fmt.Sprintf("broker node %d (%s)", node, addr)
}

// roundDuration shows an outage's length as a person reads it: tenths of a second, or
// milliseconds under a second.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
