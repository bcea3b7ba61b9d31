package filetail

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// File is one followed file: one identity, from one starting point. Its LineHandler sends each
// line of it and the delivery callback reports the outcome with Ack or Fail; the File's
// acknowledgement tracker turns those outcomes into the committed offset, the only offset the
// checkpoint store ever records.
//
// When a file is truncated in place (copytruncate) the follower starts a new File for the same
// identity, so acknowledgements of lines of the old content, which may still arrive, land in the
// old File's tracker and can never move the checkpoint of the new content.
//
// Track, Ack, Fail and Committed are safe for concurrent use.
type File struct {
	// Path is the name the file had when this File was started. Lines keep it as their source
	// after a rename (they were written under that name); Stats reports the current name.
	Path string
	// ID is the file's identity when this File was started; the checkpoint records a longer
	// fingerprint once the file has grown.
	ID FileID

	start  int64 // the offset this File began at
	acks   ackTracker
	idle   *idleSignal   // told (without blocking) when an Ack leaves no line in flight; may be nil
	counts *fileCounters // shared by every File of one followed file
	totals *fileCounters // the tailer's totals
	log    *slog.Logger
	clock  *readClock // stamps each line as it is tracked; nil: no stamps (OldestUnacked is 0)
	// readAt is the read clock when the follower last read a chunk of the file (markRead): the
	// stamp of the lines cut from it. The follower's goroutine only.
	readAt  uint32
	onFirst *atomic.Bool // set when the first failure of the followed file was logged
	// countAtCommit (Config.CommittedOnly): Ack and DeadLetter count nothing; the caller counts
	// the lines with CountCommitted once the transaction that holds them committed.
	countAtCommit bool
	// handle sends this File's lines: made by the Tailer's FileHandler before the first one,
	// and used by the follower's goroutine only.
	handle LineHandler
}

// fileCounters count what happened to one followed file (or to all of them, as totals). The
// follower's goroutine counts lines read and the producer's sender lines acknowledged, each for
// every line: the two live on separate cache lines, or each add would take the line from the
// other core.
type fileCounters struct {
	linesRead               atomic.Uint64
	long                    LongLineCounts
	container               ContainerCounts
	truncations             atomic.Uint64 // copytruncate resets
	_                       [cacheLine]byte
	linesAcked, linesFailed atomic.Uint64
	linesDeadLettered       atomic.Uint64 // kept in a dead-letter destination (not in linesAcked)
}

// cacheLine separates fields written by different goroutines for every line.
const cacheLine = 64

func newFile(path string, id FileID, start int64, counts, totals *fileCounters, failLogged *atomic.Bool, idle *idleSignal, clock *readClock, log *slog.Logger) *File {
	f := &File{Path: path, ID: id, start: start, counts: counts, totals: totals, log: log, onFirst: failLogged, idle: idle, clock: clock}
	f.acks.init(start)
	return f
}

// idleSignal tells Run that a file's last line in flight was acknowledged, so that Run saves
// soon. While a save is scheduled already (scheduled), it is not told: Run's save timer, always
// armed, saves within a checkpoint interval whatever the signal does, and Run sets the flag
// while its saves keep finding something new to write (a file written steadily), so that it is
// not woken for nothing once per burst of lines. A save that finds nothing new clears it: the
// first line acknowledged after a quiet time is then saved at once.
type idleSignal struct {
	ch        chan struct{}
	scheduled atomic.Bool
}

func newIdleSignal() *idleSignal { return &idleSignal{ch: make(chan struct{}, 1)} }

// signal tells Run, without blocking; s may be nil (a File of no Tailer).
func (s *idleSignal) signal() {
	if s == nil || s.scheduled.Load() {
		return
	}
	select {
	case s.ch <- struct{}{}:
	default: // told already
	}
}

