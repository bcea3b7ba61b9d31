package filetail

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// watchOnlyConfig is testConfig with scans and polls too rare to matter within a test's
// deadline: whatever is found or read in time was found or read through the watch.
func watchOnlyConfig(stateDir string, globs ...string) Config {
	cfg := testConfig(stateDir, globs...)
	cfg.RescanInterval = time.Minute
	cfg.PollInterval = time.Minute
	return cfg
}

// waitScanned waits for Run's first scan (the watches are in place before it): a file created
// after it is new to the Tailer.
func waitScanned(t *testing.T, rt *running) {
	t.Helper()
	waitFor(t, "the first scan", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.scanned
	})
}

// A file created and copytruncated between two scans lost everything it held before the
// truncation: the scan found it only afterwards, at its new, short content. The watch finds it
// when it is created, so its first content is read before the truncation.
func TestTailerCreatedAndCopytruncatedBetweenScans(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(dir, "*.log"))
	cfg.RescanInterval = time.Minute
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitScanned(t, rt)

	old := numbered("old", 0, 10000)
	writeLog(t, path, joinLines(old))
	waitFor(t, "the lines written before the truncation", func() bool { return r.count() == len(old) })

	// copytruncate: copy (to a name the glob does not match), then truncate in place.
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeLog(t, path+".1", string(content))
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	fresh := numbered("new", 0, 100)
	appendLog(t, path, joinLines(fresh))
	waitFor(t, "the lines written after the truncation", func() bool { return r.count() == len(old)+len(fresh) })
	equalLines(t, r.data(), append(old, fresh...))
	if st := rt.file(t, path); st.Truncations != 1 {
		t.Fatalf("truncations %d, want 1 (%+v)", st.Truncations, st)
	}
	rt.stopOK(t)
}

// A copytruncate of a followed file (same inode) and a write to it are read when they happen,
// not at the next poll.
func TestTailerWatchWakesFollower(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "first\n")
	r := &recorder{}
	rt := startTailer(t, watchOnlyConfig(state, path), r)
	waitFor(t, "the first line", func() bool { return r.count() == 1 })

	appendLog(t, path, "second\n")
	waitFor(t, "the appended line", func() bool { return r.count() == 2 })

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path, "after\n")
	waitFor(t, "the line after the truncation", func() bool { return r.count() == 3 })
	equalLines(t, r.data(), []string{"first", "second", "after"})
	if st := rt.file(t, path); st.Truncations != 1 {
		t.Fatalf("truncations %d, want 1 (%+v)", st.Truncations, st)
	}
	rt.stopOK(t)
}

// A rename rotation is noticed by the watch: the new file at the name is followed, after the
// old one was read to its end.
func TestTailerWatchRenameRotation(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "one\n")
	r := &recorder{}
	rt := startTailer(t, watchOnlyConfig(state, path), r)
	waitFor(t, "the first line", func() bool { return r.count() == 1 })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path+".1", "two\n") // the writer has not reopened its log yet
	writeLog(t, path, "three\n")
	waitFor(t, "the rotated and the new file's lines", func() bool { return r.count() == 3 })
	equalLines(t, r.data(), []string{"one", "two", "three"})
	rt.stopOK(t)
}

// Wildcards in a directory part: the directories that match when the scan runs are watched, so
// a file created in one is found at once; a directory created later is found by a scan.
func TestTailerWatchWildcardDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &recorder{}
	rt := startTailer(t, watchOnlyConfig(filepath.Join(dir, "state"), filepath.Join(dir, "*", "app.log")), r)
	waitScanned(t, rt)
	writeLog(t, filepath.Join(dir, "b", "app.log"), "in b\n")
	waitFor(t, "the file in a matching directory", func() bool { return r.count() == 1 })
	equalLines(t, r.data(), []string{"in b"})
	rt.stopOK(t)
}

// Without the watch, the scans find new files and the polls read them.
func TestTailerScanFallback(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(dir, "*.log"))
	cfg.DisableWatch = true
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	writeLog(t, filepath.Join(dir, "x.log"), "found by a scan\n")
	waitFor(t, "the line", func() bool { return r.count() == 1 })
	rt.stopOK(t)
}

func TestWatchDirs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b", "c"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeLog(t, filepath.Join(dir, "file"), "")
	j := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	for _, tc := range []struct {
		name    string
		globs   []string
		limit   int
		want    []string
		leftOut int
	}{
		{"plain path", []string{j("app.log")}, 10, []string{dir}, 0},
		{"pattern in the name", []string{j("*.log"), j("app.log")}, 10, []string{dir}, 0},
		{"missing directory", []string{j("missing", "x.log")}, 10, []string{j("missing")}, 0},
		{"wildcard directory: the directories it matches", []string{j("*", "x.log")}, 10, []string{j("a"), j("b"), j("c")}, 0},
		{"bounded", []string{j("*", "x.log"), j("y.log")}, 2, []string{dir, j("a")}, 2},
		{"unclean", []string{dir + "/./a/../b/x.log"}, 10, []string{j("b")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, left := watchDirs(tc.globs, tc.limit)
			if !slices.Equal(got, tc.want) || left != tc.leftOut {
				t.Fatalf("watchDirs = %q, %d; want %q, %d", got, left, tc.want, tc.leftOut)
			}
		})
	}
}

