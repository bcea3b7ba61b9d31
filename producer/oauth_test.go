package producer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/network"
)

// oauthBase is a valid OAUTHBEARER configuration for the validation cases to break.
func oauthBase(c *Config) {
	c.SecurityProtocol = "SASL_SSL"
	c.SASLMechanism = "OAUTHBEARER"
	c.SASLOAuthBearerTokenEndpointURL = "https://idp.example/oauth2/token"
	c.SASLOAuthBearerClientID = "agent"
	c.SASLOAuthBearerClientSecret = "s"
}

func TestOAuthBearerValidateNamesTheKey(t *testing.T) {
	checkValidateNamesTheKey(t, oauthBase, []validateCase{
		{"no endpoint", func(c *Config) { c.SASLOAuthBearerTokenEndpointURL = "" }, "sasl.oauthbearer.token.endpoint.url", "required"},
		{"bad endpoint", func(c *Config) { c.SASLOAuthBearerTokenEndpointURL = "idp.example/token" }, "sasl.oauthbearer.token.endpoint.url", "https://"},
		{"missing token file", func(c *Config) { c.SASLOAuthBearerTokenEndpointURL = "file:///nonexistent/token" }, "sasl.oauthbearer.token.endpoint.url", "token file"},
		{"no client id", func(c *Config) { c.SASLOAuthBearerClientID = "" }, "sasl.oauthbearer.client.id", "required"},
		{"no client secret", func(c *Config) { c.SASLOAuthBearerClientSecret = "" }, "sasl.oauthbearer.client.secret", "required"},
		{"two client ids", func(c *Config) { c.SASLOAuthBearerClientCredentialsID = "other" }, "sasl.oauthbearer.client.id", "differs"},
		{"method default", func(c *Config) { c.SASLOAuthBearerMethod = "default" }, "sasl.oauthbearer.method", "not supported"},
		{"window factor", func(c *Config) { c.SASLLoginRefreshWindowFactor = 0.3 }, "sasl.login.refresh.window.factor", "between 0.5 and 1.0"},
		{"jitter", func(c *Config) { c.SASLLoginRefreshWindowJitter = 0.5 }, "sasl.login.refresh.window.jitter", "between 0 and 0.25"},
		{"min period", func(c *Config) { c.SASLLoginRefreshMinPeriodSeconds = 901 }, "sasl.login.refresh.min.period.seconds", "900"},
		{"backoff max", func(c *Config) { c.SASLLoginRetryBackoffMaxMs = 10 }, "sasl.login.retry.backoff.max.ms", "below"},
	})
}

// TestOAuthBearerProperties: both spellings of the client credentials reach the network layer,
// the Java defaults are set, a float property parses, and the secrets are masked in Values.
func TestOAuthBearerProperties(t *testing.T) {
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9092"}
	props := map[string]string{
		"security.protocol":                                 "SASL_PLAINTEXT",
		"sasl.mechanism":                                    "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url":               "https://idp.example/token",
		"sasl.oauthbearer.client.credentials.client.id":     "java-name",
		"sasl.oauthbearer.client.credentials.client.secret": "very-secret-1",
		"sasl.oauthbearer.scope":                            "kafka",
		"sasl.login.refresh.window.factor":                  "0.9",
		"sasl.login.refresh.buffer.seconds":                 "0",
	}
	if err := c.SetAll(props); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	nc, err := c.NetworkConfig()
	if err != nil {
		t.Fatal(err)
	}
	o := nc.SASL.OAuth
	if nc.SASL.Mechanism != network.SASLOAuthBearer || o.ClientID != "java-name" || o.ClientSecret != "very-secret-1" ||
		o.Scope != "kafka" || o.RefreshWindowFactor != 0.9 || o.RefreshWindowJitter != 0.05 ||
		o.RefreshMinPeriod != time.Minute || o.RefreshBuffer >= 0 || o.RetryBackoff != 100*time.Millisecond ||
		o.RetryBackoffMax != 10*time.Second {
		t.Fatalf("network config %+v", o)
	}
	if err := c.Set("sasl.login.refresh.window.jitter", "lots"); err == nil || !strings.Contains(err.Error(), "sasl.login.refresh.window.jitter") {
		t.Fatalf("a float property of the wrong type: %v", err)
	}
	c.SASLOAuthBearerClientSecret = "very-secret-2"
	for _, p := range c.Values() {
		if strings.Contains(p.Default, "very-secret") {
			t.Fatalf("Values shows %s = %q", p.Key, p.Default)
		}
	}
	// librdkafka's names work alone, and a token file needs no client.
	d := DefaultConfig()
	d.BootstrapServers = []string{"127.0.0.1:9092"}
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("x.y.z"), 0o600)
	if err := d.SetAll(map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
		"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "file://" + file}); err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("token file: %v", err)
	}
}
