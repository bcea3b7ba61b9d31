package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"

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

// saslSession runs the SASL exchange on a fresh connection, before the selector sees it, with
// plain blocking reads and writes: SaslHandshake v1 names the mechanism, then SaslAuthenticate
// requests carry the mechanism's messages (KIP-152).
type saslSession struct {
	conn          net.Conn
	br            *bufio.Reader
	formatter     *kmsg.RequestFormatter
	maxSize       int32
	correlationID int32
	mechanism     string
}

// roundTrip writes req and reads its response, checking the correlation id. SASL requests use
// non-flexible response headers at the versions sent here, so no tags are skipped.
func (s *saslSession) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	s.correlationID++
	if _, err := s.conn.Write(s.formatter.AppendRequest(nil, req, s.correlationID)); err != nil {
		return nil, err
	}
	payload, err := readFrame(s.br, s.maxSize)
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

// authenticate runs the whole SASL exchange of cfg on conn. A wrong password or mechanism yields an
// *AuthenticationError; a broken connection yields a plain error (retried as a disconnect).
func authenticate(conn net.Conn, cfg *SASLConfig, clientID string, maxSize int32) error {
	s := &saslSession{
		conn:      conn,
		br:        bufio.NewReader(conn),
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		maxSize:   maxSize,
		mechanism: cfg.Mechanism,
	}
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
	}
	return s.authFailed(fmt.Errorf("unsupported mechanism %q", cfg.Mechanism), "")
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
	return ar.SASLAuthBytes, nil
}
