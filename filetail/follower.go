package filetail

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// follower reads one file (one open descriptor: the inode, whatever its name becomes) from its
// start offset, hands its lines to the Tailer's handler and notices when it is truncated,
// replaced in place, renamed away or deleted. Its goroutine is owned by Tailer.Run and stops when
// Run's context ends or once its file is released.
type follower struct {
	t   *Tailer
	fd  *os.File
	key FileKey
	log *slog.Logger

	mu   sync.Mutex
	path string // current name, updated by the scans
	id   FileID // current identity: the fingerprint lengthens as the file grows
	// file is the current generation: a new one after each copytruncate. Only the follower's
	// goroutine writes it (under mu): that goroutine reads it without mu, every other under mu.
	file *File

	// gone is set by the scans when the globs do not match the file any more.
	gone atomic.Bool
	// succeeded is set when a new file appeared at this file's name; caughtUp is closed the first
	// time the follower is at the end of its file after that (or when it exits), releasing the
	// successor (after).
	succeeded  atomic.Bool
	caughtUp   chan struct{}
	caughtOnce sync.Once
	after      <-chan struct{}

	// wake is signalled (never blocking, one pending at most) when the watch saw the file
	// written or truncated: the follower reads now rather than at the end of its poll.
	wake chan struct{}
	// watched is set while the watch reports the file's writes (its directory is watched):
	// the follower may then wait longer at the end of an idle file.
	watched atomic.Bool

	readPos, size atomic.Int64
	// format is the container format the splitter decodes (auto decides at the first line),
	// for Stats; seenFormat is the follower goroutine's last stored value.
	format     atomic.Value // ContainerFormat
	seenFormat ContainerFormat
	auto       bool  // the configured format is auto: what it decided goes in the checkpoint
	start      int64 // where this run began reading the file (Tailer.Starts)
	counts     fileCounters
	failLogged atomic.Bool
	split      *Splitter // the follower goroutine's own
}

// newFollowerLocked makes the follower of the file at path from offset start; decided is what
// auto decided for it before (its checkpoint's), "" if nothing.
func (t *Tailer) newFollowerLocked(fd *os.File, path string, id FileID, start int64, decided ContainerFormat) *follower {
	fl := &follower{
		t: t, fd: fd, key: id.Key(), path: path, id: id,
		log:      t.log,
		caughtUp: make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	fl.auto = t.cfg.ContainerFormat.ForPath(path) == ContainerAuto
	format := t.cfg.ContainerFormat.ForPath(path)
	if fl.auto && (decided == ContainerCRI || decided == ContainerDocker) {
		format = decided
	}
	fl.split = t.cfg.splitter(start, format, &fl.counts.container, &t.totals.container)
	fl.noteFormat()
	fl.file = newFile(path, id, start, &fl.counts, &t.totals, &fl.failLogged, t.idle, t.clock, t.log)
	fl.file.countAtCommit = t.cfg.CommittedOnly
	fl.readPos.Store(start)
	fl.start = start
	return fl
}

func (fl *follower) setPath(path string) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.path = path
}

// state returns the file's current name, identity and File: the scans rename it, and the
// follower's goroutine lengthens its fingerprint and starts a new File, under mu.
func (fl *follower) state() (path string, id FileID, f *File) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.path, fl.id, fl.file
}

func (fl *follower) currentPath() string { path, _, _ := fl.state(); return path }
func (fl *follower) identity() FileID    { _, id, _ := fl.state(); return id }
func (fl *follower) current() *File      { _, _, f := fl.state(); return f }

func (fl *follower) entry(now time.Time) Checkpoint {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	e := newCheckpoint(fl.id, fl.path, fl.file.Committed(), now)
	if f, _ := fl.format.Load().(ContainerFormat); fl.auto && (f == ContainerCRI || f == ContainerDocker) {
		e.ContainerFormat = f
	}
	return e
}

func (fl *follower) stats() FileStats {
	path, id, f := fl.state()
	c := &fl.counts
	s := FileStats{
		Path: path, ID: id,
		Size: fl.size.Load(), ReadOffset: fl.readPos.Load(), Committed: f.Committed(),
		InFlight:      f.acks.inFlight(),
		OldestUnacked: f.OldestUnacked(),
		LinesRead:     c.linesRead.Load(), LinesAcked: c.linesAcked.Load(), LinesFailed: c.linesFailed.Load(),
		LinesDeadLettered: c.linesDeadLettered.Load(),
		Truncated:         c.long.Truncated.Load(), Split: c.long.Split.Load(), Dropped: c.long.Dropped.Load(),
		Truncations: c.truncations.Load(),
		Gone:        fl.gone.Load(),
		Container: ContainerStats{
			Format: fl.format.Load().(ContainerFormat),
			Joined: c.container.Joined.Load(), Malformed: c.container.Malformed.Load(), Interrupted: c.container.Interrupted.Load(),
		},
	}
	if committedOf := fl.t.cfg.CommittedOf; committedOf != nil {
		// Exactly-once: what a transaction committed, else where this File started (where a
		// restart without a committed position begins again).
		if off, ok := committedOf(id.Key()); ok {
			s.Committed = min(off, s.Committed) // the File's own prefix after a copytruncate
		} else {
			s.Committed = f.start
		}
	}
	s.BytesBehind = max(0, s.Size-s.Committed)
	return s
}

