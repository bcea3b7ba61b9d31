package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/kerberos"
)

// kerberosEnv is the test realm of the broker's KERBEROS listener (scripts/kafka/kdc.sh).
type kerberosEnv struct {
	bootstrap, krb5conf, principal, keytab, shortPrincipal, shortKeytab, wrongPrincipal, wrongKeytab, kdcLog string
}

func realKerberos(t *testing.T) kerberosEnv {
	t.Helper()
	e := kerberosEnv{bootstrap: os.Getenv("KAFKA_KERBEROS_BOOTSTRAP"), krb5conf: os.Getenv("KAFKA_KRB5_CONFIG"),
		principal: os.Getenv("KAFKA_KERBEROS_PRINCIPAL"), keytab: os.Getenv("KAFKA_KERBEROS_KEYTAB"),
		shortPrincipal: os.Getenv("KAFKA_KERBEROS_SHORT_PRINCIPAL"), shortKeytab: os.Getenv("KAFKA_KERBEROS_SHORT_KEYTAB"),
		wrongPrincipal: os.Getenv("KAFKA_KERBEROS_WRONG_PRINCIPAL"), wrongKeytab: os.Getenv("KAFKA_KERBEROS_WRONG_KEYTAB"),
		kdcLog: os.Getenv("KAFKA_KDC_LOG")}
	if e.bootstrap == "" || e.krb5conf == "" || e.keytab == "" {
		if testing.Short() {
			t.Skip("needs the real broker's KERBEROS listener and its KDC; skipped in -short mode")
		}
		t.Fatalf("%s (KAFKA_KERBEROS_BOOTSTRAP, KAFKA_KRB5_CONFIG, KAFKA_KERBEROS_KEYTAB unset: the broker's KERBEROS listener and its KDC)", kafkatest.NotRunning)
	}
	t.Setenv("KRB5_CONFIG", e.krb5conf)
	return e
}

// gssapiConfig is a Java client's GSSAPI configuration with a keytab.
func gssapiConfig(principal, keytab string) func(*Config) {
	return func(c *Config) {
		c.SecurityProtocol, c.SASLMechanism, c.SASLKerberosServiceName = "SASL_PLAINTEXT", "GSSAPI", "kafka"
		c.SASLJAASConfig = kerberos.LoginModule + ` required useKeyTab=true storeKey=true keyTab="` + keytab +
			`" principal="` + principal + `";`
	}
}

// TestRealBrokerGSSAPI: with the client's keytab, the producer logs in to the test realm's KDC
// (MIT krb5kdc), gets a service ticket for kafka/localhost (the broker's address is 127.0.0.1,
// whose name is localhost, as the Java client finds it) and authenticates to the broker's
// KERBEROS listener (the JDK's Krb5LoginModule and GSS-API): the records are delivered, the
// connection re-authenticating with the broker's 10 s sessions. A stale keytab fails at once,
// naming GSSAPI and the KDC's refusal.
func TestRealBrokerGSSAPI(t *testing.T) {
	e := realKerberos(t)
	topic := kafkatest.NewTopic(t, 1)
	p := newTestProducer(t, []string{e.bootstrap}, gssapiConfig(e.principal, e.keytab))
	mustProduceAll(t, p, topic, makeRecords(50, 10), 30*time.Second)
	if got := len(kafkatest.Consume(t, topic, 50, 30*time.Second)); got != 50 {
		t.Fatalf("%d records in the topic, want 50", got)
	}
	if st, ok := p.SASLStats(); !ok || st.Authentications < 1 {
		t.Fatalf("SASL stats %+v, want a connection authenticated", st)
	}
	if log, err := os.ReadFile(e.kdcLog); err != nil || !strings.Contains(string(log), e.principal+" for kafka/localhost@") {
		t.Fatalf("the KDC's log has no service ticket for %s to kafka/localhost (%v)", e.principal, err)
	}

	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{e.bootstrap}
	gssapiConfig(e.wrongPrincipal, e.wrongKeytab)(&cfg)
	start := time.Now()
	_, err := New(cfg)
	var cerr *ConfigError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "GSSAPI") || !strings.Contains(err.Error(), "stale keytab") {
		t.Fatalf("a stale keytab: %v, want a configuration error naming GSSAPI and the wrong key", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stale keytab failed after %v, want at once", d)
	}
	t.Logf("stale keytab: %v", err)
}

