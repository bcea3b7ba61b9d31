package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// keyErrors returns the keys of the ConfigErrors in err.
func keyErrors(err error) map[string]string {
	out := map[string]string{}
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if errors.As(e, &ce) {
			out[ce.Key] = ce.Reason
		}
	}
	return out
}

func TestExactlyOnceConfig(t *testing.T) {
	base := []string{"--brokers", "127.0.0.1:9092", "--topic", "t"}
	for _, tc := range []struct {
		name    string
		args    []string
		wantKey string // "" when valid
		reason  string
	}{
		{"with tail", []string{"--exactly-once", "--tail", "/var/log/*.log"}, "", ""},
		{"with stdin", []string{"--exactly-once", "--stdin"}, "exactly-once", "needs --tail"},
		{"without any source", []string{"--exactly-once"}, "exactly-once", "needs --tail"},
		{"user transactional.id", []string{"--tail", "/x", "-X", "transactional.id=mine"}, "producer.transactional.id", "--exactly-once"},
		{"user transactional.id with exactly-once", []string{"--exactly-once", "--tail", "/x", "-X", "transactional.id=mine"}, "producer.transactional.id", "--transactional-id"},
		{"commit interval too long", []string{"--exactly-once", "--tail", "/x", "--commit-interval", "40s"}, "commit-interval", "transaction.timeout.ms"},
		{"commit interval zero", []string{"--exactly-once", "--tail", "/x", "--commit-interval", "0s"}, "commit-interval", "positive"},
		{"no lines", []string{"--exactly-once", "--tail", "/x", "--commit-max-lines", "0"}, "commit-max-lines", "positive"},
		{"no state topic", []string{"--exactly-once", "--tail", "/x", "--state-topic", ""}, "state-topic", "required"},
		{"idempotence off", []string{"--exactly-once", "--tail", "/x", "-X", "enable.idempotence=false"}, "producer.enable.idempotence", "requires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append(base, tc.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			reason, ok := keyErrors(err)[tc.wantKey]
			if !ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Validate = %v; want an error for %s saying %q", err, tc.wantKey, tc.reason)
			}
		})
	}
}

// --host-name is what the default transactional id is made from (in a pod the system's host
// name is the pod's); lines carry it too (linerecord's TestHostNameKey).
func TestTransactionalIDFromHostName(t *testing.T) {
	c := DefaultConfig()
	c.ExactlyOnce, c.HostName, c.Tail = true, "node-7", []string{"/x/*.log"}
	if id := c.EffectiveTransactionalID(); !strings.HasPrefix(id, "kafkatrail-node-7-") {
		t.Errorf("transactional id %q: want it made from the host name", id)
	}
	if h := c.LineConfig().HostName; h != "node-7" {
		t.Errorf("lines carry host %q, want node-7", h)
	}
}

func TestExactlyOnceTransactionalID(t *testing.T) {
	c := DefaultConfig()
	c.ExactlyOnce = true
	c.Tail = []string{"/b/*.log", "/a/*.log"}
	id := c.EffectiveTransactionalID()
	if !strings.HasPrefix(id, "kafkatrail-") {
		t.Fatalf("default id %q", id)
	}
	c.Tail = []string{"/a/*.log", "/b/*.log"}
	if got := c.EffectiveTransactionalID(); got != id {
		t.Fatalf("the order of the patterns changed the id: %q, %q", id, got)
	}
	c.Tail = []string{"/c/*.log"}
	if got := c.EffectiveTransactionalID(); got == id {
		t.Fatalf("other patterns, same id %q", got)
	}
	c.StateTopic = "other-state"
	c.Tail = []string{"/a/*.log", "/b/*.log"}
	if got := c.EffectiveTransactionalID(); got == id {
		t.Fatalf("another state topic, same id %q", got)
	}
	c.TransactionalID = "mine"
	if got := c.EffectiveTransactionalID(); got != "mine" {
		t.Fatalf("--transactional-id mine gave %q", got)
	}
	c.Brokers = []string{"127.0.0.1:9092"}
	pc, err := c.ProducerConfig()
	if err != nil || pc.TransactionalID != "mine" {
		t.Fatalf("producer transactional.id = %q, %v", pc.TransactionalID, err)
	}
}

