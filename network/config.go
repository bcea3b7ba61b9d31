// Package network is the producer's network layer, after the Java client's NetworkClient,
// Selector, KafkaChannel and ClusterConnectionStates. Go's netpoller replaces NIO: each connection
// has a reader and a writer goroutine that turn socket progress into events on one bounded
// channel, and Selector.Poll waits on that channel as the Java Selector waits in select().
package network

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"time"
)

// Defaults follow the Java producer.
const (
	DefaultRequestTimeout                  = 30 * time.Second  // request.timeout.ms
	DefaultConnectionsMaxIdle              = 540 * time.Second // connections.max.idle.ms
	DefaultReconnectBackoff                = 50 * time.Millisecond
	DefaultReconnectBackoffMax             = time.Second
	DefaultSocketConnectionSetupTimeout    = 10 * time.Second
	DefaultSocketConnectionSetupTimeoutMax = 30 * time.Second
	DefaultMaxInFlight                     = 5
	// DefaultMaxReceiveBytes bounds one response frame (the broker-side socket.request.max.bytes
	// default), so a corrupt or hostile size prefix cannot make us allocate gigabytes.
	DefaultMaxReceiveBytes = 104857600
)

// maxProduceVersion is the default cap on Produce: v13 (KIP-516) names topics by id only.
const maxProduceVersion = 12

// SASL mechanisms the channel can authenticate with.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig is sasl.mechanism with the credentials of the JAAS config.
type SASLConfig struct {
	Mechanism string // SASLPlain, SASLScramSHA256 or SASLScramSHA512
	Username  string
	Password  string
}

// Config configures the NetworkClient and its Selector. Zero durations and sizes take the Java
// defaults above.
type Config struct {
	ClientID string
	// RequestTimeout is request.timeout.ms, the default for requests that give none.
	RequestTimeout time.Duration
	// ConnectionsMaxIdle is connections.max.idle.ms; a negative value disables idle expiry.
	ConnectionsMaxIdle                    time.Duration
	ReconnectBackoff, ReconnectBackoffMax time.Duration
	// SocketConnectionSetupTimeout and SocketConnectionSetupTimeoutMax bound how long a
	// connection may stay CONNECTING (dial, TLS, SASL); the timeout doubles after each failure.
	SocketConnectionSetupTimeout, SocketConnectionSetupTimeoutMax time.Duration
	// MaxInFlight is max.in.flight.requests.per.connection.
	MaxInFlight int
	// MaxReceiveBytes refuses response frames larger than this (a protocol error closes the
	// connection).
	MaxReceiveBytes int32
	// TLS enables TLS when non-nil. An empty ServerName is filled from the broker's host so the
	// certificate's hostname is verified (ssl.endpoint.identification.algorithm=https).
	TLS *tls.Config
	// SASL enables SASL authentication when non-nil.
	SASL *SASLConfig
	// Dialer opens the TCP connection; nil uses a net.Dialer.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxVersions caps the version used per API key below what kmsg and the broker support.
	// Produce is capped at v12 unless the map sets key 0: v13 names topics by id only, and the
	// producer names them.
	MaxVersions map[int16]int16
	// Observer, when set, is told of connection states and setups and of every request (telemetry).
	Observer Observer
}

func (c Config) withDefaults() Config {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&c.RequestTimeout, DefaultRequestTimeout)
	setDur(&c.ConnectionsMaxIdle, DefaultConnectionsMaxIdle)
	setDur(&c.ReconnectBackoff, DefaultReconnectBackoff)
	setDur(&c.ReconnectBackoffMax, DefaultReconnectBackoffMax)
	setDur(&c.SocketConnectionSetupTimeout, DefaultSocketConnectionSetupTimeout)
	setDur(&c.SocketConnectionSetupTimeoutMax, DefaultSocketConnectionSetupTimeoutMax)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxReceiveBytes <= 0 {
		c.MaxReceiveBytes = DefaultMaxReceiveBytes
	}
	if _, ok := c.MaxVersions[0]; !ok {
		caps := maps.Clone(c.MaxVersions)
		if caps == nil {
			caps = map[int16]int16{}
		}
		caps[0] = maxProduceVersion
		c.MaxVersions = caps
	}
	if c.Dialer == nil {
		var d net.Dialer
		c.Dialer = d.DialContext
	}
	return c
}

// Validate reports a configuration the client cannot work with, naming the Java key.
func (c Config) Validate() error {
	if c.SASL != nil {
		switch c.SASL.Mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			return fmt.Errorf("sasl.mechanism: unsupported mechanism %q", c.SASL.Mechanism)
		}
	}
	if c.ReconnectBackoffMax != 0 && c.ReconnectBackoffMax < c.ReconnectBackoff {
		return errors.New("reconnect.backoff.max.ms: below reconnect.backoff.ms")
	}
	if c.MaxReceiveBytes < 0 {
		return errors.New("max receive bytes: negative")
	}
	return nil
}
