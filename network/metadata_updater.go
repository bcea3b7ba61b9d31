package network

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// defaultMetadataUpdater keeps Metadata fresh from inside NetworkClient.Poll, after the Java
// NetworkClient.DefaultMetadataUpdater: when an update is due and none is in flight, it sends a
// metadata request to the least loaded node, connecting to one first if needed.
//
// It is not safe for concurrent use: it belongs to the NetworkClient's goroutine.
type defaultMetadataUpdater struct {
	client     *NetworkClient
	meta       *metadata.Metadata
	inProgress bool
	// requestVersion is the Metadata request version of the request in flight.
	requestVersion int
	// rebootstrap is set by a response asking for a rebootstrap, or by an update that has not
	// succeeded for metadata.recovery.rebootstrap.trigger.ms; handleRebootstrap does it at the
	// end of the same Poll (Java's initiateRebootstrap and handleRebootstrap).
	rebootstrap bool
	// attemptStart is when the first update attempt since the last success went out (zero:
	// none); KIP-1102 rebootstraps once it is older than the trigger.
	attemptStart time.Time
}

// isUpdateDue reports whether an update should be sent now; while one is due, nodes are not
// ready for other requests, so the update goes first.
func (u *defaultMetadataUpdater) isUpdateDue(now time.Time) bool {
	return !u.inProgress && u.meta.TimeToNextUpdate(now) == 0
}

// maybeUpdate starts an update if one is due and returns how long Poll may wait before the
// updater needs to run again.
func (u *defaultMetadataUpdater) maybeUpdate(now time.Time) time.Duration {
	timeout := u.meta.TimeToNextUpdate(now)
	if u.inProgress {
		timeout = max(timeout, u.client.cfg.RequestTimeout)
	}
	if timeout > 0 {
		return timeout
	}
	c := u.client
	if u.attemptStart.IsZero() {
		u.attemptStart = now
	} else if !c.cfg.NoRebootstrap && now.Sub(u.attemptStart) >= c.cfg.RebootstrapTrigger {
		// KIP-1102: no metadata update succeeded for metadata.recovery.rebootstrap.trigger.ms,
		// whatever the brokers the client knows answer: start again from the bootstrap
		// servers (a cluster that moved, or was swapped behind the same bootstrap name).
		c.cfg.Log.Warn("no metadata update succeeded for metadata.recovery.rebootstrap.trigger.ms: rebootstrapping",
			"trigger", c.cfg.RebootstrapTrigger, "since", now.Sub(u.attemptStart).Round(time.Millisecond))
		u.rebootstrap, u.attemptStart = true, now
		return 0
	}
	node, ok := c.LeastLoadedNode(now)
	if !ok && !c.cfg.NoRebootstrap && !c.anyConnectionReady() && !u.meta.Fetch().IsBootstrap() {
		// KIP-899 (Java's DefaultMetadataUpdater.maybeUpdate with
		// metadata.recovery.strategy=rebootstrap): every broker the metadata names is in
		// reconnect backoff and none is connected: go back to the bootstrap servers, whose
		// addresses may now lead to brokers the old metadata does not know (a whole cluster
		// restarted on new addresses). Once on the bootstrap servers, there is nothing to go
		// back to: their reconnect backoff paces the attempts.
		c.cfg.Log.Info("no known broker can be reached: rebootstrapping", "bootstrap", u.meta.BootstrapAddrs())
		u.meta.Rebootstrap()
		node, ok = c.LeastLoadedNode(now)
	}
	if !ok {
		return c.cfg.ReconnectBackoff
	}
	return u.maybeUpdateNode(node, now)
}

