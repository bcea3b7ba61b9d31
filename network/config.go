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
	"log/slog"
	"maps"
	"net"
	"sync/atomic"
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
	DefaultRebootstrapTrigger              = 300 * time.Second // metadata.recovery.rebootstrap.trigger.ms
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
	SASLOAuthBearer = "OAUTHBEARER"
)

// SASLExchange runs a SASL mechanism this package does not know itself (AWS_MSK_IAM, GSSAPI)
// over an authenticating connection. Authenticate is given the broker's host name (as the
// connection was made to it: a bootstrap server's, or the advertised one) and step, which
// sends one SaslAuthenticate message and returns the broker's reply; a refusal from the broker
// comes out of step as an *AuthenticationError, and so should a local failure that retrying
// will not cure (no credentials, a wrong key). It is called again for each re-authentication
// (KIP-368), from the connection's goroutines: it must be safe for concurrent use.
type SASLExchange interface {
	Authenticate(ctx context.Context, host string, step func([]byte) ([]byte, error)) error
}

// SASLConfig is sasl.mechanism with its credentials. It is used by pointer: the counters and
// the OAUTHBEARER token it holds are shared by every connection made with it.
type SASLConfig struct {
	Mechanism string // SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer, or Exchange's
	Username  string
	Password  string
	// OAuth is how OAUTHBEARER gets its token; required with that mechanism.
	OAuth *OAuthBearerConfig
	// Exchange runs any other mechanism (Mechanism names it in the SaslHandshake).
	Exchange SASLExchange

	authentications, reauthentications atomic.Int64
	lastSessionLifetime                atomic.Int64 // milliseconds
	responsesDuringReauth              atomic.Int64
}

// SASLStats counts what connections made with a SASLConfig did.
type SASLStats struct {
	// Authentications counts successful exchanges on new connections, Reauthentications those
	// on established ones before their session ended (KIP-368).
	Authentications, Reauthentications int64
	// TokenFetches counts OAUTHBEARER tokens fetched (or read from their file), TokenFailures
	// the fetches that failed.
	TokenFetches, TokenFailures int64
	// ResponsesDuringReauthentication counts responses to requests in flight that arrived while
	// their connection re-authenticated: they were delivered, in order, not lost.
	ResponsesDuringReauthentication int64
	// SessionLifetime is the last session lifetime a broker gave (session_lifetime_ms of
	// SaslAuthenticate, KIP-368), zero if none.
	SessionLifetime time.Duration
}

// Stats returns the counters so far.
func (c *SASLConfig) Stats() SASLStats {
	st := SASLStats{Authentications: c.authentications.Load(), Reauthentications: c.reauthentications.Load(),
		SessionLifetime:                 time.Duration(c.lastSessionLifetime.Load()) * time.Millisecond,
		ResponsesDuringReauthentication: c.responsesDuringReauth.Load()}
	if c.OAuth != nil {
		p := c.OAuth.provider()
		st.TokenFetches, st.TokenFailures = p.fetches.Load(), p.failures.Load()
	}
	return st
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
	// NoRebootstrap is metadata.recovery.strategy=none: the client never goes back to the
	// bootstrap servers by itself (only the Java client's default, rebootstrap, does: KIP-899
	// when no broker it knows can be reached, KIP-1102 after RebootstrapTrigger without a
	// metadata update and when a broker answers REBOOTSTRAP_REQUIRED).
	NoRebootstrap bool
	// RebootstrapTrigger is metadata.recovery.rebootstrap.trigger.ms (default 300 s).
	RebootstrapTrigger time.Duration
	// MaxVersions caps the version used per API key below what kmsg and the broker support.
	// Produce is capped at v12 unless the map sets key 0: v13 names topics by id only, and the
	// producer names them.
	MaxVersions map[int16]int16
	// Log receives what the client decides by itself that an operator should know (a
	// rebootstrap); nil discards it.
	Log *slog.Logger
	// Observer, when set, is told of connection states and setups and of every request (telemetry).
	Observer Observer
	// Clock reads the time a request's stages are stamped with where each happens (Queued in
	// doSend, Written by the connection's writer, Received by its reader), so it must be safe
	// for concurrent use; nil uses time.Now. The producer passes its own clock, so that a
	// record's stage timestamps from the accumulator and from here are readings of one clock.
	Clock func() time.Time
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
	setDur(&c.RebootstrapTrigger, DefaultRebootstrapTrigger)
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
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a configuration the client cannot work with, naming the Java key.
func (c Config) Validate() error {
	if c.SASL != nil {
		switch c.SASL.Mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		case SASLOAuthBearer:
			if c.SASL.OAuth == nil {
				return errors.New("sasl.oauthbearer.token.endpoint.url: required with sasl.mechanism=OAUTHBEARER")
			}
			if err := c.SASL.OAuth.Validate(); err != nil {
				return err
			}
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