// eosCluster is a one-broker kfake cluster (transactions, no topic auto-creation) with the
// topics of topics, one partition each, created with their configs (nil: the defaults).
func eosCluster(t *testing.T, topics map[string]map[string]*string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kcl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	for topic, configs := range topics {
		if _, err := adm.CreateTopic(context.Background(), 1, 1, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// eosConfig is an --exactly-once agent's configuration following path from its beginning into
// topic of cluster c, with its state in stateDir; commits every 100 ms.
func eosConfig(c *kfake.Cluster, topic, path, stateDir string) Config {
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), topic, []string{path}, string(filetail.StartAtBeginning), stateDir
	cfg.ExactlyOnce, cfg.TransactionalID, cfg.CommitInterval = true, "kafkatrail-test", 100*time.Millisecond
	cfg.Producer["linger.ms"] = "0"
	return cfg
}

// topicRecords reads every record of topic (one partition) of cluster c up to now: a sentinel
// record is produced after them, and the records before it are returned. committed reads at
// read_committed, as the exactly-once guarantee is stated; else at read_uncommitted, which
// shows the records of aborted transactions too.
func topicRecords(t *testing.T, c *kfake.Cluster, topic string, committed bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const sentinel = "end-of-test"
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(sentinel)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: no sentinel within 20 s (%d records)", topic, len(out))
		}
		for _, r := range fs.Records() {
			if string(r.Value) == sentinel {
				return out
			}
			out = append(out, r)
		}
	}
}

// valueCounts counts records by value.
func valueCounts(recs []*kgo.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[string(r.Value)]++
	}
	return m
}

// headerMap is a record's headers by key.
func headerMap(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// runUntilCommitted runs a until its one file's committed position (its last committed
// transaction's) is want, then stops it and returns RunTail's error. A run that ends by itself
// first fails the test at once, with its error.
func runUntilCommitted(t *testing.T, a *Agent, want int64) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fs := a.FileStats(); len(fs) == 1 && fs[0].Committed == want {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before it committed %d (file stats %+v): %v", want, a.FileStats(), err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed to %d within 30 s: %+v", want, a.FileStats())
		}
	}
	cancel()
	return <-done
}

// readPending reads dead-letter-pending.json of stateDir; nil if there is none.
func readPending(t *testing.T, stateDir string) []pendingDeadLetter {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, PendingDeadLetterFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var f pendingDeadLetterFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return f.Entries
}

// TestExactlyOnceClientRefusalIsDeadLetteredInTheTransaction: with --exactly-once, a line the
// client refuses (a record over max.request.size; a --topic template naming a topic that does
// not exist) never entered the transaction: it is dead-lettered inside it, the run goes on, the
// committed position passes it, and a read_committed consumer sees every other line once and
// the dead letter once.
func TestExactlyOnceClientRefusalIsDeadLetteredInTheTransaction(t *testing.T) {
	t.Run("over max.request.size: the dead-letter file", func(t *testing.T) {
		c := eosCluster(t, map[string]map[string]*string{"logs": nil})
		long := strings.Repeat("x", 8190) // with its headers and framing, over 8192
		data := "one\n" + long + "\n" + "two\n" + "three\n"
		stateDir := t.TempDir()
		cfg := eosConfig(c, "logs", writeTemp(t, "app.log", []byte(data)), stateDir)
		cfg.Producer["max.request.size"] = "8192"
		cfg.MaxLineBytes = 8192
		a, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntilCommitted(t, a, int64(len(data))); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("RunTail: %v, want a normal stop", err)
		}
		if got := valueCounts(topicRecords(t, c, "logs", true)); fmt.Sprint(got) != fmt.Sprint(map[string]int{"one": 1, "two": 1, "three": 1}) {
			t.Errorf("logs at read_committed: %v, want one, two and three once", got)
		}
		letters := readDeadLetters(t, stateDir)
		if len(letters) != 1 || *letters[0].Value != long || letters[0].Reason != DeadLetterTooLarge ||
			letters[0].Error != "RECORD_TOO_LARGE" || *letters[0].Offset != int64(len("one\n"+long+"\n")) {
			t.Errorf("dead-letter file %+v, want the long line once", letters)
		}
		if got, want := a.Delivery().DeadLettered, []DeadLetterCount{{DeadLetterTooLarge, DeadLetterToFile, 1}}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("dead letters %+v, want %+v", got, want)
		}
		if n := a.Stats().LinesFailed.Load(); n != 0 {
			t.Errorf("%d lines failed, want 0", n)
		}
		if p := readPending(t, stateDir); p != nil {
			t.Errorf("pending dead letters %+v, want none", p)
		}
	})
	t.Run("templated topic that does not exist: the dead-letter topic", func(t *testing.T) {
		c := eosCluster(t, map[string]map[string]*string{"logs-api": nil, "logs-other": nil, "dlq": nil})
		nope := `{"service":"nope","n":2}`
		data := `{"service":"api","n":1}` + "\n" + nope + "\n" + `{"service":"api","n":3}` + "\n"
		path := writeTemp(t, "app.log", []byte(data))
		stateDir := t.TempDir()
		cfg := eosConfig(c, "logs-{service}", path, stateDir)
		cfg.FallbackTopic, cfg.DeadLetterTopic = "logs-other", "dlq"
		cfg.Producer["max.block.ms"] = "1000"
		a, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntilCommitted(t, a, int64(len(data))); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("RunTail: %v, want a normal stop", err)
		}
		if got := valueCounts(topicRecords(t, c, "logs-api", true)); len(got) != 2 || got[`{"service":"api","n":1}`] != 1 || got[`{"service":"api","n":3}`] != 1 {
			t.Errorf("logs-api at read_committed: %v, want both api lines once", got)
		}
		dlq := topicRecords(t, c, "dlq", true)
		if len(dlq) != 1 || string(dlq[0].Value) != nope {
			t.Fatalf("dlq at read_committed: %d records, want the line of logs-nope once", len(dlq))
		}
		h := headerMap(dlq[0])
		if h[HeaderDeadLetterReason] != DeadLetterUnknownTopic || h[HeaderDeadLetterError] != "UNKNOWN_TOPIC_OR_PARTITION" ||
			h[HeaderDeadLetterTopic] != "logs-nope" || h[HeaderDeadLetterSource] != path || h[HeaderDeadLetterOffset] != strconv.Itoa(len(data)-len(`{"service":"api","n":3}`)-1) {
			t.Errorf("dead letter's headers %v", h)
		}
		if got, want := a.Delivery().DeadLettered, []DeadLetterCount{{DeadLetterUnknownTopic, DeadLetterToTopic, 1}}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("dead letters %+v, want %+v", got, want)
		}
		if _, err := os.Stat(filepath.Join(stateDir, DeadLetterFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a dead-letter file (%v), want the topic only", err)
		}
	})
}

