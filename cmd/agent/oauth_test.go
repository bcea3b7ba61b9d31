package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
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

// TestTailOverOAuthBearerOutlivesItsTokens tails a file that the application writes to for
// three token lifetimes, through the broker's OAUTHBEARER listener, whose sessions last at most
// its connections.max.reauth.ms (broker.sh: 3 s): the agent fetches new tokens before the old
// ones expire, re-authenticates its connections (KIP-368), and delivers every line once.
func TestTailOverOAuthBearerOutlivesItsTokens(t *testing.T) {
	b := oauthtest.RealBroker(t)
	const secret = "agent-refresh-secret-0815"
	const lifetime = 4 * time.Second
	srv := oauthtest.StartForBroker(t, b, "agent-2", secret, lifetime)
	topic := kafkatest.NewTopic(t, 3)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	lw := testkit.NewLineFile(t, path, lineLen)
	lw.Write(1000)
	args := append(tailArgs(b.Bootstrap, topic, path, filepath.Join(dir, "state")),
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
		"-X", "sasl.oauthbearer.token.endpoint.url="+srv.TokenURL,
		"-X", "sasl.oauthbearer.client.id=agent-2", "-X", "sasl.oauthbearer.client.secret="+secret)
	a := startAgent(t, nil, args...)
	start := time.Now()
	for time.Since(start) < 3*lifetime {
		lw.Write(200)
		time.Sleep(100 * time.Millisecond) // the application's pace, not a wait for the agent
	}
	written := lw.Next
	waitForRecords(t, kafkatest.Bootstrap(t), topic, written, time.Minute, a)
	a.stop(time.Minute)
	log := a.log()
	if strings.Contains(log, secret) {
		t.Fatal("the agent's log shows the client secret")
	}
	if strings.Contains(log, "level=ERROR") {
		t.Fatalf("the agent logged errors while its tokens were renewed:\n%s", log)
	}
	// The first token and, every 80 % of a lifetime, the next: at least three over three
	// lifetimes, however the refreshes fall.
	if n := srv.Fetches.Load(); n < 3 {
		t.Fatalf("%d tokens fetched over %v with %v tokens, want at least 3", n, time.Since(start).Round(time.Second), lifetime)
	}
	lost, dup := countLines(t, kafkatest.Bootstrap(t), topic, written)
	if lost != 0 || dup != 0 {
		t.Fatalf("%d of %d lines lost, %d duplicated", lost, written, dup)
	}
	t.Logf("%d lines over %v, %d tokens of %v fetched", written, time.Since(start).Round(time.Second), srv.Fetches.Load(), lifetime)
}