func TestWatchEvents(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fl := &follower{wake: make(chan struct{}, 1)}
	wakeAt := map[string][]*follower{dir + "/a.log": {fl}}
	d := &dirWatcher{
		patterns: []string{dir + "/*.log", dir + "/*/app.log"},
		dirPats:  []string{dir, dir + "/*"},
		wakeAt:   wakeAt,
	}
	woken := func() bool {
		select {
		case <-fl.wake:
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		ev         watchEvent
		scan, wake bool
	}{
		{watchEvent{Name: dir + "/a.log", Op: opWrite}, false, true},
		{watchEvent{Name: dir + "/other.log", Op: opWrite}, false, false},
		{watchEvent{Name: dir + "/new.log", Op: opCreate}, true, false},
		{watchEvent{Name: dir + "/a.log", Op: opRename}, true, false},
		{watchEvent{Name: dir + "/a.log", Op: opRemove}, true, false},
		{watchEvent{Name: dir + "/a.log.1", Op: opCreate}, false, false},
		{watchEvent{Name: dir + "/sub", Op: opCreate}, true, false}, // a new directory
		{watchEvent{Name: dir, Op: opRemove}, true, false},          // a watched one gone
		{watchEvent{Name: dir + "/sub/app.log", Op: opCreate}, true, false},
	} {
		t.Run(filepath.Base(tc.ev.Name)+" "+tc.ev.Op.String(), func(t *testing.T) {
			// As the reader does: a write wakes, anything else goes to Run.
			if tc.ev.Has(opWrite) {
				wakeWritten(&wakeAt, []byte(tc.ev.Name))
			} else if scan := d.onEvent(tc.ev); scan != tc.scan {
				t.Errorf("scan = %v, want %v", scan, tc.scan)
			}
			if w := woken(); w != tc.wake {
				t.Errorf("woken = %v, want %v", w, tc.wake)
			}
		})
	}

	// Lost events: everything is looked at again.
	tl := &Tailer{log: slog.New(slog.DiscardHandler)}
	if !tl.onWatchError(d, fmt.Errorf("read: %w", errEventOverflow)) || !woken() {
		t.Fatal("an overflow must rescan and wake every follower")
	}
	if tl.onWatchError(d, errors.New("some other error")) || woken() {
		t.Fatal("another error is only logged")
	}
}

// TestRenamedFileHoldsItsSuccessorUntilReadToTheEnd: a file renamed away (no longer matched by
// the globs) and then written once more, as a writer does before it reopens its log, keeps the
// file created at its name waiting until that last line is read: the predecessor is caught up
// only at an end it reached after its successor appeared, not at one it reached as soon as it
// was renamed.
func TestRenamedFileHoldsItsSuccessorUntilReadToTheEnd(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "one\n")
	r := &recorder{}
	cfg := watchOnlyConfig(state, path)
	// A gone file with no successor is released once idle for ReleaseIdle, which closes
	// caughtUp too: kept out of reach, so that only a successor can close it here.
	cfg.ReleaseIdle = time.Minute
	rt := startTailer(t, cfg, r)
	waitFor(t, "the first line", func() bool { return r.count() == 1 })
	rt.mu.Lock()
	old := rt.atPath[path]
	rt.mu.Unlock()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	// The rename is noticed and the follower passes its end knowing it, before the last write.
	waitFor(t, "the rename noticed", func() bool { return old.gone.Load() })
	for i := 0; i < 3; i++ {
		old.wakeUp()
		time.Sleep(20 * time.Millisecond) // passes of the follower's loop, each at its end
	}
	select {
	case <-old.caughtUp:
		t.Fatal("the renamed file counts as read to its end before any successor appeared")
	default:
	}
	appendLog(t, path+".1", "two\n")
	writeLog(t, path, "three\n")
	waitFor(t, "the rotated and the new file's lines", func() bool { return r.count() == 3 })
	equalLines(t, r.data(), []string{"one", "two", "three"})
	rt.stopOK(t)
}

// idleWaits records a Tailer's waits at its files' ends.
type idleWaits struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *idleWaits) add(d time.Duration) {
	w.mu.Lock()
	w.waits = append(w.waits, d)
	w.mu.Unlock()
}

// since returns the waits recorded after the first n.
func (w *idleWaits) since(n int) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits[min(n, len(w.waits)):]...)
}

func (w *idleWaits) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waits)
}

