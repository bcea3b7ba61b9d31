package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// envelopeLines are the lines the encoding tests send: JSON objects with and without a usable
// "ts", a JSON object with its own @timestamp, an empty object, a CRLF line, and plain text
// with characters to escape and bytes that are not UTF-8.
var envelopeLines = []string{
	`{"ts":"2026-11-30T08:15:42.987Z","level":"info","msg":"first"}`,
	"plain \"text\"\twith a tab and \xff, not UTF-8",
	`{"ts":"not a time","msg":"bad ts"}`,
	`{}`,
	`{"@timestamp":"the line's own","ts":"2026-11-30T08:15:43.5+01:00", "msg" : "spaced" }`,
	"{\"ts\":\"2026-11-30T08:15:44Z\",\"crlf\":true}\r",
	"bytes \x00\x01\x7f\xc3\xa9\xed\xa0\x80 and a CR\r",
}

// envelopeTimes are the times the lines' ts fields hold (zero: none usable, the read time).
var envelopeTimes = []time.Time{
	time.Date(2026, 11, 30, 8, 15, 42, 987_000_000, time.UTC),
	{},
	{},
	{},
	time.Date(2026, 11, 30, 7, 15, 43, 500_000_000, time.UTC),
	time.Date(2026, 11, 30, 8, 15, 44, 0, time.UTC),
	{},
}

// TestEncodingsEndToEnd runs the agent on one file with --format json, json-merge and raw,
// each with --timestamp-field ts, and on stdin with json; it reads the records back from the
// real broker and checks every field of every value, parsed with encoding/json, and that
// each record's CreateTime is the instant its @timestamp shows (the line's ts, else the read
// time) and raw values stay byte for byte the lines.
func TestEncodingsEndToEnd(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	var data []byte
	starts := make([]int64, len(envelopeLines))
	for i, l := range envelopeLines {
		starts[i] = int64(len(data))
		data = append(data, l+"\n"...)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()

	for _, format := range []string{"json", "json-merge", "raw"} {
		t.Run(format, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			before := time.Now().Truncate(time.Millisecond)
			a := startAgent(t, nil, append(tailArgs(bootstrap, topic, path, t.TempDir()),
				"--format", format, "--timestamp-field", "ts", "--timestamp-layout", "rfc3339", "--http", "127.0.0.1:0")...)
			recs := kafkatest.Consume(t, topic, len(envelopeLines), 20*time.Second)
			// The status page counts the lines that got the read time, and json-merge's
			// fallbacks (the two plain lines).
			wantMerge := map[string]int64{"json-merge": 2}[format]
			var st statuspage.Status
			deadline := time.Now().Add(10 * time.Second)
			for getStatus(t, a, &st); st.Totals.TimestampFallbacks != 4 || st.Totals.MergeFallbacks != wantMerge; getStatus(t, a, &st) {
				if time.Now().After(deadline) {
					t.Fatalf("/api/status totals %+v, want 4 timestamp fallbacks and %d merge fallbacks", st.Totals, wantMerge)
				}
				time.Sleep(50 * time.Millisecond)
			}
			a.stop(20 * time.Second)
			after := time.Now()
			if len(recs) != len(envelopeLines) {
				t.Fatalf("%d records, want %d; agent log:\n%s", len(recs), len(envelopeLines), a.log())
			}
			for i, r := range recs {
				checkEncodedRecord(t, format, r, i, path, host, starts[i], before, after)
			}
			// The line whose ts does not parse, and the three without one, are counted, not failed.
			if log := a.log(); !strings.Contains(log, "line without a usable --timestamp-field") || !strings.Contains(log, "got the read time") || !strings.Contains(log, "lines=4") {
				t.Errorf("no count of the 3 lines that got the read time in the log:\n%s", log)
			}
		})
	}

	t.Run("stdin json", func(t *testing.T) {
		topic := kafkatest.NewTopic(t, 1)
		before := time.Now().Truncate(time.Millisecond)
		res := runAgent(t, bytes.NewReader(data), 30*time.Second, nil, "--brokers", bootstrap, "--topic", topic,
			"--format", "json", "--timestamp-field", "ts")
		after := time.Now()
		if res.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", res.code, tail(res.stderr))
		}
		recs := kafkatest.Consume(t, topic, len(envelopeLines), 20*time.Second)
		if len(recs) != len(envelopeLines) {
			t.Fatalf("%d records, want %d", len(recs), len(envelopeLines))
		}
		for i, r := range recs {
			checkEncodedRecord(t, "json", r, i, "", host, starts[i], before, after)
		}
	})
}

