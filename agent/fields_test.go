package agent

import "testing"

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
	cfg := DefaultConfig()
	cfg.Topic, cfg.KeyField = "t", "user.id"
	b := newRecordBuilder(&cfg)
	if r := b.build([]byte(`{"user":{"id":"u-42"},"msg":"x"}`), ""); string(r.Key) != "u-42" {
		t.Fatalf("key %q, want u-42", r.Key)
	}
}
