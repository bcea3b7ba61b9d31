package telemetry

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/network"
	"github.com/kafkatrail/kafkatrail/producer"
)

// ErrorType returns the error.type value for err: the Kafka error's name for a broker error
// (its current name: NOT_LEADER_OR_FOLLOWER for code 6), one of the ErrorType constants for the
// producer's own failures, "" for nil. The values are few, so they make good metric attributes.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	// The producer's wrappers come first: a delivery timeout wraps the last broker error, and
	// its cause is not why the record failed.
	var timeout *producer.DeliveryTimeoutError
	if errors.As(err, &timeout) {
		return ErrorTypeDeliveryTimeout
	}
	var tooLarge *producer.RecordTooLargeError
	if errors.As(err, &tooLarge) {
		return ErrorTypeRecordTooLarge
	}
	var auth *network.AuthenticationError
	if errors.As(err, &auth) {
		return ErrorTypeAuthentication
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
		return ErrorTypeConnection
	}
	switch {
	case errors.Is(err, network.ErrRequestTimedOut):
		return ErrorTypeRequestTimeout
	case errors.Is(err, network.ErrDisconnected), errors.Is(err, network.ErrClientClosed),
		errors.Is(err, network.ErrConnectionSetupTimeout):
		return ErrorTypeDisconnected
	case errors.Is(err, producer.ErrProducerClosed), errors.Is(err, accumulator.ErrClosed):
		return ErrorTypeProducerClosed
	case errors.Is(err, accumulator.ErrBufferExhausted):
		return ErrorTypeBufferExhausted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrorTypeCanceled
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if ke.Code == kerr.NotLeaderForPartition.Code {
			return "NOT_LEADER_OR_FOLLOWER" // KIP-392's name, which the Java client and brokers use
		}
		return ke.Message
	}
	// Send's metadata wait fails with a plain error that names max.block.ms (producer.waitOnMetadata).
	if strings.Contains(err.Error(), "not present in metadata") {
		return ErrorTypeMetadata
	}
	return ErrorTypeOther
}

// StatusDescription is the description of an Error span status for err: its message without
// the error.type it starts with ("TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics"
// becomes "Not authorized to access topics"), since the conventions find it NOT RECOMMENDED to
// repeat error.type there; "" when the message is nothing more.
func StatusDescription(err error) string {
	msg := err.Error()
	if et := ErrorType(err); et != "" {
		if rest, ok := strings.CutPrefix(msg, et); ok {
			msg = strings.TrimLeft(rest, ": ")
		}
	}
	return msg
}
