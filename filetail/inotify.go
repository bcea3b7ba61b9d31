package filetail

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// inotifyWatch is the watch's kernel side: one inotify instance, the directories it watches,
// and the goroutine that reads its events (read). A write to a followed name wakes that name's
// followers from the reader itself, from the map Run last published (setWakeAt): a burst
// written to a followed file costs the reader's wake and the follower's, not a third for Run's
// goroutine in between. Every other event (a name created, renamed or removed; a watched
// directory gone) goes to Run on events, which decides whether it asks for a scan; a lost
// event (the kernel's queue overflowed) goes on errs as errEventOverflow.
//
// After a read whose events came within watchQuiet of the read before, the reader rests for
// watchRest before reading again: meanwhile the kernel merges each run of identical events
// (the writes to one file), so a file written line by line costs a wake per watchRest, not per
// write (see watch.go).
type inotifyWatch struct {
	file *os.File // the inotify descriptor, non-blocking: Read parks in the runtime's poller
	// conn runs the watches' syscalls on file's descriptor, which stays open meanwhile: none
	// can reach a descriptor number that close released and something else reused.
	conn syscall.RawConn

	mu    sync.Mutex
	byWd  map[int32]string // watch descriptor -> directory
	byDir map[string]int32

	wakeAt atomic.Pointer[map[string][]*follower] // Run's, read-only once published

	events chan watchEvent // unbuffered; closed when the reader ends
	errs   chan error      // unbuffered; closed when the reader ends
	done   chan struct{}   // closed by close: the reader stops sending
	ended  chan struct{}   // closed when the reader returned
	once   sync.Once

	restHook func() // tests: called at each rest
}

// watchMask is what the watch asks of the kernel for each directory: names created, moved in or
// out and deleted, the directory itself deleted or moved, and writes to the files in it
// (truncation included). Attribute changes are left out: nothing acts on them.
const watchMask = syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_MOVED_FROM | syscall.IN_DELETE |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_MODIFY

// watchOp is what happened to an event's name.
type watchOp uint8

const (
	opCreate watchOp = 1 << iota // created, or moved in
	opWrite                      // written or truncated
	opRemove                     // deleted
	opRename                     // moved out, or the watched directory itself moved
)

func (op watchOp) String() string {
	s := ""
	for _, o := range []struct {
		op   watchOp
		name string
	}{{opCreate, "CREATE"}, {opWrite, "WRITE"}, {opRemove, "REMOVE"}, {opRename, "RENAME"}} {
		if op&o.op != 0 {
			if s != "" {
				s += "|"
			}
			s += o.name
		}
	}
	return s
}

// watchEvent is one event: the path it names (the directory's path joined with the name in it,
// or the directory's own for an event on the directory) and what happened.
type watchEvent struct {
	Name string
	Op   watchOp
}

// Has reports whether the event includes op.
func (e watchEvent) Has(op watchOp) bool { return e.Op&op != 0 }

// errEventOverflow is sent on errs when the kernel's event queue overflowed: events were lost.
var errEventOverflow = errors.New("inotify event queue overflow")

// newInotifyWatch opens an inotify instance and starts its reader.
func newInotifyWatch(restHook func()) (*inotifyWatch, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	file := os.NewFile(uintptr(fd), "inotify")
	conn, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, err
	}
	w := &inotifyWatch{
		file:   file,
		conn:   conn,
		byWd:   make(map[int32]string),
		byDir:  make(map[string]int32),
		events: make(chan watchEvent), errs: make(chan error),
		done: make(chan struct{}), ended: make(chan struct{}),
		restHook: restHook,
	}
	go w.read()
	return w, nil
}

// add watches dir (adding it again is harmless). The mapping is made under mu with the watch,
// so the reader never meets an event of a watch it does not know yet.
func (w *inotifyWatch) add(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var wd int
	var err error
	if w.conn.Control(func(fd uintptr) { wd, err = syscall.InotifyAddWatch(int(fd), dir, watchMask) }) != nil {
		err = os.ErrClosed // Control's one failure: the watch was closed
	}
	if err != nil {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	if old, ok := w.byWd[int32(wd)]; ok && old != dir {
		delete(w.byDir, old) // the same directory under another path: the kernel keeps one watch
	}
	w.byWd[int32(wd)], w.byDir[dir] = dir, int32(wd)
	return nil
}

// remove stops watching dir.
func (w *inotifyWatch) remove(dir string) {
	w.mu.Lock()
	wd, ok := w.byDir[dir]
	if ok {
		delete(w.byDir, dir)
		delete(w.byWd, wd)
	}
	w.mu.Unlock()
	if ok {
		w.rmWatch(wd)
	}
}

// rmWatch removes watch descriptor wd from the kernel's instance; one the kernel dropped
// already (its directory deleted), or a watch closed, is no error worth having.
func (w *inotifyWatch) rmWatch(wd int32) {
	_ = w.conn.Control(func(fd uintptr) { _, _ = syscall.InotifyRmWatch(int(fd), uint32(wd)) })
}

// dirs returns the directories watched now.
func (w *inotifyWatch) dirs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.byDir))
	for dir := range w.byDir {
		out = append(out, dir)
	}
	return out
}

