package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkatrail/kafkatrail/consumer"
	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/producer"
)

// The exactly-once mode (--exactly-once, after Kafka Connect's exactly-once source tasks,
// KIP-618): the producer is transactional, and every commit-interval the committer pauses the
// line senders, writes each file's position to the state topic inside the open transaction and
// commits it. Lines and positions become visible to read_committed consumers together or not at
// all; a restart reads the positions of the last commit back and resumes there.

// txnCommitter owns the agent's transactions while RunTail runs in exactly-once mode.
//
// Concurrency: the followers' goroutines send lines while holding mu for reading (one line at a
// time); the committer goroutine takes mu for writing, so while it flushes, writes the
// positions and commits, no line is sent. A line tracked but not yet sent when the committer
// takes the lock is not acknowledged, so the file's committed offset stops before it: the
// position committed covers exactly the lines in the transaction.
type txnCommitter struct {
	a     *Agent
	topic string // the state topic
	txnID string

	mu sync.RWMutex
	// dl is held by the redelivery while it keeps a dead letter (poison.go), and by the
	// committer, after mu, while it commits: a dead-letter record belongs to the transaction
	// whose commit flushes it. It is not mu's read side because a committer waiting for mu
	// blocks new readers, and a follower holding mu may be waiting for read-ahead bytes that
	// only the redelivery's dead letters give back.
	dl sync.Mutex
	// lines counts the lines sent in the open transaction; full is signalled (never blocking)
	// when it reaches commit-max-lines.
	lines atomic.Int64
	full  chan struct{}

	// parts are the inputs the transactions span, one each, in the agent's order: each
	// input's files, its positions and its lines to dead-letter.
	parts []*txnInput
	open  bool // BeginTransaction was called and not yet committed (under mu for writing)

	commits  atomic.Int64
	failedCk atomic.Pointer[error] // first failed checkpoint record of the open transaction

	// ledger holds the outcomes of the open transaction's lines until it commits.
	ledger txnLedger
	// unsent counts the lines of the open transaction that were not delivered (lineUnsent):
	// any makes it abort. firstUnsent is the first one's error.
	unsent      atomic.Int64
	firstUnsent atomic.Pointer[error]

	// newPending counts the lines this committer's transactions added to the inputs'
	// dead-letter-pending.json.
	newPending atomic.Int64
	// ended is set once no transaction will commit any more (the last one committed, or the
	// run failed): the redelivery gives its lines up rather than keep a dead letter no commit
	// would pass.
	ended atomic.Bool
}

// txnInput is one input's part in the exactly-once run: every transaction carries the lines
// and the positions of all inputs, each input's positions under keys of its own (stateKey).
type txnInput struct {
	in  *input
	key string // the suffix of its state keys: "" for the implicit input, "@NAME" for another
	t   *filetail.Tailer

	// committed is the positions the state topic holds for this input (owned by the
	// committer, under mu for writing); committedView is committed for readers that must not
	// wait for a commit in progress (the Tailer's Stats): a map stored here is never changed.
	committed     map[filetail.FileKey]filetail.Checkpoint
	committedView atomic.Pointer[map[filetail.FileKey]filetail.Checkpoint]

	// pending is the input's dead-letter-pending.json (in its state directory): the lines a
	// broker refused inside an aborted transaction, dead-lettered instead of sent when read
	// again (poison.go).
	pending *pendingDeadLetters

	// replayTo is, per file, how far earlier rounds of this run that aborted had handled its
	// lines: a line that ends there or before is read again, and sent again (read-only).
	// handled is how far this round has.
	replayTo map[filetail.FileKey]int64
	handled  replayPositions
}

// newTxnCommitter returns the committer of transactional id txnID over the agent's inputs,
// whose last committed positions are positions, by input name (read back from the state topic).
// prev is the committer of the round before, which aborted (nil in the first round).
func newTxnCommitter(a *Agent, txnID string, positions map[string][]filetail.Checkpoint, prev *txnCommitter) *txnCommitter {
	c := &txnCommitter{a: a, topic: a.cfg.StateTopic, txnID: txnID, full: make(chan struct{}, 1)}
	for _, in := range a.inputList() {
		p := &txnInput{in: in, committed: make(map[filetail.FileKey]filetail.Checkpoint, len(positions[in.name]))}
		if prev != nil {
			for _, q := range prev.parts {
				if q.in == in {
					p.replayTo = q.handled.merged(q.replayTo)
				}
			}
		}
		if in.name != ImplicitInput {
			p.key = "@" + in.name
		}
		for _, e := range positions[in.name] {
			if id, err := e.FileID(); err == nil {
				p.committed[id.Key()] = e
			}
		}
		initial := maps.Clone(p.committed)
		p.committedView.Store(&initial)
		p.pending = loadPendingDeadLetters(in.cfg.StateDir, p.committed, a.inputLog(in), prev != nil)
		c.parts = append(c.parts, p)
	}
	return c
}

