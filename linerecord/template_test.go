package linerecord

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/producer"
)

func TestParseTemplateErrorsNameTheKey(t *testing.T) {
	re := regexp.MustCompile(`^(?P<level>[A-Z]+) `)
	for _, c := range []struct {
		text, want string
	}{
		{"logs-{service", "unclosed '{'"},
		{"logs-{a{b}", "unclosed '{'"},
		{"logs-}", "'}' without a '{'"},
		{"logs-{}", "empty name"},
		{"logs-{ service }", "no spaces"},
		{"logs-{file.path}", "unknown source part"},
		{"logs-{a..b}", "empty part"},
		{"logs-{.a}", "empty part"},
	} {
		_, err := parseTemplate("topic", c.text, re)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "topic" || !strings.Contains(ce.Reason, c.want) || !strings.Contains(ce.Reason, c.text) {
			t.Errorf("parseTemplate(%q) = %v, want a ConfigError on topic saying %q and quoting the template", c.text, err, c.want)
		}
	}
}

func TestTemplateExpands(t *testing.T) {
	re := regexp.MustCompile(`^(?P<level>[A-Z]+) (?P<svc>\w+)?`)
	for _, c := range []struct {
		name, tmpl, line, path string
		want, missing          string
	}{
		{"field", "logs-{service}", `{"service":"api"}`, "/var/log/a.log", "logs-api", ""},
		{"dotted", "k8s-{kubernetes.labels.app}", `{"kubernetes":{"labels":{"app":"web"}}}`, "", "k8s-web", ""},
		{"dotted key as written", "x-{log.level}", `{"log.level":"warn"}`, "", "x-warn", ""},
		{"number", "p{n}", `{"n":7}`, "", "p7", ""},
		{"two fields", "{env}.{service}", `{"env":"prod","service":"api"}`, "", "prod.api", ""},
		{"regex group", "logs-{level}", "ERROR disk full", "", "logs-ERROR", ""},
		{"regex group not matched", "logs-{level}", "lowercase line", "", "", "level"},
		{"optional group empty", "logs-{svc}", "ERROR ", "", "", "svc"},
		{"file.name", "logs-{file.name}", "x", "/var/log/nginx/access.log", "logs-access.log", ""},
		{"file.dir", "logs-{file.dir}", "x", "/var/log/nginx/access.log", "logs-nginx", ""},
		{"file part of stdin", "logs-{file.name}", "x", "", "", "file.name"},
		{"host", "{host}-logs", "x", "", "myhost-logs", ""},
		{"missing field", "logs-{service}", `{"other":"api"}`, "", "", "service"},
		{"null field", "logs-{service}", `{"service":null}`, "", "", "service"},
		{"empty field", "logs-{service}", `{"service":""}`, "", "", "service"},
		{"object field", "logs-{service}", `{"service":{"a":1}}`, "", "", "service"},
		{"plain line", "logs-{service}", "not json", "", "", "service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm, err := parseTemplate("topic", c.tmpl, re)
			if err != nil {
				t.Fatal(err)
			}
			var f lineFields
			f.reset([]byte(c.line))
			var s lineSource
			s.reset([]byte(c.line), c.path, &f)
			s.host, s.re = []byte("myhost"), re
			got, missing := tm.expand([]byte("keep:"), &s)
			if missing != c.missing {
				t.Fatalf("missing %q, want %q", missing, c.missing)
			}
			if want := "keep:" + c.want; string(got) != want {
				t.Fatalf("expanded %q, want %q", got, want)
			}
		})
	}
}

// topicNameProblem agrees with org.apache.kafka.common.internals.Topic.validate.
func TestTopicNameProblem(t *testing.T) {
	for _, c := range []struct {
		name  string
		legal bool
	}{
		{"logs-api", true}, {"a.b_c-D9", true}, {"...", true}, {strings.Repeat("a", 249), true},
		{"", false}, {".", false}, {"..", false}, {strings.Repeat("a", 250), false},
		{"logs api", false}, {"logs/api", false}, {"logs-é", false}, {"a:b", false},
	} {
		if got := topicNameProblem(c.name) == ""; got != c.legal {
			t.Errorf("topicNameProblem(%.20q): legal %v, want %v (%s)", c.name, got, c.legal, topicNameProblem(c.name))
		}
		if topicNameProblem([]byte(c.name)) != topicNameProblem(c.name) {
			t.Errorf("%q: []byte and string disagree", c.name)
		}
	}
}

