package linerecord

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/filetail"
)

var readTime = time.Date(2026, 12, 1, 16, 9, 20, 123456789, time.UTC)

// testBuilder is a record builder of cfg (with mutate applied) whose host is "web-1" and whose
// clock stands at readTime.
func testBuilder(t testing.TB, mutate func(*Config)) *Builder {
	t.Helper()
	cfg := defaultConfig()
	cfg.Topic = "t"
	mutate(&cfg)
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	b := newRecordBuilder(&cfg)
	b.host = []byte("web-1")
	b.enc = newEncoder(&cfg, b.host)
	b.enc.now = func() time.Time { return readTime }
	return b
}

func line(s string, start int64) filetail.Line {
	return filetail.Line{Data: []byte(s), Start: start, End: start + int64(len(s)) + 1}
}

// TestEnvelopeGolden pins the json envelope byte for byte, for a file line and a stdin line,
// and the escaping of every kind of character.
func TestEnvelopeGolden(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSON })
	for _, tc := range []struct {
		name, line, path string
		start            int64
		want             string
	}{
		{"file", "GET /index.html 200", "/var/log/app.log", 1234,
			`{"@timestamp":"2026-12-01T16:09:20.123Z","message":"GET /index.html 200","host.name":"web-1","log.file.path":"/var/log/app.log","log.offset":1234}`},
		{"stdin", "hello", "", 0,
			`{"@timestamp":"2026-12-01T16:09:20.123Z","message":"hello","host.name":"web-1","input.type":"stdin","log.offset":0}`},
		{"escapes", "q\"b\\s/\t\r\n\x01\x1f\x7f<&>", "/p\"ath", 7,
			`{"@timestamp":"2026-12-01T16:09:20.123Z","message":"q\"b\\s/\t\r\n\u0001\u001f` + "\x7f" + `<&>","host.name":"web-1","log.file.path":"/p\"ath","log.offset":7}`},
		{"unicode kept, invalid UTF-8 replaced", "é€😀 \xff\xfe \xe2\x82 \u2028\u2029", "", 3,
			`{"@timestamp":"2026-12-01T16:09:20.123Z","message":"é€😀 \ufffd\ufffd \ufffd\ufffd \u2028\u2029","host.name":"web-1","input.type":"stdin","log.offset":3}`},
		{"empty line", "", "/a", 10,
			`{"@timestamp":"2026-12-01T16:09:20.123Z","message":"","host.name":"web-1","log.file.path":"/a","log.offset":10}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.buildLine(line(tc.line, tc.start), tc.path)
			if string(r.Value) != tc.want {
				t.Fatalf("value\n%s\nwant\n%s", r.Value, tc.want)
			}
			if !r.Timestamp.Equal(readTime.Truncate(time.Millisecond)) {
				t.Errorf("CreateTime %v, want the read time %v to the millisecond", r.Timestamp, readTime)
			}
			var got map[string]any
			if err := json.Unmarshal(r.Value, &got); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			var want string
			enc, _ := json.Marshal(tc.line)
			_ = json.Unmarshal(enc, &want)
			if got["message"] != want {
				t.Errorf("message %q, want %q (encoding/json's)", got["message"], want)
			}
		})
	}
}

// TestTruncatedLineIsFlagged: a line long-lines=truncate cut says so, as Filebeat's do.
func TestTruncatedLineIsFlagged(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSON })
	l := line("cut here", 0)
	l.Truncated = true
	want := `{"@timestamp":"2026-12-01T16:09:20.123Z","message":"cut here","host.name":"web-1","log.file.path":"/a","log.offset":0,"log.flags":["truncated"]}`
	if r := b.buildLine(l, "/a"); string(r.Value) != want {
		t.Fatalf("value\n%s\nwant\n%s", r.Value, want)
	}
}

// TestAppendJSONStringMatchesEncodingJSON: for any bytes, the string decodes to what
// encoding/json's own encoding of them decodes to (invalid UTF-8 as U+FFFD, one per byte).
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\x00\x01\x1f \"\\", "\xff", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok é \u2028"} {
		checkJSONString(t, []byte(s))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\"\\\n", "\xff\xfe", "é€😀", "\u2028"} {
		f.Add([]byte(s), 10)
	}
	f.Fuzz(func(t *testing.T, s []byte, room int) {
		checkJSONString(t, s)
		// Cut to room: still a JSON string, at most room bytes, a prefix of the whole.
		room = max(room%(4*len(s)+8), 2)
		out, cut := appendJSONString([]byte("x"), s, room)
		out = out[1:]
		if len(out) > room {
			t.Fatalf("%d bytes in room %d", len(out), room)
		}
		whole, _ := appendJSONString(nil, s, -1)
		if cut == (len(whole) <= room) || !bytes.HasPrefix(whole, out[:len(out)-1]) {
			t.Fatalf("cut %v: %q, whole %q", cut, out, whole)
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("cut output %q: %v", out, err)
		}
	})
}

func checkJSONString(t *testing.T, s []byte) {
	t.Helper()
	out, cut := appendJSONString(nil, s, -1)
	if cut {
		t.Fatalf("cut without a room")
	}
	want, _ := json.Marshal(string(s))
	var got, wantS string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%q -> %q: %v", s, out, err)
	}
	_ = json.Unmarshal(want, &wantS)
	if got != wantS {
		t.Fatalf("%q -> %q decodes to %q; encoding/json's %q to %q", s, out, got, want, wantS)
	}
}

// TestJSONMerge: a JSON object line keeps its own bytes (order, spacing, a trailing \r) and
// gets the fields it lacks spliced in before its closing brace; a field the line has already,
// as one dotted key or nested, is left alone; a line that is not an object goes as the json
// envelope, counted.
func TestJSONMerge(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSONMerge })
	const added = `"@timestamp":"2026-12-01T16:09:20.123Z","host.name":"web-1","log.file.path":"/a","log.offset":5`
	for _, tc := range []struct {
		name, line, want string
		fallback         bool
	}{
		{"object", `{"b":1,"a":"x"}`, `{"b":1,"a":"x",` + added + `}`, false},
		{"empty object", `{}`, `{` + added + `}`, false},
		{"empty object with spaces", `{ }`, `{ ` + added + `}`, false},
		{"spacing and trailing whitespace kept", "{ \"a\" : [1, {\"n\":{}}] }  \r", "{ \"a\" : [1, {\"n\":{}}] ," + added + "}  \r", false},
		{"own @timestamp and nested host.name win", `{"@timestamp":"mine","host":{"name":"h"}}`,
			`{"@timestamp":"mine","host":{"name":"h"},"log.file.path":"/a","log.offset":5}`, false},
		{"own dotted log.offset wins", `{"log.offset":"x"}`,
			`{"log.offset":"x","@timestamp":"2026-12-01T16:09:20.123Z","host.name":"web-1","log.file.path":"/a"}`, false},
		{"not JSON", `plain text`, `{"@timestamp":"2026-12-01T16:09:20.123Z","message":"plain text","host.name":"web-1","log.file.path":"/a","log.offset":5}`, true},
		{"broken object", `{"a":`, `{"@timestamp":"2026-12-01T16:09:20.123Z","message":"{\"a\":","host.name":"web-1","log.file.path":"/a","log.offset":5}`, true},
		{"array", `[1]`, `{"@timestamp":"2026-12-01T16:09:20.123Z","message":"[1]","host.name":"web-1","log.file.path":"/a","log.offset":5}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.enc.stats.MergeFallbacks.Load()
			r := b.buildLine(line(tc.line, 5), "/a")
			if string(r.Value) != tc.want {
				t.Fatalf("value\n%s\nwant\n%s", r.Value, tc.want)
			}
			if !json.Valid(r.Value) {
				t.Fatalf("not valid JSON: %s", r.Value)
			}
			if n := b.enc.stats.MergeFallbacks.Load() - before; n != map[bool]int64{true: 1}[tc.fallback] {
				t.Errorf("merge fallbacks counted %d, fallback %v", n, tc.fallback)
			}
		})
	}
}