// Track registers a line ending at end as in flight. The follower tracks every line before it
// calls the handler, so a handler need not call it; a second Track of the last tracked end (a
// handler that tracks as well) is a no-op, as is any end at or before it. Track is called from
// one goroutine: the File's follower (where the handler runs too).
func (f *File) Track(end int64) { f.acks.track(end, f.readAt) }

// markRead sets the stamp of the lines tracked from now on to the read clock: the follower calls
// it for every chunk it reads, so a chunk's lines cost one clock read together, not one each
// (nor a goroutine that keeps a clock ticking while the file is idle).
func (f *File) markRead() { f.readAt = f.clock.now() }

// OldestUnacked is how long ago the oldest line of the File that is neither acknowledged nor
// dead-lettered was read (a failed line counts: it pins the checkpoint), to the read clock's
// tick; 0 when every line read has its outcome. During an outage no line is acknowledged, and
// this is the figure that keeps growing.
func (f *File) OldestUnacked() time.Duration {
	if f.clock == nil {
		return 0
	}
	read, ok := f.acks.oldestStamp()
	if !ok {
		return 0
	}
	// Stamps are milliseconds modulo 2^32 (49 days): the difference is right across a wrap.
	return time.Duration(f.clock.now()-read) * time.Millisecond
}

// readClock is the time the follower stamps lines with, in milliseconds since base modulo 2^32:
// its resolution is plenty for an age reported in seconds, and a stamp takes 4 bytes of the
// acknowledgement ring.
type readClock struct {
	base time.Time
	wall func() time.Time // the Tailer's clock
}

func newReadClock(now func() time.Time) *readClock {
	return &readClock{base: now(), wall: now}
}

// now is the clock now; 0 for a nil clock.
func (c *readClock) now() uint32 {
	if c == nil {
		return 0
	}
	return uint32(c.wall().Sub(c.base).Milliseconds())
}

// Ack records that the line ending at end was acknowledged by Kafka. Acks may come in any order,
// from any goroutine; an end that is not in flight (acked already, or never tracked) is ignored.
func (f *File) Ack(end int64) {
	ok, idle := f.acks.ack(end)
	if !ok {
		return
	}
	if !f.countAtCommit {
		f.counts.linesAcked.Add(1)
		f.totals.linesAcked.Add(1)
	}
	if idle {
		f.idle.signal()
	}
}

// CountCommitted counts lines of the File whose outcome became final only now: with
// Config.CommittedOnly (exactly-once), a line is acknowledged or dead-lettered for good when
// the transaction that holds it commits, and Ack and DeadLetter count nothing.
func (f *File) CountCommitted(acked, deadLettered uint64) {
	f.counts.linesAcked.Add(acked)
	f.totals.linesAcked.Add(acked)
	f.counts.linesDeadLettered.Add(deadLettered)
	f.totals.linesDeadLettered.Add(deadLettered)
}

// DeadLetter records that the line ending at end was refused for good and is kept in a
// dead-letter destination: for the checkpoint it is done, as an acknowledged line is, so a
// restart does not send it again. It counts as dead-lettered, not as acknowledged.
func (f *File) DeadLetter(end int64) {
	ok, idle := f.acks.ack(end)
	if !ok {
		return
	}
	if !f.countAtCommit {
		f.counts.linesDeadLettered.Add(1)
		f.totals.linesDeadLettered.Add(1)
	}
	if idle {
		f.idle.signal()
	}
}

// Unsent records that this run will not deliver the line ending at end: the agent is stopping,
// or the exactly-once transaction it was in aborts. The committed offset stays before it, and
// the next run (a restart, or the next exactly-once round) reads it again. It is not a failure:
// nothing is lost, and nothing is counted or logged here.
func (f *File) Unsent(end int64) { f.acks.fail(end) }

