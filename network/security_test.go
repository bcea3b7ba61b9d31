package network

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

func TestSASLAgainstKfake(t *testing.T) {
	for _, mechanism := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mechanism, func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.EnableSASL(), kfake.Superuser(mechanism, "alice", "alice-secret"))
			c, meta := newTestClient(t, cluster.ListenAddrs(), Config{
				SASL: &SASLConfig{Mechanism: mechanism, Username: "alice", Password: "alice-secret"},
			})
			meta.Add("events", time.Now())
			cl := awaitMetadata(t, c, meta)
			if cl.PartitionCount("events") != 3 {
				t.Fatalf("partitions = %d", cl.PartitionCount("events"))
			}
			leader := cl.Nodes()[0]
			awaitReady(t, c, leader)
			if got := sendAndWait(t, c, leader); got.Err != nil {
				t.Fatalf("produce over SASL: %v", got.Err)
			}
		})
	}
}

// TestSASLWrongPasswordRespectsBackoff uses the fake broker, which answers a failed
// SaslAuthenticate with SASL_AUTHENTICATION_FAILED and a message as Apache Kafka does (kfake
// closes the connection instead).
func TestSASLWrongPasswordRespectsBackoff(t *testing.T) {
	const brokerMessage = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	b := startFakeBroker(t, 0, func(w io.Writer, req fakeRequest) {
		switch body := req.body.(type) {
		case *kmsg.SASLHandshakeRequest:
			resp := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
			resp.SupportedMechanisms = []string{SASLScramSHA256}
			writeResponse(w, req, req.correlation, resp)
		case *kmsg.SASLAuthenticateRequest:
			resp := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr(brokerMessage)
			writeResponse(w, req, req.correlation, resp)
		}
	})
	var dials atomic.Int32
	var d net.Dialer
	c, meta := newTestClient(t, []string{b.addr()}, Config{
		SASL:                &SASLConfig{Mechanism: SASLScramSHA256, Username: "alice", Password: "wrong"},
		ReconnectBackoff:    500 * time.Millisecond,
		ReconnectBackoffMax: 5 * time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	})
	pollUntil(t, c, 5*time.Second, "authentication failure", func() bool { return c.AuthenticationError(-1) != nil })
	var authErr *AuthenticationError
	if err := c.AuthenticationError(-1); !errors.As(err, &authErr) || authErr.Node != -1 || authErr.Mechanism != SASLScramSHA256 {
		t.Fatalf("authentication error = %v", err)
	}
	if !errors.Is(authErr, kerr.SaslAuthenticationFailed) || authErr.Message != brokerMessage {
		t.Fatalf("want SASL_AUTHENTICATION_FAILED with the broker's message, got %v", authErr)
	}
	if c.ConnectionState(-1) != AuthenticationFailed || !c.ConnectionFailed(-1) {
		t.Fatalf("state = %v", c.ConnectionState(-1))
	}
	// The waiting producer learns at once instead of after max.block.ms.
	if err := meta.AwaitUpdate(context.Background(), meta.Version(), time.Now().Add(time.Second)); !errors.As(err, &authErr) {
		t.Fatalf("AwaitUpdate = %v, want the authentication error", err)
	}
	// No retry storm: the backoff (two failures' worth, about 1s) holds further dials.
	deadline := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(deadline) {
		c.Poll(20*time.Millisecond, time.Now())
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("dialed %d times inside the reconnect backoff", n)
	}
	if d := c.ConnectionDelay(-1, time.Now()); d <= 0 {
		t.Fatalf("connection delay %v after an authentication failure", d)
	}
}

