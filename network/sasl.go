package network

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// AuthenticationError is a SASL failure. It carries the broker's message, which usually says
// what is wrong (bad credentials, unknown mechanism); retrying without a config change will not
// help, so the node waits out its reconnect backoff and the producer may fail fast.
type AuthenticationError struct {
	Node      int32
	Mechanism string
	// Message is the broker's error message, or ours when the failure was local.
	Message string
	// Err is the Kafka error (kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, ...)
	// or the local cause.
	Err error
}

// Error implements error, naming the mechanism, the node and the broker's message.
func (e *AuthenticationError) Error() string {
	kind := "sasl " + e.Mechanism
	if e.Mechanism == "TLS" {
		kind = "tls"
	}
	msg := fmt.Sprintf("network: %s authentication with node %d failed", kind, e.Node)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the Kafka error or local cause, for errors.Is(err, kerr.SaslAuthenticationFailed).
func (e *AuthenticationError) Unwrap() error { return e.Err }

// Correlation ids from minReservedCorrelationID up are the SASL exchange's, as in the Java
// client (SaslClientAuthenticator.MIN_RESERVED_CORRELATION_ID): the NetworkClient never uses
// them, so a re-authentication's responses are told apart from those of requests in flight.
const (
	maxReservedCorrelationID = math.MaxInt32
	minReservedCorrelationID = maxReservedCorrelationID - 7
)

// isReservedCorrelationID reports whether a response with this id belongs to the SASL exchange.
func isReservedCorrelationID(id int32) bool { return id >= minReservedCorrelationID }

// saslSession runs the SASL exchange over plain blocking calls: SaslHandshake v1 names the
// mechanism, then SaslAuthenticate requests carry the mechanism's messages (KIP-152). On a fresh
// connection it reads the socket itself; a re-authentication (KIP-368) gets its responses from
// the connection's reader, which hands over those with a reserved correlation id.
type saslSession struct {
	write         func([]byte) error
	recv          func() ([]byte, error)
	formatter     *kmsg.RequestFormatter
	correlationID int32
	mechanism     string
	host          string // the broker's, for an Exchange
	// sessionLifetime is the last SaslAuthenticate response's session_lifetime_ms: how long the
	// broker keeps the session before the client must re-authenticate (zero: no limit).
	sessionLifetime time.Duration
	// minTokenValidity is how long an OAUTHBEARER token must stay valid to be sent: on a
	// re-authentication, the lifetime of the session it renews (see tokenProvider.get).
	minTokenValidity time.Duration
}

func newSASLSession(cfg *SASLConfig, clientID string, write func([]byte) error, recv func() ([]byte, error)) *saslSession {
	return &saslSession{
		write:         write,
		recv:          recv,
		formatter:     kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		correlationID: minReservedCorrelationID - 1,
		mechanism:     cfg.Mechanism,
	}
}

// connSASLSession is the session of a fresh connection, which nothing else reads yet.
func connSASLSession(conn net.Conn, cfg *SASLConfig, clientID string, maxSize int32) *saslSession {
	br := bufio.NewReader(conn)
	return newSASLSession(cfg, clientID,
		func(b []byte) error { _, err := conn.Write(b); return err },
		func() ([]byte, error) { return readFrame(br, maxSize) })
}

// roundTrip writes req and reads its response, checking the correlation id. SASL requests use
// non-flexible response headers at the versions sent here, so no tags are skipped.
func (s *saslSession) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	if s.correlationID >= maxReservedCorrelationID || s.correlationID < minReservedCorrelationID {
		s.correlationID = minReservedCorrelationID
	} else {
		s.correlationID++
	}
	if err := s.write(s.formatter.AppendRequest(nil, req, s.correlationID)); err != nil {
		return nil, err
	}
	payload, err := s.recv()
	if err != nil {
		return nil, err
	}
	if len(payload) < 4 {
		return nil, errors.New("network: sasl response shorter than its header")
	}
	if got := int32(binary.BigEndian.Uint32(payload)); got != s.correlationID {
		return nil, &CorrelationIDMismatchError{Expected: s.correlationID, Got: got}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(payload[4:]); err != nil {
		return nil, fmt.Errorf("network: decode %T: %w", resp, err)
	}
	return resp, nil
}

func (s *saslSession) authFailed(err error, message string) error {
	return &AuthenticationError{Mechanism: s.mechanism, Message: message, Err: err}
}

// authenticate runs the whole SASL exchange of cfg. A wrong password, mechanism or token yields
// an *AuthenticationError; a broken connection yields a plain error (retried as a disconnect).
func (s *saslSession) authenticate(ctx context.Context, cfg *SASLConfig) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = cfg.Mechanism
	resp, err := s.roundTrip(hs)
	if err != nil {
		return fmt.Errorf("network: sasl handshake: %w", err)
	}
	hsResp := resp.(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return s.authFailed(err, fmt.Sprintf("broker enabled mechanisms %v", hsResp.SupportedMechanisms))
	}

	switch cfg.Mechanism {
	case SASLPlain:
		msg := slices.Concat([]byte{0}, []byte(cfg.Username), []byte{0}, []byte(cfg.Password))
		_, err := s.step(msg)
		return err
	case SASLScramSHA256, SASLScramSHA512:
		hash := scram.SHA256
		if cfg.Mechanism == SASLScramSHA512 {
			hash = scram.SHA512
		}
		client, err := hash.NewClient(cfg.Username, cfg.Password, "")
		if err != nil {
			return s.authFailed(err, "")
		}
		conv := client.NewConversation()
		var challenge string
		for !conv.Done() {
			msg, err := conv.Step(challenge)
			if err != nil {
				// A server signature that does not verify lands here: the broker is not who
				// it claims, which is an authentication failure, not a network one.
				return s.authFailed(err, "")
			}
			if conv.Done() && msg == "" {
				break
			}
			reply, err := s.step([]byte(msg))
			if err != nil {
				return err
			}
			challenge = string(reply)
		}
		if !conv.Valid() {
			return s.authFailed(errors.New("server signature did not verify"), "")
		}
		return nil
	case SASLOAuthBearer:
		return s.oauthBearer(ctx, cfg)
	}
	if cfg.Exchange != nil {
		return cfg.Exchange.Authenticate(ctx, s.host, s.step)
	}
	return s.authFailed(fmt.Errorf("unsupported mechanism %q", cfg.Mechanism), "")
}

