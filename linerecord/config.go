// Package linerecord turns a line into a Kafka record: its topic (a name, or a template over
// the line's JSON fields, a --parse-regex's groups and where it came from), its key, its
// headers, its value (the line byte for byte, or a JSON envelope) and its times. One input's
// settings are a Config; Compile checks them once and gives the Rules every Builder of that
// input shares; a Builder, one per goroutine, builds a line's record without allocating.
package linerecord

import (
	"fmt"
	"regexp"
	"sync/atomic"
)

// Config is an input's settings for turning its lines into records: the agent's flags of the
// same names.
type Config struct {
	// Topic is a topic name or a template (logs-{service}); FallbackTopic takes the lines a
	// template cannot route, MaxTopics bounds the topics it may name, ParseRegex's named groups
	// are template parts.
	Topic         string
	FallbackTopic string
	MaxTopics     int
	ParseRegex    string
	// OnTopic, when set, hears of each topic the template names for the first time, with the
	// template (telemetry's messaging.destination.template), before the topic's first record
	// is built. It runs under the router's lock: it must be quick and must not route.
	OnTopic func(topic, template string)
	// The key: a template (Key), a JSON field (KeyField) or a regular expression's first group
	// (KeyRegex); at most one.
	Key, KeyField, KeyRegex string
	// Header are KEY=VALUE templates; HeaderPath, HeaderHost and TraceHeader name the headers
	// of the source path, the host name and the line's W3C trace context ("": none).
	Header                              []string
	HeaderPath, HeaderHost, TraceHeader string
	// HostName is the host name lines carry ("": none).
	HostName string
	// Format is FormatRaw, FormatJSON or FormatJSONMerge; TimestampField and TimestampLayout
	// give the line's own time.
	Format, TimestampField, TimestampLayout string
	// MaxRequestSize is the producer's max.request.size: a JSON envelope is cut to fit it.
	MaxRequestSize int
	// IncludeLines and ExcludeLines are regular expressions: a line is sent when it matches one
	// of IncludeLines (every line, when there are none) and none of ExcludeLines; Build leaves
	// the others out (Filtered). Redact's rules then rewrite the line, in order, before it is
	// routed, keyed and encoded: what they replace is in no part of the record.
	IncludeLines, ExcludeLines []string
	Redact                     []Redaction
}

// ConfigError names the configuration key that is wrong.
type ConfigError struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Reason }

// Validate reports every error of c through bad, under its key.
func (c *Config) Validate(bad func(key, format string, args ...any)) {
	if n := btoi(c.KeyField != "") + btoi(c.KeyRegex != "") + btoi(c.Key != ""); n > 1 {
		bad("key", "set one of key, key-field and key-regex, not %d", n)
	}
	if c.KeyRegex != "" {
		if re, err := regexp.Compile(c.KeyRegex); err != nil {
			bad("key-regex", "%v", err)
		} else if re.NumSubexp() < 1 {
			bad("key-regex", "needs a capture group: the key is the first group's match")
		}
	}
	_, errs := compileRouting(c)
	for _, err := range errs {
		bad(err.Key, "%s", err.Reason)
	}
	c.validateEncoding(bad)
	compileFilter(c, bad)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// IsTemplate reports whether a topic is a template: braces cannot be in a topic name, so a
// value without them is a plain name.
func IsTemplate(topic string) bool { return isTemplate(topic) }

// TopicNameProblem says why name is not a legal Kafka topic name, "" when it is one.
func TopicNameProblem(name string) string { return topicNameProblem(name) }

// Rules are an input's compiled settings, shared by its Builders: the templates, the topic
// router and its counts, and where the encoding counts what it fell back on.
type Rules struct {
	cfg      Config
	host     []byte
	routing  *routing     // nil: a plain topic and no --header
	plain    *topicCounts // a plain topic's line counts; nil with a template
	filter   *filter      // nil: no include-lines, exclude-lines or redact
	encoding *EncodingStats
	// Redacted counts the lines a redact rule changed.
	Redacted atomic.Int64
}

// Compile checks c and compiles it; its builders count the lines the format and the
// timestamp fell back on into stats (nil: counts of their own). Every error names its key.
func Compile(c Config, stats *EncodingStats) (*Rules, error) {
	var errs []error
	c.Validate(func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)})
	})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if stats == nil {
		stats = new(EncodingStats)
	}
	r := &Rules{cfg: c, encoding: stats}
	r.routing, _ = compileRouting(&c)
	r.filter = compileFilter(&c, func(string, string, ...any) {})
	if !r.Templated() {
		r.plain = &topicCounts{name: c.Topic}
	}
	if c.HostName != "" {
		r.host = []byte(c.HostName)
	}
	return r, nil
}

// Config returns the settings the rules were compiled from.
func (r *Rules) Config() Config { return r.cfg }

// Templated reports a topic template: a line's topic comes from the line.
func (r *Rules) Templated() bool { return r.routing != nil && r.routing.topic != nil }

// NewBuilder returns a builder of these rules, for one goroutine.
func (r *Rules) NewBuilder() *Builder {
	b := newBuilder(&r.cfg, r.host)
	b.enc.stats = r.encoding
	b.routing = r.routing
	b.filter, b.redacted = r.filter, &r.Redacted
	b.plain = r.plain
	return b
}