// partOf is in's part.
func (c *txnCommitter) partOf(in *input) *txnInput {
	for _, p := range c.parts {
		if p.in == in {
			return p
		}
	}
	panic("agent: an input the exactly-once run does not span: " + in.name)
}

// pendingCount is the lines all inputs' dead-letter-pending.json name.
func (c *txnCommitter) pendingCount() int {
	n := 0
	for _, p := range c.parts {
		n += p.pending.count()
	}
	return n
}

// committedOffset is the position of file k in the last committed transaction (or read back
// from the state topic at the start), for the Tailer's Stats.
func (p *txnInput) committedOffset(k filetail.FileKey) (int64, bool) {
	m := p.committedView.Load()
	if m == nil {
		return 0, false
	}
	e, ok := (*m)[k]
	return e.Offset, ok
}

// stateKey is a file's checkpoint record key: the transactional id, '/', the file's device and
// inode (a file's fingerprint grows with it; its key must not), and the input's suffix
// ("@NAME", none for the implicit input, whose keys are those of an agent without inputs).
func stateKey(txnID string, p *txnInput, k filetail.FileKey) string {
	return fmt.Sprintf("%s/%d:%d%s", txnID, k.Dev, k.Inode, p.key)
}

// stateKeyRest is what follows the transactional id and '/' in a state key of ours: a longer
// transactional id that begins with ours and a '/' is another agent's.
var stateKeyRest = regexp.MustCompile(`^[0-9]+:[0-9]+(@[A-Za-z0-9][A-Za-z0-9_.-]{0,63})?$`)

// readStateTopic returns the last committed checkpoint of every file of txnID in the state
// topic, by input name.
func readStateTopic(ctx context.Context, cl *consumer.Client, topic, txnID string) (map[string][]filetail.Checkpoint, error) {
	prefix := txnID + "/"
	latest := map[string]*filetail.Checkpoint{}
	err := cl.ReadCommitted(ctx, topic, func(r consumer.Record) error {
		key := string(r.Key)
		if !strings.HasPrefix(key, prefix) || !stateKeyRest.MatchString(key[len(prefix):]) {
			return nil // another agent's
		}
		if r.Value == nil {
			delete(latest, key) // a tombstone: the file was released
			return nil
		}
		var e filetail.Checkpoint
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return fmt.Errorf("state topic %s: record at %d/%d (key %q) is not a checkpoint: %w", topic, r.Partition, r.Offset, key, err)
		}
		if _, err := e.FileID(); err != nil || e.Offset < 0 {
			return fmt.Errorf("state topic %s: record at %d/%d (key %q) is not a valid checkpoint (offset %d, %v)", topic, r.Partition, r.Offset, key, e.Offset, err)
		}
		latest[key] = &e
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]filetail.Checkpoint{}
	for key, e := range latest {
		name := ImplicitInput
		if _, in, ok := strings.Cut(key[len(prefix):], "@"); ok {
			name = in
		}
		out[name] = append(out[name], *e)
	}
	return out, nil
}