// TestRealBrokerGSSAPITicketsRenewed: a principal whose tickets last 20 s and cannot be renewed
// produces without pause for 50 s through the KERBEROS listener, whose 10 s sessions make the
// connection re-authenticate with a fresh service ticket: every record is delivered, in order,
// and the KDC's log shows the client logging in again with its keytab before each ticket ended.
func TestRealBrokerGSSAPITicketsRenewed(t *testing.T) {
	e := realKerberos(t)
	topic := kafkatest.NewTopic(t, 1)
	before := kdcLines(t, e.kdcLog, "AS_REQ", e.shortPrincipal+" for krbtgt/")
	p := newTestProducer(t, []string{e.bootstrap}, func(c *Config) {
		gssapiConfig(e.shortPrincipal, e.shortKeytab)(c)
		c.LingerMs = 5
	})
	// 20 records every 100 ms for 50 s.
	const rounds, per = 500, 20
	res := newResults(rounds * per)
	start := time.Now()
	for round := range rounds {
		for j := range per {
			i := round*per + j
			_ = p.Send(t.Context(), &Record{Topic: topic, Partition: PartitionAny, Value: []byte(fmt.Sprintf("%07d", i))}, res.callback(i))
		}
		time.Sleep(time.Until(start.Add(time.Duration(round+1) * 100 * time.Millisecond)))
	}
	run := time.Since(start)
	res.wait(t, 30*time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	got := kafkatest.Consume(t, topic, rounds*per, 30*time.Second)
	if len(got) != rounds*per {
		t.Fatalf("%d records in the topic, %d sent", len(got), rounds*per)
	}
	for i, r := range got {
		if want := fmt.Sprintf("%07d", i); string(r.Value) != want {
			t.Fatalf("record %d of the topic is %q, want %q: lost, duplicated or reordered", i, r.Value, want)
		}
	}
	sent := rounds * per
	logins := kdcLines(t, e.kdcLog, "AS_REQ", e.shortPrincipal+" for krbtgt/") - before
	st, _ := p.SASLStats()
	t.Logf("%d records over %v; %d logins with the keytab (20 s tickets); %d authentications, %d re-authentications",
		sent, run, logins, st.Authentications, st.Reauthentications)
	if logins < 3 {
		t.Fatalf("%d logins in %v of 20 s tickets, want at least 3 (a new ticket before each ended)", logins, run)
	}
	if st.Reauthentications < 3 {
		t.Fatalf("%d re-authentications in %v of 10 s sessions, want at least 3", st.Reauthentications, run)
	}
}

// kdcLines counts the KDC log's lines holding every one of parts.
func kdcLines(t *testing.T, path string, parts ...string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestRealBrokerGSSAPITicketCache: useTicketCache=true reads the cache MIT's kinit wrote (as on
// a host where sssd or a cron job keeps it fresh): the records are delivered. A cache whose
// ticket has ended fails at once, saying so and what to do.
func TestRealBrokerGSSAPITicketCache(t *testing.T) {
	e := realKerberos(t)
	dir := t.TempDir()
	kinit := func(cache, principal, keytab string, args ...string) {
		t.Helper()
		cmd := exec.Command("kinit", append(append([]string{"-c", cache}, args...), "-k", "-t", keytab, principal)...)
		cmd.Env = append(os.Environ(), "KRB5_CONFIG="+e.krb5conf)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kinit %s: %v\n%s", principal, err, out)
		}
	}
	cache := filepath.Join(dir, "krb5cc_agent")
	kinit(cache, e.principal, e.keytab)
	topic := kafkatest.NewTopic(t, 1)
	p := newTestProducer(t, []string{e.bootstrap}, func(c *Config) {
		c.SecurityProtocol, c.SASLMechanism, c.SASLKerberosServiceName = "SASL_PLAINTEXT", "GSSAPI", "kafka"
		c.SASLJAASConfig = kerberos.LoginModule + ` required useTicketCache=true ticketCache="` + cache + `";`
	})
	mustProduceAll(t, p, topic, makeRecords(20, 10), 30*time.Second)

	expired := filepath.Join(dir, "krb5cc_short")
	kinit(expired, e.shortPrincipal, e.shortKeytab, "-l", "2s")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !ticketEnded(t, expired) {
		time.Sleep(200 * time.Millisecond)
	}
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{e.bootstrap}
	cfg.SecurityProtocol, cfg.SASLMechanism, cfg.SASLKerberosServiceName = "SASL_PLAINTEXT", "GSSAPI", "kafka"
	cfg.SASLJAASConfig = kerberos.LoginModule + ` required useTicketCache=true ticketCache="` + expired + `";`
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "kinit") {
		t.Fatalf("an ended ticket: %v, want an error saying it expired and to kinit again", err)
	}
	t.Logf("%v", err)
}

// ticketEnded reports whether klist says the cache's ticket has ended (klist -s fails then).
func ticketEnded(t *testing.T, cache string) bool {
	return exec.Command("klist", "-s", "-c", cache).Run() != nil
}

