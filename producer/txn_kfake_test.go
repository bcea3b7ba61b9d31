package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTxnProducer(t *testing.T, bootstrap []string, txnID string, mutate func(*Config)) *Producer {
	t.Helper()
	return newTestProducer(t, bootstrap, func(c *Config) {
		c.TransactionalID = txnID
		c.RetryBackoffMs = 10
		if mutate != nil {
			mutate(c)
		}
	})
}

// newOpenTxnProducer returns a transactional producer with a transaction begun, for a test that
// closes it itself (no cleanup Close).
func newOpenTxnProducer(t *testing.T, ctx context.Context, bootstrap []string, txnID string) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BootstrapServers = bootstrap
	cfg.TransactionalID = txnID
	p, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	initAndBegin(t, ctx, p)
	return p
}

// initAndBegin registers p's transactional.id and begins a transaction.
func initAndBegin(t *testing.T, ctx context.Context, p *Producer) {
	t.Helper()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
}

// commitValues runs one transaction on p that sends vals to topic and commits it: the commit
// waits for every acknowledgement, and none may fail. what names the transaction in a failure.
func commitValues(t *testing.T, ctx context.Context, p *Producer, topic string, vals []string, what string) {
	t.Helper()
	if err := p.BeginTransaction(); err != nil {
		t.Fatalf("%s: BeginTransaction: %v", what, err)
	}
	res := sendValues(t, p, topic, vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("%s: CommitTransaction: %v", what, err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sendWritten sends vals to topic inside p's open transaction, flushes, and wants every record
// acknowledged: written, not yet committed.
func sendWritten(t *testing.T, ctx context.Context, p *Producer, topic string, vals []string) {
	t.Helper()
	res := sendValues(t, p, topic, vals)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatalf("records written inside the transaction: %v", err)
	}
}

// abortBuffered sends vals to topic while linger.ms keeps them in the accumulator, and aborts
// p's transaction: every one of them fails with ErrTransactionAborted.
func abortBuffered(t *testing.T, ctx context.Context, p *Producer, topic string, vals []string) {
	t.Helper()
	res := sendValues(t, p, topic, vals)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	res.wait(t, 5*time.Second)
	for i, err := range res.errs {
		if !errors.Is(err, ErrTransactionAborted) {
			t.Fatalf("buffered record %d of the aborted transaction: %v, want ErrTransactionAborted", i, err)
		}
	}
}

// refusedCommitThenAbort sends vals in a new transaction whose commit must be refused with a
// TransactionAbortableError for want, and aborts it.
func refusedCommitThenAbort(t *testing.T, ctx context.Context, p *Producer, vals []string, want error) {
	t.Helper()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, p, "t", vals)
	var abortable *TransactionAbortableError
	if err := p.CommitTransaction(ctx); !errors.As(err, &abortable) || !errors.Is(err, want) {
		t.Fatalf("CommitTransaction: %v, want abortable %v", err, want)
	}
	res.wait(t, time.Second)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
}

// wantRead reads topic from the start at level until as many records as want holds arrived,
// and settle longer, and wants exactly the values of want, each once. It returns how many
// records it read.
func wantRead(t *testing.T, bootstrap []string, topic string, level kgo.IsolationLevel, settle time.Duration, want ...[]string) int {
	t.Helper()
	n := 0
	for _, vs := range want {
		n += len(vs)
	}
	got := consumeIsolated(t, bootstrap, topic, level, n, settle)
	wantExactly(t, valueSet(t, got), want...)
	return len(got)
}

// answerErrors makes kfake answer the first requests of key with the error codes in codes, one
// request each, and the rest itself; count counts every request of key.
func answerErrors(c *kfake.Cluster, key kmsg.Key, count *atomic.Int32, codes ...int16) {
	c.ControlKey(int16(key), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		i := int(count.Add(1)) - 1
		if i >= len(codes) {
			return nil, nil, false
		}
		return txnErrorResponse(r, codes[i]), nil, true
	})
}

