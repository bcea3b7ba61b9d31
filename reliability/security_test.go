package reliability

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingForwarder accepts on 127.0.0.1 and forwards to upstream, counting connections.
type countingForwarder struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
}

func startForwarder(t *testing.T, upstream string) *countingForwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &countingForwarder{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.open = append(f.open, c, u)
			f.mu.Unlock()
			f.wg.Add(2)
			go func() { defer f.wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer f.wg.Done(); io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.open {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *countingForwarder) addr() string { return f.ln.Addr().String() }

// TestSecurity: the SASL password never appears in the agent's output, even at debug level, nor
// in `agent check`; wrong credentials fail with an authentication error naming the mechanism,
// after a handful of connections, not a retry storm; TLS verifies the broker's host name.
func TestSecurity(t *testing.T) {
	b := theBroker(t)
	rd := b.reader()
	const n = 2000

	for _, tc := range []struct {
		mech, source string
	}{
		{"PLAIN", "-X"},
		{"SCRAM-SHA-256", "config file"},
		{"SCRAM-SHA-512", "KAFKATRAIL_PRODUCER_SASL_PASSWORD"},
	} {
		t.Run("SASL "+tc.mech, func(t *testing.T) {
			rep := report(t, fmt.Sprintf("7. security: SASL %s, password from %s, debug logs and agent check grepped", tc.mech, tc.source))
			topic := b.newTopic(t, 3)
			dir := t.TempDir()
			args := []string{"--brokers", b.saslAddr(), "--topic", topic, "--log-level", "debug", "--log-format", "json",
				"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=" + tc.mech, "-X", "sasl.username=" + saslUser}
			var env []string
			switch tc.source {
			case "-X":
				args = append(args, "-X", "sasl.password="+saslPassword)
			case "config file":
				cfg := filepath.Join(dir, "agent.yaml")
				os.WriteFile(cfg, []byte("producer:\n  sasl.password: "+saslPassword+"\n"), 0o600)
				args = append(args, "--config", cfg)
			default:
				env = append(env, "KAFKATRAIL_PRODUCER_SASL_PASSWORD="+saslPassword)
			}
			a, chk, chkCode := deliverAndCheck(t, rd, rep, topic, n, env, args)
			leaks := strings.Count(a.log()+chk.log(), saslPassword)
			// Once more with an error in the configuration.
			bad := startAgent(t, nil, env, append([]string{"check"}, append(args, "-X", "linger.ms=soon")...)...)
			badCode := bad.wait(30 * time.Second)
			leaks += strings.Count(bad.log(), saslPassword)
			rep.note("%d bytes of debug output, agent check (exit %d) and a failing check (exit %d): the password appears %d times",
				len(a.log()), chkCode, badCode, leaks)
			if !strings.Contains(chk.log(), "sasl.password") {
				t.Errorf("agent check does not list sasl.password:\n%s", chk.log())
			}
			if badCode != 2 {
				t.Errorf("failing agent check exit %d, output:\n%s", badCode, bad.log())
			}
			if leaks != 0 {
				t.Fatalf("the password appears %d times in the output", leaks)
			}
		})
	}

	t.Run("wrong password", func(t *testing.T) {
		rep := report(t, "7. security: wrong SASL password (SCRAM-SHA-256): connections over 10 s")
		fw := startForwarder(t, b.saslAddr())
		args := []string{"--brokers", fw.addr(), "--topic", "rel-wrong-password", "--log-level", "debug", "--log-format", "text",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=" + saslUser,
			"-X", "sasl.password=not-" + saslPassword}
		l := watchRefusal(t, rep, fw, nil, args)
		if !strings.Contains(strings.ToLower(l), "authentication") || !strings.Contains(l, "SCRAM-SHA-256") {
			t.Errorf("no authentication error naming the mechanism; log:\n%s", l)
		}
		if strings.Contains(l, "not-"+saslPassword) {
			t.Errorf("the wrong password appears in the output")
		}
	})

	t.Run("AWS MSK IAM", func(t *testing.T) {
		// The MSKIAM listener checks the tokens' SigV4 signatures as Amazon MSK does; the agent
		// is configured as AWS documents a Java client, its key pair in the environment.
		addr, accessKey, secretKey := b.mskIAM(t)
		rep := report(t, "7. security: AWS MSK IAM (OAUTHBEARER, AWS's signer), secret key from AWS_SECRET_ACCESS_KEY, debug logs and agent check grepped")
		topic := b.newTopic(t, 3)
		args := []string{"--brokers", addr, "--topic", topic, "--log-level", "debug", "--log-format", "json",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
			"-X", "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
			"-X", "sasl.login.callback.handler.class=software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"}
		a, chk, chkCode := deliverAndCheck(t, rd, rep, topic, n, awsEnv(accessKey, secretKey), args)
		out := a.log() + chk.log()
		// The secret, and any token (base64url of "https://kafka.") or signature.
		leaks := strings.Count(out, secretKey) + strings.Count(out, "aHR0cHM6Ly9rYWZrYS") + strings.Count(out, "X-Amz-Signature")
		rep.note("%d bytes of debug output and agent check (exit %d): the secret key, a token or a signature appears %d times",
			len(a.log()), chkCode, leaks)
		if leaks != 0 {
			t.Fatalf("a secret appears %d times in the output", leaks)
		}
	})

	t.Run("wrong AWS secret key", func(t *testing.T) {
		addr, accessKey, secretKey := b.mskIAM(t)
		rep := report(t, "7. security: wrong AWS secret key (MSK IAM, OAUTHBEARER): connections over 10 s")
		fw := startForwarder(t, addr)
		args := []string{"--brokers", fw.addr(), "--topic", "rel-wrong-aws-key", "--log-level", "debug", "--log-format", "text",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
			"-X", "sasl.login.callback.handler.class=software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"}
		wrong := "not-" + secretKey
		l := watchRefusal(t, rep, fw, awsEnv(accessKey, wrong), args)
		if !strings.Contains(l, "OAUTHBEARER") || !strings.Contains(l, "access key "+accessKey) {
			t.Errorf("no authentication error naming the mechanism and the access key; log:\n%s", l)
		}
		if strings.Contains(l, wrong) || strings.Contains(l, "X-Amz-Signature") {
			t.Errorf("the secret key or a signature appears in the output")
		}
	})

	t.Run("Kerberos", func(t *testing.T) {
		// The KERBEROS listener (GSSAPI, the JDK's Krb5LoginModule) and its realm on MIT's KDC.
		env := b.brokerEnv(t)
		addr, krb5conf := env["KAFKA_KERBEROS_BOOTSTRAP"], env["KAFKA_KRB5_CONFIG"]
		if addr == "" {
			t.Fatalf("broker.sh env has no KERBEROS listener (krb5-kdc not installed? scripts/deps.sh): %v", env)
		}
		rep := report(t, "7. security: Kerberos (GSSAPI), keytab in sasl.jaas.config as a Java client writes it, 10 s sessions, debug logs and agent check grepped")
		topic := b.newTopic(t, 3)
		args := []string{"--brokers", addr, "--topic", topic, "--log-level", "debug", "--log-format", "json",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=GSSAPI", "-X", "sasl.kerberos.service.name=kafka",
			"-X", `sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="` +
				env["KAFKA_KERBEROS_KEYTAB"] + `" principal="` + env["KAFKA_KERBEROS_PRINCIPAL"] + `";`}
		a, chk, chkCode := deliverAndCheck(t, rd, rep, topic, n, []string{"KRB5_CONFIG=" + krb5conf}, args)
		keytab, err := os.ReadFile(env["KAFKA_KERBEROS_KEYTAB"])
		if err != nil {
			t.Fatal(err)
		}
		// The keytab's keys (its last 32 bytes hold the end of one), in any form the logs could take.
		key := keytab[len(keytab)-32:]
		out := a.log() + chk.log()
		leaks := strings.Count(out, string(key)) + strings.Count(out, fmt.Sprintf("%x", key)) + strings.Count(out, base64.StdEncoding.EncodeToString(key))
		rep.note("%d bytes of debug output and agent check (exit %d): keytab key material appears %d times", len(a.log()), chkCode, leaks)
		if leaks != 0 {
			t.Fatalf("key material appears %d times in the output", leaks)
		}
	})

	t.Run("stale Kerberos keytab", func(t *testing.T) {
		env := b.brokerEnv(t)
		addr := env["KAFKA_KERBEROS_BOOTSTRAP"]
		if addr == "" {
			t.Fatalf("broker.sh env has no KERBEROS listener: %v", env)
		}
		rep := report(t, "7. security: stale Kerberos keytab (the KDC changed the principal's keys): time to the agent's exit")
		fw := startForwarder(t, addr)
		args := []string{"--brokers", fw.addr(), "--topic", "rel-stale-keytab", "--log-format", "text",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=GSSAPI", "-X", "sasl.kerberos.service.name=kafka",
			"-X", `sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="` +
				env["KAFKA_KERBEROS_WRONG_KEYTAB"] + `" principal="` + env["KAFKA_KERBEROS_WRONG_PRINCIPAL"] + `";`}
		start := time.Now()
		a := startAgent(t, bytes.NewReader(stdinLines(100)), []string{"KRB5_CONFIG=" + env["KAFKA_KRB5_CONFIG"]}, args...)
		code := a.wait(time.Minute)
		a.checkNoPanic()
		rep.Sent, rep.Delivered, rep.Lost = 100, 0, 0
		rep.note("%d connections to the broker; exit %d after %s: %q", fw.conns.Load(), code, secs(a.done.Sub(start)), lastWords(a))
		if code == 0 || !strings.Contains(a.log(), "GSSAPI") || !strings.Contains(a.log(), "stale keytab") {
			t.Fatalf("exit %d, want a failure naming GSSAPI and the stale keytab; log:\n%s", code, a.logTail())
		}
	})

	t.Run("TLS host name verification", func(t *testing.T) {
		rep := report(t, "7. security: TLS with the test CA: localhost verifies, another name for 127.0.0.1 fails")
		topic := b.newTopic(t, 1)
		_, port, _ := net.SplitHostPort(b.sslAddr())
		tls := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + b.caFile()}
		ok := startAgent(t, bytes.NewReader(stdinLines(100)), nil,
			append([]string{"--brokers", "localhost:" + port, "--topic", topic, "--log-format", "text"}, tls...)...)
		okCode := ok.wait(time.Minute)
		c := rd.countLines(t, topic, 100)
		rep.counts(100, c)
		if okCode != 0 || c.lost != 0 {
			t.Fatalf("localhost: exit %d, %d lost; log:\n%s", okCode, c.lost, ok.logTail())
		}
		// Another name of 127.0.0.1 that the certificate does not carry (SAN: 127.0.0.1, localhost).
		other := ""
		for _, name := range []string{"vm", "runsc", "localhost.localdomain", "ip6-localhost"} {
			if addrs, err := net.LookupHost(name); err == nil && len(addrs) > 0 && addrs[0] == "127.0.0.1" {
				other = name
				break
			}
		}
		if other == "" {
			rep.note("wrong-name case skipped: no other name of 127.0.0.1 in /etc/hosts")
			return
		}
		start := time.Now()
		bad := startAgent(t, bytes.NewReader(stdinLines(10)), nil,
			append([]string{"--brokers", other + ":" + port, "--topic", topic, "--log-format", "text", "-X", "max.block.ms=10000"}, tls...)...)
		badCode := bad.wait(time.Minute)
		last := lastWords(bad)
		rep.note("%s:%s: exit %d after %s: %q", other, port, badCode, secs(bad.done.Sub(start)), last)
		if badCode == 0 || !strings.Contains(bad.log(), other) || !strings.Contains(strings.ToLower(bad.log()), "certificate") {
			t.Fatalf("a host name the certificate does not carry: exit %d; log:\n%s", badCode, bad.logTail())
		}
	})
}

// awsEnv is an environment with exactly this AWS key pair (and region): no shared files, no
// instance metadata, whatever the developer's shell has.
func awsEnv(accessKey, secretKey string) []string {
	none := filepath.Join(os.TempDir(), "kafkatrail-no-aws-config")
	return []string{"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey, "AWS_SESSION_TOKEN=",
		"AWS_REGION=us-east-1", "AWS_PROFILE=", "AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ROLE_ARN=", "AWS_WEB_IDENTITY_TOKEN_FILE="}
}

// deliverAndCheck runs the agent with args and env on n lines from stdin into topic, fails the
// test unless it exits 0 having delivered every line once, then runs `agent check` with the same
// args and env, which must exit 0; it returns both runs, for the caller to grep for secrets.
func deliverAndCheck(t *testing.T, rd kafkaAccess, rep *row, topic string, n int, env, args []string) (a, chk *agentProc, chkCode int) {
	t.Helper()
	a = startAgent(t, bytes.NewReader(stdinLines(n)), env, args...)
	code := a.wait(2 * time.Minute)
	a.checkNoPanic()
	c := rd.countLines(t, topic, n)
	rep.counts(int64(n), c)
	if code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, a.logTail())
	}
	if c.lost != 0 || c.dup != 0 {
		t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
	}
	chk = startAgent(t, nil, env, append([]string{"check"}, args...)...)
	if chkCode = chk.wait(30 * time.Second); chkCode != 0 {
		t.Errorf("agent check exit %d, output:\n%s", chkCode, chk.log())
	}
	return a, chk, chkCode
}

// watchRefusal runs the agent with args (wrong credentials, through fw, which counts the
// connections) on 100 lines for 10 s, or until it gives up by itself, notes what happened in
// rep, fails the test on a retry storm (more than 10 connections) and returns its log.
func watchRefusal(t *testing.T, rep *row, fw *countingForwarder, env, args []string) string {
	t.Helper()
	start := time.Now()
	a := startAgent(t, bytes.NewReader(stdinLines(100)), env, args...)
	waitFor(t, time.Minute, 50*time.Millisecond, func() bool { return !a.running() || time.Since(start) >= 10*time.Second },
		func() string { return "watching" })
	conns := fw.conns.Load()
	running := a.running()
	code := -1
	if !running {
		code = a.wait(time.Second)
	}
	a.checkNoPanic()
	rep.Sent, rep.Delivered, rep.Lost = 100, 0, 0
	if running {
		rep.note("%d connections in 10 s; still running after 10 s", conns)
	} else {
		rep.note("%d connections; exit %d after %s: %q", conns, code, secs(a.done.Sub(start)), lastWords(a))
	}
	if conns > 10 {
		t.Errorf("%d connections in 10 s: a retry storm", conns)
	}
	return a.log()
}
