package network

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
)

func TestOAuthBearerInitialResponse(t *testing.T) {
	// RFC 7628 section 3.1, as Java's OAuthBearerClientInitialResponse.toBytes writes it.
	if got, want := string(oauthBearerInitialResponse("abc.def.ghi", nil)), "n,,\x01auth=Bearer abc.def.ghi\x01\x01"; got != want {
		t.Fatalf("initial response %q, want %q", got, want)
	}
}

// TestTokenRefreshTime checks the schedule of ExpiringCredentialRefreshingLogin.refreshMs.
func TestTokenRefreshTime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := newTokenProvider(&OAuthBearerConfig{RefreshWindowJitter: 0.05})
	between := func(name string, got time.Time, lo, hi time.Duration) {
		t.Helper()
		if d := got.Sub(now); d < lo || d > hi {
			t.Errorf("%s: refresh after %v, want within [%v, %v]", name, d, lo, hi)
		}
	}
	// Too short-lived for the 60 s minimum period and 300 s buffer: 80-85 % of what is left.
	between("10 s token", p.refreshTime(&token{start: now, exp: now.Add(10 * time.Second)}, now), 8*time.Second, 8500*time.Millisecond)
	// An hour: 80-85 % of the lifetime, before the buffer.
	between("1 h token", p.refreshTime(&token{start: now, exp: now.Add(time.Hour)}, now), 2880*time.Second, 3060*time.Second)
	// Fetched late in its life (issued 50 min ago): the proposed time is past, the minimum
	// period holds it off.
	between("old token", p.refreshTime(&token{start: now.Add(-50 * time.Minute), exp: now.Add(10 * time.Minute)}, now), 60*time.Second, 60*time.Second)
	// Factor 1: the buffer before expiry wins.
	p1 := newTokenProvider(&OAuthBearerConfig{RefreshWindowFactor: 1})
	between("factor 1", p1.refreshTime(&token{start: now, exp: now.Add(time.Hour)}, now), 3300*time.Second, 3300*time.Second)
}

