package producer

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
)

// TestOAuthBearerExtensionsAsTheJavaClientSendsThem: for the same token and sasl.jaas.config,
// the first OAUTHBEARER message (token and SASL extensions, KIP-342) is the Java client's byte
// for byte but for the extensions' order (Java's changes from run to run; ours is by name),
// the Java side made by its own classes (testdata/java/OAuthBearerFirstMessage.java:
// OAuthBearerLoginCallbackHandler's extensions, OAuthBearerClientInitialResponse's bytes) from
// the test broker's kafka-clients; librdkafka's sasl.oauthbearer.extensions gives the same.
func TestOAuthBearerExtensionsAsTheJavaClientSendsThem(t *testing.T) {
	prog := javatest.Compile(t, []string{javatest.KafkaLib(t)}, "testdata/java/OAuthBearerFirstMessage.java")
	const token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZ2VudCIsImV4cCI6NDEwMjQ0NDgwMCwiaWF0IjoxNzAwMDAwMDAwfQ.c2ln"
	tokenFile := filepath.Join(t.TempDir(), "token.jwt")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var many []string
	for i := range 13 { // past the copy's first table size
		many = append(many, fmt.Sprintf("%s=\"v%d\"", "extension_"+strings.Repeat(string(rune('a'+i)), i+1), i))
	}
	for _, c := range []struct{ name, options, librdkafka string }{
		{"none", `clientId="ignored"`, ""},
		{"Confluent Cloud", `extension_logicalCluster="lkc-abc123" extension_identityPoolId="pool-xyz"`,
			"logicalCluster=lkc-abc123,identityPoolId=pool-xyz"},
		{"four", `extension_logicalCluster="lkc-abc123" extension_identityPoolId="pool-xyz" extension_b="2" extension_a="1"`,
			"logicalCluster=lkc-abc123,identityPoolId=pool-xyz,b=2,a=1"},
		{"thirteen", strings.Join(many, " "), ""},
		{"values with spaces, escapes and symbols", `extension_note="a b\tc~!\101\"" extension_x="=,;"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			jaas := jaasOAuthBearerModule + " required " + c.options + ";"
			want := strings.TrimSpace(prog.Run(t, "OAuthBearerFirstMessage", jaas, tokenFile))
			forms := map[string]*Config{"sasl.jaas.config": extensionsConfig(jaas, tokenFile, "")}
			if c.librdkafka != "" {
				forms["sasl.oauthbearer.extensions"] = extensionsConfig("", tokenFile, c.librdkafka)
			}
			for form, cfg := range forms {
				if err := cfg.Validate(); err != nil {
					t.Fatalf("%s: %v", form, err)
				}
				got := string(cfg.oauthBearerConfig().InitialResponse(token))
				if sameFirstMessage(got, unhex(want)) {
					continue
				}
				t.Fatalf("%s: first message\n%q\nthe Java client's\n%q", form, got, unhex(want))
			}
		})
	}
}

func extensionsConfig(jaas, tokenFile, librdkafka string) *Config {
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9"}
	c.SecurityProtocol, c.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
	c.SASLJAASConfig, c.SASLOAuthBearerExtensions = jaas, librdkafka
	c.SASLOAuthBearerTokenEndpointURL = "file://" + tokenFile
	return &c
}

// sameFirstMessage reports whether two first messages are equal but for the order of their
// extensions: the Java client writes them in Map.copyOf's order (SaslExtensions), which changes
// from one JVM run to the next, and the broker reads them into a map.
func sameFirstMessage(a, b string) bool {
	pa, pb := strings.Split(a, "\x01"), strings.Split(b, "\x01")
	if len(pa) != len(pb) || len(pa) < 4 || pa[0] != pb[0] || pa[1] != pb[1] {
		return false
	}
	ea, eb := slices.Sorted(slices.Values(pa[2:])), slices.Sorted(slices.Values(pb[2:]))
	return slices.Equal(ea, eb)
}

func unhex(s string) string {
	b, _ := hex.DecodeString(s)
	return string(b)
}

// TestOAuthBearerExtensionsRefused: names and values RFC 7628 does not allow, the reserved
// name auth, and the same name with two values are refused at validation, naming the key and
// never quoting a value.
func TestOAuthBearerExtensionsRefused(t *testing.T) {
	for _, c := range []struct{ jaas, librdkafka, want string }{
		{`extension_auth="x"`, "", "auth is reserved"},
		{`extension_logical_cluster="x"`, "", "letters only"},
		{`extension_a="secreté"`, "", "printable ASCII"},
		{"", "logicalCluster", "name=value"},
		{`extension_a="1"`, "a=2", "differs"},
	} {
		jaas := ""
		if c.jaas != "" {
			jaas = jaasOAuthBearerModule + " required " + c.jaas + ";"
		}
		err := extensionsConfig(jaas, "/dev/null", c.librdkafka).Validate()
		if err == nil || !strings.Contains(err.Error(), "sasl.oauthbearer.extensions") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v, want sasl.oauthbearer.extensions: …%s…", c.jaas, c.librdkafka, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error quotes a value: %v", err)
		}
	}
}
