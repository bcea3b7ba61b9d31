package filetail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	g := gotLine{Line: l, path: f.Path, file: f, at: time.Now()}
	if len(l.Data) <= 4096 {
		g.data = string(l.Data)
	} else {
		// Keep huge lines' memory out of the tests that measure the tailer's.
		g.data = fmt.Sprintf("<%d bytes of %q>", len(l.Data), l.Data[0])
	}
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

// eachLine is the FileHandler that hands every line of every File to h.
func eachLine(h func(ctx context.Context, f *File, l Line) error) FileHandler {
	return func(f *File) LineHandler {
		return func(ctx context.Context, l Line) error { return h(ctx, f, l) }
	}
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

// testPaths returns a new directory, the log file app.log in it (not created) and the state
// directory beside it.
func testPaths(t *testing.T) (dir, path, state string) {
	dir = t.TempDir()
	return dir, filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
}

func testConfig(stateDir string, globs ...string) Config {
	return Config{
		Globs:              globs,
		StartAt:            StartAtBeginning,
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

func startTailer(t *testing.T, cfg Config, r *recorder) *running {
	t.Helper()
	return startTailerWith(t, cfg, eachLine(r.handle))
}

// startTailerWith starts a Tailer whose lines go to h.
func startTailerWith(t *testing.T, cfg Config, h FileHandler) *running {
	t.Helper()
	return startTailerPrepared(t, cfg, h, nil)
}

// startTailerPrepared is startTailerWith, calling prepare (when set) on the Tailer before Run
// starts: where a test sets its hooks.
func startTailerPrepared(t *testing.T, cfg Config, h FileHandler, prepare func(*Tailer)) *running {
	t.Helper()
	tl, err := NewTailer(cfg, h, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(tl)
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
	return rt.wait(t, "Run did not return after its context ended")
}

// stopOK is stop, failing the test unless Run returned nil.
func (rt *running) stopOK(t *testing.T) {
	t.Helper()
	if err := rt.stop(t); err != nil {
		t.Fatalf("Run = %v after its context ended, want nil", err)
	}
}

// wait waits for Run to return, failing with timedOut after 10 s.
func (rt *running) wait(t *testing.T, timedOut string) error {
	t.Helper()
	select {
	case err, ok := <-rt.done:
		if ok {
			close(rt.done)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatal(timedOut)
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
		if f.ID.Key() == k {
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
	_, path, state := testPaths(t)
	writeLog(t, path, "first\r\n\n\x00bytes\xff\n")
	r := &recorder{}
	rt := startTailer(t, testConfig(state, path), r)
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
	rt.stopOK(t)
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
	_, path, state := testPaths(t)
	cfg := testConfig(state, path)
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

	for _, policy := range []LongLinePolicy{LongLinesTruncate, LongLinesSplit, LongLinesDrop} {
		t.Run(string(policy), func(t *testing.T) {
			cfg := testConfig(filepath.Join(t.TempDir(), "state"), path)
			cfg.MaxLineBytes, cfg.LongLines, cfg.ReadBufferBytes = maxLine, policy, 64<<10
			r := &recorder{}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rt := startTailer(t, cfg, r)
			waitFor(t, "the whole file committed", func() bool { return rt.file(t, path).Committed == total })
			runtime.ReadMemStats(&after)
			// The line is 50 MB; the tailer holds at most MaxLineBytes + one read of it.
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > 8*maxLine {
				t.Fatalf("reading a %d byte line allocated %d bytes", size, alloc)
			}
			t.Logf("a %d MB line allocated %d KB in all", size>>20, alloc>>10)
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
				if len(lines) != 3 || !lines[1].Truncated || lines[1].data != fmt.Sprintf("<%d bytes of 'x'>", maxLine) || lines[1].End != 7+size+1 || st.Truncated != 1 {
					t.Fatalf("truncate: %d lines, stats %+v", len(lines), st)
				}
			case LongLinesSplit:
				parts := lines[1 : len(lines)-1]
				if len(parts) != size/maxLine || st.Split != 1 {
					t.Fatalf("split into %d parts, stats %+v", len(parts), st)
				}
				for i, p := range parts {
					last := i == len(parts)-1
					if p.Part != i+1 || (p.Parts != 0) == !last || p.data != fmt.Sprintf("<%d bytes of 'x'>", maxLine) || p.Start != int64(7+i*maxLine) {
						t.Fatalf("part %d: %+v (%s)", i, p.Line, p.data)
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
	for _, tc := range []struct {
		late bool // the writer keeps writing to the old file for a while
		wide bool // the glob matches the rotated names too: they stay followed under new names
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		late := tc.late
		t.Run(fmt.Sprintf("late writer=%v wide glob=%v", tc.late, tc.wide), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "app.log")
			glob := path
			if tc.wide {
				glob = path + "*"
			}
			r := &recorder{}
			rt := startTailer(t, testConfig(filepath.Join(dir, "state"), glob), r)

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
			if tc.wide {
				waitFor(t, "every file followed", func() bool { return len(rt.Stats().Files) == rotations+1 })
				for _, f := range rt.Stats().Files {
					if f.Gone || f.BytesBehind != 0 {
						t.Fatalf("file %+v", f)
					}
				}
			} else {
				waitFor(t, "the rotated files released", func() bool { return len(rt.Stats().Files) == 1 })
			}
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

func TestTailerGlobDiscovery(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeLog(t, filepath.Join(logs, "a.log"), "a1\n")
	writeLog(t, filepath.Join(logs, "ignored.txt"), "nope\n")
	// Another name for a.log: one file, followed once.
	if err := os.Symlink("a.log", filepath.Join(logs, "z-link.log")); err != nil {
		t.Fatal(err)
	}
	later := filepath.Join(dir, "not-yet", "b.log") // a plain path whose directory does not exist yet
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(logs, "*.log"), later)
	cfg.StartAt = StartAtEnd // applies to files present at the first discovery only
	writeLog(t, filepath.Join(logs, "old.log"), "history\n")
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "the first files followed", func() bool { return len(rt.Stats().Files) == 2 })
	appendLog(t, filepath.Join(logs, "a.log"), "a2\n")
	waitFor(t, "a2", func() bool { return r.count() == 1 })

	// Files created after the start are read from the beginning, whatever start-at says.
	writeLog(t, filepath.Join(logs, "c.log"), "c1\nc2\n")
	if err := os.MkdirAll(filepath.Dir(later), 0o755); err != nil {
		t.Fatal(err)
	}
	writeLog(t, later, "b1\n")
	waitFor(t, "the new files' lines", func() bool { return r.count() == 4 })
	byPath := map[string][]string{}
	for _, l := range r.snapshot() {
		byPath[filepath.Base(l.path)] = append(byPath[filepath.Base(l.path)], l.data)
	}
	if fmt.Sprint(byPath) != "map[a.log:[a2] b.log:[b1] c.log:[c1 c2]]" {
		t.Fatalf("lines by file: %v", byPath)
	}
}

// TestTailerResume stops the agent with some lines unacknowledged: the next run resumes at the
// first of them, exactly.
func TestTailerResume(t *testing.T) {
	_, path, state := testPaths(t)
	lines := numbered("l", 0, 10)
	writeLog(t, path, joinLines(lines))

	// Lines 4 and 7 are never acknowledged; the others are, out of order at the end.
	var held []gotLine
	var mu sync.Mutex
	r := &recorder{decide: func(l gotLine) string {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, l)
		return "hold"
	}}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "every line read", func() bool { return r.count() == len(lines) })
	mu.Lock()
	for i := len(held) - 1; i >= 0; i-- {
		if l := held[i]; l.data != "l-000004" && l.data != "l-000007" {
			l.file.Ack(l.End)
		}
	}
	end3 := held[3].End
	mu.Unlock()
	if st := rt.file(t, path); st.Committed != end3 || st.InFlight != 2 || st.LinesAcked != 8 {
		t.Fatalf("stats %+v, want committed %d", st, end3)
	}
	rt.stopOK(t)
	if err := rt.SaveCheckpoints(); err != nil {
		t.Fatal(err)
	}

	r2 := &recorder{}
	rt2 := startTailer(t, testConfig(state, path), r2)
	waitFor(t, "the resumed lines", func() bool { return r2.count() == 6 })
	equalLines(t, r2.data(), lines[4:])
	if first := r2.snapshot()[0]; first.Start != end3 {
		t.Fatalf("resumed at %d, want %d", first.Start, end3)
	}
	size := int64(len(joinLines(lines)))
	waitFor(t, "committed at the end", func() bool { return rt2.file(t, path).Committed == size })
	rt2.stop(t)

	// The third run has nothing to send.
	r3 := &recorder{}
	rt3 := startTailer(t, testConfig(state, path), r3)
	waitFor(t, "the file followed", func() bool { return len(rt3.Stats().Files) == 1 })
	appendLog(t, path, "fresh\n")
	waitFor(t, "the appended line", func() bool { return r3.count() >= 1 })
	equalLines(t, r3.data(), []string{"fresh"})
}

// TestTailerSavesWhenCaughtUp: once a file's last line in flight is acknowledged the checkpoint
// is saved soon, not at the next CheckpointInterval (an hour here). The first line is held, so
// no moment before its acknowledgement has every line read acknowledged.
func TestTailerSavesWhenCaughtUp(t *testing.T) {
	_, path, state := testPaths(t)
	lines := numbered("l", 0, 100)
	writeLog(t, path, joinLines(lines))
	var mu sync.Mutex
	var held []gotLine
	r := &recorder{decide: func(l gotLine) string {
		if l.data == "l-000000" {
			mu.Lock()
			held = append(held, l)
			mu.Unlock()
			return "hold"
		}
		return "ack"
	}}
	cfg := testConfig(state, path)
	cfg.CheckpointInterval = time.Hour
	startTailer(t, cfg, r)
	saved := func() int64 {
		// Read only: openCheckpointStore would remove the tailer's temporary file mid-write.
		entries, err := (&checkpointStore{dir: state, path: filepath.Join(state, checkpointName)}).load()
		if err != nil || len(entries) != 1 {
			return -1
		}
		return entries[0].Offset
	}
	waitFor(t, "every line read", func() bool { return r.count() == len(lines) })
	// Line 0 is in flight: acknowledging the others leaves the file busy, so nothing is due.
	if got := saved(); got > 0 {
		t.Fatalf("checkpoint saved at %d with a line in flight", got)
	}
	mu.Lock()
	held[0].file.Ack(held[0].End)
	mu.Unlock()
	size := int64(len(joinLines(lines)))
	waitFor(t, "the checkpoint at the end of the file", func() bool { return saved() == size })
}

// TestTailerSaveAfterRun: acknowledgements that arrive after Run returned (while the producer
// flushes) still reach the checkpoint.
func TestTailerSaveAfterRun(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "a\nb\n")
	r := &recorder{decide: func(gotLine) string { return "hold" }}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "both lines", func() bool { return r.count() == 2 })
	rt.stop(t)
	for _, l := range r.snapshot() {
		l.file.Ack(l.End)
	}
	if err := rt.SaveCheckpoints(); err != nil {
		t.Fatal(err)
	}
	_, entries, err := openCheckpointStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Offset != 4 || entries[0].Path != path {
		t.Fatalf("checkpoint %+v", entries)
	}
	// Nothing changed: no rewrite (a rewrite is a rename of a new file: a new inode).
	before, _ := os.Stat(filepath.Join(state, checkpointName))
	if err := rt.SaveCheckpoints(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(state, checkpointName))
	if !os.SameFile(before, after) {
		t.Fatal("checkpoint rewritten although nothing changed")
	}
}

func TestTailerFailPinsOffset(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "ok\nbad\nafter\n")
	r := &recorder{decide: func(l gotLine) string {
		if l.data == "bad" {
			return "fail"
		}
		return "ack"
	}}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "every line", func() bool { return r.count() == 3 })
	waitFor(t, "the outcomes", func() bool { return rt.file(t, path).InFlight == 0 })
	st := rt.file(t, path)
	if st.Committed != 3 || st.LinesFailed != 1 || st.LinesAcked != 2 || st.BytesBehind != 10 {
		t.Fatalf("stats %+v", st)
	}
	if tot := rt.Stats().Totals; tot.LinesFailed != 1 {
		t.Fatalf("totals %+v", tot)
	}
	rt.stop(t)
	// After a restart the failed line is sent again (and the ones after it: at least once).
	r2 := &recorder{}
	startTailer(t, testConfig(state, path), r2)
	waitFor(t, "the lines from the failed one", func() bool { return r2.count() == 2 })
	equalLines(t, r2.data(), []string{"bad", "after"})
}

func TestTailerStartAtEnd(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "old\nhalf a li")
	cfg := testConfig(state, path)
	cfg.StartAt = StartAtEnd
	cfg.PartialLineIdle = time.Hour
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "the file followed", func() bool { return following(t, rt, path) })
	// It starts after the last complete line: the line being written is sent whole.
	appendLog(t, path, "ne\nnew\n")
	waitFor(t, "the new lines", func() bool { return r.count() == 2 })
	equalLines(t, r.data(), []string{"half a line", "new"})
}

// TestTailerInodeReuse: a checkpoint of a file whose inode now holds another file (deleted and
// created again while the agent was stopped) does not apply to the new file.
func TestTailerInodeReuse(t *testing.T) {
	// firstFile runs a tailer over a first file to its end, so that the checkpoint knows it.
	firstFile := func(t *testing.T) (path, state string) {
		_, path, state = testPaths(t)
		writeLog(t, path, "first file line one\nfirst file line two\n")
		rt := startTailer(t, testConfig(state, path), &recorder{})
		waitFor(t, "committed", func() bool { return rt.file(t, path).Committed == 40 })
		rt.stop(t)
		return path, state
	}
	t.Run("fingerprint mismatch on the same inode", func(t *testing.T) {
		path, state := firstFile(t)
		// Same inode, other content, longer than the checkpoint offset: without the
		// fingerprint, the next run would resume in the middle of it.
		fresh := numbered("second file", 0, 5)
		writeLog(t, path, joinLines(fresh))
		r2 := &recorder{}
		cfg := testConfig(state, path)
		cfg.StartAt = StartAtEnd // not applied: the checkpoint knew a file at this name
		startTailer(t, cfg, r2)
		waitFor(t, "the new file", func() bool { return r2.count() == len(fresh) })
		equalLines(t, r2.data(), fresh)
	})
	t.Run("delete and create", func(t *testing.T) {
		path, state := firstFile(t)
		fi, _ := os.Stat(path)
		oldKey, _ := statKey(fi)
		os.Remove(path)
		fresh := numbered("second file", 0, 5)
		writeLog(t, path, joinLines(fresh))
		fi, _ = os.Stat(path)
		if k, _ := statKey(fi); k != oldKey {
			t.Logf("the file system gave a new inode (%d, was %d): the identity differs anyway", k.Inode, oldKey.Inode)
		}
		r2 := &recorder{}
		startTailer(t, testConfig(state, path), r2)
		waitFor(t, "the new file", func() bool { return r2.count() == len(fresh) })
		equalLines(t, r2.data(), fresh)
	})
}

// TestTailerDeletedReleased: a deleted file is read to its end, released once acknowledged, and
// its checkpoint pruned.
func TestTailerDeletedReleased(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "a\n")
	var hold sync.Mutex
	hold.Lock()
	r := &recorder{decide: func(l gotLine) string {
		if l.data == "last" {
			go func() { // acknowledged later, by another goroutine
				hold.Lock()
				l.file.Ack(l.End)
				hold.Unlock()
			}()
			return "hold"
		}
		return "ack"
	}}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "a", func() bool { return r.count() == 1 })
	// The writer appends and deletes; the agent still reads what was written.
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	w.WriteString("b\nlast\n")
	w.Close()
	waitFor(t, "the lines written after the delete", func() bool { return r.count() == 3 })
	waitFor(t, "the checkpoint with the file", func() bool {
		rt.SaveCheckpoints()
		_, entries, _ := openCheckpointStore(state)
		return len(entries) == 1
	})
	if len(rt.Stats().Files) != 1 {
		t.Fatal("released before its last line was acknowledged")
	}
	hold.Unlock()
	waitFor(t, "the file released", func() bool { return len(rt.Stats().Files) == 0 })
	if err := rt.SaveCheckpoints(); err != nil {
		t.Fatal(err)
	}
	_, entries, err := openCheckpointStore(state)
	if err != nil || len(entries) != 0 {
		t.Fatalf("checkpoint of a deleted file kept: %+v %v", entries, err)
	}
	equalLines(t, r.data(), []string{"a", "b", "last"})
}

// TestTailerRenamedWhileStopped: logrotate ran while the agent was stopped. The old file, now
// under another name, is read from its checkpoint to its end, then the new file from its start.
func TestTailerRenamedWhileStopped(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "a\n")
	r := &recorder{}
	rt := startTailer(t, testConfig(state, path), r)
	waitFor(t, "committed", func() bool { return rt.file(t, path).Committed == 2 })
	rt.stop(t)
	appendLog(t, path, "b\n") // written while stopped, then rotated
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, "c\n")
	cfg := testConfig(state, path)
	cfg.StartAt = StartAtEnd
	r2 := &recorder{}
	rt2 := startTailer(t, cfg, r2)
	waitFor(t, "b and c", func() bool { return r2.count() == 2 })
	equalLines(t, r2.data(), []string{"b", "c"})
	waitFor(t, "the rotated file released", func() bool { return len(rt2.Stats().Files) == 1 })
	rt2.stop(t)
	// It stays known under its new name, at its end, while it is there.
	_, entries, err := openCheckpointStore(state)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]int64{}
	for _, e := range entries {
		paths[e.Path] = e.Offset
	}
	if len(paths) != 2 || paths[path+".1"] != 4 || paths[path] != 2 {
		t.Fatalf("checkpoints %v", paths)
	}
}

