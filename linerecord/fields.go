package linerecord

import (
	"bytes"
	"unicode/utf8"

	"github.com/kafkatrail/kafkatrail/internal/jsonscan"
)

// lineFields is the JSON view of one line, for everything that takes a field of it (the key,
// topic and header templates, the timestamp, a trace context, json-merge). A plain line or a
// configuration that asks for no field costs nothing: the line is looked at only on the first
// lookup, and only if it begins with '{'.
//
// A path is a field name, or names joined by dots for nested objects: "service" or
// "kubernetes.labels.app". A key that itself contains dots (ECS writes "log.level" as one key) is
// found as written first, then the path is tried as nesting from its shortest prefix on.
//
// It is a scanner over the line's bytes, not a decoder, so that a field costs a fraction of the
// line's own handling: the first lookup validates the line in one pass and notes where each
// top-level member's key and value lie (members); a lookup then compares keys in place and
// returns the value as a subslice of the line, and a dotted path scans the nested object it
// names. A lookup allocates nothing once the index has room (kept from line to line, bounded);
// a string value with escapes, which scalar decodes, is the one exception.
//
// Its answers are encoding/json's, those of an Unmarshal into a map[string]json.RawMessage
// (FuzzLineFields compares the two): a line encoding/json would reject is no object, keys
// compare as encoding/json unescapes them (a byte that is not UTF-8 as U+FFFD), and of
// duplicate keys the last wins, as it does in the map.
//
// A lineFields belongs to one Builder and is reset for every line.
type lineFields struct {
	line    []byte
	state   objectState
	members []jsonscan.Member // the object's top-level members in line order (state == lineObject)
}

type objectState uint8

const (
	lineUnchecked objectState = iota // no lookup yet
	lineNotObject
	lineObject
)

// maxKeptMembers bounds the members a lineFields keeps room for from one line to the next, so
// that one line with a huge object does not leave every pooled builder holding its index.
const maxKeptMembers = 256

// reset makes f the view of line. Nothing is looked at yet.
func (f *lineFields) reset(line []byte) {
	f.line, f.state = line, lineUnchecked
	if cap(f.members) > maxKeptMembers {
		f.members = nil
	}
	f.members = f.members[:0]
}

// isObject reports whether the line is one JSON object (with nothing but space after it), as
// encoding/json would accept it. The line is validated once, on the first call.
func (f *lineFields) isObject() bool {
	if f.state == lineUnchecked {
		f.state = lineNotObject
		// Only a line that begins with '{' is looked at: a plain line costs one comparison
		// (and a line with space before its object is no object).
		if len(f.line) > 0 && f.line[0] == '{' {
			if end := jsonscan.Object(f.line, 0, 1, &f.members); end > 0 && jsonscan.SkipSpace(f.line, end) == len(f.line) {
				f.state = lineObject
			} else {
				f.members = f.members[:0]
			}
		}
	}
	return f.state == lineObject
}

// hasFields reports whether the line is a JSON object with at least one member (json-merge
// needs a comma before what it adds).
func (f *lineFields) hasFields() bool {
	return f.isObject() && len(f.members) > 0
}

// get returns the raw JSON value at path (as written, a subslice of the line), and whether the
// line has it.
func (f *lineFields) get(path string) ([]byte, bool) {
	if !f.isObject() {
		return nil, false
	}
	return f.lookupPath(nil, path)
}

// scalar returns the value at path as bytes (jsonScalar: a string unquoted, a number or boolean
// as written); ok is false when the field is missing, null, an object or an array.
func (f *lineFields) scalar(path string) (value []byte, ok bool) {
	raw, found := f.get(path)
	if !found {
		return nil, false
	}
	v := jsonScalar(raw)
	return v, v != nil
}

