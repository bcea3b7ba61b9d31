package reliability

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
)

// sameMultiset compares the records with the lines sent, as multisets: lost are lines with no
// record, dup extra records of a line; extra counts records that are no line at all.
func sameMultiset(want [][]byte, got [][]byte) (c lineCount, extra int) {
	count := map[string]int{}
	for _, w := range want {
		count[string(w)]++
	}
	seen := map[string]int{}
	for _, g := range got {
		if _, ok := count[string(g)]; !ok {
			extra++
			continue
		}
		seen[string(g)]++
	}
	for k, n := range count {
		s := seen[k]
		if s < n {
			c.lost += int64(n - s)
		}
		if s > n {
			c.dup += int64(s - n)
		}
		c.distinct += int64(min(s, n))
	}
	c.records = int64(len(got))
	return c, extra
}

// waitLog waits until the agent's output contains s.
func waitLog(t *testing.T, a *agentProc, s string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, 50*time.Millisecond, func() bool { return strings.Contains(a.log(), s) },
		func() string { return fmt.Sprintf("the agent did not log %q; log:\n%s", s, a.logTail()) })
}

// TestBadInput feeds the agent binary files and configurations a log shipper meets in the wild.
func TestBadInput(t *testing.T) {
	b := theBroker(t)
	rd := b.reader()

	// sendFile writes data to a new file, has the agent follow it until want records arrived,
	// and returns the records.
	t.Run("binary lines", func(t *testing.T) {
		rep := report(t, "6. bad input: binary lines (every byte but \\n, NULs included)")
		rng := rand.New(rand.NewPCG(1, 2))
		var want [][]byte
		var data []byte
		for i := 0; i < 2000; i++ {
			l := make([]byte, 1+rng.IntN(300))
			for j := range l {
				for l[j] = byte(rng.IntN(256)); l[j] == '\n'; l[j] = byte(rng.IntN(256)) {
				}
			}
			want = append(want, l)
			data = append(append(data, l...), '\n')
		}
		checkFileRoundTrip(t, b, rep, data, want)
	})

	t.Run("invalid UTF-8", func(t *testing.T) {
		rep := report(t, "6. bad input: invalid UTF-8 (overlong, surrogates, truncated sequences, \\xff)")
		bad := [][]byte{[]byte("\xff\xfe\xfd"), []byte("\xc3\x28 broken pair"), []byte("\xe2\x82 truncated euro"),
			[]byte("\xed\xa0\x80 surrogate"), []byte("\xc0\xaf overlong slash"), []byte("ok \xf8\x88\x80\x80\x80 five bytes"),
			[]byte("trailing \xe2"), []byte("\x00\x01\x02 control"), []byte("crlf line\r")}
		var want [][]byte
		var data []byte
		for i := 0; i < 1000; i++ {
			l := fmt.Appendf(nil, "%d ", i)
			l = append(l, bad[i%len(bad)]...)
			want = append(want, l)
			data = append(append(data, l...), '\n')
		}
		checkFileRoundTrip(t, b, rep, data, want)
	})

	t.Run("50 MB line", func(t *testing.T) {
		rep := report(t, "6. bad input: one 50 MB line (split, the default)")
		topic := b.newTopic(t, 1) // one partition: the pieces stay in order
		dir := t.TempDir()
		path := filepath.Join(dir, "big.log")
		rng := rand.New(rand.NewPCG(3, 4))
		big := make([]byte, 50<<20)
		for i := range big {
			big[i] = 'a' + byte(rng.IntN(26))
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(big)
		f.Write([]byte("\nafter the big line\n"))
		f.Close()
		a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, path, filepath.Join(dir, "state"))...)
		waitFor(t, 3*time.Minute, 100*time.Millisecond, func() bool {
			return checkpointOffset(t, filepath.Join(dir, "state"), path) == int64(len(big)+20)
		}, func() string { return "checkpoint at the end of the file; log:\n" + a.logTail() })
		peak := a.peakRSS(false)
		a.stop(time.Minute)
		a.checkNoPanic()
		vals := rd.values(t, topic)
		if len(vals) < 2 {
			t.Fatalf("%d records", len(vals))
		}
		joined := bytes.Join(vals[:len(vals)-1], nil)
		rep.Sent, rep.Delivered, rep.Lost, rep.Dup = 2, 0, 0, 0
		if bytes.Equal(joined, big) {
			rep.Delivered++
		} else {
			rep.Lost++
		}
		if string(vals[len(vals)-1]) == "after the big line" {
			rep.Delivered++
		} else {
			rep.Lost++
		}
		rep.note("%d records (the line in %d pieces); peak RSS %.1f MiB", len(vals), len(vals)-1, float64(peak)/(1<<20))
		if rep.Lost != 0 {
			t.Fatalf("the pieces do not join into the line (%d bytes in %d pieces, want %d)", len(joined), len(vals)-1, len(big))
		}
		if peak > 160<<20 {
			t.Fatalf("peak RSS %.1f MiB for a 50 MiB line: not bounded", float64(peak)/(1<<20))
		}
	})

	t.Run("empty file", func(t *testing.T) {
		rep := report(t, "6. bad input: an empty file, then lines")
		f := newScenario(t, b)
		topic, lf, w := f.topic, f.lf, f.w
		a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, f.path, f.state)...)
		waitLog(t, a, "following file", time.Minute)
		lf.Write(1000)
		w.waitAtLeast(1000, time.Minute, a)
		a.stop(time.Minute)
		a.checkNoPanic()
		c := rd.countLines(t, topic, 1000)
		rep.counts(1000, c)
		if strings.Contains(a.log(), "level=ERROR") {
			t.Errorf("errors logged:\n%s", a.logTail())
		}
		if c.lost != 0 || c.dup != 0 {
			t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
		}
	})

	t.Run("path becomes a directory", func(t *testing.T) {
		rep := report(t, "6. bad input: the followed path becomes a directory, then a file again")
		f := newScenario(t, b)
		topic, path, lf, w := f.topic, f.path, f.lf, f.w
		lf.Write(1000)
		a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, path, f.state)...)
		w.waitAtLeast(1000, time.Minute, a)
		lf.Close()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		waitLog(t, a, "not a regular file", time.Minute)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		lf2 := newLineFile(t, path)
		lf2.Next = 1000
		lf2.Write(1000)
		lf2.Close()
		w.waitAtLeast(2000, time.Minute, a)
		a.stop(time.Minute)
		a.checkNoPanic()
		c := rd.countLines(t, topic, 2000)
		rep.counts(2000, c)
		rep.note("warned %d× \"not a regular file\"", strings.Count(a.log(), "not a regular file"))
		if n := strings.Count(a.log(), "not a regular file"); n != 1 {
			t.Errorf("warned %d times, want once", n)
		}
		if c.lost != 0 || c.dup != 0 {
			t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
		}
	})

	t.Run("unreadable files", func(t *testing.T) {
		// Tests run as root, which reads any file whatever its mode: a FIFO and a directory stand
		// for files that cannot be read.
		rep := report(t, "6. bad input: a FIFO and a directory matched by the glob, next to a file")
		topic := b.newTopic(t, 3)
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo.log"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "dir.log"), 0o755); err != nil {
			t.Fatal(err)
		}
		lf := newLineFile(t, filepath.Join(dir, "app.log"))
		lf.Write(1000)
		lf.Close()
		w := rd.watch(t, topic)
		a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, filepath.Join(dir, "*.log"), filepath.Join(dir, "state"))...)
		w.waitAtLeast(1000, time.Minute, a)
		waitLog(t, a, "not a regular file", time.Minute)
		a.stop(time.Minute)
		a.checkNoPanic()
		c := rd.countLines(t, topic, 1000)
		rep.counts(1000, c)
		rep.note("each warned once: %v", strings.Count(a.log(), "not a regular file") == 2)
		if n := strings.Count(a.log(), "not a regular file"); n != 2 {
			t.Errorf("%d warnings, want one for the FIFO and one for the directory:\n%s", n, a.logTail())
		}
		if c.lost != 0 || c.dup != 0 {
			t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
		}
	})

	t.Run("state dir cannot be created", func(t *testing.T) {
		rep := report(t, "6. bad input: state dir below a regular file (cannot be created)")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
		stateDirFails(t, rep, dir, filepath.Join(dir, "file", "state"), filepath.Join(dir, "file"), " (nothing read: the lines stay for the next start)")
	})

	t.Run("read-only state dir", func(t *testing.T) {
		rep := report(t, "6. bad input: read-only state dir (a read-only tmpfs)")
		dir := t.TempDir()
		state := filepath.Join(dir, "state")
		mountTmpfs(t, rep, state, "ro,size=64k")
		stateDirFails(t, rep, dir, state, state, "")
	})

	t.Run("full state dir", func(t *testing.T) {
		rep := report(t, "6. bad input: full state dir (a 64 KiB tmpfs filled up), then space again")
		topic := b.newTopic(t, 3)
		dir := t.TempDir()
		state := filepath.Join(dir, "state")
		mountTmpfs(t, rep, state, "size=64k")
		path := filepath.Join(dir, "app.log")
		lf := newLineFile(t, path)
		defer lf.Close()
		lf.Write(1000)
		w := rd.watch(t, topic)
		a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, path, state)...)
		waitLog(t, a, "following file", time.Minute)
		// Fill the file system: the next checkpoint write fails.
		filler := filepath.Join(state, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := f.Write(make([]byte, 4096)); err != nil {
				break
			}
		}
		f.Close()
		lf.Write(1000)
		w.waitAtLeast(2000, time.Minute, a)
		waitLog(t, a, "no space left on device", time.Minute)
		os.Remove(filler)
		waitFor(t, time.Minute, 100*time.Millisecond, func() bool { return checkpointLines(t, state, path) == 2000 },
			func() string { return "checkpoint after space came back; log:\n" + a.logTail() })
		a.stop(time.Minute)
		a.checkNoPanic()
		c := rd.countLines(t, topic, 2000)
		rep.counts(2000, c)
		rep.note("checkpoint write failed (logged %d×), the agent went on; the checkpoint caught up once space came back",
			strings.Count(a.log(), "no space left on device"))
		if c.lost != 0 || c.dup != 0 {
			t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
		}
	})

	t.Run("configuration errors", func(t *testing.T) {
		rep := report(t, "6. bad input: configuration with unknown keys and wrong types")
		dir := t.TempDir()
		cases := []struct {
			name, yaml string
			args       []string
			env        []string
			want       []string // in stderr
		}{
			{"unknown key", "brokers: [127.0.0.1:1]\ntopic: t\nbrokres: [x]\n", nil, nil, []string{"brokres", "unknown key"}},
			{"unknown producer property", "brokers: [127.0.0.1:1]\ntopic: t\nproducer:\n  linger.mss: 5\n", nil, nil, []string{"producer.linger.mss"}},
			{"wrong type (int)", "brokers: [127.0.0.1:1]\ntopic: t\nmax-line-bytes: lots\n", nil, nil, []string{"max-line-bytes"}},
			{"wrong type (duration)", "brokers: [127.0.0.1:1]\ntopic: t\nshutdown-timeout: soon\n", nil, nil, []string{"shutdown-timeout"}},
			{"wrong type (list)", "brokers: {a: 1}\ntopic: t\n", nil, nil, []string{"brokers"}},
			{"producer property of the wrong type", "brokers: [127.0.0.1:1]\ntopic: t\nproducer:\n  linger.ms: later\n", nil, nil, []string{"linger.ms"}},
			{"not YAML", "brokers: [127.0.0.1:1\ntopic: t\n", nil, nil, []string{"config"}},
			{"-X of the wrong type", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"-X", "batch.size=big"}, nil, []string{"batch.size"}},
			{"KAFKATRAIL_ variable of the wrong type", "brokers: [127.0.0.1:1]\ntopic: t\n", nil, []string{"KAFKATRAIL_MAX_LINE_BYTES=lots"}, []string{"max-line-bytes"}},
			{"bad enum", "brokers: [127.0.0.1:1]\ntopic: t\nstart-at: middle\n", nil, nil, []string{"start-at"}},
			{"negative rate limit (lines)", "brokers: [127.0.0.1:1]\ntopic: t\nmax-lines-per-second: -1\n", nil, nil, []string{"max-lines-per-second", "negative"}},
			{"negative rate limit (bytes)", "brokers: [127.0.0.1:1]\ntopic: t\n", nil, []string{"KAFKATRAIL_MAX_BYTES_PER_SECOND=-100"}, []string{"max-bytes-per-second", "negative"}},
			{"rate limit of the wrong type", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--max-lines-per-second", "fast"}, nil, []string{"max-lines-per-second"}},
			{"bad format", "brokers: [127.0.0.1:1]\ntopic: t\nformat: xml\n", nil, nil, []string{"format", "raw, json or json-merge"}},
			{"bad --format flag", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--format", "ecs"}, nil, []string{"format", "raw, json or json-merge"}},
			{"bad timestamp layout", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--timestamp-field", "ts", "--timestamp-layout", "rfc3399"}, nil, []string{"timestamp-layout", "rfc3399"}},
			{"timestamp layout without a year", "brokers: [127.0.0.1:1]\ntopic: t\n", nil, []string{"KAFKATRAIL_TIMESTAMP_LAYOUT=15:04:05"}, []string{"timestamp-layout", "no year"}},
			{"bad multiline pattern", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--multiline-start", "^(unclosed"}, nil, []string{"multiline-start", "missing closing )"}},
			{"unknown multiline preset", "brokers: [127.0.0.1:1]\ntopic: t\nmultiline: ruby\n", nil, nil, []string{"multiline", "ruby"}},
			{"multiline start and continue", "brokers: [127.0.0.1:1]\ntopic: t\n", nil, []string{"KAFKATRAIL_MULTILINE_START=^a", "KAFKATRAIL_MULTILINE_CONTINUE=^b"}, []string{"multiline-continue", "not both"}},
			{"topic template: unclosed brace", "brokers: [127.0.0.1:1]\ntopic: logs-{service\n", nil, nil, []string{"topic", "unclosed '{'"}},
			{"topic template: empty name", "brokers: [127.0.0.1:1]\n", []string{"--topic", "logs-{}"}, nil, []string{"topic", "empty name"}},
			{"topic template: unknown source part", "brokers: [127.0.0.1:1]\ntopic: logs-{file.path}\n", nil, nil, []string{"topic", "unknown source part"}},
			{"topic template: illegal text", "brokers: [127.0.0.1:1]\ntopic: logs/{service}\n", nil, nil, []string{"topic", "no topic name may hold"}},
			{"illegal plain topic", "brokers: [127.0.0.1:1]\ntopic: my logs\n", nil, nil, []string{"topic", "not a legal Kafka topic name"}},
			{"fallback topic is a template", "brokers: [127.0.0.1:1]\ntopic: logs-{a}\nfallback-topic: x-{b}\n", nil, nil, []string{"fallback-topic"}},
			{"header template", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--header", "svc={service"}, nil, []string{"header", "unclosed '{'"}},
			{"header without =", "brokers: [127.0.0.1:1]\ntopic: t\n", nil, []string{"KAFKATRAIL_HEADER=env"}, []string{"header", "KEY=VALUE"}},
			{"bad parse-regex", "brokers: [127.0.0.1:1]\ntopic: logs-{level}\nparse-regex: '(?P<level>[A-Z+'\n", nil, nil, []string{"parse-regex", "missing closing ]"}},
			{"parse-regex without a named group", "brokers: [127.0.0.1:1]\ntopic: t\n", []string{"--parse-regex", "([A-Z]+)"}, nil, []string{"parse-regex", "named group"}},
			{"max-topics zero", "brokers: [127.0.0.1:1]\ntopic: logs-{a}\nmax-topics: 0\n", nil, nil, []string{"max-topics"}},
			{"OAUTHBEARER: token endpoint not a URL", "brokers: [127.0.0.1:1]\ntopic: t\nproducer:\n  security.protocol: SASL_SSL\n  sasl.mechanism: OAUTHBEARER\n  sasl.oauthbearer.token.endpoint.url: idp.example/token\n  sasl.oauthbearer.client.id: a\n  sasl.oauthbearer.client.secret: s\n", nil, nil, []string{"sasl.oauthbearer.token.endpoint.url"}},
			{"OAUTHBEARER: no client id", "brokers: [127.0.0.1:1]\ntopic: t\nproducer:\n  security.protocol: SASL_SSL\n  sasl.mechanism: OAUTHBEARER\n  sasl.oauthbearer.token.endpoint.url: https://idp.example/token\n  sasl.oauthbearer.client.secret: s\n", nil, nil, []string{"sasl.oauthbearer.client.id", "required"}},
		}
		var failed []string
		for i, tc := range cases {
			cfg := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
			os.WriteFile(cfg, []byte(tc.yaml), 0o600)
			for _, verb := range []string{"check", "run"} {
				args := []string{"--config", cfg}
				if verb == "check" {
					args = append([]string{"check"}, args...)
				} else {
					args = append(args, "--tail", filepath.Join(dir, "none.log"), "--state-dir", filepath.Join(dir, "state"))
				}
				a := startAgent(t, nil, tc.env, append(args, tc.args...)...)
				code := a.wait(30 * time.Second)
				a.checkNoPanic()
				l := a.log()
				ok := code == 2
				for _, w := range tc.want {
					ok = ok && strings.Contains(l, w)
				}
				if !ok {
					failed = append(failed, fmt.Sprintf("%s (%s): exit %d, %q", tc.name, verb, code, strings.TrimSpace(l)))
				}
			}
		}
		rep.note("%d of %d cases (agent check and a run) exit 2 with an error naming the key", 2*len(cases)-len(failed), 2*len(cases))
		for _, f := range failed {
			t.Errorf("%s", f)
		}
	})

	t.Run("OAUTHBEARER token refused", func(t *testing.T) {
		rep := report(t, "6. bad input: an OAUTHBEARER token the broker refuses (wrong audience)")
		ob := b.oauthBroker(t)
		const secret = "reliability-oauth-secret"
		srv, err := oauthtest.ForBroker(ob, "agent-1", secret, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		srv.SetAudience("not-the-broker")
		const n = 50
		var in bytes.Buffer
		for i := range n {
			fmt.Fprintf(&in, "line %d\n", i)
		}
		start := time.Now()
		a := startAgent(t, &in, nil, "--brokers", ob.Bootstrap, "--topic", b.newTopic(t, 1), "--log-level", "debug",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
			"-X", "sasl.oauthbearer.token.endpoint.url="+srv.TokenURL,
			"-X", "sasl.oauthbearer.client.id=agent-1", "-X", "sasl.oauthbearer.client.secret="+secret)
		code := a.wait(30 * time.Second)
		took := time.Since(start)
		a.checkNoPanic()
		l := a.log()
		if code == 0 || !strings.Contains(l, "OAUTHBEARER") || !strings.Contains(l, "invalid_token") ||
			!strings.Contains(l, fmt.Sprintf("%d of %d lines failed", n, n)) {
			t.Fatalf("exit %d after %v; want every line failed naming OAUTHBEARER and the broker's message; log:\n%s", code, took, a.logTail())
		}
		if strings.Contains(l, secret) {
			t.Fatal("the agent's output shows the client secret")
		}
		if took > 15*time.Second {
			t.Fatalf("the refusal took %v", took)
		}
		rep.note("exit %d after %s, %d of %d lines failed naming OAUTHBEARER and the broker's message, the secret in no log line",
			code, secs(took), n, n)
	})

	// A token file (sasl.oauthbearer.token.endpoint.url=file://..., kept fresh by another
	// process) that holds an expired token, or something that is no JWT at all: every line
	// fails alone, fast, with an error naming the mechanism and what is wrong.
	tokenFile := func(t *testing.T, title, content string, want ...string) {
		rep := report(t, title)
		ob := b.oauthBroker(t)
		file := filepath.Join(t.TempDir(), "token.jwt")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		const n = 50
		var in bytes.Buffer
		for i := range n {
			fmt.Fprintf(&in, "line %d\n", i)
		}
		start := time.Now()
		a := startAgent(t, &in, nil, "--brokers", ob.Bootstrap, "--topic", b.newTopic(t, 1),
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
			"-X", "sasl.oauthbearer.token.endpoint.url=file://"+file)
		code := a.wait(30 * time.Second)
		took := time.Since(start)
		a.checkNoPanic()
		l := a.log()
		ok := code != 0 && strings.Contains(l, "OAUTHBEARER") && strings.Contains(l, fmt.Sprintf("%d of %d lines failed", n, n))
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if !ok {
			t.Fatalf("exit %d after %v; want every line failed naming OAUTHBEARER and %q; log:\n%s", code, took, want, a.logTail())
		}
		if took > 15*time.Second {
			t.Fatalf("the refusal took %v", took)
		}
		rep.note("exit %d after %s, %d of %d lines failed naming OAUTHBEARER and %s", code, secs(took), n, n, strings.Join(want, ", "))
	}
	t.Run("OAUTHBEARER token expired", func(t *testing.T) {
		ob := b.oauthBroker(t)
		srv, err := oauthtest.ForBroker(ob, "", "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		now := time.Now()
		tok := srv.Sign(oauthtest.Claims{Subject: "agent-1", Issuer: ob.Issuer, Audience: ob.Audience,
			IssuedAt: now.Add(-time.Minute), Expires: now.Add(-10 * time.Second)})
		tokenFile(t, "6. bad input: an expired OAUTHBEARER token (a token file)", tok+"\n", "expired")
	})
	t.Run("OAUTHBEARER token file holds no JWT", func(t *testing.T) {
		tokenFile(t, "6. bad input: an OAUTHBEARER token file that holds no JWT", "not a token\n", "not a JWT")
	})
}

// lastWords returns the agent's last line starting with "agent:", or its last line.
func lastWords(a *agentProc) string {
	ls := lines([]byte(a.log()))
	last := ""
	for _, l := range ls {
		if strings.HasPrefix(l, "agent:") {
			last = l
		}
	}
	if last == "" && len(ls) > 0 {
		last = ls[len(ls)-1]
	}
	return last
}

// checkFileRoundTrip has the agent follow a file holding data and checks that the records are
// exactly want.
func checkFileRoundTrip(t *testing.T, b *suite, rep *row, data []byte, want [][]byte) {
	t.Helper()
	rd := b.reader()
	topic := b.newTopic(t, 3)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	w := rd.watch(t, topic)
	a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, path, filepath.Join(dir, "state"))...)
	w.waitAtLeast(int64(len(want)), time.Minute, a)
	a.stop(time.Minute)
	a.checkNoPanic()
	got := rd.values(t, topic)
	c, extra := sameMultiset(want, got)
	rep.counts(int64(len(want)), c)
	if extra > 0 {
		sort.Slice(got, func(i, j int) bool { return len(got[i]) < len(got[j]) })
		rep.note("%d records that are no line sent", extra)
		t.Errorf("%d records that are no line sent", extra)
	}
	if c.lost != 0 || c.dup != 0 {
		t.Fatalf("%d lost, %d duplicated", c.lost, c.dup)
	}
}

// mountTmpfs mounts a tmpfs with opts (mount -o) on the new directory dir, unmounted when the
// test ends; the test is skipped where mounting is not permitted.
func mountTmpfs(t *testing.T, rep *row, dir, opts string) {
	t.Helper()
	os.Mkdir(dir, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		rep.note("skipped: mount not permitted: %s", strings.TrimSpace(string(out)))
		t.Skipf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
}

// stateDirFails runs the agent on a file of 10 lines in dir with a state dir it cannot use:
// it must exit non-zero and its last words name want; note ends the row's result.
func stateDirFails(t *testing.T, rep *row, dir, state, want, note string) {
	t.Helper()
	b := theBroker(t)
	lf := newLineFile(t, filepath.Join(dir, "app.log"))
	lf.Write(10)
	lf.Close()
	a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), "unused", filepath.Join(dir, "app.log"), state)...)
	code := a.wait(time.Minute)
	a.checkNoPanic()
	last := lastWords(a)
	rep.Sent, rep.Delivered, rep.Lost = 10, 0, 0
	rep.note("exit %d: %q"+note, code, last)
	if code == 0 || !strings.Contains(last, want) {
		t.Fatalf("exit %d, last words %q: want a failure naming the state dir; log:\n%s", code, last, a.logTail())
	}
}