// TestTailerNotAFile: a glob matching a directory, and a followed file replaced by a directory,
// are logged and skipped; nothing crashes and other files go on.
func TestTailerNotAFile(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	os.Mkdir(logs, 0o755)
	os.Mkdir(filepath.Join(logs, "sub.log"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(logs, "fifo.log"), 0o644); err != nil { // opening it would block
		t.Fatal(err)
	}
	if err := os.Symlink("loop.log", filepath.Join(logs, "loop.log")); err != nil { // stat fails: ELOOP
		t.Fatal(err)
	}
	path := filepath.Join(logs, "app.log")
	writeLog(t, path, "a\n")
	r := &recorder{}
	rt := startTailer(t, testConfig(filepath.Join(dir, "state"), filepath.Join(logs, "*.log")), r)
	waitFor(t, "a", func() bool { return r.count() == 1 })
	if n := len(rt.Stats().Files); n != 1 {
		t.Fatalf("%d files followed, want the regular one", n)
	}
	os.Remove(path)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted file released", func() bool { return len(rt.Stats().Files) == 0 })
	other := filepath.Join(logs, "other.log")
	writeLog(t, other, "still working\n")
	waitFor(t, "another file", func() bool { return r.count() == 2 })
	rt.stopOK(t)
}

func TestTailerHandlerError(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "a\n")
	boom := errors.New("producer closed")
	rt := startTailerWith(t, testConfig(state, path), eachLine(func(context.Context, *File, Line) error { return boom }))
	if err := rt.wait(t, "Run did not end on a handler error"); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the handler's error", err)
	}
}

