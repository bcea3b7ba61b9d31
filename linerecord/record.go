package linerecord

import (
	"bytes"
	"encoding/hex"
	"regexp"
	"sync/atomic"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/producer"
)

// Builder turns a line into a producer.Record: the line is the value, the key comes from
// a JSON field or a regex group (or none: sticky partitioning), headers carry the source path,
// the host and, when the line has one, its W3C trace context. Rules.NewBuilder makes one.
//
// A builder is used by one goroutine and reuses its record and header slice from line to line:
// producer.Send encodes the record into its batch before it returns, so nothing is retained.
type Builder struct {
	topic       string
	keyField    string
	keyRegex    *regexp.Regexp
	headerPath  string
	headerHost  string
	traceHeader string
	host        []byte

	// path and pathBytes cache the last source path as bytes, so a header costs no
	// allocation per line; pod is its container's metadata (nil: not a container log).
	path      string
	pathBytes []byte
	pod       *podMeta
	// stream is the stream the line being built was written to (buildLine sets it).
	stream filetail.Stream

	filter    *filter       // nil: none
	plain     *topicCounts  // the Rules' counts of a plain topic (nil: a template's router counts)
	redactBuf [2][]byte     // the redacted line, and the rule before's
	redacted  *atomic.Int64 // the Rules' count of redacted lines
	fields    lineFields
	enc       encoder    // --format and --timestamp-field: envelope.go
	routing   *routing   // nil: a plain topic and no --header
	rs        routeState // routing's state for the last line
	rec       producer.Record
	headers   []producer.Header
	// lineTrace is the W3C trace context the last built line carried, nil if none.
	lineTrace []byte
	trace     [55]byte // "00-" 32 hex "-" 16 hex "-" 2 hex
}

func newBuilder(c *Config, host []byte) *Builder {
	b := &Builder{
		topic:       c.Topic,
		keyField:    c.KeyField,
		headerPath:  c.HeaderPath,
		headerHost:  c.HeaderHost,
		traceHeader: c.TraceHeader,
	}
	if c.KeyRegex != "" {
		b.keyRegex = regexp.MustCompile(c.KeyRegex) // validated in Config.Validate
	}
	b.host = host
	b.enc = newEncoder(c, b.host)
	return b
}

// build fills the builder's record for line read from path ("" for stdin) and returns it.
// The record aliases line and the builder's buffers: valid until the next build.
func (b *Builder) build(line []byte, path string) *producer.Record {
	if path != b.path {
		b.path, b.pathBytes = path, []byte(path)
		b.pod = pods.of(path)
	}
	r := &b.rec
	*r = producer.Record{Topic: b.topic, Partition: producer.PartitionAny, Value: line}
	b.headers = b.headers[:0]
	b.lineTrace = nil
	if b.headerPath != "" && path != "" {
		b.headers = append(b.headers, producer.Header{Key: b.headerPath, Value: b.pathBytes})
	}
	if b.headerHost != "" && len(b.host) > 0 {
		b.headers = append(b.headers, producer.Header{Key: b.headerHost, Value: b.host})
	}
	b.fields.reset(line)
	if b.routing != nil {
		b.headers = b.route(r, line, path, b.headers)
	}
	switch {
	case b.keyField != "":
		r.Key, _ = b.fields.scalar(b.keyField)
	case b.keyRegex != nil:
		if m := b.keyRegex.FindSubmatchIndex(line); m != nil && m[2] >= 0 {
			r.Key = line[m[2]:m[3]]
		}
	}
	if b.mayCarryTrace(line) {
		// Only lines that mention a trace context are parsed for one.
		if tp := b.traceparent(&b.fields); tp != nil {
			b.headers = append(b.headers, producer.Header{Key: b.traceHeader, Value: tp})
			b.lineTrace = tp
		}
	}
	r.Headers = b.headers
	return r
}

// LineTrace is the W3C trace context (a traceparent) the last line built carried, nil if
// none: the record's trace header holds it.
func (b *Builder) LineTrace() []byte { return b.lineTrace }

// TimestampFellBack reports that the last line built had no usable timestamp field (missing,
// or not in the layout), and the field's value, if any.
func (b *Builder) TimestampFellBack() (value []byte, fellBack bool) {
	if !b.enc.timeFellBack {
		return nil, false
	}
	v, _ := b.fields.get(b.enc.tsField)
	return v, true
}

// CountSent counts the last line built as sent to its topic (Rules.TopicStats), once it is
// handed to the producer.
func (b *Builder) CountSent() {
	if tc := b.rs.counts; tc != nil {
		tc.sent.Add(1)
	}
}

// mayCarryTrace reports whether line names a "traceparent" or "trace_id" field: one pass for
// their common prefix, where a search for each would read every line twice.
func (b *Builder) mayCarryTrace(line []byte) bool {
	if b.traceHeader == "" {
		return false
	}
	for {
		i := bytes.Index(line, []byte(`"trace`))
		if i < 0 {
			return false
		}
		line = line[i+len(`"trace`):]
		if bytes.HasPrefix(line, []byte(`parent"`)) || bytes.HasPrefix(line, []byte(`_id"`)) {
			return true
		}
	}
}

// traceparent returns the line's W3C trace context: its "traceparent" field when valid, else
// one built from "trace_id" (32 hex) and "span_id" (16 hex) fields, sampled.
func (b *Builder) traceparent(fields *lineFields) []byte {
	if tp, _ := fields.scalar("traceparent"); validTraceparent(tp) {
		return tp
	}
	tid, _ := fields.scalar("trace_id")
	sid, _ := fields.scalar("span_id")
	if len(tid) != 32 || len(sid) != 16 || !isHex(tid) || !isHex(sid) || allZero(tid) || allZero(sid) {
		return nil
	}
	n := copy(b.trace[:], "00-")
	n += copy(b.trace[n:], bytes.ToLower(tid))
	n += copy(b.trace[n:], "-")
	n += copy(b.trace[n:], bytes.ToLower(sid))
	n += copy(b.trace[n:], "-01")
	return b.trace[:n]
}

// validTraceparent checks the W3C version-00 form: 00-<32 hex>-<16 hex>-<2 hex>, ids not zero.
func validTraceparent(tp []byte) bool {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	return isHex(tp[:2]) && isHex(tp[3:35]) && isHex(tp[36:52]) && isHex(tp[53:]) &&
		!allZero(tp[3:35]) && !allZero(tp[36:52])
}

func isHex(b []byte) bool {
	dst := make([]byte, 0, 32)
	_, err := hex.AppendDecode(dst, b)
	return err == nil && len(b)%2 == 0
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}