// TestSASLWrongPasswordKfake: kfake drops the connection on bad credentials; that is a plain
// disconnect (as the Java client treats a connection closed during authentication), and the node
// still waits out its backoff.
func TestSASLWrongPasswordKfake(t *testing.T) {
	cluster := newFakeCluster(t, kfake.EnableSASL(), kfake.Superuser(SASLScramSHA512, "alice", "alice-secret"))
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{
		SASL:             &SASLConfig{Mechanism: SASLScramSHA512, Username: "alice", Password: "wrong"},
		ReconnectBackoff: time.Second, ReconnectBackoffMax: 2 * time.Second,
	})
	pollUntil(t, c, 5*time.Second, "connection failure", func() bool { return c.ConnectionFailed(-1) })
	if !c.states.IsBlackedOut(-1, time.Now()) {
		t.Fatal("node not in backoff after a failed authentication")
	}
	if !meta.Fetch().IsBootstrap() {
		t.Fatal("metadata fetched without authenticating")
	}
}

// selfSignedTLS returns a server config with a certificate for 127.0.0.1 and localhost, and a
// client config trusting it.
func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kafkatrail test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}

func TestTLSAgainstKfake(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	cluster := newFakeCluster(t, kfake.TLS(serverTLS))
	c, meta := newTestClient(t, cluster.ListenAddrs(), Config{TLS: clientTLS})
	leader := eventsLeader(t, c, meta)
	if got := sendAndWait(t, c, leader); got.Err != nil {
		t.Fatalf("produce over TLS: %v", got.Err)
	}
}

// TestTLSHostnameVerification checks that the certificate must name the host we dial: a wrong
// ServerName, or an untrusted certificate, fails the connection.
func TestTLSHostnameVerification(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	cluster := newFakeCluster(t, kfake.TLS(serverTLS))
	addr := cluster.ListenAddrs()[0]

	wrongName := clientTLS.Clone()
	wrongName.ServerName = "broker.example.com"
	untrusted := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want any
	}{
		{"wrong server name", wrongName, new(x509.HostnameError)},
		{"untrusted certificate", untrusted, new(x509.UnknownAuthorityError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := connectOnce(t, Config{TLS: tc.cfg}, addr)
			if err == nil {
				t.Fatal("connected despite a certificate that must not verify")
			}
			var hostErr x509.HostnameError
			var authErr x509.UnknownAuthorityError
			switch tc.want.(type) {
			case *x509.HostnameError:
				if !errors.As(err, &hostErr) {
					t.Fatalf("error %v, want a hostname error", err)
				}
			case *x509.UnknownAuthorityError:
				if !errors.As(err, &authErr) {
					t.Fatalf("error %v, want an unknown authority error", err)
				}
			}
		})
	}
	t.Run("localhost is in the certificate", func(t *testing.T) {
		cfg := clientTLS.Clone()
		cfg.ServerName = "localhost"
		if err := connectOnce(t, Config{TLS: cfg}, addr); err != nil {
			t.Fatal(err)
		}
	})
}

// connectOnce opens one selector connection to addr and returns nil once connected, or the
// disconnection's cause.
func connectOnce(t *testing.T, cfg Config, addr string) error {
	t.Helper()
	s := NewSelector(cfg)
	defer func() {
		if err := s.CloseAll(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if err := s.Connect(1, addr); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		res := s.Poll(50 * time.Millisecond)
		if len(res.Connected) > 0 {
			return nil
		}
		if len(res.Disconnected) > 0 {
			return res.Disconnected[0].Err
		}
	}
	t.Fatal("no connection outcome")
	return nil
}

// TestClientNodeAddrWithTLS pins that ServerName comes from the dialed host when unset.
func TestClientNodeAddrWithTLS(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	cluster := newFakeCluster(t, kfake.TLS(serverTLS))
	_, port := splitAddr(t, cluster.ListenAddrs()[0])
	// "localhost" is in the certificate and must be the verified name when dialed by that name.
	node := metadata.Node{ID: 5, Host: "localhost", Port: port}
	if err := connectOnce(t, Config{TLS: clientTLS}, node.Addr()); err != nil {
		t.Fatalf("dial by host name: %v", err)
	}
}