// TestTailerBackpressure: a handler that blocks stops the reading; the context's end unblocks it
// and Run returns after the follower exited.
func TestTailerBackpressure(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, joinLines(numbered("l", 0, 1000)))
	var calls sync.WaitGroup
	calls.Add(1)
	var once sync.Once
	rt := startTailerWith(t, testConfig(state, path), eachLine(func(ctx context.Context, f *File, l Line) error {
		once.Do(calls.Done)
		<-ctx.Done() // the producer's buffer is full until the end
		return ctx.Err()
	}))
	calls.Wait()
	if st := rt.Stats(); st.Totals.LinesRead != 1 {
		t.Fatalf("read on while the handler blocked: %+v", st.Totals)
	}
	rt.stopOK(t)
}

func TestNewTailerErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeLog(t, file, "")
	ok := func(*Config) {}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no globs", func(c *Config) { c.Globs = nil }, "no file or glob"},
		{"bad glob", func(c *Config) { c.Globs = []string{"[x"} }, "syntax error"},
		{"start-at", func(c *Config) { c.StartAt = "middle" }, "start-at"},
		{"long-lines", func(c *Config) { c.LongLines = "fold" }, "long-lines"},
		{"max-line-bytes", func(c *Config) { c.MaxLineBytes = -1 }, "max-line-bytes"},
		{"state dir under a file", func(c *Config) { c.StateDir = filepath.Join(file, "state") }, filepath.Join(file, "state")},
		{"corrupt checkpoint", func(c *Config) {
			c.StateDir = filepath.Join(dir, "corrupt")
			os.MkdirAll(c.StateDir, 0o755)
			writeLog(t, filepath.Join(c.StateDir, checkpointName), "{")
		}, "corrupt"},
		{"valid", ok, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(filepath.Join(t.TempDir(), "state"), filepath.Join(dir, "*.log"))
			tt.change(&cfg)
			_, err := NewTailer(cfg, eachLine((&recorder{}).handle), nil)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestTailerResumeInsideSplitLine: the parts of a split line are checkpointed one by one, so a
// restart after the first part was acknowledged sends the rest of the line, not all of it.
func TestTailerResumeInsideSplitLine(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "abcdefghij\n")
	cfg := testConfig(state, path)
	cfg.MaxLineBytes, cfg.LongLines = 4, LongLinesSplit
	r := &recorder{decide: func(l gotLine) string {
		if l.Part == 1 {
			return "ack"
		}
		return "hold"
	}}
	rt := startTailer(t, cfg, r)
	waitFor(t, "three parts", func() bool { return r.count() == 3 })
	equalLines(t, r.data(), []string{"abcd", "efgh", "ij"})
	rt.stop(t)
	rt.SaveCheckpoints()

	r2 := &recorder{}
	rt2 := startTailer(t, cfg, r2)
	waitFor(t, "the rest of the line", func() bool { return r2.count() == 2 })
	equalLines(t, r2.data(), []string{"efgh", "ij"})
	if first := r2.snapshot()[0]; first.Start != 4 {
		t.Fatalf("resumed at %d, want 4", first.Start)
	}
	waitFor(t, "committed", func() bool { return rt2.file(t, path).Committed == 11 })
}

