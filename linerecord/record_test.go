package linerecord

import (
	"testing"
)

// Building a record for a plain line, or for a JSON line without a key field or a trace
// context to look for, allocates nothing: the agent's per-line path stays allocation-free up
// to Send.
func TestRecordBuilderAllocatesNothingPerLine(t *testing.T) {
	cfg := defaultConfig()
	cfg.Topic = "t"
	b := newRecordBuilder(&cfg)
	for _, line := range []string{
		"2026-11-30T16:40:00Z INFO a plain log line",
		`{"msg":"a JSON line without a trace context","n":1}`,
	} {
		l := []byte(line)
		if got := testing.AllocsPerRun(1000, func() {
			if r := b.build(l, "/var/log/app.log"); string(r.Value) != line {
				t.Fatalf("value %q", r.Value)
			}
		}); got != 0 {
			t.Errorf("build(%q) allocates %v times, want 0", line, got)
		}
	}
}