// noteFormat publishes the splitter's container format when it changed (auto decided).
func (fl *follower) noteFormat() {
	if f := fl.split.ContainerFormat(); f != fl.seenFormat || fl.format.Load() == nil {
		fl.seenFormat = f
		fl.format.Store(f)
	}
}

func (fl *follower) markCaughtUp() { fl.caughtOnce.Do(func() { close(fl.caughtUp) }) }

// run is the follower goroutine.
func (fl *follower) run(ctx context.Context) {
	defer fl.t.wg.Done()
	released, deleted, err := fl.follow(ctx)
	var path string
	if released && !deleted {
		path = fl.procPath()
	}
	fl.fd.Close()
	fl.markCaughtUp()
	if err != nil {
		fl.t.fail(err)
		return
	}
	if released {
		f := fl.current()
		fl.log.Info("file released: read to its end and acknowledged", "path", fl.currentPath(),
			"deleted", deleted, "committed", f.Committed(), "failed", fl.counts.linesFailed.Load())
		fl.t.release(fl, deleted, path)
	}
	// Stopped by the context: the follower stays in the Tailer's map, so that SaveCheckpoints
	// after Run still records the acknowledgements that arrive while the producer flushes.
}

// procPath is the file's current name as the kernel knows it (it may have been renamed out of
// the globs), or "" if it has none.
func (fl *follower) procPath() string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fl.fd.Fd())))
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return ""
	}
	return p
}

