package producer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
	"github.com/kafkatrail/kafkatrail/network"
)

// tokenRequests is a token endpoint that keeps every request's form and answers with a JWT.
type tokenRequests struct {
	mu    sync.Mutex
	forms []url.Values
	auth  []string
}

func (s *tokenRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	s.mu.Lock()
	s.forms = append(s.forms, r.PostForm)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	// {"alg":"none"} {"sub":"x","exp":4102444800,"iat":1700000000}
	fmt.Fprint(w, `{"access_token":"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3MDAwMDAwMDB9.c2ln","token_type":"Bearer","expires_in":3600}`)
}

func (s *tokenRequests) last(t *testing.T) (url.Values, string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.forms) == 0 {
		t.Fatal("no token request")
	}
	return s.forms[len(s.forms)-1], s.auth[len(s.auth)-1]
}

// writeKeys writes a 2048-bit RSA key and a P-256 key, PKCS#8 PEM, and returns their files and
// public halves.
func writeKeys(t *testing.T, dir string) (rsaFile, ecFile string, rsaPub *rsa.PublicKey, ecPub *ecdsa.PublicKey) {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, k any) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("rsa.pem", rk), write("ec.pem", ek), &rk.PublicKey, &ek.PublicKey
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestJWTBearerGrantAsTheJavaClientSendsIt: for the same properties, the JWT bearer grant's
// request (KIP-1139) is the one Kafka's own JwtBearerJwtRetriever (kafka-clients 4.4.0) sends: the same form (grant type, scope), no client authentication header,
// and an assertion with the same header and claims (the times and a jti differ by when and
// where they were made, their spans do not), whose signature verifies with the key's public half
// for both. A pre-made assertion file is sent as it is.
func TestJWTBearerGrantAsTheJavaClientSendsIt(t *testing.T) {
	// kafka-clients 4.4.0 from Maven, not the test broker's jars: Kafka 3.9.1 has no
	// JwtBearerJwtRetriever.
	java := javatest.Compile(t, javatest.MavenClasspath(t, "testdata/java/pom.xml"), "testdata/java/JwtBearerOracle.java")
	dir := t.TempDir()
	rsaFile, ecFile, rsaPub, ecPub := writeKeys(t, dir)
	template := filepath.Join(dir, "template.json")
	if err := os.WriteFile(template, []byte(`{"header":{"kid":"key-7"},"payload":{"sub":"from-template","tenant":"logs"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	premade := filepath.Join(dir, "assertion.jwt")
	if err := os.WriteFile(premade, []byte("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwcmVtYWRlIn0.c2lnbmF0dXJl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &tokenRequests{}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	for _, c := range []struct {
		name  string
		props map[string]string
		key   any
	}{
		{"RS256 with claims and a scope", map[string]string{
			"sasl.oauthbearer.assertion.private.key.file": rsaFile,
			"sasl.oauthbearer.assertion.claim.iss":        "agent-issuer",
			"sasl.oauthbearer.assertion.claim.sub":        "agent",
			"sasl.oauthbearer.assertion.claim.aud":        "https://idp.example/token",
			"sasl.oauthbearer.scope":                      "kafka",
		}, rsaPub},
		{"ES256 with a template, a jti and exp in 120 s", map[string]string{
			"sasl.oauthbearer.assertion.private.key.file":  ecFile,
			"sasl.oauthbearer.assertion.algorithm":         "ES256",
			"sasl.oauthbearer.assertion.template.file":     template,
			"sasl.oauthbearer.assertion.claim.sub":         "agent",
			"sasl.oauthbearer.assertion.claim.jti.include": "true",
			"sasl.oauthbearer.assertion.claim.exp.seconds": "120",
			"sasl.oauthbearer.assertion.claim.nbf.seconds": "30",
		}, ecPub},
		{"a pre-made assertion file", map[string]string{"sasl.oauthbearer.assertion.file": premade}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			props := maps.Clone(c.props)
			props["sasl.oauthbearer.token.endpoint.url"] = ts.URL + "/token"
			props["sasl.oauthbearer.jwt.retriever.class"] = jwtBearerRetriever
			var args []string
			for _, k := range slices.Sorted(maps.Keys(props)) {
				args = append(args, k, props[k])
			}
			java.Run(t, "JwtBearerOracle", args...)
			jform, jauth := srv.last(t)

			cfg := DefaultConfig()
			cfg.BootstrapServers = []string{"127.0.0.1:9"}
			cfg.SecurityProtocol, cfg.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
			if err := cfg.SetAll(props); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := cfg.oauthBearerConfig().Token(context.Background()); err != nil {
				t.Fatal(err)
			}
			form, auth := srv.last(t)

			if auth != "" || jauth != "" {
				t.Fatalf("Authorization %q, the Java client's %q: want none (the assertion is the proof)", auth, jauth)
			}
			for _, k := range []string{"grant_type", "scope"} {
				if form.Get(k) != jform.Get(k) {
					t.Fatalf("%s %q, the Java client's %q", k, form.Get(k), jform.Get(k))
				}
			}
			if keys, jkeys := slices.Sorted(maps.Keys(form)), slices.Sorted(maps.Keys(jform)); !slices.Equal(keys, jkeys) {
				t.Fatalf("form fields %v, the Java client's %v", keys, jkeys)
			}
			if c.key == nil {
				if form.Get("assertion") != jform.Get("assertion") || form.Get("assertion") == "" {
					t.Fatalf("assertion %q, the Java client's %q", form.Get("assertion"), jform.Get("assertion"))
				}
				return
			}
			ours, err := oauthtest.VerifyAssertion(form.Get("assertion"), c.key, time.Now())
			if err != nil {
				t.Fatalf("our assertion: %v", err)
			}
			theirs, err := oauthtest.VerifyAssertion(jform.Get("assertion"), c.key, time.Now())
			if err != nil {
				t.Fatalf("the Java client's assertion: %v", err)
			}
			if !maps.Equal(ours.Header, theirs.Header) {
				t.Fatalf("header %v, the Java client's %v", ours.Header, theirs.Header)
			}
			span := func(a *oauthtest.Assertion) (exp, nbf float64) {
				return a.Claims["exp"].(float64) - a.Claims["iat"].(float64), a.Claims["iat"].(float64) - a.Claims["nbf"].(float64)
			}
			if e, n := span(ours); true {
				if je, jn := span(theirs); e != je || n != jn {
					t.Fatalf("exp-iat %v, iat-nbf %v; the Java client's %v, %v", e, n, je, jn)
				}
			}
			strip := func(m map[string]any) map[string]any {
				m = maps.Clone(m)
				for _, k := range []string{"iat", "exp", "nbf", "jti"} {
					if v, ok := m[k]; ok {
						m[k] = fmt.Sprintf("%T", v) // present, of a type; the value is the moment's
					}
				}
				return m
			}
			if a, b := strip(ours.Claims), strip(theirs.Claims); !maps.Equal(a, b) {
				t.Fatalf("claims %v, the Java client's %v", ours.Claims, theirs.Claims)
			}
			if jti, ok := ours.Claims["jti"].(string); ok && !uuidPattern.MatchString(jti) {
				t.Fatalf("jti %q is not a random UUID as Java's", jti)
			}
		})
	}
}

// TestJWTBearerGrantWithAnEncryptedKey: a key OpenSSL encrypted (PKCS#8, PBES2 with
// PBKDF2-HMAC-SHA256 and AES-256-CBC, for two key types) signs assertions that verify with its
// public half. The Java client is no oracle here: kafka-clients 4.4.0 on JDK 17 cannot read such
// a key ("PBES2 SecretKeyFactory not available").
func TestJWTBearerGrantWithAnEncryptedKey(t *testing.T) {
	dir := t.TempDir()
	rsaFile, ecFile, rsaPub, ecPub := writeKeys(t, dir)
	srv := &tokenRequests{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, c := range []struct {
		alg, file string
		pub       any
	}{{"RS256", rsaFile, rsaPub}, {"ES256", ecFile, ecPub}} {
		cfg := DefaultConfig()
		cfg.BootstrapServers = []string{"127.0.0.1:9"}
		cfg.SecurityProtocol, cfg.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
		cfg.SASLOAuthBearerTokenEndpointURL = ts.URL + "/token"
		cfg.SASLOAuthBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
		cfg.SASLOAuthBearerAssertionAlgorithm = c.alg
		cfg.SASLOAuthBearerAssertionPrivateKeyFile = encryptKey(t, c.file, "key passphrase")
		cfg.SASLOAuthBearerAssertionKeyPassphrase = "key passphrase"
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.oauthBearerConfig().Token(context.Background()); err != nil {
			t.Fatal(err)
		}
		form, _ := srv.last(t)
		if _, err := oauthtest.VerifyAssertion(form.Get("assertion"), c.pub, time.Now()); err != nil {
			t.Fatalf("%s: the assertion signed with the decrypted key: %v", c.alg, err)
		}
	}
}

// TestJWTBearerGrantRefused: what the grant cannot work with is refused at start, naming the key.
func TestJWTBearerGrantRefused(t *testing.T) {
	dir := t.TempDir()
	rsaFile, ecFile, _, _ := writeKeys(t, dir)
	encrypted := encryptKey(t, rsaFile, "right")
	for _, c := range []struct {
		props    map[string]string
		key, why string
	}{
		{map[string]string{}, "sasl.oauthbearer.assertion.private.key.file", "required"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": ecFile}, "sasl.oauthbearer.assertion.private.key.file", "RS256 takes an RSA key"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": rsaFile, "sasl.oauthbearer.assertion.algorithm": "HS256"},
			"sasl.oauthbearer.assertion.algorithm", "RS256 or ES256"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": rsaFile, "sasl.oauthbearer.assertion.private.key.passphrase": "pw"},
			"sasl.oauthbearer.assertion.private.key.passphrase", "is not encrypted"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": encrypted},
			"sasl.oauthbearer.assertion.private.key.file", "is encrypted: set sasl.oauthbearer.assertion.private.key.passphrase"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": encrypted, "sasl.oauthbearer.assertion.private.key.passphrase": "wrong"},
			"sasl.oauthbearer.assertion.private.key.file", "does not decrypt"},
		{map[string]string{"sasl.oauthbearer.assertion.private.key.file": rsaFile, "sasl.oauthbearer.jwt.retriever.class": "com.example.Mine"},
			"sasl.oauthbearer.jwt.retriever.class", "only Kafka's"},
	} {
		cfg := DefaultConfig()
		cfg.BootstrapServers = []string{"127.0.0.1:9"}
		cfg.SecurityProtocol, cfg.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
		cfg.SASLOAuthBearerTokenEndpointURL = "https://idp.example/token"
		cfg.SASLOAuthBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
		if err := cfg.SetAll(c.props); err != nil {
			t.Fatal(err)
		}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%v: %v, want %s: …%s…", c.props, err, c.key, c.why)
		}
	}
	// A wrong passphrase leaves valid padding about once in 256: every one of 1,000 must still
	// say it does not decrypt the key.
	for i := range 1000 {
		err := (&network.JWTAssertion{PrivateKeyFile: encrypted, PrivateKeyPassphrase: fmt.Sprintf("wrong-%d", i)}).Validate()
		if err == nil || !strings.Contains(err.Error(), "does not decrypt") {
			t.Fatalf("passphrase wrong-%d: %v, want: does not decrypt", i, err)
		}
	}
}

// encryptKey writes key encrypted with passphrase as OpenSSL does it (PKCS#8, PBES2 with
// PBKDF2-HMAC-SHA256 and AES-256-CBC) and returns the file.
func encryptKey(t *testing.T, key, passphrase string) string {
	t.Helper()
	out := key + ".enc"
	cmd := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", key, "-out", out, "-passout", "pass:"+passphrase)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl pkcs8: %v\n%s", err, b)
	}
	return out
}
