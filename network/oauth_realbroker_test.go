package network

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
	"github.com/kafkatrail/kafkatrail/metadata"
)

const testClientSecret = "s3cret-never-printed"

// TestRealBrokerOAuthBearer authenticates with OAUTHBEARER to the real broker, whose
// OAuthBearerValidatorCallbackHandler checks the token's signature against the JWKS, its
// audience, issuer and expiry. A refused token fails the node fast with an error naming the
// mechanism and the broker's message; the client secret appears in no error.
func TestRealBrokerOAuthBearer(t *testing.T) {
	b := oauthtest.RealBroker(t)
	t.Run("client-credentials", func(t *testing.T) {
		srv := oauthtest.StartForBroker(t, b, "producer-1", testClientSecret, time.Hour)
		sasl := &SASLConfig{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearerConfig{
			TokenEndpointURL: srv.TokenURL, ClientID: "producer-1", ClientSecret: testClientSecret, Scope: "kafka.write"}}
		topic := kafkatest.NewTopic(t, 1)
		c, meta := newTestClient(t, []string{b.Bootstrap}, Config{SASL: sasl})
		checkConsumed(t, topic, produceToRealBroker(t, c, meta, topic, "oauth", 5))
		st := sasl.Stats()
		// One token for every connection (bootstrap and leader may be two): fetched once.
		if st.TokenFetches != 1 || srv.Fetches.Load() != 1 || st.Authentications < 1 {
			t.Fatalf("stats %+v, server fetches %d; want one token fetched and used", st, srv.Fetches.Load())
		}
		if srv.LastScope() != "kafka.write" {
			t.Fatalf("scope asked = %q", srv.LastScope())
		}
		if got := st.SessionLifetime; got <= 0 || got > b.Reauth {
			t.Fatalf("broker's session lifetime %v, want (0, %v] (connections.max.reauth.ms)", got, b.Reauth)
		}
	})

	refused := func(t *testing.T, sasl *SASLConfig, wants ...string) {
		t.Helper()
		c, _ := newTestClient(t, []string{b.Bootstrap}, Config{SASL: sasl, ReconnectBackoff: time.Second, ReconnectBackoffMax: 5 * time.Second})
		start := time.Now()
		pollUntil(t, c, 10*time.Second, "authentication failure", func() bool { return c.AuthenticationError(-1) != nil })
		err := c.AuthenticationError(-1)
		var authErr *AuthenticationError
		if !errors.As(err, &authErr) || authErr.Mechanism != SASLOAuthBearer || !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("authentication error = %v", err)
		}
		for _, w := range append([]string{"sasl OAUTHBEARER authentication", "invalid_token"}, wants...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if strings.Contains(err.Error(), testClientSecret) {
			t.Fatalf("error prints the client secret: %v", err)
		}
		t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Run("wrong-audience", func(t *testing.T) {
		srv := oauthtest.StartForBroker(t, b, "producer-1", testClientSecret, time.Hour)
		srv.SetAudience("another-service")
		refused(t, &SASLConfig{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearerConfig{
			TokenEndpointURL: srv.TokenURL, ClientID: "producer-1", ClientSecret: testClientSecret}},
			`aud="another-service"`)
	})
	t.Run("expired-token-file", func(t *testing.T) {
		srv := oauthtest.StartForBroker(t, b, "", "", time.Hour)
		now := time.Now()
		tok := srv.Sign(oauthtest.Claims{Subject: "producer-1", Issuer: b.Issuer, Audience: b.Audience,
			IssuedAt: now.Add(-time.Minute), Expires: now.Add(-10 * time.Second)})
		file := filepath.Join(t.TempDir(), "token.jwt")
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, &SASLConfig{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearerConfig{TokenEndpointURL: "file://" + file}},
			"expired")
	})
	t.Run("refused-at-reauthentication", func(t *testing.T) {
		// Tokens of 4 s and sessions of 3 s: the connection's re-authentication needs a new
		// token (the old one would not last the session), which the server now issues for
		// another audience. The broker refuses it: the connection must close with that
		// authentication error (not the EOF that follows it), and the node fail as after an
		// initial refusal.
		srv := oauthtest.StartForBroker(t, b, "producer-1", testClientSecret, 4*time.Second)
		sasl := &SASLConfig{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearerConfig{
			TokenEndpointURL: srv.TokenURL, ClientID: "producer-1", ClientSecret: testClientSecret}}
		topic := kafkatest.NewTopic(t, 1)
		c, meta := newTestClient(t, []string{b.Bootstrap}, Config{SASL: sasl, ReconnectBackoff: time.Second, ReconnectBackoffMax: 5 * time.Second})
		produceToRealBroker(t, c, meta, topic, "before", 1)
		srv.SetAudience("another-service")
		leaderID, _ := meta.Fetch().LeaderFor(metadata.TopicPartition{Topic: topic})
		leader, _ := meta.Fetch().Node(leaderID)
		deadline := time.Now().Add(15 * time.Second)
		var lastErr error
		for time.Now().Before(deadline) && c.AuthenticationError(leader.ID) == nil {
			if c.IsReady(leader.ID, time.Now()) {
				got := sendAndWaitBody(t, c, leader, produceRequest(topic, 0, []byte("v"), -1))
				lastErr = got.Err
			} else {
				c.Poll(50*time.Millisecond, time.Now())
			}
		}
		err := c.AuthenticationError(leader.ID)
		var authErr *AuthenticationError
		if !errors.As(err, &authErr) || authErr.Mechanism != SASLOAuthBearer || !strings.Contains(err.Error(), "another-service") ||
			lastErr == nil || !strings.Contains(lastErr.Error(), "re-authentication") || !strings.Contains(lastErr.Error(), "invalid_token") {
			t.Fatalf("after the refused re-authentication: node error %v, last request error %v; stats %+v", err, lastErr, sasl.Stats())
		}
		if st := sasl.Stats(); st.TokenFetches != 2 || st.Authentications != 2 {
			t.Fatalf("stats %+v: want the bootstrap and leader connections authenticated once, and one new token", st)
		}
	})
	t.Run("wrong-client-secret", func(t *testing.T) {
		srv := oauthtest.StartForBroker(t, b, "producer-1", testClientSecret, time.Hour)
		sasl := &SASLConfig{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearerConfig{
			TokenEndpointURL: srv.TokenURL, ClientID: "producer-1", ClientSecret: "not-" + testClientSecret}}
		c, _ := newTestClient(t, []string{b.Bootstrap}, Config{SASL: sasl, ReconnectBackoff: time.Second, ReconnectBackoffMax: 5 * time.Second})
		pollUntil(t, c, 10*time.Second, "authentication failure", func() bool { return c.AuthenticationError(-1) != nil })
		err := c.AuthenticationError(-1)
		if !strings.Contains(err.Error(), "OAUTHBEARER") || !strings.Contains(err.Error(), "invalid_client") ||
			strings.Contains(err.Error(), testClientSecret) {
			t.Fatalf("authentication error = %v", err)
		}
	})
}