// maybeUpdateNode is DefaultMetadataUpdater.maybeUpdate(now, node): send the request to node if
// it can take it, else wait for any connection being set up, else connect to node.
func (u *defaultMetadataUpdater) maybeUpdateNode(node metadata.Node, now time.Time) time.Duration {
	c := u.client
	if c.canSendRequest(node.ID, now) {
		req, requestVersion := u.meta.NewRequestAndVersion()
		if err := c.negotiateVersion(node.ID, req); err != nil {
			u.meta.FailedUpdate(now)
			return c.cfg.ReconnectBackoff
		}
		c.doSend(c.newRequest(node.ID, req, true, true, now, 0, nil, now))
		u.inProgress = true
		u.requestVersion = requestVersion
		return c.cfg.RequestTimeout
	}
	// While any connection is being set up, wait for it rather than open another to node: it
	// may be the one the update needs, and more attempts at once only load a struggling
	// cluster. As in Java the wait is the reconnect backoff, for want of a connect timeout.
	if u.isAnyNodeConnecting() {
		return c.cfg.ReconnectBackoff
	}
	if c.states.CanConnect(node.ID, now) {
		c.initiateConnect(node, now)
		return c.cfg.ReconnectBackoff
	}
	// Connected but with no room in flight, or checking API versions: only a network event,
	// which ends Poll's wait, can make node usable.
	return maxDuration
}

// isAnyNodeConnecting is NetworkClient.isAnyNodeConnecting: whether a connection to a broker the
// metadata names is CONNECTING.
func (u *defaultMetadataUpdater) isAnyNodeConnecting() bool {
	for _, n := range u.meta.Fetch().Nodes() {
		if u.client.states.IsConnecting(n.ID) {
			return true
		}
	}
	return false
}

// handleResponse installs a metadata response (DefaultMetadataUpdater.handleSuccessfulResponse);
// a decode failure counts as a failed attempt. A response whose top-level error (Metadata v13,
// KIP-1102) is REBOOTSTRAP_REQUIRED is not installed: it starts a rebootstrap. Java does that
// only with metadata.recovery.strategy=rebootstrap, its default since Kafka 4.0 and the only
// behaviour here. Any other top-level error is ignored, as in Java.
func (u *defaultMetadataUpdater) handleResponse(body kmsg.Response, err error, now time.Time) {
	u.inProgress = false
	if err != nil {
		u.meta.FailedUpdate(now)
		return
	}
	resp := body.(*kmsg.MetadataResponse)
	if resp.ErrorCode == kerr.RebootstrapRequired.Code {
		// With metadata.recovery.strategy=none the answer is only a failed update: it is
		// never installed.
		u.rebootstrap = !u.client.cfg.NoRebootstrap
		// Unlike Java, which asks again at once, the answer counts as a failed attempt, so
		// that a cluster that keeps answering this is asked once per retry.backoff.ms, not
		// once per round trip.
		u.meta.FailedUpdate(now)
		return
	}
	u.meta.UpdateFor(u.requestVersion, resp, now)
	if len(resp.Brokers) > 0 {
		u.attemptStart = time.Time{} // a success: the KIP-1102 clock starts again at the next attempt
	}
}

// errRebootstrap is why handleRebootstrap closes connections.
var errRebootstrap = fmt.Errorf("network: closed to rebootstrap: %w", kerr.RebootstrapRequired)

// handleRebootstrap is NetworkClient.handleRebootstrap: once a rebootstrap is due it closes the
// connections to every broker the metadata names, failing their requests in flight as
// disconnected (they are retried), and replaces the metadata with the bootstrap servers
// (Metadata.rebootstrap), from which the next update starts.
func (u *defaultMetadataUpdater) handleRebootstrap(responses []*inflight.Response, now time.Time) []*inflight.Response {
	if !u.rebootstrap {
		return responses
	}
	u.rebootstrap = false
	c := u.client
	for _, n := range u.meta.Fetch().Nodes() {
		c.selector.Close(n.ID)
		if st := c.states.State(n.ID); st == Connecting || st.isConnected() {
			responses = c.processDisconnection(responses, n.ID, now, errRebootstrap, false)
		}
	}
	u.meta.Rebootstrap()
	return responses
}

// handleFailure records a metadata request lost to a disconnect or timeout.
func (u *defaultMetadataUpdater) handleFailure(now time.Time) {
	u.inProgress = false
	u.meta.FailedUpdate(now)
}

// handleServerDisconnect asks for an update: the lost broker may lead partitions that moved.
func (u *defaultMetadataUpdater) handleServerDisconnect(int32) { u.meta.RequestUpdate() }
