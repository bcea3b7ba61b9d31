package agent

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

// lineOrigin is a followed file (one filetail.File) or stdin, as delivery sees it: the
// callback of all its lines, and the count of its lines that wait in the redelivery. Its
// reading waits while any does, so that its lines go out again in their order before any
// line read after them.
type lineOrigin struct {
	in   *input         // the input the lines are of
	file *filetail.File // nil: stdin
	// delivered is the callback of the first send of every line of this source (the record's
	// Tag says which line); a line sent again gets a callback of its own (redelivery.redone).
	delivered producer.Callback
	held      atomic.Int64 // lines waiting in the redelivery (not yet buffered again or resolved)
	// filtered counts the lines the filters left out (set at the first: lineFiltered); the
	// source's reader only.
	filtered *filterCounts
	// replay says the line being sent was read, and handled, by an exactly-once round that
	// aborted: it counts as sent again, not as read or sent anew. The source's reader only.
	replay bool
}

// redoLine is a line whose record failed, with a copy of the record: what the redelivery
// sends again or keeps as a dead letter.
type redoLine struct {
	src      *lineOrigin
	end      int64 // the record's Tag: a file line's end offset
	topic    string
	key      []byte
	value    []byte
	headers  []producer.Header
	ts       time.Time
	budget   int64 // read-ahead bytes this line holds, given back once it is resolved
	err      error // the last failure
	fate     fate
	reason   string // dead-letter reason
	attempts int    // failures so far
	due      time.Time
	local    bool // a dead letter the topic refused too (or none is set): to the local file
}

// redelivery gives every failed line its fate (classify) on its own goroutine: the producer's
// callbacks run on its sender goroutine, which must never wait for a Send.
//
// Lines to send again wait in queue until due (a backoff that grows with their failures),
// then go out sorted by source and offset. Dead letters go to the dead-letter topic, else (or
// if it refuses them too) to the local dead-letter file. A stop-class failure (fateStop) stops
// the sending of its line's input (input.stopped): its new lines wait in waitClear, and only
// its oldest stopped line is sent, as a probe, with a growing pause, until one of its lines is
// acknowledged. The other inputs' lines go on: a topic one input may not write to, or one
// input's dead letters that the full dead-letter file cannot take, stop that input alone.
type redelivery struct {
	a   *Agent
	dlf *deadLetterFile

	mu      sync.Mutex
	queue   []*redoLine
	closed  bool          // the run is over: failed lines are given up (fateGivenUp)
	cleared chan struct{} // closed and replaced when a source's held count reaches zero or a stop clears
	settled chan struct{} // closed and replaced when an input's outstanding lines reach zero or it stops (changed)
	wake    chan struct{} // one pending signal: the queue changed

	outstanding atomic.Int64 // lines in queue or sent again by it and not yet resolved

	dlCounts sync.Map // deadLetterKey -> *atomic.Int64: lines dead-lettered by reason and destination
	dlLogged atomic.Int64
}

// stopState is why sending an input's lines stopped, since when.
type stopState struct {
	err   error
	since time.Time
}

type deadLetterKey struct{ reason, destination string }

func newRedelivery(a *Agent) *redelivery {
	return &redelivery{a: a, cleared: make(chan struct{}), settled: make(chan struct{}), wake: make(chan struct{}, 1),
		dlf: newDeadLetterFile(a.cfg.StateDir, int64(a.cfg.DeadLetterMaxBytes), a.log)}
}

// add takes a failed line from a callback (the sender goroutine, or Send's caller): it must
// not block. It reports false when the run is over and the line is given up instead.
func (r *redelivery) add(src *lineOrigin, md producer.RecordMetadata, err error, f fate, reason string, budget int64) bool {
	rec := md.Record
	l := &redoLine{src: src, end: md.Tag, topic: md.Topic, err: err, fate: f, reason: reason, budget: budget}
	if rec != nil {
		// The record's bytes belong to its batch: keep a copy (one buffer for all of them).
		n := len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			n += len(h.Key) + len(h.Value)
		}
		buf := make([]byte, 0, n)
		clip := func(b []byte) []byte {
			if b == nil {
				return nil
			}
			buf = append(buf, b...)
			return buf[len(buf)-len(b) : len(buf) : len(buf)]
		}
		l.key, l.value, l.ts = clip(rec.Key), clip(rec.Value), rec.Timestamp
		if len(rec.Headers) > 0 {
			l.headers = make([]producer.Header, len(rec.Headers))
			for i, h := range rec.Headers {
				l.headers[i] = producer.Header{Key: string(clip([]byte(h.Key))), Value: clip(h.Value)}
			}
		}
	}
	now := time.Now()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	// A line to send again is not sent at once: one expiry fails a partition's batches in
	// several callbacks, and sending the first before the last arrived would put lines sent
	// again out of their order. Due a retry.backoff.ms later, a burst's lines go out together,
	// sorted. A dead letter is kept at once (with --exactly-once, before its transaction ends).
	l.due = now
	if f != fateDeadLetter {
		l.due = now.Add(time.Duration(r.a.pc.RetryBackoffMs) * time.Millisecond)
	}
	if f == fateStop {
		src.in.probing = false
	}
	src.held.Add(1)
	r.outstanding.Add(1)
	src.in.outstanding.Add(1)
	r.queue = append(r.queue, l)
	r.mu.Unlock()
	if f == fateStop {
		r.stopFor(src.in, err, now)
	}
	r.signal()
	return true
}

