package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/linerecord"
)

// TestFiltersAndRedactionOnTheFilePath: a followed file whose health checks are excluded,
// whose debug lines are not included, and whose card numbers are redacted. Exactly the kept
// lines reach the topic, every one masked; the left-out lines are counted and the checkpoint
// moves past them to the file's end; the one line the --topic template cannot route is a dead
// letter, masked too; and no log line of the run holds a card number.
func TestFiltersAndRedactionOnTheFilePath(t *testing.T) {
	const card = "4111111111111111"
	var data strings.Builder
	kept := 0
	for i := range 30 {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&data, `{"t":"logs","level":"info","msg":"GET /health %d"}`+"\n", i)
		case 1:
			fmt.Fprintf(&data, `{"t":"logs","level":"debug","msg":"cache warm %d card=%s"}`+"\n", i, card)
		default:
			fmt.Fprintf(&data, `{"t":"logs","level":"info","msg":"paid %d card=%s","card":"%s"}`+"\n", i, card, card)
			kept++
		}
	}
	data.WriteString(`{"level":"error","msg":"no topic card=` + card + `"}` + "\n") // unroutable: a dead letter
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	path := writeTemp(t, "app.log", []byte(data.String()))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), []string{path}, string(filetail.StartAtBeginning), t.TempDir()
	cfg.Topic = "{t}"
	cfg.KeyField = "card"
	cfg.Header = []string{"card={card}"}
	cfg.IncludeLines = []string{`"level":"(info|error)"`}
	cfg.ExcludeLines = []string{`GET /health`}
	cfg.Redact = []linerecord.Redaction{{Pattern: `\b\d{12}(\d{4})\b`, Replacement: "************$1"}}
	logs := testkit.NewLogs()
	a, err := New(cfg, logs.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	waitForFile(t, a, 30*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == int64(data.Len()) })
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}

	recs := topicRecords(t, c, "logs", false)
	if len(recs) != kept {
		t.Fatalf("%d records in the topic, want the %d kept lines", len(recs), kept)
	}
	for _, r := range recs {
		parts := []string{string(r.Value), string(r.Key)}
		for _, h := range r.Headers {
			parts = append(parts, h.Key+"="+string(h.Value))
		}
		for _, p := range parts {
			if strings.Contains(p, card) {
				t.Fatalf("the card number in a record: %q", p)
			}
		}
		if !strings.Contains(string(r.Value), "card=************1111") || string(r.Key) != "************1111" {
			t.Fatalf("record %q key %q: want the card masked to its last four digits", r.Value, r.Key)
		}
	}
	if n := a.Stats().LinesFiltered.Load(); n != 12 {
		t.Errorf("%d lines counted left out, want 12 (6 health checks, 6 debug lines)", n)
	}
	if c := a.filtered.lookup(sourceKey(a.inputList()[0], path)); c == nil || c.excluded.Load() != 6 || c.notIncluded.Load() != 6 {
		t.Errorf("left out by reason: %+v, want 6 excluded and 6 not included", c)
	}
	dl := testkit.DeadLetters(t, a.cfg.StateDir)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want the unroutable line's", len(dl))
	}
	if s := fmt.Sprint(dl[0]); strings.Contains(s, card) || !strings.Contains(s, "1111") {
		t.Errorf("dead letter %s: want the card masked", s)
	}
	for _, r := range logs.All(slog.LevelDebug) {
		if s := fmt.Sprint(r); strings.Contains(s, card) {
			t.Errorf("a log line holds the card number: %s", s)
		}
	}
}

// TestFiltersOnStdin: stdin's lines are filtered and redacted as a file's: the run ends
// without error (a line left out is not a failure), the kept lines alone are in the topic,
// masked, and the left-out ones are counted under stdin.
func TestFiltersOnStdin(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Stdin, cfg.StateDir = c.ListenAddrs(), "logs", true, t.TempDir()
	cfg.ExcludeLines = []string{`^#`}
	cfg.Redact = []linerecord.Redaction{{Pattern: `token=\S+`, Replacement: linerecord.DefaultRedactReplacement}}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := "# a comment\nstart token=abc123 ok\n# another\nend\n"
	if err := a.RunStdin(context.Background(), strings.NewReader(in)); err != nil {
		t.Fatalf("RunStdin: %v", err)
	}
	var got []string
	for _, r := range topicRecords(t, c, "logs", false) {
		got = append(got, string(r.Value))
	}
	if want := []string{"start [REDACTED] ok", "end"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q", got, want)
	}
	if n, by := a.Stats().LinesFiltered.Load(), a.filtered.lookup(sourceKey(a.inputList()[0], "")); n != 2 || by == nil || by.excluded.Load() != 2 {
		t.Errorf("%d lines left out (%+v), want 2 excluded under stdin", n, by)
	}
}
