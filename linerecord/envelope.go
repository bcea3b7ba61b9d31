package linerecord

import (
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/jsonscan"
	"github.com/kafkatrail/kafkatrail/producer"
)

// The values of --format.
const (
	// FormatRaw sends the line as the record's value, byte for byte.
	FormatRaw = "raw"
	// FormatJSON sends a JSON envelope: the line is its "message".
	FormatJSON = "json"
	// FormatJSONMerge sends a line that is a JSON object with the envelope's fields added, and
	// any other line as FormatJSON does.
	FormatJSONMerge = "json-merge"
)

// The envelope's field names, from the Elastic Common Schema, written as dotted keys (ECS's
// own JSON logging libraries do the same; Elasticsearch expands them into objects). stdin has
// no file path: its lines say where they came from with Filebeat's name, input.type "stdin".
const (
	fieldTimestamp = "@timestamp"
	fieldMessage   = "message"
	fieldHost      = "host.name"
	fieldPath      = "log.file.path"
	fieldInput     = "input.type"
	fieldOffset    = "log.offset"
	fieldFlags     = "log.flags"
)

// envelopeRoomBytes is how much of the room MaxLineBytesFor leaves under max.request.size an
// envelope's value may take beyond the line: a JSON envelope's value is at most max.request.size
// less the other half of the room, which still holds the batch's framing, the headers and the key.
// Escaping can make a message up to six times the line (a control byte becomes \u00XX), so an
// envelope is bounded by this, not by the line's length: see encoder.envelope.
const envelopeRoomBytes = filetail.LineHeadroomBytes / 2

// EncodingStats counts what --format and --timestamp-field did to lines instead of failing
// them. Safe for concurrent use.
type EncodingStats struct {
	// TimestampFallbacks counts lines that got the read time because their --timestamp-field
	// was missing or did not parse in --timestamp-layout.
	TimestampFallbacks atomic.Int64
	// MergeFallbacks counts json-merge lines that were not a JSON object: they went as the
	// json envelope.
	MergeFallbacks atomic.Int64
	// MessagesCut counts envelopes whose message was cut to fit max.request.size (flagged
	// log.flags ["truncated"]).
	MessagesCut atomic.Int64
}

// encoder turns a built record's value into the configured format and sets its CreateTime.
// It belongs to one Builder and appends into its own reused buffer: an envelope costs
// no allocation per line once the buffer has grown (to at most limit bytes).
type encoder struct {
	format   string
	tsField  string
	tsLayout timestampLayout
	limit    int // the largest envelope value
	now      func() time.Time
	stats    *EncodingStats

	// timeFellBack says the last line's --timestamp-field was missing or did not parse.
	timeFellBack bool

	// tsText is @timestamp's text for the millisecond tsMilli (tsSet: it holds one): lines
	// read in the same millisecond, most of them at full speed, share one formatting.
	tsText  [len("2006-01-02T15:04:05.000Z")]byte
	tsMilli int64
	tsSet   bool

	host     []byte // host.name, JSON-escaped, quoted; nil: no host name
	path     string // the last source path, and pathJSON its JSON string
	pathJSON []byte
	buf      []byte
}

// newEncoder returns the encoder of c; it counts into stats of its own until its Rules give it
// theirs.
func newEncoder(c *Config, host []byte) encoder {
	e := encoder{format: c.Format, tsField: c.TimestampField, now: time.Now, stats: new(EncodingStats)}
	if e.format == "" {
		e.format = FormatRaw
	}
	e.tsLayout, _ = parseTimestampLayout(c.TimestampLayout) // validated in Config.Validate
	e.limit = max(c.MaxRequestSize-envelopeRoomBytes, filetail.MinMaxLineBytes)
	if len(host) > 0 {
		e.host, _ = appendJSONString(nil, host, -1)
	}
	return e
}

// validateEncoding checks --format, --timestamp-field and --timestamp-layout.
func (c *Config) validateEncoding(bad func(key, format string, args ...any)) {
	switch c.Format {
	case "", FormatRaw, FormatJSON, FormatJSONMerge: // "": a Config not from DefaultConfig
	default:
		bad("format", "must be raw, json or json-merge, got %q", c.Format)
	}
	if _, err := parseTimestampLayout(c.TimestampLayout); err != nil {
		bad("timestamp-layout", "%v", err)
	}
	if c.TimestampField != "" && (c.TimestampField[0] == '.' || c.TimestampField[len(c.TimestampField)-1] == '.') {
		bad("timestamp-field", "%q is not a field path (names joined by dots)", c.TimestampField)
	}
}

