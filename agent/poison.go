package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

// Dead letters with --exactly-once. A line Kafka refuses for good is kept in the dead-letter
// destination inside the same transaction as the file position that passes it, so that a
// crash or an abort never leaves a line both dead-lettered and sent again, nor passed without
// its dead letter.
//
// Kafka Connect's exactly-once source task (ExactlyOnceWorkerSourceTask.producerSendFailed)
// fails the task on any failed send, whether Send threw or commitTransaction reported it, and
// errors.tolerance does not change that (only the at-least-once WorkerSourceTask skips a failed
// send with errors.tolerance=all, KIP-779; Connect's dead-letter queue is for sink connectors).
// A restart then meets the same record again, and fails again. The agent gets past such a
// line instead, in one of two ways:
//
//   - Refused by the client (RecordTooLargeError, a templated topic that does not exist, a
//     line the template cannot route): the record never entered the transaction, which goes
//     on. The redelivery dead-letters the line inside the open transaction: to the dead-letter
//     topic with a transactional Send while no commit runs (enterTransaction; its
//     File.DeadLetter mark only in that record's success callback, so the snapshot that passes
//     the line is taken in the transaction that holds its dead letter), or to the local file,
//     written and fsynced before the line is marked. A crash between that write and the commit
//     can only write the same dead letter twice (the line is read and refused again after the
//     restart), never skip the line or send it.
//   - Refused by the broker (MESSAGE_TOO_LARGE, INVALID_RECORD...): the batch failed inside
//     the transaction, which can then only abort (the Java client's ABORTABLE_ERROR), losing
//     the other lines of the transaction with it. The line is remembered in
//     dead-letter-pending.json, the transaction aborts, and the run starts a new round from the
//     last commit in the same process (runTailExactlyOnce, resumeAfterAbort), as a restart
//     would: that round dead-letters the line, as above, when it reads it again instead of
//     sending it to its topic. The list is on disk so that a crash between the abort and the
//     next commit leaves it to the next start.

// PendingDeadLetterFileName is the list, in --state-dir, of the lines a broker refused for good
// inside a transaction (--exactly-once) that the next start dead-letters instead of sending.
const PendingDeadLetterFileName = "dead-letter-pending.json"

const pendingDeadLetterVersion = 1

// pendingDeadLetter is one entry of dead-letter-pending.json: a line, by its file's identity
// key (device and inode, the key of the state topic's records) and its end offset, with the
// refusal it met.
type pendingDeadLetter struct {
	Dev   uint64 `json:"dev"`
	Inode uint64 `json:"inode"`
	File  string `json:"file"` // the file's whole identity, dev:inode:fingerprint/length, for people
	Path  string `json:"path"`
	End   int64  `json:"end"` // the byte offset after the line
	Topic string `json:"topic"`
	// ValueBytes is the size of the record's value: a line read again that does not have it
	// (its file was rewritten, or --format changed) is sent as usual.
	ValueBytes int `json:"value_bytes"`
	// Reason, Error and Message are those of the refusal: the dead letter's reason and its
	// kafkatrail.dead_letter.error and .message headers. Code is Error's Kafka error code
	// (0: a refusal of the client).
	Reason  string `json:"reason"`
	Error   string `json:"error"`
	Code    int16  `json:"code,omitempty"`
	Message string `json:"message"`
	// ToFile: the dead-letter topic refused the dead letter as well, so the next start writes
	// it to the dead-letter file, as the at-least-once path does.
	ToFile bool   `json:"to_file,omitempty"`
	Time   string `json:"time"`
}

func (p pendingDeadLetter) key() pendingKey {
	return pendingKey{filetail.FileKey{Dev: p.Dev, Inode: p.Inode}, p.End}
}

// refusal is the kept refusal, standing in for the error the line met in the earlier run.
func (p pendingDeadLetter) refusal() *keptRefusal {
	e := &keptRefusal{msg: p.Message, toFile: p.ToFile}
	switch {
	case p.Code != 0:
		e.cause = kerr.ErrorForCode(p.Code)
	case p.Error == "RECORD_TOO_LARGE":
		e.cause = &producer.RecordTooLargeError{}
	}
	return e
}

type pendingKey struct {
	file filetail.FileKey
	end  int64
}

