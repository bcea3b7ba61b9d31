package linerecord

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// mapLineFields is the map-based lineFields that the scanner replaced, kept as the reference
// FuzzLineFields holds the scanner to: the line decoded by encoding/json.Unmarshal into a
// map[string]json.RawMessage on the first lookup, and each nested object on a dotted path
// decoded alike.
type mapLineFields struct {
	line   []byte
	parsed bool
	top    map[string]json.RawMessage // nil: not a JSON object
}

func (f *mapLineFields) reset(line []byte) {
	f.line, f.parsed, f.top = line, false, nil
}

func (f *mapLineFields) object() map[string]json.RawMessage {
	if !f.parsed {
		f.parsed = true
		if len(f.line) > 0 && f.line[0] == '{' {
			f.top = mapJSONFields(f.line)
		}
	}
	return f.top
}

func (f *mapLineFields) get(path string) (json.RawMessage, bool) {
	obj := f.object()
	if obj == nil {
		return nil, false
	}
	return mapLookupPath(obj, path)
}

func (f *mapLineFields) scalar(path string) (value []byte, ok bool) {
	raw, found := f.get(path)
	if !found {
		return nil, false
	}
	v := mapJSONScalar(raw)
	return v, v != nil
}

func mapLookupPath(obj map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	if v, ok := obj[path]; ok {
		return v, true
	}
	for i := strings.IndexByte(path, '.'); i > 0 && i < len(path)-1; {
		if v, ok := obj[path[:i]]; ok && len(v) > 0 && v[0] == '{' {
			if inner := mapJSONFields(v); inner != nil {
				if found, ok := mapLookupPath(inner, path[i+1:]); ok {
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

func mapJSONFields(b []byte) map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return nil
	}
	return fields
}

func mapJSONScalar(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
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

// fieldsSeeds are lines for FuzzLineFields and the tests: nesting, dotted keys, escapes in keys
// and values, duplicates, space, numbers, unicode, invalid UTF-8 and broken JSON.
var fieldsSeeds = []string{
	`{"service":"api","log.level":"warn","n":7,"ok":true,"none":null,"kubernetes":{"labels":{"app":"web"},"ns":"prod"},"log":{"file":{"path":"/x"}},"arr":[1]}`,
	`{"ser\u0076ice":"api","\u006c\u006fg.level":"w\u0061rn"}`,
	`{"a":1,"a":2,"b":{"c":1},"b":{"d":2},"b.c":3}`,
	`{"a":{"b":1},"a":5}`,
	`{"k":{"x":1},"k":{"x":2,"x":3}}`,
	" { \"a\" :\t\"b\" ,\r\n\"c\":[ 1 , { \"d\" : null } ] } \n",
	` {"a":1}`,
	`{"n":-0.5e+10,"m":0,"o":1E3,"p":-12.25,"q":123456789012345678901234567890}`,
	`{"n":01}`, `{"n":1.}`, `{"n":-}`, `{"n":1e}`, `{"n":+1}`, `{"n":.5}`,
	`{"é":"ü","日本":"語","😀":"\ud83d\ude00","\ud83d\ude00":1}`,
	`{"lone":"\ud800","low":"\udc00x","bad":"\ud800\u0041","ff":"\ufffd"}`,
	"{\"inv\xffalid\":\"v\xfe\",\"\xc3\":1,\"x\":\"\xed\xa0\x80\"}",
	"{\"k\xff\":1,\"k\\u00ff\":2}",
	`{"esc":"a\"b\\c\/d\be\ff\ng\rh\ti","u":"\u0041\u00e9\u20AC"}`,
	`{"bad":"\x"}`, `{"bad":"\u12"}`, `{"bad":"\u12G4"}`, "{\"ctl\":\"a\tb\"}",
	`{broken`, `{"a":1`, `{"a":1}x`, `{"a":1}{"b":2}`, `{"a":1,}`, `{,"a":1}`, `{"a"}`, `{"a":}`,
	`{"a" 1}`, `{1:2}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":[,1]}`,
	`{}`, `{ }`, "{}\n", `{"":""}`, `{"":{"":1}}`, `{".":1,"a.":{"":2},"a":{".b":3}}`,
	`{"a..b":1,"a":{".b":2},"a.":{"b":3}}`, `{"a":{"b":{"c":{"d":"deep"}}}}`,
	`{"a.b":{"c":1},"a":{"b.c":2,"b":{"c":3}}}`,
	`["a"]`, `"str"`, `null`, `7`, ``, `plain text`, `{"a":[[[[]]]],"b":[{}]}`,
	`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","trace_id":"0AF7651916CD43DD8448EB211C80319C"}`,
}

// FuzzLineFields holds the scanner to the map-based view it replaced: for any bytes, the same
// answer to "is this a JSON object (with fields)", and for any path, and for the paths of the
// line's own keys, the same get and scalar results.
func FuzzLineFields(f *testing.F) {
	for _, s := range fieldsSeeds {
		f.Add([]byte(s), "a")
		f.Add([]byte(s), "a.b")
	}
	f.Add([]byte(fieldsSeeds[0]), "kubernetes.labels.app")
	f.Add([]byte(fieldsSeeds[0]), "log.file.path")
	f.Add([]byte(fieldsSeeds[1]), "service")
	f.Add([]byte(fieldsSeeds[1]), "log.level")
	f.Add([]byte(fieldsSeeds[2]), "b.c")
	f.Add([]byte(fieldsSeeds[2]), "b.d")
	f.Add([]byte(fieldsSeeds[4]), "k.x")
	f.Add([]byte(fieldsSeeds[len(fieldsSeeds)-1]), "traceparent")
	f.Add([]byte(`{"a":{"b":1}}`), ".a.b")
	f.Add([]byte(`{"a":{"b":1}}`), "a.b.")
	f.Add([]byte(`{"k\ufffd":1}`), "k\ufffd")
	f.Add([]byte("{\"k\xff\":1}"), "k\xff")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		var ref mapLineFields
		ref.reset(data)
		var got lineFields
		got.reset([]byte(fieldsSeeds[0])) // a view reset from another line keeps nothing of it
		got.scalar("service")
		got.reset(data)
		// A lookup before anything else validates the line as isObject would.
		checkFieldsPath(t, &got, &ref, data, path)
		obj := ref.object()
		if got.isObject() != (obj != nil) || got.hasFields() != (len(obj) > 0) {
			t.Fatalf("%q: isObject %v hasFields %v, want %v %v", data, got.isObject(), got.hasFields(), obj != nil, len(obj) > 0)
		}
		// The line's own keys, and the paths into its nested objects, are found alike.
		n := 0
		for k, v := range obj {
			checkFieldsPath(t, &got, &ref, data, k)
			checkFieldsPath(t, &got, &ref, data, k+"."+path)
			for k2, v2 := range mapJSONFields(v) {
				checkFieldsPath(t, &got, &ref, data, k+"."+k2)
				for k3 := range mapJSONFields(v2) {
					checkFieldsPath(t, &got, &ref, data, k+"."+k2+"."+k3)
				}
			}
			if n++; n > 16 {
				break
			}
		}
	})
}

func checkFieldsPath(t *testing.T, got *lineFields, ref *mapLineFields, data []byte, path string) {
	t.Helper()
	gv, gok := got.get(path)
	rv, rok := ref.get(path)
	if gok != rok || !bytes.Equal(gv, rv) {
		t.Fatalf("%q: get(%q) = %q, %v; want %q, %v", data, path, gv, gok, rv, rok)
	}
	gs, gok := got.scalar(path)
	rs, rok := ref.scalar(path)
	if gok != rok || !bytes.Equal(gs, rs) {
		t.Fatalf("%q: scalar(%q) = %q, %v; want %q, %v", data, path, gs, gok, rs, rok)
	}
}
