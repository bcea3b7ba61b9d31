package producer

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/network"
)

// oauthClientID is the client id by any of its names: the Java client's
// sasl.oauthbearer.client.credentials.client.id, librdkafka's sasl.oauthbearer.client.id, then
// the clientId of sasl.jaas.config (Java's order of precedence: the property, then JAAS).
func (c *Config) oauthClientID() string {
	return firstNonEmpty(c.SASLOAuthBearerClientCredentialsID, c.SASLOAuthBearerClientID,
		c.jaasOption(jaasOAuthBearerModule, "clientId"))
}

// oauthClientSecret is the client secret by any of its names, as oauthClientID.
func (c *Config) oauthClientSecret() string {
	return firstNonEmpty(c.SASLOAuthBearerClientCredentialsSecret, c.SASLOAuthBearerClientSecret,
		c.jaasOption(jaasOAuthBearerModule, "clientSecret"))
}

// oauthScope is sasl.oauthbearer.scope, else the scope of sasl.jaas.config.
func (c *Config) oauthScope() string {
	return firstNonEmpty(c.SASLOAuthBearerScope, c.jaasOption(jaasOAuthBearerModule, "scope"))
}

// oauthExtensions are the SASL extensions (KIP-342): sasl.jaas.config's extension_NAME options
// (Java's OAuthBearerLoginCallbackHandler.handleExtensionsCallback) and librdkafka's
// sasl.oauthbearer.extensions (NAME=value,...). A name given both ways must have one value.
func (c *Config) oauthExtensions() (map[string]string, error) {
	ext := map[string]string{}
	if e, err := c.jaasOptions(); err == nil && e != nil && e.module == jaasOAuthBearerModule {
		for k, v := range e.options {
			if name, ok := strings.CutPrefix(k, jaasExtensionPrefix); ok {
				ext[name] = v
			}
		}
	}
	for _, kv := range strings.Split(c.SASLOAuthBearerExtensions, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("want name=value pairs separated by commas, got %q", name)
		}
		name = strings.TrimSpace(name)
		if prev, dup := ext[name]; dup && prev != v {
			return nil, fmt.Errorf("extension %s differs from extension_%s in sasl.jaas.config; set one of them", name, name)
		}
		ext[name] = v
	}
	if len(ext) == 0 {
		return nil, nil
	}
	return ext, nil
}

// Kafka's JwtRetriever classes a Java client may name in sasl.oauthbearer.jwt.retriever.class.
const (
	jwtRetrieverPackage    = "org.apache.kafka.common.security.oauthbearer."
	jwtBearerRetriever     = jwtRetrieverPackage + "JwtBearerJwtRetriever"
	grantClientCredentials = "client_credentials"
)

var otherJWTRetrievers = map[string]bool{
	"": true, jwtRetrieverPackage + "DefaultJwtRetriever": true,
	jwtRetrieverPackage + "ClientCredentialsJwtRetriever": true, jwtRetrieverPackage + "FileJwtRetriever": true,
}

// oauthGrant is the grant the properties choose: client_credentials, or the JWT bearer grant
// by Java's sasl.oauthbearer.jwt.retriever.class or librdkafka's sasl.oauthbearer.grant.type.
func (c *Config) oauthGrant() string {
	if c.SASLOAuthBearerJWTRetrieverClass == jwtBearerRetriever || c.SASLOAuthBearerGrantType == network.GrantJWTBearer {
		return network.GrantJWTBearer
	}
	return grantClientCredentials
}

// jwtAssertion is the JWT bearer grant's assertion configuration, nil for another grant.
func (c *Config) jwtAssertion() *network.JWTAssertion {
	if c.oauthGrant() != network.GrantJWTBearer {
		return nil
	}
	return &network.JWTAssertion{
		File:                 c.SASLOAuthBearerAssertionFile,
		Algorithm:            c.SASLOAuthBearerAssertionAlgorithm,
		PrivateKeyFile:       c.SASLOAuthBearerAssertionPrivateKeyFile,
		PrivateKeyPassphrase: c.SASLOAuthBearerAssertionKeyPassphrase,
		TemplateFile:         firstNonEmpty(c.SASLOAuthBearerAssertionTemplateFile, c.SASLOAuthBearerAssertionJWTTemplate),
		Iss:                  c.SASLOAuthBearerAssertionClaimIss,
		Sub:                  c.SASLOAuthBearerAssertionClaimSub,
		Aud:                  c.SASLOAuthBearerAssertionClaimAud,
		ExpSeconds:           c.SASLOAuthBearerAssertionClaimExpSec,
		NbfSeconds:           c.SASLOAuthBearerAssertionClaimNbfSec,
		JTI:                  c.SASLOAuthBearerAssertionClaimJTI,
	}
}

