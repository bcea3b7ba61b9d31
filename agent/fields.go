package agent

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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
// A lineFields belongs to one recordBuilder and is reset for every line.
type lineFields struct {
	line    []byte
	state   objectState
	members []member // the object's top-level members in line order (state == lineObject)
}

type objectState uint8

const (
	lineUnchecked objectState = iota // no lookup yet
	lineNotObject
	lineObject
)

// member is where one top-level member of the line's object lies.
type member struct {
	keyStart, keyEnd int  // the key's bytes between its quotes
	plainKey         bool // no escape, no byte >= 0x80: the key's bytes are its name as they are
	valStart, valEnd int  // the value as written, without the space around it
}

// maxKeptMembers bounds the members a lineFields keeps room for from one line to the next, so
// that one line with a huge object does not leave every pooled builder holding its index.
const maxKeptMembers = 256

// maxNestingDepth is encoding/json's limit on nested objects and arrays (scanner.go): a line
// nested deeper is not valid JSON to it, and so is no object here either.
const maxNestingDepth = 10000

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
			if end := scanObject(f.line, 0, 1, &f.members); end > 0 && skipSpace(f.line, end) == len(f.line) {
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
			k := line[m.keyStart:m.keyEnd]
			if m.plainKey && string(k) == key || !m.plainKey && keyEquals(k, key) {
				return line[m.valStart:m.valEnd], true
			}
		}
		return nil, false
	}
	// A nested object of a valid line: its members are scanned, not indexed (a path goes
	// into few of them, and once each).
	var found []byte
	ok := false
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		keyEnd, plain := scanString(obj, i)
		k := obj[i+1 : keyEnd-1]
		valStart := skipSpace(obj, skipSpace(obj, keyEnd)+1) // past the ':'
		valEnd := scanValue(obj, valStart, 1)
		if valEnd < 0 {
			return nil, false // cannot happen: the line was validated
		}
		if plain && string(k) == key || !plain && keyEquals(k, key) {
			found, ok = obj[valStart:valEnd], true
		}
		i = skipSpace(obj, valEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
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
		c, r = unquoteRune(s, r)
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

// unquoteRune returns the character at s[r] of valid JSON string contents and the index past
// it, as encoding/json's unquoteBytes decodes it: escapes resolved, a surrogate pair joined, a
// lone surrogate and a byte that is not UTF-8 each U+FFFD.
func unquoteRune(s []byte, r int) (rune, int) {
	c := s[r]
	if c < utf8.RuneSelf && c != '\\' {
		return rune(c), r + 1
	}
	if c != '\\' {
		rr, size := utf8.DecodeRune(s[r:])
		return rr, r + size
	}
	switch s[r+1] {
	case 'b':
		return '\b', r + 2
	case 'f':
		return '\f', r + 2
	case 'n':
		return '\n', r + 2
	case 'r':
		return '\r', r + 2
	case 't':
		return '\t', r + 2
	case 'u':
		rr := getu4(s[r:])
		r += 6
		if utf16.IsSurrogate(rr) {
			if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
				return dec, r + 6
			}
			return unicode.ReplacementChar, r
		}
		return rr, r
	}
	return rune(s[r+1]), r + 2 // '"', '\\', '/'
}

// getu4 decodes the \uXXXX escape at the start of s, -1 if there is none (encoding/json's).
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
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
			c, r = unquoteRune(s, r)
			out = utf8.AppendRune(out, c)
		}
		return out
	case '{', '[', 'n':
		return nil
	}
	return raw
}

// The validator below accepts exactly what encoding/json's scanner accepts (FuzzLineFields
// compares them): each function takes b[i] as the first byte of what it scans and returns the
// index just past it, or -1 when b is not valid there.

// skipSpace returns the index of the first byte at or after i that is not JSON space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// scanValue scans the value at b[i], inside depth nested objects and arrays.
func scanValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{':
		return scanObject(b, i, depth+1, nil)
	case '[':
		return scanArray(b, i, depth+1)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return scanNumber(b, i)
		}
	}
	return -1
}

// scanObject scans the object at b[i] (a '{'), its depth-th level of nesting; with members it
// appends where each of its members lies.
func scanObject(b []byte, i, depth int, members *[]member) int {
	if depth > maxNestingDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		keyEnd, plain := scanString(b, i)
		if keyEnd < 0 {
			return -1
		}
		j := skipSpace(b, keyEnd)
		if j >= len(b) || b[j] != ':' {
			return -1
		}
		valStart := skipSpace(b, j+1)
		valEnd := scanValue(b, valStart, depth)
		if valEnd < 0 {
			return -1
		}
		if members != nil {
			*members = append(*members, member{
				keyStart: i + 1, keyEnd: keyEnd - 1, plainKey: plain,
				valStart: valStart, valEnd: valEnd,
			})
		}
		i = skipSpace(b, valEnd)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// scanArray scans the array at b[i] (a '['), its depth-th level of nesting.
func scanArray(b []byte, i, depth int) int {
	if depth > maxNestingDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		end := scanValue(b, i, depth)
		if end < 0 {
			return -1
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// stringByte marks the bytes a string's fast loop stops at: the closing quote, an escape, a
// control character (invalid in a string) and a byte >= 0x80 (a key with one is not plain).
var stringByte = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// scanString scans the string at b[i] (a '"'); plain reports that it has no escape and no byte
// >= 0x80, so that its bytes are its value. Bytes that are not UTF-8 are valid, as they are to
// encoding/json (which decodes them as U+FFFD).
func scanString(b []byte, i int) (end int, plain bool) {
	plain = true
	for i++; i < len(b); {
		for i < len(b) && !stringByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, plain
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return -1, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if getu4(b[i:]) < 0 {
					return -1, false
				}
				i += 6
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		default: // >= 0x80
			plain = false
			i++
		}
	}
	return -1, false
}

// scanNumber scans the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. What may
// follow it is the caller's to check, as for every value.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral scans lit (true, false or null) at b[i].
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
