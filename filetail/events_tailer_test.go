package filetail

import (
	"testing"
	"time"
)

// TestTailerMultilineCheckpointOutsideEvents: a file's checkpoint is never inside an event. The
// event still waiting for its next line is not handed over, so the checkpoint stops at its first
// byte; after a restart (its last line written while the agent was stopped) it is read again
// whole, from its first line, and sent when the file is idle for the multiline timeout.
func TestTailerMultilineCheckpointOutsideEvents(t *testing.T) {
	_, path, state := testPaths(t)
	a := "2026 ERROR first\n\tat a.A(A.java:1)\n\t... 3 more\n"
	b := "2026 ERROR second\n\tat b.B(B.java:2)\n"
	writeLog(t, path, a+b)
	cfg := testConfig(state, path)
	cfg.Multiline = Multiline{Preset: MultilineJava, Timeout: time.Hour}
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "the first event", func() bool { return r.count() == 1 })
	waitFor(t, "the first event acknowledged", func() bool { return rt.file(t, path).Committed == int64(len(a)) })
	if got := r.data(); got[0] != a[:len(a)-1] {
		t.Fatalf("first event %q", got[0])
	}
	time.Sleep(50 * time.Millisecond) // many polls at the end of the file: the held event stays held
	if st := rt.file(t, path); r.count() != 1 || st.Committed != int64(len(a)) {
		t.Fatalf("%d records, committed %d: the held event moved the checkpoint", r.count(), st.Committed)
	}
	rt.stopOK(t)
	if err := rt.SaveCheckpoints(); err != nil {
		t.Fatal(err)
	}

	appendLog(t, path, "\tat b.C(C.java:3)\n")
	cfg.Multiline.Timeout = 50 * time.Millisecond
	r2 := &recorder{}
	rt2 := startTailer(t, cfg, r2)
	start := time.Now()
	waitFor(t, "the second event, after the timeout", func() bool { return r2.count() == 1 })
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("the event was sent after %v, before the multiline timeout", waited)
	}
	got := r2.snapshot()[0]
	if want := b + "\tat b.C(C.java:3)"; got.data != want || got.Start != int64(len(a)) {
		t.Fatalf("second event %q at %d, want %q at %d", got.data, got.Start, want, len(a))
	}
	size := int64(len(a + b + "\tat b.C(C.java:3)\n"))
	waitFor(t, "committed at the end", func() bool { return rt2.file(t, path).Committed == size })
}

// TestTailerMultilineCopytruncate: an event held when the file is truncated is sent (its bytes
// were in the file), and the new content is joined from its first line.
func TestTailerMultilineCopytruncate(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "old\n\tat x\n")
	cfg := testConfig(state, path)
	cfg.Multiline = Multiline{Preset: MultilineJava, Timeout: time.Hour}
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "the file read", func() bool { return rt.file(t, path).ReadOffset == 10 })
	if n := r.count(); n != 0 {
		t.Fatalf("%d records before the truncation: the event was not held", n)
	}
	writeLog(t, path, "n\n") // shorter: truncated and rewritten
	waitFor(t, "the held event sent at the truncation", func() bool { return r.count() >= 1 })
	if got := r.data()[0]; got != "old\n\tat x" {
		t.Fatalf("held event %q", got)
	}
	appendLog(t, path, "\tat y\nnext\n")
	waitFor(t, "the new content's event", func() bool { return r.count() >= 2 })
	equalLines(t, r.data()[:2], []string{"old\n\tat x", "n\n\tat y"})
}
