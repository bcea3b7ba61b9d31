package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
)

// TestCheckHidesOAuthBearerSecrets: `agent check` prints the OAUTHBEARER settings with both
// spellings of the client secret masked.
func TestCheckHidesOAuthBearerSecrets(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	body := "topic: t\nbrokers: [127.0.0.1:9096]\nproducer:\n  security.protocol: SASL_SSL\n  sasl.mechanism: OAUTHBEARER\n" +
		"  sasl.oauthbearer.token.endpoint.url: https://idp.example/oauth2/token\n  sasl.oauthbearer.client.id: agent\n" +
		"  sasl.oauthbearer.client.secret: librdkafka-named-secret\n  sasl.oauthbearer.client.credentials.client.secret: librdkafka-named-secret\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, nil, 30*time.Second, nil, "check", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("check exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "librdkafka-named-secret") {
		t.Fatal("agent check printed the client secret")
	}
	for _, want := range []string{"producer.sasl.oauthbearer.client.secret=[redacted]",
		"producer.sasl.oauthbearer.client.credentials.client.secret=[redacted]", "producer.sasl.oauthbearer.client.id=agent"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("check output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestStdinOverOAuthBearer ships stdin through the broker's OAUTHBEARER listener with a token
// from the client credentials grant; at debug level no log line shows the client secret.
func TestStdinOverOAuthBearer(t *testing.T) {
	b := oauthtest.RealBroker(t)
	const secret = "agent-oauth-secret-4711"
	srv := oauthtest.StartForBroker(t, b, "agent-1", secret, time.Hour)
	topic := kafkatest.NewTopic(t, 2)
	const n = 2000
	r := runAgent(t, numberedLines(n, 60), time.Minute, nil, "--brokers", b.Bootstrap, "--topic", topic, "--log-level", "debug",
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
		"-X", "sasl.oauthbearer.token.endpoint.url="+srv.TokenURL,
		"-X", "sasl.oauthbearer.client.id=agent-1", "-X", "sasl.oauthbearer.client.secret="+secret)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, tail(r.stderr))
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatal("the agent's output shows the client secret")
	}
	if srv.Fetches.Load() != 1 {
		t.Fatalf("%d tokens fetched, want 1", srv.Fetches.Load())
	}
	checkEveryLineOnce(t, kcatValues(t, kafkatest.Bootstrap(t), topic), n)
}
