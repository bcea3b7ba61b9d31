package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// LineHandler sends one line. It may block (the producer's buffer is full: backpressure, which
// pauses this file's reading), and it returns an error only when ctx ends; any other error ends
// Tailer.Run with that error. The follower has tracked the line (f.Track(line.End)) before the
// call; the handler arranges for exactly one f.Ack(line.End) or f.Fail(line.End, err) later (the
// producer callback), or calls Ack itself for a line it decides not to send. line.Data is only
// valid during the call.
type LineHandler func(ctx context.Context, f *File, line Line) error

// Start positions for files found at the first discovery with no checkpoint (TailerConfig.StartAt).
const (
	StartAtBeginning = "beginning"
	StartAtEnd       = "end"
)

// TailerConfig configures a Tailer. Zero durations and sizes take the defaults in their comments.
type TailerConfig struct {
	// Globs are filepath.Glob patterns, re-scanned every RescanInterval; a plain path that does
	// not exist yet is followed once it appears.
	Globs []string
	// StartAt is where a file with no checkpoint starts when it is found at the first discovery:
	// "beginning" (default) or "end" (after its last complete line). A saved offset always wins;
	// a file that appears later, or that replaced a file the checkpoint knew under the same name
	// while the agent was stopped, is always read from the beginning: it holds new lines only.
	StartAt string
	// MaxLineBytes is the longest line sent whole (default 1 MiB - 4 KiB); LongLines is the
	// policy for longer ones: "truncate", "split" (default: nothing is lost) or "drop".
	MaxLineBytes int
	LongLines    string
	// RescanInterval is how often the globs are matched again (default 1s).
	RescanInterval time.Duration
	// PollInterval is how often a file at its end is looked at again (default 100ms).
	PollInterval time.Duration
	// PartialLineIdle is how long a last line without a newline waits for more bytes before it
	// is sent as it is (default 5s).
	PartialLineIdle time.Duration
	// ReleaseIdle is how long a file renamed out of the globs, or deleted, is kept open after it
	// stopped growing, in case its writer has not reopened its log yet (default 30s). It is then
	// released once every line read from it is acknowledged or failed.
	ReleaseIdle time.Duration
	// CheckpointInterval is how often Run saves the checkpoints when they changed (default 1s).
	CheckpointInterval time.Duration
	// StateDir holds checkpoints.json; it is created if needed and must be writable.
	StateDir string
	// FingerprintBytes is how many first bytes of a file identify it with its inode (default 1024).
	FingerprintBytes int
	// ReadBufferBytes is the size of one read (default 64 KiB).
	ReadBufferBytes int

	// initial, when set (hasInitial), replaces the checkpoints of the state directory's file:
	// the exactly-once mode's positions read back from its state topic.
	initial    []checkpointEntry
	hasInitial bool
	// committedOnly (exactly-once) leaves checkpoints.json to the transaction committer: Run
	// neither saves every CheckpointInterval nor when it stops, because acknowledged lines are
	// not committed until their transaction is.
	committedOnly bool
}

// DefaultMaxLineBytes leaves room for the record's framing and headers under the producer's
// default max.request.size (1 MiB).
const DefaultMaxLineBytes = 1<<20 - 4<<10