// jaasExtensionPrefix marks a SASL extension among OAuthBearerLoginModule's options.
const jaasExtensionPrefix = "extension_"

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// validateOAuthBearer checks the OAUTHBEARER properties, each error naming its key, with the
// Java client's legal ranges (SaslConfigs, ConfigurationUtils). A secret is never quoted.
func (c *Config) validateOAuthBearer(bad func(key, format string, args ...any)) {
	switch strings.ToLower(c.SASLOAuthBearerMethod) {
	case "", "oidc":
	case "default":
		bad("sasl.oauthbearer.method", "default (librdkafka's unsecured JWTs) is not supported; use oidc with sasl.oauthbearer.token.endpoint.url")
	default:
		bad("sasl.oauthbearer.method", "must be oidc, got %q", c.SASLOAuthBearerMethod)
	}
	const urlKey = "sasl.oauthbearer.token.endpoint.url"
	u, err := url.Parse(c.SASLOAuthBearerTokenEndpointURL)
	switch {
	case c.SASLOAuthBearerTokenEndpointURL == "":
		bad(urlKey, "required with sasl.mechanism=OAUTHBEARER")
	case err != nil:
		bad(urlKey, "not a URL")
	case u.Scheme == "file":
		if st, err := os.Stat(u.Path); err != nil {
			bad(urlKey, "token file: %v", err)
		} else if st.IsDir() {
			bad(urlKey, "token file %s is a directory", u.Path)
		}
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && c.oauthGrant() == network.GrantJWTBearer:
		if err := c.jwtAssertion().Validate(); err != nil {
			key, reason, _ := strings.Cut(err.Error(), ": ")
			bad(key, "%s", reason)
		}
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		if c.oauthClientID() == "" {
			bad("sasl.oauthbearer.client.id", "required with an http(s) token endpoint (or sasl.oauthbearer.client.credentials.client.id, or clientId in sasl.jaas.config)")
		}
		if c.oauthClientSecret() == "" {
			bad("sasl.oauthbearer.client.secret", "required with an http(s) token endpoint (or sasl.oauthbearer.client.credentials.client.secret, or clientSecret in sasl.jaas.config)")
		}
	default:
		bad(urlKey, "want an https://, http:// or file:// URL, got %q", redactedURL(u))
	}
	if c.SASLOAuthBearerClientID != "" && c.SASLOAuthBearerClientCredentialsID != "" &&
		c.SASLOAuthBearerClientID != c.SASLOAuthBearerClientCredentialsID {
		bad("sasl.oauthbearer.client.id", "differs from sasl.oauthbearer.client.credentials.client.id; set one of them")
	}
	if c.SASLOAuthBearerClientSecret != "" && c.SASLOAuthBearerClientCredentialsSecret != "" &&
		c.SASLOAuthBearerClientSecret != c.SASLOAuthBearerClientCredentialsSecret {
		bad("sasl.oauthbearer.client.secret", "differs from sasl.oauthbearer.client.credentials.client.secret; set one of them")
	}
	if !otherJWTRetrievers[c.SASLOAuthBearerJWTRetrieverClass] && c.SASLOAuthBearerJWTRetrieverClass != jwtBearerRetriever {
		bad("sasl.oauthbearer.jwt.retriever.class", "only Kafka's DefaultJwtRetriever, ClientCredentialsJwtRetriever, FileJwtRetriever and JwtBearerJwtRetriever are understood, got %q", c.SASLOAuthBearerJWTRetrieverClass)
	}
	switch c.SASLOAuthBearerGrantType {
	case "", grantClientCredentials, network.GrantJWTBearer:
	default:
		bad("sasl.oauthbearer.grant.type", "client_credentials or %s, got %q", network.GrantJWTBearer, c.SASLOAuthBearerGrantType)
	}
	if ext, err := c.oauthExtensions(); err != nil {
		bad("sasl.oauthbearer.extensions", "%v", err)
	} else if err := network.CheckExtensions(ext); err != nil {
		bad("sasl.oauthbearer.extensions", "%v", err)
	}
	if f := c.SASLLoginRefreshWindowFactor; f < 0.5 || f > 1 {
		bad("sasl.login.refresh.window.factor", "must be between 0.5 and 1.0, got %v", f)
	}
	if j := c.SASLLoginRefreshWindowJitter; j < 0 || j > 0.25 {
		bad("sasl.login.refresh.window.jitter", "must be between 0 and 0.25, got %v", j)
	}
	if p := c.SASLLoginRefreshMinPeriodSeconds; p < 0 || p > 900 {
		bad("sasl.login.refresh.min.period.seconds", "must be between 0 and 900, got %d", p)
	}
	if b := c.SASLLoginRefreshBufferSeconds; b < 0 || b > 3600 {
		bad("sasl.login.refresh.buffer.seconds", "must be between 0 and 3600, got %d", b)
	}
	for _, p := range []struct {
		key string
		v   int
	}{
		{"sasl.login.retry.backoff.ms", c.SASLLoginRetryBackoffMs},
		{"sasl.login.retry.backoff.max.ms", c.SASLLoginRetryBackoffMaxMs},
		{"sasl.login.connect.timeout.ms", c.SASLLoginConnectTimeoutMs},
		{"sasl.login.read.timeout.ms", c.SASLLoginReadTimeoutMs},
	} {
		if p.v <= 0 {
			bad(p.key, "must be positive, got %d", p.v)
		}
	}
	if c.SASLLoginRetryBackoffMaxMs < c.SASLLoginRetryBackoffMs {
		bad("sasl.login.retry.backoff.max.ms", "below sasl.login.retry.backoff.ms")
	}
}