// TestExactlyOnceBrokerRefusalIsDeadLetteredWithoutARestart: with --exactly-once, a line the
// broker refuses for good (over the topic's max.message.bytes) fails inside the transaction,
// which must abort. The run does not end: dead-letter-pending.json names the line, and the
// agent resumes from the last commit in the same run, dead-letters the line instead of sending
// it, inside its transaction, and gets past it: every short line arrives once at
// read_committed, the long one is in the dead-letter topic once, and the pending list is gone.
// It used to end the run (exit 1) and leave the line to the next start.
func TestExactlyOnceBrokerRefusalIsDeadLetteredWithoutARestart(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dlq": nil})
	var data strings.Builder
	want := map[string]int{}
	for i := range 5 {
		fmt.Fprintf(&data, "short-%02d\n", i)
		want[fmt.Sprintf("short-%02d", i)] = 1
	}
	long := strings.Repeat("L", 4000)
	data.WriteString(long + "\n")
	longEnd := int64(data.Len())
	for i := 5; i < 10; i++ {
		fmt.Fprintf(&data, "short-%02d\n", i)
		want[fmt.Sprintf("short-%02d", i)] = 1
	}
	path := writeTemp(t, "app.log", []byte(data.String()))
	stateDir := t.TempDir()
	cfg := eosConfig(c, "logs", path, stateDir)
	cfg.DeadLetterTopic = "dlq"

	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntilCommitted(t, a, int64(data.Len())); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want a normal stop", err)
	}
	if got := valueCounts(topicRecords(t, c, "logs", true)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("logs at read_committed: %v, want every short line once", got)
	}
	dlq := topicRecords(t, c, "dlq", true)
	if len(dlq) != 1 || string(dlq[0].Value) != long {
		t.Fatalf("dlq at read_committed: %d records, want the long line once", len(dlq))
	}
	h := headerMap(dlq[0])
	if h[HeaderDeadLetterReason] != DeadLetterTooLarge || h[HeaderDeadLetterError] != "MESSAGE_TOO_LARGE" ||
		h[HeaderDeadLetterTopic] != "logs" || h[HeaderDeadLetterOffset] != strconv.FormatInt(longEnd, 10) ||
		!strings.Contains(h[HeaderDeadLetterMessage], "MESSAGE_TOO_LARGE") {
		t.Errorf("dead letter's headers %v", h)
	}
	if got, want := a.Delivery().DeadLettered, []DeadLetterCount{{DeadLetterTooLarge, DeadLetterToTopic, 1}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dead letters %+v, want %+v", got, want)
	}
	if fs := a.FileStats(); len(fs) != 1 || fs[0].LinesDeadLettered != 1 || fs[0].LinesFailed != 0 {
		t.Errorf("file stats %+v, want one dead letter, nothing failed (in the round after the abort)", fs)
	}
	if p := readPending(t, stateDir); p != nil {
		t.Errorf("pending dead letters after the run: %+v, want none", p)
	}
}

