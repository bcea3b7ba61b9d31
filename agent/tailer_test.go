package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// gotLine is a line a test handler received (its data copied).
type gotLine struct {
	Line
	data string
	path string
	file *File
	at   time.Time
}

// recorder is a LineHandler that keeps every line and acknowledges it according to decide
// (nil: acknowledge everything at once, as a producer callback on the same goroutine would).
type recorder struct {
	mu     sync.Mutex
	lines  []gotLine
	decide func(l gotLine) string // "ack", "hold" (no outcome yet) or "fail"
	maxLen int
}

func (r *recorder) handle(ctx context.Context, f *File, l Line) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	g := gotLine{Line: l, data: string(l.Data), path: f.Path, file: f, at: time.Now()}
	g.Data = nil
	r.mu.Lock()
	r.lines = append(r.lines, g)
	r.maxLen = max(r.maxLen, len(l.Data))
	decide := r.decide
	r.mu.Unlock()
	f.Track(l.End) // as the contract first asked: harmless, the follower tracked it already
	what := "ack"
	if decide != nil {
		what = decide(g)
	}
	switch what {
	case "ack":
		f.Ack(l.End)
	case "fail":
		f.Fail(l.End, errors.New("delivery timeout"))
	}
	return nil
}

func (r *recorder) snapshot() []gotLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gotLine(nil), r.lines...)
}

func (r *recorder) data() []string {
	var out []string
	for _, l := range r.snapshot() {
		out = append(out, l.data)
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testConfig(stateDir string, globs ...string) TailerConfig {
	return TailerConfig{
		Globs:              globs,
		StateDir:           stateDir,
		RescanInterval:     10 * time.Millisecond,
		PollInterval:       2 * time.Millisecond,
		PartialLineIdle:    5 * time.Second,
		ReleaseIdle:        50 * time.Millisecond,
		CheckpointInterval: 10 * time.Millisecond,
		ReadBufferBytes:    4096,
	}
}

// testLogger logs into the test's output (visible with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// running is a Tailer whose Run goroutine the test owns.
type running struct {
	*Tailer
	cancel context.CancelFunc
	done   chan error
}

func startTailer(t *testing.T, cfg TailerConfig, r *recorder) *running {
	t.Helper()
	tl, err := NewTailer(cfg, r.handle, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &running{Tailer: tl, cancel: cancel, done: make(chan error, 1)}
	go func() { rt.done <- tl.Run(ctx) }()
	t.Cleanup(func() { rt.stop(t) })
	return rt
}

// stop ends Run and waits for it (and so for every follower) with a deadline.
func (rt *running) stop(t *testing.T) error {
	t.Helper()
	rt.cancel()
	select {
	case err, ok := <-rt.done:
		if ok {
			close(rt.done)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
		return nil
	}
}

func (rt *running) file(t *testing.T, path string) FileStats {
	t.Helper()
	for _, f := range rt.Stats().Files {
		if f.Path == path {
			return f
		}
	}
	return FileStats{}
}

func writeLog(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendLog(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Fatalf("got %d lines, want %d; first difference at line %d:\ngot  %q\nwant %q",
				len(got), len(want), i, got[i:min(len(got), i+5)], want[i:min(len(want), i+5)])
		}
	}
}

// following reports whether the file now at path is followed.
func following(t *testing.T, rt *running, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	k, _ := statKey(fi)
	for _, f := range rt.Stats().Files {
		if f.ID.key() == k {
			return true
		}
	}
	return false
}

func numbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%06d", prefix, i))
	}
	return out
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestTailerReadsLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	writeLog(t, path, "first\r\n\n\x00bytes\xff\n")
	r := &recorder{}
	rt := startTailer(t, testConfig(filepath.Join(dir, "state"), path), r)
	waitFor(t, "the first lines", func() bool { return r.count() == 3 })
	appendLog(t, path, "more\nand more\n")
	waitFor(t, "appended lines", func() bool { return r.count() == 5 })
	equalLines(t, r.data(), []string{"first\r", "", "\x00bytes\xff", "more", "and more"})
	lines := r.snapshot()
	if lines[0].Start != 0 || lines[0].End != 7 || lines[1].Start != 7 || lines[1].End != 8 || lines[0].path != path {
		t.Fatalf("offsets: %+v %+v", lines[0].Line, lines[1].Line)
	}
	size := int64(len("first\r\n\n\x00bytes\xff\nmore\nand more\n"))
	waitFor(t, "committed at the end", func() bool { return rt.file(t, path).Committed == size })
	st := rt.file(t, path)
	if st.LinesRead != 5 || st.LinesAcked != 5 || st.BytesBehind != 0 || st.ReadOffset != size || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	if tot := rt.Stats().Totals; tot.LinesRead != 5 || tot.LinesAcked != 5 || tot.Files != 1 {
		t.Fatalf("totals %+v", tot)
	}
	if err := rt.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestTailerEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "empty.log")
	writeLog(t, path, "")
	r := &recorder{}
	rt := startTailer(t, testConfig(filepath.Join(dir, "state"), path), r)
	waitFor(t, "the empty file followed", func() bool { return len(rt.Stats().Files) == 1 })
	appendLog(t, path, "late\n")
	waitFor(t, "a line in the once empty file", func() bool { return r.count() == 1 })
	equalLines(t, r.data(), []string{"late"})
	if st := rt.file(t, path); st.ID.FingerprintLen != 5 {
		t.Fatalf("fingerprint not lengthened as the file grew: %+v", st.ID)
	}
}

func TestTailerPartialLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(filepath.Join(dir, "state"), path)
	cfg.PartialLineIdle = 200 * time.Millisecond
	r := &recorder{}
	writeLog(t, path, "whole\nparti")
	written := time.Now()
	startTailer(t, cfg, r)
	waitFor(t, "the partial line", func() bool { return r.count() == 2 })
	lines := r.snapshot()
	if waited := lines[1].at.Sub(written); waited < cfg.PartialLineIdle {
		t.Fatalf("partial line sent after %v, before the idle time %v", waited, cfg.PartialLineIdle)
	}
	if l := lines[1]; l.data != "parti" || l.Start != 6 || l.End != 11 {
		t.Fatalf("partial line %q %d-%d", l.data, l.Start, l.End)
	}
	appendLog(t, path, "al end\nnext\n")
	waitFor(t, "lines after the partial one", func() bool { return r.count() == 4 })
	equalLines(t, r.data(), []string{"whole", "parti", "al end", "next"})
}

// TestTailerHugeLines sends a 50 MB line through each policy: the handler never sees more than
// MaxLineBytes, the file's offsets stay right, and memory stays bounded.
func TestTailerHugeLines(t *testing.T) {
	const maxLine, size = 1 << 20, 50 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, "huge.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("before\n")
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range size / len(chunk) {
		f.Write(chunk)
	}
	f.WriteString("\nafter\n")
	f.Close()
	total := int64(7 + size + 7)

	for _, policy := range []string{LongLinesTruncate, LongLinesSplit, LongLinesDrop} {
		t.Run(policy, func(t *testing.T) {
			cfg := testConfig(filepath.Join(t.TempDir(), "state"), path)
			cfg.MaxLineBytes, cfg.LongLines, cfg.ReadBufferBytes = maxLine, policy, 64<<10
			r := &recorder{}
			rt := startTailer(t, cfg, r)
			waitFor(t, "the whole file committed", func() bool { return rt.file(t, path).Committed == total })
			r.mu.Lock()
			maxLen := r.maxLen
			r.mu.Unlock()
			if maxLen > maxLine {
				t.Fatalf("the handler saw a line of %d bytes", maxLen)
			}
			lines := r.snapshot()
			if lines[0].data != "before" || lines[len(lines)-1].data != "after" {
				t.Fatalf("first %q last %q", lines[0].data, lines[len(lines)-1].data)
			}
			st := rt.file(t, path)
			switch policy {
			case LongLinesTruncate:
				if len(lines) != 3 || !lines[1].Truncated || len(lines[1].data) != maxLine || lines[1].End != 7+size+1 || st.Truncated != 1 {
					t.Fatalf("truncate: %d lines, stats %+v", len(lines), st)
				}
			case LongLinesSplit:
				parts := lines[1 : len(lines)-1]
				if len(parts) != size/maxLine || st.Split != 1 {
					t.Fatalf("split into %d parts, stats %+v", len(parts), st)
				}
				for i, p := range parts {
					last := i == len(parts)-1
					if p.Part != i+1 || (p.Parts != 0) == !last || len(p.data) != maxLine || p.Start != int64(7+i*maxLine) {
						t.Fatalf("part %d: %+v (%d bytes)", i, p.Line, len(p.data))
					}
				}
			case LongLinesDrop:
				if len(lines) != 2 || st.Dropped != 1 || st.Committed != total {
					t.Fatalf("drop: %d lines, stats %+v", len(lines), st)
				}
			}
		})
	}
}

