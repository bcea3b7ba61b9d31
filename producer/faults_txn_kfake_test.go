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

// txnFailFirstProduce makes the first produce request answer code, and counts the epoch bumps
// (InitProducerId with the current id).
func txnFailFirstProduce(t *testing.T, code int16) (addrs []string, bumps *atomic.Int32) {
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
	bumps = new(atomic.Int32)
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r.(*kmsg.InitProducerIDRequest).ProducerID >= 0 {
			bumps.Add(1)
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
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
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
	if bumps.Load() != 1 {
		t.Fatalf("%d epoch bumps after the abort, want 1", bumps.Load())
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("next", 10)
	res = sendValues(t, p, "t", vals)
	start := time.Now()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
	res.wait(t, time.Second)
	if err := res.firstError(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("next transaction took %v to commit: it met the gap", d)
	}
	wantExactly(t, valueSet(t, consumeIsolated(t, addrs, "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
}

// INVALID_PRODUCER_EPOCH on a produce request makes the transaction abortable, not the producer
// fatal (KIP-588; Java's InvalidProducerEpochException is not among the fatal errors of
// maybeTransitionToErrorState).
func TestKfakeTxnInvalidProducerEpochOnProduceIsAbortable(t *testing.T) {
	addrs, _ := txnFailFirstProduce(t, kerr.InvalidProducerEpoch.Code)
	p := newTxnProducer(t, addrs, "txn-epoch", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := sendValues(t, p, "t", values("first", 3))
	var abortable *TransactionAbortableError
	if err := p.CommitTransaction(ctx); !errors.As(err, &abortable) || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("CommitTransaction: %v, want abortable INVALID_PRODUCER_EPOCH", err)
	}
	res.wait(t, time.Second)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("second", 5)
	res = sendValues(t, p, "t", vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
	res.wait(t, time.Second)
	wantExactly(t, valueSet(t, consumeIsolated(t, addrs, "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
}

// Every retriable error of a transactional request is retried, as Java re-enqueues every
// RetriableException (REQUEST_TIMED_OUT from InitProducerId and EndTxn here).
func TestKfakeTxnRetriesEveryRetriableError(t *testing.T) {
	c := newKfake(t, 1)
	var inits, ends atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if inits.Add(1) > 1 {
			return nil, nil, false
		}
		resp := r.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if ends.Add(1) > 1 {
			return nil, nil, false
		}
		resp := r.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp, nil, true
	})
	p := newTxnProducer(t, c.ListenAddrs(), "txn-retriable", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions after REQUEST_TIMED_OUT: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	vals := values("v", 5)
	res := sendValues(t, p, "t", vals)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction after REQUEST_TIMED_OUT: %v", err)
	}
	res.wait(t, time.Second)
	if inits.Load() != 2 || ends.Load() != 2 {
		t.Fatalf("InitProducerId %d, EndTxn %d requests, want 2 and 2", inits.Load(), ends.Load())
	}
	wantExactly(t, valueSet(t, consumeIsolated(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), len(vals), 200*time.Millisecond)), vals)
}
