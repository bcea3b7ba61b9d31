// Package oauthtest is a small OAuth 2.0 token server for tests: a /token endpoint for the
// client credentials grant that answers RS256 JWTs, and /jwks with the public key. It signs with
// the key scripts/kafka/broker.sh generates ($STATE/oauth/key.pem, KAFKA_OAUTH_KEY) so that the
// test broker, which reads the JWKS from a file, accepts its tokens; the broker never depends on
// this server. It binds 127.0.0.1 only.
package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Broker is the OAUTH listener of the test broker, from `broker.sh env`.
type Broker struct {
	Bootstrap string // KAFKA_OAUTH_BOOTSTRAP
	KeyFile   string // KAFKA_OAUTH_KEY: the RSA key whose JWKS the broker trusts
	KID       string // KAFKA_OAUTH_KID
	Issuer    string // KAFKA_OAUTH_ISSUER
	Audience  string // KAFKA_OAUTH_AUDIENCE
	// Reauth is the listener's connections.max.reauth.ms (KAFKA_OAUTH_REAUTH_MS).
	Reauth time.Duration
}

// BrokerFromEnv reads the OAUTH listener's coordinates; ok is false when the environment has
// none (a broker.sh without the listener, or no broker).
func BrokerFromEnv() (b Broker, ok bool) {
	b = Broker{
		Bootstrap: os.Getenv("KAFKA_OAUTH_BOOTSTRAP"),
		KeyFile:   os.Getenv("KAFKA_OAUTH_KEY"),
		KID:       os.Getenv("KAFKA_OAUTH_KID"),
		Issuer:    os.Getenv("KAFKA_OAUTH_ISSUER"),
		Audience:  os.Getenv("KAFKA_OAUTH_AUDIENCE"),
	}
	var ms int
	fmt.Sscan(os.Getenv("KAFKA_OAUTH_REAUTH_MS"), &ms)
	b.Reauth = time.Duration(ms) * time.Millisecond
	if b.Bootstrap == "" || b.KeyFile == "" {
		return b, false
	}
	if _, err := os.Stat(b.KeyFile); err != nil {
		return b, false
	}
	return b, true
}

// Options configure a Server. Zero values: a fresh 2048-bit key, kid "test", lifetime 1 h.
type Options struct {
	KeyFile          string // PEM RSA private key (PKCS#8 or PKCS#1); empty: generated
	KID              string
	Issuer, Audience string
	Lifetime         time.Duration
	ClientID         string
	ClientSecret     string
	// AssertionKey, when set, makes the server take the JWT bearer grant (RFC 7523) too: an
	// assertion signed (RS256 or ES256) by its private half, not expired and already valid
	// (nbf), gets a token whose subject is the assertion's.
	AssertionKey crypto.PublicKey
}

// Server is a running token server. Its settings may be changed while it runs.
type Server struct {
	// URL is the base URL; TokenURL and JWKSURL are its endpoints.
	URL, TokenURL, JWKSURL string

	key  *rsa.PrivateKey
	kid  string
	opts Options

	mu       sync.Mutex
	audience string
	lifetime time.Duration
	failWith int // answer /token with this status (0: normally)

	ln  net.Listener
	srv *http.Server

	// Fetches counts tokens issued; Refused counts requests refused (bad client, failWith).
	Fetches, Refused atomic.Int64
	lastScope        atomic.Value
	lastAssertion    atomic.Pointer[Assertion]
}

// Assertion is a JWT bearer grant's assertion the server took: its header and claims.
type Assertion struct {
	Header, Claims map[string]any
}

// LastAssertion is the last assertion the server took (nil if none).
func (s *Server) LastAssertion() *Assertion { return s.lastAssertion.Load() }

// Start starts a server on 127.0.0.1 at a free port.
func Start(o Options) (*Server, error) {
	s := &Server{opts: o, kid: o.KID, audience: o.Audience, lifetime: o.Lifetime}
	if s.kid == "" {
		s.kid = "test"
	}
	if s.lifetime <= 0 {
		s.lifetime = time.Hour
	}
	var err error
	if o.KeyFile != "" {
		s.key, err = readKey(o.KeyFile)
	} else {
		s.key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		return nil, err
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.URL = "http://" + s.ln.Addr().String()
	s.TokenURL, s.JWKSURL = s.URL+"/token", s.URL+"/jwks"
	mux := http.NewServeMux()
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/jwks", s.jwks)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(s.ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// SetAudience changes the aud claim of the tokens issued from now on.
func (s *Server) SetAudience(aud string) { s.mu.Lock(); s.audience = aud; s.mu.Unlock() }

// FailWith makes /token answer status (with an OAuth error body) until called with 0.
func (s *Server) FailWith(status int) { s.mu.Lock(); s.failWith = status; s.mu.Unlock() }

// LastScope is the scope of the last token request.
func (s *Server) LastScope() string { v, _ := s.lastScope.Load().(string); return v }

func readKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("oauthtest: no PEM block in %s", path)
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("oauthtest: %s: %w", path, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("oauthtest: %s is not an RSA key", path)
	}
	return rk, nil
}

// Claims are the claims of a token Sign makes.
type Claims struct {
	Subject, Issuer, Audience string
	IssuedAt, Expires         time.Time
	Scope                     string
}

// Sign returns an RS256 JWT with claims, signed with the server's key and naming its kid.
func (s *Server) Sign(c Claims) string {
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.kid})
	body := map[string]any{"sub": c.Subject, "iss": c.Issuer, "iat": c.IssuedAt.Unix(), "exp": c.Expires.Unix()}
	if c.Audience != "" {
		body["aud"] = c.Audience
	}
	if c.Scope != "" {
		body["scope"] = c.Scope
	}
	payload, _ := json.Marshal(body)
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err) // a valid RSA key always signs
	}
	return signing + "." + enc.EncodeToString(sig)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "refused by oauthtest"})
}

