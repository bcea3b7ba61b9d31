package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// TestTopicTemplateRoutesEachLineToItsTopic: the agent tails a file holding the lines of three
// services into PREFIX-{service}; read back topic by topic, every line is in exactly the topic
// of its service, once, and the lines without a service are in the fallback topic. The records
// carry the --header headers (static, from a field, from a nested field; a header whose field
// the line lacks is omitted), source.host, and no source.path (switched off).
func TestTopicTemplateRoutesEachLineToItsTopic(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	fallback := kafkatest.NewTopic(t, 1) // unique: the services' topics are named after it
	services := []string{"api", "web", "db"}
	createTopics(t, 2, fallback+"-api", fallback+"-web", fallback+"-db")

	// Line i: service services[i%4] (none when i%4 == 3), nested owner.team on even lines.
	const n = 2000
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{} // topic -> lines
	for i := range n {
		line := map[string]any{"msg": fmt.Sprintf("line-%d", i)}
		topic := fallback
		if i%4 != 3 {
			line["service"] = services[i%4]
			topic = fallback + "-" + services[i%4]
		}
		if i%2 == 0 {
			line["owner"] = map[string]string{"team": "core"}
		}
		b, _ := json.Marshal(line)
		fmt.Fprintf(f, "%s\n", b)
		want[topic]++
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	args := tailArgs(bootstrap, fallback+"-{service}", path, filepath.Join(dir, "state"))
	args = append(args, "--fallback-topic", fallback, "--header-path", "",
		"--header", "env=prod", "--header", "svc={service}", "--header", "team={owner.team}")
	a := startAgent(t, nil, args...)

	for topic, count := range want {
		recs := kafkatest.Consume(t, topic, count, 30*time.Second)
		seen := map[string]bool{}
		for _, r := range recs {
			var v struct {
				Msg     string `json:"msg"`
				Service string `json:"service"`
				Owner   *struct {
					Team string `json:"team"`
				} `json:"owner"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("%s: record %q: %v", topic, r.Value, err)
			}
			if seen[v.Msg] {
				t.Errorf("%s: %s twice", topic, v.Msg)
			}
			seen[v.Msg] = true
			if wantTopic := fallback + "-" + v.Service; v.Service == "" && topic != fallback || v.Service != "" && topic != wantTopic {
				t.Errorf("%s holds %s of service %q", topic, v.Msg, v.Service)
			}
			h := headers(r)
			if h["env"] != "prod" || h["source.host"] == "" {
				t.Errorf("%s: %s: headers %v, want env=prod and source.host", topic, v.Msg, h)
			}
			if _, ok := h["source.path"]; ok {
				t.Errorf("%s: source.path header present with --header-path \"\"", topic)
			}
			if got, ok := h["svc"]; ok != (v.Service != "") || got != v.Service {
				t.Errorf("%s: %s: svc header %q (present %v) for service %q", topic, v.Msg, got, ok, v.Service)
			}
			if got, ok := h["team"]; ok != (v.Owner != nil) || (ok && got != "core") {
				t.Errorf("%s: %s: team header %q (present %v), owner %v", topic, v.Msg, got, ok, v.Owner)
			}
		}
		if len(seen) != count {
			t.Errorf("%s: %d distinct lines, want %d; agent log:\n%s", topic, len(seen), count, a.log())
		}
	}
	a.stop(30 * time.Second)
}

// createTopics creates each topic (partitions each, replication 1) on the test broker and
// deletes it when the test ends.
func createTopics(t *testing.T, partitions int32, topics ...string) {
	t.Helper()
	adm := kafkatest.NewAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range topics {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopic(ctx, topic)
		})
	}
}

func headers(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// TestTopicTemplateExactlyOnce: with --exactly-once a transaction spans the topics a template
// routes to; a read_committed consumer sees every line once, each in its own topic.
func TestTopicTemplateExactlyOnce(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	base := kafkatest.NewTopic(t, 1)
	adm := kafkatest.NewAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	services := []string{"api", "web"}
	for _, s := range services {
		topic := base + "-" + s
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(ctx, topic, base+"-state")
		})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		fmt.Fprintf(f, `{"service":%q,"msg":"line-%d"}`+"\n", services[i%2], i)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	a := startAgent(t, nil, "--brokers", bootstrap, "--topic", base+"-{service}", "--fallback-topic", base,
		"--tail", path, "--state-dir", state, "--start-at", "beginning", "--exactly-once",
		"--transactional-id", base+"-txn", "--state-topic", base+"-state", "--commit-interval", "200ms", "--log-format", "text")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(readFile(filepath.Join(state, "checkpoints.json")), fmt.Sprintf(`"offset": %d`, fileSize(t, path))) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not commit the file; log:\n%s", a.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.stop(30 * time.Second)
	for _, s := range services {
		values := readCommitted(t, base+"-"+s, 1)
		seen := map[string]bool{}
		for _, v := range values {
			var line struct{ Service, Msg string }
			if err := json.Unmarshal([]byte(v), &line); err != nil || line.Service != s || seen[line.Msg] {
				t.Fatalf("%s-%s: record %q (err %v, seen before %v)", base, s, v, err, seen[line.Msg])
			}
			seen[line.Msg] = true
		}
		if len(seen) != n/2 {
			t.Errorf("%s-%s: %d lines, want %d", base, s, len(seen), n/2)
		}
	}
	if values := readCommitted(t, base, 1); len(values) != 0 {
		t.Errorf("fallback topic holds %d records, want none", len(values))
	}
}