// TestTailerSavesOncePerIntervalWhileBursting: a file written in bursts, each acknowledged
// before the next, has nothing in flight after every burst; it is saved at most once per
// CheckpointInterval (each save is an fsync), not once per burst, and still reaches its end.
// Every save asks one schedule, so no two writes are closer than the interval, however late the
// scheduler runs Run: the bound holds on a loaded machine.
func TestTailerSavesOncePerIntervalWhileBursting(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "")
	r := &recorder{decide: func(gotLine) string { return "ack" }}
	cfg := testConfig(state, path)
	cfg.CheckpointInterval = 300 * time.Millisecond
	var mu sync.Mutex
	var writes []time.Time
	rt := startTailerPrepared(t, cfg, eachLine(r.handle), func(tl *Tailer) {
		tl.saveHook = func(at time.Time) {
			mu.Lock()
			writes = append(writes, at)
			mu.Unlock()
		}
	})
	const bursts, perBurst = 60, 5
	start := time.Now()
	for i := range bursts {
		appendLog(t, path, joinLines(numbered(fmt.Sprintf("b%02d-", i), 0, perBurst)))
		waitFor(t, "the burst acknowledged", func() bool { return r.count() == (i+1)*perBurst })
		time.Sleep(15 * time.Millisecond) // the writer's pace: a burst every ~20 ms
	}
	elapsed := time.Since(start)
	mu.Lock()
	during := slices.Clone(writes)
	mu.Unlock()
	for i := 1; i < len(during); i++ {
		if gap := during[i].Sub(during[i-1]); gap < cfg.CheckpointInterval {
			t.Fatalf("saves %d and %d %v apart, want at least %v (%d saves in %v)", i, i+1, gap, cfg.CheckpointInterval, len(during), elapsed)
		}
	}
	if len(during) < 2 {
		t.Fatalf("%d saves in %v of bursts acknowledged, want one per %v", len(during), elapsed, cfg.CheckpointInterval)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the checkpoint at the end of the file", func() bool {
		entries, err := (&checkpointStore{dir: state, path: filepath.Join(state, checkpointName)}).load()
		return err == nil && len(entries) == 1 && entries[0].Offset == fi.Size()
	})
	t.Logf("%d bursts in %v: %d saves", bursts, elapsed.Round(time.Millisecond), rt.Stats().Totals.CheckpointSaves)
}

