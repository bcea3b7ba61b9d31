package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/metadata"
)

// ErrBufferExhausted (wrapped) is Send's error when buffer.memory stayed full for max.block.ms:
// the brokers take records more slowly than they come. The record was not buffered; sending it
// again later is safe.
var ErrBufferExhausted = accumulator.ErrBufferExhausted

// ErrProducerClosed is returned (and passed to callbacks) for records sent after Close began, and
// for records still buffered when Close's deadline passed.
var ErrProducerClosed = errors.New("producer closed")

// RecordTooLargeError says a record can never be sent with the current configuration. Only that
// record fails; nothing else is affected.
type RecordTooLargeError struct {
	Size  int    // estimated serialized size of the record, in bytes
	Limit int64  // the configured limit
	Key   string // the property that sets Limit: max.request.size or buffer.memory
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record of %d bytes is larger than %s (%d bytes)", e.Size, e.Key, e.Limit)
}

// DeliveryTimeoutError is the callback's error for a record that was neither acknowledged nor
// failed by a broker within delivery.timeout.ms of its batch's creation. Cause is the last
// retriable error the batch met, when there was one.
type DeliveryTimeoutError struct {
	Partition string
	Records   int
	Elapsed   time.Duration
	Cause     error
	// Behind is set for a batch failed with an older batch of its partition that expired
	// (WithExpiryInOrder), before its own delivery.timeout.ms.
	Behind bool
}

func (e *DeliveryTimeoutError) Error() string {
	msg := fmt.Sprintf("expiring %d record(s) for %s: %d ms has passed since batch creation (delivery.timeout.ms)",
		e.Records, e.Partition, e.Elapsed.Milliseconds())
	if e.Behind {
		msg = fmt.Sprintf("expiring %d record(s) for %s with an older batch of the partition that expired (delivery.timeout.ms), %d ms after their batch's creation",
			e.Records, e.Partition, e.Elapsed.Milliseconds())
	}
	if e.Cause != nil {
		msg += "; last error: " + e.Cause.Error()
	}
	return msg
}

func (e *DeliveryTimeoutError) Unwrap() error { return e.Cause }

// ErrBatchHadInvalidRecords is the callback's error of a record whose batch the broker refused
// for other records of it (INVALID_RECORD, INVALID_TIMESTAMP with per-record errors, KIP-467):
// the record itself was not found invalid, and sending it again may succeed. Java's
// Sender.failBatch gives such records the same generic KafkaException.
var ErrBatchHadInvalidRecords = errors.New("failed to append record because it was part of a batch which had one or more invalid records")

// MetadataTimeoutError is Send's error when the topic's partitions were not known within
// max.block.ms (Java's TimeoutException from KafkaProducer.waitOnMetadata): no broker
// answered, or the topic does not exist and the cluster does not create it, which Cause then
// says (UNKNOWN_TOPIC_OR_PARTITION, the topic's error in the last metadata response).
type MetadataTimeoutError struct {
	Topic    string
	MaxBlock time.Duration
	Cause    error
}

func (e *MetadataTimeoutError) Error() string {
	msg := fmt.Sprintf("topic %q not present in metadata after %d ms (max.block.ms)", e.Topic, e.MaxBlock.Milliseconds())
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *MetadataTimeoutError) Unwrap() error { return e.Cause }

// isRetriable reports whether a produce attempt that failed with err may be tried again:
// the broker's retriable error codes (kerr's table, which mirrors the Java client's
// RetriableException classes) and the client-side network errors.
func isRetriable(err error) bool {
	var ne *networkError
	if errors.As(err, &ne) {
		return true
	}
	return kerr.IsRetriable(err)
}

// needsMetadataRefresh is the Java InvalidMetadataException family, which makes Sender.completeBatch
// request a metadata update: errors that mean our idea of the partition's leader is stale. A
// request that got no response is Java's NetworkException, one of them; the Kafka error codes
// are metadata's one table of them.
func needsMetadataRefresh(err error) bool {
	var ne *networkError
	if errors.As(err, &ne) {
		return true
	}
	return metadata.IsInvalidMetadata(err)
}