// TestTimestampLayouts: every named layout and a Go layout parse the field into the record's
// CreateTime and @timestamp; a missing or unparseable field gets the read time and is counted.
func TestTimestampLayouts(t *testing.T) {
	want := time.Date(2026, 11, 30, 8, 15, 42, 987_000_000, time.UTC)
	ns := func(n int) time.Time { return want.Truncate(time.Second).Add(time.Duration(n)) }
	for _, tc := range []struct {
		layout, line string
		want         time.Time // zero: the read time, counted
	}{
		{"rfc3339", `{"ts":"2026-11-30T08:15:42Z"}`, want.Truncate(time.Second)},
		{"rfc3339", `{"ts":"2026-11-30T08:15:42.987654Z"}`, ns(987654000)},
		{"rfc3339", `{"ts":"2026-11-30T09:15:42.987+01:00"}`, want},
		{"rfc3339nano", `{"ts":"2026-11-30T08:15:42.987000001Z"}`, ns(987000001)},
		{"unix", `{"ts":1796026542}`, want.Truncate(time.Second)},
		{"unix", `{"ts":1796026542.987}`, want},
		{"unix", `{"ts":"1796026542.9871"}`, ns(987100000)},
		{"unix", `{"ts":1.796026542e9}`, want.Truncate(time.Second)},
		{"unix_ms", `{"ts":1796026542987}`, want},
		{"unix_us", `{"ts":1796026542987654}`, ns(987654000)},
		{"unix_us", `{"ts":1796026542987654.5}`, ns(987654500)},
		{"unix_ns", `{"ts":1796026542987654321}`, ns(987654321)},
		{"2006-01-02 15:04:05.000", `{"ts":"2026-11-30 08:15:42.987"}`, want},
		{"02/Jan/2006:15:04:05 -0700", `{"ts":"30/Nov/2026:09:15:42 +0100"}`, want.Truncate(time.Second)},
		{"rfc3339", `{"ts":"yesterday"}`, time.Time{}},
		{"rfc3339", `{"other":1}`, time.Time{}},
		{"rfc3339", `not json`, time.Time{}},
		{"unix", `{"ts":"12abc"}`, time.Time{}},
		{"unix", `{"ts":null}`, time.Time{}},
		{"unix", `{"ts":99999999999999999999}`, time.Time{}},
		{"unix_ms", `{"ts":{"a":1}}`, time.Time{}},
		{"unix", `{"ts":-5}`, time.Time{}},
		{"rfc3339", `{"ts":"1969-12-31T23:59:59Z"}`, time.Time{}},
		{"unix", `{"ts":0}`, time.Unix(0, 0).UTC()},
	} {
		for _, format := range []string{FormatRaw, FormatJSON, FormatJSONMerge} {
			t.Run(format+"/"+tc.layout+"/"+tc.line, func(t *testing.T) {
				b := testBuilder(t, func(c *Config) { c.Format, c.TimestampField, c.TimestampLayout = format, "ts", tc.layout })
				r := b.buildLine(line(tc.line, 0), "/a")
				fellBack := b.enc.stats.TimestampFallbacks.Load()
				wantTS, wantFallback := tc.want, int64(0)
				if wantTS.IsZero() {
					wantFallback = 1
					if format != FormatRaw {
						wantTS = readTime // raw leaves it to the producer: zero
					}
				}
				if format != FormatRaw {
					wantTS = wantTS.Truncate(time.Millisecond)
				}
				if !r.Timestamp.Equal(wantTS) {
					t.Fatalf("CreateTime %v, want %v", r.Timestamp, wantTS)
				}
				if fellBack != wantFallback {
					t.Errorf("timestamp fallbacks %d, want %d", fellBack, wantFallback)
				}
				if format == FormatRaw {
					if string(r.Value) != tc.line {
						t.Errorf("raw value %q, want the line %q", r.Value, tc.line)
					}
					return
				}
				var env struct {
					TS time.Time `json:"@timestamp"`
				}
				if err := json.Unmarshal(r.Value, &env); err != nil {
					t.Fatalf("%s: %v", r.Value, err)
				}
				if !env.TS.Equal(r.Timestamp) {
					t.Errorf("@timestamp %v, CreateTime %v: not the same instant", env.TS, r.Timestamp)
				}
			})
		}
	}
}