// has reports whether dir is watched now: the kernel drops a watch whose directory was deleted,
// and the reader one whose directory moved.
func (w *inotifyWatch) has(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byDir[dir]
	return ok
}

// setWakeAt publishes which followers read each name; m is not modified afterwards.
func (w *inotifyWatch) setWakeAt(m map[string][]*follower) { w.wakeAt.Store(&m) }

// close stops the reader, waits for it and releases the descriptor.
func (w *inotifyWatch) close() {
	w.once.Do(func() {
		close(w.done)
		_ = w.file.Close() // wakes the reader's Read with os.ErrClosed
		<-w.ended
	})
}

// read is the reader goroutine.
func (w *inotifyWatch) read() {
	defer close(w.ended)
	defer close(w.errs)
	defer close(w.events)
	buf := make([]byte, 64<<10) // room for a queue's worth of events per read
	var name []byte             // a write's path, built without allocating
	var last time.Time          // when the last read returned
	rest := time.NewTimer(time.Hour)
	rest.Stop()
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || !w.sendErr(err) {
				return
			}
			continue
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			raw := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+syscall.SizeofInotifyEvent : min(n, off+syscall.SizeofInotifyEvent+int(raw.Len))]
			off += syscall.SizeofInotifyEvent + int(raw.Len)
			if raw.Mask&syscall.IN_Q_OVERFLOW != 0 {
				if !w.sendErr(errEventOverflow) {
					return
				}
				continue
			}
			for len(nameBytes) > 0 && nameBytes[len(nameBytes)-1] == 0 {
				nameBytes = nameBytes[:len(nameBytes)-1] // the name is padded with NULs
			}
			dir, ok := w.dirOf(raw.Wd, raw.Mask)
			if !ok {
				continue // a watch removed meanwhile, or the kernel's notice that it is gone
			}
			name = append(name[:0], dir...)
			if len(nameBytes) > 0 {
				name = append(append(name, '/'), nameBytes...)
			}
			op := opOf(raw.Mask)
			if op&opWrite != 0 {
				wakeWritten(w.wakeAt.Load(), name)
			}
			if op &^= opWrite; op != 0 && !w.send(watchEvent{Name: string(name), Op: op}) {
				return
			}
		}
		now := time.Now()
		if now.Sub(last) < watchQuiet {
			if w.restHook != nil {
				w.restHook()
			}
			rest.Reset(watchRest)
			select {
			case <-rest.C:
			case <-w.done:
				return
			}
			now = time.Now()
		}
		last = now
	}
}

// dirOf is the directory of watch descriptor wd, and forgets it when mask says the watch is gone
// (IN_IGNORED: removed, or its directory deleted) or no longer names it (IN_MOVE_SELF: the
// directory moved; its event is still reported, under the old path).
func (w *inotifyWatch) dirOf(wd int32, mask uint32) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir, ok := w.byWd[wd]
	if !ok {
		return "", false
	}
	if mask&(syscall.IN_IGNORED|syscall.IN_MOVE_SELF) != 0 {
		delete(w.byWd, wd)
		if w.byDir[dir] == wd {
			delete(w.byDir, dir)
		}
		if mask&syscall.IN_MOVE_SELF != 0 {
			w.rmWatch(wd)
		}
	}
	return dir, mask&syscall.IN_IGNORED == 0
}

// opOf maps an event's mask to what happened, as fsnotify does.
func opOf(mask uint32) watchOp {
	var op watchOp
	if mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0 {
		op |= opCreate
	}
	if mask&(syscall.IN_DELETE|syscall.IN_DELETE_SELF) != 0 {
		op |= opRemove
	}
	if mask&syscall.IN_MODIFY != 0 {
		op |= opWrite
	}
	if mask&(syscall.IN_MOVED_FROM|syscall.IN_MOVE_SELF) != 0 {
		op |= opRename
	}
	return op
}

// wakeWritten wakes the followers of a written path (name, as the reader builds it).
func wakeWritten(wakeAt *map[string][]*follower, name []byte) {
	if wakeAt == nil {
		return
	}
	for _, fl := range (*wakeAt)[string(name)] {
		fl.watched.Store(true) // its writes are reported: it may wait longer when idle
		fl.wakeUp()
	}
}

func (w *inotifyWatch) send(ev watchEvent) bool { return sendUnlessDone(w.events, ev, w.done) }

func (w *inotifyWatch) sendErr(err error) bool { return sendUnlessDone(w.errs, err, w.done) }

// sendUnlessDone sends v on ch, and reports false instead if done is closed first.
func sendUnlessDone[T any](ch chan<- T, v T, done <-chan struct{}) bool {
	select {
	case ch <- v:
		return true
	case <-done:
		return false
	}
}