func (c *TailerConfig) setDefaults() {
	if c.StartAt == "" {
		c.StartAt = StartAtBeginning
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.LongLines == "" {
		c.LongLines = LongLinesSplit
	}
	setDuration(&c.RescanInterval, time.Second)
	setDuration(&c.PollInterval, 100*time.Millisecond)
	setDuration(&c.PartialLineIdle, 5*time.Second)
	setDuration(&c.ReleaseIdle, 30*time.Second)
	setDuration(&c.CheckpointInterval, time.Second)
	if c.FingerprintBytes == 0 {
		c.FingerprintBytes = 1024
	}
	if c.ReadBufferBytes == 0 {
		c.ReadBufferBytes = 64 << 10
	}
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func (c *TailerConfig) validate() error {
	var errs []error
	if len(c.Globs) == 0 {
		errs = append(errs, errors.New("agent: tail: no file or glob to follow"))
	}
	for _, g := range c.Globs {
		if _, err := filepath.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("agent: tail %q: %w", g, err))
		}
	}
	if c.StartAt != StartAtBeginning && c.StartAt != StartAtEnd {
		errs = append(errs, fmt.Errorf("agent: start-at must be %s or %s, got %q", StartAtBeginning, StartAtEnd, c.StartAt))
	}
	if c.MaxLineBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: max-line-bytes must be positive, got %d", c.MaxLineBytes))
	}
	if err := validLongLines(c.LongLines); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{
		"rescan interval": c.RescanInterval, "poll interval": c.PollInterval,
		"partial line idle": c.PartialLineIdle, "release idle": c.ReleaseIdle,
		"checkpoint interval": c.CheckpointInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("agent: %s must not be negative, got %v", name, d))
		}
	}
	if c.FingerprintBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: fingerprint bytes must be positive, got %d", c.FingerprintBytes))
	}
	if c.ReadBufferBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: read buffer bytes must be positive, got %d", c.ReadBufferBytes))
	}
	return errors.Join(errs...)
}

// Tailer discovers the files matching its globs and follows each with one follower goroutine,
// handing every line to the LineHandler, and keeps the checkpoint of each file at its committed
// offset (see File).
//
// Goroutines: Run owns the discovery loop and every follower; each follower stops when Run's
// context ends (or when its file is released) and Run returns only after all of them exited.
// Stats and SaveCheckpoints are safe to call from any goroutine, during and after Run.
type Tailer struct {
	cfg    TailerConfig
	handle LineHandler
	log    *slog.Logger
	store  *checkpointStore
	now    func() time.Time

	mu        sync.Mutex
	followers map[fileKey]*follower       // the files being followed, and after Run those it followed
	atPath    map[string]*follower        // the follower last found at each name: a successor's predecessor
	saved     map[fileKey]checkpointEntry // checkpoints of files not followed now
	scanned   bool                        // the first discovery is done
	// loadedPaths are the names in the checkpoint at the start: a file found at one of them
	// with another identity replaced the checkpointed file while the agent was stopped.
	loadedPaths map[string]bool

	warned map[string]string // path -> problem last logged for it (Run's goroutine only)

	saveMu      sync.Mutex
	lastWritten map[fileKey]checkpointEntry

	// globs replaces cfg.Globs once SetGlobs was called (SIGHUP): read by the discovery loop.
	globs atomic.Pointer[[]string]

	// idle is told when a file's last line in flight is acknowledged: Run then saves soon
	// rather than at the next CheckpointInterval (see Run).
	idle chan struct{}

	// committedOf, when set (exactly-once), is the position the last committed transaction
	// holds for a file: Stats reports it as Committed, since an acknowledged line is not
	// committed before its transaction is. Set before Run.
	committedOf func(fileKey) (int64, bool)

	totals  fileCounters
	running atomic.Bool
	wg      sync.WaitGroup
	fatal   context.CancelCauseFunc
}

// fatalError carries an error that ends Run (a handler error while the context is live).
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }

// NewTailer validates cfg, opens the state directory (creating it; an unwritable one is an error
// that names it) and loads the checkpoints (a corrupt checkpoint file is an error too).
func NewTailer(cfg TailerConfig, handle LineHandler, log *slog.Logger) (*Tailer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if handle == nil {
		return nil, errors.New("agent: NewTailer: nil LineHandler")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store, entries, err := openCheckpointStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if cfg.hasInitial {
		entries = cfg.initial
	}
	t := &Tailer{
		cfg: cfg, handle: handle, log: log, store: store, now: time.Now,
		followers:   make(map[fileKey]*follower),
		atPath:      make(map[string]*follower),
		saved:       make(map[fileKey]checkpointEntry),
		warned:      make(map[string]string),
		lastWritten: make(map[fileKey]checkpointEntry),
		loadedPaths: make(map[string]bool),
		idle:        make(chan struct{}, 1),
	}
	for _, e := range entries {
		t.loadedPaths[e.Path] = true
		id, _ := e.fileID() // validated by load
		t.saved[id.key()] = e
		t.lastWritten[id.key()] = e
	}
	return t, nil
}

// Run discovers and follows files until ctx ends, saving the checkpoints every
// CheckpointInterval, and soon after a file's last line in flight is acknowledged (a file
// shipped to its end is saved within a tenth of the interval, not up to a whole one later; a
// trickle of single lines saves at most ten times per interval). It then stops reading, waits
// for every follower goroutine to exit, saves
// the checkpoints once more and returns nil; the offsets keep moving as acknowledgements arrive,
// so the caller saves again after the producer flushed. A handler error (other than from the
// context's end) stops everything and is returned. Run may be called once.
func (t *Tailer) Run(ctx context.Context) error {
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("agent: Tailer.Run called twice")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t.fatal = cancel
	defer cancel(nil)

	t.scan(ctx)
	rescan := time.NewTicker(t.cfg.RescanInterval)
	defer rescan.Stop()
	save := time.NewTicker(t.cfg.CheckpointInterval)
	defer save.Stop()
	if t.cfg.committedOnly {
		save.Stop()
	}
	var saveErr string
	var lastSave time.Time
	saveNow := func() {
		lastSave = time.Now()
		// A failing disk would log every second: log when the error changes.
		err := t.SaveCheckpoints()
		if msg := fmt.Sprint(err); err != nil && msg != saveErr {
			t.log.Error("save checkpoints", "dir", t.cfg.StateDir, "err", err)
			saveErr = msg
		} else if err == nil {
			saveErr = ""
		}
	}
	idleGap := max(t.cfg.CheckpointInterval/10, time.Millisecond)
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	soonArmed := false
	idle := t.idle
	if t.cfg.committedOnly {
		idle = nil
	}
	for {
		select {
		case <-ctx.Done():
			t.wg.Wait()
			if !t.cfg.committedOnly { // else the committer saves what its last transaction committed
				if err := t.SaveCheckpoints(); err != nil {
					t.log.Error("save checkpoints at stop", "err", err)
				}
			}
			var fatal fatalError
			if errors.As(context.Cause(ctx), &fatal) {
				return fatal.err
			}
			return nil
		case <-rescan.C:
			t.scan(ctx)
		case <-save.C:
			saveNow()
		case <-idle:
			if wait := idleGap - time.Since(lastSave); wait > 0 {
				if !soonArmed {
					soon.Reset(wait)
					soonArmed = true
				}
				continue
			}
			saveNow()
		case <-soon.C:
			soonArmed = false
			saveNow()
		}
	}
}

// SetGlobs replaces the patterns to follow, from the next scan on (a configuration reload).
// Files already followed stay followed until released. Safe for concurrent use.
func (t *Tailer) SetGlobs(globs []string) error {
	for _, g := range globs {
		if _, err := filepath.Match(g, ""); err != nil {
			return fmt.Errorf("tail: bad pattern %q: %w", g, err)
		}
	}
	globs = slices.Clone(globs)
	t.globs.Store(&globs)
	return nil
}

// fail ends Run with err, from a follower.
func (t *Tailer) fail(err error) { t.fatal(fatalError{err}) }

// match returns the paths the globs match now, sorted and without duplicates.
func (t *Tailer) match() []string {
	var paths []string
	globs := t.cfg.Globs
	if g := t.globs.Load(); g != nil {
		globs = *g
	}
	for _, g := range globs {
		m, _ := filepath.Glob(g) // the patterns were validated: no ErrBadPattern
		paths = append(paths, m...)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
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
		key  fileKey
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
	names := make(map[fileKey][]string, len(files))
	matched := make(map[fileKey]bool, len(files))
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
		fl.gone.Store(!matched[k])
	}
	for k, e := range t.saved {
		if !stillAt(e.Path, k) {
			delete(t.saved, k)
		}
	}
}

// stillAt reports whether the file at path is the one with key k.
func stillAt(path string, k fileKey) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	got, ok := statKey(fi)
	return ok && got == k
}