func TestValidateRouting(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Config)
		key    string // "" for valid
		want   string
	}{
		{"plain topic", func(c *Config) {}, "", ""},
		{"template", func(c *Config) { c.Topic = "logs-{service}" }, "", ""},
		{"illegal plain topic", func(c *Config) { c.Topic = "logs api" }, "topic", "not a legal Kafka topic name"},
		{"illegal literal", func(c *Config) { c.Topic = "logs/{service}" }, "topic", "no topic name may hold"},
		{"unclosed", func(c *Config) { c.Topic = "logs-{service" }, "topic", "unclosed"},
		{"fallback template", func(c *Config) { c.Topic, c.FallbackTopic = "logs-{a}", "other-{b}" }, "fallback-topic", "plain topic name"},
		{"fallback illegal", func(c *Config) { c.Topic, c.FallbackTopic = "logs-{a}", "oth er" }, "fallback-topic", "not a legal"},
		{"max-topics zero", func(c *Config) { c.MaxTopics = 0 }, "max-topics", "from 1 to 10000"},
		{"max-topics too many", func(c *Config) { c.MaxTopics = 10001 }, "max-topics", "from 1 to 10000"},
		{"bad regex", func(c *Config) { c.ParseRegex = "(?P<a>" }, "parse-regex", "missing closing )"},
		{"regex without names", func(c *Config) { c.ParseRegex = "(a)" }, "parse-regex", "named group"},
		{"header without =", func(c *Config) { c.Header = []string{"env"} }, "header", "KEY=VALUE"},
		{"header empty key", func(c *Config) { c.Header = []string{"=x"} }, "header", "KEY=VALUE"},
		{"header bad template", func(c *Config) { c.Header = []string{"svc={service"} }, "header", "unclosed"},
		{"header ok", func(c *Config) { c.Header = []string{"env=prod", "svc={service}", "empty="} }, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Topic = "logs"
			c.mutate(&cfg)
			err := cfg.check()
			if c.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(ce.Reason, c.want) {
				t.Fatalf("Validate = %v, want a ConfigError on %s saying %q", err, c.key, c.want)
			}
		})
	}
}

// routedBuilder is a Builder as the agent builds it for cfg.
func routedBuilder(t testing.TB, mutate func(*Config)) *Builder {
	t.Helper()
	cfg := defaultConfig()
	cfg.Topic = "t"
	mutate(&cfg)
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	b := newRecordBuilder(&cfg)
	b.host = []byte("myhost")
	return b
}