// oauthBearer sends the token, as Java's OAuthBearerSaslClient: an empty reply is success; a
// non-empty one is the broker's error (RFC 7628 section 3.2.2, a JSON status), which the client
// acknowledges with a single 0x01 so that the broker ends the exchange with its error message.
// A refused token's error says which token was sent (its subject, audience and expiry).
func (s *saslSession) oauthBearer(ctx context.Context, cfg *SASLConfig) error {
	now := time.Now()
	tok, err := cfg.OAuth.provider().get(ctx, now, s.minTokenValidity)
	if err != nil {
		return err
	}
	withToken := func(err error) error {
		var authErr *AuthenticationError
		if errors.As(err, &authErr) {
			authErr.Message = strings.TrimPrefix(authErr.Message+"; ", "; ") + "sent " + tok.describe(now)
		}
		return err
	}
	reply, err := s.step(oauthBearerInitialResponse(tok.value, cfg.OAuth.Extensions))
	if err != nil {
		return withToken(err)
	}
	if len(reply) == 0 {
		return nil
	}
	if _, err := s.step([]byte{0x01}); err != nil {
		return withToken(err)
	}
	return withToken(s.authFailed(kerr.SaslAuthenticationFailed, "broker answered "+clip(string(reply))))
}

// step sends one SaslAuthenticate v1 message and returns the broker's reply bytes.
func (s *saslSession) step(msg []byte) ([]byte, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = msg
	resp, err := s.roundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("network: sasl authenticate: %w", err)
	}
	ar := resp.(*kmsg.SASLAuthenticateResponse)
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		var msg string
		if ar.ErrorMessage != nil {
			msg = *ar.ErrorMessage
		}
		return nil, s.authFailed(err, msg)
	}
	s.sessionLifetime = time.Duration(ar.SessionLifetimeMillis) * time.Millisecond
	return ar.SASLAuthBytes, nil
}

// minReauthenticationInterval is the least time between two re-authentications of a connection
// the broker allows (KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS): a SaslHandshake sooner
// is refused with ILLEGAL_SASL_STATE.
const minReauthenticationInterval = time.Second

// reauthenticationTime is when a session of lifetime d that began at start is re-authenticated:
// at 85 % to 95 % of it, as Java's SaslClientAuthenticator.ReauthInfo does (the 85 % leaves room
// for latency and clock drift, the 10 % jitter spreads many connections' re-authentications),
// but not within the broker's minimum interval: a session shorter than that ends, and the
// broker closes the connection, which is then made again. Zero when the broker set no lifetime.
func reauthenticationTime(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return start.Add(max(time.Duration(float64(d)*(0.85+0.10*rand.Float64())), minReauthenticationInterval))
}