// follow reads the file until ctx ends (false, false, nil), the handler fails (its error), or the
// file is released (true, whether it was deleted, nil).
func (fl *follower) follow(ctx context.Context) (released, deleted bool, err error) {
	cfg := &fl.t.cfg
	if fl.after != nil {
		select {
		case <-fl.after:
		case <-ctx.Done():
		}
	}
	sink := followerSink{fl: fl, ctx: ctx}
	lastData := fl.t.now()
	// idlePoll is the next wait at the end of the file. While the watch reports the file's
	// writes (a write wakes the follower at once), each wait that found nothing new
	// doubles it, up to the rescan interval: an idle file is looked at once a rescan interval,
	// not ten times a second, and a write the watch did not report is still seen within one.
	// Data puts it back to PollInterval.
	idlePoll := cfg.PollInterval
	maxIdlePoll := max(cfg.PollInterval, cfg.RescanInterval)
	var lastMod time.Time // modification time when the fingerprint was last compared at the end
	waited := true        // look at the fingerprint on the first pass
	readFailed := false   // a read or stat error was logged and has not cleared yet
	for ctx.Err() == nil {
		// Read the flags before the stat: they are set after the rename that ends the file's
		// writes, so a stat taken after loading them sees every byte written before. Loaded
		// after the stat, they could be newer than its size and the end would come too early.
		gone, succeeded := fl.gone.Load(), fl.succeeded.Load()
		fi, err := fl.fd.Stat()
		if err != nil {
			if !readFailed {
				fl.log.Warn("cannot stat open file: retrying", "path", fl.currentPath(), "err", err)
			}
			readFailed = true
			if !fl.sleep(ctx, cfg.PollInterval) {
				break
			}
			continue
		}
		size, pos := fi.Size(), fl.readPos.Load()
		fl.size.Store(size)
		if size < pos {
			if err := fl.restart(sink, "file shrank below the read offset (truncated, e.g. copytruncate)", pos, size); err != nil {
				return false, false, err
			}
			continue
		}
		if size > pos {
			if waited || fl.identity().FingerprintLen < min(int(size), cfg.FingerprintBytes) {
				replaced, err := fl.checkFingerprint(size)
				if err != nil {
					fl.log.Warn("cannot read file", "path", fl.currentPath(), "err", err)
				} else if replaced {
					if err := fl.restart(sink, "file's first bytes changed (truncated and rewritten)", pos, size); err != nil {
						return false, false, err
					}
					continue
				}
			}
			waited = false
			n, rewritten, rerr, herr := fl.readAvailable(ctx, sink, fi.ModTime())
			if herr != nil {
				if ctx.Err() != nil {
					break
				}
				return false, false, herr
			}
			if rewritten {
				if err := fl.restart(sink, "file's first bytes changed while reading it (truncated and rewritten)", fl.readPos.Load(), size); err != nil {
					return false, false, err
				}
				continue
			}
			if n > 0 {
				lastData = fl.t.now()
				idlePoll = cfg.PollInterval
			}
			if rerr != nil {
				fl.markCaughtUp() // a file that cannot be read must not hold its successor back
				if !readFailed {
					fl.log.Warn("cannot read file: retrying", "path", fl.currentPath(), "offset", fl.readPos.Load(), "err", rerr)
				}
				readFailed = true
				if !fl.sleep(ctx, cfg.PollInterval) {
					break
				}
				waited = true
				continue
			}
			readFailed = false
			continue
		}

		// At the end of the file. A copytruncate whose new content has already grown back to
		// the read offset shows no shrink; the modification time moved, though, so look at the
		// first bytes again: if they changed, the file was truncated and rewritten.
		if mod := fi.ModTime(); !mod.Equal(lastMod) {
			if !lastMod.IsZero() && pos > 0 {
				replaced, err := fl.checkFingerprint(size)
				if err == nil && replaced {
					if err := fl.restart(sink, "file's first bytes changed (truncated and rewritten to the same size)", pos, size); err != nil {
						return false, false, err
					}
					continue
				}
			}
			lastMod = mod
		}
		idle := fl.t.now().Sub(lastData)
		if fl.split.Pending() && idle >= cfg.PartialLineIdle {
			if _, err := fl.split.Flush(sink); err != nil {
				if ctx.Err() != nil {
					break
				}
				return false, false, err
			}
		}
		if fl.split.EventWaiting() && idle >= cfg.Multiline.Timeout {
			if _, err := fl.split.FlushEvent(sink); err != nil {
				if ctx.Err() != nil {
					break
				}
				return false, false, err
			}
		}
		fl.split.Shrink()
		deleted = statLinks(fi) == 0
		gone = gone || deleted
		if succeeded {
			// Only an end reached after a successor appeared counts: a file renamed away is
			// often written once more before its writer reopens the name, and those lines
			// come before the new file's. A file that is gone with no successor holds nobody.
			fl.markCaughtUp()
		}
		if gone && idle >= cfg.ReleaseIdle {
			if _, err := fl.split.Flush(sink); err != nil {
				if ctx.Err() != nil {
					break
				}
				return false, false, err
			}
			// Released only once every line is acknowledged or failed, so that the checkpoint
			// kept for a renamed file holds its final offset.
			for fl.current().acks.inFlight() > 0 {
				if !fl.sleep(ctx, cfg.PollInterval) {
					return false, false, nil
				}
			}
			return true, deleted, nil
		}
		// The wait ends in time for whichever deadline comes first: a partial line's, a
		// multiline event's, a gone file's release.
		d := idlePoll
		if fl.split.Pending() {
			d = min(d, max(cfg.PartialLineIdle-idle, cfg.PollInterval))
		}
		if fl.split.EventWaiting() {
			d = min(d, max(cfg.Multiline.Timeout-idle, cfg.PollInterval))
		}
		if gone {
			d = min(d, max(cfg.ReleaseIdle-idle, cfg.PollInterval))
		}
		if hook := fl.t.idleWaitHook; hook != nil {
			hook(d)
		}
		if !fl.sleep(ctx, d) {
			break
		}
		if fl.watched.Load() {
			idlePoll = min(2*idlePoll, maxIdlePoll)
		} else {
			idlePoll = cfg.PollInterval
		}
		waited = true
	}
	return false, false, nil
}

// readAvailable reads and splits chunks until the end of the file. It returns the bytes read,
// whether the file turned out truncated and rewritten (the caller restarts it), a read error
// (retried after a pause) and the handler's error.
//
// A copytruncate between two reads whose new content has already grown past the read offset
// shows no shrink: the next read would return bytes from the middle of the new content, to be
// joined to a line started in the old one. So after every read the file must still begin with
// the bytes it was identified by, or what was read is dropped. The check follows the read, so a
// truncation before the read cannot slip through; one between the read and the check drops bytes
// of the old content that copytruncate had just taken away (the copy holds them).
//
// Lines carry, as Line.Written, the modification time of the stat before their read: mod, the
// caller's, for the first read, a stat of their own for the later ones (one syscall a chunk),
// so that lines appended while a backlog is read do not take the time of its start.
func (fl *follower) readAvailable(ctx context.Context, sink followerSink, mod time.Time) (total int64, rewritten bool, readErr, handlerErr error) {
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			if fi, err := fl.fd.Stat(); err == nil {
				mod = fi.ModTime()
			}
		}
		fl.split.SetWritten(mod.UnixNano())
		buf := fl.split.Space()
		pos := fl.readPos.Load()
		k, err := fl.fd.ReadAt(buf, pos)
		if k > 0 {
			// The size bound only limits how much is compared; a file now shorter than its
			// fingerprint reads short, which counts as changed.
			if replaced, ferr := fl.checkFingerprint(math.MaxInt64); ferr == nil && replaced {
				return total, true, nil, nil
			}
			fl.readPos.Store(pos + int64(k))
			total += int64(k)
			fl.file.markRead()
			herr := fl.split.Feed(k, sink)
			fl.noteFormat()
			if herr != nil {
				return total, false, nil, herr
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			return total, false, nil, nil
		}
		if err != nil {
			return total, false, err, nil
		}
	}
	return total, false, nil, nil
}