func header(r *producer.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestRouteLines(t *testing.T) {
	for _, c := range []struct {
		name     string
		fallback string
		max      int
		lines    []string
		want     []string // topic per line, "!reason" for a failed line
		unrouted map[string]int64
	}{
		{"by field", "", 100,
			[]string{`{"service":"api"}`, `{"service":"web"}`, `{"service":"api"}`},
			[]string{"logs-api", "logs-web", "logs-api"}, map[string]int64{}},
		{"missing without fallback fails", "", 100,
			[]string{`{"service":"api"}`, `{"msg":"x"}`, "plain"},
			[]string{"logs-api", "!" + UnroutedMissing, "!" + UnroutedMissing}, map[string]int64{UnroutedMissing: 2}},
		{"missing with fallback", "other", 100,
			[]string{`{"msg":"x"}`, `{"service":"api"}`},
			[]string{"other", "logs-api"}, map[string]int64{UnroutedMissing: 1}},
		{"illegal name", "other", 100,
			[]string{`{"service":"a b"}`, `{"service":"` + strings.Repeat("x", 250) + `"}`},
			[]string{"other", "other"}, map[string]int64{UnroutedIllegalName: 2}},
		// The fallback topic does not count against max-topics, and a line whose template
		// names it goes there as routed.
		{"max-topics with fallback", "logs-other", 2,
			[]string{`{"service":"a"}`, `{"service":"other"}`, `{"service":"b"}`, `{"service":"c"}`, `{"service":"a"}`},
			[]string{"logs-a", "logs-other", "logs-b", "logs-other", "logs-a"}, map[string]int64{UnroutedMaxTopics: 1}},
		{"max-topics without fallback", "", 1,
			[]string{`{"service":"a"}`, `{"service":"b"}`, `{"service":"a"}`},
			[]string{"logs-a", "!" + UnroutedMaxTopics, "logs-a"}, map[string]int64{UnroutedMaxTopics: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := routedBuilder(t, func(cfg *Config) {
				cfg.Topic, cfg.FallbackTopic, cfg.MaxTopics = "logs-{service}", c.fallback, c.max
			})
			for i, line := range c.lines {
				r := b.build([]byte(line), "/var/log/app.log")
				if want, ok := strings.CutPrefix(c.want[i], "!"); ok {
					var re *RouteError
					if !errors.As(b.rs.err, &re) || re.reason != want {
						t.Fatalf("line %d: error %v, want a RouteError for %s", i, b.rs.err, want)
					}
					if !strings.Contains(re.Error(), "logs-{service}") || !strings.Contains(re.Error(), "--fallback-topic") {
						t.Errorf("error %q does not name the template and the way out", re)
					}
					continue
				}
				if b.rs.err != nil || r.Topic != c.want[i] {
					t.Fatalf("line %d: topic %q (err %v), want %q", i, r.Topic, b.rs.err, c.want[i])
				}
			}
			got := map[string]int64{}
			for i, reason := range unroutedReasons {
				if n := b.routing.router.unrouted[i].Load(); n > 0 {
					got[reason] = n
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.unrouted) {
				t.Errorf("unrouted %v, want %v", got, c.unrouted)
			}
			// The router holds at most max-topics template topics, and the fallback.
			if n := len(*b.routing.router.topics.Load()); n > c.max+1 {
				t.Errorf("%d topics known, max-topics %d", n, c.max)
			}
		})
	}
}

func TestHeaderTemplates(t *testing.T) {
	b := routedBuilder(t, func(cfg *Config) {
		cfg.ParseRegex = `level=(?P<level>\w+)`
		cfg.Header = []string{"env=prod", "service={service}", "where={host}:{file.name}", "level={level}", "empty="}
	})
	r := b.build([]byte(`{"service":"api","msg":"level=warn"}`), "/var/log/app.log")
	for k, want := range map[string]string{"env": "prod", "service": "api", "where": "myhost:app.log", "level": "warn", "empty": "",
		"source.path": "/var/log/app.log", "source.host": "myhost"} {
		if got, ok := header(r, k); !ok || got != want {
			t.Errorf("header %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	// A line without the field: that header is omitted, the others stay.
	r = b.build([]byte(`{"msg":"no service"}`), "")
	if v, ok := header(r, "service"); ok {
		t.Errorf("header service = %q on a line without the field, want it omitted", v)
	}
	if _, ok := header(r, "level"); ok {
		t.Error("header level present on a line the regex does not match")
	}
	if _, ok := header(r, "where"); ok {
		t.Error("header where present on a stdin line (no file.name)")
	}
	if v, _ := header(r, "env"); v != "prod" {
		t.Errorf("static header env = %q", v)
	}
	// The built-in headers can each be switched off.
	b = routedBuilder(t, func(cfg *Config) {
		cfg.HeaderPath, cfg.HeaderHost, cfg.TraceHeader = "", "", ""
		cfg.Header = []string{"env=prod"}
	})
	r = b.build([]byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`), "/var/log/app.log")
	if len(r.Headers) != 1 || r.Headers[0].Key != "env" {
		t.Errorf("headers %v, want only env", r.Headers)
	}
}

// Routing by a template allocates nothing per line for a topic already known: the expansion
// goes to the builder's buffer and the topic string is the router's. A JSON field costs nothing
// either (lineFields scans the line in place), for the topic, a header and the key alike.
func TestRouteAllocatesNothingPerLine(t *testing.T) {
	allocs := func(b *Builder, line string) float64 {
		l := []byte(line)
		b.build(l, "/var/log/nginx/access.log") // the topic becomes known
		return testing.AllocsPerRun(1000, func() { b.build(l, "/var/log/nginx/access.log") })
	}
	for _, c := range []struct {
		tmpl, line string
	}{
		{"logs-{file.dir}", "a plain line"},
		{"{host}.{file.name}", `{"service":"api"}`},
		{"logs-{service}", "a plain line, no JSON"},
		{"logs-{service}", `{"service":"api","msg":"x"}`},
		{"logs-{kubernetes.labels.app}", `{"kubernetes":{"labels":{"app":"web"}},"service":"api"}`},
	} {
		b := routedBuilder(t, func(cfg *Config) {
			cfg.Topic, cfg.FallbackTopic = c.tmpl, "other"
			cfg.Header = []string{"env=prod", "file={file.name}", "svc={service}"}
		})
		if got := allocs(b, c.line); got != 0 {
			t.Errorf("%s on %q: %v allocations per line, want 0", c.tmpl, c.line, got)
		}
	}
	line := `{"service":"api","msg":"x"}`
	key := routedBuilder(t, func(cfg *Config) { cfg.KeyField = "service" })
	routed := routedBuilder(t, func(cfg *Config) { cfg.KeyField, cfg.Topic = "service", "logs-{service}" })
	if k, r := allocs(key, line), allocs(routed, line); k != 0 || r != 0 {
		t.Errorf("key field: %v allocations per line, with a topic template %v; want 0", k, r)
	}
}

func BenchmarkRecordBuilder(b *testing.B) {
	for _, c := range []struct {
		name, topic, line string
		header            []string
	}{
		{"plain", "logs", `{"service":"api","msg":"a JSON line"}`, nil},
		{"template-field", "logs-{service}", `{"service":"api","msg":"a JSON line"}`, nil},
		{"template-file", "logs-{file.dir}", `{"service":"api","msg":"a JSON line"}`, nil},
		{"template-field-headers", "logs-{service}", `{"service":"api","msg":"a JSON line"}`, []string{"env=prod", "svc={service}"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rb := routedBuilder(b, func(cfg *Config) { cfg.Topic, cfg.Header = c.topic, c.header })
			l := []byte(c.line)
			b.ReportAllocs()
			for b.Loop() {
				rb.build(l, "/var/log/nginx/access.log")
			}
		})
	}
}

// FuzzTemplate compiles a template and expands it against a line: parsing never panics, an
// error is a ConfigError naming the key, and a compiled template expands any line without
// panicking to a value that starts with its first literal, or reports the part it lacks.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"logs-{service}", "{a.b.c}-{level}", "{host}.{file.name}.{file.dir}", "x{", "}", "{}", "{{a}}", "{file.x}", "a{ b }", "plain"} {
		f.Add(s, `{"service":"api","a":{"b":{"c":1}}}`, "/var/log/x/app.log")
	}
	f.Add("{level}", "ERROR x", "")
	re := regexp.MustCompile(`^(?P<level>[A-Z]+)`)
	f.Fuzz(func(t *testing.T, text, line, path string) {
		tm, err := parseTemplate("topic", text, re)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != "topic" {
				t.Fatalf("error %v is not a ConfigError on topic", err)
			}
			return
		}
		var fields lineFields
		fields.reset([]byte(line))
		var s lineSource
		s.reset([]byte(line), path, &fields)
		s.host, s.re = []byte("h"), re
		out, missing := tm.expand(nil, &s)
		if missing != "" {
			if len(out) != 0 {
				t.Fatalf("a missing part left %q", out)
			}
			return
		}
		if len(tm.parts) > 0 && tm.parts[0].kind == partLiteral && !strings.HasPrefix(string(out), tm.parts[0].text) {
			t.Fatalf("%q expanded to %q", text, out)
		}
		_ = topicNameProblem(out)
	})
}

// TestOnTopicHearsOfEachTemplateTopicOnce: Config.OnTopic is told of each topic the template
// names, once, with the template, before the line routed to it is built; not of the fallback,
// nor of a name beyond max-topics.
func TestOnTopicHearsOfEachTemplateTopicOnce(t *testing.T) {
	var heard []string
	b := routedBuilder(t, func(cfg *Config) {
		cfg.Topic, cfg.FallbackTopic, cfg.MaxTopics = "logs-{service}", "logs-other", 2
		cfg.OnTopic = func(topic, template string) { heard = append(heard, topic+"<-"+template) }
	})
	for _, line := range []string{`{"service":"a"}`, `{"service":"a"}`, `{"msg":"x"}`, `{"service":"b"}`, `{"service":"c"}`} {
		before := len(heard)
		r := b.build([]byte(line), "/var/log/app.log")
		if len(heard) > before && !strings.HasPrefix(heard[len(heard)-1], r.Topic+"<-") {
			t.Fatalf("line %s: heard %q, routed to %q", line, heard[len(heard)-1], r.Topic)
		}
	}
	if want := []string{"logs-a<-logs-{service}", "logs-b<-logs-{service}"}; !slices.Equal(heard, want) {
		t.Fatalf("OnTopic heard %v, want %v", heard, want)
	}
}