// TestExactlyOnceDeadLetterOfAnAbortedTransaction: a transaction holds a line the client
// refused and a line the broker refuses, which aborts it: a dead letter kept in it aborts with
// it (a read_uncommitted consumer may see it, a read_committed one does not), and the next
// round of the same run dead-letters both lines, once each at read_committed, with every other
// line once.
func TestExactlyOnceDeadLetterOfAnAbortedTransaction(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs-api": {"max.message.bytes": &small}, "logs-other": nil, "dlq": nil})
	nope := `{"service":"nope","n":2}`
	long := `{"service":"api","pad":"` + strings.Repeat("p", 4000) + `"}`
	lines := []string{`{"service":"api","n":1}`, nope, `{"service":"api","n":3}`, long, `{"service":"api","n":5}`}
	data := strings.Join(lines, "\n") + "\n"
	stateDir := t.TempDir()
	cfg := eosConfig(c, "logs-{service}", writeTemp(t, "app.log", []byte(data)), stateDir)
	cfg.FallbackTopic, cfg.DeadLetterTopic = "logs-other", "dlq"
	cfg.Producer["max.block.ms"] = "1000"
	// One transaction for the whole file: the commit comes once its five lines were handled.
	cfg.CommitInterval, cfg.CommitMaxLines = 20*time.Second, len(lines)

	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntilCommitted(t, a, int64(len(data))); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want a normal stop", err)
	}
	if got := valueCounts(topicRecords(t, c, "logs-api", true)); len(got) != 3 || got[lines[0]] != 1 || got[lines[2]] != 1 || got[lines[4]] != 1 {
		t.Errorf("logs-api at read_committed: %v, want the three short api lines once", got)
	}
	if got := valueCounts(topicRecords(t, c, "dlq", true)); len(got) != 2 || got[nope] != 1 || got[long] != 1 {
		t.Errorf("dlq at read_committed: %d values %v, want the line of logs-nope and the long line once each", len(got), got)
	}
	// The line of logs-nope is dead-lettered in the transaction that aborts if the redelivery
	// kept it before the commit found the refused line, else given up with it.
	if got := valueCounts(topicRecords(t, c, "dlq", false)); got[nope] < 1 || got[nope] > 2 || got[long] != 1 {
		t.Errorf("dlq at read_uncommitted: line of logs-nope %d times, long line %d; want 1 or 2 (the aborted one too) and 1",
			got[nope], got[long])
	}
	if p := readPending(t, stateDir); p != nil {
		t.Errorf("pending dead letters after the run: %+v, want none", p)
	}
}

// TestExactlyOnceAbortBeforeTheFirstCommitKeepsItsLines: a first run with --start-at end (no
// position in the state topic) whose first transaction aborts for a line the broker refuses:
// the next round starts where the aborted one began reading, not at the file's end again,
// which would skip the lines that round had read. The lines written before the start stay
// unsent; those after it arrive once, the refused one in the dead-letter topic.
func TestExactlyOnceAbortBeforeTheFirstCommitKeepsItsLines(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dlq": nil})
	path := writeTemp(t, "app.log", []byte("old-1\nold-2\n"))
	stateDir := t.TempDir()
	cfg := eosConfig(c, "logs", path, stateDir)
	cfg.StartAt, cfg.DeadLetterTopic = string(filetail.StartAtEnd), "dlq"
	// The first commit comes only once the four new lines were handled: it is the one that
	// finds the refused line and aborts.
	cfg.CommitInterval, cfg.CommitMaxLines = 20*time.Second, 4
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(a.FileStats()) != 1 || a.FileStats()[0].ReadOffset != int64(len("old-1\nold-2\n")) {
		if time.Now().After(deadline) {
			t.Fatalf("the file is not followed from its end within 20 s: %+v", a.FileStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	long := strings.Repeat("L", 4000)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new-1\nnew-2\n" + long + "\nnew-3\n")
	f.Close()
	size := int64(len("old-1\nold-2\nnew-1\nnew-2\n" + long + "\nnew-3\n"))
	deadline = time.Now().Add(30 * time.Second)
	for fs := a.FileStats(); len(fs) != 1 || fs[0].Committed != size; fs = a.FileStats() {
		select {
		case err := <-done:
			t.Fatalf("the run ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed to the end within 30 s: %+v", fs)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want a normal stop", err)
	}
	if got := valueCounts(topicRecords(t, c, "logs", true)); len(got) != 3 || got["new-1"] != 1 || got["new-2"] != 1 || got["new-3"] != 1 {
		t.Errorf("logs at read_committed: %v, want new-1..3 once (the old lines were before the start)", got)
	}
	if got := valueCounts(topicRecords(t, c, "dlq", true)); len(got) != 1 || got[long] != 1 {
		t.Errorf("dlq at read_committed: %d values, want the long line once", len(got))
	}
}
