package linerecord

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// filterBuilder is a builder of the default configuration with mutate applied.
func filterBuilder(t testing.TB, mutate func(*Config)) *Builder {
	t.Helper()
	cfg := defaultConfig()
	mutate(&cfg)
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	return newRecordBuilder(&cfg)
}

// TestIncludeThenExcludeLines: Filebeat's semantics. A line is kept when it matches one of
// include-lines (every line when there are none), then left out when it matches one of
// exclude-lines; Build says why with a *Filtered and no record.
func TestIncludeThenExcludeLines(t *testing.T) {
	b := filterBuilder(t, func(c *Config) {
		c.IncludeLines = []string{`^ERR`, `^WARN`}
		c.ExcludeLines = []string{`healthcheck`}
	})
	for _, tc := range []struct {
		line, left string // left: the reason, "" if sent
	}{
		{"ERR disk full", ""},
		{"WARN slow", ""},
		{"INFO started", FilteredNotIncluded},
		{"ERR healthcheck failed", FilteredExcluded},
		{"INFO healthcheck", FilteredNotIncluded}, // include first
		{"", FilteredNotIncluded},
	} {
		r, err := b.Build(filetail.Line{Data: []byte(tc.line)}, "/a")
		var f *Filtered
		switch {
		case tc.left == "" && (err != nil || r == nil || string(r.Value) != tc.line):
			t.Errorf("%q: record %v, error %v; want it sent as it is", tc.line, r, err)
		case tc.left != "" && (!errors.As(err, &f) || f.Reason != tc.left || r != nil):
			t.Errorf("%q: record %v, error %v; want it left out: %s", tc.line, r, err, tc.left)
		}
	}
	onlyExclude := filterBuilder(t, func(c *Config) { c.ExcludeLines = []string{`DEBUG`, `TRACE`} })
	for line, sent := range map[string]bool{"INFO a": true, "DEBUG b": false, "x TRACE": false} {
		if r, err := onlyExclude.Build(filetail.Line{Data: []byte(line)}, "/a"); (err == nil) != sent || (r != nil) != sent {
			t.Errorf("exclude only, %q: record %v, error %v; sent %v", line, r, err, sent)
		}
	}
}

// TestRedactedTextIsInNoPartOfTheRecord: a redact rule rewrites the line before it is routed,
// keyed and encoded, so the masked text is in neither the value (raw or the JSON envelope), the
// key taken from a field, a header template's value nor the topic a template names; rules apply
// in order, each to what the one before it made, with $1 groups in the replacement.
func TestRedactedTextIsInNoPartOfTheRecord(t *testing.T) {
	const card = "4111-1111-1111-1111"
	line := `{"user":"ada","card":"` + card + `","note":"paid with ` + card + `","token":"s3cr3t"}`
	for _, format := range []string{FormatRaw, FormatJSON, FormatJSONMerge} {
		b := filterBuilder(t, func(c *Config) {
			c.Format = format
			c.KeyField = "card"
			c.Topic = "pay-{card}"
			c.FallbackTopic = "pay-other"
			c.Header = []string{"card={card}"}
			c.Redact = []Redaction{
				{Pattern: `\d{4}-\d{4}-\d{4}-(\d{4})`, Replacement: "****-$1"},
				{Pattern: `"token":"[^"]*"`, Replacement: `"token":"[REDACTED]"`},
				{Pattern: `\*\*\*\*-1111`, Replacement: "xxxx"}, // sees the first rule's output
			}
		})
		r, err := b.Build(filetail.Line{Data: []byte(line), End: int64(len(line)) + 1}, "/var/log/pay.log")
		if err != nil {
			t.Fatal(err)
		}
		parts := [][]byte{r.Value, r.Key, []byte(r.Topic)}
		for _, h := range r.Headers {
			parts = append(parts, []byte(h.Key), h.Value)
		}
		for _, p := range parts {
			if bytes.Contains(p, []byte("1111-1111")) || bytes.Contains(p, []byte("s3cr3t")) {
				t.Errorf("%s: %q holds the masked text", format, p)
			}
		}
		if string(r.Key) != "xxxx" || r.Topic != "pay-xxxx" {
			t.Errorf("%s: key %q topic %q, want both from the redacted field", format, r.Key, r.Topic)
		}
		if !bytes.Contains(r.Value, []byte("paid with xxxx")) || !bytes.Contains(r.Value, []byte(`[REDACTED]`)) {
			t.Errorf("%s: value %s, want the redacted line", format, r.Value)
		}
	}
	if got := func() int64 {
		b := filterBuilder(t, func(c *Config) { c.Redact = []Redaction{{Pattern: `\d{4}`, Replacement: "#"}} })
		b.Build(filetail.Line{Data: []byte("no digits")}, "")
		b.Build(filetail.Line{Data: []byte("1234")}, "")
		return b.redacted.Load()
	}(); got != 1 {
		t.Errorf("%d lines counted redacted, want 1", got)
	}
}