// Build fills the builder's record for line l read from path ("" for stdin) and returns it:
// the input's filters (a line they leave out comes back as a nil record and a *Filtered) and
// redact rules, then build, then the encoding (the record's CreateTime, the line's own time from the timestamp
// field, else the read time; and, unless raw, its value in the envelope). The record aliases
// the line and the builder's buffers: valid until the next Build. A line its topic template
// could not route (and that has no fallback topic) comes with the error it fails with, alone.
func (b *Builder) Build(l filetail.Line, path string) (*producer.Record, error) {
	if f := b.filter; f != nil {
		if left := f.keep(l.Data); left != nil {
			return nil, left
		}
		if len(f.redact) > 0 {
			var changed bool
			if l.Data, changed = f.redactLine(l.Data, &b.redactBuf); changed {
				b.redacted.Add(1)
			}
		}
	}
	b.stream = l.Stream
	r := b.build(l.Data, path)
	if b.plain != nil {
		b.rs.counts = b.plain
	}
	b.enc.encode(r, &b.fields, l, path, b.pod)
	return r, b.rs.err
}

// keptBufferBytes is the largest envelope buffer a builder keeps from one line to the next: a
// long line's envelope (up to max.request.size) is not held by every pooled builder after it.
const keptBufferBytes = 64 << 10

// encode sets r's timestamp, written time and value for line l (fields is the line's JSON view,
// pod its container's metadata, nil if it is not a container's).
func (e *encoder) encode(r *producer.Record, fields *lineFields, l filetail.Line, path string, pod *podMeta) {
	if cap(e.buf) > keptBufferBytes {
		e.buf = nil // the last line's value was sent (Send copies it)
	}
	var ts time.Time
	if e.tsField != "" {
		if v, ok := fields.scalar(e.tsField); ok {
			ts, ok = e.tsLayout.parse(v)
			if !ok || ts.UnixMilli() < 0 {
				// Before 1970 is no CreateTime: the Java client refuses it too
				// (ProducerRecord: "Timestamp should always be non-negative or null").
				ts = time.Time{}
			}
		}
		e.timeFellBack = ts.IsZero()
		if e.timeFellBack {
			e.stats.TimestampFallbacks.Add(1)
		}
	}
	if ts.IsZero() && l.Time > 0 {
		// A container's line: the runtime's time of it (its first piece's).
		ts = time.Unix(0, l.Time)
	}
	// The record's read stage and age start when the line was written: its own time, else
	// what its reader knew (the file's modification time, stdin's read).
	switch {
	case !ts.IsZero():
		r.Written = ts
	case l.Written != 0:
		r.Written = time.Unix(0, l.Written)
	default:
		r.Written = time.Time{}
	}
	if e.format == FormatRaw {
		// Zero: the producer stamps the send time, as without this feature (KafkaProducer.doSend:
		// record.timestamp() == null ? nowMs : record.timestamp()).
		r.Timestamp = ts
		return
	}
	if ts.IsZero() {
		ts = e.now()
	}
	// Kafka's CreateTime has milliseconds: @timestamp shows the same instant, truncated alike.
	ts = ts.Truncate(time.Millisecond)
	r.Timestamp = ts
	if path != e.path {
		e.path = path
		e.pathJSON, _ = appendJSONString(e.pathJSON[:0], []byte(path), -1)
	}
	if e.format == FormatJSONMerge {
		if fields.isObject() {
			r.Value = e.merge(l, fields, ts, pod)
			return
		}
		e.stats.MergeFallbacks.Add(1)
	}
	r.Value = e.envelope(l, ts, path, pod)
}

// envelope returns l as the JSON envelope:
//
//	{"@timestamp":"2026-12-01T16:09:20.123Z","message":"…","host.name":"…","log.file.path":"…","log.offset":0}
//
// A message whose escaping would make the value larger than e.limit is cut (at a character)
// so that the record still fits max.request.size, and flagged log.flags ["truncated"], as a
// long-lines=truncate line is.
func (e *encoder) envelope(l filetail.Line, ts time.Time, path string, pod *podMeta) []byte {
	b := append(e.buf[:0], `{"`+fieldTimestamp+`":"`...)
	b = e.appendTimestamp(b, ts)
	b = append(b, `","`+fieldMessage+`":`...)
	// What follows the message takes at most this much.
	tail := len(`,"`+fieldHost+`":`) + len(e.host) + len(`,"`+fieldPath+`":`) + len(e.pathJSON) +
		len(`,"`+fieldInput+`":"stdin"`) + len(`,"`+fieldOffset+`":`) + 20 + len(`,"`+fieldFlags+`":["truncated"]}`) +
		len(`,"`+fieldStream+`":"stdout"`)
	if pod != nil {
		tail += len(pod.envelope)
	}
	b, cut := appendJSONString(b, l.Data, e.limit-len(b)-tail)
	if len(e.host) > 0 {
		b = append(b, `,"`+fieldHost+`":`...)
		b = append(b, e.host...)
	}
	if path != "" {
		b = append(b, `,"`+fieldPath+`":`...)
		b = append(b, e.pathJSON...)
	} else {
		b = append(b, `,"`+fieldInput+`":"stdin"`...)
	}
	b = append(b, `,"`+fieldOffset+`":`...)
	b = strconv.AppendInt(b, l.Start, 10)
	if pod != nil {
		b = append(b, pod.envelope...)
	}
	if l.Stream != filetail.StreamUnknown {
		b = append(b, `,"`+fieldStream+`":"`...)
		b = append(b, streamNames[l.Stream]...)
		b = append(b, '"')
	}
	if cut {
		e.stats.MessagesCut.Add(1)
	}
	if cut || l.Truncated {
		b = append(b, `,"`+fieldFlags+`":["truncated"]`...)
	}
	b = append(b, '}')
	e.buf = b
	return b
}