// TestRealBrokerGSSAPIBehindAnAlias: bootstrap.servers names the broker by an alias (as a DNS
// alias or a load balancer would) that is not in its service principal. By default the client
// asks the KDC for kafka/<alias>, which it does not know: the error names that principal and
// the cause. With client.dns.lookup=resolve_canonical_bootstrap_servers_only the alias becomes
// the canonical name of its address (localhost), as in Java, and the records are delivered.
func TestRealBrokerGSSAPIBehindAnAlias(t *testing.T) {
	e := realKerberos(t)
	_, port, _ := net.SplitHostPort(e.bootstrap)
	const alias = "kafka-lb.kafkatrail.test"
	dial := func(ctx context.Context, netw, addr string) (net.Conn, error) {
		if h, p, _ := net.SplitHostPort(addr); h == alias {
			addr = net.JoinHostPort("127.0.0.1", p)
		}
		var d net.Dialer
		return d.DialContext(ctx, netw, addr)
	}
	dns := fakeDNS{hosts: map[string][]string{alias: {"127.0.0.1"}}, addrs: map[string][]string{"127.0.0.1": {"localhost"}}}
	topic := kafkatest.NewTopic(t, 1)
	bootstrap := []string{net.JoinHostPort(alias, port)}

	p := newTestProducer(t, bootstrap, func(c *Config) {
		gssapiConfig(e.principal, e.keytab)(c)
		c.DeliveryTimeoutMs, c.RequestTimeoutMs, c.LingerMs, c.MaxBlockMs = 10_000, 5_000, 0, 5_000
	}, WithDialer(dial))
	err := produceAll(t, p, topic, makeRecords(1, 10), 30*time.Second).firstError()
	if err == nil || !strings.Contains(err.Error(), "GSSAPI") || !strings.Contains(err.Error(), "kafka/"+alias) ||
		!strings.Contains(err.Error(), "service principal is unknown") {
		t.Fatalf("through the alias by default: %v, want a GSSAPI error naming kafka/%s unknown to the KDC", err, alias)
	}
	t.Logf("by default: %v", err)

	p = newTestProducer(t, bootstrap, func(c *Config) {
		gssapiConfig(e.principal, e.keytab)(c)
		c.ClientDNSLookup = "resolve_canonical_bootstrap_servers_only"
	}, WithDialer(dial), func(o *options) { o.resolver = dns })
	mustProduceAll(t, p, topic, makeRecords(20, 10), 30*time.Second)
}

// TestRealBrokerGSSAPITicketCacheRenewedOutside: a ticket cache that another process (kinit
// here, k5start or sssd in production) refreshes is read again: with tickets of 20 s that
// cannot be renewed, the producer still authenticates after the first ticket ended because
// the cache now holds a newer one.
func TestRealBrokerGSSAPITicketCacheRenewedOutside(t *testing.T) {
	e := realKerberos(t)
	cache := filepath.Join(t.TempDir(), "krb5cc_short")
	kinit := func() {
		t.Helper()
		cmd := exec.Command("kinit", "-c", cache, "-k", "-t", e.shortKeytab, e.shortPrincipal)
		cmd.Env = append(os.Environ(), "KRB5_CONFIG="+e.krb5conf)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kinit: %v\n%s", err, out)
		}
	}
	kinit()
	first := time.Now()
	topic := kafkatest.NewTopic(t, 1)
	p := newTestProducer(t, []string{e.bootstrap}, func(c *Config) {
		c.SecurityProtocol, c.SASLMechanism, c.SASLKerberosServiceName = "SASL_PLAINTEXT", "GSSAPI", "kafka"
		c.SASLJAASConfig = kerberos.LoginModule + ` required useTicketCache=true ticketCache="` + cache + `";`
	})
	mustProduceAll(t, p, topic, makeRecords(10, 10), 30*time.Second)
	// Refresh the cache halfway through the first ticket, then wait until that ticket ended
	// and the connection's 10 s session needed a new service ticket.
	time.Sleep(time.Until(first.Add(10 * time.Second)))
	kinit()
	time.Sleep(time.Until(first.Add(25 * time.Second)))
	// The first ticket (20 s) has ended by now; the cache holds the newer one.
	if ticketEnded(t, cache) {
		t.Fatal("the refreshed cache's ticket ended too: the test's timing is off")
	}
	if err := produceAll(t, p, topic, makeRecords(10, 10), 30*time.Second).firstError(); err != nil {
		t.Fatalf("after the first ticket ended, with a refreshed cache: %v", err)
	}
	if st, _ := p.SASLStats(); st.Reauthentications+st.Authentications < 3 {
		t.Fatalf("SASL stats %+v: the connection did not authenticate after the first ticket ended", st)
	}
}
