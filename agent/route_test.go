package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// A template routes each line to its topic; a line whose topic does not exist (and the cluster
// does not create topics) is refused alone after max.block.ms, as is a line without the field
// and no fallback: both are the line's doing, so both are dead letters (the local file: no
// dead-letter topic is set) and the file's checkpoint moves past them; the run goes on, the
// other lines are delivered, the refusals are counted by topic and reason, and a restart
// would send nothing again.
func TestTemplateUnknownTopicDeadLettersThatLineAlone(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "logs-api", "logs-web")) // no auto-creation
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	data := `{"service":"api","n":1}` + "\n" + // 24 bytes
		`{"service":"nope","n":2}` + "\n" +
		`{"service":"web","n":3}` + "\n" +
		`{"n":4}` + "\n" +
		`{"service":"api","n":5}` + "\n"
	path := writeTemp(t, "app.log", []byte(data))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), "logs-{service}", []string{path}, string(filetail.StartAtBeginning), t.TempDir()
	cfg.Producer["max.block.ms"] = "1000"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No fallback topic: Connect checks the cluster answers, naming no topic.
	if err := a.Connect(context.Background()); err != nil {
		t.Fatalf("Connect with a template: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	fs := waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool {
		return fs.LinesAcked+fs.LinesDeadLettered+fs.LinesFailed == 5
	})
	if fs.LinesAcked != 3 || fs.LinesDeadLettered != 2 || fs.LinesFailed != 0 {
		t.Errorf("acked %d, dead-lettered %d, failed %d; want 3, 2, 0", fs.LinesAcked, fs.LinesDeadLettered, fs.LinesFailed)
	}
	if fs.Committed != int64(len(data)) {
		t.Errorf("committed %d, want %d: the checkpoint moves past the dead letters", fs.Committed, len(data))
	}
	got := map[string]TopicStats{}
	for _, ts := range a.TopicStats() {
		got[ts.Topic] = ts
	}
	for topic, want := range map[string]TopicStats{
		"logs-api":  {Topic: "logs-api", LinesSent: 2, LinesAcked: 2},
		"logs-web":  {Topic: "logs-web", LinesSent: 1, LinesAcked: 1},
		"logs-nope": {Topic: "logs-nope", LinesSent: 1, LinesDeadLettered: 1},
	} {
		if got[topic] != want {
			t.Errorf("topic %s: %+v, want %+v", topic, got[topic], want)
		}
	}
	if u := a.UnroutedLines(); u[UnroutedMissing] != 1 || u[UnroutedIllegalName] != 0 || u[UnroutedMaxTopics] != 0 {
		t.Errorf("unrouted %v, want 1 missing", u)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v, want a normal stop: dead letters lose nothing", err)
	}
	letters := readDeadLetters(t, cfg.StateDir)
	if len(letters) != 2 {
		t.Fatalf("%d dead letters, want 2: %+v", len(letters), letters)
	}
	// The follower waits max.block.ms on logs-nope before it reads the line without the field.
	if l := letters[0]; l.Reason != DeadLetterUnknownTopic || l.Topic != "logs-nope" || *l.Value != `{"service":"nope","n":2}` ||
		!strings.Contains(l.Message, `"logs-nope" not present in metadata`) || *l.Offset != 49 || l.Source != path {
		t.Errorf("first dead letter %+v, want logs-nope's line, unknown_topic, ending at 49", l)
	}
	if l := letters[1]; l.Reason != DeadLetterUnroutable || l.Error != "UNROUTABLE" || *l.Value != `{"n":4}` || *l.Offset != 81 {
		t.Errorf("second dead letter %+v, want the line without the field, unroutable, ending at 81", l)
	}
}

// With a template and a fallback topic, Connect fetches the fallback's metadata: a fallback
// that does not exist is reported before the first line.
func TestConnectWithTemplateChecksTheFallback(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "other"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, tc := range []struct {
		fallback string
		ok       bool
	}{{"other", true}, {"missing", false}} {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.FallbackTopic, cfg.Stdin = c.ListenAddrs(), "logs-{service}", tc.fallback, true
		cfg.Producer["max.block.ms"] = "500"
		a, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = a.Connect(context.Background())
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.fallback)) {
			t.Errorf("fallback %s: Connect = %v, want ok %v", tc.fallback, err, tc.ok)
		}
		_ = a.shutdown()
	}
	// Without a fallback, a cluster that does not answer is reported within max.block.ms.
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Stdin = []string{"127.0.0.1:1"}, "logs-{service}", true
	cfg.Producer["max.block.ms"] = "300"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.shutdown() }()
	start := time.Now()
	if err := a.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "max.block.ms") {
		t.Errorf("Connect to no cluster: %v, want a max.block.ms timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Connect took %v with max.block.ms 300", d)
	}
}