func TestTimestampFieldNested(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.TimestampField, c.TimestampLayout = "event.created", "unix_ms" })
	r := b.buildLine(line(`{"event":{"created":1796026542987}}`, 0), "/a")
	if want := time.UnixMilli(1796026542987); !r.Timestamp.Equal(want) {
		t.Fatalf("CreateTime %v, want %v", r.Timestamp, want)
	}
}

// TestEncodingConfig: bad --format, --timestamp-layout and --timestamp-field values are
// refused, naming their key.
func TestEncodingConfig(t *testing.T) {
	for _, tc := range []struct {
		mutate  func(*Config)
		wantKey string
	}{
		{func(c *Config) { c.Format = "xml" }, "format"},
		{func(c *Config) { c.Format = "" }, ""},
		{func(c *Config) { c.TimestampLayout = "rfc3399" }, "timestamp-layout"},
		{func(c *Config) { c.TimestampLayout = "15:04:05" }, "timestamp-layout"},
		{func(c *Config) { c.TimestampLayout = "" }, ""},
		{func(c *Config) { c.TimestampLayout = "  " }, "timestamp-layout"},
		{func(c *Config) { c.TimestampField = "a." }, "timestamp-field"},
		{func(c *Config) { c.TimestampLayout = "UNIX_MS" }, ""},
		{func(c *Config) { c.TimestampLayout = "2006-01-02 15:04:05" }, ""},
	} {
		cfg := defaultConfig()
		cfg.Topic = "t"
		tc.mutate(&cfg)
		err := cfg.check()
		if tc.wantKey == "" {
			if err != nil {
				t.Errorf("%+v: %v", cfg.TimestampLayout, err)
			}
			continue
		}
		if ce, ok := err.(*ConfigError); !ok || ce.Key != tc.wantKey {
			t.Errorf("format %q layout %q field %q: %v, want an error for %s", cfg.Format, cfg.TimestampLayout, cfg.TimestampField, err, tc.wantKey)
		}
	}
}