type pendingDeadLetterFile struct {
	Version int                 `json:"version"`
	Entries []pendingDeadLetter `json:"entries"`
}

// keptRefusal is a refusal read back from dead-letter-pending.json: its message is the earlier
// run's, and it unwraps to the Kafka error of its code, so that errorName gives the same name.
type keptRefusal struct {
	msg    string
	cause  error
	toFile bool
}

func (e *keptRefusal) Error() string { return e.msg }
func (e *keptRefusal) Unwrap() error { return e.cause }

// pendingDeadLetters is dead-letter-pending.json and its entries. The followers look lines up
// lock-free in an immutable copy (nil while there is none, the usual case: one atomic load per
// line); delivery callbacks add entries and the committer drops the ones a commit passed and
// saves, under mu.
type pendingDeadLetters struct {
	path string

	mu      sync.Mutex
	entries map[pendingKey]pendingDeadLetter
	dirty   bool // entries differ from the file

	view atomic.Pointer[map[pendingKey]pendingDeadLetter]
}

// loadPendingDeadLetters reads dead-letter-pending.json in stateDir, without the entries that
// committed (the positions read back from the state topic) has passed already: a crash after
// a commit and before the file was written again leaves them. A file that cannot be read is
// logged and taken as empty: a line it named is refused again and named again, which costs
// one more aborted run, not a line.
//
// resumed says a round of this run aborted just before: its own log said why.
func loadPendingDeadLetters(stateDir string, committed map[filetail.FileKey]filetail.Checkpoint, log *slog.Logger, resumed bool) *pendingDeadLetters {
	p := &pendingDeadLetters{path: filepath.Join(stateDir, PendingDeadLetterFileName), entries: map[pendingKey]pendingDeadLetter{}}
	data, err := os.ReadFile(p.path)
	if errors.Is(err, os.ErrNotExist) {
		return p
	}
	var f pendingDeadLetterFile
	if err == nil {
		err = json.Unmarshal(data, &f)
	}
	if err == nil && f.Version != pendingDeadLetterVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, pendingDeadLetterVersion)
	}
	if err != nil {
		log.Error("exactly-once: cannot read the lines to dead-letter: a line it names is refused again and named again", "file", p.path, "error", err)
		p.dirty = true // the next save replaces it
		return p
	}
	for _, e := range f.Entries {
		if ck, ok := committed[e.key().file]; ok && ck.Offset >= e.End {
			p.dirty = true
			continue
		}
		p.entries[e.key()] = e
	}
	p.publish()
	if n := len(p.entries); n > 0 && !resumed {
		log.Info("exactly-once: lines a broker refused before this start (dead-letter-pending.json) are dead-lettered when read again", "lines", n, "file", p.path)
	}
	return p
}

// lookup returns the entry of the line of file k that ends at end, if any.
func (p *pendingDeadLetters) lookup(k filetail.FileKey, end int64) (pendingDeadLetter, bool) {
	m := p.view.Load()
	if m == nil {
		return pendingDeadLetter{}, false
	}
	e, ok := (*m)[pendingKey{k, end}]
	return e, ok
}

// publish makes the entries visible to lookup. Under mu, or before the followers start.
func (p *pendingDeadLetters) publish() {
	if len(p.entries) == 0 {
		p.view.Store(nil)
		return
	}
	m := maps.Clone(p.entries)
	p.view.Store(&m)
}

// add names one more line. It reports whether that changes what the next round does with it:
// the line was not named, or its dead letter goes to the file now (the dead-letter topic
// refused it too). A line can change so at most twice: rounds that each add a change end.
func (p *pendingDeadLetters) add(e pendingDeadLetter) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.entries[e.key()]
	p.entries[e.key()] = e
	p.dirty = true
	p.publish()
	return !had || old.ToFile != e.ToFile
}

// count is the number of lines named.
func (p *pendingDeadLetters) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// passed drops the entries that the committed positions snap have passed, and those of files
// whose position the commit removed (released: the tailer follows them no more); old is the
// previous commit's positions.
func (p *pendingDeadLetters) passed(snap, old map[filetail.FileKey]filetail.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for k, e := range p.entries {
		ck, ok := snap[k.file]
		_, had := old[k.file]
		if (ok && ck.Offset >= e.End) || (!ok && had) {
			delete(p.entries, k)
			changed = true
		}
	}
	if changed {
		p.dirty = true
		p.publish()
	}
}