// TestRequiredLiteral: the string every match must hold, read from the pattern's syntax, and
// whether the pattern is only that string; none where a match need not hold one.
func TestRequiredLiteral(t *testing.T) {
	for _, tc := range []struct {
		pattern, lit string
		whole        bool
	}{
		{`GET /health`, "GET /health", true},
		{`(GET /health)`, "GET /health", true},
		{`^GET /health`, "GET /health", false},
		{`password=\S+`, "password=", false},
		{`"level":"(debug|trace)"`, `"level":"`, false},
		{`(?i)health`, "", false},
		{`debug|trace`, "", false},
		{`\d{4}-\d{4}`, "-", false},
		{`a.b`, "a", false},
		{`(`, "", false},
	} {
		lit, whole := requiredLiteral(tc.pattern)
		if lit != tc.lit || whole != tc.whole {
			t.Errorf("%q: %q %v, want %q %v", tc.pattern, lit, whole, tc.lit, tc.whole)
		}
	}
}

// TestMatcherAgreesWithTheRegexp: the literal shortcut never changes an answer.
func TestMatcherAgreesWithTheRegexp(t *testing.T) {
	patterns := []string{`GET /health`, `^GET /health`, `health$`, `password=\S+`, `(?i)HEALTH`, `a.b`, `x|y`,
		`"level":"(debug|trace)"`, `\bERR\b`, `(GET) (/health)`, `é`}
	lines := []string{"", "GET /health 200", "POST /health", "get /HEALTH", "password= ", "password=x", "a b", "ab",
		`{"level":"debug"}`, `{"level":"info"}`, "ERR", "ERRR", "xé", "health", "y"}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		m := newMatcher(re)
		for _, l := range lines {
			if got, want := m.match([]byte(l)), re.MatchString(l); got != want {
				t.Errorf("pattern %q, line %q: matcher %v, regexp %v", p, l, got, want)
			}
		}
	}
}

// TestFilterConfig: a pattern that does not compile names its key, and a redact pattern that
// matches the empty string is refused (it would put its replacement between every byte).
func TestFilterConfig(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		key    string
	}{
		{func(c *Config) { c.IncludeLines = []string{`(`} }, "include-lines"},
		{func(c *Config) { c.ExcludeLines = []string{`ok`, `[`} }, "exclude-lines"},
		{func(c *Config) { c.Redact = []Redaction{{Pattern: `(`}} }, "redact"},
		{func(c *Config) { c.Redact = []Redaction{{Pattern: `\d*`}} }, "redact"},
		{func(c *Config) { c.Redact = []Redaction{{Pattern: ``}} }, "redact"},
		{func(c *Config) { c.IncludeLines, c.Redact = []string{`ok`}, []Redaction{{Pattern: `\d+`}} }, ""},
	} {
		cfg := defaultConfig()
		tc.mutate(&cfg)
		err := cfg.check()
		var ce *ConfigError
		if tc.key == "" && err != nil || tc.key != "" && (!errors.As(err, &ce) || ce.Key != tc.key) {
			t.Errorf("%+v %+v: %v, want an error on %q", cfg.IncludeLines, cfg.Redact, err, tc.key)
		}
	}
	for text, want := range map[string]Redaction{
		`\d{16}`:            {Pattern: `\d{16}`, Replacement: DefaultRedactReplacement},
		`(token=)\S+=>$1**`: {Pattern: `(token=)\S+`, Replacement: `$1**`},
		`x=>`:               {Pattern: `x`, Replacement: ``},
	} {
		var r Redaction
		if err := r.UnmarshalText([]byte(text)); err != nil || r != want {
			t.Errorf("%q: %+v %v, want %+v", text, r, err, want)
		}
	}
}

