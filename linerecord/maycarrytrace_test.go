package linerecord

import "testing"

// TestMayCarryTrace: the one-pass check finds both field names wherever they are, and does not
// take a longer name, a value or a name without its closing quote for them.
func TestMayCarryTrace(t *testing.T) {
	b := &Builder{traceHeader: "traceparent"}
	for line, want := range map[string]bool{
		`{"traceparent":"00-..."}`:                   true,
		`{"msg":"x","trace_id":"abc"}`:               true,
		`{"tracestate":"a","traceparent":"00-x"}`:    true, // a second "trace… after a first
		`{"trace":"x","trace_id":"y"}`:               true,
		`{"traceparents":"x"}`:                       false,
		`{"trace_identifier":"x"}`:                   false,
		`{"msg":"see traceparent and trace_id"}`:     false,
		`plain text line`:                            false,
		`"trace`:                                     false,
		`{"msg":"\"traceparent\" in a value","a":1}`: false,
	} {
		if got := b.mayCarryTrace([]byte(line)); got != want {
			t.Errorf("%s: %v, want %v", line, got, want)
		}
	}
	if (&Builder{}).mayCarryTrace([]byte(`{"traceparent":"x"}`)) {
		t.Error("no trace header: a line was parsed for a trace context")
	}
}
