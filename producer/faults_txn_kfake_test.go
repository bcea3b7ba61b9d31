package producer

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// epochBumps counts the InitProducerId requests that carry the current producer id (the epoch
// bumps of KIP-360) and keeps the epoch the last one bumped from.
type epochBumps struct {
	count atomic.Int32
	from  atomic.Int64
}

// txnFailFirstProduce makes the first produce request answer code, and counts the epoch bumps.
func txnFailFirstProduce(t *testing.T, code int16) (addrs []string, bumps *epochBumps) {
	t.Helper()
	c := newKfake(t, 1)
	var failed atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if failed.CompareAndSwap(false, true) {
			return produceError(r, code), nil, true
		}
		return nil, nil, false
	})
	bumps = new(epochBumps)
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := r.(*kmsg.InitProducerIDRequest); req.ProducerID >= 0 {
			bumps.count.Add(1)
			bumps.from.Store(int64(req.ProducerEpoch))
		}
		return nil, nil, false
	})
	return c.ListenAddrs(), bumps
}

// A batch of a transaction refused for good (INVALID_RECORD, not retriable) leaves a gap in its
// partition's sequences. The transaction must be aborted, and the abort bumps the epoch (Java
// maybeTransitionToErrorState sets epochBumpRequired for any error outside commit and abort), so
// the next transaction starts its partitions at sequence 0.
func TestKfakeTxnFailedBatchBumpsEpochForNextTransaction(t *testing.T) {
	addrs, bumps := txnFailFirstProduce(t, kerr.InvalidRecord.Code)
	p := newTxnProducer(t, addrs, "txn-gap", func(c *Config) { c.DeliveryTimeoutMs = 5000; c.RequestTimeoutMs = 2000 })
	ctx := txnCtx(t)
	initAndBegin(t, ctx, p)
	res := sendValues(t, p, "t", values("refused", 3))
	res.wait(t, 5*time.Second)
	if err := res.firstError(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("refused batch: %v, want INVALID_RECORD", err)
	}
	var abortable *TransactionAbortableError
	if err := p.CommitTransaction(ctx); !errors.As(err, &abortable) {
		t.Fatalf("CommitTransaction after a refused batch: %v, want abortable", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if bumps.count.Load() != 1 {
		t.Fatalf("%d epoch bumps after the abort, want 1", bumps.count.Load())
	}
	vals := values("next", 10)
	start := time.Now()
	commitValues(t, ctx, p, "t", vals, "next transaction")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("next transaction took %v to commit: it met the gap", d)
	}
	wantRead(t, addrs, "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// INVALID_PRODUCER_EPOCH on a produce request makes the transaction abortable, not the producer
// fatal (KIP-588; Java's InvalidProducerEpochException is not among the fatal errors of
// maybeTransitionToErrorState).
func TestKfakeTxnInvalidProducerEpochOnProduceIsAbortable(t *testing.T) {
	testRefusedFirstProduce(t, "txn-epoch", kerr.InvalidProducerEpoch, nil)
}

// testRefusedFirstProduce answers the first produce request of a transaction with refused:
// the commit must be refused with a TransactionAbortableError for it and the abort succeed; then
// afterAbort (unless nil) checks the epoch bumps, and the next transaction must commit and be
// read back at read_committed.
func testRefusedFirstProduce(t *testing.T, txnID string, refused *kerr.Error, afterAbort func(*epochBumps)) {
	t.Helper()
	addrs, bumps := txnFailFirstProduce(t, refused.Code)
	p := newTxnProducer(t, addrs, txnID, nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	refusedCommitThenAbort(t, ctx, p, values("refused", 5), refused)
	if afterAbort != nil {
		afterAbort(bumps)
	}
	vals := values("next", 20)
	commitValues(t, ctx, p, "t", vals, "next transaction")
	wantRead(t, addrs, "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// Every retriable error of a transactional request is retried, as Java re-enqueues every
// RetriableException (REQUEST_TIMED_OUT from InitProducerId and EndTxn here).
func TestKfakeTxnRetriesEveryRetriableError(t *testing.T) {
	timedOut := []int16{kerr.RequestTimedOut.Code}
	testTxnRetries(t, "txn-retriable", 5,
		map[kmsg.Key][]int16{kmsg.InitProducerID: timedOut, kmsg.EndTxn: timedOut},
		map[kmsg.Key]int32{kmsg.InitProducerID: 2, kmsg.EndTxn: 2})
}