// consider starts following the file with key k found at names (sorted), unless it is followed
// already: then it may have been renamed, and its path is updated.
func (t *Tailer) consider(ctx context.Context, names []string, k fileKey, first bool) {
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
	if err != nil || !fi.Mode().IsRegular() || id.key() != k {
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
	start, why := t.startOffsetLocked(fd, fi.Size(), id, path, first)
	fl = t.newFollowerLocked(fd, path, id, start)
	// A file that replaced another under the same name (rename rotation) waits until the old one
	// was read to its end, so the lines of one name keep their order across a rotation. The old
	// one waits for its own predecessor in turn.
	if old := t.atPath[path]; old != nil && old.key != fl.key {
		old.succeeded.Store(true)
		fl.after = old.caughtUp
	}
	for _, n := range names {
		t.atPath[n] = fl
	}
	t.log.Info("following file", "path", path, "file", id.String(), "offset", start, "from", why, "size", fi.Size())
	t.startLocked(ctx, fl)
}

// startOffsetLocked decides where a newly found file starts, and why.
func (t *Tailer) startOffsetLocked(fd *os.File, size int64, id FileID, path string, first bool) (int64, string) {
	k := id.key()
	if e, ok := t.saved[k]; ok {
		delete(t.saved, k) // the follower owns this file's checkpoint now
		saved, _ := e.fileID()
		if same, err := sameFile(fd, size, saved); err == nil && same {
			if e.Offset > size {
				t.log.Warn("file is shorter than its checkpoint (truncated while the agent was stopped): reading it from the beginning",
					"path", path, "checkpoint", e.Offset, "size", size)
				return 0, "beginning (truncated while stopped)"
			}
			return e.Offset, "checkpoint"
		}
		t.log.Info("inode reused by another file: its old checkpoint does not apply",
			"path", path, "old", e.ID, "new", id.String())
		return 0, "beginning (new file on a reused inode)"
	}
	if !first {
		return 0, "beginning (new file)"
	}
	if t.loadedPaths[path] {
		return 0, "beginning (replaced the checkpointed file while the agent was stopped)"
	}
	if t.cfg.StartAt == StartAtEnd {
		off, err := lastLineEnd(fd, size, t.cfg.MaxLineBytes)
		if err != nil {
			t.log.Warn("cannot find the last line: starting at the end", "path", path, "err", err)
			off = size
		}
		return off, "end (start-at)"
	}
	return 0, "beginning (start-at)"
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
func (t *Tailer) recoverRenamed(ctx context.Context, matched map[fileKey]bool) {
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
		saved, _ := e.fileID()
		same := false
		if err == nil && id.key() == k {
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
		fl := t.newFollowerLocked(fd, path, id, e.Offset)
		fl.gone.Store(true)
		t.atPath[formerPath] = fl
		t.log.Info("file renamed while the agent was stopped: reading it to its end",
			"path", path, "was", formerPath, "file", id.String(), "offset", e.Offset, "size", fi.Size())
		t.startLocked(ctx, fl)
	}
}

// findByKey finds the file with key k: at path, or under another name in path's directory.
func findByKey(path string, k fileKey) (string, bool) {
	if stillAt(path, k) {
		return path, true
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
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
	return "", false
}

func (t *Tailer) startLocked(ctx context.Context, fl *follower) {
	t.followers[fl.key] = fl
	t.wg.Add(1)
	go fl.run(ctx)
}

// release forgets a follower whose file was read to its end and acknowledged. The checkpoint of
// a file that still exists (renamed out of the globs) is kept, so that it resumes at its end if
// it comes back; the scans prune it once nothing is at its path.
func (t *Tailer) release(fl *follower, deleted bool, path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.followers, fl.key)
	for p, at := range t.atPath {
		if at == fl {
			delete(t.atPath, p)
		}
	}
	if !deleted && path != "" {
		e := fl.entry(t.now())
		e.Path = path
		t.saved[fl.key] = e
	}
}

// SaveCheckpoints writes every file's committed offset now, if any changed since the last write.
// Run calls it every CheckpointInterval and when it stops; the caller calls it once more after
// the producer flushed, to record the last acknowledgements.
func (t *Tailer) SaveCheckpoints() error {
	return t.saveEntries(t.snapshot())
}

// snapshot returns the checkpoint of every file known now: the committed offset of each file
// followed, and the saved entries of files not followed now.
func (t *Tailer) snapshot() map[fileKey]checkpointEntry {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := make(map[fileKey]checkpointEntry, len(t.followers)+len(t.saved))
	for k, e := range t.saved {
		entries[k] = e
	}
	for k, fl := range t.followers {
		entries[k] = fl.entry(now)
	}
	return entries
}

// saveEntries writes entries to checkpoints.json if any changed since the last write.
func (t *Tailer) saveEntries(entries map[fileKey]checkpointEntry) error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	entries = maps.Clone(entries)
	changed := len(entries) != len(t.lastWritten)
	for k, e := range entries {
		if old, ok := t.lastWritten[k]; ok && old.sameAs(e) {
			e.Updated = old.Updated
			entries[k] = e
		} else {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	list := make([]checkpointEntry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Path != list[j].Path {
			return list[i].Path < list[j].Path
		}
		return list[i].ID < list[j].ID
	})
	if err := t.store.write(list); err != nil {
		return err
	}
	t.lastWritten = entries
	return nil
}

// FileStats describes one followed file.
type FileStats struct {
	Path string // current name
	ID   FileID // current identity (the fingerprint lengthens as the file grows)
	// Size is the file's size at the follower's last look; ReadOffset how far it was read;
	// Committed the offset a restart resumes at; BytesBehind is Size - Committed.
	Size, ReadOffset, Committed, BytesBehind int64
	InFlight                                 int // lines sent and not yet acknowledged or failed
	LinesRead, LinesAcked, LinesFailed       uint64
	Truncated, Split, Dropped                uint64 // long lines, by policy
	Truncations                              uint64 // copytruncate resets
	// Gone is set when the globs no longer match the file (renamed away or deleted): it is read
	// to its end and released.
	Gone bool
}

// TailerStats is a snapshot for metrics and the status page. Totals count every file since the
// Tailer started, including files released since.
type TailerStats struct {
	Files  []FileStats // sorted by path
	Totals TailerTotals
}

// TailerTotals sums the counters of all files.
type TailerTotals struct {
	Files                              int   // followed now
	BytesBehind                        int64 // of the files followed now
	InFlight                           int
	LinesRead, LinesAcked, LinesFailed uint64
	Truncated, Split, Dropped          uint64
	Truncations                        uint64
}

// Stats returns a snapshot of every followed file and the totals.
func (t *Tailer) Stats() TailerStats {
	t.mu.Lock()
	fls := make([]*follower, 0, len(t.followers))
	for _, fl := range t.followers {
		fls = append(fls, fl)
	}
	t.mu.Unlock()
	var s TailerStats
	for _, fl := range fls {
		fs := fl.stats()
		s.Files = append(s.Files, fs)
		s.Totals.BytesBehind += fs.BytesBehind
		s.Totals.InFlight += fs.InFlight
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	s.Totals.Files = len(s.Files)
	c := &t.totals
	s.Totals.LinesRead, s.Totals.LinesAcked, s.Totals.LinesFailed = c.linesRead.Load(), c.linesAcked.Load(), c.linesFailed.Load()
	s.Totals.Truncated, s.Totals.Split, s.Totals.Dropped = c.truncated.Load(), c.split.Load(), c.dropped.Load()
	s.Totals.Truncations = c.truncations.Load()
	return s
}