// txnErrorResponse answers a transactional request with code: the response's error, or every
// partition's for AddPartitionsToTxn.
func txnErrorResponse(r kmsg.Request, code int16) kmsg.Response {
	switch req := r.(type) {
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndTxnRequest:
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	panic(fmt.Sprintf("txnErrorResponse: no error answer for %T", r))
}

func txnCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sendValues sends one record per value, keyed so they spread over the partitions, and
// returns their results; it does not wait for the callbacks.
func sendValues(t *testing.T, p *Producer, topic string, values []string) *results {
	t.Helper()
	res := newResults(len(values))
	for i, v := range values {
		rec := &Record{Topic: topic, Partition: PartitionAny, Key: []byte(fmt.Sprint("k", i)), Value: []byte(v)}
		if err := p.Send(context.Background(), rec, res.callback(i)); err != nil {
			t.Fatalf("send %q: %v", v, err)
		}
	}
	return res
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// consumeIsolated reads topic from the start with kgo at the given isolation level until n
// records arrived, then keeps fetching for settle to catch any record that should not be there.
func consumeIsolated(t *testing.T, bootstrap []string, topic string, level kgo.IsolationLevel, n int, settle time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	var settleDeadline time.Time
	for {
		if len(out) >= n && settleDeadline.IsZero() {
			settleDeadline = time.Now().Add(settle)
		}
		if !settleDeadline.IsZero() && time.Now().After(settleDeadline) {
			return out
		}
		pctx := ctx
		if !settleDeadline.IsZero() {
			var c context.CancelFunc
			pctx, c = context.WithDeadline(ctx, settleDeadline)
			defer c()
		}
		fs := cl.PollFetches(pctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
}

// valueSet is the records' values, each of which must appear once.
func valueSet(t *testing.T, recs []*kgo.Record) map[string]bool {
	t.Helper()
	set := make(map[string]bool, len(recs))
	for _, r := range recs {
		v := string(r.Value)
		if set[v] {
			t.Fatalf("value %q read twice", v)
		}
		set[v] = true
	}
	return set
}

func wantExactly(t *testing.T, got map[string]bool, want ...[]string) {
	t.Helper()
	n := 0
	for _, vs := range want {
		for _, v := range vs {
			if !got[v] {
				t.Fatalf("committed record %q not read", v)
			}
			n++
		}
	}
	if len(got) != n {
		for v := range got {
			t.Logf("read %q", v)
		}
		t.Fatalf("read %d records, want exactly the %d committed ones", len(got), n)
	}
}

// TestKfakeTxnCommitAndAbort commits a transaction, aborts one whose records were partly written
// and partly still buffered, commits a third, and reads back at read_committed: only the
// committed records. At read_uncommitted the written aborted records are there too.
func TestKfakeTxnCommitAndAbort(t *testing.T) {
	c := newKfake(t, 3)
	p := newTxnProducer(t, c.ListenAddrs(), "txn-commit-abort", func(c *Config) { c.LingerMs = 60000 })
	testCommitAbortCommit(t, p, c.ListenAddrs(), "t", [4]int{300, 200, 100, 150}, 300*time.Millisecond)
}

// testCommitAbortCommit commits a transaction of n[0] records, aborts one whose n[1] records
// were written and whose n[2] were still buffered (p's linger.ms must hold them), and commits
// one of n[3]. read_committed then reads exactly the committed records, read_uncommitted those
// and the aborted ones that were written.
func testCommitAbortCommit(t *testing.T, p *Producer, bootstrap []string, topic string, n [4]int, settle time.Duration) {
	t.Helper()
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	first := values("commit1", n[0])
	commitValues(t, ctx, p, topic, first, "first transaction")

	written, buffered := values("abort-written", n[1]), values("abort-buffered", n[2])
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	sendWritten(t, ctx, p, topic, written)
	abortBuffered(t, ctx, p, topic, buffered)

	third := values("commit3", n[3])
	commitValues(t, ctx, p, topic, third, "third transaction")

	committed := wantRead(t, bootstrap, topic, kgo.ReadCommitted(), settle, first, third)
	all := wantRead(t, bootstrap, topic, kgo.ReadUncommitted(), settle, first, written, third)
	t.Logf("read_committed: %d records (%d + %d committed); read_uncommitted: %d (with %d aborted); %d buffered records failed with ErrTransactionAborted",
		committed, len(first), len(third), all, len(written), len(buffered))
}

// TestKfakeTxnProduceCarriesTransactionalID pins a bug the real broker found: transactional
// batches in a ProduceRequest without the request's transactional id are refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (kfake does not check). Every produce request of a
// transactional producer names its transactional.id, at a version before KIP-890's v12, and
// every batch carries the transactional attribute.
func TestKfakeTxnProduceCarriesTransactionalID(t *testing.T) {
	c := newKfake(t, 2)
	var produces, bad atomic.Int32
	var badWhy atomic.Value
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		produces.Add(1)
		req := r.(*kmsg.ProduceRequest)
		why := ""
		switch {
		case req.TransactionID == nil || *req.TransactionID != "txn-produce":
			why = fmt.Sprintf("transactional id %v", req.TransactionID)
		case req.Version > 11:
			why = fmt.Sprintf("version %d", req.Version)
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil || b.Attributes&0x10 == 0 {
					why = fmt.Sprintf("batch attributes %#x (%v)", b.Attributes, err)
				}
			}
		}
		if why != "" {
			bad.Add(1)
			badWhy.Store(why)
		}
		return nil, nil, false
	})
	p := newTxnProducer(t, c.ListenAddrs(), "txn-produce", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	commitValues(t, ctx, p, "t", values("v", 100), "transaction")
	if produces.Load() == 0 || bad.Load() > 0 {
		t.Fatalf("%d produce requests, %d wrong: %v", produces.Load(), bad.Load(), badWhy.Load())
	}
}

// TestKfakeTxnFencing starts a second producer with the same transactional.id while the first
// has a transaction open with records written: the first's transaction is aborted, and its
// next Send fails with the fenced error, as does every later call.
func TestKfakeTxnFencing(t *testing.T) {
	for _, how := range []string{"send", "commit"} {
		t.Run("fenced-at-"+how, func(t *testing.T) {
			c := newKfake(t, 2)
			ctx := txnCtx(t)
			old, newer := fenceOpenTransaction(t, ctx, c.ListenAddrs(), "t", "txn-fence", 50)
			var fenced error
			if how == "send" {
				if err := sendLate(t, ctx, old, "t", 5*time.Second); err == nil {
					t.Fatal("a record sent after fencing was acknowledged")
				}
				// kfake refuses the late batch with INVALID_TXN_STATE (its transaction is gone),
				// which makes the transaction abortable, as in Java; a real broker says
				// INVALID_PRODUCER_EPOCH, which is fatal at once. Either way the commit fails and
				// the abort's EndTxn meets PRODUCER_FENCED.
				if err := old.CommitTransaction(ctx); err == nil {
					t.Fatal("CommitTransaction after fencing succeeded")
				}
				fenced = old.AbortTransaction(ctx)
			} else {
				fenced = old.CommitTransaction(ctx)
			}
			wantFenced(t, fenced, "txn-fence")
			// Fatal means fatal: nothing transactional works any more, and Send fails at once.
			if err := old.BeginTransaction(); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("BeginTransaction after fencing: %v", err)
			}
			if err := old.AbortTransaction(ctx); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("AbortTransaction after fencing: %v", err)
			}
			if err := old.Send(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("x")}, nil); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("Send after fencing: %v", err)
			}

			newVals := values("new", 40)
			commitValues(t, ctx, newer, "t", newVals, "second producer's transaction")
			wantRead(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), 300*time.Millisecond, newVals)
		})
	}
}