// TestTailerIdleFileWaitsLongerWhenWatched: a follower whose writes the watch reports waits
// longer and longer at the end of an idle file, up to the rescan interval, and the next write
// still reaches it at once (the watch wakes it); with the watch off it keeps polling every
// PollInterval.
func TestTailerIdleFileWaitsLongerWhenWatched(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprint("watch=", watch), func(t *testing.T) {
			_, path, state := testPaths(t)
			writeLog(t, path, "one\n")
			cfg := testConfig(state, path)
			cfg.RescanInterval = time.Hour // the wait's bound once watched: far beyond this test
			cfg.DisableWatch = !watch
			r := &recorder{}
			waits := &idleWaits{}
			startTailerPrepared(t, cfg, eachLine(r.handle), func(tl *Tailer) { tl.idleWaitHook = waits.add })
			waitFor(t, "the first line", func() bool { return r.count() == 1 })
			if watch {
				// Data puts the wait back to PollInterval; from there it doubles again.
				appendLog(t, path, "two\n")
				waitFor(t, "the second line", func() bool { return r.count() == 2 })
				// The wait in progress (the last one recorded) is 2 s or more: write now.
				var long time.Duration
				waitFor(t, "a wait of 2 s or more", func() bool {
					if w := waits.since(0); len(w) > 0 && w[len(w)-1] >= 2*time.Second {
						long = w[len(w)-1]
						return true
					}
					return false
				})
				written := time.Now()
				appendLog(t, path, "three\n")
				waitFor(t, "the line written during a long wait", func() bool { return r.count() == 3 })
				// Woken by the watch, not at the end of the wait: well before it would end.
				if took := r.snapshot()[2].at.Sub(written); took >= long/2 {
					t.Fatalf("the line written during a wait of %v was read %v later: the watch did not wake the follower", long, took)
				}
				return
			}
			from := waits.count()
			waitFor(t, "200 waits", func() bool { return waits.count() >= from+200 })
			for _, d := range waits.since(from) {
				if d != cfg.PollInterval {
					t.Fatalf("waited %v at the end of an unwatched file, want every wait %v", d, cfg.PollInterval)
				}
			}
		})
	}
}

// TestTailerRestsFromEventsOnlyWhenTheyComeOften: a file written in bursts far apart costs no
// rest from the watch's events (each rest's end is a wake of Run, and there is nothing to
// merge), while a file written line by line does make Run rest, so that the kernel merges
// its writes; every line is read in both.
func TestTailerRestsFromEventsOnlyWhenTheyComeOften(t *testing.T) {
	_, path, state := testPaths(t)
	writeLog(t, path, "")
	cfg := testConfig(state, path)
	cfg.RescanInterval = time.Hour
	r := &recorder{}
	var rests atomic.Int64
	startTailerPrepared(t, cfg, eachLine(r.handle), func(tl *Tailer) { tl.watchRestHook = func() { rests.Add(1) } })
	lines := 0
	for range 5 {
		time.Sleep(2 * watchQuiet) // the writer's pace, not a wait for the tailer
		appendLog(t, path, "burst\n")
		lines++
		waitFor(t, "the burst's line", func() bool { return r.count() == lines })
	}
	if n := rests.Load(); n != 0 {
		t.Fatalf("Run rested %d times for bursts %v apart, want none", n, 2*watchQuiet)
	}
	// Lines written one after the other: rounds of 200, as many as a loaded machine needs for
	// some of them to come within watchQuiet of each other (one round on an idle one).
	for round := 0; rests.Load() == 0; round++ {
		if round == 10 {
			t.Fatalf("Run took every event of %d lines written line by line: it never rested", lines)
		}
		for range 200 {
			appendLog(t, path, "line\n")
			lines++
		}
		waitFor(t, "every line written line by line", func() bool { return r.count() == lines })
	}
}

// TestWatchedDirectoryDeletedAndCreatedAgain: a watched directory that is deleted stops being
// watched (so its followers do not wait for events that cannot come); once it exists again,
// the next sync watches it again.
func TestWatchedDirectoryDeletedAndCreatedAgain(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	globs := []string{filepath.Join(sub, "*.log")}
	tl, err := NewTailer(testConfig(filepath.Join(dir, "state"), globs[0]), eachLine((&recorder{}).handle), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	d := tl.newDirWatcher()
	defer d.close()
	if d.w == nil {
		t.Fatal("no inotify watch")
	}
	tl.syncWatches(d, globs)
	if !d.w.has(sub) {
		t.Fatalf("%s not watched after the first sync", sub)
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	// The reader takes the deletion; Run would take its event (here nobody does: drained).
	go func() {
		for range d.w.events {
		}
	}()
	waitFor(t, "the deleted directory's watch gone", func() bool { return !d.w.has(sub) })
	tl.syncWatches(d, globs)
	if d.w.has(sub) || slices.Contains(d.w.dirs(), sub) {
		t.Fatalf("%s counted as watched while it does not exist", sub)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	tl.syncWatches(d, globs)
	if !d.w.has(sub) {
		t.Fatalf("%s not watched again once created again", sub)
	}
}