// TestEnvelopeOfTheLongestLineFitsTheRequest: a line of max-line-bytes (the default, derived
// from max.request.size) still makes a record under max.request.size in every format: the
// envelope of a line that escapes to several times its size has its message cut and flagged,
// counted; json-merge adds only its few fields.
func TestEnvelopeOfTheLongestLineFitsTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		line         []byte
		wantCut      bool
	}{
		{"plain line, json", FormatJSON, bytes.Repeat([]byte("a"), filetail.DefaultMaxLineBytes), false},
		{"all quotes, json", FormatJSON, bytes.Repeat([]byte(`"`), filetail.DefaultMaxLineBytes), true},
		{"control bytes, json", FormatJSON, bytes.Repeat([]byte{1}, filetail.DefaultMaxLineBytes), true},
		{"multibyte, json", FormatJSON, bytes.Repeat([]byte("é"), filetail.DefaultMaxLineBytes/2), false},
		{"object, json-merge", FormatJSONMerge, append(append([]byte(`{"m":"`), bytes.Repeat([]byte("a"), filetail.DefaultMaxLineBytes-8)...), '"', '}'), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBuilder(t, func(c *Config) { c.Format = tc.format })
			path := "/var/log/" + strings.Repeat("d", 200) + "/app.log"
			r := b.buildLine(filetail.Line{Data: tc.line}, path)
			var env map[string]any
			if err := json.Unmarshal(r.Value, &env); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			_, flagged := env["log.flags"]
			if flagged != tc.wantCut || (b.enc.stats.MessagesCut.Load() == 1) != tc.wantCut {
				t.Fatalf("flagged %v, counted %d, want cut %v", flagged, b.enc.stats.MessagesCut.Load(), tc.wantCut)
			}
			if msg, ok := env["message"].(string); ok && !tc.wantCut && msg != string(tc.line) {
				t.Fatalf("message changed without a cut")
			}
			size := accumulator.EstimateRecordSize(r.Key, r.Value, r.Headers)
			if size > 1<<20-envelopeRoomBytes+4096 {
				t.Fatalf("record of %d bytes: too close to max.request.size %d", size, 1<<20)
			}
		})
	}
}

// TestEnvelopeBuildAllocatesNothing: the json envelope of a plain line is appended into the
// builder's buffer: no allocation per line once it has grown.
func TestEnvelopeBuildAllocatesNothing(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSON })
	l := line("2026-11-30T16:40:00Z INFO a plain log line with \"quotes\"", 100)
	if got := testing.AllocsPerRun(1000, func() { b.buildLine(l, "/var/log/app.log") }); got != 0 {
		t.Errorf("json envelope: %v allocations per line, want 0", got)
	}
}