// fenceOpenTransaction starts a producer with transactional.id txnID whose open transaction has
// n records written to topic, then a second producer with the same transactional.id, which
// fences the first.
func fenceOpenTransaction(t *testing.T, ctx context.Context, bootstrap []string, topic, txnID string, n int) (old, newer *Producer) {
	t.Helper()
	old = newTxnProducer(t, bootstrap, txnID, nil)
	initAndBegin(t, ctx, old)
	sendWritten(t, ctx, old, topic, values("old", n))
	newer = newTxnProducer(t, bootstrap, txnID, nil)
	if err := newer.InitTransactions(ctx); err != nil {
		t.Fatalf("second producer's InitTransactions: %v", err)
	}
	return old, newer
}

// sendLate sends one record with the fenced producer, flushes, and returns the record's error
// (nil if it was acknowledged), waiting at most d for it.
func sendLate(t *testing.T, ctx context.Context, old *Producer, topic string, d time.Duration) error {
	t.Helper()
	late := sendValues(t, old, topic, []string{"old-late"})
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	late.wait(t, d)
	return late.errs[0]
}

// wantFenced wants err to be a TransactionFatalError for ErrProducerFenced that names txnID.
func wantFenced(t *testing.T, err error, txnID string) {
	t.Helper()
	var fatal *TransactionFatalError
	if !errors.Is(err, ErrProducerFenced) || !errors.As(err, &fatal) || fatal.TransactionalID != txnID {
		t.Fatalf("fenced producer got %v, want ErrProducerFenced naming transactional.id %s", err, txnID)
	}
	if !strings.Contains(err.Error(), `"`+txnID+`"`) {
		t.Fatalf("error %q does not name the transactional.id", err)
	}
}