// save writes the entries if they changed: atomically (a temporary file written and fsynced,
// renamed over the list, the directory fsynced), or removes the file once none is left.
func (p *pendingDeadLetters) save() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dirty {
		return nil
	}
	dir := filepath.Dir(p.path)
	if len(p.entries) == 0 {
		if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := syncDir(dir); err != nil {
			return err
		}
		p.dirty = false
		return nil
	}
	list := slices.SortedFunc(maps.Values(p.entries), func(x, y pendingDeadLetter) int {
		return cmp.Or(cmp.Compare(x.Path, y.Path), cmp.Compare(x.Dev, y.Dev), cmp.Compare(x.Inode, y.Inode), cmp.Compare(x.End, y.End))
	})
	data, err := json.MarshalIndent(pendingDeadLetterFile{Version: pendingDeadLetterVersion, Entries: list}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, PendingDeadLetterFileName+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	p.dirty = false
	return nil
}

// syncDir makes a rename or removal in dir survive a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// savePending writes dead-letter-pending.json, logging a failure: the run is ending with an
// abort, and a line the file fails to name is refused again after the restart and named again.
func (c *txnCommitter) savePending() {
	for _, p := range c.parts {
		if err := p.pending.save(); err != nil {
			c.a.log.Error("exactly-once: writing the lines to dead-letter at the next start", "file", p.pending.path, "error", err)
		}
	}
}

// refusedBeforeTransaction reports a refusal by the client: Send (or the topic router) refused
// the record before appending it, so it never entered the transaction, which goes on unharmed
// (Send checks max.request.size and waits for the topic's metadata before it adds the
// partition to the transaction).
func refusedBeforeTransaction(err error) bool {
	var tooLarge *producer.RecordTooLargeError
	var unrouted *linerecord.RouteError
	var noMetadata *producer.MetadataTimeoutError
	return errors.As(err, &tooLarge) || errors.As(err, &unrouted) || errors.As(err, &noMetadata)
}

// transactionFailed reports an error about the transaction rather than the record: its
// cause may name another record's refusal (a TransactionAbortableError wraps the MESSAGE_TOO_LARGE
// of the batch that failed first), which must not make this line a dead letter.
func transactionFailed(err error) bool {
	var abortable *producer.TransactionAbortableError
	var fatal *producer.TransactionFatalError
	var state *producer.TransactionStateError
	return errors.As(err, &abortable) || errors.As(err, &fatal) || errors.As(err, &state) ||
		errors.Is(err, producer.ErrTransactionAborted) || errors.Is(err, producer.ErrProducerClosed)
}

// deadLetterInTransaction is lineDelivered's decision with --exactly-once for a line whose
// first send failed with err (fate f): true hands it to the redelivery, which dead-letters it
// inside the open transaction (a refusal by the client); false gives it up, so that the
// transaction aborts. A line the broker refused for good is remembered first, for the next
// start to dead-letter.
func (a *Agent) deadLetterInTransaction(src *lineOrigin, md producer.RecordMetadata, err error, f fate, reason string) bool {
	if f != fateDeadLetter || src.file == nil || transactionFailed(err) {
		return false
	}
	if refusedBeforeTransaction(err) {
		return true
	}
	a.keepPendingDeadLetter(src, md.Tag, md.Topic, md.SerializedValueSize, reason, err, false)
	return false
}

// keepPendingDeadLetter remembers that the broker refused src's line ending at end for good
// (err, reason), inside a transaction that must therefore abort; toFile says the dead-letter
// topic refused it too. The committer writes the list before the run ends.
func (a *Agent) keepPendingDeadLetter(src *lineOrigin, end int64, topic string, valueBytes int, reason string, err error, toFile bool) {
	c := a.txn.Load()
	if c == nil || src.file == nil {
		return
	}
	id := src.file.ID
	e := pendingDeadLetter{Dev: id.Dev, Inode: id.Inode, File: id.String(), Path: src.file.Path, End: end,
		Topic: topic, ValueBytes: valueBytes, Reason: reason, Error: errorName(err), Message: err.Error(), ToFile: toFile,
		Time: time.Now().UTC().Format(time.RFC3339Nano)}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		e.Code = ke.Code
	}
	pending := c.partOf(src.in).pending
	if pending.add(e) {
		c.newPending.Add(1)
	}
	where := "the dead-letter topic"
	if toFile || src.in.cfg.DeadLetterTopic == "" {
		where = "the dead-letter file"
	}
	a.log.Warn("exactly-once: Kafka refused a line for good inside the transaction, which must abort: the agent resumes from the last commit and keeps the line in "+where+" instead of sending it",
		"source", src.file.Path, "offset", end, "topic", topic, "reason", reason, "error", err, "pending", pending.path)
}

