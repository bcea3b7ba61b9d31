package producer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
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
	c, bumps := txnFailFirstProduceCluster(t, code)
	return c.ListenAddrs(), bumps
}

// txnFailFirstProduceCluster is txnFailFirstProduce's cluster, for a test that controls more.
func txnFailFirstProduceCluster(t *testing.T, code int16) (c *kfake.Cluster, bumps *epochBumps) {
	t.Helper()
	c = newKfake(t, 1)
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
	return c, bumps
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

// TestKfakeTxnInvalidProducerIDMappingAbortSkipsEndTxn: a coordinator that lost the producer
// id's mapping (transactional.id.expiration.ms passed: an idle exactly-once agent) answers
// INVALID_PRODUCER_ID_MAPPING, to the transaction's produce and to any EndTxn. The abort skips
// EndTxn, which such a coordinator never accepts, and goes straight to InitProducerId (Java's
// beginCompletingTransaction); the next transaction commits. The abort used to send EndTxn,
// be refused, and leave the transaction abortable for good.
func TestKfakeTxnInvalidProducerIDMappingAbortSkipsEndTxn(t *testing.T) {
	c, bumps := txnFailFirstProduceCluster(t, kerr.InvalidProducerIDMapping.Code)
	addrs := c.ListenAddrs()
	var endTxns atomic.Int32
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if bumps.count.Load() > 0 {
			return nil, nil, false // a new epoch: the coordinator knows it
		}
		endTxns.Add(1)
		resp := r.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		return resp, nil, true
	})
	p := newTxnProducer(t, addrs, "txn-mapping", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	refusedCommitThenAbort(t, ctx, p, values("refused", 5), kerr.InvalidProducerIDMapping)
	if n := endTxns.Load(); n != 0 {
		t.Errorf("%d EndTxn sent for the transaction whose producer id has no mapping, want none", n)
	}
	if bumps.count.Load() != 1 {
		t.Errorf("%d epoch bumps, want the abort's 1", bumps.count.Load())
	}
	vals := values("next", 20)
	commitValues(t, ctx, p, "t", vals, "next transaction")
	wantRead(t, addrs, "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}

// denyInitProducerID answers every InitProducerId with code while denied holds (an ACL not yet
// granted), and counts the requests.
func denyInitProducerID(c *kfake.Cluster, code int16, denied *atomic.Bool, asked *atomic.Int32) {
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		if !denied.Load() {
			return nil, nil, false
		}
		resp := r.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp, nil, true
	})
}

// TestKfakeIdempotentInitAuthorizationRecovers: an idempotent producer whose InitProducerId is
// refused with CLUSTER_AUTHORIZATION_FAILED (no IDEMPOTENT_WRITE yet) fails the records it holds
// with that error, names it, and asks again; once the ACL is granted, records go (KIP-679:
// Java's InitProducerIdHandler makes it abortable, and Sender.shouldHandleAuthorizationError
// returns the producer to UNINITIALIZED). It used to stay fatal until a restart.
func TestKfakeIdempotentInitAuthorizationRecovers(t *testing.T) {
	c := newKfake(t, 1)
	var denied atomic.Bool
	var asked atomic.Int32
	denied.Store(true)
	denyInitProducerID(c, kerr.ClusterAuthorizationFailed.Code, &denied, &asked)
	cfg := DefaultConfig()
	cfg.BootstrapServers, cfg.RetryBackoffMs = c.ListenAddrs(), 20
	p, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	res := sendValues(t, p, "t", values("denied", 3))
	res.wait(t, 10*time.Second)
	if err := res.firstError(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("records while InitProducerId is refused: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	before := asked.Load()
	deadline := time.Now().Add(10 * time.Second)
	for asked.Load() < before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId asked %d times, not again within 10 s of the refusal", asked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	denied.Store(false) // the ACL is granted
	res = sendValues(t, p, "t", values("granted", 5))
	res.wait(t, 10*time.Second)
	if err := res.firstError(); err != nil {
		t.Fatalf("records once the ACL is granted: %v", err)
	}
}

// TestKfakeTxnInitAuthorizationRecovers: InitTransactions refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED returns that error and leaves the producer
// uninitialized, not failed: once the ACL is granted, InitTransactions again succeeds and a
// transaction commits (Java: abortable, then UNINITIALIZED).
func TestKfakeTxnInitAuthorizationRecovers(t *testing.T) {
	c := newKfake(t, 1)
	var denied atomic.Bool
	var asked atomic.Int32
	denied.Store(true)
	denyInitProducerID(c, kerr.TransactionalIDAuthorizationFailed.Code, &denied, &asked)
	p := newTxnProducer(t, c.ListenAddrs(), "txn-acl", nil)
	ctx := txnCtx(t)
	if err := p.InitTransactions(ctx); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("InitTransactions without the ACL: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	denied.Store(false)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions once the ACL is granted: %v", err)
	}
	vals := values("granted", 5)
	commitValues(t, ctx, p, "t", vals, "the transaction after the grant")
	wantRead(t, c.ListenAddrs(), "t", kgo.ReadCommitted(), 200*time.Millisecond, vals)
}