// Fail records that the line ending at end will never be delivered. The committed offset stays
// before that line for as long as this File lives (until the agent restarts and sends it again):
// nothing is skipped silently. The first failure of a file is logged; all are counted.
func (f *File) Fail(end int64, err error) {
	if !f.acks.fail(end) {
		return
	}
	f.counts.linesFailed.Add(1)
	f.totals.linesFailed.Add(1)
	if f.onFirst.CompareAndSwap(false, true) {
		f.log.Error("line failed for good: this file's checkpoint stays before it; lines after it are still sent, and a restart sends them again",
			"path", f.Path, "file", f.ID.String(), "end", end, "committed", f.Committed(), "err", err)
	}
}

// Committed is the end of the longest prefix of tracked lines that were all acknowledged: the
// offset where a restart must resume so that no line is lost.
func (f *File) Committed() int64 { return f.acks.committedOffset() }

// Skip records that the line ending at end is done without being sent (the handler's filters
// left it out): for the checkpoint it is as an acknowledged line, in order with the lines
// around it. Called from the handler, on the follower's goroutine.
func (f *File) Skip(end int64) { f.skip(end) }

// skip records a span the follower consumed without sending it (a dropped long line): it is
// acknowledged at once, in order with the lines around it.
func (f *File) skip(end int64) {
	f.acks.track(end, f.readAt)
	f.acks.ack(end)
}

// ackTracker holds the lines of one File that are not yet part of the committed prefix, in read
// order: a ring of end offsets with their state. Ends are strictly increasing, so an ack finds
// its line at the head (the common, in-order case: O(1)) or by binary search; acknowledged lines
// leave from the head, so the cost is O(1) amortized for in-order acks and O(log n) otherwise.
//
// Memory is bounded by the lines in flight (which the producer's buffer.memory bounds) plus the
// acknowledged lines waiting behind an older, unacknowledged one. Once a line has failed, lines
// tracked after it can never move the committed offset, so they are only counted, not stored:
// a failed file does not grow the ring without bound.
type ackTracker struct {
	// The follower's side, used by its goroutine only (Track has one caller). Track puts ends
	// in the inbox without taking mu, and whoever holds mu moves them into the ring (drain)
	// before looking at it: with the follower and the producer's sender on the same mutex for
	// every line, the two cores spent 9 % of the file path handing it back and forth.
	trackedEnd int64 // the last end put in the inbox
	inbox      [inboxSize]int64
	stamps     [inboxSize]uint32 // the read clock when each end of the inbox was tracked
	inboxTail  atomic.Uint64     // ends put in the inbox so far; written by Track only
	inboxHead  atomic.Uint64     // ends moved into the ring so far; written under mu
	_          [cacheLine]byte

	mu          sync.Mutex
	ring        []ackEntry // len is a power of two (or 0)
	head, n     int
	committed   int64
	lastTracked int64
	pinned      bool  // a line failed: the ring ends with it and committed never passes it
	pinnedEnd   int64 // end of the earliest failed line
	pending     int   // tracked lines neither acked nor failed (in the ring or after pinnedEnd)
	beyond      int   // of pending: lines after pinnedEnd, counted only
}

// inboxSize bounds the ends tracked and not yet drained; a full inbox is drained by Track.
const inboxSize = 256

type ackState uint8

const (
	ackPending ackState = iota
	ackDone
	ackFailed
)

type ackEntry struct {
	end   int64
	stamp uint32 // the read clock when the line was tracked
	state ackState
}

const minRing = 64

// init sets the starting offset; called before the File is shared.
func (a *ackTracker) init(start int64) {
	a.committed, a.lastTracked, a.trackedEnd = start, start, start
}

func (a *ackTracker) at(i int) *ackEntry { return &a.ring[(a.head+i)&(len(a.ring)-1)] }

func (a *ackTracker) track(end int64, stamp uint32) {
	if end <= a.trackedEnd {
		return
	}
	a.trackedEnd = end
	tail := a.inboxTail.Load()
	if tail-a.inboxHead.Load() == inboxSize {
		a.mu.Lock()
		a.drain()
		a.mu.Unlock()
	}
	a.inbox[tail%inboxSize] = end
	a.stamps[tail%inboxSize] = stamp
	a.inboxTail.Store(tail + 1) // publishes the slot written above to drain
}