// token is the client credentials grant (RFC 6749 section 4.4): client authentication by HTTP
// Basic or by client_id/client_secret in the form.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request")
		return
	}
	s.mu.Lock()
	fail, aud, life := s.failWith, s.audience, s.lifetime
	s.mu.Unlock()
	if fail != 0 {
		s.Refused.Add(1)
		oauthError(w, fail, "temporarily_unavailable")
		return
	}
	if err := r.ParseForm(); err != nil {
		s.Refused.Add(1)
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	var id string
	switch grant := r.PostForm.Get("grant_type"); {
	case grant == "client_credentials":
		var secret string
		var ok bool
		id, secret, ok = r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if err := s.checkClient(id, secret); err != nil {
			s.Refused.Add(1)
			oauthError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
	case grant == GrantJWTBearer && s.opts.AssertionKey != nil:
		a, err := VerifyAssertion(r.PostForm.Get("assertion"), s.opts.AssertionKey, time.Now())
		if err != nil {
			s.Refused.Add(1)
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		s.lastAssertion.Store(a)
		id, _ = a.Claims["sub"].(string)
	default:
		s.Refused.Add(1)
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	s.lastScope.Store(r.PostForm.Get("scope"))
	now := time.Now()
	tok := s.Sign(Claims{Subject: id, Issuer: s.opts.Issuer, Audience: aud, IssuedAt: now,
		Expires: now.Add(life), Scope: r.PostForm.Get("scope")})
	s.Fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer",
		"expires_in": int(life / time.Second)})
}

func (s *Server) checkClient(id, secret string) error {
	if s.opts.ClientID != "" && id != s.opts.ClientID {
		return errors.New("unknown client")
	}
	if s.opts.ClientSecret != "" && secret != s.opts.ClientSecret {
		return errors.New("wrong secret")
	}
	if id == "" {
		return errors.New("no client")
	}
	return nil
}

// jwks serves the public key (RFC 7517), as the broker's file holds it.
func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := s.key.PublicKey
	e := big.NewInt(int64(pub.E)).Bytes()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": s.kid,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(e),
	}}})
}

// ForBroker starts a server that signs as the test broker expects (its key, kid, issuer and
// audience), for the client id and secret given.
func ForBroker(b Broker, clientID, clientSecret string, lifetime time.Duration) (*Server, error) {
	return Start(Options{KeyFile: b.KeyFile, KID: b.KID, Issuer: b.Issuer, Audience: b.Audience,
		Lifetime: lifetime, ClientID: clientID, ClientSecret: strings.TrimSpace(clientSecret)})
}

// RealBroker returns the test broker's OAUTH listener; without one it skips the test in -short
// mode and fails it otherwise, as kafkatest does for the broker itself.
func RealBroker(t testing.TB) Broker {
	t.Helper()
	b, ok := BrokerFromEnv()
	if ok {
		return b
	}
	if testing.Short() {
		t.Skip("needs the real Kafka broker's OAUTH listener (KAFKA_OAUTH_BOOTSTRAP, KAFKA_OAUTH_KEY); skipped in -short mode")
	}
	t.Fatal("the real Kafka broker's OAUTH listener is not set up: start scripts/kafka/broker.sh and eval \"$(scripts/kafka/broker.sh env)\"")
	return b
}

// StartForBroker is ForBroker for a test: the server is closed at the test's end.
func StartForBroker(t testing.TB, b Broker, clientID, clientSecret string, lifetime time.Duration) *Server {
	t.Helper()
	s, err := ForBroker(b, clientID, clientSecret, lifetime)
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// GrantJWTBearer is the JWT bearer grant's type (RFC 7523).
const GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// VerifyAssertion checks a JWT bearer assertion's signature with key (RS256 with an RSA key,
// ES256 with a P-256 one) and its exp and nbf at now, and returns its header and claims.
func VerifyAssertion(jwt string, key crypto.PublicKey, now time.Time) (*Assertion, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	a := &Assertion{}
	for i, into := range []*map[string]any{&a.Header, &a.Claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, into); err != nil {
			return nil, err
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch k := key.(type) {
	case *rsa.PublicKey:
		if a.Header["alg"] != "RS256" {
			return nil, errors.New("alg is not RS256")
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig); err != nil {
			return nil, err
		}
	case *ecdsa.PublicKey:
		if a.Header["alg"] != "ES256" || len(sig) != 64 {
			return nil, errors.New("not an ES256 signature")
		}
		if !ecdsa.Verify(k, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return nil, errors.New("signature does not verify")
		}
	default:
		return nil, errors.New("unsupported key")
	}
	exp, _ := a.Claims["exp"].(float64)
	nbf, _ := a.Claims["nbf"].(float64)
	if exp == 0 || now.Unix() >= int64(exp) || (nbf != 0 && now.Unix() < int64(nbf)) {
		return nil, errors.New("outside its validity")
	}
	return a, nil
}