// startExactlyOnce prepares the transactional run: it makes sure the state topic exists and is
// compacted, fences any earlier agent with the same transactional id (InitTransactions: the
// coordinator aborts a transaction that agent left open, so nothing it sent after its last
// commit can become visible later), and only then reads the positions back, which are therefore
// final, by input name (an input without any is not in the map).
func (a *Agent) startExactlyOnce(ctx context.Context) (positions map[string][]filetail.Checkpoint, err error) {
	pc, err := a.cfg.ProducerConfig()
	if err != nil {
		return nil, err
	}
	nc, err := pc.NetworkConfig()
	if err != nil {
		return nil, err
	}
	if nc.SASL != nil {
		if c, ok := nc.SASL.Exchange.(io.Closer); ok {
			defer c.Close() // a Kerberos login's renewal, for this client only
		}
	}
	cl, err := consumer.NewClient(pc.BootstrapServers, nc)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	topic, txnID := a.cfg.StateTopic, pc.TransactionalID
	created, err := cl.EnsureCompactedTopic(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("exactly-once: state topic: %w", err)
	}
	if created {
		a.log.Info("exactly-once: created the state topic", "topic", topic, "cleanup.policy", "compact")
	}
	start := time.Now()
	for {
		err := a.prod.InitTransactions(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !stillGoing(err) {
			return nil, fmt.Errorf("exactly-once: InitTransactions for transactional-id %q: %w", txnID, err)
		}
		a.log.Warn("exactly-once: InitTransactions still waiting for the transaction coordinator", "transactional_id", txnID, "error", err)
	}
	a.log.Info("exactly-once: transactional producer ready (an earlier agent with this id is fenced)",
		"transactional_id", txnID, "took", time.Since(start).Round(time.Millisecond))
	positions, err = readStateTopic(ctx, cl, topic, txnID)
	if err != nil {
		return nil, fmt.Errorf("exactly-once: reading the committed positions: %w", err)
	}
	files := 0
	for _, entries := range positions {
		files += len(entries)
	}
	a.log.Info("exactly-once: committed positions read back (read_committed)", "topic", topic, "files", files, "inputs", len(positions))
	return positions, nil
}

// stillGoing reports an error of a transactional call that only says it did not finish within
// max.block.ms or its context: calling it again waits for the same operation.
func stillGoing(err error) bool {
	var fatal *producer.TransactionFatalError
	var abortable *producer.TransactionAbortableError
	var state *producer.TransactionStateError
	if errors.As(err, &fatal) || errors.As(err, &abortable) || errors.As(err, &state) || errors.Is(err, producer.ErrProducerClosed) {
		return false
	}
	return strings.Contains(err.Error(), "it goes on")
}

// fileLines is the FileHandler of p's tailer in exactly-once mode: each line is sent (as the
// agent's fileLines sends it) under the read lock, so that it belongs to the transaction the
// committer commits next. A line a broker refused in an earlier run (dead-letter-pending.json)
// is not sent: the redelivery dead-letters it, inside the transaction too.
func (c *txnCommitter) fileLines(p *txnInput) filetail.FileHandler {
	return func(f *filetail.File) filetail.LineHandler { return c.fileLinesOf(p, f) }
}

func (c *txnCommitter) fileLinesOf(p *txnInput, f *filetail.File) filetail.LineHandler {
	a := c.a
	src := &lineOrigin{in: p.in, file: f}
	replayTo := p.replayTo[f.ID.Key()]
	handled := p.handled.of(f.ID.Key())
	return func(ctx context.Context, line filetail.Line) error {
		if src.delivered == nil { // bound at the first line: only f's follower sends them, with one ctx
			src.delivered = func(md producer.RecordMetadata, err error) { a.lineDelivered(ctx, src, md, err) }
		}
		// The rate limit is waited for outside the lock: a long wait (a large line under
		// --max-bytes-per-second) must not hold the commit back past transaction.timeout.ms.
		if err := src.in.limit.wait(ctx, len(line.Data)); err != nil {
			return err
		}
		// So is the wait for f's dead letters still in the redelivery (f's lines go out in
		// their order): holding the lock through it would hold the commit back.
		if err := a.redo.waitClear(ctx, src); err != nil {
			return err
		}
		var kept bool
		var err error
		src.replay = line.End <= replayTo
		c.mu.RLock()
		if e, ok := p.pending.lookup(f.ID.Key(), line.End); ok {
			kept, err = a.deadLetterPending(ctx, src, line, e)
		}
		if !kept {
			err = a.sendLine(ctx, line, f.Path, line.End, a.readAhead, src)
		}
		n := c.lines.Add(1)
		c.mu.RUnlock()
		if err == nil && line.End > handled.Load() {
			handled.Store(line.End)
		}
		if n == int64(c.a.cfg.CommitMaxLines) {
			select {
			case c.full <- struct{}{}:
			default:
			}
		}
		return err
	}
}

// run commits every commit-interval, or sooner when a transaction holds commit-max-lines, until
// ctx ends (nil) or a commit fails (its error). commitCtx bounds each commit.
func (c *txnCommitter) run(ctx, commitCtx context.Context) error {
	// Dead letters are kept by the redelivery's goroutine, inside the transactions (poison.go):
	// it runs while the committer does, and shutdown, which comes after both, stops it.
	c.a.startRedo()
	tick := time.NewTicker(c.a.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-c.full:
		}
		if err := c.commit(commitCtx, false); err != nil {
			return err
		}
	}
}

