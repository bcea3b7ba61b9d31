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
// does not create topics) fails alone after max.block.ms, as does a line without the field and
// no fallback: the run goes on, the other lines are delivered, the failures are counted by
// topic and reason, and the file's checkpoint stays before the first failed line.
func TestTemplateUnknownTopicFailsThatLineAlone(t *testing.T) {
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
	fs := waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool { return fs.LinesAcked+fs.LinesFailed == 5 })
	if fs.LinesAcked != 3 || fs.LinesFailed != 2 {
		t.Errorf("acked %d, failed %d; want 3 and 2", fs.LinesAcked, fs.LinesFailed)
	}
	if fs.Committed != 24 {
		t.Errorf("committed %d, want 24: the checkpoint stops before the first failed line", fs.Committed)
	}
	got := map[string]TopicStats{}
	for _, ts := range a.TopicStats() {
		got[ts.Topic] = ts
	}
	for topic, want := range map[string]TopicStats{
		"logs-api":  {Topic: "logs-api", LinesSent: 2, LinesAcked: 2},
		"logs-web":  {Topic: "logs-web", LinesSent: 1, LinesAcked: 1},
		"logs-nope": {Topic: "logs-nope", LinesSent: 1, LinesFailed: 1},
	} {
		if got[topic] != want {
			t.Errorf("topic %s: %+v, want %+v", topic, got[topic], want)
		}
	}
	if u := a.UnroutedLines(); u[UnroutedMissing] != 1 || u[UnroutedIllegalName] != 0 || u[UnroutedMaxTopics] != 0 {
		t.Errorf("unrouted %v, want 1 missing", u)
	}
	cancel()
	err = <-done
	var lf *LinesFailedError
	if !errors.As(err, &lf) || lf.Failed != 2 {
		t.Fatalf("RunTail: %v, want 2 lines failed", err)
	}
	// The follower waits max.block.ms on logs-nope before it reads the line without the field.
	if !strings.Contains(lf.First.Error(), `"logs-nope" not present in metadata`) {
		t.Errorf("first error %q, want the metadata timeout of logs-nope", lf.First)
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
