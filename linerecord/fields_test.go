package linerecord

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/internal/jsonscan"
)

func TestLineFieldsPaths(t *testing.T) {
	line := []byte(`{"service":"api","log.level":"warn","n":7,"ok":true,"none":null,` +
		`"kubernetes":{"labels":{"app":"web"},"ns":"prod"},"log":{"file":{"path":"/x"}},"arr":[1]}`)
	var f lineFields
	f.reset(line)
	for _, c := range []struct {
		path string
		want string
		ok   bool
	}{
		{"service", "api", true},
		{"log.level", "warn", true}, // a dotted key as written wins
		{"n", "7", true},
		{"ok", "true", true},
		{"kubernetes.labels.app", "web", true},
		{"kubernetes.ns", "prod", true},
		{"log.file.path", "/x", true},
		{"none", "", false},
		{"arr", "", false},
		{"kubernetes.labels", "", false}, // an object is not a scalar
		{"missing", "", false},
		{"kubernetes.missing", "", false},
		{"service.x", "", false},
		{".", "", false},
		{"kubernetes.", "", false},
	} {
		got, ok := f.scalar(c.path)
		if ok != c.ok || string(got) != c.want {
			t.Errorf("scalar(%q) = %q, %v; want %q, %v", c.path, got, ok, c.want, c.ok)
		}
	}
	for _, plain := range []string{"plain text", "", `["a"]`, `{broken`} {
		f.reset([]byte(plain))
		if v, ok := f.scalar("service"); ok {
			t.Errorf("%q: scalar(service) = %q, want none", plain, v)
		}
	}
}

// A key field given as a dotted path takes the nested value.
func TestRecordKeyFromNestedField(t *testing.T) {
	cfg := defaultConfig()
	cfg.Topic, cfg.KeyField = "t", "user.id"
	b := newRecordBuilder(&cfg)
	if r := b.build([]byte(`{"user":{"id":"u-42"},"msg":"x"}`), ""); string(r.Key) != "u-42" {
		t.Fatalf("key %q, want u-42", r.Key)
	}
}

// The validator takes encoding/json's nesting limit: a line nested as deep as encoding/json
// allows is an object, one level more is not (as for json.Valid).
func TestLineFieldsNestingLimit(t *testing.T) {
	for _, depth := range []int{jsonscan.MaxNestingDepth, jsonscan.MaxNestingDepth + 1} {
		arrays := depth - 1 // the object is one level
		line := []byte(`{"a":` + strings.Repeat("[", arrays) + strings.Repeat("]", arrays) + `}`)
		var f lineFields
		f.reset(line)
		if got, want := f.isObject(), json.Valid(line); got != want || want != (depth <= jsonscan.MaxNestingDepth) {
			t.Errorf("depth %d: isObject %v, json.Valid %v", depth, got, want)
		}
	}
}

// Each line of fieldsSeeds answers as the map-based view does, for the paths the fuzz test
// derives (the seeds run there too; this keeps them in the ordinary test run by name).
func TestLineFieldsSeedsMatchMap(t *testing.T) {
	for _, s := range fieldsSeeds {
		var got lineFields
		var ref mapLineFields
		got.reset([]byte(s))
		ref.reset([]byte(s))
		if got.isObject() != (ref.object() != nil) || got.hasFields() != (len(ref.object()) > 0) {
			t.Fatalf("%q: isObject %v hasFields %v", s, got.isObject(), got.hasFields())
		}
		for k, v := range ref.object() {
			checkFieldsPath(t, &got, &ref, []byte(s), k)
			for k2 := range mapJSONFields(v) {
				checkFieldsPath(t, &got, &ref, []byte(s), k+"."+k2)
			}
		}
	}
}

// A lookup allocates nothing, at any depth, present or missing, escaped key or not; only a
// string value with an escape, which scalar decodes, gets memory of its own.
func TestLineFieldsAllocateNothing(t *testing.T) {
	line := []byte(`{"service":"api","ser\u0076ice2":"x","k":{"a":{"b":"deep"}},"esc":"a\nb","n":1}`)
	var f lineFields
	f.reset(line)
	f.isObject() // the members' room is kept from one line to the next
	for _, path := range []string{"service", "service2", "k.a.b", "n", "missing", "k.missing"} {
		if got := testing.AllocsPerRun(100, func() {
			f.reset(line)
			f.scalar(path)
		}); got != 0 {
			t.Errorf("scalar(%q): %v allocations, want 0", path, got)
		}
	}
	if got := testing.AllocsPerRun(100, func() {
		f.reset(line)
		if v, _ := f.scalar("esc"); string(v) != "a\nb" {
			t.Fatalf("esc = %q", v)
		}
	}); got != 1 {
		t.Errorf("scalar of an escaped string: %v allocations, want 1", got)
	}
}

// A view reset after a line with a huge object does not keep that object's index.
func TestLineFieldsMembersBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"k0":0`)
	for i := 1; i < 10*maxKeptMembers; i++ {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString(`}`)
	var f lineFields
	f.reset([]byte(b.String()))
	if !f.hasFields() {
		t.Fatal("not an object")
	}
	f.reset([]byte(`{"a":1}`))
	if cap(f.members) > maxKeptMembers {
		t.Fatalf("room for %d members kept, want at most %d", cap(f.members), maxKeptMembers)
	}
}

// BenchmarkLineFields compares the scanner with the map-based view it replaced ("map"), each
// iteration a new line's lookups, on a typical JSON log line.
func BenchmarkLineFields(b *testing.B) {
	line := []byte(`{"@timestamp":"2026-11-30T16:40:00.123Z","log.level":"info","service":"checkout",` +
		`"kubernetes":{"namespace":"prod","pod":{"name":"checkout-7d9f8"}},"message":"added item to cart",` +
		`"user":"u-42","took_ms":3}`)
	merge := []string{fieldTimestamp, fieldHost, fieldPath, fieldOffset, fieldFlags}
	for _, c := range []struct {
		name  string
		paths []string
		get   bool // get, as json-merge looks its names up, rather than scalar
	}{
		{"top", []string{"service"}, false},
		{"nested3", []string{"kubernetes.pod.name"}, false},
		{"last", []string{"took_ms"}, false},
		{"miss", []string{"missing"}, false},
		{"three", []string{"service", "log.level", "user"}, false},
		{"merge5", merge, true},
	} {
		b.Run(c.name+"/map", func(b *testing.B) {
			var f mapLineFields
			b.ReportAllocs()
			for b.Loop() {
				f.reset(line)
				for _, p := range c.paths {
					if c.get {
						f.get(p)
					} else if _, ok := f.scalar(p); !ok && p != "missing" {
						b.Fatal(p)
					}
				}
			}
		})
		b.Run(c.name+"/scan", func(b *testing.B) {
			var f lineFields
			b.ReportAllocs()
			for b.Loop() {
				f.reset(line)
				for _, p := range c.paths {
					if c.get {
						f.get(p)
					} else if _, ok := f.scalar(p); !ok && p != "missing" {
						b.Fatal(p)
					}
				}
			}
		})
	}
}
