package linerecord

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kafkatrail/kafkatrail/producer"
)

// routing is the compiled --topic template, --header templates and --parse-regex, shared by
// every Builder of an agent. nil when the topic is a plain name and no --header is set:
// then a line costs nothing more than before templates existed.
type routing struct {
	re      *regexp.Regexp // --parse-regex; nil: unset
	topic   *template      // nil: the topic is a plain name
	key     *template      // --key; nil: unset
	headers []headerTemplate
	router  *topicRouter // nil with a plain topic
}

// headerTemplate is one --header KEY=VALUE.
type headerTemplate struct {
	key      string
	value    *template
	isStatic bool   // the value takes nothing from the line
	static   []byte // the value when isStatic
}

// isTemplate reports whether a --topic value is a template: braces cannot be in a topic name,
// so a value without them is a plain name.
func isTemplate(topic string) bool { return strings.ContainsAny(topic, "{}") }

// compileRouting compiles the routing configuration, or says what is wrong with it. It runs at
// start (Validate and New each call it), never per line.
func compileRouting(c *Config) (*routing, []*ConfigError) {
	var errs []*ConfigError
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	asConfigError := func(err error) {
		var ce *ConfigError
		if !errors.As(err, &ce) {
			ce = &ConfigError{Key: "topic", Reason: err.Error()}
		}
		errs = append(errs, ce)
	}
	rt := &routing{}
	if c.ParseRegex != "" {
		re, err := regexp.Compile(c.ParseRegex)
		switch {
		case err != nil:
			bad("parse-regex", "%v", err)
		case !slices.ContainsFunc(re.SubexpNames(), func(n string) bool { return n != "" }):
			bad("parse-regex", "needs a named group, (?P<name>...), for a template to take as {name}")
		default:
			rt.re = re
		}
	}
	if c.MaxTopics < 1 || c.MaxTopics > maxMaxTopics {
		bad("max-topics", "must be from 1 to %d, got %d", maxMaxTopics, c.MaxTopics)
	}
	if c.FallbackTopic != "" {
		if isTemplate(c.FallbackTopic) {
			bad("fallback-topic", "must be a plain topic name, not a template: it is where lines go that a template could not route")
		} else if p := topicNameProblem(c.FallbackTopic); p != "" {
			bad("fallback-topic", "%q is not a legal Kafka topic name: %s", c.FallbackTopic, p)
		}
	}
	switch {
	case c.Topic == "": // Validate says it is required
	case !isTemplate(c.Topic):
		if p := topicNameProblem(c.Topic); p != "" {
			bad("topic", "%q is not a legal Kafka topic name: %s", c.Topic, p)
		}
	default:
		t, err := parseTemplate("topic", c.Topic, rt.re)
		if err != nil {
			asConfigError(err)
			break
		}
		for _, p := range t.parts {
			if p.kind == partLiteral && strings.IndexFunc(p.text, func(r rune) bool { return r > 0x7f || !legalTopicChar(byte(r)) }) >= 0 {
				bad("topic", "template %q: its text %q has characters no topic name may hold (ASCII alphanumerics, '.', '_' and '-' only)", c.Topic, p.text)
			}
		}
		rt.topic = t
	}
	if c.Key != "" {
		t, err := parseTemplate("key", c.Key, rt.re)
		if err != nil {
			asConfigError(err)
		}
		rt.key = t
	}
	for _, h := range c.Header {
		key, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(key) == "" {
			bad("header", "want KEY=VALUE, got %q", h)
			continue
		}
		t, err := parseTemplate("header", value, rt.re)
		if err != nil {
			asConfigError(err)
			continue
		}
		ht := headerTemplate{key: key, value: t, isStatic: t.static()}
		if ht.isStatic {
			ht.static = []byte(value)
		}
		rt.headers = append(rt.headers, ht)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if rt.topic == nil && rt.key == nil && len(rt.headers) == 0 {
		return nil, nil
	}
	if rt.topic != nil {
		rt.router = newTopicRouter(c.FallbackTopic, c.MaxTopics)
		rt.router.onTopic = c.OnTopic
	}
	return rt, nil
}

// maxMaxTopics bounds --max-topics: the router copies its map of topics to add one, which is
// cheap for the hundreds of topics one agent can sensibly name, not for a field that names a
// new one every line.
const maxMaxTopics = 10000

// routeState is a Builder's routing state for the line it built last.
type routeState struct {
	src    lineSource
	buf    []byte   // expanded topic name, then header values
	spans  [][2]int // header value bounds in buf, one per --header ({-1, -1}: static or omitted)
	counts *topicCounts
	err    error // the line could not be routed: it fails alone with this error
}

// route sets r's topic from the topic template and its key from the --key template, and appends
// the --header headers of line (read from path) to hdrs. A header whose template lacks a value
// in this line is omitted; a key that does is nil.
func (b *Builder) route(r *producer.Record, line []byte, path string, hdrs []producer.Header) []producer.Header {
	rt, s := b.routing, &b.rs
	s.src.reset(line, path, &b.fields)
	s.src.host, s.src.re = b.host, rt.re
	s.src.pod, s.src.stream = b.pod, b.stream
	s.counts, s.err = nil, nil
	s.buf = s.buf[:0]
	if rt.topic != nil {
		name, missing := rt.topic.expand(s.buf, &s.src)
		s.counts, s.err = rt.router.route(rt.topic, name, missing)
		if s.counts != nil {
			r.Topic = s.counts.name
		}
		s.buf = name[:0]
	}
	// Values first (the key's, then the headers'), then the slices of them: buf may move
	// while it grows.
	keySpan := [2]int{-1, -1}
	if rt.key != nil {
		var missing string
		if s.buf, missing = rt.key.expand(s.buf, &s.src); missing == "" {
			keySpan = [2]int{0, len(s.buf)}
		}
	}
	s.spans = s.spans[:0]
	for i := range rt.headers {
		h := &rt.headers[i]
		sp := [2]int{-1, -1}
		if !h.isStatic {
			start := len(s.buf)
			var missing string
			if s.buf, missing = h.value.expand(s.buf, &s.src); missing == "" {
				sp = [2]int{start, len(s.buf)}
			}
		}
		s.spans = append(s.spans, sp)
	}
	for i := range rt.headers {
		h := &rt.headers[i]
		switch sp := s.spans[i]; {
		case h.isStatic:
			hdrs = append(hdrs, producer.Header{Key: h.key, Value: h.static})
		case sp[0] >= 0:
			hdrs = append(hdrs, producer.Header{Key: h.key, Value: s.buf[sp[0]:sp[1]:sp[1]]})
		}
	}
	if keySpan[0] >= 0 {
		r.Key = s.buf[keySpan[0]:keySpan[1]:keySpan[1]]
	}
	return hdrs
}

// Why a line's topic template gave no topic: the values of kafkatrail.reason on
// kafkatrail.agent.lines.unrouted, and the keys of Agent.UnroutedLines.
const (
	UnroutedMissing     = "missing"      // the line has no value for a part of the template
	UnroutedIllegalName = "illegal_name" // the expanded name is not a legal Kafka topic name
	UnroutedMaxTopics   = "max_topics"   // the name would be one topic more than --max-topics
)

// unroutedReasons are the reasons by index in topicRouter.unrouted.
var unroutedReasons = [...]string{reasonMissing: UnroutedMissing, reasonIllegalName: UnroutedIllegalName, reasonMaxTopics: UnroutedMaxTopics}

const (
	reasonMissing = iota
	reasonIllegalName
	reasonMaxTopics
)

// topicRouter bounds and counts the topics a template routes lines to. It is shared by every
// Builder: the map of known topics is copied on write (a new topic is rare and there are
// at most max-topics of them), so routing a line to a known topic takes no lock.
type topicRouter struct {
	fallback  *topicCounts // nil: a line that cannot be routed fails
	maxTopics int
	onTopic   func(topic, template string) // Config.OnTopic; may be nil

	topics atomic.Pointer[map[string]*topicCounts] // every topic routed to, the fallback too
	full   atomic.Bool                             // max-topics template topics are known
	mu     sync.Mutex                              // held to add a topic
	n      int                                     // template topics, under mu (the fallback not counted)

	unrouted [len(unroutedReasons)]atomic.Int64
}

// topicCounts are one topic's line counts. The record's topic string is name, so that a line
// routed to a known topic allocates nothing.
type topicCounts struct {
	name                              string
	sent, acked, failed, deadLettered atomic.Int64
}

func (tc *topicCounts) stats() TopicStats {
	return TopicStats{Topic: tc.name, LinesSent: tc.sent.Load(), LinesAcked: tc.acked.Load(), LinesFailed: tc.failed.Load(),
		LinesDeadLettered: tc.deadLettered.Load()}
}

func newTopicRouter(fallback string, maxTopics int) *topicRouter {
	r := &topicRouter{maxTopics: maxTopics}
	m := map[string]*topicCounts{}
	if fallback != "" {
		r.fallback = &topicCounts{name: fallback}
		m[fallback] = r.fallback
	}
	r.topics.Store(&m)
	return r
}

// lookup returns the counts of a known topic, nil if name is not one. The map index converts
// name without allocating.
func (r *topicRouter) lookup(name []byte) *topicCounts { return (*r.topics.Load())[string(name)] }

// counts returns the counts of a known topic (a record's md.Topic), nil if topic is not one.
func (r *topicRouter) counts(topic string) *topicCounts { return (*r.topics.Load())[topic] }

// route returns the topic for a line whose template t expanded to name (missing: the name of
// the part the line lacks). A line that gets no topic of its own goes to the fallback topic,
// or, without one, gets a *RouteError; either way it is counted under its reason.
func (r *topicRouter) route(t *template, name []byte, missing string) (*topicCounts, error) {
	var reason int
	var detail string
	switch {
	case missing != "":
		reason, detail = reasonMissing, missing
	default:
		if tc := r.lookup(name); tc != nil {
			return tc, nil
		}
		if p := topicNameProblem(name); p != "" {
			reason, detail = reasonIllegalName, p
		} else if tc := r.add(name, t.text); tc != nil {
			return tc, nil
		} else {
			reason = reasonMaxTopics
		}
	}
	r.unrouted[reason].Add(1)
	if r.fallback != nil {
		return r.fallback, nil
	}
	return nil, &RouteError{template: t.text, reason: unroutedReasons[reason], name: string(name), detail: detail, maxTopics: r.maxTopics}
}

// add makes name, from template, a known topic, unless max-topics are known already (nil).
func (r *topicRouter) add(name []byte, template string) *topicCounts {
	if r.full.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.topics.Load()
	if tc := old[string(name)]; tc != nil {
		return tc // another goroutine added it
	}
	if r.n >= r.maxTopics {
		r.full.Store(true)
		return nil
	}
	tc := &topicCounts{name: string(name)}
	m := make(map[string]*topicCounts, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[tc.name] = tc
	if r.onTopic != nil {
		r.onTopic(tc.name, template) // before any line can be routed to it
	}
	r.topics.Store(&m)
	r.n++
	return tc
}

// RouteError is the error of a line that its topic template could not route and that has no
// fallback topic to go to (Builder.Build's): it reaches the line's callback, which fails the
// line alone.
type RouteError struct {
	template, reason, name, detail string
	maxTopics                      int
}

func (e *RouteError) Error() string {
	const hint = " (set --fallback-topic to send such lines there)"
	switch e.reason {
	case UnroutedMissing:
		return fmt.Sprintf("topic template %q: the line has no value for {%s}%s", e.template, e.detail, hint)
	case UnroutedIllegalName:
		return fmt.Sprintf("topic template %q gave %q, not a legal Kafka topic name: %s%s", e.template, e.name, e.detail, hint)
	default:
		return fmt.Sprintf("topic template %q gave %q, a topic beyond max-topics (%d)%s", e.template, e.name, e.maxTopics, hint)
	}
}

// TopicStats are the line counts of one topic an input sends to.
type TopicStats struct {
	Topic string
	// LinesSent are lines routed to the topic and handed to the producer (once each, however
	// often they were sent again); LinesAcked those Kafka acknowledged (with --exactly-once:
	// whose transaction committed), LinesFailed those lost, LinesDeadLettered those it refused
	// for good and a dead-letter destination kept.
	LinesSent, LinesAcked, LinesFailed, LinesDeadLettered int64
}

// InFlight is the lines sent that have no outcome yet.
func (s TopicStats) InFlight() int64 {
	return max(s.LinesSent-s.LinesAcked-s.LinesFailed-s.LinesDeadLettered, 0)
}

// TopicStats returns the line counts of every topic lines were routed to, sorted by topic: a
// plain topic's, or every topic the template named (the fallback topic included once
// configured). Safe for concurrent use.
func (r *Rules) TopicStats() []TopicStats {
	if tc := r.plain; tc != nil {
		return []TopicStats{tc.stats()}
	}
	m := *r.routing.router.topics.Load()
	out := make([]TopicStats, 0, len(m))
	for _, tc := range m {
		out = append(out, tc.stats())
	}
	slices.SortFunc(out, func(x, y TopicStats) int { return strings.Compare(x.Topic, y.Topic) })
	return out
}

// UnroutedLines counts the lines whose topic template gave no topic of their own, by reason
// (UnroutedMissing, ...): they went to the fallback topic, or failed without one. nil without
// a topic template. Safe for concurrent use.
func (r *Rules) UnroutedLines() map[string]int64 {
	if !r.Templated() {
		return nil
	}
	out := make(map[string]int64, len(unroutedReasons))
	for i, reason := range unroutedReasons {
		out[reason] = r.routing.router.unrouted[i].Load()
	}
	return out
}

// Line outcomes, for Rules.CountOutcome.
const (
	OutcomeAcked        = iota // Kafka acknowledged the line (with --exactly-once: its transaction committed)
	OutcomeFailed              // the line is lost
	OutcomeDeadLettered        // refused for good, kept in a dead-letter destination
)

// CountOutcome counts n lines of topic (a record's md.Topic) as ending with outcome.
func (r *Rules) CountOutcome(topic string, outcome int, n int64) {
	tc := r.plain
	if r.Templated() {
		tc = r.routing.router.counts(topic)
	}
	if tc == nil || tc.name != topic {
		return
	}
	switch outcome {
	case OutcomeAcked:
		tc.acked.Add(n)
	case OutcomeFailed:
		tc.failed.Add(n)
	case OutcomeDeadLettered:
		tc.deadLettered.Add(n)
	}
}

// UnroutedMetadata is the callback's metadata of a line that got no topic (Build's error).
func UnroutedMetadata(r *producer.Record) producer.RecordMetadata {
	md := producer.RecordMetadata{Partition: producer.PartitionAny, Offset: -1, Tag: r.Tag,
		SerializedKeySize: -1, SerializedValueSize: len(r.Value)}
	if r.Key != nil {
		md.SerializedKeySize = len(r.Key)
	}
	md.Record = &producer.FailedRecord{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
	return md
}