// commit ends the open transaction: with the senders paused it flushes the lines, sends the
// position of every file that moved (a tombstone for a file released) to the state topic and
// commits; then, unless last, it begins the next transaction. It saves the committed positions
// to checkpoints.json too. A transaction with nothing in it is left open, uncommitted.
func (c *txnCommitter) commit(ctx context.Context, last bool) error {
	if last {
		// The followers have stopped: the dead letters the redelivery still holds are of lines
		// read into this transaction, and join it, so that the last commit passes them.
		c.a.redo.settle(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dl.Lock()
	defer c.dl.Unlock()
	err := c.commitLocked(ctx, last)
	if err != nil || last {
		c.ended.Store(true)
	}
	return err
}

func (c *txnCommitter) commitLocked(ctx context.Context, last bool) error {
	a := c.a
	if err := a.prod.Flush(ctx); err != nil {
		return fmt.Errorf("exactly-once: flushing the transaction: %w", err)
	}
	if c.unsent.Load() > 0 {
		// A line of the transaction was not delivered: committing would skip it (its file's
		// position stops before it, and the lines after it would be sent again). A line a
		// broker refused for good is named in dead-letter-pending.json before the abort, so
		// that the next round gets past it.
		c.savePending()
		return &producer.TransactionAbortableError{Cause: fmt.Errorf("a line was not delivered: %w", c.unsentCause())}
	}
	sent := 0
	send := func(key string, value []byte) error {
		rec := &producer.Record{Topic: c.topic, Partition: producer.PartitionAny, Key: []byte(key), Value: value}
		err := a.prod.Send(ctx, rec, func(_ producer.RecordMetadata, err error) {
			if err != nil {
				c.failedCk.CompareAndSwap(nil, &err)
			}
		})
		if err != nil {
			return fmt.Errorf("exactly-once: sending a position to the state topic %s: %w", c.topic, err)
		}
		sent++
		return nil
	}
	snaps := make([]map[filetail.FileKey]filetail.Checkpoint, len(c.parts))
	for i, p := range c.parts {
		snap := p.t.Snapshot()
		snaps[i] = snap
		for k, e := range snap {
			if old, ok := p.committed[k]; ok && old.SameAs(e) {
				continue
			}
			value, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := send(stateKey(c.txnID, p, k), value); err != nil {
				return err
			}
		}
		for k := range p.committed {
			if _, ok := snap[k]; !ok {
				if err := send(stateKey(c.txnID, p, k), nil); err != nil {
					return err
				}
			}
		}
	}
	if sent == 0 && c.lines.Load() == 0 {
		return nil // nothing happened: the (empty) transaction stays open
	}
	for {
		err := a.prod.CommitTransaction(ctx)
		if err == nil {
			break
		}
		if ctx.Err() == nil && stillGoing(err) {
			a.log.Warn("exactly-once: commit still waiting", "error", err)
			continue
		}
		return fmt.Errorf("exactly-once: CommitTransaction: %w", err)
	}
	if p := c.failedCk.Load(); p != nil {
		// Cannot happen: a failed record makes the commit fail. Kept as the invariant's check.
		return fmt.Errorf("exactly-once: a position record failed but the commit succeeded: %w", *p)
	}
	c.open = false
	c.lines.Store(0)
	c.commits.Add(1)
	c.ledger.commit(a)
	for i, p := range c.parts {
		old := p.committed
		p.committed = snaps[i]
		p.committedView.Store(&snaps[i])
		// The lines of dead-letter-pending.json that this commit passed are dead letters now.
		p.pending.passed(snaps[i], old)
		if err := p.pending.save(); err != nil {
			// A stale entry names a line the position has passed: it is never read again, and
			// the next start drops the entry.
			a.log.Warn("exactly-once: updating the lines to dead-letter", "file", p.pending.path, "error", err)
		}
	}
	if !last {
		if err := a.prod.BeginTransaction(); err != nil {
			return fmt.Errorf("exactly-once: BeginTransaction: %w", err)
		}
		c.open = true
	}
	for i, p := range c.parts {
		if err := p.t.SaveSnapshot(snaps[i]); err != nil {
			// The state topic has the positions; the local file is only a copy.
			a.inputLog(p.in).Warn("exactly-once: saving checkpoints.json (the state topic has the positions)", "error", err)
		}
	}
	return nil
}

// failureError turns the error that ended an exactly-once run into the run's error, after
// aborting the open transaction when it can be aborted.
func (a *Agent) failureError(err error, txnID string) error {
	if c := a.txn.Load(); c != nil {
		c.ended.Store(true)
		c.savePending()
	}
	if errors.Is(err, producer.ErrProducerFenced) {
		return fmt.Errorf("exactly-once: transactional-id %q was taken over by another agent (this one is fenced): stopping; "+
			"every agent needs its own --transactional-id: %w", txnID, err)
	}
	var abortable *producer.TransactionAbortableError
	if errors.As(err, &abortable) {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
		defer cancel()
		if aerr := a.prod.AbortTransaction(ctx); aerr != nil {
			if errors.Is(aerr, producer.ErrProducerFenced) {
				// A fenced agent learns it at the abort: its records were refused with
				// INVALID_PRODUCER_EPOCH, which is abortable (KIP-588).
				return a.failureError(aerr, txnID)
			}
			a.log.Error("exactly-once: aborting the transaction", "error", aerr)
		}
		return fmt.Errorf("exactly-once: transaction aborted (a restart resumes at the last commit: nothing lost, nothing twice): %w", err)
	}
	return err
}
