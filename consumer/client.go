// Package consumer reads Kafka with the project's own network client: a read_committed reader of
// whole partitions (ListOffsets for the last stable offset, Fetch at isolation level
// read_committed, record batches decoded and decompressed, control batches and the records of
// aborted transactions skipped as the Java consumer's Fetcher does) and the one admin call the
// agent needs, creating a compacted topic. The agent's exactly-once mode reads its committed
// file positions back from its state topic with it. It is not a group consumer: no offsets are
// committed, no partitions assigned.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// Client sends one request at a time through a NetworkClient and waits for its response, driving
// the client's Poll on the caller's goroutine. Like the NetworkClient it owns, it is not safe for
// concurrent use; Close releases its connections.
type Client struct {
	nc    *network.NetworkClient
	meta  *metadata.Metadata
	retry time.Duration // backoff between attempts of a request that failed retriably
	// requestTimeout bounds how long a request waits to be sent (request.timeout.ms), as it
	// bounds the wait for its response.
	requestTimeout time.Duration
}

// NewClient returns a client of the cluster reached through bootstrap, with the connection,
// security and timeout settings of cfg. It connects lazily.
func NewClient(bootstrap []string, cfg network.Config) (*Client, error) {
	meta, err := metadata.New(bootstrap, 5*time.Minute, 100*time.Millisecond, false)
	if err != nil {
		return nil, fmt.Errorf("consumer: bootstrap servers: %w", err)
	}
	versions := map[int16]int16{kmsg.Fetch.Int16(): maxFetchVersion}
	for k, v := range cfg.MaxVersions {
		if k != kmsg.Fetch.Int16() {
			versions[k] = v
		}
	}
	cfg.MaxVersions = versions
	requestTimeout := cfg.RequestTimeout
	if requestTimeout <= 0 {
		requestTimeout = network.DefaultRequestTimeout
	}
	return &Client{nc: network.NewClient(cfg, meta), meta: meta, retry: 100 * time.Millisecond, requestTimeout: requestTimeout}, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	err := c.nc.Close()
	c.meta.Close()
	return err
}

// anyNode asks roundTrip for the least loaded node.
const anyNode = -1

// errNodeUnknown is the error of an attempt whose node is not in the metadata (any more); it is
// retriable (see retriable), so do tries again after a metadata refresh and the backoff.
var errNodeUnknown = fmt.Errorf("%w: not in the metadata", network.ErrNodeNotReady)

// roundTrip is one attempt at req, after the Java ConsumerNetworkClient's send and poll: it
// sends req to node (anyNode: the least loaded one, chosen again until it is sent) once that is
// ready and returns the response, or the error of the attempt, or ctx's. An attempt that
// cannot send fails rather than wait without end for its node: when the node is not in the
// metadata, when its connection failed (checkDisconnects: it is down, or inside its reconnect
// backoff), or after request.timeout.ms unsent (failExpiredRequests), which also bounds the
// wait for a least loaded node while every broker is busy or backing off. Once sent, the
// network client bounds the wait (disconnection, request.timeout.ms). Callers retry through do,
// which refreshes the metadata first, so a moved leader is found and another broker tried.
func (c *Client) roundTrip(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	var got *inflight.Response
	sent := false
	start := time.Now()
	for got == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		var n metadata.Node
		if !sent {
			var ok bool
			if node == anyNode {
				n, ok = c.nc.LeastLoadedNode(now)
			} else {
				n, ok = c.meta.Fetch().Node(node)
			}
			switch {
			case !ok && node == anyNode:
				// Every broker is busy (a send not yet reported complete) or backing off:
				// only polling changes that.
			case !ok:
				return nil, fmt.Errorf("node %d: %w", node, errNodeUnknown)
			case c.nc.Ready(n, now):
				c.nc.Send(&network.ClientRequest{Destination: n.ID, Body: req, ExpectResponse: true, Created: now,
					Callback: func(r *inflight.Response) { got = r }}, now)
				sent = true
			}
		}
		c.nc.Poll(50*time.Millisecond, now)
		if sent {
			continue
		}
		if err := c.nc.AuthenticationError(n.ID); err != nil {
			return nil, err
		}
		// A node of its own the request waits for; the least loaded one is chosen again.
		if node != anyNode && c.nc.ConnectionFailed(n.ID) {
			return nil, fmt.Errorf("%w: node %d: connection failed", network.ErrDisconnected, n.ID)
		}
		if time.Since(start) >= c.requestTimeout {
			return nil, fmt.Errorf("%w: not sent within request.timeout.ms (%v)", network.ErrNodeNotReady, c.requestTimeout)
		}
	}
	if got.Disconnected && !errors.Is(got.Err, network.ErrDisconnected) {
		return nil, fmt.Errorf("%w: %v", network.ErrDisconnected, got.Err)
	}
	if got.Err != nil {
		return nil, got.Err
	}
	return got.Body, nil
}

// retriable reports an error worth another attempt: a lost connection, a timeout, or a Kafka
// error the broker marks retriable (leadership moving, coordinator loading).
func retriable(err error) bool {
	if errors.Is(err, network.ErrDisconnected) || errors.Is(err, network.ErrNodeNotReady) {
		return true
	}
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// do runs attempt until it succeeds, fails for good, or ctx ends; retriable failures are retried
// after the backoff (and a metadata refresh, so that a moved leader is found).
func (c *Client) do(ctx context.Context, what string, attempt func() error) error {
	for {
		err := attempt()
		if err == nil || !retriable(err) {
			return err
		}
		c.meta.RequestUpdate()
		if !c.backoff(ctx, c.retry) {
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		}
	}
}

// backoff waits d, polling the network client meanwhile, as the Java ConsumerNetworkClient's
// poll(timer) does: the metadata update just requested goes out, and connection events (a send
// completed, a connection made or lost) are handled, so the next attempt sees their outcome. It
// reports false when ctx ended first.
func (c *Client) backoff(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if ctx.Err() != nil {
			return false
		}
		now := time.Now()
		left := deadline.Sub(now)
		if left <= 0 {
			return true
		}
		c.nc.Poll(min(left, 50*time.Millisecond), now)
	}
}

// leader returns the leader of topic's partition, fetching the topic's metadata first. A leader
// that is not among the metadata's brokers counts as none, as in the Java client's Cluster (its
// PartitionInfo has no leader node then): the metadata is asked for again.
func (c *Client) leader(ctx context.Context, topic string, partition int32) (int32, error) {
	c.meta.Add(topic, time.Now())
	tp := metadata.TopicPartition{Topic: topic, Partition: partition}
	for {
		cl := c.meta.Fetch()
		if id, ok := cl.LeaderFor(tp); ok && !cl.IsBootstrap() {
			if _, known := cl.Node(id); known {
				return id, nil
			}
		}
		if err := cl.TopicError(topic); errors.Is(err, kerr.UnknownTopicOrPartition) && !cl.IsBootstrap() && cl.PartitionCount(topic) == 0 {
			return 0, fmt.Errorf("topic %q: %w", topic, err)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("leader of %s: %w", tp, err)
		}
		c.meta.RequestUpdate()
		c.nc.Poll(50*time.Millisecond, time.Now())
	}
}

// partitions returns the number of partitions of topic.
func (c *Client) partitions(ctx context.Context, topic string) (int, error) {
	if _, err := c.leader(ctx, topic, 0); err != nil {
		return 0, err
	}
	return c.meta.Fetch().PartitionCount(topic), nil
}