// requeue puts a line that failed again back in the queue, due after its backoff.
func (r *redelivery) requeue(l *redoLine, err error, f fate, reason string) {
	l.attempts++
	l.err, l.fate, l.reason = err, f, reason
	now := time.Now()
	if f == fateStop {
		r.stopFor(l.src.in, err, now)
	}
	r.enqueue(l, now.Add(r.backoff(l)))
}

// stopFor stops sending in's lines for err, unless they are stopped already. Called without mu.
func (r *redelivery) stopFor(in *input, err error, now time.Time) {
	if in.stopped.CompareAndSwap(nil, &stopState{err: err, since: now}) {
		r.changed()
		r.a.inputLog(in).Error("sending stopped: Kafka refused a line for a reason about the configuration or the cluster, not the line; reading pauses and the line is tried again until it is delivered",
			"error", err)
	}
}

// enqueue puts l (one of the redelivery's outstanding lines) back in the queue, due at due;
// once the run is over it is given up instead.
func (r *redelivery) enqueue(l *redoLine, due time.Time) {
	l.due = due
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.a.lineGivenUp(l.src, l.topic, l.end, l.budget, l.err)
		r.resolved(l)
		return
	}
	l.src.in.probing = false
	l.src.held.Add(1)
	r.queue = append(r.queue, l)
	r.mu.Unlock()
	r.signal()
}

// redone is the outcome of a record the redelivery sent again (a closure per resend, made
// only after a failure): acknowledged, or classified again.
func (r *redelivery) redone(l *redoLine, md producer.RecordMetadata, err error) {
	if err != nil && notBuffered(err) {
		return // sendRecord offers it again
	}
	if err == nil {
		r.a.lineAcked(l.src, md)
		r.resolved(l)
		r.acknowledged(l.src.in)
		return
	}
	f, reason := classify(err, l.src.templated())
	if f == fateGivenUp || (f != fateDeadLetter && l.src.file == nil) { // stdin: see lineDelivered
		r.giveUp(l, err)
		return
	}
	r.requeue(l, err, f, reason)
}