// TestTailerNotWokenPerBurstWhileSaving: while each save writes (the file moves between them),
// the acknowledgement that leaves a burst with nothing in flight does not wake Run: the next
// save covers it. Only the first burst, and the first after each save that found nothing new
// (a quiet interval, after which the first line is saved at once), may wake it: twice each,
// since the acknowledgements that come during the save it makes signal once more.
func TestTailerNotWokenPerBurstWhileSaving(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "")
	r := &recorder{decide: func(gotLine) string { return "ack" }}
	cfg := testConfig(state, path)
	cfg.CheckpointInterval = 200 * time.Millisecond
	var idleWakes, unchanged atomic.Int64
	startTailerPrepared(t, cfg, eachLine(r.handle), func(tl *Tailer) {
		tl.runWakeHook = func(why string) {
			if why == "idle" {
				idleWakes.Add(1)
			} else {
				unchanged.Add(1)
			}
		}
	})
	const bursts, perBurst = 80, 5
	for i := range bursts {
		appendLog(t, path, joinLines(numbered(fmt.Sprintf("b%02d-", i), 0, perBurst)))
		waitFor(t, "the burst acknowledged", func() bool { return r.count() == (i+1)*perBurst })
		time.Sleep(15 * time.Millisecond) // the writer's pace: a burst every ~20 ms
	}
	// Read before the next save can find nothing new and re-arm the signal.
	wakes, quiet := idleWakes.Load(), unchanged.Load()
	if wakes > 2*(1+quiet) {
		t.Fatalf("Run woken %d times by bursts going idle, want at most %d (the first, and one per save that found nothing new; twice each)", wakes, 2*(1+quiet))
	}
	t.Logf("%d bursts: %d idle wakes, %d saves with nothing new", bursts, wakes, quiet)
}