// networkError is a request that got no response: the connection closed or the request timed out.
// It is always retriable (within delivery.timeout.ms).
type networkError struct {
	Node     int32
	TimedOut bool
	Cause    error
}

func (e *networkError) Error() string {
	what := "disconnected"
	if e.TimedOut {
		what = "request timed out (request.timeout.ms)"
	}
	msg := fmt.Sprintf("NETWORK_EXCEPTION: broker %d %s", e.Node, what)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *networkError) Unwrap() error { return e.Cause }

// ErrProducerFenced (matched with errors.Is) says a newer producer with the same
// transactional.id has called InitTransactions: the coordinator bumped the epoch and aborted this
// producer's open transaction. This producer can never write again; close it.
var ErrProducerFenced = errors.New("producer fenced")

// ErrTransactionAborted (wrapped) is the callback error of a record that was never sent because
// its transaction was aborted, by AbortTransaction or after an error.
var ErrTransactionAborted = errors.New("transaction aborted")

// ErrNotTransactional is returned by the transactional methods of a producer without a
// transactional.id.
var ErrNotTransactional = errors.New("producer is not transactional: transactional.id is not set")

// TransactionFatalError says the transactional producer cannot go on: it was fenced (errors.Is
// ErrProducerFenced), is not authorized for its transactional.id, or the coordinator refused it
// in a way with no recovery. Every later transactional call and Send returns it, and buffered
// records fail with it; only Close is left.
type TransactionFatalError struct {
	TransactionalID string
	Cause           error
}

func (e *TransactionFatalError) Error() string {
	if e.fenced() {
		return fmt.Sprintf("transactional.id %q: producer fenced by a newer producer with the same transactional.id (%v); close this producer",
			e.TransactionalID, e.Cause)
	}
	return fmt.Sprintf("transactional.id %q: fatal transaction error: %v; close this producer", e.TransactionalID, e.Cause)
}

func (e *TransactionFatalError) Unwrap() error { return e.Cause }

// Is makes errors.Is(err, ErrProducerFenced) true for fencing, which the coordinator reports as
// PRODUCER_FENCED and a partition leader as INVALID_PRODUCER_EPOCH.
func (e *TransactionFatalError) Is(target error) bool {
	return target == ErrProducerFenced && e.fenced()
}

func (e *TransactionFatalError) fenced() bool {
	return errors.Is(e.Cause, kerr.ProducerFenced) || errors.Is(e.Cause, kerr.InvalidProducerEpoch)
}

// TransactionAbortableError says the current transaction cannot be committed, because one of
// its records or requests failed (Cause). The producer is sound: call AbortTransaction, then
// begin a new transaction and send the records again.
type TransactionAbortableError struct {
	Cause error
}

func (e *TransactionAbortableError) Error() string {
	return fmt.Sprintf("transaction must be aborted: %v", e.Cause)
}

func (e *TransactionAbortableError) Unwrap() error { return e.Cause }

// TransactionStateError is a transactional method (or Send) called when the producer's
// transaction state does not allow it, such as CommitTransaction without BeginTransaction or
// Send before InitTransactions (Java's IllegalStateException).
type TransactionStateError struct {
	Op    string // the call, e.g. "BeginTransaction"
	State string // the state it met, e.g. "UNINITIALIZED"
	// Pending is set when an earlier call (e.g. "CommitTransaction") timed out while its
	// operation goes on: call that method again to wait for it first.
	Pending string
}

func (e *TransactionStateError) Error() string {
	if e.Pending != "" {
		return fmt.Sprintf("%s is not allowed while the earlier %s is still going on: call %s again to wait for it",
			e.Op, e.Pending, e.Pending)
	}
	return fmt.Sprintf("%s is not allowed in transaction state %s", e.Op, e.State)
}