// checkEncodedRecord checks the record of envelopeLines[i] (read from path, "" for stdin, at
// offset start, between before and after) in format.
func checkEncodedRecord(t *testing.T, format string, r *kgo.Record, i int, path, host string, start int64, before, after time.Time) {
	t.Helper()
	line := envelopeLines[i]
	wantTS := envelopeTimes[i]
	if wantTS.IsZero() {
		if r.Timestamp.Before(before) || r.Timestamp.After(after) {
			t.Errorf("line %d: CreateTime %v, want the read time, between %v and %v", i, r.Timestamp, before, after)
		}
	} else if !r.Timestamp.Equal(wantTS) {
		t.Errorf("line %d: CreateTime %v, want the line's ts %v", i, r.Timestamp, wantTS)
	}
	if format == "raw" {
		if string(r.Value) != line {
			t.Errorf("line %d: raw value %q, want the line byte for byte %q", i, r.Value, line)
		}
		return
	}
	var v map[string]any
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("line %d: value %q is not JSON: %v", i, r.Value, err)
	}
	merged := format == "json-merge" && strings.HasPrefix(line, "{")
	want := map[string]any{"host.name": host, "log.offset": float64(start)}
	if path != "" {
		want["log.file.path"] = path
	} else {
		want["input.type"] = "stdin"
	}
	if merged {
		if !bytes.HasPrefix(r.Value, []byte(strings.TrimSuffix(strings.TrimRight(line, " \r"), "}"))) {
			t.Errorf("line %d: merged value %s does not start with the line's own bytes", i, r.Value)
		}
		var own map[string]any
		_ = json.Unmarshal([]byte(line), &own)
		for k, val := range own {
			want[k] = val
		}
	} else {
		var msg string
		enc, _ := json.Marshal(line) // encoding/json's view of the line: invalid UTF-8 as U+FFFD
		_ = json.Unmarshal(enc, &msg)
		want["message"] = msg
	}
	ts, ownTS := v["@timestamp"].(string)
	if own, ok := want["@timestamp"]; ok {
		if ts != own {
			t.Errorf("line %d: @timestamp %q, want the line's own %q", i, ts, own)
		}
	} else {
		parsed, err := time.Parse(time.RFC3339, ts)
		if !ownTS || err != nil || !parsed.Equal(r.Timestamp) || !strings.HasSuffix(ts, "Z") || len(ts) != len("2006-01-02T15:04:05.000Z") {
			t.Errorf("line %d: @timestamp %q (%v), want the record's CreateTime %v in RFC 3339 UTC with milliseconds", i, ts, err, r.Timestamp)
		}
		want["@timestamp"] = ts
	}
	for k, w := range want {
		if g, ok := v[k]; !ok || !jsonEqual(g, w) {
			t.Errorf("line %d: %s = %#v, want %#v (value %s)", i, k, g, w, r.Value)
		}
	}
	for k := range v {
		if _, ok := want[k]; !ok {
			t.Errorf("line %d: unexpected field %s in %s", i, k, r.Value)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestLongestLineEnvelopeIsDelivered: with max.request.size 64 KiB (so max-line-bytes 48 KiB),
// a line of 48 KiB of quotes, whose json envelope would be twice that, is delivered with its
// message cut and flagged; a 48 KiB JSON object line with json-merge is delivered whole.
func TestLongestLineEnvelopeIsDelivered(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	const maxLine = 64<<10 - 16<<10
	quotes := strings.Repeat(`"`, maxLine)
	object := `{"m":"` + strings.Repeat("a", maxLine-8) + `"}`
	for _, tc := range []struct {
		format, line string
		cut          bool
	}{
		{"json", quotes, true},
		{"json-merge", object, false},
	} {
		t.Run(tc.format, func(t *testing.T) {
			topic := kafkatest.NewTopic(t, 1)
			res := runAgent(t, strings.NewReader(tc.line+"\n"), 30*time.Second, nil, "--brokers", bootstrap, "--topic", topic,
				"--format", tc.format, "-X", "max.request.size=65536")
			if res.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", res.code, tail(res.stderr))
			}
			recs := kafkatest.Consume(t, topic, 1, 20*time.Second)
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			var v map[string]any
			if err := json.Unmarshal(recs[0].Value, &v); err != nil {
				t.Fatalf("value is not JSON: %v", err)
			}
			_, flagged := v["log.flags"]
			msg, _ := v["message"].(string)
			switch {
			case flagged != tc.cut:
				t.Errorf("log.flags present %v, want %v", flagged, tc.cut)
			case tc.cut && (len(msg) == 0 || strings.Trim(msg, `"`) != "" || len(recs[0].Value) > 64<<10-8<<10):
				t.Errorf("cut message of %d quotes in a value of %d bytes, want a prefix of the line within 56 KiB", len(msg), len(recs[0].Value))
			case !tc.cut && (v["m"] != strings.Repeat("a", maxLine-8) || !bytes.HasPrefix(recs[0].Value, []byte(tc.line[:len(tc.line)-1]))):
				t.Errorf("json-merge changed the line")
			}
			if tc.cut && !strings.Contains(res.stderr, "messages cut to fit max.request.size") {
				t.Errorf("the cut is not logged:\n%s", tail(res.stderr))
			}
		})
	}
}

var statusURL = regexp.MustCompile(`msg="status page" url=(http://127\.0\.0\.1:\d+/)`)

// getStatus reads the running agent's /api/status into st (the page's address from its log).
func getStatus(t *testing.T, a *runningAgent, st *statuspage.Status) {
	t.Helper()
	b, _ := os.ReadFile(a.logf)
	m := statusURL.FindSubmatch(b)
	if m == nil {
		return // not up yet: the caller's deadline decides
	}
	resp, err := http.Get(string(m[1]) + "api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(st); err != nil {
		t.Fatal(err)
	}
}
