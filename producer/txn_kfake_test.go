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
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return p
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
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}

	first := values("commit1", 300)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, p, "t", first)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction: %v", err)
	}
	res.wait(t, time.Second) // commit waited for every acknowledgement
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}

	written, buffered := values("abort-written", 200), values("abort-buffered", 100)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wres := sendValues(t, p, "t", written)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wres.wait(t, time.Second)
	if err := wres.firstError(); err != nil {
		t.Fatalf("records written inside the transaction: %v", err)
	}
	bres := sendValues(t, p, "t", buffered) // linger.ms keeps them in the accumulator
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	bres.wait(t, 5*time.Second)
	for i, err := range bres.errs {
		if !errors.Is(err, ErrTransactionAborted) {
			t.Fatalf("buffered record %d of the aborted transaction: %v, want ErrTransactionAborted", i, err)
		}
	}

	third := values("commit3", 150)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res3 := sendValues(t, p, "t", third)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("third CommitTransaction: %v", err)
	}
	res3.wait(t, time.Second)
	if err := res3.firstError(); err != nil {
		t.Fatal(err)
	}

	committed := consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(first)+len(third), 300*time.Millisecond)
	wantExactly(t, valueSet(t, committed), first, third)
	all := consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadUncommitted(), len(first)+len(written)+len(third), 300*time.Millisecond)
	wantExactly(t, valueSet(t, all), first, written, third)
	t.Logf("read_committed: %d records (committed %d+%d); read_uncommitted: %d (with %d aborted)",
		len(committed), len(first), len(third), len(all), len(written))
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
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, p, "t", values("v", 100))
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, time.Second)
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
			old := newTxnProducer(t, c.ListenAddrs(), "txn-fence", nil)
			if err := old.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := old.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			oldVals := values("old", 50)
			res := sendValues(t, old, "t", oldVals)
			if err := old.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			res.wait(t, time.Second)
			if err := res.firstError(); err != nil {
				t.Fatal(err)
			}

			newer := newTxnProducer(t, c.ListenAddrs(), "txn-fence", nil)
			if err := newer.InitTransactions(ctx); err != nil {
				t.Fatalf("second producer's InitTransactions: %v", err)
			}

			var fenced error
			if how == "send" {
				late := sendValues(t, old, "t", []string{"old-late"})
				if err := old.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				late.wait(t, 5*time.Second)
				if late.errs[0] == nil {
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
			var fatal *TransactionFatalError
			if !errors.Is(fenced, ErrProducerFenced) || !errors.As(fenced, &fatal) || fatal.TransactionalID != "txn-fence" {
				t.Fatalf("fenced producer got %v, want ErrProducerFenced naming transactional.id txn-fence", fenced)
			}
			if !strings.Contains(fenced.Error(), `"txn-fence"`) {
				t.Fatalf("error %q does not name the transactional.id", fenced)
			}
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
			if err := newer.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			nres := sendValues(t, newer, "t", newVals)
			if err := newer.CommitTransaction(ctx); err != nil {
				t.Fatalf("second producer's commit: %v", err)
			}
			nres.wait(t, time.Second)
			got := consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(newVals), 300*time.Millisecond)
			wantExactly(t, valueSet(t, got), newVals)
		})
	}
}

// TestKfakeTxnRetriesCoordinatorErrors injects the coordinator's transient errors into every
// transactional request: InitProducerId retries CONCURRENT_TRANSACTIONS and
// COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR on AddPartitionsToTxn and EndTxn makes the
// producer look the coordinator up again before it retries.
func TestKfakeTxnRetriesCoordinatorErrors(t *testing.T) {
	c := newKfake(t, 1)
	var finds, inits, adds, ends atomic.Int32
	c.ControlKey(int16(kmsg.FindCoordinator), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		finds.Add(1)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := r.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		switch inits.Add(1) {
		case 1:
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
		case 2:
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		case 3:
			resp.ErrorCode = kerr.NotCoordinator.Code
		default:
			return nil, nil, false
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if adds.Add(1) > 1 {
			return nil, nil, false
		}
		req := r.(*kmsg.AddPartitionsToTxnRequest)
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.NotCoordinator.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if ends.Add(1) > 1 {
			return nil, nil, false
		}
		resp := r.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true
	})

	p := newTxnProducer(t, c.ListenAddrs(), "txn-retries", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("v", 20)
	res := sendValues(t, p, "t", vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction: %v", err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	if inits.Load() != 4 || adds.Load() != 2 || ends.Load() != 2 {
		t.Fatalf("InitProducerId %d, AddPartitionsToTxn %d, EndTxn %d requests; want 4, 2, 2", inits.Load(), adds.Load(), ends.Load())
	}
	// One lookup at the start and one after each NOT_COORDINATOR.
	if finds.Load() != 4 {
		t.Fatalf("%d FindCoordinator requests, want 4", finds.Load())
	}
	wantExactly(t, valueSet(t, consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
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
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
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
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("ok", 10)
	res = sendValues(t, p, "t", vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction after the abort: %v", err)
	}
	res.wait(t, time.Second)
	wantExactly(t, valueSet(t, consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
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
	res := sendValues(t, p, "t", values("open", 30))
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, time.Second)
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
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("after", 10)
	ores := sendValues(t, other, "t", vals)
	if err := other.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	ores.wait(t, time.Second)
	wantExactly(t, valueSet(t, consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
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
	c := newKfake(t, 1)
	var broken atomic.Bool
	broken.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if broken.CompareAndSwap(true, false) {
			return produceError(r, kerr.OutOfOrderSequenceNumber.Code), nil, true
		}
		return nil, nil, false
	})
	var bumps atomic.Int32
	var bumpedFrom atomic.Int64
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := r.(*kmsg.InitProducerIDRequest); req.ProducerID >= 0 {
			bumps.Add(1)
			bumpedFrom.Store(int64(req.ProducerEpoch))
		}
		return nil, nil, false
	})
	p := newTxnProducer(t, c.ListenAddrs(), "txn-bump", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, p, "t", values("broken", 5))
	var abortable *TransactionAbortableError
	if err := p.CommitTransaction(ctx); !errors.As(err, &abortable) || !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("CommitTransaction: %v, want abortable OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	res.wait(t, time.Second)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	if bumps.Load() != 1 || bumpedFrom.Load() != 0 {
		t.Fatalf("%d epoch bumps (from epoch %d), want 1 from epoch 0", bumps.Load(), bumpedFrom.Load())
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("after-bump", 20)
	res = sendValues(t, p, "t", vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction under the new epoch: %v", err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	wantExactly(t, valueSet(t, consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
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
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close with an empty transaction open: %v", err)
	}
}
