package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
	"github.com/kafkatrail/kafkatrail/network"
)

const oauthSecret = "oauth-secret-never-printed"

// oauthConfig sets the OAUTHBEARER properties by their names: the Java client's for the client
// id, librdkafka's for the secret, so that both spellings are exercised.
func oauthConfig(url string) func(*Config) {
	return func(c *Config) {
		for k, v := range map[string]string{
			"security.protocol":                             "SASL_PLAINTEXT",
			"sasl.mechanism":                                "OAUTHBEARER",
			"sasl.oauthbearer.method":                       "oidc",
			"sasl.oauthbearer.token.endpoint.url":           url,
			"sasl.oauthbearer.client.credentials.client.id": "agent-1",
			"sasl.oauthbearer.client.secret":                oauthSecret,
		} {
			if err := c.Set(k, v); err != nil {
				panic(err)
			}
		}
	}
}

// TestRealBrokerOAuthBearerRefreshAndReauth produces without pause for longer than two token
// lifetimes to the broker's OAUTH listener, whose sessions last at most connections.max.reauth.ms
// (3 s): the producer must re-authenticate its connections before each session ends (the broker
// would close them otherwise: the dial count shows it did not) and fetch a new token before the
// old one expires (the token server counts them), without losing, duplicating or reordering a
// record while requests are in flight across the re-authentications (reads from the broker are
// slowed so that there always are some).
func TestRealBrokerOAuthBearerRefreshAndReauth(t *testing.T) {
	b := oauthtest.RealBroker(t)
	const lifetime = 6 * time.Second
	srv := oauthtest.StartForBroker(t, b, "agent-1", oauthSecret, lifetime)
	topic := kafkatest.NewTopic(t, 1)
	var dials atomic.Int32
	dial := func(ctx context.Context, netw, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, netw, addr)
		if err != nil {
			return nil, err
		}
		return slowReads{c}, nil
	}
	p := newTestProducer(t, []string{b.Bootstrap}, func(c *Config) {
		oauthConfig(srv.TokenURL)(c)
		c.LingerMs = 5
	}, WithDialer(dial))

	const run = 2*lifetime + 3*time.Second
	var (
		mu       sync.Mutex
		offsets  []int64
		firstErr error
		sent     int
	)
	cb := func(md RecordMetadata, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		offsets = append(offsets, md.Offset)
	}
	start := time.Now()
	var recs []testRecord
	for time.Since(start) < run {
		r := testRecord{value: fmt.Sprintf("oauth-%06d", sent), header: fmt.Sprint(sent)}
		recs = append(recs, r)
		err := p.Send(context.Background(), &Record{Topic: topic, Partition: PartitionAny, Value: []byte(r.value),
			Headers: []Header{{Key: "i", Value: []byte(r.header)}}}, cb)
		if err != nil {
			t.Fatalf("Send %d after %v: %v", sent, time.Since(start), err)
		}
		sent++
		if sent%20 == 0 {
			time.Sleep(5 * time.Millisecond) // a steady stream: requests in flight at every moment
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if firstErr != nil {
		t.Fatalf("a record failed: %v", firstErr)
	}
	for i, off := range offsets {
		if off != int64(i) {
			t.Fatalf("callback %d has offset %d: records lost, duplicated or reordered", i, off)
		}
	}
	mu.Unlock()
	checkRoundTrip(t, recs, consumeAll(t, []string{kafkatest.Bootstrap(t)}, topic, len(recs), 30*time.Second), 1)

	st, _ := p.SASLStats()
	t.Logf("%d records in %v; %+v; server issued %d tokens; %d dials", sent, run, st, srv.Fetches.Load(), dials.Load())
	// Tokens of 6 s over 15 s: fetched at the start and refreshed at least twice.
	if srv.Fetches.Load() < 3 || st.TokenFetches != srv.Fetches.Load() || st.TokenFailures != 0 {
		t.Errorf("tokens: server issued %d, client counts %+v; want at least 3, no failure", srv.Fetches.Load(), st)
	}
	// Sessions of 3 s over 15 s: the leader's connection re-authenticated at least 3 times.
	if st.Reauthentications < 3 || st.SessionLifetime <= 0 || st.SessionLifetime > b.Reauth {
		t.Errorf("re-authentications %d, last session lifetime %v; want at least 3, within (0, %v]",
			st.Reauthentications, st.SessionLifetime, b.Reauth)
	}
	// Requests were in flight across re-authentications, and their responses arrived.
	if st.ResponsesDuringReauthentication == 0 {
		t.Errorf("no response arrived during a re-authentication: the test did not have requests in flight across one")
	}
	// The bootstrap connection and the leader's, and one more for each session the broker closed
	// at its end: the re-authentication begins with the first write after 85-95 % of the
	// session (as Java's), and a machine busy enough to hold that write, or the broker's read
	// of it, past the session's end loses that session. Every session is accounted for either
	// way: re-authenticated, or ended and dialed again; a client that never re-authenticated
	// fails the count above.
	sessions := int64(run/b.Reauth) + 1
	if extra := int64(dials.Load()) - 3; extra > 0 && st.Reauthentications+extra > sessions {
		t.Errorf("%d connections dialed and %d re-authentications in %d sessions: sessions ended instead of being re-authenticated",
			dials.Load(), st.Reauthentications, sessions)
	}
}

// TestRealBrokerOAuthBearerRefused: a token the broker refuses (wrong audience) fails Send fast
// with an authentication error naming OAUTHBEARER and the broker's message, never the secret.
func TestRealBrokerOAuthBearerRefused(t *testing.T) {
	b := oauthtest.RealBroker(t)
	srv := oauthtest.StartForBroker(t, b, "agent-1", oauthSecret, time.Hour)
	srv.SetAudience("not-kafka")
	p := newTestProducer(t, []string{b.Bootstrap}, func(c *Config) {
		oauthConfig(srv.TokenURL)(c)
		c.MaxBlockMs = 20000
	})
	start := time.Now()
	err := p.Send(context.Background(), &Record{Topic: "oauth-refused", Partition: PartitionAny, Value: []byte("v")}, nil)
	var ae *network.AuthenticationError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "OAUTHBEARER") || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("Send error %v, want an OAUTHBEARER authentication error with the broker's message", err)
	}
	if strings.Contains(err.Error(), oauthSecret) {
		t.Fatalf("error leaks the secret: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the refusal took %v to surface", d)
	}
}

