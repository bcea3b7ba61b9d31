package filetail

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// nextEvent returns the watch's next event, failing after a deadline.
func nextEvent(t *testing.T, w *inotifyWatch) watchEvent {
	t.Helper()
	select {
	case ev, ok := <-w.events:
		if !ok {
			t.Fatal("the watch's reader ended")
		}
		return ev
	case err := <-w.errs:
		t.Fatalf("watch error: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return watchEvent{}
}

// TestInotifyWatch: on a real inotify instance, names created, renamed and removed in a watched
// directory come to Run as events with their paths; a write to a followed name wakes its
// follower from the reader and never comes as an event; a watched directory deleted is an
// event and is no longer watched; close ends the reader and closes its channels, and no
// syscall reaches the descriptor after it.
func TestInotifyWatch(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newInotifyWatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	for _, d := range []string{dir, sub} {
		if err := w.add(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.add(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("watching a missing directory: %v, want os.ErrNotExist", err)
	}
	path := filepath.Join(dir, "a.log")
	fl := &follower{wake: make(chan struct{}, 1)}
	w.setWakeAt(map[string][]*follower{path: {fl}})

	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev != (watchEvent{path, opCreate}) {
		t.Fatalf("create: %+v", ev)
	}
	for i := range 3 {
		appendLog(t, path, "line "+strconv.Itoa(i)+"\n")
		select {
		case <-fl.wake:
		case ev := <-w.events:
			t.Fatalf("a write came to Run: %+v", ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d woke no follower", i)
		}
		if !fl.watched.Load() {
			t.Fatal("a woken follower does not know its writes are reported")
		}
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev != (watchEvent{path, opRename}) {
		t.Fatalf("rename, old name: %+v", ev)
	}
	if ev := nextEvent(t, w); ev != (watchEvent{path + ".1", opCreate}) {
		t.Fatalf("rename, new name: %+v", ev)
	}
	if err := os.Remove(path + ".1"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev != (watchEvent{path + ".1", opRemove}) {
		t.Fatalf("remove: %+v", ev)
	}

	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	// The parent reports the name removed, the directory itself its deletion.
	got := map[watchEvent]bool{nextEvent(t, w): true, nextEvent(t, w): true}
	if !got[watchEvent{sub, opRemove}] || len(got) != 1 {
		t.Fatalf("a watched directory deleted: %v, want only %v", got, watchEvent{sub, opRemove})
	}
	waitFor(t, "the deleted directory no longer watched", func() bool { return !w.has(sub) })
	if !w.has(dir) {
		t.Fatal("the parent is no longer watched")
	}

	w.close()
	if _, ok := <-w.events; ok {
		t.Fatal("events still open after close")
	}
	if _, ok := <-w.errs; ok {
		t.Fatal("errs still open after close")
	}
	// A closed watch's descriptor number may be another file's by now: nothing reaches it.
	if err := w.add(dir); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("add after close: %v, want os.ErrClosed", err)
	}
}

// TestInotifyWatchOverflow: events the kernel could not queue are reported as errEventOverflow
// (Run then rescans and wakes every follower), and the watch goes on.
func TestInotifyWatchOverflow(t *testing.T) {
	dir := t.TempDir()
	w, err := newInotifyWatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.add(dir); err != nil {
		t.Fatal(err)
	}
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if n, err := strconv.Atoi(string(b[:len(b)-1])); err == nil {
			limit = n
		}
	}
	// Nothing takes the events: the reader blocks on its first, and the kernel's queue fills.
	for i := range limit + 100 {
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-w.events:
			continue
		case err := <-w.errs:
			if !errors.Is(err, errEventOverflow) {
				t.Fatalf("error %v, want errEventOverflow", err)
			}
		case <-deadline:
			t.Fatal("no overflow reported")
		}
		break
	}
	// Events after it still come.
	for {
		select {
		case <-w.events:
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	if err := os.WriteFile(filepath.Join(dir, "after"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev != (watchEvent{filepath.Join(dir, "after"), opCreate}) {
		t.Fatalf("after the overflow: %+v", ev)
	}
}