// checkFingerprint verifies, after a pause, that the file still begins with the bytes it was
// identified by (a file truncated and rewritten past the read offset while we were not looking
// does not shrink), and lengthens the fingerprint of a file that has grown.
func (fl *follower) checkFingerprint(size int64) (replaced bool, err error) {
	id := fl.identity()
	fp, n, same, err := fingerprintOf(fl.fd, size, fl.t.cfg.FingerprintBytes, &id)
	if err != nil {
		return false, err
	}
	if !same {
		return true, nil
	}
	if n > id.FingerprintLen {
		fl.mu.Lock()
		fl.id.Fingerprint, fl.id.FingerprintLen = fp, n
		fl.mu.Unlock()
	}
	return false, nil
}

// restart begins the file again at offset 0 with a new File: the old content is gone. A started
// last line of the old content is sent first (its bytes were in the file). Lines read from the old
// content stay tracked by the old File, whose acknowledgements no longer matter to the checkpoint.
// The lines between the last read and the truncation were never read: copytruncate loses them.
func (fl *follower) restart(sink followerSink, why string, pos, size int64) error {
	if _, err := fl.split.Flush(sink); err != nil {
		return err
	}
	fl.counts.truncations.Add(1)
	fl.t.totals.truncations.Add(1)
	id, _, err := identify(fl.fd, fl.t.cfg.FingerprintBytes)
	if err != nil {
		id = FileID{Dev: fl.key.Dev, Inode: fl.key.Inode}
	}
	fl.mu.Lock()
	fl.log.Warn(why+": reading it again from the beginning", "path", fl.path, "read_offset", pos, "size", size)
	fl.id = id
	fl.file = newFile(fl.path, id, 0, &fl.counts, &fl.t.totals, &fl.failLogged, fl.t.idle, fl.t.clock, fl.t.log)
	fl.file.countAtCommit = fl.t.cfg.CommittedOnly
	fl.mu.Unlock()
	fl.readPos.Store(0)
	fl.split.Reset(0)
	return nil
}

// sleep waits d, or until the watch wakes the follower, or until ctx ends (false).
func (fl *follower) sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-fl.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// wakeUp ends the follower's current or next sleep early. Any goroutine; never blocks.
func (fl *follower) wakeUp() {
	select {
	case fl.wake <- struct{}{}:
	default: // a wake is pending already
	}
}

// followerSink hands the splitter's lines to the Tailer's handler, tracking each first.
type followerSink struct {
	fl  *follower
	ctx context.Context
}

// Line tracks l in the current File, counts it, and hands it to the File's LineHandler.
func (s followerSink) Line(l Line) error {
	fl := s.fl
	f := fl.file // the follower's goroutine: see follower.file
	f.Track(l.End)
	fl.counts.linesRead.Add(1)
	fl.t.totals.linesRead.Add(1)
	if fl.counts.long.CountLine(l) {
		fl.t.totals.long.CountLine(l)
		if l.Truncated {
			fl.log.Warn("long line truncated", "path", f.Path, "offset", l.Start, "line_bytes", l.End-l.Start, "max_line_bytes", fl.t.cfg.MaxLineBytes)
		} else {
			fl.log.Warn("long line split into parts", "path", f.Path, "offset", l.Start, "max_line_bytes", fl.t.cfg.MaxLineBytes)
		}
	}
	if f.handle == nil {
		f.handle = fl.t.handle(f)
	}
	return f.handle(s.ctx, l)
}

// Dropped acknowledges the dropped line's span at once (nothing of it is sent) and counts it.
func (s followerSink) Dropped(start, end int64) error {
	fl := s.fl
	f := fl.file // the follower's goroutine: see follower.file
	f.skip(end)
	fl.counts.long.CountDropped()
	fl.t.totals.long.CountDropped()
	fl.log.Warn("long line dropped", "path", f.Path, "offset", start, "line_bytes", end-start, "max_line_bytes", fl.t.cfg.MaxLineBytes)
	return nil
}
