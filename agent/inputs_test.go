package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/linerecord"
)

// TestInputConfigsFromTheFile: each entry of `inputs:` takes the top level's keys and sets its
// own; the top level with no source of its own is no input; a wrong entry is named by its
// input's name and key.
func TestInputConfigsFromTheFile(t *testing.T) {
	file := writeFile(t, `brokers: [127.0.0.1:9092]
format: json
header-host: ""
inputs:
  - name: access
    tail: [/var/log/nginx/access.log]
    topic: access
    exclude-lines: ['GET /health']
  - name: app
    tail: [/var/log/app/*.log]
    topic: app
    multiline: java
    format: raw
  - name: audit
    tail: [/var/log/audit.log]
    topic: audit
    redact: ['\d{12}(\d{4})=>************$1', {pattern: 'token=\S+', replacement: 'token=***'}]
`)
	c, err := load(t, []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	inputs, err := c.InputConfigs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range inputs {
		names = append(names, in.Name)
	}
	if fmt.Sprint(names) != "[access app audit]" {
		t.Fatalf("inputs %v, want access, app and audit (no top-level source: no default input)", names)
	}
	access, app, audit := inputs[0], inputs[1], inputs[2]
	if access.Topic != "access" || access.Format != linerecord.FormatJSON || access.HeaderHost != "" || fmt.Sprint(access.ExcludeLines) != "[GET /health]" {
		t.Errorf("access: %+v", access.Config)
	}
	if app.Multiline != "java" || app.Format != linerecord.FormatRaw || fmt.Sprint(app.Tail) != "[/var/log/app/*.log]" || len(app.ExcludeLines) != 0 {
		t.Errorf("app: %+v", app.Config)
	}
	want := []linerecord.Redaction{{Pattern: `\d{12}(\d{4})`, Replacement: "************$1"}, {Pattern: `token=\S+`, Replacement: "token=***"}}
	if !slices.Equal(audit.Redact, want) || len(audit.Brokers) != 1 {
		t.Errorf("audit: redact %+v, brokers %v", audit.Redact, audit.Brokers)
	}
	if lines := strings.Join(c.Redacted(), "\n"); !strings.Contains(lines, "inputs[app].multiline=java") || !strings.Contains(lines, "inputs[access].format=json") {
		t.Errorf("agent check does not show each input's effective settings:\n%s", lines)
	}

	for _, tc := range []struct {
		name, inputs, key string
	}{
		{"unknown key", "  - {name: a, tail: [/x], topik: t}", "inputs[a].topik"},
		{"no name", "  - {tail: [/x]}", "inputs[0].name"},
		{"same name twice", "  - {name: a, tail: [/x]}\n  - {name: a, tail: [/y]}", "inputs[a].name"},
		{"the implicit input's name", "  - {name: default, tail: [/x]}", "inputs[default].name"},
		{"no tail", "  - {name: a, topic: t}", "inputs[a].tail"},
		{"a bad pattern", "  - {name: a, tail: [/x], redact: ['(']}", "inputs[a].redact"},
		{"a bad format", "  - {name: a, tail: [/x], format: xml}", "inputs[a].format"},
		{"no topic anywhere", "  - {name: a, tail: [/x]}", "inputs[a].topic"},
		{"stdin and files", "  - {name: a, tail: [/x], stdin: true}", "inputs[a].stdin"},
		{"two inputs read stdin", "  - {name: a, stdin: true}\n  - {name: b, stdin: true}", "inputs[b].stdin"},
		{"stdin with the top level's", "  - {name: a, stdin: true}\nstdin: true", "inputs[a].stdin"},
		{"stdin with exactly-once", "  - {name: a, stdin: true}\n  - {name: b, tail: [/x]}\nexactly-once: true", "inputs[a].stdin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "topic: t\n"
			if tc.name == "no topic anywhere" {
				topic = ""
			}
			c, err := load(t, []string{"--config", writeFile(t, "brokers: [127.0.0.1:9092]\n"+topic+"inputs:\n"+tc.inputs+"\n")}, nil)
			if err == nil {
				err = c.Validate()
			}
			found := false
			for _, e := range unjoin(err) {
				var ce *ConfigError
				if errors.As(e, &ce) && ce.Key == tc.key {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %v does not name %s", err, tc.key)
			}
		})
	}
	c, _ = load(t, []string{"--config", writeFile(t, "brokers: [127.0.0.1:9092]\ntopic: t\nexactly-once: true\ninputs:\n  - {name: a, tail: [/x]}\n")}, nil)
	if err := c.Validate(); err != nil {
		t.Errorf("exactly-once with inputs: %v", err)
	}
}

// TestThreeInputsOneProducer: one agent, three inputs as the issue describes them (a JSON access
// log to access without its health checks, a Java service's log as multiline events to app,
// an audit log with card numbers masked to audit): every kept line reaches its topic once, the
// health checks are left out and counted, each input's checkpoints are its own, at its file's
// end, and the topic counts are per topic.
func TestThreeInputsOneProducer(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "access", "app", "audit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	var access, app, audit strings.Builder
	for i := range 20 {
		path := "/cart"
		if i%4 == 0 {
			path = "/health"
		}
		fmt.Fprintf(&access, `{"method":"GET","path":"%s","status":200,"n":%d}`+"\n", path, i)
		fmt.Fprintf(&app, "2026-12-05 10:00:%02d INFO  request %d ok\n", i, i)
		if i%5 == 0 {
			fmt.Fprintf(&app, "2026-12-05 10:00:%02d ERROR request %d failed\njava.lang.IllegalStateException: boom %d\n\tat com.example.App.handle(App.java:42)\nCaused by: java.io.IOException: disk\n\t... 1 more\n", i, i, i)
		}
		fmt.Fprintf(&audit, "user=u%d paid card=4111111111111%03d\n", i, i)
	}
	files := map[string]string{"access.log": access.String(), "app.log": app.String(), "audit.log": audit.String()}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Inputs = []map[string]any{
		{"name": "access", "tail": []string{filepath.Join(dir, "access.log")}, "topic": "access", "exclude-lines": []string{`"path":"/health"`}},
		{"name": "app", "tail": []string{filepath.Join(dir, "app.log")}, "topic": "app", "multiline": "java", "multiline-timeout": "100ms"},
		{"name": "audit", "tail": []string{filepath.Join(dir, "audit.log")}, "topic": "audit", "redact": []string{`card=\d{12}(\d{4})=>card=************$1`}},
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTail(t, a)
	waitUntil(t, 30*time.Second, "every input's file acknowledged", func() bool {
		fs := a.FileStats()
		for _, f := range fs {
			if f.Committed != int64(len(files[filepath.Base(f.Path)])) {
				return false
			}
		}
		return len(fs) == 3
	})
	stop()

	got := map[string][]string{}
	for _, topic := range []string{"access", "app", "audit"} {
		for _, r := range topicRecords(t, c, topic, false) {
			got[topic] = append(got[topic], string(r.Value))
		}
	}
	if n := len(got["access"]); n != 15 || slices.ContainsFunc(got["access"], func(v string) bool { return strings.Contains(v, "/health") }) {
		t.Errorf("access: %d records, want the 15 lines without health checks: %q", n, got["access"])
	}
	if n := len(got["app"]); n != 24 {
		t.Errorf("app: %d records, want 20 lines and 4 errors with their traces: %q", n, got["app"])
	}
	for _, v := range got["app"] {
		if strings.Contains(v, "ERROR") && (!strings.Contains(v, "\njava.lang.IllegalStateException") || !strings.HasSuffix(v, "... 1 more")) {
			t.Errorf("app: an error without its exception and trace: %q", v)
		}
	}
	if n := len(got["audit"]); n != 20 || slices.ContainsFunc(got["audit"], func(v string) bool { return strings.Contains(v, "4111111111111") }) {
		t.Errorf("audit: %d records, want 20, every card masked: %q", n, got["audit"])
	}
	if n := a.Stats().LinesFiltered.Load(); n != 5 {
		t.Errorf("%d lines left out, want the 5 health checks", n)
	}
	for _, in := range []string{"access", "app", "audit"} {
		path := filepath.Join(dir, in+".log")
		off, err := testkit.CheckpointOffset(filepath.Join(cfg.StateDir, "inputs", in), path)
		if err != nil || off != int64(len(files[in+".log"])) {
			t.Errorf("input %s: checkpoint %d (%v), want its file's end %d in its own state directory", in, off, err, len(files[in+".log"]))
		}
	}
	var topics []string
	for _, ts := range a.TopicStats() {
		topics = append(topics, fmt.Sprintf("%s:%d/%d", ts.Topic, ts.LinesSent, ts.LinesAcked))
	}
	if fmt.Sprint(topics) != "[access:15/15 app:24/24 audit:20/20]" {
		t.Errorf("topic stats %v", topics)
	}
}

// TestTwoInputsFollowOneFile: two inputs with other filters follow the same file to two topics:
// each sends its own lines, and each keeps its own position in the file.
func TestTwoInputsFollowOneFile(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "errors", "everything"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var data strings.Builder
	for i := range 30 {
		level := "INFO"
		if i%3 == 0 {
			level = "ERROR"
		}
		fmt.Fprintf(&data, "%s line %d\n", level, i)
	}
	path := writeTemp(t, "app.log", []byte(data.String()))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Topic, cfg.Tail = "everything", []string{path} // the implicit input
	cfg.Inputs = []map[string]any{{"name": "errors", "tail": []string{path}, "topic": "errors", "include-lines": []string{`^ERROR`}}}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTail(t, a)
	waitUntil(t, 30*time.Second, "the file acknowledged by both inputs", func() bool {
		fs := a.FileStats()
		return len(fs) == 2 && fs[0].Committed == int64(data.Len()) && fs[1].Committed == int64(data.Len())
	})
	stop()
	if n := len(topicRecords(t, c, "everything", false)); n != 30 {
		t.Errorf("everything: %d records, want 30", n)
	}
	if recs := topicRecords(t, c, "errors", false); len(recs) != 10 || !strings.HasPrefix(string(recs[0].Value), "ERROR") {
		t.Errorf("errors: %d records, want the 10 ERROR lines", len(recs))
	}
	var inputs []string
	for _, f := range a.InputFileStats() {
		inputs = append(inputs, f.Input+":"+filepath.Base(f.Path))
	}
	if fmt.Sprint(inputs) != "[default:app.log errors:app.log]" {
		t.Errorf("file stats by input %v, want the file once for each input", inputs)
	}
	for _, dir := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "inputs", "errors")} {
		if off, err := testkit.CheckpointOffset(dir, path); err != nil || off != int64(data.Len()) {
			t.Errorf("checkpoint in %s: %d (%v), want %d", dir, off, err, data.Len())
		}
	}
}