// backoff is the pause before a line that failed attempts times is tried again: the
// producer's retry.backoff.ms doubled per failure up to resendBackoffMax (the Java client's
// retry.backoff.max.ms default) for a line to send again (an expiry has already waited
// delivery.timeout.ms), one second doubled up to stopProbeMax for the probe of a stopped agent
// and for a dead-letter file that refused a line.
func (r *redelivery) backoff(l *redoLine) time.Duration {
	base, most := time.Duration(r.a.pc.RetryBackoffMs)*time.Millisecond, resendBackoffMax
	if l.fate == fateStop || l.local {
		base, most = time.Second, stopProbeMax
	}
	d := base
	for i := 1; i < l.attempts && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// stopProbeMax bounds the pause between two probes of a stopped agent; resendBackoffMax the
// pause before a line is sent again.
const (
	stopProbeMax     = 30 * time.Second
	resendBackoffMax = time.Second
)

func (r *redelivery) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// acknowledged is told of every line of in it sent again that was acknowledged: that ends in's
// stop. While stopped it sends only in's probe (and dead letters, which do not come here), so
// this is the probe's success, or that of a line sent before the stop began. A first send's
// acknowledgement does not end it: lines buffered before the stop, or to another topic than
// the one refused (a topic template), would end it at once and the stopped lines would be sent
// again at every one.
func (r *redelivery) acknowledged(in *input) {
	if in.stopped.Load() == nil {
		return
	}
	r.clearStop(in)
}

func (r *redelivery) clearStop(in *input) {
	st := in.stopped.Swap(nil)
	if st == nil {
		return
	}
	r.a.inputLog(in).Info("sending resumed: a line was delivered", "stopped_for", time.Since(st.since).Round(time.Millisecond), "cause", st.err)
	r.mu.Lock()
	in.probing = false
	now := time.Now()
	for _, l := range r.queue {
		if l.fate == fateStop && l.src.in == in {
			l.due = now
		}
	}
	close(r.cleared)
	r.cleared = make(chan struct{})
	r.mu.Unlock()
	r.signal()
}

// Stopped is why sending stopped, nil while it goes on: the input stopped first, when any is
// (input names it when the agent has several).
func (r *redelivery) Stopped() (err error, since time.Time, input string) {
	inputs := r.a.inputList()
	for _, in := range inputs {
		if st := in.stopped.Load(); st != nil && (err == nil || st.since.Before(since)) {
			err, since, input = st.err, st.since, in.name
		}
	}
	if len(inputs) == 1 && inputs[0].name == ImplicitInput {
		input = ""
	}
	return err, since, input
}

// waitClear waits until src has no line waiting to be sent again and sending is not stopped:
// a source's new lines go after its failed ones. It returns ctx's error if ctx ends first.
func (r *redelivery) waitClear(ctx context.Context, src *lineOrigin) error {
	for {
		if src.held.Load() == 0 && src.in.stopped.Load() == nil {
			return nil
		}
		r.mu.Lock()
		ch := r.cleared
		r.mu.Unlock()
		if src.held.Load() == 0 && src.in.stopped.Load() == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release marks one of src's lines as no longer waiting in the queue.
func (r *redelivery) release(src *lineOrigin) {
	if src.held.Add(-1) == 0 {
		r.mu.Lock()
		close(r.cleared)
		r.cleared = make(chan struct{})
		r.mu.Unlock()
	}
}

// resolved ends a line's stay: acknowledged, dead-lettered or given up.
func (r *redelivery) resolved(l *redoLine) {
	all, of := r.outstanding.Add(-1), l.src.in.outstanding.Add(-1)
	if all == 0 || of == 0 {
		r.changed()
	}
}

// take returns the lines to send now, sorted by source and offset, and the next due time of
// those left (zero: none). A source's lines go together, in their order, once its oldest is
// due: a younger line that failed later (a shorter backoff) must not overtake it. While
// an input's sending is stopped only one line of it goes, as the probe (dead letters still go).
func (r *redelivery) take(now time.Time) (due []*redoLine, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sortLines(r.queue)
	if r.closed {
		due, r.queue = r.queue, nil
		return due, time.Time{}
	}
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	keep := r.queue[:0] // writes only at or before the index read
	for i := 0; i < len(r.queue); {
		j := i + 1
		for j < len(r.queue) && r.queue[j].src == r.queue[i].src {
			j++
		}
		group := r.queue[i:j]
		in := group[0].src.in
		stopped := in.stopped.Load() != nil
		switch {
		case !stopped && group[0].due.After(now):
			later(group[0].due)
			keep = append(keep, group...)
		case !stopped:
			due = append(due, group...)
		default:
			for _, l := range group {
				switch {
				case l.due.After(now):
					later(l.due)
					keep = append(keep, l)
				case l.fate == fateDeadLetter:
					due = append(due, l)
				case !in.probing:
					in.probing = true
					due = append(due, l)
				default:
					keep = append(keep, l) // after the probe: clearStop wakes the loop
				}
			}
		}
		i = j
	}
	clear(r.queue[len(keep):])
	r.queue = keep
	return due, next
}

// sortLines sorts lines by source, the sources in the order their first line comes, then by
// offset.
func sortLines(lines []*redoLine) {
	rank := map[*lineOrigin]int{}
	for _, l := range lines {
		if _, ok := rank[l.src]; !ok {
			rank[l.src] = len(rank)
		}
	}
	slices.SortStableFunc(lines, func(x, y *redoLine) int {
		return cmp.Or(cmp.Compare(rank[x.src], rank[y.src]), cmp.Compare(x.end, y.end))
	})
}

// run sends the queued lines again and keeps the dead letters until ctx ends; then, until
// done closes, it settles what is left (see finish).
func (r *redelivery) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := r.take(time.Now())
		for _, l := range due {
			r.handle(ctx, l)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-r.wake:
		case <-timer.C:
		case <-ctx.Done():
			r.close()
			for _, l := range r.drain() {
				r.release(l.src)
				r.giveUp(l, l.err)
			}
			return
		}
	}
}

// reopen makes a closed redelivery, whose queue was drained and every line given up, take lines
// again (an exactly-once run's next round): nothing of the last round is left in it.
func (r *redelivery) reopen() {
	r.mu.Lock()
	r.closed, r.queue = false, nil
	cleared := false
	for _, in := range r.a.inputList() {
		in.probing = false
		cleared = in.stopped.Swap(nil) != nil || cleared
	}
	if cleared {
		close(r.cleared)
		r.cleared = make(chan struct{})
	}
	r.mu.Unlock()
}

// close ends the redelivery: lines that fail from now on are given up by their callbacks.
func (r *redelivery) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *redelivery) drain() []*redoLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue
	r.queue = nil
	return q
}

