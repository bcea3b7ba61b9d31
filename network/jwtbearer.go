package network

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
	"os"
	"strings"
	"sync"
	"time"
)

// GrantJWTBearer is the JWT bearer grant's type (RFC 7523), KIP-1139's
// sasl.oauthbearer.jwt.retriever.class=JwtBearerJwtRetriever: the client proves who it is with
// a JWT it signs (or one another process made), not a secret.
const GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// JWTAssertion is how the JWT bearer grant's assertion is made, as Java's JwtBearerJwtRetriever
// makes it from the sasl.oauthbearer.assertion.* properties: signed here with a private key,
// from a template file and the claims below, or read from a file another process keeps fresh.
type JWTAssertion struct {
	// File holds a pre-made assertion (sasl.oauthbearer.assertion.file), read again when it
	// changes; the rest is then unused.
	File string
	// Algorithm is RS256 (default) or ES256 (sasl.oauthbearer.assertion.algorithm).
	Algorithm string
	// PrivateKeyFile is the PEM (PKCS#8, or PKCS#1 / SEC 1) key that signs
	// (sasl.oauthbearer.assertion.private.key.file); an encrypted PKCS#8 key (PBES2 with
	// AES-CBC) is read with PrivateKeyPassphrase (.private.key.passphrase).
	PrivateKeyFile       string
	PrivateKeyPassphrase string
	// TemplateFile is a JSON object {"header": {...}, "payload": {...}} whose members are
	// added to the assertion's, and win over the claims below
	// (sasl.oauthbearer.assertion.template.file).
	TemplateFile string
	// Iss, Sub and Aud are the claims of the same names, when set
	// (sasl.oauthbearer.assertion.claim.iss, .sub, .aud).
	Iss, Sub, Aud string
	// ExpSeconds and NbfSeconds put exp that far after the signing time and nbf that far before
	// it (sasl.oauthbearer.assertion.claim.exp.seconds, default 300; .nbf.seconds, default 60).
	ExpSeconds, NbfSeconds int
	// JTI adds a random jti claim, a UUID (sasl.oauthbearer.assertion.claim.jti.include).
	JTI bool

	once     sync.Once
	signer   crypto.Signer
	loadErr  error
	template struct {
		Header  map[string]any `json:"header"`
		Payload map[string]any `json:"payload"`
	}
}

// Validate reports an assertion configuration the grant cannot work with, naming the Java key.
func (a *JWTAssertion) Validate() error {
	if a.File != "" {
		if _, err := os.Stat(a.File); err != nil {
			return fmt.Errorf("sasl.oauthbearer.assertion.file: %v", err)
		}
		return nil
	}
	switch a.Algorithm {
	case "", "RS256", "ES256":
	default:
		return fmt.Errorf("sasl.oauthbearer.assertion.algorithm: RS256 or ES256, got %q", a.Algorithm)
	}
	if a.PrivateKeyFile == "" {
		return errors.New("sasl.oauthbearer.assertion.private.key.file: required with the JWT bearer grant (or sasl.oauthbearer.assertion.file)")
	}
	return a.load()
}

// load reads the key and the template once.
func (a *JWTAssertion) load() error {
	a.once.Do(func() {
		a.signer, a.loadErr = readSigningKey(a.PrivateKeyFile, a.alg(), a.PrivateKeyPassphrase)
		if a.loadErr != nil || a.TemplateFile == "" {
			return
		}
		b, err := os.ReadFile(a.TemplateFile)
		if err == nil {
			err = json.Unmarshal(b, &a.template)
		}
		if err != nil {
			a.loadErr = fmt.Errorf("sasl.oauthbearer.assertion.template.file: %v", err)
		}
	})
	return a.loadErr
}

func (a *JWTAssertion) alg() string {
	if a.Algorithm == "" {
		return "RS256"
	}
	return a.Algorithm
}

// readSigningKey reads a PEM private key for alg: RSA for RS256, P-256 ECDSA for ES256; an
// encrypted PKCS#8 one with passphrase.
func readSigningKey(path, alg, passphrase string) (crypto.Signer, error) {
	const key = "sasl.oauthbearer.assertion.private.key.file"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: %s holds no PEM block", key, path)
	}
	der := block.Bytes
	if block.Type == "ENCRYPTED PRIVATE KEY" {
		if passphrase == "" {
			return nil, fmt.Errorf("%s: %s is encrypted: set sasl.oauthbearer.assertion.private.key.passphrase", key, path)
		}
		if der, err = decryptPKCS8(der, passphrase); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", key, path, err)
		}
	} else if passphrase != "" {
		return nil, fmt.Errorf("sasl.oauthbearer.assertion.private.key.passphrase: %s is not encrypted", path)
	}
	var k any
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(der)
	}
	if err != nil {
		if block.Type == "ENCRYPTED PRIVATE KEY" {
			// A wrong passphrase leaves valid padding about once in 256 tries: the key then
			// does not parse.
			return nil, fmt.Errorf("%s: %s: the passphrase does not decrypt the key (%v)", key, path, err)
		}
		return nil, fmt.Errorf("%s: %s: %v", key, path, err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		if alg == "RS256" {
			return k, nil
		}
	case *ecdsa.PrivateKey:
		if alg == "ES256" && k.Curve.Params().Name == "P-256" {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%s: %s is not a key for %s (RS256 takes an RSA key, ES256 a P-256 EC key)", key, path, alg)
}

// make returns the assertion at now: the pre-made one from its file, or a JWT signed here. Its
// header is alg and typ JWT, then the template's; its claims iss, sub and aud when set, iat,
// nbf and exp, jti when asked for, then the template's payload (as JwtBearerJwtRetriever
// layers them: the template wins).
func (a *JWTAssertion) make(now time.Time) (string, error) {
	if a.File != "" {
		b, err := os.ReadFile(a.File)
		if err != nil {
			return "", fmt.Errorf("sasl.oauthbearer.assertion.file: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if err := a.load(); err != nil {
		return "", err
	}
	header := map[string]any{"alg": a.alg(), "typ": "JWT"}
	for k, v := range a.template.Header {
		header[k] = v
	}
	claims := map[string]any{}
	for k, v := range map[string]string{"iss": a.Iss, "sub": a.Sub, "aud": a.Aud} {
		if v != "" {
			claims[k] = v
		}
	}
	exp, nbf := a.ExpSeconds, a.NbfSeconds
	if exp == 0 {
		exp = 300
	}
	if nbf == 0 {
		nbf = 60
	}
	iat := now.Unix()
	claims["iat"], claims["exp"], claims["nbf"] = iat, iat+int64(exp), iat-int64(nbf)
	if a.JTI {
		claims["jti"] = newUUID()
	}
	for k, v := range a.template.Payload {
		claims[k] = v
	}
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sig, err := sign(a.signer, []byte(input))
	if err != nil {
		return "", fmt.Errorf("signing the assertion: %v", err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// sign is the JWS signature of input (RFC 7518): RSASSA-PKCS1-v1_5 with SHA-256, or ECDSA
// P-256 with SHA-256 as r and s, 32 bytes each.
func sign(s crypto.Signer, input []byte) ([]byte, error) {
	digest := sha256.Sum256(input)
	switch k := s.(type) {
	case *rsa.PrivateKey:
		return rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
	case *ecdsa.PrivateKey:
		r, sv, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		sv.FillBytes(out[32:])
		return out, nil
	}
	return nil, errors.New("no signing key")
}

// newUUID is a random (version 4) UUID, as Java's UUID.randomUUID gives the jti.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