// TestSetInputGlobs: a reload (SIGHUP) changes the patterns of an input by its name; the files
// of the new pattern are followed into that input's topic, and a name the agent does not run
// changes nothing.
func TestSetInputGlobs(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	for name, data := range map[string]string{"a.log": "a1\na2\n", "b-old.log": "old\n", "b-new.log": "new1\nnew2\nnew3\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Inputs = []map[string]any{
		{"name": "a", "tail": []string{filepath.Join(dir, "a.log")}, "topic": "a"},
		{"name": "b", "tail": []string{filepath.Join(dir, "b-old.log")}, "topic": "b"},
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTail(t, a)
	acked := func(file string, n uint64) func() bool {
		return func() bool {
			for _, f := range a.FileStats() {
				if filepath.Base(f.Path) == file && f.LinesAcked == n {
					return true
				}
			}
			return false
		}
	}
	waitUntil(t, 30*time.Second, "b-old.log acknowledged", acked("b-old.log", 1))
	if err := a.SetInputGlobs("b", []string{filepath.Join(dir, "b-new.log")}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetInputGlobs("unknown", []string{filepath.Join(dir, "*")}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "b-new.log acknowledged", acked("b-new.log", 3))
	stop()
	if n := len(topicRecords(t, c, "b", false)); n != 4 {
		t.Errorf("topic b: %d records, want b-old.log's and b-new.log's 4", n)
	}
	if n := len(topicRecords(t, c, "a", false)); n != 2 {
		t.Errorf("topic a: %d records, want a.log's 2 (the unknown input's pattern changed nothing)", n)
	}
}

// runTail starts a.RunTail; the function it returns stops the run and fails the test unless it
// ended as an interrupted run does.
func runTail(t *testing.T, a *Agent) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; !errors.Is(err, ErrInterrupted) {
			t.Fatalf("RunTail: %v", err)
		}
	}
}

