package filetail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// LineHandler sends one line of the File it was made for. It may block (the producer's buffer is
// full: backpressure, which pauses this file's reading), and it returns an error only when ctx
// ends; any other error ends Tailer.Run with that error. The follower has tracked the line
// (f.Track(line.End)) before the call; the handler arranges for exactly one f.Ack(line.End) or
// f.Fail(line.End, err) later (the producer callback), or calls Ack itself for a line it
// decides not to send. line.Data is only valid during the call.
type LineHandler func(ctx context.Context, line Line) error

// FileHandler makes the LineHandler of one File: the handler's own closure over f (and over
// whatever it hands the producer, such as one delivery callback for all the File's lines).
// The follower calls it on its goroutine before the File's first line, once per File (a
// copytruncate starts a new File).
type FileHandler func(f *File) LineHandler

// Tailer discovers the files matching its globs and follows each with one follower goroutine,
// handing every line to the LineHandler, and keeps the checkpoint of each file at its committed
// offset (see File).
//
// Goroutines: Run owns the discovery loop and every follower; each follower stops when Run's
// context ends (or when its file is released) and Run returns only after all of them exited.
// Stats and SaveCheckpoints are safe to call from any goroutine, during and after Run.
type Tailer struct {
	cfg    Config
	handle FileHandler
	log    *slog.Logger
	store  *checkpointStore
	now    func() time.Time

	mu        sync.Mutex
	followers map[FileKey]*follower  // the files being followed, and after Run those it followed
	atPath    map[string]*follower   // the follower last found at each name: a successor's predecessor
	saved     map[FileKey]Checkpoint // checkpoints of files not followed now
	scanned   bool                   // the first discovery is done
	// loadedPaths are the names in the checkpoint at the start: a file found at one of them
	// with another identity replaced the checkpointed file while the agent was stopped.
	loadedPaths map[string]bool

	warned map[string]string // path -> problem last logged for it (Run's goroutine only)

	saveMu      sync.Mutex
	lastWritten map[FileKey]Checkpoint
	saves       atomic.Uint64 // checkpoint writes, for Stats
	// lastWrite is when checkpoints.json was last written (monotonic, from time.Now), by Run
	// or by a caller of SaveCheckpoints: Run's next save is due an interval after it.
	lastWrite atomic.Pointer[time.Time]
	// saveHook, when set (by tests, before Run), is told of every write of checkpoints.json.
	saveHook func(time.Time)
	// runWakeHook, when set (by tests, before Run), is told when an idle signal woke Run
	// ("idle") and when a save found nothing new to write ("unchanged").
	runWakeHook func(why string)

	// globs replaces cfg.Globs once SetGlobs was called (SIGHUP): read by the discovery loop.
	globs atomic.Pointer[[]string]

	// clock stamps lines as the followers track them (File.OldestUnacked); Run keeps it.
	clock *readClock

	// idle is told when a file's last line in flight is acknowledged: Run then saves soon
	// rather than at the next CheckpointInterval (see Run).
	idle *idleSignal

	// idleWaitHook, when set (by tests, before Run), is told of every wait of a follower at
	// its file's end.
	idleWaitHook func(time.Duration)
	// watchRestHook, when set (by tests, before Run), is called by the watch's reader each
	// time it stops reading events for watchRest.
	watchRestHook func()

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
func NewTailer(cfg Config, handle FileHandler, log *slog.Logger) (*Tailer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if handle == nil {
		return nil, errors.New("agent: NewTailer: nil FileHandler")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store, entries, err := openCheckpointStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if cfg.UseInitial {
		entries = cfg.Initial
	}
	t := &Tailer{
		cfg: cfg, handle: handle, log: log, store: store, now: time.Now,
		followers:   make(map[FileKey]*follower),
		atPath:      make(map[string]*follower),
		saved:       make(map[FileKey]Checkpoint),
		warned:      make(map[string]string),
		lastWritten: make(map[FileKey]Checkpoint),
		loadedPaths: make(map[string]bool),
		idle:        newIdleSignal(),
	}
	t.clock = newReadClock(func() time.Time { return t.now() })
	for _, e := range entries {
		t.loadedPaths[e.Path] = true
		id, _ := e.FileID() // validated by load (or by the state topic's reader)
		t.saved[id.Key()] = e
		t.lastWritten[id.Key()] = e
	}
	return t, nil
}

// Run discovers and follows files until ctx ends, saving the checkpoints on one schedule: the
// next save is due CheckpointInterval after the last write of the checkpoints (Run's or a
// caller's of SaveCheckpoints), and is made then if anything changed. When a file's last line in
// flight is acknowledged and the last write is an interval old, the save is made at once (a
// burst after a quiet spell is saved as soon as it is acknowledged). A steadily written file,
// whose every burst leaves it with nothing in flight, is thus saved at most once per interval,
// not once per burst: each save costs an fsync. It then stops reading, waits for every follower goroutine
// to exit, saves the checkpoints once more and returns nil; the offsets keep moving as
// acknowledgements arrive, so the caller saves again after the producer flushed. A handler
// error (other than from the context's end) stops everything and is returned. Run may be
// called once.
func (t *Tailer) Run(ctx context.Context) error {
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("agent: Tailer.Run called twice")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t.fatal = cancel
	defer cancel(nil)

	watch := t.newDirWatcher()
	defer watch.close()
	scanNow := func() {
		t.syncWatches(watch, t.currentGlobs())
		t.scan(ctx)
		// Again for the links the scan began to follow: their target directories (the kubelet
		// rotates there) are watched from now, not from the next scan.
		t.syncWatches(watch, t.currentGlobs())
		t.mapFollowers(watch)
	}
	scanNow()
	events, watchErrs := watch.events(), watch.errs()
	rescan := time.NewTicker(t.cfg.RescanInterval)
	defer rescan.Stop()
	// save fires when the next save is due. Whatever asks for a save (the timer, an idle file)
	// asks this one schedule, so two saves are never closer than an interval.
	interval := t.cfg.CheckpointInterval
	save := time.NewTimer(interval)
	defer save.Stop()
	if t.cfg.CommittedOnly {
		save.Stop()
	}
	var saveErr string
	saveNow := func() {
		// A failing disk would log every second: log when the error changes. The directory is
		// not synced: a save lost to a power cut leaves the one before it, whole.
		last := t.lastWrite.Load()
		err := t.saveCheckpoints(false)
		// The save timer is always armed: an acknowledgement is saved within an interval
		// whatever the idle signal does. The signal only makes the first line after a quiet
		// time saved at once. So while saves write (the files move), the acknowledgements that
		// leave a file idle need not wake Run (scheduled); once a save finds nothing new, the
		// next one does again.
		wrote := err == nil && t.lastWrite.Load() != last
		t.idle.scheduled.Store(wrote)
		if err == nil && !wrote && t.runWakeHook != nil {
			t.runWakeHook("unchanged")
		}
		if msg := fmt.Sprint(err); err != nil && msg != saveErr {
			t.log.Error("save checkpoints", "dir", t.cfg.StateDir, "err", err)
			saveErr = msg
		} else if err == nil {
			saveErr = ""
		}
		save.Reset(t.untilNextSave(interval))
	}
	idle := t.idle.ch
	if t.cfg.CommittedOnly {
		idle = nil
	}
	for {
		select {
		case <-ctx.Done():
			t.wg.Wait()
			if !t.cfg.CommittedOnly { // else the committer saves what its last transaction committed
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
			scanNow()
		case ev, ok := <-events:
			if !ok { // the watch's reader stopped: the scans and polls carry on alone
				t.log.Warn("the directory watch stopped: new files are found by the periodic scan only", "rescan_interval", t.cfg.RescanInterval)
				events = nil
				continue
			}
			// A burst of events (a rotation renames and creates; many files appear at once)
			// makes one scan: take what is ready before scanning.
			again := watch.onEvent(ev)
		drain:
			for range watchDrain {
				select {
				case ev, ok := <-events:
					if !ok {
						break drain // seen closed at the next select
					}
					again = watch.onEvent(ev) || again
				default:
					break drain
				}
			}
			if again {
				scanNow()
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			if t.onWatchError(watch, err) {
				scanNow()
			}
		case <-save.C:
			if wait := t.untilNextSave(interval); wait < interval {
				// A caller of SaveCheckpoints wrote since this save was armed.
				save.Reset(wait)
				continue
			}
			saveNow()
		case <-idle:
			if t.runWakeHook != nil {
				t.runWakeHook("idle")
			}
			if t.untilNextSave(interval) < interval {
				// The save due then covers this acknowledgement; the Acks until then need
				// not wake Run.
				t.idle.scheduled.Store(true)
				continue
			}
			saveNow()
		}
	}
}

// untilNextSave is how long until the next save is due: an interval after the last write of
// the checkpoints; interval itself when that is past (nothing was written for an interval:
// the next save is a full interval away unless an idle file asks for one sooner).
func (t *Tailer) untilNextSave(interval time.Duration) time.Duration {
	last := t.lastWrite.Load()
	if last == nil {
		return interval
	}
	if wait := interval - time.Since(*last); wait > 0 {
		return wait
	}
	return interval
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

// FileStats describes one followed file.
type FileStats struct {
	Path string // current name
	ID   FileID // current identity (the fingerprint lengthens as the file grows)
	// Size is the file's size at the follower's last look; ReadOffset how far it was read;
	// Committed the offset a restart resumes at; BytesBehind is Size - Committed.
	Size, ReadOffset, Committed, BytesBehind int64
	InFlight                                 int // lines sent and not yet acknowledged or failed
	// OldestUnacked is how long ago the oldest line not yet acknowledged was read (0: none):
	// it grows through an outage, when no line is acknowledged (File.OldestUnacked).
	OldestUnacked                      time.Duration
	LinesRead, LinesAcked, LinesFailed uint64
	LinesDeadLettered                  uint64 // kept in a dead-letter destination (not in LinesAcked)
	Truncated, Split, Dropped          uint64 // long lines, by policy
	Truncations                        uint64 // copytruncate resets
	// Container is what decoding a container runtime's framing met (Config.ContainerFormat).
	Container ContainerStats
	// Gone is set when the globs no longer match the file (renamed away or deleted): it is read
	// to its end and released.
	Gone bool
}

// Stats is a snapshot for metrics and the status page. Totals count every file since the
// Tailer started, including files released since.
type Stats struct {
	Files  []FileStats // sorted by path
	Totals Totals
}

// Totals sums the counters of all files.
type Totals struct {
	Files                              int   // followed now
	BytesBehind                        int64 // of the files followed now
	InFlight                           int
	LinesRead, LinesAcked, LinesFailed uint64
	LinesDeadLettered                  uint64
	Truncated, Split, Dropped          uint64
	Truncations                        uint64
	// Joined, Malformed and Interrupted are the files' ContainerStats counts.
	Joined, Malformed, Interrupted uint64
	// CheckpointSaves counts writes of checkpoints.json (each a write and an fsync).
	CheckpointSaves uint64
}

// ContainerStats is one file's container decoding: the format its lines are read in (auto until
// the first line decided it) and ContainerCounts' counts.
type ContainerStats struct {
	Format                         ContainerFormat
	Joined, Malformed, Interrupted uint64
}

// Stats returns a snapshot of every followed file and the totals.
func (t *Tailer) Stats() Stats {
	t.mu.Lock()
	fls := make([]*follower, 0, len(t.followers))
	for _, fl := range t.followers {
		fls = append(fls, fl)
	}
	t.mu.Unlock()
	var s Stats
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
	s.Totals.LinesDeadLettered = c.linesDeadLettered.Load()
	s.Totals.Truncated, s.Totals.Split, s.Totals.Dropped = c.long.Truncated.Load(), c.long.Split.Load(), c.long.Dropped.Load()
	s.Totals.Truncations = c.truncations.Load()
	s.Totals.Joined, s.Totals.Malformed, s.Totals.Interrupted = c.container.Joined.Load(), c.container.Malformed.Load(), c.container.Interrupted.Load()
	s.Totals.CheckpointSaves = t.saves.Load()
	return s
}
