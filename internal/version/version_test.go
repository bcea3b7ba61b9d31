package version

import (
	"runtime/debug"
	"testing"
)

func TestRead(t *testing.T) {
	plain := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-03T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, true
	}
	for _, c := range []struct {
		name       string
		v, c, d    string
		build      func() (*debug.BuildInfo, bool)
		wantString string
	}{
		{"plain go build", "", "", "", plain,
			"kafkatrail agent dev (commit 0123456789ab+changes, built 2026-12-03T10:00:00Z, go1.26.8)"},
		{"release build", "v0.1.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-12-04T00:00:00Z", plain,
			"kafkatrail agent 0.1.0 (commit fedcba987654, built 2026-12-04T00:00:00Z, go1.26.8)"},
		{"go install @version", "", "", "", func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.2.0"}}, true
		}, "kafkatrail agent 0.2.0 (go1.26.8)"},
		{"no build info", "", "", "", func() (*debug.BuildInfo, bool) { return nil, false }, "kafkatrail agent dev"},
	} {
		if got := read(c.v, c.c, c.d, c.build).String(); got != c.wantString {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.wantString)
		}
	}
}