// drain moves the ends Track published into the ring. Called with mu held, before the ring is
// read or changed.
func (a *ackTracker) drain() {
	head, tail := a.inboxHead.Load(), a.inboxTail.Load()
	if head == tail {
		return
	}
	for ; head < tail; head++ {
		end, stamp := a.inbox[head%inboxSize], a.stamps[head%inboxSize]
		a.lastTracked = end
		a.pending++
		if a.pinned {
			a.beyond++
			continue
		}
		if a.n == len(a.ring) {
			a.resize(max(minRing, 2*len(a.ring)))
		}
		*a.at(a.n) = ackEntry{end: end, stamp: stamp}
		a.n++
	}
	a.inboxHead.Store(head) // Track may reuse the slots read above
}

// find returns the ring index of the entry ending at end, or -1.
func (a *ackTracker) find(end int64) int {
	if a.n == 0 {
		return -1
	}
	if a.at(0).end == end {
		return 0
	}
	i := sort.Search(a.n, func(i int) bool { return a.at(i).end >= end })
	if i < a.n && a.at(i).end == end {
		return i
	}
	return -1
}

// settle takes the line ending at end out of the pending lines: it returns the line's ring
// index, or -1 for a line after the pin (only counted there); ok is false when no pending line
// ends at end. Called with mu held.
func (a *ackTracker) settle(end int64) (i int, ok bool) {
	a.drain()
	if a.pinned && end > a.pinnedEnd {
		if a.beyond == 0 || end > a.lastTracked {
			return -1, false
		}
		a.beyond--
		a.pending--
		return -1, true
	}
	i = a.find(end)
	if i < 0 || a.at(i).state != ackPending {
		return -1, false
	}
	a.pending--
	return i, true
}

// ack marks the line ending at end acknowledged; idle reports that no tracked line is left in
// flight (every line read so far has an outcome).
func (a *ackTracker) ack(end int64) (ok, idle bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.settle(end)
	if !ok {
		return false, false
	}
	if i >= 0 {
		a.at(i).state = ackDone
		a.advance()
	}
	return true, a.pending == 0
}

func (a *ackTracker) fail(end int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.settle(end)
	if !ok || i < 0 {
		return ok
	}
	a.at(i).state = ackFailed
	// Everything after the earliest failure is now only counted: move it out of the ring.
	for j := i + 1; j < a.n; j++ {
		if a.at(j).state == ackPending {
			a.beyond++
		}
	}
	a.n = i + 1
	a.pinned = true
	a.pinnedEnd = end
	a.advance()
	return true
}

// advance pops acknowledged lines from the head into the committed offset.
func (a *ackTracker) advance() {
	for a.n > 0 && a.at(0).state == ackDone {
		a.committed = a.at(0).end
		a.head = (a.head + 1) & (len(a.ring) - 1)
		a.n--
	}
	// Give memory back after an outage: shrink a ring that is mostly empty.
	size := len(a.ring)
	for size > 4*minRing && a.n < size/8 {
		size /= 4
	}
	if size != len(a.ring) {
		a.resize(size)
	}
}

func (a *ackTracker) resize(size int) {
	ring := make([]ackEntry, size)
	for i := 0; i < a.n; i++ {
		ring[i] = *a.at(i)
	}
	a.ring, a.head = ring, 0
}

func (a *ackTracker) committedOffset() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.committed
}

// oldestStamp is the read stamp of the first tracked line that is not acknowledged (pending, or
// the failed line the checkpoint is pinned at); ok is false when there is none. The ring holds
// every such line from the committed offset on, and advance pops the acknowledged ones from its
// head, so it is the head.
func (a *ackTracker) oldestStamp() (stamp uint32, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drain()
	if a.n == 0 {
		return 0, false
	}
	return a.at(0).stamp, true
}

// inFlight is the number of tracked lines neither acknowledged nor failed.
func (a *ackTracker) inFlight() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drain()
	return a.pending
}
