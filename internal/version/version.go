// Package version says which build of the agent this is: the release version, the commit and
// the build date that a release build sets with -ldflags, or, in a plain `go build`, what the Go
// toolchain recorded of the module and its VCS checkout (debug.ReadBuildInfo).
//
// A release build (make release) sets:
//
//	-ldflags "-X github.com/kafkatrail/kafkatrail/internal/version.version=0.1.0
//	          -X github.com/kafkatrail/kafkatrail/internal/version.commit=<full sha>
//	          -X github.com/kafkatrail/kafkatrail/internal/version.date=<RFC 3339, UTC>"
package version

import (
	"runtime/debug"
	"strings"
	"sync"
)

// Set by the release build's -ldflags; empty otherwise.
var (
	version string
	commit  string
	date    string
)

// Info is one build's identity.
type Info struct {
	// Version is the release version without a leading v ("0.1.0"), or the module's version
	// when built with `go install …@v0.1.0`, else "dev".
	Version string `json:"version"`
	// Commit is the VCS revision (a full hash), "" when unknown; Modified is set when the
	// checkout it was built from had changes not committed.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Date is when it was built (release builds: the commit's time, for reproducible bytes) or,
	// in a plain build, the commit's time; RFC 3339, "" when unknown.
	Date string `json:"date,omitempty"`
	// GoVersion is the toolchain that built it.
	GoVersion string `json:"go"`
}

var (
	once sync.Once
	info Info
)

// Get returns this build's Info.
func Get() Info {
	once.Do(func() { info = read(version, commit, date, debug.ReadBuildInfo) })
	return info
}

// Version is Get().Version: what service.version, the status page and the broker's view of the
// client (KIP-511, KIP-714) report.
func Version() string { return Get().Version }

func read(v, c, d string, build func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: strings.TrimPrefix(v, "v"), Commit: c, Date: d}
	if bi, ok := build(); ok {
		i.GoVersion = bi.GoVersion
		if i.Version == "" {
			if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
				i.Version = strings.TrimPrefix(mv, "v")
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.time":
				if i.Date == "" {
					i.Date = s.Value
				}
			case "vcs.modified":
				i.Modified = s.Value == "true" && c == ""
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	return i
}

// String is the one line `agent version` prints:
// "kafkatrail agent 0.1.0 (commit 0123456789ab, built 2026-12-03T10:00:00Z, go1.26.8)".
func (i Info) String() string {
	var parts []string
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if i.Modified {
			c += "+changes"
		}
		parts = append(parts, "commit "+c)
	}
	if i.Date != "" {
		parts = append(parts, "built "+i.Date)
	}
	if i.GoVersion != "" {
		parts = append(parts, i.GoVersion)
	}
	s := "kafkatrail agent " + i.Version
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
