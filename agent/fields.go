package agent

import (
	"bytes"
	"encoding/json"
	"strings"
)

// lineFields is the JSON view of one line, for everything that takes a field of it (the key,
// topic and header templates, the timestamp, a trace context, json-merge): the line is parsed at
// most once, on the first lookup, and only if it looks like a JSON object, so a plain line or a
// configuration that asks for no field costs nothing.
//
// A path is a field name, or names joined by dots for nested objects: "service" or
// "kubernetes.labels.app". A key that itself contains dots (ECS writes "log.level" as one key) is
// found as written first, then the path is tried as nesting from its shortest prefix on.
//
// A lineFields belongs to one recordBuilder and is reset for every line.
type lineFields struct {
	line   []byte
	parsed bool
	top    map[string]json.RawMessage // nil: not a JSON object
}

// reset makes f the view of line. Nothing is parsed yet.
func (f *lineFields) reset(line []byte) {
	f.line, f.parsed, f.top = line, false, nil
}

// object returns the line's top-level fields, nil if the line is not a JSON object.
func (f *lineFields) object() map[string]json.RawMessage {
	if !f.parsed {
		f.parsed = true
		if len(f.line) > 0 && f.line[0] == '{' {
			f.top = jsonFields(f.line)
		}
	}
	return f.top
}

// get returns the raw JSON value at path, and whether the line has it.
func (f *lineFields) get(path string) (json.RawMessage, bool) {
	obj := f.object()
	if obj == nil {
		return nil, false
	}
	return lookupPath(obj, path)
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

// lookupPath finds path in obj: the whole path as one key first, else each dotted prefix that
// names an object, with the rest of the path looked up inside it.
func lookupPath(obj map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	if v, ok := obj[path]; ok {
		return v, true
	}
	for i := strings.IndexByte(path, '.'); i > 0 && i < len(path)-1; {
		if v, ok := obj[path[:i]]; ok && len(v) > 0 && v[0] == '{' {
			if inner := jsonFields(v); inner != nil {
				if found, ok := lookupPath(inner, path[i+1:]); ok {
					return found, true
				}
			}
		}
		next := strings.IndexByte(path[i+1:], '.')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return nil, false
}

// jsonFields parses a JSON object's top-level fields (nil if b is not one). It is a function of
// its own because the map that json.Unmarshal fills through a pointer moves to the heap: inlined
// into build it did so for every line, parsed or not.
func jsonFields(b []byte) map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return nil
	}
	return fields
}

// jsonScalar returns a JSON value as bytes: a string unquoted, a number or boolean as written,
// nothing for null, objects and arrays.
func jsonScalar(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
			// Without an escape a string is its bytes between the quotes (the line was
			// parsed as valid JSON): the value aliases the parsed field, and the key and
			// every template that take it cost no allocation of their own. Bytes that are
			// not UTF-8 stay as written instead of becoming U+FFFD.
			return raw[1 : len(raw)-1]
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return []byte(s)
	case '{', '[', 'n':
		return nil
	}
	return raw
}