// redactedURL prints a URL without its user information and query, which may hold credentials.
func redactedURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// oauthBearerConfig is the network layer's token configuration, nil unless the mechanism is
// OAUTHBEARER. Validation keeps every duration positive but the min period and the buffer, whose
// zero is passed on as "none" (the network layer's zero means its default).
func (c *Config) oauthBearerConfig() *network.OAuthBearerConfig {
	if !strings.EqualFold(c.SASLMechanism, network.SASLOAuthBearer) {
		return nil
	}
	ext, _ := c.oauthExtensions() // Validate reported an error
	grant := ""
	if c.oauthGrant() == network.GrantJWTBearer {
		grant = network.GrantJWTBearer
	}
	return &network.OAuthBearerConfig{
		GrantType:           grant,
		TokenEndpointURL:    c.SASLOAuthBearerTokenEndpointURL,
		ClientID:            c.oauthClientID(),
		ClientSecret:        c.oauthClientSecret(),
		Scope:               c.oauthScope(),
		Extensions:          ext,
		Assertion:           c.jwtAssertion(),
		RefreshWindowFactor: c.SASLLoginRefreshWindowFactor,
		RefreshWindowJitter: c.SASLLoginRefreshWindowJitter,
		RefreshMinPeriod:    secondsOrNone(c.SASLLoginRefreshMinPeriodSeconds),
		RefreshBuffer:       secondsOrNone(c.SASLLoginRefreshBufferSeconds),
		RetryBackoff:        ms(c.SASLLoginRetryBackoffMs),
		RetryBackoffMax:     ms(c.SASLLoginRetryBackoffMaxMs),
		ConnectTimeout:      ms(c.SASLLoginConnectTimeoutMs),
		ReadTimeout:         ms(c.SASLLoginReadTimeoutMs),
	}
}

// secondsOrNone is n seconds, or the network layer's "none" for zero.
func secondsOrNone(n int) time.Duration {
	if n == 0 {
		return -1
	}
	return time.Duration(n) * time.Second
}

// SASLStats returns the counters of the producer's SASL connections (authentications,
// re-authentications, OAUTHBEARER token fetches); ok is false without SASL.
func (p *Producer) SASLStats() (st network.SASLStats, ok bool) {
	if p.sasl == nil {
		return st, false
	}
	return p.sasl.Stats(), true
}
