package producer

import (
	"errors"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	e, err := parseJAAS(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
		clientId="my-client" clientSecret="a \"quoted\" s3cret;=" scope=kafka ;`)
	if err != nil {
		t.Fatal(err)
	}
	if e.module != jaasOAuthBearerModule || e.options["clientId"] != "my-client" ||
		e.options["clientSecret"] != `a "quoted" s3cret;=` || e.options["scope"] != "kafka" {
		t.Fatalf("parsed %+v", e)
	}
	for _, bad := range []string{
		``,
		`org.apache.kafka.common.security.plain.PlainLoginModule username="u";`, // no flag
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required password="unterminated-secret;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username;`,
		`A required; B required;`,
	} {
		_, err := parseJAAS(bad)
		if err == nil {
			t.Errorf("parseJAAS(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "unterminated-secret") {
			t.Errorf("error quotes a value: %v", err)
		}
	}
}

// TestJAASConfigAsJavaWritesIt: a Java client's OAUTHBEARER and PLAIN properties work as they
// are; the properties win over JAAS, sasl.jaas.config is masked, and a module that does not fit
// the mechanism is an error naming the key.
func TestJAASConfigAsJavaWritesIt(t *testing.T) {
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9092"}
	if err := c.SetAll(map[string]string{
		"security.protocol":                   "SASL_SSL",
		"sasl.mechanism":                      "OAUTHBEARER",
		"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		"sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="jaas-client" clientSecret="jaas-secret-1" scope="s1";`,
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	nc, err := c.NetworkConfig()
	if err != nil {
		t.Fatal(err)
	}
	if o := nc.SASL.OAuth; o.ClientID != "jaas-client" || o.ClientSecret != "jaas-secret-1" || o.Scope != "s1" {
		t.Fatalf("from JAAS: %+v", o)
	}
	c.SASLOAuthBearerClientID = "property-client"
	if nc, _ := c.NetworkConfig(); nc.SASL.OAuth.ClientID != "property-client" {
		t.Fatal("sasl.jaas.config won over sasl.oauthbearer.client.id")
	}
	for _, p := range c.Values() {
		if strings.Contains(p.Default, "jaas-secret-1") {
			t.Fatalf("Values shows %s", p.Key)
		}
	}

	plain := DefaultConfig()
	plain.BootstrapServers = []string{"127.0.0.1:9092"}
	plain.SecurityProtocol, plain.SASLMechanism = "SASL_PLAINTEXT", "PLAIN"
	plain.SASLJAASConfig = `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`
	if err := plain.Validate(); err != nil {
		t.Fatal(err)
	}
	if nc, _ := plain.NetworkConfig(); nc.SASL.Username != "alice" || nc.SASL.Password != "alice-secret" {
		t.Fatalf("PLAIN from JAAS: %+v", nc.SASL)
	}

	checkValidateNamesTheKey(t, oauthBase, []validateCase{
		{"module of another mechanism", func(c *Config) { c.SASLJAASConfig = plain.SASLJAASConfig }, "sasl.jaas.config", "OAuthBearerLoginModule"},
		{"unsecured tokens", func(c *Config) {
			c.SASLJAASConfig = jaasOAuthBearerModule + ` required unsecuredLoginStringClaim_sub="x";`
		}, "sasl.jaas.config", "not supported"},
		{"syntax", func(c *Config) { c.SASLJAASConfig = jaasOAuthBearerModule + ` required clientId="x"` }, "sasl.jaas.config", ";"},
		{"callback handler", func(c *Config) { c.SASLLoginCallbackHandlerClass = "com.example.MyHandler" }, "sasl.login.callback.handler.class", "OAuthBearerLoginCallbackHandler"},
	})
	var ce *ConfigError
	broken := plain
	broken.SASLJAASConfig = `org.apache.kafka.common.security.plain.PlainLoginModule required password="never-shown`
	if err := broken.Validate(); !errors.As(err, &ce) || strings.Contains(err.Error(), "never-shown") {
		t.Fatalf("broken JAAS: %v", err)
	}
}