// TestFilteredLinesAllocateNothing: a line left out, and a line no redact rule matches, cost
// no allocation; neither does a redacted line once the builder's buffers have grown, beyond the
// regexp's match indexes.
func TestFilteredLinesAllocateNothing(t *testing.T) {
	b := filterBuilder(t, func(c *Config) {
		c.ExcludeLines = []string{`GET /health`}
		c.Redact = []Redaction{{Pattern: `password=\S+`, Replacement: "password=***"}}
	})
	left := filetail.Line{Data: []byte(`10.0.0.1 - - "GET /health HTTP/1.1" 200`)}
	plain := filetail.Line{Data: []byte(`10.0.0.1 - - "GET /cart HTTP/1.1" 200`)}
	for name, l := range map[string]filetail.Line{"left out": left, "no redact match": plain} {
		if got := testing.AllocsPerRun(1000, func() { _, _ = b.Build(l, "/a") }); got != 0 {
			t.Errorf("%s: %v allocations a line", name, got)
		}
	}
	if _, err := b.Build(left, "/a"); err == nil || !strings.Contains(err.Error(), FilteredExcluded) {
		t.Errorf("left out: %v", err)
	}
}

// BenchmarkFilters is a line's Build with no filter, one exclude-lines rule (a literal, the
// common shape: health checks), one redact rule that matches no line and one that matches
// every line: what each rule adds to a line.
//
//	go test -run '^$' -bench Filters -benchmem ./linerecord/
func BenchmarkFilters(b *testing.B) {
	line := filetail.Line{Data: []byte(`10.0.0.1 - - [05/Dec/2026:09:00:00 +0000] "GET /cart?id=42 HTTP/1.1" 200 512 "-" "curl/8.5"`)}
	secret := filetail.Line{Data: []byte(`10.0.0.1 - - [05/Dec/2026:09:00:00 +0000] "GET /login?password=hunter2 HTTP/1.1" 200`)}
	for _, bc := range []struct {
		name   string
		line   filetail.Line
		mutate func(*Config)
	}{
		{"none", line, func(*Config) {}},
		{"exclude-lines/literal", line, func(c *Config) { c.ExcludeLines = []string{`GET /health`} }},
		{"exclude-lines/regexp", line, func(c *Config) { c.ExcludeLines = []string{`"GET /(health|ready)`} }},
		{"redact/no-match", line, func(c *Config) { c.Redact = []Redaction{{Pattern: `password=\S+`, Replacement: "password=***"}} }},
		{"redact/match", secret, func(c *Config) { c.Redact = []Redaction{{Pattern: `password=[^ &"]+`, Replacement: "password=***"}} }},
		{"exclude+redact", line, func(c *Config) {
			c.ExcludeLines = []string{`GET /health`}
			c.Redact = []Redaction{{Pattern: `password=\S+`, Replacement: "password=***"}}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rb := filterBuilder(b, bc.mutate)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.line.Data)))
			for b.Loop() {
				_, _ = rb.Build(bc.line, "/var/log/nginx/access.log")
			}
		})
	}
}