// merge returns line, a JSON object, with the envelope's fields that it does not have spliced
// in before its closing brace: the line's own bytes, key order and spacing stay as they are,
// and a field the line already has (at the same dotted path, nested or as one key) is left
// alone: the line's own value wins and no key is written twice. The message is the line itself,
// so there is none.
func (e *encoder) merge(l filetail.Line, fields *lineFields, ts time.Time, pod *podMeta) []byte {
	line := l.Data
	end := len(line)
	for end > 0 && jsonscan.IsSpace(line[end-1]) {
		end--
	}
	end-- // the closing brace: the line parsed as an object
	b := append(e.buf[:0], line[:end]...)
	sep := fields.hasFields()
	add := func(name string) bool {
		if _, has := fields.get(name); has {
			return false
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		return true
	}
	if add(fieldTimestamp) {
		b = append(b, '"')
		b = e.appendTimestamp(b, ts)
		b = append(b, '"')
	}
	if len(e.host) > 0 && add(fieldHost) {
		b = append(b, e.host...)
	}
	if e.path != "" {
		if add(fieldPath) {
			b = append(b, e.pathJSON...)
		}
	} else if add(fieldInput) {
		b = append(b, `"stdin"`...)
	}
	if add(fieldOffset) {
		b = strconv.AppendInt(b, l.Start, 10)
	}
	if pod != nil {
		for _, f := range pod.envelopeFields() {
			if len(f.value) > 0 && add(f.name) {
				b, _ = appendJSONString(b, f.value, -1)
			}
		}
	}
	if l.Stream != filetail.StreamUnknown && add(fieldStream) {
		b = append(b, '"')
		b = append(b, streamNames[l.Stream]...)
		b = append(b, '"')
	}
	if l.Truncated && add(fieldFlags) {
		b = append(b, `["truncated"]`...)
	}
	b = append(b, line[end:]...)
	e.buf = b
	return b
}

// appendTimestamp appends ts (whole milliseconds) as @timestamp writes it: RFC 3339 in UTC
// with milliseconds.
func (e *encoder) appendTimestamp(dst []byte, ts time.Time) []byte {
	ms := ts.UnixMilli()
	if e.tsSet && ms == e.tsMilli {
		return append(dst, e.tsText[:]...)
	}
	n := len(dst)
	dst = ts.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	// A year past 9999 is longer: it is not kept, and is formatted every time.
	if e.tsSet = copy(e.tsText[:], dst[n:]) == len(dst)-n; e.tsSet {
		e.tsMilli = ms
	}
	return dst
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, written \ufffd,
// as encoding/json does; control characters, U+2028 and U+2029 are escaped as encoding/json
// escapes them, '<', '>' and '&' are not (the value is not HTML). With room >= 0 it writes at
// most room bytes, quotes included, and stops at a character boundary: cut reports that s did
// not fit.
func appendJSONString(dst, s []byte, room int) (out []byte, cut bool) {
	const hex = "0123456789abcdef"
	limit := -1
	if room >= 0 {
		limit = len(dst) + room - 1 // the closing quote
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		// The run of bytes that stand for themselves goes in one append.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' && s[j] < utf8.RuneSelf {
			j++
		}
		if j > i {
			if limit >= 0 && len(dst)+(j-i) > limit {
				// ASCII: any byte is a character boundary.
				dst = append(dst, s[i:i+max(limit-len(dst), 0)]...)
				return append(dst, '"'), true
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		var esc [6]byte
		var unit []byte
		c := s[i]
		n := 1
		switch {
		case c == '"' || c == '\\':
			esc[0], esc[1] = '\\', c
			unit = esc[:2]
		case c == '\n':
			unit = append(esc[:0], `\n`...)
		case c == '\r':
			unit = append(esc[:0], `\r`...)
		case c == '\t':
			unit = append(esc[:0], `\t`...)
		case c < 0x20:
			unit = append(esc[:0], '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			r, size := utf8.DecodeRune(s[i:])
			n = size
			switch {
			case r == utf8.RuneError && size == 1:
				unit = append(esc[:0], `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				unit = append(esc[:0], '\\', 'u', '2', '0', '2', hex[r&0xf])
			default:
				unit = s[i : i+size]
			}
		}
		if limit >= 0 && len(dst)+len(unit) > limit {
			return append(dst, '"'), true
		}
		dst = append(dst, unit...)
		i += n
	}
	return append(dst, '"'), false
}
