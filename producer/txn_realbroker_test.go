package producer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// TestRealBrokerTransactions runs transactions against the real Apache Kafka broker: one
// committed, one aborted after part of its records were written and with the rest still
// buffered, and another committed. franz-go's consumer at read_committed reads exactly the
// committed records; at read_uncommitted it also sees the aborted records that were written.
func TestRealBrokerTransactions(t *testing.T) {
	bootstrap := []string{kafkatest.Bootstrap(t)}
	topic := kafkatest.NewTopic(t, 3)
	p := newTxnProducer(t, bootstrap, topic+"-txn", func(c *Config) { c.LingerMs = 60000 })
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}

	commit := func(vals []string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		res := sendValues(t, p, topic, vals)
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatalf("CommitTransaction: %v", err)
		}
		res.wait(t, time.Second)
		if err := res.firstError(); err != nil {
			t.Fatal(err)
		}
	}

	first := values("commit1", 1000)
	commit(first)

	written, buffered := values("abort-written", 500), values("abort-buffered", 200)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wres := sendValues(t, p, topic, written)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wres.wait(t, time.Second)
	if err := wres.firstError(); err != nil {
		t.Fatal(err)
	}
	bres := sendValues(t, p, topic, buffered)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	bres.wait(t, 5*time.Second)
	for i, err := range bres.errs {
		if !errors.Is(err, ErrTransactionAborted) {
			t.Fatalf("buffered record %d: %v, want ErrTransactionAborted", i, err)
		}
	}

	third := values("commit3", 700)
	commit(third)

	committed := consumeIsolated(t, bootstrap, topic, kgo.ReadCommitted(), len(first)+len(third), time.Second)
	wantExactly(t, valueSet(t, committed), first, third)
	all := consumeIsolated(t, bootstrap, topic, kgo.ReadUncommitted(), len(first)+len(written)+len(third), time.Second)
	wantExactly(t, valueSet(t, all), first, written, third)
	t.Logf("read_committed: %d records (%d + %d committed); read_uncommitted: %d (with %d aborted); %d buffered records failed with ErrTransactionAborted",
		len(committed), len(first), len(third), len(all), len(written), len(buffered))
}

// TestRealBrokerTransactionFencing starts a second producer with the same transactional.id
// while the first has written records in an open transaction. The broker aborts the first's
// transaction; its next record and its commit fail with ErrProducerFenced naming the
// transactional.id, and only the second producer's committed records are readable.
func TestRealBrokerTransactionFencing(t *testing.T) {
	bootstrap := []string{kafkatest.Bootstrap(t)}
	topic := kafkatest.NewTopic(t, 2)
	txnID := topic + "-txn"
	ctx := txnCtx(t)

	old := newTxnProducer(t, bootstrap, txnID, nil)
	if err := old.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, old, topic, values("old", 100))
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}

	newer := newTxnProducer(t, bootstrap, txnID, nil)
	if err := newer.InitTransactions(ctx); err != nil {
		t.Fatalf("second producer's InitTransactions: %v", err)
	}

	late := sendValues(t, old, topic, []string{"old-late"})
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	late.wait(t, 10*time.Second)
	t.Logf("record sent by the fenced producer: %v", late.errs[0])
	// The partition leader answers the old epoch with INVALID_PRODUCER_EPOCH, which makes the
	// transaction abortable (KIP-588, as Java); the coordinator then fences the abort.
	if !errors.Is(late.errs[0], kerr.InvalidProducerEpoch) && !errors.Is(late.errs[0], ErrProducerFenced) {
		t.Fatalf("record sent after fencing: %v, want INVALID_PRODUCER_EPOCH or ErrProducerFenced", late.errs[0])
	}
	err := old.CommitTransaction(ctx)
	var abortable *TransactionAbortableError
	if errors.As(err, &abortable) {
		err = old.AbortTransaction(ctx)
	}
	var fatal *TransactionFatalError
	if !errors.Is(err, ErrProducerFenced) || !errors.As(err, &fatal) || fatal.TransactionalID != txnID ||
		!strings.Contains(err.Error(), txnID) {
		t.Fatalf("ending the fenced producer's transaction: %v, want ErrProducerFenced naming %q", err, txnID)
	}
	newVals := values("new", 300)
	if err := newer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	nres := sendValues(t, newer, topic, newVals)
	if err := newer.CommitTransaction(ctx); err != nil {
		t.Fatalf("second producer's commit: %v", err)
	}
	nres.wait(t, time.Second)
	got := consumeIsolated(t, bootstrap, topic, kgo.ReadCommitted(), len(newVals), time.Second)
	wantExactly(t, valueSet(t, got), newVals)
	t.Logf("fenced producer: %v; read_committed: %d records, all from the new producer", err, len(got))
}