// TestTailerRenameRotation rotates by rename+create while a writer is writing: the old file is
// read to its end and released, then the new one is read; nothing is lost or duplicated.
func TestTailerRenameRotation(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("writer keeps the old file briefly=%v", late), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "app.log")
			r := &recorder{}
			rt := startTailer(t, testConfig(filepath.Join(dir, "state"), path), r)

			const perFile, rotations = 2000, 3
			var want []string
			w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for rot := 0; rot <= rotations; rot++ {
				for i := 0; i < perFile; i++ {
					line := fmt.Sprintf("line-%06d", n)
					n++
					want = append(want, line)
					if _, err := w.WriteString(line + "\n"); err != nil {
						t.Fatal(err)
					}
					if i == perFile/2 && rot < rotations {
						// Rotations are rarer than scans in life: a file renamed away before any
						// scan saw it cannot be known (without inotify).
						waitFor(t, "the current file followed", func() bool { return following(t, rt, path) })
						// Rotate: the writer's open file moves away; a new one takes the name.
						if err := os.Rename(path, fmt.Sprintf("%s.%d", path, rot+1)); err != nil {
							t.Fatal(err)
						}
						if !late {
							w.Close()
							if w, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				if late && rot < rotations {
					// The writer reopens only at the end of this batch.
					w.Close()
					if w, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			w.Close()
			waitFor(t, fmt.Sprintf("every line (%d)", len(want)), func() bool { return r.count() >= len(want) })
			waitFor(t, "the rotated files released", func() bool { return len(rt.Stats().Files) == 1 })
			got := r.data()
			seen := map[string]int{}
			for _, l := range got {
				seen[l]++
			}
			for _, l := range want {
				if seen[l] != 1 {
					t.Fatalf("line %s seen %d times", l, seen[l])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			if !late {
				// The old file is finished before the new one starts: the order holds.
				equalLines(t, got, want)
			}
		})
	}
}

// TestTailerCopytruncate truncates the file in place while its writer keeps appending: reading
// restarts at 0, and nothing of the new content is duplicated or lost.
func TestTailerCopytruncate(t *testing.T) {
	for _, longer := range []bool{false, true} {
		t.Run(fmt.Sprintf("new content longer=%v", longer), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "app.log")
			w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			old := numbered("old", 0, 100)
			w.WriteString(joinLines(old))
			// The last old line is still in flight when the file is truncated.
			r := &recorder{decide: func(l gotLine) string {
				if l.data == old[len(old)-1] {
					return "hold"
				}
				return "ack"
			}}
			cfg := testConfig(filepath.Join(dir, "state"), path)
			if longer {
				cfg.PollInterval = 100 * time.Millisecond // let the file regrow past the offset unseen
			}
			rt := startTailer(t, cfg, r)
			waitFor(t, "the old lines", func() bool { return r.count() == len(old) })
			oldFile := r.snapshot()[0].file

			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			fresh := numbered("new", 0, 10)
			if longer {
				fresh = numbered("longer-new-content", 0, 200)
			}
			w.WriteString(joinLines(fresh))
			waitFor(t, "the new lines", func() bool { return r.count() == len(old)+len(fresh) })
			equalLines(t, r.data(), append(old, fresh...))
			size := int64(len(joinLines(fresh)))
			waitFor(t, "the committed offset of the new content", func() bool { return rt.file(t, path).Committed == size })
			st := rt.file(t, path)
			if st.Truncations != 1 {
				t.Fatalf("stats %+v", st)
			}
			if newFile := r.snapshot()[len(old)].file; newFile == oldFile {
				t.Fatal("the new content shares the old File's tracker")
			}
			// Its late ack lands in the old File and cannot move the new content's checkpoint.
			oldSize := int64(len(joinLines(old)))
			oldFile.Ack(oldSize)
			if oldFile.Committed() != oldSize {
				t.Fatalf("old content committed %d, want %d", oldFile.Committed(), oldSize)
			}
			if err := rt.SaveCheckpoints(); err != nil {
				t.Fatal(err)
			}
			if st := rt.file(t, path); st.Committed != size {
				t.Fatalf("committed %d after a late ack of the old content, want %d", st.Committed, size)
			}
		})
	}
}