// TestKfakeTxnRetriesCoordinatorErrors injects the coordinator's transient errors into every
// transactional request: InitProducerId retries CONCURRENT_TRANSACTIONS and
// COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR on AddPartitionsToTxn and EndTxn makes the
// producer look the coordinator up again before it retries.
func TestKfakeTxnRetriesCoordinatorErrors(t *testing.T) {
	testTxnRetries(t, "txn-retries", 20, map[kmsg.Key][]int16{
		kmsg.FindCoordinator:    nil,
		kmsg.InitProducerID:     {kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code},
		kmsg.AddPartitionsToTxn: {kerr.NotCoordinator.Code},
		kmsg.EndTxn:             {kerr.NotCoordinator.Code},
	}, map[kmsg.Key]int32{
		// One lookup at the start and one after each NOT_COORDINATOR.
		kmsg.FindCoordinator:    4,
		kmsg.InitProducerID:     4,
		kmsg.AddPartitionsToTxn: 2,
		kmsg.EndTxn:             2,
	})
}

// testTxnRetries answers the first requests of each key of errs with its error codes, then
// commits n records in one transaction: every error must have been retried, with want[key]
// requests of each key in all, and the records are read back at read_committed.
func testTxnRetries(t *testing.T, txnID string, n int, errs map[kmsg.Key][]int16, want map[kmsg.Key]int32) {
	t.Helper()
	c := newKfake(t, 1)
	counts := make(map[kmsg.Key]*atomic.Int32, len(errs))
	for key, codes := range errs {
		counts[key] = new(atomic.Int32)
		answerErrors(c, key, counts[key], codes...)
	}
	p := newTxnProducer(t, c.ListenAddrs(), txnID, nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	vals := values("v", n)
	commitValues(t, ctx, p, "t", vals, "transaction")
	for key, w := range want {
		if got := counts[key].Load(); got != w {
			t.Errorf("%d %s requests, want %d", got, key.Name(), w)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	wantRead(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// TestKfakeTxnAbortableErrorThenAbort fails a produce request of the transaction for good
// (TOPIC_AUTHORIZATION_FAILED): the commit is refused with a TransactionAbortableError, the
// abort succeeds, and the next transaction commits.
func TestKfakeTxnAbortableErrorThenAbort(t *testing.T) {
	c := newKfake(t, 1)
	var failing atomic.Bool
	failing.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if failing.Load() {
			return produceError(r, kerr.TopicAuthorizationFailed.Code), nil, true
		}
		return nil, nil, false
	})
	p := newTxnProducer(t, c.ListenAddrs(), "txn-abortable", nil)
	ctx := txnCtx(t)
	initAndBegin(t, ctx, p)
	res := sendValues(t, p, "t", values("lost", 5))
	err := p.CommitTransaction(ctx)
	var abortable *TransactionAbortableError
	if !errors.As(err, &abortable) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CommitTransaction: %v, want a TransactionAbortableError for TOPIC_AUTHORIZATION_FAILED", err)
	}
	res.wait(t, time.Second)
	if err := p.Send(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("x")}, nil); !errors.As(err, &abortable) {
		t.Fatalf("Send in ABORTABLE_ERROR: %v, want a TransactionAbortableError", err)
	}
	if err := p.BeginTransaction(); !errors.As(err, &abortable) {
		t.Fatalf("BeginTransaction in ABORTABLE_ERROR: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}

	failing.Store(false)
	vals := values("ok", 10)
	commitValues(t, ctx, p, "t", vals, "transaction after the abort")
	wantRead(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// TestKfakeTxnStateErrors checks the calls the state machine refuses, each naming the call and
// the state, and that a producer without transactional.id refuses them all.
func TestKfakeTxnStateErrors(t *testing.T) {
	c := newKfake(t, 1)
	ctx := txnCtx(t)
	plain := newTestProducer(t, c.ListenAddrs(), nil)
	for name, call := range map[string]func() error{
		"InitTransactions":  func() error { return plain.InitTransactions(ctx) },
		"BeginTransaction":  plain.BeginTransaction,
		"CommitTransaction": func() error { return plain.CommitTransaction(ctx) },
		"AbortTransaction":  func() error { return plain.AbortTransaction(ctx) },
	} {
		if err := call(); !errors.Is(err, ErrNotTransactional) {
			t.Fatalf("%s without transactional.id: %v", name, err)
		}
	}

	p := newTxnProducer(t, c.ListenAddrs(), "txn-states", nil)
	stateErr := func(what string, err error, op, state string) {
		t.Helper()
		var se *TransactionStateError
		if !errors.As(err, &se) || se.Op != op || se.State != state {
			t.Fatalf("%s: %v, want %s refused in %s", what, err, op, state)
		}
	}
	stateErr("Send before InitTransactions", p.Send(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("x")}, nil), "Send", "UNINITIALIZED")
	stateErr("BeginTransaction before InitTransactions", p.BeginTransaction(), "BeginTransaction", "UNINITIALIZED")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	stateErr("second InitTransactions", p.InitTransactions(ctx), "InitTransactions", "READY")
	stateErr("Send outside a transaction", p.Send(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("x")}, nil), "Send", "READY")
	stateErr("CommitTransaction outside a transaction", p.CommitTransaction(ctx), "CommitTransaction", "READY")
	stateErr("AbortTransaction outside a transaction", p.AbortTransaction(ctx), "AbortTransaction", "READY")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	stateErr("nested BeginTransaction", p.BeginTransaction(), "BeginTransaction", "IN_TRANSACTION")
	// An empty transaction never reached the coordinator: both ends complete locally.
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("empty commit: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("empty abort: %v", err)
	}
}

// TestKfakeTxnCloseAbortsOpenTransaction closes a producer in the middle of a transaction whose
// records were written: Close aborts it, so the records stay invisible and the partition's last
// stable offset moves on (a later committed transaction is readable at read_committed).
func TestKfakeTxnCloseAbortsOpenTransaction(t *testing.T) {
	c := newKfake(t, 1)
	ctx := txnCtx(t)
	p := newOpenTxnProducer(t, ctx, c.ListenAddrs(), "txn-close")
	sendWritten(t, ctx, p, "t", values("open", 30))
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("CommitTransaction after Close: %v", err)
	}

	other := newTxnProducer(t, c.ListenAddrs(), "txn-close-other", nil)
	if err := other.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	vals := values("after", 10)
	commitValues(t, ctx, other, "t", vals, "the other producer's transaction")
	wantRead(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// TestKfakeTxnInitRefusedTimeoutIsFatal: a transaction.timeout.ms above the broker's maximum is
// refused for good, with the key named.
func TestKfakeTxnInitRefusedTimeoutIsFatal(t *testing.T) {
	c := newKfake(t, 1, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "1000"}))
	p := newTxnProducer(t, c.ListenAddrs(), "txn-timeout", func(c *Config) { c.TransactionTimeoutMs = 5000 })
	err := p.InitTransactions(txnCtx(t))
	var fatal *TransactionFatalError
	if !errors.As(err, &fatal) || !errors.Is(err, kerr.InvalidTransactionTimeout) || !strings.Contains(err.Error(), "transaction.timeout.ms=5000") {
		t.Fatalf("InitTransactions: %v, want a fatal INVALID_TRANSACTION_TIMEOUT naming transaction.timeout.ms", err)
	}
}

// TestKfakeTxnBrokenSequenceAbortsAndBumpsEpoch answers the transaction's first produce with
// OUT_OF_ORDER_SEQUENCE_NUMBER: a transaction cannot bump its epoch midway, so it becomes
// abortable; the abort ends with InitProducerId carrying the current id and epoch (KIP-360),
// which bumps the epoch, and the next transaction commits under it.
func TestKfakeTxnBrokenSequenceAbortsAndBumpsEpoch(t *testing.T) {
	testRefusedFirstProduce(t, "txn-bump", kerr.OutOfOrderSequenceNumber, func(bumps *epochBumps) {
		if bumps.count.Load() != 1 || bumps.from.Load() != 0 {
			t.Fatalf("%d epoch bumps (from epoch %d), want 1 from epoch 0", bumps.count.Load(), bumps.from.Load())
		}
	})
}

// TestKfakeTxnCloseWithEmptyTransaction: Close with a transaction begun and nothing sent in it
// (the exactly-once agent's state between commits) ends that transaction locally and returns.
// The sender used to sit in a poll nothing would wake until Close's deadline, then fail.
func TestKfakeTxnCloseWithEmptyTransaction(t *testing.T) {
	c := newKfake(t, 1)
	ctx := txnCtx(t)
	p := newOpenTxnProducer(t, ctx, c.ListenAddrs(), "txn-empty")
	res := sendValues(t, p, "t", values("a", 30))
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close with an empty transaction open: %v", err)
	}
}

// TestKfakeTxnCloseWhileInitializing: Close with no deadline while InitTransactions still
// waits for a coordinator (FindCoordinator answers COORDINATOR_NOT_AVAILABLE for good) returns:
// an initializing producer has no transaction to finish (Java's Sender loops on
// hasPendingTransactionalRequests, pending requests of an ongoing transaction only). It used
// to run the sender until a coordinator answered.
func TestKfakeTxnCloseWhileInitializing(t *testing.T) {
	c := newKfake(t, 1)
	var asked atomic.Int64
	c.ControlKey(int16(kmsg.FindCoordinator), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		req := r.(*kmsg.FindCoordinatorRequest)
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, k := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode = k, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return resp, nil, true
	})
	p := newTxnProducer(t, c.ListenAddrs(), "txn-init-close", nil)
	initCtx, cancel := context.WithCancel(context.Background())
	initDone := make(chan error, 1)
	go func() { initDone <- p.InitTransactions(initCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for asked.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("FindCoordinator asked %d times within 10 s", asked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("Close with no deadline did not return within 20 s while InitTransactions waited for a coordinator")
	}
	cancel()
	if err := <-initDone; err == nil {
		t.Fatal("InitTransactions succeeded with no coordinator")
	}
}
