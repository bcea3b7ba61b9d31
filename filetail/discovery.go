package filetail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Discovery: the scans of Run's goroutine match the globs, start a follower for each file found
// (from its checkpoint, its start position, or the beginning) and recover, at the first scan,
// the checkpointed files renamed while the agent was stopped.

// match returns the paths the globs match now, sorted and without duplicates.
func (t *Tailer) match() []string {
	var paths []string
	for _, g := range t.currentGlobs() {
		m, _ := filepath.Glob(g) // the patterns were validated: no ErrBadPattern
		paths = append(paths, m...)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// currentGlobs are the patterns followed now: the configured ones, or SetGlobs's.
func (t *Tailer) currentGlobs() []string {
	if g := t.globs.Load(); g != nil {
		return *g
	}
	return t.cfg.Globs
}

// warnOnce logs a problem with path once, until the problem changes or goes away.
func (t *Tailer) warnOnce(path, problem string, attrs ...any) {
	if t.warned[path] == problem {
		return
	}
	t.warned[path] = problem
	t.log.Warn(problem, append([]any{"path", path}, attrs...)...)
}

// scan matches the globs, starts a follower for each new file, tells the others whether the
// globs still match them, and prunes checkpoints of files gone for good. Run's goroutine only.
func (t *Tailer) scan(ctx context.Context) {
	type found struct {
		path string
		key  FileKey
	}
	var files []found
	paths := t.match()
	for p := range t.warned {
		if _, ok := slices.BinarySearch(paths, p); !ok {
			delete(t.warned, p) // bounded by the names the globs match; warn again if it comes back
		}
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // gone since the glob: the next scan decides
				t.warnOnce(p, "cannot stat file", "err", err)
			}
			continue
		}
		if !fi.Mode().IsRegular() {
			t.warnOnce(p, "not a regular file: not followed", "mode", fi.Mode().String())
			continue
		}
		k, ok := statKey(fi)
		if !ok {
			continue
		}
		files = append(files, found{p, k})
	}

	t.mu.Lock()
	first := !t.scanned
	t.scanned = true
	t.mu.Unlock()

	// One file may have several matching names (symbolic or hard links): one follower each.
	names := make(map[FileKey][]string, len(files))
	matched := make(map[FileKey]bool, len(files))
	for _, f := range files {
		names[f.key] = append(names[f.key], f.path)
		matched[f.key] = true
	}
	if first {
		// Files the checkpoint knows that the globs no longer match (renamed while the agent
		// was stopped) are read to their end first, so the files that replaced them come after.
		t.recoverRenamed(ctx, matched)
	}
	for _, f := range files {
		if ns := names[f.key]; ns[0] == f.path {
			t.consider(ctx, ns, f.key, first)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	for k, fl := range t.followers {
		if gone := !matched[k]; fl.gone.Swap(gone) != gone && gone {
			fl.wakeUp() // it has its end to find: not at its next poll
		}
	}
	for k, e := range t.saved {
		if !stillAt(e.Path, k) {
			delete(t.saved, k)
		}
	}
}

// stillAt reports whether the file at path is the one with key k.
func stillAt(path string, k FileKey) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	got, ok := statKey(fi)
	return ok && got == k
}

// consider starts following the file with key k found at names (sorted), unless it is followed
// already: then it may have been renamed, and its path is updated.
func (t *Tailer) consider(ctx context.Context, names []string, k FileKey, first bool) {
	t.mu.Lock()
	fl := t.followers[k]
	t.mu.Unlock()
	if fl != nil {
		if cur := fl.currentPath(); !slices.Contains(names, cur) {
			fl.setPath(names[0])
			t.log.Info("file renamed", "from", cur, "to", names[0], "file", fl.identity().String())
		}
		t.mu.Lock()
		for _, n := range names {
			t.atPath[n] = fl
		}
		t.mu.Unlock()
		return
	}
	path := names[0]
	fd, err := os.Open(path)
	if err != nil {
		t.warnOnce(path, "cannot open file", "err", err)
		return
	}
	id, fi, err := identify(fd, t.cfg.FingerprintBytes)
	if err != nil || !fi.Mode().IsRegular() || id.Key() != k {
		// Replaced between the stat and the open: the next scan sees what is there now.
		fd.Close()
		if err != nil {
			t.warnOnce(path, "cannot read file", "err", err)
		}
		return
	}
	delete(t.warned, path)

	t.mu.Lock()
	defer t.mu.Unlock()
	start, why, decided := t.startOffsetLocked(fd, fi.Size(), id, path, first)
	fl = t.newFollowerLocked(fd, path, id, start, decided)
	// A file that replaced another under the same name (rename rotation) waits until the old one
	// was read to its end, so the lines of one name keep their order across a rotation. The old
	// one waits for its own predecessor in turn.
	if old := t.atPath[path]; old != nil && old.key != fl.key {
		old.succeeded.Store(true)
		old.wakeUp() // its end releases this one: find it now, not at its next poll
		fl.after = old.caughtUp
	}
	for _, n := range names {
		t.atPath[n] = fl
	}
	t.log.Info("following file", "path", path, "file", id.String(), "offset", start, "from", why, "size", fi.Size())
	t.startLocked(ctx, fl)
}

// startOffsetLocked decides where a newly found file starts, why, and, from its checkpoint, the
// container format auto decided for it before ("" if none).
func (t *Tailer) startOffsetLocked(fd *os.File, size int64, id FileID, path string, first bool) (int64, string, ContainerFormat) {
	k := id.Key()
	if e, ok := t.saved[k]; ok {
		delete(t.saved, k) // the follower owns this file's checkpoint now
		saved, _ := e.FileID()
		if same, err := sameFile(fd, size, saved); err == nil && same {
			if e.Offset > size {
				t.log.Warn("file is shorter than its checkpoint (truncated while the agent was stopped): reading it from the beginning",
					"path", path, "checkpoint", e.Offset, "size", size)
				return 0, "beginning (truncated while stopped)", ""
			}
			return e.Offset, "checkpoint", e.ContainerFormat
		}
		t.log.Info("inode reused by another file: its old checkpoint does not apply",
			"path", path, "old", e.ID, "new", id.String())
		return 0, "beginning (new file on a reused inode)", ""
	}
	if !first {
		return 0, "beginning (new file)", ""
	}
	if t.loadedPaths[path] {
		return 0, "beginning (replaced the checkpointed file while the agent was stopped)", ""
	}
	if t.cfg.StartAt == StartAtEnd {
		off, err := lastLineEnd(fd, size, t.cfg.MaxLineBytes)
		if err != nil {
			t.log.Warn("cannot find the last line: starting at the end", "path", path, "err", err)
			off = size
		}
		return off, "end (start-at)", ""
	}
	return 0, "beginning (start-at)", ""
}

// lastLineEnd returns the offset just after the last newline of the file's last limit bytes, or
// size when there is none (start-at=end skips what is there, even a line still being written).
func lastLineEnd(f io.ReaderAt, size int64, limit int) (int64, error) {
	buf := make([]byte, min(64<<10, max(limit, 1)))
	for end := size; end > 0 && size-end < int64(limit); {
		n := int64(len(buf))
		if n > end {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil && !errors.Is(err, io.EOF) {
			return size, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return size, nil
}

// recoverRenamed looks for the files of checkpoint entries the globs no longer match: at their
// recorded path, or renamed within its directory (logrotate ran while the agent was stopped). A
// file found with bytes past its checkpoint is read to its end and released, as if it had been
// rotated while followed. Run's goroutine only, at the first scan.
func (t *Tailer) recoverRenamed(ctx context.Context, matched map[FileKey]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.saved {
		if matched[k] {
			continue
		}
		path, ok := findByKey(e.Path, k)
		if !ok {
			delete(t.saved, k)
			continue
		}
		formerPath := e.Path
		e.Path = path // it stays known under its new name
		t.saved[k] = e
		fd, err := os.Open(path)
		if err != nil {
			continue
		}
		id, fi, err := identify(fd, t.cfg.FingerprintBytes)
		saved, _ := e.FileID()
		same := false
		if err == nil && id.Key() == k {
			same, err = sameFile(fd, fi.Size(), saved)
		}
		if err != nil || !same || fi.Size() <= e.Offset {
			fd.Close()
			if err == nil && !same {
				delete(t.saved, k) // its inode holds another file now
			}
			continue
		}
		delete(t.saved, k)
		fl := t.newFollowerLocked(fd, path, id, e.Offset, e.ContainerFormat)
		fl.gone.Store(true)
		t.atPath[formerPath] = fl
		t.log.Info("file renamed while the agent was stopped: reading it to its end",
			"path", path, "was", formerPath, "file", id.String(), "offset", e.Offset, "size", fi.Size())
		t.startLocked(ctx, fl)
	}
}

// findByKey finds the file with key k: at path, or under another name in path's directory, or,
// when path is a symbolic link, in the directory it points into now. The kubelet's
// /var/log/containers/<pod>_<ns>_<container>-<id>.log links to /var/log/pods/…/0.log, and its
// rotation renames 0.log to 0.log.<time> there: a restart must find the renamed file in the
// link's target directory, not in the link's own.
func findByKey(path string, k FileKey) (string, bool) {
	if stillAt(path, k) {
		return path, true
	}
	dirs := []string{filepath.Dir(path)}
	if target, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(target) != dirs[0] {
		dirs = append(dirs, filepath.Dir(target))
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, de := range entries {
			if !de.Type().IsRegular() {
				continue
			}
			p := filepath.Join(dir, de.Name())
			if stillAt(p, k) {
				return p, true
			}
		}
	}
	return "", false
}

func (t *Tailer) startLocked(ctx context.Context, fl *follower) {
	t.followers[fl.key] = fl
	t.wg.Add(1)
	go fl.run(ctx)
}
