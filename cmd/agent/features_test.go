package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// TestShipperFeaturesTogether runs the features log shippers ask for in one agent, as a user
// would combine them: two services' Java logs in their own directories, matched by one glob,
// joined into events by the java preset, each routed to the topic named after its directory,
// sent as the JSON envelope with a header from the template, under a rate limit. Read back
// topic by topic, every event is in its service's topic exactly once, whole: the envelope's
// message is the event's bytes, its log.file.path and log.offset say where it was, and the
// header names the service.
func TestShipperFeaturesTogether(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	base := kafkatest.NewTopic(t, 1) // a unique prefix, and the fallback topic
	services := []string{"api", "web"}
	createTopics(t, 2, base+"-api", base+"-web")

	type event struct {
		text   string
		offset int64
	}
	const perFile = 300
	dir := t.TempDir()
	want := map[string]map[string]event{} // service -> message -> event
	for _, s := range services {
		if err := os.Mkdir(filepath.Join(dir, s), 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		want[s] = map[string]event{}
		for i := range perFile {
			var ev string
			if i%3 == 0 {
				ev = fmt.Sprintf("2026-12-01 12:00:%02d.%03d ERROR [%s] request %d failed: java.lang.IllegalStateException: boom\n"+
					"\tat com.example.Service.call(Service.java:%d)\n"+
					"Caused by: java.io.IOException: disk full\n"+
					"\tat com.example.Disk.write(Disk.java:3)\n"+
					"\t... 1 more", i%60, i%1000, s, i, i)
			} else {
				ev = fmt.Sprintf("2026-12-01 12:00:%02d.%03d INFO  [%s] request %d ok", i%60, i%1000, s, i)
			}
			want[s][ev] = event{text: ev, offset: int64(b.Len())}
			b.WriteString(ev + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, s, "app.log"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	args := tailArgs(bootstrap, base+"-{file.dir}", filepath.Join(dir, "*", "app.log"), filepath.Join(dir, "state"))
	args = append(args, "--fallback-topic", base, "--multiline", "java", "--multiline-timeout", "200ms",
		"--format", "json", "--header", "svc={file.dir}", "--max-lines-per-second", "2000")
	a := startAgent(t, nil, args...)
	defer a.stop(30 * time.Second)

	for _, s := range services {
		topic := base + "-" + s
		recs := kafkatest.Consume(t, topic, len(want[s]), 60*time.Second)
		seen := map[string]bool{}
		for _, r := range recs {
			var v struct {
				Message string `json:"message"`
				Path    string `json:"log.file.path"`
				Offset  int64  `json:"log.offset"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("%s: record %q is not the JSON envelope: %v", topic, r.Value, err)
			}
			ev, ok := want[s][v.Message]
			switch {
			case !ok:
				t.Errorf("%s: a record that is no whole event of %s: %q", topic, s, v.Message)
				continue
			case seen[v.Message]:
				t.Errorf("%s: event at %d twice", topic, ev.offset)
			case v.Path != filepath.Join(dir, s, "app.log") || v.Offset != ev.offset:
				t.Errorf("%s: event at %d came as %s at %d", topic, ev.offset, v.Path, v.Offset)
			case headers(r)["svc"] != s:
				t.Errorf("%s: header svc=%q, want %q", topic, headers(r)["svc"], s)
			}
			seen[v.Message] = true
		}
		if len(seen) != len(want[s]) {
			t.Errorf("%s: %d distinct events, want %d; agent log:\n%s", topic, len(seen), len(want[s]), a.log())
		}
	}
}
