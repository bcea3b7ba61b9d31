package filetail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The watch: inotify on the directories of the globs tells Run's goroutine when a name the
// globs match is created, renamed or removed (scan now), and the watch's reader wakes a
// followed file's follower when the file is written or truncated (inotify.go). The periodic
// scan and the followers' polls stay: they are what a filesystem without inotify, a directory
// that could not be watched, a directory beyond Config.MaxWatches, a directory created after
// the last scan and a lost event (the kernel's queue overflowed: a rescan and every follower
// woken) fall back on.
// An event only makes something happen sooner; no decision is taken from an event's content,
// so a missed or spurious one costs at most a scan interval or one extra scan.

// After a read of events that came within watchQuiet of the read before, the watch's reader
// reads nothing for watchRest, and the kernel queues the events meanwhile, merging each run
// of identical ones (the writes to one file): a file written line by line costs one event, one
// wake and one read per watchRest rather than per write (an event taken per write costs more
// than the reads it saves). A first event after a quiet time is taken at once, so a new file
// is still seen when it appears, and needs no rest after it: a log written in bursts (every
// 100 ms, say) would pay a wake for the rest's end per burst and merge nothing. In a storm, at
// most one scan per watchRest is made for events (and a queue overflow rescans).
const (
	watchRest  = 5 * time.Millisecond
	watchQuiet = 10 * watchRest
)

// watchDrain bounds the events taken, once one arrived, before acting on them.
const watchDrain = 64

// dirWatcher is the inotify side of discovery. Run's goroutine only, but for the watch's own
// reader goroutine, which close stops.
type dirWatcher struct {
	w        *inotifyWatch // nil: scans only; it knows which directories are watched now
	patterns []string      // the globs, cleaned as event names are
	dirPats  []string      // their directory parts: an event on one of these may be a new or gone directory
	// linkDirs are the watched directories that followed names which are symbolic links point
	// into (linkTargetDirs): a name created, renamed or removed in one asks for a scan, since
	// the link's own directory does not change when its target is renamed and replaced (the
	// kubelet's rotation).
	linkDirs map[string]bool
	failed   map[string]string // directory -> why it is not watched, logged once
	leftOut  int               // directories beyond the bound at the last sync, logged when it changes
	lastErr  string            // the last other watch error, logged once until it changes
	// wakeAt is which followers read each name, as mapFollowers last made it: published to the
	// reader, which wakes them on a write, and never modified once made.
	wakeAt map[string][]*follower
}

// newDirWatcher opens an inotify instance, or returns a dirWatcher that watches nothing (the
// scans do all the work) when watching is off or the system refuses one.
func (t *Tailer) newDirWatcher() *dirWatcher {
	d := &dirWatcher{failed: make(map[string]string)}
	if t.cfg.DisableWatch {
		return d
	}
	w, err := newInotifyWatch(t.watchRestHook)
	if err != nil {
		t.log.Warn("cannot watch directories: new files are found by the periodic scan only",
			"rescan_interval", t.cfg.RescanInterval, "err", err)
		return d
	}
	d.w = w
	return d
}

// events and errs are nil channels (never ready) when nothing is watched.
func (d *dirWatcher) events() chan watchEvent {
	if d.w == nil {
		return nil
	}
	return d.w.events
}

func (d *dirWatcher) errs() chan error {
	if d.w == nil {
		return nil
	}
	return d.w.errs
}

// close stops the watch's reader and releases the inotify descriptor.
func (d *dirWatcher) close() {
	if d.w != nil {
		d.w.close()
	}
}

// watchDirs returns the directories to watch for globs, sorted, at most limit of them, and how
// many more there were. A glob whose directory part has no wildcard gives that directory; one
// with wildcards gives the directories it matches now (a directory created later is found by a
// scan, and watched from then on).
func watchDirs(globs []string, limit int) (dirs []string, leftOut int) {
	for _, g := range globs {
		dir := filepath.Dir(filepath.Clean(g))
		if !hasMeta(dir) {
			dirs = append(dirs, dir)
			continue
		}
		m, _ := filepath.Glob(dir) // validated patterns: no ErrBadPattern
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				dirs = append(dirs, p)
			}
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	if len(dirs) > limit {
		return dirs[:limit], len(dirs) - limit
	}
	return dirs, 0
}

