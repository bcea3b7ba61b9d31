package network

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the OAUTHBEARER login, after the Java client's SaslConfigs.
const (
	DefaultLoginRefreshWindowFactor = 0.8              // sasl.login.refresh.window.factor
	DefaultLoginRefreshWindowJitter = 0.05             // sasl.login.refresh.window.jitter
	DefaultLoginRefreshMinPeriod    = 60 * time.Second // sasl.login.refresh.min.period.seconds
	DefaultLoginRefreshBuffer       = 300 * time.Second
	DefaultLoginRetryBackoff        = 100 * time.Millisecond // sasl.login.retry.backoff.ms
	DefaultLoginRetryBackoffMax     = 10 * time.Second       // sasl.login.retry.backoff.max.ms
	// DefaultLoginTimeout bounds connecting to and reading from the token endpoint
	// (sasl.login.connect.timeout.ms, sasl.login.read.timeout.ms). Java leaves both to the JDK
	// (no limit); a connection's setup timeout bounds the whole login anyway.
	DefaultLoginTimeout = 10 * time.Second
)

// OAuthBearerConfig is how the OAUTHBEARER mechanism gets its token: from an OAuth/OIDC token
// endpoint by the client credentials grant, or from a file another process keeps fresh (Java's
// sasl.oauthbearer.token.endpoint.url=file:///path, FileJwtRetriever).
//
// A config is shared by every connection of a client: the token is fetched once and reused by
// them all until its refresh time.
type OAuthBearerConfig struct {
	// TokenEndpointURL is https://, http:// (the token endpoint) or file:// (a file holding one
	// token in its serialized JWT form).
	TokenEndpointURL string
	ClientID         string
	ClientSecret     string // never printed
	Scope            string // optional: the scope requested from the endpoint
	// GrantType is client_credentials (empty) or GrantJWTBearer, whose assertion Assertion
	// makes; the client id and secret are then not needed.
	GrantType string
	Assertion *JWTAssertion

	// The refresh window (ExpiringCredentialRefreshingLogin): a token is refreshed at
	// RefreshWindowFactor (+ up to RefreshWindowJitter) of its lifetime, but not sooner than
	// RefreshMinPeriod after it was fetched nor later than RefreshBuffer before it expires
	// unless those two do not fit in its remaining lifetime. Zero values take the defaults; a
	// negative RefreshMinPeriod or RefreshBuffer means none.
	RefreshWindowFactor, RefreshWindowJitter float64
	RefreshMinPeriod, RefreshBuffer          time.Duration
	// RetryBackoff doubles after each failed fetch up to RetryBackoffMax (Java's Retry in
	// HttpAccessTokenRetriever): no fetch is tried again sooner.
	RetryBackoff, RetryBackoffMax time.Duration
	// ConnectTimeout and ReadTimeout bound one request to the token endpoint.
	ConnectTimeout, ReadTimeout time.Duration

	// TokenSource, when set, makes the tokens instead of an endpoint (AWS MSK IAM's signer):
	// an opaque token and when it expires. Its errors are retried as a failed fetch is, unless
	// they are *AuthenticationError.
	TokenSource func(ctx context.Context) (token string, expires time.Time, err error)
	// DescribeToken, when set, says what a TokenSource's token is, for the error when the
	// broker refuses it (never the token itself, nor a secret).
	DescribeToken func(token string) string

	// Extensions are the SASL extensions sent with the token (KIP-342; RFC 7628 section 3.1):
	// Confluent Cloud's logicalCluster and identityPoolId, for one. Names are letters only.
	Extensions map[string]string

	// HTTPClient, when set, replaces the client built from the timeouts (tests).
	HTTPClient *http.Client

	once sync.Once
	tp   *tokenProvider
}

// provider returns the config's one token provider.
func (o *OAuthBearerConfig) provider() *tokenProvider {
	o.once.Do(func() { o.tp = newTokenProvider(o) })
	return o.tp
}