// BenchmarkEncode measures building the record of a typical line in each format.
func BenchmarkEncode(b *testing.B) {
	plain := line(`2026-11-30T16:40:00.123Z INFO  [http-nio-8080-exec-7] c.e.shop.CartController - added item sku=AB-1234 qty=2 user=u-42 took=3ms`, 123456)
	obj := line(`{"ts":"2026-11-30T16:40:00.123Z","level":"info","logger":"c.e.shop.CartController","msg":"added item","sku":"AB-1234","qty":2,"user":"u-42","took_ms":3}`, 123456)
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		l      filetail.Line
	}{
		{"raw", func(c *Config) {}, plain},
		{"json", func(c *Config) { c.Format = FormatJSON }, plain},
		{"json-merge", func(c *Config) { c.Format = FormatJSONMerge }, obj},
		{"json-merge/fallback", func(c *Config) { c.Format = FormatJSONMerge }, plain},
		{"raw/timestamp-field", func(c *Config) { c.TimestampField = "ts" }, obj},
		{"json-merge/timestamp-field", func(c *Config) { c.Format, c.TimestampField = FormatJSONMerge, "ts" }, obj},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Topic = "t"
			tc.mutate(&cfg)
			rb := newRecordBuilder(&cfg)
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.l.Data)))
			for b.Loop() {
				rb.buildLine(tc.l, "/var/log/shop/app.log")
			}
		})
	}
}

// TestRawIsByteExact: --format raw sends the line itself, every byte value as it was read
// (NUL, CR, invalid UTF-8, JSON or not), with or without --timestamp-field: the value is the
// line's own memory, not a copy or a re-encoding.
func TestRawIsByteExact(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, field := range []string{"", "ts"} {
		b := testBuilder(t, func(c *Config) { c.TimestampField = field })
		for _, l := range [][]byte{all, []byte("\xff\xfe\x00\r"), []byte(`{"ts":"2026-11-30T08:15:42Z", "a" : 1 }` + "\r"), {}} {
			r := b.buildLine(filetail.Line{Data: l, Start: 9}, "/a")
			if !bytes.Equal(r.Value, l) || (len(l) > 0 && &r.Value[0] != &l[0]) {
				t.Fatalf("timestamp-field %q: value %q, want the line itself %q", field, r.Value, l)
			}
		}
	}
}

// TestTimestampTextCache: @timestamp's text, kept from line to line within a millisecond, is
// always the instant's own, across millisecond changes and for years of five digits.
func TestTimestampTextCache(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSON })
	base := time.Date(2026, 12, 1, 16, 9, 20, 123_000_000, time.UTC)
	for _, ts := range []time.Time{base, base.Add(time.Microsecond), base.Add(time.Millisecond), base,
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), base.Add(-time.Hour)} {
		got := string(b.enc.appendTimestamp([]byte("x"), ts.Truncate(time.Millisecond)))
		if want := "x" + ts.UTC().Format("2006-01-02T15:04:05.000Z07:00"); got != want {
			t.Errorf("%v: %q, want %q", ts, got, want)
		}
	}
}