// waitUntil polls cond every 20 ms until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInputOwnRateLimitAndDeadLetterTopic: an input with a rate limit of its own is slowed by
// it while another input, without one, reads at full speed; each input's line too large for
// the topic goes to its own dead-letter topic.
func TestInputOwnRateLimitAndDeadLetterTopic(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dla": nil, "dlb": nil})
	dir := t.TempDir()
	big := func(who string) string { return who + strings.Repeat("x", 4000) }
	var slow, fast strings.Builder
	slow.WriteString(big("a") + "\n")
	for i := range 200 {
		fmt.Fprintf(&slow, "slow %d\n", i)
	}
	fast.WriteString(big("b") + "\n")
	for i := range 1000 {
		fmt.Fprintf(&fast, "fast %d\n", i)
	}
	for name, data := range map[string]string{"slow.log": slow.String(), "fast.log": fast.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Topic = "logs"
	cfg.Inputs = []map[string]any{
		// 20 lines a second: its 201 lines take 9.75 s at least.
		{"name": "slow", "tail": []string{filepath.Join(dir, "slow.log")}, "max-lines-per-second": 20, "dead-letter-topic": "dla"},
		{"name": "fast", "tail": []string{filepath.Join(dir, "fast.log")}, "dead-letter-topic": "dlb"},
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ins := a.inputList(); ins[0].limit == nil || ins[0].limit == a.limit || ins[1].limit != a.limit {
		t.Fatalf("limiters: slow %p, fast %p, shared %p: want slow's own and fast the shared (none)", ins[0].limit, ins[1].limit, a.limit)
	}
	stop := runTail(t, a)
	lines := func(name string) (acked uint64, committed int64) {
		for _, f := range a.InputFileStats() {
			if f.Input == name {
				return f.LinesAcked, f.Committed
			}
		}
		return 0, 0
	}
	waitUntil(t, 30*time.Second, "fast.log acknowledged", func() bool { _, off := lines("fast"); return off == int64(fast.Len()) })
	if n, _ := lines("slow"); n >= 150 {
		t.Errorf("slow.log: %d of its 201 lines acknowledged when fast.log's 1001 were, want its own limit of 20 a second to hold it back", n)
	}
	waitUntil(t, 30*time.Second, "slow.log's dead letter", func() bool { n, _ := lines("slow"); return n >= 1 })
	stop()
	if a.RateLimit().Paused == 0 {
		t.Error("no time paused by the input's rate limit")
	}
	for topic, want := range map[string]string{"dla": big("a"), "dlb": big("b")} {
		recs := topicRecords(t, c, topic, false)
		if len(recs) != 1 || string(recs[0].Value) != want {
			t.Errorf("dead-letter topic %s: %d records, want its input's large line alone", topic, len(recs))
		}
	}
}

// TestRefusedInputDoesNotStopTheOthers: Kafka refuses one input's topic (no ACL): that input
// stops (its lines wait, none is dead-lettered, Delivery names it) while the other input's
// lines all go; once the topic takes lines again, the stopped input resumes by itself and every
// line of both arrives once.
func TestRefusedInputDoesNotStopTheOthers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "open", "closed"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// Each topic's leader a broker of its own, so that one produce request never holds both.
	if err := c.MoveTopicPartition("open", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveTopicPartition("closed", 0, 1); err != nil {
		t.Fatal(err)
	}
	var refusing atomic.Bool
	refusing.Store(true)
	var refused atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refusing.Load() || c.CurrentNode() != 1 {
			return nil, nil, false
		}
		refused.Add(1)
		return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
			return kerr.TopicAuthorizationFailed.Code
		}), nil, true
	})
	dir := t.TempDir()
	var data strings.Builder
	for i := range 300 {
		fmt.Fprintf(&data, "line-%04d\n", i)
	}
	for _, name := range []string{"open.log", "closed.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Producer["batch.size"] = "512" // several batches, so that the open topic's go on after the refusal
	cfg.Inputs = []map[string]any{
		{"name": "open", "tail": []string{filepath.Join(dir, "open.log")}, "topic": "open"},
		{"name": "closed", "tail": []string{filepath.Join(dir, "closed.log")}, "topic": "closed"},
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTail(t, a)
	committed := func(name string) int64 {
		for _, f := range a.InputFileStats() {
			if f.Input == name {
				return f.Committed
			}
		}
		return -1
	}
	waitUntil(t, 30*time.Second, "the closed topic refused", func() bool { return a.Delivery().Stopped != nil })
	// Lines written to open.log once closed is stopped go too.
	more := strings.ReplaceAll(data.String(), "line-", "more-")
	f, err := os.OpenFile(filepath.Join(dir, "open.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(more); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitUntil(t, 30*time.Second, "open.log acknowledged while closed is stopped", func() bool { return committed("open") == int64(2*data.Len()) })
	d := a.Delivery()
	if !errors.Is(d.Stopped, kerr.TopicAuthorizationFailed) || d.StoppedInput != "closed" || len(d.DeadLettered) != 0 {
		t.Fatalf("delivery %+v, want the input closed stopped for TOPIC_AUTHORIZATION_FAILED and no dead letter", d)
	}
	if n := committed("closed"); n != 0 {
		t.Fatalf("closed.log committed to %d while its topic refuses every line", n)
	}
	refusing.Store(false)
	waitUntil(t, 40*time.Second, "closed.log acknowledged once its topic takes lines", func() bool { return committed("closed") == int64(data.Len()) })
	if d := a.Delivery(); d.Stopped != nil {
		t.Errorf("still stopped after every line was delivered: %v", d.Stopped)
	}
	stop()
	for _, topic := range []string{"open", "closed"} {
		seen := map[string]int{}
		for _, r := range topicRecords(t, c, topic, false) {
			seen[string(r.Value)]++
		}
		if want := map[string]int{"open": 600, "closed": 300}[topic]; len(seen) != want {
			t.Errorf("topic %s: %d distinct lines, want %d", topic, len(seen), want)
		}
		for v, n := range seen {
			if n != 1 {
				t.Errorf("topic %s: %q arrived %d times", topic, v, n)
			}
		}
	}
}

// TestExactlyOnceSpansEveryInput: with --exactly-once, one transaction carries the lines and
// positions of every input: the flags' input and a named one, each to its topic. A line the
// named input's topic refuses aborts a transaction; the next round dead-letters it from that
// input's own dead-letter-pending.json. Each input's positions are in the state topic under its
// own keys, and a second run with no local checkpoints resumes each input from them: every
// line of both files once at read_committed.
func TestExactlyOnceSpansEveryInput(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"ta": nil, "tb": {"max.message.bytes": &small}, "dlq": nil})
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	long := strings.Repeat("L", 4000)
	lines := func(prefix string, from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "%s-%03d\n", prefix, i)
		}
		return b.String()
	}
	if err := os.WriteFile(pathA, []byte(lines("a", 0, 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pathB, []byte(lines("b", 0, 20)+long+"\n"+lines("b", 20, 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	cfg := eosConfig(c, "ta", pathA, stateDir)
	cfg.Inputs = []map[string]any{{"name": "b", "tail": []string{pathB}, "topic": "tb", "dead-letter-topic": "dlq"}}
	run := func() {
		t.Helper()
		a, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := runTail(t, a)
		waitUntil(t, 40*time.Second, "both files committed to their ends", func() bool {
			fs := a.InputFileStats()
			for _, f := range fs {
				st, err := os.Stat(f.Path)
				if err != nil || f.Committed != st.Size() {
					return false
				}
			}
			return len(fs) == 2
		})
		stop()
	}
	run()
	if got := valueCounts(topicRecords(t, c, "dlq", true)); len(got) != 1 || got[long] != 1 {
		t.Errorf("dlq at read_committed: %d values, want b.log's long line once", len(got))
	}
	keys := map[string]bool{}
	for _, r := range topicRecords(t, c, cfg.StateTopic, true) {
		keys[regexp.MustCompile(`^kafkatrail-test/[0-9]+:[0-9]+`).ReplaceAllString(string(r.Key), "")] = true
	}
	if !keys[""] || !keys["@b"] || len(keys) != 2 {
		t.Errorf("state topic keys (transactional id and file stripped) %v, want the flags' input's (no suffix) and @b", keys)
	}

	// Positions from the state topic alone: the local copies go.
	for _, d := range []string{stateDir, filepath.Join(stateDir, "inputs", "b")} {
		if err := os.Remove(filepath.Join(d, "checkpoints.json")); err != nil {
			t.Fatal(err)
		}
	}
	for path, more := range map[string]string{pathA: lines("a", 50, 60), pathB: lines("b", 40, 50)} {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(more)
		f.Close()
	}
	run()
	for topic, want := range map[string]int{"ta": 60, "tb": 50} {
		got := valueCounts(topicRecords(t, c, topic, true))
		if len(got) != want {
			t.Errorf("%s at read_committed: %d distinct lines, want %d", topic, len(got), want)
		}
		for v, n := range got {
			if n != 1 {
				t.Errorf("%s: %q %d times at read_committed", topic, v, n)
			}
		}
	}
}

// TestStdinBesideFiles: the flags' input reads stdin (--stdin) while an input of the file
// follows a file: each to its topic. stdin's end ends its input alone: lines written to the
// file afterwards still go, until the run is stopped.
func TestStdinBesideFiles(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "piped", "files"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	path := writeTemp(t, "app.log", []byte("f1\nf2\n"))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.Topic, cfg.Stdin = "piped", true
	cfg.Inputs = []map[string]any{{"name": "files", "tail": []string{path}, "topic": "files", "exclude-lines": []string{"^skip"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.StdinOnly() {
		t.Fatal("StdinOnly with an input that follows a file")
	}
	a.SetStdin(strings.NewReader("s1\ns2\ns3\n"))
	stop := runTail(t, a)
	waitUntil(t, 30*time.Second, "stdin's and the file's lines acknowledged", func() bool { return a.Stats().LinesAcked.Load() == 5 })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("f3\nskip me\n")
	f.Close()
	waitUntil(t, 30*time.Second, "the file's new line after stdin ended", func() bool {
		fs := a.InputFileStats()
		return len(fs) == 1 && fs[0].Committed == int64(len("f1\nf2\nf3\nskip me\n"))
	})
	stop()
	for topic, want := range map[string]string{"piped": "[s1 s2 s3]", "files": "[f1 f2 f3]"} {
		var got []string
		for _, r := range topicRecords(t, c, topic, false) {
			got = append(got, string(r.Value))
		}
		if fmt.Sprint(got) != want {
			t.Errorf("topic %s: %v, want %s", topic, got, want)
		}
	}
	if n := a.stdinRead.lines.Load(); n != 3 {
		t.Errorf("%d lines read from stdin, want 3", n)
	}
}

// TestStdinOnlyInput: an agent whose one input (of the file's inputs) reads stdin runs as
// --stdin does: RunStdin, with that input's settings, ending with stdin.
func TestStdinOnlyInput(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "piped"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StateDir = c.ListenAddrs(), t.TempDir()
	cfg.Inputs = []map[string]any{{"name": "pipe", "stdin": true, "topic": "piped", "include-lines": []string{"keep"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !a.StdinOnly() {
		t.Fatal("not StdinOnly with one input that reads stdin")
	}
	if err := a.RunStdin(context.Background(), strings.NewReader("keep 1\ndrop\nkeep 2\n")); err != nil {
		t.Fatalf("RunStdin: %v", err)
	}
	var got []string
	for _, r := range topicRecords(t, c, "piped", false) {
		got = append(got, string(r.Value))
	}
	if fmt.Sprint(got) != "[keep 1 keep 2]" {
		t.Errorf("topic piped: %q, want the two kept lines", got)
	}
}