// lookupPath finds path in obj (nil: the line's top-level object, through its members): the
// whole path as one key first, else each dotted prefix that names an object, with the rest of
// the path looked up inside it. A path that begins with a dot is only ever one key, as for
// mapLookupPath, the reference FuzzLineFields holds this to.
func (f *lineFields) lookupPath(obj []byte, path string) ([]byte, bool) {
	if v, ok := f.find(obj, path); ok {
		return v, true
	}
	for i := indexDot(path, 0); i > 0 && i < len(path)-1; {
		if v, ok := f.find(obj, path[:i]); ok && v[0] == '{' {
			if found, ok := f.lookupPath(v, path[i+1:]); ok {
				return found, true
			}
		}
		next := indexDot(path, i+1)
		if next < 0 {
			break
		}
		i = next
	}
	return nil, false
}

// indexDot returns the index of the first '.' in path at or after from, -1 if none.
func indexDot(path string, from int) int {
	for i := from; i < len(path); i++ {
		if path[i] == '.' {
			return i
		}
	}
	return -1
}

// find returns the value of key in obj (nil: the top-level object), the last one when the key
// is there more than once.
func (f *lineFields) find(obj []byte, key string) ([]byte, bool) {
	if obj == nil {
		line := f.line
		for i := len(f.members) - 1; i >= 0; i-- {
			m := &f.members[i]
			k := line[m.KeyStart:m.KeyEnd]
			if m.PlainKey && string(k) == key || !m.PlainKey && keyEquals(k, key) {
				return line[m.ValStart:m.ValEnd], true
			}
		}
		return nil, false
	}
	// A nested object of a valid line: its members are scanned, not indexed (a path goes
	// into few of them, and once each).
	var found []byte
	ok := false
	i := jsonscan.SkipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		keyEnd, plain := jsonscan.String(obj, i)
		k := obj[i+1 : keyEnd-1]
		valStart := jsonscan.SkipSpace(obj, jsonscan.SkipSpace(obj, keyEnd)+1) // past the ':'
		valEnd := jsonscan.Value(obj, valStart, 1)
		if valEnd < 0 {
			return nil, false // cannot happen: the line was validated
		}
		if plain && string(k) == key || !plain && keyEquals(k, key) {
			found, ok = obj[valStart:valEnd], true
		}
		i = jsonscan.SkipSpace(obj, valEnd)
		if i < len(obj) && obj[i] == ',' {
			i = jsonscan.SkipSpace(obj, i+1)
		}
	}
	return found, ok
}

// keyEquals reports whether the JSON string contents s (between the quotes, valid) unescape to
// key, without unescaping into memory.
func keyEquals(s []byte, key string) bool {
	var buf [utf8.UTFMax]byte
	j := 0
	for r := 0; r < len(s); {
		var c rune
		c, r = jsonscan.UnquoteRune(s, r)
		if c < utf8.RuneSelf {
			if j >= len(key) || key[j] != byte(c) {
				return false
			}
			j++
			continue
		}
		n := utf8.EncodeRune(buf[:], c)
		if len(key)-j < n || key[j:j+n] != string(buf[:n]) {
			return false
		}
		j += n
	}
	return j == len(key)
}

// jsonScalar returns a JSON value (valid, as written) as bytes: a string unquoted, a number or
// boolean as written, nothing for null, objects and arrays.
func jsonScalar(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') < 0 {
			// Without an escape a string is its bytes between the quotes: the value aliases
			// the line, and the key and every template that take it cost no allocation of
			// their own. Bytes that are not UTF-8 stay as written instead of becoming U+FFFD.
			return s
		}
		// Decoded at most once per lookup: the value must outlive the next lookup (the key
		// is kept while the templates look up theirs), so it gets memory of its own.
		out := make([]byte, 0, len(s))
		for r := 0; r < len(s); {
			var c rune
			c, r = jsonscan.UnquoteRune(s, r)
			out = utf8.AppendRune(out, c)
		}
		return out
	case '{', '[', 'n':
		return nil
	}
	return raw
}