// FuzzEncode: for any line, json and json-merge values are valid JSON; json's message is the
// line as encoding/json sees it; a json-merge object keeps every field of the line with its
// value and gains the envelope's fields it did not have.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "plain", `{}`, `{ }`, `{"a":1}`, "{\"a\":{\"b\":[1,2]}} \r", `{"@timestamp":"x","host":{"name":1}}`, `{"a":`, `[1]`, "\xff{\"a\":1}"} {
		f.Add([]byte(s))
	}
	jsonB := testBuilder(f, func(c *Config) { c.Format = FormatJSON })
	mergeB := testBuilder(f, func(c *Config) { c.Format = FormatJSONMerge })
	f.Fuzz(func(t *testing.T, data []byte) {
		l := filetail.Line{Data: data, Start: 42}
		env := jsonB.buildLine(l, "/a")
		var e map[string]any
		if err := json.Unmarshal(env.Value, &e); err != nil {
			t.Fatalf("json envelope %q: %v", env.Value, err)
		}
		var want string
		enc, _ := json.Marshal(string(data))
		_ = json.Unmarshal(enc, &want)
		if e["message"] != want || e["log.offset"] != float64(42) {
			t.Fatalf("envelope %s of %q", env.Value, data)
		}
		merged := mergeB.buildLine(l, "/a")
		var m map[string]any
		if err := json.Unmarshal(merged.Value, &m); err != nil {
			t.Fatalf("json-merge of %q: %q: %v", data, merged.Value, err)
		}
		var own map[string]any
		if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &own) != nil {
			return // the envelope, checked above
		}
		if !bytes.HasPrefix(merged.Value, bytes.TrimRight(data, " \t\r\n")[:len(bytes.TrimRight(data, " \t\r\n"))-1]) {
			t.Fatalf("json-merge of %q does not keep its bytes: %q", data, merged.Value)
		}
		for k, v := range own {
			if !jsonSame(m[k], v) {
				t.Fatalf("json-merge of %q changed %s: %q", data, k, merged.Value)
			}
		}
		for _, k := range []string{fieldTimestamp, fieldHost, fieldPath, fieldOffset} {
			if _, ok := m[k]; !ok {
				if _, has := mergeB.fields.get(k); !has {
					t.Fatalf("json-merge of %q lacks %s: %q", data, k, merged.Value)
				}
			}
		}
	})
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestLongEnvelopeBufferIsNotKept: after a long line, the builder does not keep its envelope's
// buffer for the lines after it: pooled builders hold at most keptBufferBytes each.
func TestLongEnvelopeBufferIsNotKept(t *testing.T) {
	b := testBuilder(t, func(c *Config) { c.Format = FormatJSON })
	b.buildLine(filetail.Line{Data: bytes.Repeat([]byte("a"), 512<<10)}, "/a")
	if cap(b.enc.buf) < 512<<10 {
		t.Fatalf("buffer of %d bytes for a 512 KiB line", cap(b.enc.buf))
	}
	b.buildLine(line("short", 0), "/a")
	if c := cap(b.enc.buf); c > keptBufferBytes {
		t.Fatalf("buffer of %d bytes kept after a short line, want at most %d", c, keptBufferBytes)
	}
}

// BenchmarkMergeSplice measures json-merge's own work on a line whose JSON view is parsed
// already (as it is when --key-field or --timestamp-field asked for a field first): the
// lookups of the five names and the splice.
func BenchmarkMergeSplice(b *testing.B) {
	l := line(`{"ts":"2026-11-30T16:40:00.123Z","level":"info","logger":"c.e.shop.CartController","msg":"added item","sku":"AB-1234","qty":2,"user":"u-42","took_ms":3}`, 123456)
	rb := testBuilder(b, func(c *Config) { c.Format = FormatJSONMerge })
	rb.buildLine(l, "/var/log/shop/app.log")
	rb.fields.reset(l.Data)
	rb.fields.isObject()
	b.ReportAllocs()
	b.SetBytes(int64(len(l.Data)))
	for b.Loop() {
		rb.enc.merge(l, &rb.fields, readTime, nil)
	}
}

// TestRecordWrittenTime: a record's Written, where its read stage and age start, is the line's
// own timestamp when --timestamp-field finds one, else what the reader knew (Line.Written),
// else unknown; a pooled builder never carries one line's over to the next.
func TestRecordWrittenTime(t *testing.T) {
	read := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	withRead := func(s string) filetail.Line { l := line(s, 0); l.Written = read.UnixNano(); return l }
	for _, format := range []string{FormatRaw, FormatJSON} {
		b := testBuilder(t, func(c *Config) { c.Format, c.TimestampField, c.TimestampLayout = format, "ts", "unix_ms" })
		if r := b.buildLine(withRead(`{"ts":1796026542987}`), "/a"); !r.Written.Equal(time.UnixMilli(1796026542987)) {
			t.Fatalf("%s, timestamp field: Written %v, want the line's own time", format, r.Written)
		}
		if r := b.buildLine(withRead(`{"no":"ts"}`), "/a"); !r.Written.Equal(read) {
			t.Fatalf("%s, no timestamp field: Written %v, want the reader's %v", format, r.Written, read)
		}
		if r := b.buildLine(line(`{"no":"ts"}`, 0), "/a"); !r.Written.IsZero() {
			t.Fatalf("%s, nothing known: Written %v, want zero", format, r.Written)
		}
	}
}