// deadLetterRefusedInTransaction is told, with --exactly-once, that the dead-letter topic did
// not take l's dead letter (err). A refusal by the client left the transaction unharmed: false,
// and l goes to the dead-letter file now, as without --exactly-once. Otherwise the transaction
// must abort: l is given up (so the commit aborts) and, if the broker refused the dead letter
// itself, remembered for the next start to write to the dead-letter file.
func (a *Agent) deadLetterRefusedInTransaction(l *redoLine, err error) bool {
	if !a.cfg.ExactlyOnce || refusedBeforeTransaction(err) {
		return false
	}
	if !transactionFailed(err) {
		a.keepPendingDeadLetter(l.src, l.end, l.topic, len(l.value), l.reason, l.err, true)
	}
	a.redo.giveUp(l, err) // sendDeadLetter released l's hold on its source already
	return true
}

// enterTransaction is the redelivery's hold on the open transaction while it keeps l's dead
// letter: with --exactly-once the committer's dl lock, which a commit takes after the
// followers' lock, so that a dead-letter record belongs to the transaction whose commit flushes
// it (Flush waits for its callback, which marks the line), and so does a dead-letter file line,
// written and fsynced before its mark. ok is false once no transaction will commit (the last
// one committed, or the run failed): l is then given up. A line kept from an earlier run whose
// dead-letter topic refused it goes to the dead-letter file.
func (a *Agent) enterTransaction(l *redoLine) (leave func(), ok bool) {
	c := a.txn.Load()
	if c == nil {
		return func() {}, true
	}
	c.dl.Lock()
	if c.ended.Load() {
		c.dl.Unlock()
		return func() {}, false
	}
	if k, isKept := l.err.(*keptRefusal); isKept && k.toFile {
		l.local = true
	}
	return c.dl.Unlock, true
}

// deadLetterPending keeps line of src, which a broker refused in an earlier run (p), as a dead
// letter instead of sending it: the redelivery keeps it inside the open transaction, as a line
// the client refused. Its record is built as sendLine builds it (the dead letter carries the
// record that was to be sent), and takes its bytes from the read-ahead budget until it is kept.
// kept is false when the record is not the one refused (another size): the line is then sent.
func (a *Agent) deadLetterPending(ctx context.Context, src *lineOrigin, line filetail.Line, p pendingDeadLetter) (kept bool, err error) {
	pipe := src.in.line
	b := pipe.builder()
	defer pipe.put(b)
	rec, buildErr := b.Build(line, src.file.Path) // a line refused by a broker was routed then
	if _, left := buildErr.(*linerecord.Filtered); left || len(rec.Value) != p.ValueBytes {
		// Not the record refused: the filters changed since, or its size did (the format).
		return false, nil
	}
	budget := int64(len(rec.Value))
	if err := a.readAhead.take(ctx, budget); err != nil {
		return true, err
	}
	if !src.replay {
		a.stats.LinesRead.Add(1)
		a.stats.BytesRead.Add(int64(len(line.Data)))
	}
	ts := rec.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	md := producer.RecordMetadata{Topic: rec.Topic, Partition: producer.PartitionAny, Offset: -1, Tag: line.End,
		SerializedKeySize: len(rec.Key), SerializedValueSize: len(rec.Value),
		Record: &producer.FailedRecord{Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: ts}}
	refusal := p.refusal()
	if !a.redo.add(src, md, refusal, fateDeadLetter, p.Reason, budget) {
		a.lineGivenUp(src, rec.Topic, line.End, budget, refusal)
	}
	return true, nil
}