// Validate reports a configuration the login cannot work with, naming the Java key.
func (o *OAuthBearerConfig) Validate() error {
	if err := CheckExtensions(o.Extensions); err != nil {
		return fmt.Errorf("sasl.jaas.config: %v", err)
	}
	if o.TokenSource != nil {
		return nil
	}
	u, err := url.Parse(o.TokenEndpointURL)
	switch {
	case o.TokenEndpointURL == "":
		return errors.New("sasl.oauthbearer.token.endpoint.url: required with sasl.mechanism=OAUTHBEARER")
	case err != nil:
		return fmt.Errorf("sasl.oauthbearer.token.endpoint.url: %v", err)
	case u.Scheme == "file":
		if _, err := os.Stat(u.Path); err != nil {
			return fmt.Errorf("sasl.oauthbearer.token.endpoint.url: token file: %v", err)
		}
		return nil
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("sasl.oauthbearer.token.endpoint.url: want an http(s):// or file:// URL, got %q", redactURL(o.TokenEndpointURL))
	case o.GrantType == GrantJWTBearer:
		if o.Assertion == nil {
			return errors.New("sasl.oauthbearer.assertion.private.key.file: required with the JWT bearer grant (or sasl.oauthbearer.assertion.file)")
		}
		if err := o.Assertion.Validate(); err != nil {
			return err
		}
	case o.ClientID == "":
		return errors.New("sasl.oauthbearer.client.id: required with an http(s) token endpoint")
	case o.ClientSecret == "":
		return errors.New("sasl.oauthbearer.client.secret: required with an http(s) token endpoint")
	}
	if f := o.RefreshWindowFactor; f != 0 && (f < 0.5 || f > 1) {
		return fmt.Errorf("sasl.login.refresh.window.factor: must be between 0.5 and 1.0, got %v", f)
	}
	if j := o.RefreshWindowJitter; j < 0 || j > 0.25 {
		return fmt.Errorf("sasl.login.refresh.window.jitter: must be between 0 and 0.25, got %v", j)
	}
	return nil
}

// redactURL drops a URL's user information and query, which may hold credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}

// token is one access token and what the refresh schedule needs of it.
type token struct {
	value      string
	start, exp time.Time // iat (or when it was fetched) and exp
	claims     jwtClaims
	desc       string // what the token is, when its source says (DescribeToken)
}

// tokenProvider fetches and caches the token, after the Java client's
// ExpiringCredentialRefreshingLogin. Java refreshes on a background thread; here the token is
// refreshed when a connection authenticates (or re-authenticates) after its refresh time, so no
// goroutine outlives the client. Re-authentication before the broker's session ends (KIP-368)
// keeps a long connection on a fresh token. A failed refresh keeps using the token while it is
// valid and waits out the retry backoff before trying again.
type tokenProvider struct {
	cfg    *OAuthBearerConfig
	client *http.Client

	mu        sync.Mutex // held across a fetch: connections that need a token wait for one fetch
	cur       *token
	refreshAt time.Time
	nextTry   time.Time // after a failure, no fetch before this
	backoff   time.Duration
	lastErr   error

	fetches, failures atomic.Int64
}

func newTokenProvider(cfg *OAuthBearerConfig) *tokenProvider {
	p := &tokenProvider{cfg: cfg, client: cfg.HTTPClient}
	if p.client == nil {
		connect := orDur(cfg.ConnectTimeout, DefaultLoginTimeout)
		read := orDur(cfg.ReadTimeout, DefaultLoginTimeout)
		p.client = &http.Client{
			Timeout: connect + read,
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           (&net.Dialer{Timeout: connect}).DialContext,
				TLSHandshakeTimeout:   connect,
				ResponseHeaderTimeout: read,
				MaxIdleConns:          1,
				IdleConnTimeout:       30 * time.Second,
			},
		}
	}
	return p
}

func orDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// zeroOrDur is def for zero and none (zero) for a negative d.
func zeroOrDur(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func orFloat(f, def float64) float64 {
	if f == 0 {
		return def
	}
	return f
}

// get returns a token to authenticate with at now, fetching one when none is cached, the
// cached one is due for refresh, or it is valid for less than minValid: a re-authentication asks
// for at least the session it had, since the broker ends a session when its token expires and a
// token close to its end would make the next session too short to be re-authenticated in time.
// A token from a file is read again every time: the process that keeps the file fresh decides
// when it changes.
func (p *tokenProvider) get(ctx context.Context, now time.Time, minValid time.Duration) (*token, error) {
	if p.cfg.TokenSource == nil && strings.HasPrefix(p.cfg.TokenEndpointURL, "file:") {
		t, err := p.readFile(now)
		if err != nil {
			p.failures.Add(1)
			return nil, err
		}
		p.fetches.Add(1)
		return t, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && now.Before(p.refreshAt) && p.cur.exp.Sub(now) >= minValid {
		return p.cur, nil
	}
	if now.Before(p.nextTry) {
		if p.cur != nil && now.Before(p.cur.exp) {
			return p.cur, nil
		}
		return nil, p.lastErr
	}
	t, err := p.fetch(ctx, now)
	if err != nil {
		p.failures.Add(1)
		p.backoff = min(max(2*p.backoff, orDur(p.cfg.RetryBackoff, DefaultLoginRetryBackoff)),
			orDur(p.cfg.RetryBackoffMax, DefaultLoginRetryBackoffMax))
		p.nextTry = now.Add(p.backoff)
		p.lastErr = err
		if p.cur != nil && now.Before(p.cur.exp) {
			return p.cur, nil // still valid: the next authentication after the backoff tries again
		}
		return nil, err
	}
	p.fetches.Add(1)
	p.cur, p.backoff, p.nextTry, p.lastErr = t, 0, time.Time{}, nil
	p.refreshAt = p.refreshTime(t, now)
	return t, nil
}

// refreshTime is ExpiringCredentialRefreshingLogin.refreshMs: the window factor plus jitter of
// the lifetime, moved to respect the minimum refresh period and the buffer before expiry; both
// are ignored when they do not fit in the remaining lifetime (short-lived tokens).
func (p *tokenProvider) refreshTime(t *token, now time.Time) time.Time {
	pct := orFloat(p.cfg.RefreshWindowFactor, DefaultLoginRefreshWindowFactor) +
		p.cfg.RefreshWindowJitter*rand.Float64()
	minPeriod := zeroOrDur(p.cfg.RefreshMinPeriod, DefaultLoginRefreshMinPeriod)
	buffer := zeroOrDur(p.cfg.RefreshBuffer, DefaultLoginRefreshBuffer)
	if now.Add(minPeriod + buffer).After(t.exp) {
		return now.Add(time.Duration(float64(t.exp.Sub(now)) * pct))
	}
	proposed := t.start.Add(time.Duration(float64(t.exp.Sub(t.start)) * pct))
	if end := t.exp.Add(-buffer); proposed.After(end) {
		return end
	}
	if earliest := now.Add(minPeriod); proposed.Before(earliest) {
		return earliest
	}
	return proposed
}

// tokenResponse is the token endpoint's answer (RFC 6749 section 5.1 and 5.2).
type tokenResponse struct {
	AccessToken      string  `json:"access_token"`
	ExpiresIn        float64 `json:"expires_in"`
	Error            string  `json:"error"`
	ErrorDescription string  `json:"error_description"`
}

// fetch asks the TokenSource when there is one. Otherwise it asks the token endpoint for a
// token by the client credentials grant, as Java's HttpAccessTokenRetriever
// (ClientCredentialsJwtRetriever) does: a POST of grant_type=client_credentials (and the
// scope), the client id and secret in a Basic Authorization header (RFC 6749 section 2.3.1). A 4xx answer (a wrong secret, an unknown
// client or scope) is an *AuthenticationError: asking again will not help. Other failures are
// plain errors, retried.
func (p *tokenProvider) fetch(ctx context.Context, now time.Time) (*token, error) {
	if p.cfg.TokenSource != nil {
		v, exp, err := p.cfg.TokenSource(ctx)
		if err != nil {
			return nil, err
		}
		t := &token{value: v, start: now, exp: exp}
		if p.cfg.DescribeToken != nil {
			t.desc = p.cfg.DescribeToken(v)
		}
		return t, nil
	}
	where := redactURL(p.cfg.TokenEndpointURL)
	form := "grant_type=client_credentials"
	if p.cfg.GrantType == GrantJWTBearer {
		// JwtBearerRequestFormatter: the grant type, the assertion, the scope; no client
		// authentication header, the assertion is the client's proof.
		assertion, err := p.cfg.Assertion.make(now)
		if err != nil {
			return nil, &AuthenticationError{Mechanism: SASLOAuthBearer, Err: errTokenEndpoint, Message: "JWT bearer assertion: " + err.Error()}
		}
		form = "grant_type=" + url.QueryEscape(GrantJWTBearer) + "&assertion=" + url.QueryEscape(assertion)
	}
	if p.cfg.Scope != "" {
		form += "&scope=" + url.QueryEscape(p.cfg.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.TokenEndpointURL, strings.NewReader(form))
	if err != nil {
		return nil, fmt.Errorf("network: sasl %s: token endpoint %s: %v", SASLOAuthBearer, where, err)
	}
	if p.cfg.GrantType != GrantJWTBearer {
		// Not URL-encoded: Java's default (sasl.oauthbearer.header.urlencode=false).
		req.SetBasicAuth(p.cfg.ClientID, p.cfg.ClientSecret)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		// *url.Error names the URL as given: print ours, without user information.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("network: sasl %s: token endpoint %s: %w", SASLOAuthBearer, where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("network: sasl %s: token endpoint %s: reading the answer: %w", SASLOAuthBearer, where, err)
	}
	var tr tokenResponse
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		msg := fmt.Sprintf("token endpoint %s answered %s", where, resp.Status)
		if tr.Error != "" {
			msg += ": " + clip(tr.Error)
			if tr.ErrorDescription != "" {
				msg += " (" + clip(tr.ErrorDescription) + ")"
			}
		}
		return nil, &AuthenticationError{Mechanism: SASLOAuthBearer, Message: msg, Err: errTokenEndpoint}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("network: sasl %s: token endpoint %s answered %s", SASLOAuthBearer, where, resp.Status)
	}
	if jsonErr != nil || tr.AccessToken == "" {
		return nil, &AuthenticationError{Mechanism: SASLOAuthBearer, Err: errTokenEndpoint,
			Message: fmt.Sprintf("token endpoint %s answered without an access_token", where)}
	}
	t, err := parseToken(tr.AccessToken, now)
	if err != nil {
		if tr.ExpiresIn <= 0 {
			return nil, &AuthenticationError{Mechanism: SASLOAuthBearer, Err: errTokenEndpoint,
				Message: fmt.Sprintf("token endpoint %s: %v and no expires_in", where, err)}
		}
		// An opaque token: its lifetime is what the endpoint says.
		t = &token{value: tr.AccessToken, start: now}
	}
	if tr.ExpiresIn > 0 && t.exp.IsZero() {
		t.exp = now.Add(time.Duration(tr.ExpiresIn * float64(time.Second)))
	}
	return t, nil
}

// errTokenEndpoint is the cause of an *AuthenticationError the token endpoint gave.
var errTokenEndpoint = errors.New("token endpoint refused the client")

// readFile reads a token from the file of a file:// URL (Java's FileJwtRetriever).
func (p *tokenProvider) readFile(now time.Time) (*token, error) {
	u, err := url.Parse(p.cfg.TokenEndpointURL)
	if err != nil {
		return nil, fmt.Errorf("network: sasl %s: %v", SASLOAuthBearer, err)
	}
	b, err := os.ReadFile(u.Path)
	if err != nil {
		return nil, fmt.Errorf("network: sasl %s: token file: %w", SASLOAuthBearer, err)
	}
	t, err := parseToken(strings.TrimSpace(string(b)), now)
	if err != nil {
		return nil, &AuthenticationError{Mechanism: SASLOAuthBearer, Err: err, Message: "token file " + u.Path}
	}
	return t, nil
}

// jwtClaims are the claims the client reads from its own token: exp and iat for the refresh
// schedule, the rest to say what was sent when the broker refuses it.
type jwtClaims struct {
	Exp float64         `json:"exp"`
	Iat float64         `json:"iat"`
	Sub string          `json:"sub"`
	Iss string          `json:"iss"`
	Aud json.RawMessage `json:"aud"`
}

// parseToken reads a JWT's payload without verifying it (the broker verifies; Java's
// ClientJwtValidator also only checks its form and claims). A JWT needs an exp claim.
func parseToken(s string, now time.Time) (*token, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, errors.New("token is not a JWT (three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, errors.New("token payload is not base64url")
	}
	var c jwtClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, errors.New("token payload is not a JSON object")
	}
	if c.Exp <= 0 {
		return nil, errors.New("token has no exp claim")
	}
	t := &token{value: s, claims: c, exp: time.UnixMilli(int64(c.Exp * 1000)), start: now}
	if c.Iat > 0 {
		t.start = time.UnixMilli(int64(c.Iat * 1000))
	}
	return t, nil
}

// describe names what the broker was sent, for an authentication failure: the claims that
// decide it, never the token itself.
func (t *token) describe(now time.Time) string {
	if t.claims.Exp == 0 {
		what := cmp.Or(t.desc, "an opaque token")
		if t.exp.IsZero() {
			return what
		}
		return what + " expiring " + t.exp.UTC().Format(time.RFC3339)
	}
	s := fmt.Sprintf("token sub=%q iss=%q aud=%s exp=%s", clip(t.claims.Sub), clip(t.claims.Iss),
		clip(string(t.claims.Aud)), t.exp.UTC().Format(time.RFC3339))
	if !now.Before(t.exp) {
		s += fmt.Sprintf(" (expired %s ago)", now.Sub(t.exp).Round(time.Second))
	}
	return s
}

// clip bounds a string from outside (an endpoint's error, a claim) in a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// oauthBearerInitialResponse is the client's first message (RFC 7628 section 3.1, Java's
// OAuthBearerClientInitialResponse.toBytes): the GS2 header "n,," (no channel binding, no
// authzid), then auth=Bearer <token> and the SASL extensions (KIP-342) as key=value pairs, all
// separated by 0x01 and ended by two. The extensions are in name order: the Java client's
// order is Map.copyOf's (SaslExtensions), which changes from one JVM to the next, and the
// broker reads them into a map.
func oauthBearerInitialResponse(tok string, extensions map[string]string) []byte {
	b := []byte("n,,\x01auth=Bearer " + tok)
	for _, k := range slices.Sorted(maps.Keys(extensions)) {
		b = append(append(append(append(b, 0x01), k...), '='), extensions[k]...)
	}
	return append(b, 0x01, 0x01)
}

// Token returns the token a connection would authenticate with now: the cached one, or one
// fetched (from the endpoint, the file or the TokenSource) when it is due.
func (o *OAuthBearerConfig) Token(ctx context.Context) (string, error) {
	t, err := o.provider().get(ctx, time.Now(), 0)
	if err != nil {
		return "", err
	}
	return t.value, nil
}

// InitialResponse is the client's first OAUTHBEARER message for token with the config's
// extensions, as the exchange sends it.
func (o *OAuthBearerConfig) InitialResponse(token string) []byte {
	return oauthBearerInitialResponse(token, o.Extensions)
}

// CheckExtensions is OAuthBearerClientInitialResponse.validateExtensions: a name is letters
// only and not "auth" (the token's key), a value printable ASCII, space, tab, CR or LF
// (RFC 7628 section 3.1). Values are not quoted in the error: they may be secrets.
func CheckExtensions(extensions map[string]string) error {
	for k, v := range extensions {
		if k == "auth" {
			return errors.New("extension name auth is reserved for the token")
		}
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') }) >= 0 {
			return fmt.Errorf("extension name %q: letters only", k)
		}
		if v == "" || strings.IndexFunc(v, func(r rune) bool { return (r < 0x21 || r > 0x7e) && !strings.ContainsRune(" \t\r\n", r) }) >= 0 {
			return fmt.Errorf("extension %s: its value must be printable ASCII (spaces, tabs and line breaks allowed) and not empty", k)
		}
	}
	return nil
}
