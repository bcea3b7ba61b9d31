package producer

import (
	"errors"
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
	testCommitAbortCommit(t, p, bootstrap, topic, [4]int{1000, 500, 200, 700}, time.Second)
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

	old, newer := fenceOpenTransaction(t, ctx, bootstrap, topic, txnID, 100)
	lateErr := sendLate(t, ctx, old, topic, 10*time.Second)
	t.Logf("record sent by the fenced producer: %v", lateErr)
	// The partition leader answers the old epoch with INVALID_PRODUCER_EPOCH, which makes the
	// transaction abortable (KIP-588, as Java); the coordinator then fences the abort.
	if !errors.Is(lateErr, kerr.InvalidProducerEpoch) && !errors.Is(lateErr, ErrProducerFenced) {
		t.Fatalf("record sent after fencing: %v, want INVALID_PRODUCER_EPOCH or ErrProducerFenced", lateErr)
	}
	err := old.CommitTransaction(ctx)
	var abortable *TransactionAbortableError
	if errors.As(err, &abortable) {
		err = old.AbortTransaction(ctx)
	}
	wantFenced(t, err, txnID)
	newVals := values("new", 300)
	commitValues(t, ctx, newer, topic, newVals, "second producer's transaction")
	got := wantRead(t, bootstrap, topic, kgo.ReadCommitted(), time.Second, newVals)
	t.Logf("fenced producer: %v; read_committed: %d records, all from the new producer", err, got)
}