// settle waits until every line the redelivery holds was resolved but those of stopped inputs
// (a stopped input would wait the whole timeout for nothing), or ctx ends: at shutdown, after
// reading stopped and before the producer closes, so that lines sent again and dead letters
// still get their outcome.
func (r *redelivery) settle(ctx context.Context) {
	for {
		r.mu.Lock()
		ch := r.settled
		r.mu.Unlock()
		if r.settledNow() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// settledNow reports that every input with lines outstanding is stopped (or none has any).
func (r *redelivery) settledNow() bool {
	if r.outstanding.Load() == 0 {
		return true
	}
	r.a.inputsMu.RLock()
	defer r.a.inputsMu.RUnlock()
	for _, in := range slices.Concat(r.a.inputs, r.a.retired) {
		if in.outstanding.Load() > 0 && in.stopped.Load() == nil {
			return false
		}
	}
	return true
}

// changed wakes settle: an input's last outstanding line was resolved, or it stopped. Called
// without mu.
func (r *redelivery) changed() {
	r.mu.Lock()
	close(r.settled)
	r.settled = make(chan struct{})
	r.mu.Unlock()
}

// handle sends l again, or keeps it as a dead letter.
func (r *redelivery) handle(ctx context.Context, l *redoLine) {
	leave, ok := r.a.enterTransaction(l) // --exactly-once: l's dead letter joins the open transaction (poison.go)
	defer leave()
	if ctx.Err() != nil || !ok {
		r.release(l.src) // it was queued
		r.giveUp(l, l.err)
		return
	}
	switch {
	case l.fate == fateDeadLetter && !l.local && l.src.in.cfg.DeadLetterTopic != "" && l.topic != l.src.in.cfg.DeadLetterTopic:
		r.sendDeadLetter(ctx, l)
	case l.fate == fateDeadLetter:
		r.writeDeadLetter(l)
	default:
		r.resend(ctx, l)
	}
}

// resend sends l's record again with its own callback (redone). Its hold on its source ends
// only once the producer has the record: the source's next line, which waits for that, is
// appended after it and cannot overtake it in the partition.
func (r *redelivery) resend(ctx context.Context, l *redoLine) {
	rec := &producer.Record{Topic: l.topic, Partition: producer.PartitionAny, Key: l.key, Value: l.value,
		Headers: l.headers, Timestamp: l.ts, Tag: l.end}
	r.a.stats.LinesResent.Add(1)
	if testHookResend != nil {
		testHookResend(l)
	}
	r.a.sendRecord(ctx, rec, func(md producer.RecordMetadata, err error) { r.redone(l, md, err) })
	r.release(l.src)
}

// testHookResend, when set, runs before a line sent again goes to the producer (tests).
var testHookResend func(l *redoLine)

// giveUp ends l without an outcome: a file's line stays before its checkpoint (the next start
// sends it again), a stdin line is lost. The caller has released l's hold on its source (a
// queued line) or it had none (a line sent again, or out to the dead-letter topic).
func (r *redelivery) giveUp(l *redoLine, err error) {
	r.a.lineGivenUp(l.src, l.topic, l.end, l.budget, err)
	r.resolved(l)
}

// deadLettered ends l as a dead letter kept at destination (DeadLetterToTopic or
// DeadLetterToFile), where names it for the log.
func (r *redelivery) deadLettered(l *redoLine, destination, where string) {
	if l.src.file != nil {
		l.src.file.DeadLetter(l.end)
		r.a.readAhead.give(l.budget)
	}
	msg := "line dead-lettered: refused for good; its file's checkpoint moves past it"
	if c := r.a.txn.Load(); c != nil && l.src.file != nil {
		// Counted once its transaction commits: an abort takes the dead letter back, and the
		// next round keeps it again.
		c.ledger.deadLettered(l.src, l.topic, deadLetterKey{l.reason, destination})
		msg = "line dead-lettered inside the transaction: refused for good; its file's position passes it when the transaction commits"
	} else {
		r.countDeadLetter(l.src.in, l.topic, deadLetterKey{l.reason, destination}, 1)
	}
	if n := r.dlLogged.Add(1); n <= deadLetterLogFirst || n%deadLetterLogEvery == 0 {
		r.a.log.Warn(msg,
			"source", sourceName(l.src), "offset", l.end, "topic", l.topic, "reason", l.reason,
			"error", l.err, "dead_letter", where, "dead_letters", n)
	}
	r.resolved(l)
	if l.local && l.src.in.stopped.Load() != nil {
		r.clearStop(l.src.in) // the dead-letter file takes lines again
	}
}

// countDeadLetter counts n dead letters of in's lines (their records were for topic) kept
// under key.
func (r *redelivery) countDeadLetter(in *input, topic string, key deadLetterKey, n int64) {
	v, _ := r.dlCounts.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(n)
	r.a.stats.LinesDeadLettered.Add(n)
	in.line.rules.CountOutcome(topic, linerecord.OutcomeDeadLettered, n)
}

// A burst of dead letters (every line too large, say) logs the first ones and then one in
// deadLetterLogEvery, with the count so far.
const (
	deadLetterLogFirst = 20
	deadLetterLogEvery = 1000
)

func sourceName(src *lineOrigin) string {
	if src.file == nil {
		return "stdin"
	}
	return src.file.Path
}

// DeadLetterCount is one row of the dead-letter counts.
type DeadLetterCount struct {
	Reason, Destination string
	Lines               int64
}

// DeadLetters returns the dead-lettered lines by reason and destination, sorted.
func (r *redelivery) DeadLetters() []DeadLetterCount {
	var out []DeadLetterCount
	r.dlCounts.Range(func(k, v any) bool {
		key := k.(deadLetterKey)
		out = append(out, DeadLetterCount{Reason: key.reason, Destination: key.destination, Lines: v.(*atomic.Int64).Load()})
		return true
	})
	slices.SortFunc(out, func(x, y DeadLetterCount) int {
		return cmp.Or(cmp.Compare(x.Reason, y.Reason), cmp.Compare(x.Destination, y.Destination))
	})
	return out
}

// errDeadLetterFull is the dead-letter file's refusal once it holds dead-letter-max-bytes;
// errDeadLetterTooLarge its refusal of an entry larger than that.
var (
	errDeadLetterFull     = errors.New("the dead-letter file is full (dead-letter-max-bytes): move it away to take more")
	errDeadLetterTooLarge = errors.New("larger than the dead-letter file may ever be (dead-letter-max-bytes): raise it and restart to keep this line")
)

// Delivery is what became of the lines that Kafka did not take at the first try.
type Delivery struct {
	// Stopped is why sending stopped (a refusal about the configuration or the cluster, or a
	// dead-letter file that takes nothing more), since StoppedSince; nil while it goes on.
	Stopped      error
	StoppedSince time.Time
	// StoppedInput names the input whose sending stopped (the first, when several did) when
	// the agent has several; the others' lines go on.
	StoppedInput string
	// Waiting is the lines waiting to be sent again or dead-lettered.
	Waiting int64
	// Resent counts the times a line was sent again; DeadLettered the dead letters by reason
	// and destination.
	Resent       int64
	DeadLettered []DeadLetterCount
	// DeadLetterTopic and DeadLetterFile are where dead letters go ("" topic: the file only).
	DeadLetterTopic, DeadLetterFile string
}

// Delivery returns what became of the lines Kafka did not take at the first try. Safe to call
// from any goroutine.
func (a *Agent) Delivery() Delivery {
	err, since, input := a.redo.Stopped()
	return Delivery{Stopped: err, StoppedSince: since, StoppedInput: input, Waiting: a.redo.outstanding.Load(),
		Resent: a.stats.LinesResent.Load(), DeadLettered: a.redo.DeadLetters(),
		DeadLetterTopic: a.cfg.DeadLetterTopic, DeadLetterFile: a.redo.dlf.path}
}