// slowReads delays every read from the broker a little, as a distant broker would: the
// producer then keeps several requests in flight, so that re-authentications happen with
// responses still to come.
type slowReads struct{ net.Conn }

func (c slowReads) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	time.Sleep(20 * time.Millisecond) // what arrived is held back, as if it were still on its way
	return n, err
}

// TestRealBrokerOAuthBearerWithExtensions: a first message with SASL extensions (Confluent
// Cloud's pair, in both spellings) is one the broker's OAUTHBEARER server parses and accepts:
// the records are delivered.
func TestRealBrokerOAuthBearerWithExtensions(t *testing.T) {
	b := oauthtest.RealBroker(t)
	srv := oauthtest.StartForBroker(t, b, "agent-1", oauthSecret, time.Minute)
	topic := kafkatest.NewTopic(t, 1)
	p := newTestProducer(t, []string{b.Bootstrap}, func(c *Config) {
		oauthConfig(srv.TokenURL)(c)
		c.SASLOAuthBearerExtensions = "logicalCluster=lkc-abc123"
		c.SASLJAASConfig = jaasOAuthBearerModule + ` required extension_identityPoolId="pool-xyz";`
	})
	mustProduceAll(t, p, topic, makeRecords(20, 10), 30*time.Second)
	if got := len(kafkatest.Consume(t, topic, 20, 30*time.Second)); got != 20 {
		t.Fatalf("%d records in the topic, want 20", got)
	}
}

// TestRealBrokerOAuthBearerJWTBearerGrant: the producer gets its token by the JWT bearer grant
// (KIP-1139), proving who it is with an assertion it signs (RS256), and the broker's OAUTH
// listener takes the token: the records are delivered, and the token server saw the assertion's
// subject.
func TestRealBrokerOAuthBearerJWTBearerGrant(t *testing.T) {
	b := oauthtest.RealBroker(t)
	rsaFile, _, rsaPub, _ := writeKeys(t, t.TempDir())
	srv, err := oauthtest.Start(oauthtest.Options{KeyFile: b.KeyFile, KID: b.KID, Issuer: b.Issuer, Audience: b.Audience,
		Lifetime: time.Minute, AssertionKey: rsaPub})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	topic := kafkatest.NewTopic(t, 1)
	p := newTestProducer(t, []string{b.Bootstrap}, func(c *Config) {
		c.SecurityProtocol, c.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
		c.SASLOAuthBearerTokenEndpointURL = srv.TokenURL
		c.SASLOAuthBearerGrantType = network.GrantJWTBearer // librdkafka's spelling
		c.SASLOAuthBearerAssertionPrivateKeyFile = rsaFile
		c.SASLOAuthBearerAssertionClaimSub, c.SASLOAuthBearerAssertionClaimIss = "log-agent", "log-agent"
	})
	mustProduceAll(t, p, topic, makeRecords(20, 10), 30*time.Second)
	if got := len(kafkatest.Consume(t, topic, 20, 30*time.Second)); got != 20 {
		t.Fatalf("%d records in the topic, want 20", got)
	}
	if a := srv.LastAssertion(); a == nil || a.Claims["sub"] != "log-agent" {
		t.Fatalf("the token server's last assertion %+v, want one for log-agent", a)
	}
}