// TestTokenProviderRefreshAndBackoff: a token is reused until its refresh time, refreshed after
// it; a failed refresh keeps the still-valid token and waits out the doubling retry backoff
// before the endpoint is asked again; once the token expired, the failure is the caller's.
func TestTokenProviderRefreshAndBackoff(t *testing.T) {
	srv, err := oauthtest.Start(oauthtest.Options{ClientID: "c1", ClientSecret: testClientSecret, Lifetime: 100 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := &OAuthBearerConfig{TokenEndpointURL: srv.TokenURL, ClientID: "c1", ClientSecret: testClientSecret,
		RefreshWindowFactor: 0.5, RetryBackoff: time.Second, RetryBackoffMax: 3 * time.Second}
	p := cfg.provider()
	ctx := context.Background()
	now := time.Now()
	t1, err := p.get(ctx, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if t2, _ := p.get(ctx, now.Add(10*time.Second), 0); t2 != t1 || srv.Fetches.Load() != 1 {
		t.Fatalf("token fetched again before its refresh time (%d fetches)", srv.Fetches.Load())
	}
	// 100 s tokens refresh at half their life left: about 50 s.
	later := now.Add(51 * time.Second)
	t2, err := p.get(ctx, later, 0)
	if err != nil || t2 == t1 || srv.Fetches.Load() != 2 {
		t.Fatalf("no refresh after the refresh time: %v, %d fetches", err, srv.Fetches.Load())
	}

	srv.FailWith(http.StatusServiceUnavailable)
	due := now.Add(77 * time.Second) // t2, fetched at 51 s, expires at about 100 s: due at about 75 s

	if got, err := p.get(ctx, due, 0); err != nil || got != t2 {
		t.Fatalf("failed refresh of a valid token: %v, want the token kept", err)
	}
	if got, _ := p.get(ctx, due.Add(500*time.Millisecond), 0); got != t2 || srv.Refused.Load() != 1 {
		t.Fatalf("endpoint asked again within the retry backoff (%d requests refused)", srv.Refused.Load())
	}
	p.get(ctx, due.Add(1100*time.Millisecond), 0) // after 1 s: the second attempt, backoff now 2 s
	if srv.Refused.Load() != 2 {
		t.Fatalf("%d attempts after the backoff, want 2", srv.Refused.Load())
	}
	p.get(ctx, due.Add(2500*time.Millisecond), 0) // within the doubled backoff
	if srv.Refused.Load() != 2 {
		t.Fatal("backoff did not double")
	}
	// Past the token's expiry the failure is returned.
	_, err = p.get(ctx, t2.exp.Add(time.Minute), 0)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "OAUTHBEARER") {
		t.Fatalf("expired token and failing endpoint: %v", err)
	}
	var authErr *AuthenticationError
	if errors.As(err, &authErr) {
		t.Fatalf("a 503 is an authentication error (fails fast): %v", err)
	}
	if st := (&SASLConfig{OAuth: cfg}).Stats(); st.TokenFetches != 2 || st.TokenFailures != 3 {
		t.Fatalf("stats %+v, want 2 fetches and 3 failures", st)
	}
}

// TestTokenEndpointRefusal: a 4xx from the endpoint (a wrong secret) is an authentication error
// that names the mechanism and the endpoint's error, without the secret or URL credentials.
func TestTokenEndpointRefusal(t *testing.T) {
	srv, err := oauthtest.Start(oauthtest.Options{ClientID: "c1", ClientSecret: "right"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := strings.Replace(srv.TokenURL, "http://", "http://user:url-password@", 1)
	p := (&OAuthBearerConfig{TokenEndpointURL: url, ClientID: "c1", ClientSecret: testClientSecret}).provider()
	_, err = p.get(context.Background(), time.Now(), 0)
	var authErr *AuthenticationError
	if !errors.As(err, &authErr) || authErr.Mechanism != SASLOAuthBearer || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("refused client: %v", err)
	}
	for _, secret := range []string{testClientSecret, "url-password"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows a secret: %v", err)
		}
	}
}

// TestTokenFileReadAtEveryAuthentication: a token file is read again each time, so a process
// that rewrites it is followed at once.
func TestTokenFileReadAtEveryAuthentication(t *testing.T) {
	srv, err := oauthtest.Start(oauthtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	now := time.Now()
	write := func(sub string) string {
		tok := srv.Sign(oauthtest.Claims{Subject: sub, IssuedAt: now, Expires: now.Add(time.Hour)})
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cfg := &OAuthBearerConfig{TokenEndpointURL: "file://" + file}
	for _, sub := range []string{"first", "second"} {
		want := write(sub)
		got, err := cfg.provider().get(context.Background(), now, 0)
		if err != nil || got.value != want || got.claims.Sub != sub {
			t.Fatalf("token %q: got %v, %v", sub, got, err)
		}
	}
	os.WriteFile(file, []byte("not-a-jwt"), 0o600)
	if _, err := cfg.provider().get(context.Background(), now, 0); err == nil || !strings.Contains(err.Error(), "not a JWT") {
		t.Fatalf("a file without a JWT: %v", err)
	}
}

func TestOAuthBearerConfigValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, tc := range []struct {
		cfg  *OAuthBearerConfig
		want string // "" for valid
	}{
		{&OAuthBearerConfig{TokenEndpointURL: "https://idp.example/token", ClientID: "c", ClientSecret: "s"}, ""},
		{&OAuthBearerConfig{TokenEndpointURL: "file://" + file}, ""},
		{&OAuthBearerConfig{}, "sasl.oauthbearer.token.endpoint.url"},
		{&OAuthBearerConfig{TokenEndpointURL: "ftp://idp.example/token", ClientID: "c", ClientSecret: "s"}, "sasl.oauthbearer.token.endpoint.url"},
		{&OAuthBearerConfig{TokenEndpointURL: "file:///does/not/exist"}, "sasl.oauthbearer.token.endpoint.url"},
		{&OAuthBearerConfig{TokenEndpointURL: "https://idp.example/token", ClientSecret: "s"}, "sasl.oauthbearer.client.id"},
		{&OAuthBearerConfig{TokenEndpointURL: "https://idp.example/token", ClientID: "c"}, "sasl.oauthbearer.client.secret"},
		{&OAuthBearerConfig{TokenEndpointURL: "https://idp.example/token", ClientID: "c", ClientSecret: "s", RefreshWindowFactor: 0.3}, "sasl.login.refresh.window.factor"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate(%q) = %v, want %q", tc.cfg.TokenEndpointURL, err, tc.want)
		}
	}
}

// TestCorrelationIDsAvoidTheSASLRange: the client's ids wrap to 0 before the ids the SASL
// exchange reserves, so a re-authentication's response is never taken for a request's.
func TestCorrelationIDsAvoidTheSASLRange(t *testing.T) {
	c := &NetworkClient{correlation: minReservedCorrelationID - 2}
	for _, want := range []int32{minReservedCorrelationID - 2, minReservedCorrelationID - 1, 0, 1} {
		if got := c.nextCorrelationID(); got != want {
			t.Fatalf("next id %d, want %d", got, want)
		}
	}
}

// TestTokenRefreshedForAFullSession: a re-authentication asks for a token valid at least as long
// as the session it renews; one closer to its expiry is refreshed although its refresh time has
// not come, so that the broker's next session is not cut short by the token.
func TestTokenRefreshedForAFullSession(t *testing.T) {
	srv, err := oauthtest.Start(oauthtest.Options{ClientID: "c1", ClientSecret: "s", Lifetime: 100 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := (&OAuthBearerConfig{TokenEndpointURL: srv.TokenURL, ClientID: "c1", ClientSecret: "s"}).provider()
	now := time.Now()
	t1, _ := p.get(context.Background(), now, 0)
	if t2, _ := p.get(context.Background(), now.Add(time.Second), 30*time.Second); t2 != t1 {
		t.Fatal("refreshed a token valid for much longer than the session")
	}
	t3, err := p.get(context.Background(), now.Add(75*time.Second), 30*time.Second)
	if err != nil || t3 == t1 || srv.Fetches.Load() != 2 {
		t.Fatalf("a token with about 25 s left was reused for a 30 s session (%v, %d fetches)", err, srv.Fetches.Load())
	}
}

func TestReauthenticationTime(t *testing.T) {
	start := time.Unix(1000, 0)
	for range 100 {
		if d := reauthenticationTime(start, 10*time.Second).Sub(start); d < 8500*time.Millisecond || d > 9500*time.Millisecond {
			t.Fatalf("10 s session re-authenticated after %v, want 85-95 %%", d)
		}
	}
	// The broker refuses a re-authentication within a second of the previous one.
	if d := reauthenticationTime(start, 500*time.Millisecond).Sub(start); d != time.Second {
		t.Fatalf("0.5 s session re-authenticated after %v, want the broker's 1 s minimum", d)
	}
	if !reauthenticationTime(start, 0).IsZero() {
		t.Fatal("a session without lifetime is re-authenticated")
	}
}