// hasMeta reports whether path holds a character filepath.Match treats specially.
func hasMeta(path string) bool { return strings.ContainsAny(path, `*?[\`) }

// syncWatches watches the directories the globs need now and drops the others. Run's
// goroutine, before each scan: a file created after its directory's watch was added makes an
// event, one created before is seen by the scan, so none waits for the next scan.
func (t *Tailer) syncWatches(d *dirWatcher, globs []string) {
	if d.w == nil {
		return
	}
	d.patterns = d.patterns[:0]
	d.dirPats = d.dirPats[:0]
	for _, g := range globs {
		g = filepath.Clean(g)
		d.patterns = append(d.patterns, g)
		d.dirPats = append(d.dirPats, filepath.Dir(g))
	}
	dirs, leftOut := watchDirs(globs, t.cfg.MaxWatches)
	clear(d.linkDirs)
	if d.linkDirs == nil {
		d.linkDirs = make(map[string]bool)
	}
	for _, dir := range t.linkTargetDirs() {
		if _, ok := slices.BinarySearch(dirs, dir); ok {
			continue
		}
		if len(dirs)+len(d.linkDirs) >= t.cfg.MaxWatches {
			leftOut++
			continue
		}
		d.linkDirs[dir] = true
	}
	for dir := range d.linkDirs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	if leftOut != d.leftOut {
		if leftOut > 0 {
			t.log.Warn("more directories than max watches: the ones left out are found by the periodic scan only",
				"max_watches", t.cfg.MaxWatches, "left_out", leftOut, "rescan_interval", t.cfg.RescanInterval)
		}
		d.leftOut = leftOut
	}
	for _, dir := range d.w.dirs() {
		if _, ok := slices.BinarySearch(dirs, dir); !ok {
			d.w.remove(dir) // no longer matched
		}
	}
	for dir := range d.failed {
		if _, ok := slices.BinarySearch(dirs, dir); !ok {
			delete(d.failed, dir) // bounded by the directories the globs need
		}
	}
	for _, dir := range dirs {
		if d.w.has(dir) {
			continue // (one deleted or moved away since is no longer: watched again if it exists)
		}
		if err := d.w.add(dir); err != nil {
			// A directory that does not exist yet is the scan's to find; any other reason
			// (the inotify watch limit, permissions) is logged once.
			if !errors.Is(err, os.ErrNotExist) && d.failed[dir] != err.Error() {
				t.log.Warn("cannot watch directory: its new files are found by the periodic scan only",
					"dir", dir, "rescan_interval", t.cfg.RescanInterval, "err", err)
			}
			d.failed[dir] = err.Error()
			continue
		}
		delete(d.failed, dir)
	}
}

// linkTargetDirs returns the directories that the followed names which are symbolic links point
// into now, sorted: an Lstat of each followed name, and the resolution of each link.
func (t *Tailer) linkTargetDirs() []string {
	var dirs []string
	for _, p := range t.followedPaths() {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if target, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(target))
		} else if dir, ok := danglingTargetDir(p); ok {
			// Between a rotation's rename and its create the link points at nothing: its
			// target's directory stays watched, or the create that ends the gap is never seen.
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// danglingTargetDir returns the directory a symbolic link whose target does not exist points
// into, when that directory exists (resolved itself: it may be reached through other links).
func danglingTargetDir(link string) (string, bool) {
	target, err := os.Readlink(link)
	if err != nil {
		return "", false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(link), target)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(target))
	if err != nil {
		return "", false
	}
	return dir, true
}

// followedPaths returns the current names of the followed files.
func (t *Tailer) followedPaths() []string {
	t.mu.Lock()
	fls := make([]*follower, 0, len(t.followers))
	for _, fl := range t.followers {
		fls = append(fls, fl)
	}
	t.mu.Unlock()
	paths := make([]string, 0, len(fls))
	for _, fl := range fls {
		paths = append(paths, fl.currentPath())
	}
	return paths
}

// mapFollowers records which followers read each name, so that a write event wakes them. Run's
// goroutine, after each scan (which is what starts followers and notices renames). The events
// that arrived meanwhile are handled after it, on the same goroutine.
func (t *Tailer) mapFollowers(d *dirWatcher) {
	if d.w == nil {
		return
	}
	t.mu.Lock()
	fls := make([]*follower, 0, len(t.followers))
	for _, fl := range t.followers {
		fls = append(fls, fl)
	}
	t.mu.Unlock()
	d.wakeAt = make(map[string][]*follower, len(fls))
	watchedNow := make([]bool, len(fls))
	for i, fl := range fls {
		p := filepath.Clean(fl.currentPath())
		d.wakeAt[p] = append(d.wakeAt[p], fl)
		watched := d.w.has(filepath.Dir(p))
		if len(d.linkDirs) > 0 {
			// A link's writes are its target's: the event names the target.
			if target, err := filepath.EvalSymlinks(p); err == nil && target != p {
				watched = d.w.has(filepath.Dir(target))
				if watched {
					d.wakeAt[target] = append(d.wakeAt[target], fl)
				}
			}
		}
		watchedNow[i] = watched
	}
	// Published before any follower is told its writes are reported: from then on a write
	// wakes it.
	d.w.setWakeAt(d.wakeAt)
	for i, fl := range fls {
		fl.watched.Store(watchedNow[i])
	}
}

// onEvent reports whether an event asks for a scan: a name the globs match (or a directory
// their directory parts match) was created, renamed or removed. (Writes never come here: the
// reader wakes their followers itself, wakeWritten.)
func (d *dirWatcher) onEvent(ev watchEvent) (scan bool) {
	if !ev.Has(opCreate) && !ev.Has(opRename) && !ev.Has(opRemove) {
		return false
	}
	if d.linkDirs[filepath.Dir(ev.Name)] {
		return true // a followed link's target may have been renamed or replaced
	}
	for i, g := range d.patterns {
		if ok, _ := filepath.Match(g, ev.Name); ok {
			return true
		}
		if ok, _ := filepath.Match(d.dirPats[i], ev.Name); ok && (!ev.Has(opCreate) || isDir(ev.Name)) {
			return true // a watched directory went away, or one the globs need appeared
		}
	}
	return false
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// onWatchError reports whether a watch error asks for a rescan and a wake of every follower (events
// were lost), and logs any other error once until it changes.
func (t *Tailer) onWatchError(d *dirWatcher, err error) (lost bool) {
	if errors.Is(err, errEventOverflow) {
		t.log.Warn("file events lost (inotify queue overflow): rescanning", "err", err)
		for _, fls := range d.wakeAt {
			for _, fl := range fls {
				fl.wakeUp()
			}
		}
		return true
	}
	if d.lastErr != err.Error() {
		t.log.Warn("watching directories", "err", err)
		d.lastErr = err.Error()
	}
	return false
}
