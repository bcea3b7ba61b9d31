package agent

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

// fate is what the agent does with a line whose record failed: the rows of the README's
// "How a line can end" table. The producer has already retried what it may (retriable errors
// within delivery.timeout.ms); what reaches a callback is final for that record, not for the
// line.
type fate uint8

const (
	// fateResend: the record outlived delivery.timeout.ms, or failed with an error that a later
	// attempt may not meet (a broker or network error the producer retries). The agent sends
	// the line again, in its source's order, until Kafka acknowledges it: the files are the
	// buffer, so an outage of any length loses nothing.
	fateResend fate = iota
	// fateDeadLetter: refused for good because of the line itself (too large for the topic, a
	// record the broker calls invalid, a timestamp out of range, a topic policy, a line the
	// topic template cannot route). It goes to the dead-letter topic or file, and its file's
	// checkpoint moves past it.
	fateDeadLetter
	// fateStop: refused because of the configuration or the cluster, not the line (no ACL for
	// the topic, authentication, a topic that does not exist). Dead-lettering every line for a
	// missing ACL would be wrong: the agent stops sending (reading pauses, /readyz says why),
	// tries the oldest such line again with a growing pause, and resumes by itself once one is
	// acknowledged.
	fateStop
	// fateGivenUp: the agent is stopping (producer closed, run interrupted). A file's line
	// stays before its checkpoint and the next start sends it again; a stdin line is lost.
	fateGivenUp
)

// Dead-letter reasons: the reason label of kafkatrail.agent.lines.dead_lettered and the
// kafkatrail.dead_letter.reason header.
const (
	DeadLetterTooLarge         = "too_large"
	DeadLetterInvalidRecord    = "invalid_record"
	DeadLetterInvalidTimestamp = "invalid_timestamp"
	DeadLetterPolicyViolation  = "policy_violation"
	DeadLetterUnroutable       = "unroutable"
	DeadLetterUnknownTopic     = "unknown_topic" // a --topic template named a topic that does not exist
)

// classify gives a failed record's error its fate and, for a dead letter, its reason.
// templated says the record's topic came from a --topic template: a topic that does not exist
// is then the line's doing (its field named it), and the line is a dead letter rather than a
// reason to stop the agent.
func classify(err error, templated bool) (fate, string) {
	var tooLarge *producer.RecordTooLargeError
	var unrouted *linerecord.RouteError
	var expired *producer.DeliveryTimeoutError
	var noMetadata *producer.MetadataTimeoutError
	switch {
	case errors.Is(err, producer.ErrProducerClosed), errors.Is(err, context.Canceled),
		errors.Is(err, producer.ErrTransactionAborted):
		return fateGivenUp, ""
	case errors.As(err, &expired):
		// The batch outlived delivery.timeout.ms: an outage or a slow broker, which ends. Its
		// last error (UNKNOWN_TOPIC_OR_PARTITION while a leader moves, say) is what was retried,
		// not a verdict on the line: it is sent again, never dead-lettered or stopped for.
		return fateResend, ""
	case errors.Is(err, producer.ErrBatchHadInvalidRecords):
		return fateResend, "" // another record of its batch was the invalid one
	case errors.As(err, &unrouted):
		return fateDeadLetter, DeadLetterUnroutable
	case errors.As(err, &tooLarge), errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fateDeadLetter, DeadLetterTooLarge
	case errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		return fateDeadLetter, DeadLetterInvalidRecord
	case errors.Is(err, kerr.InvalidTimestamp):
		return fateDeadLetter, DeadLetterInvalidTimestamp
	case errors.Is(err, kerr.PolicyViolation):
		return fateDeadLetter, DeadLetterPolicyViolation
	case templated && errors.Is(err, kerr.UnknownTopicOrPartition):
		return fateDeadLetter, DeadLetterUnknownTopic
	case isStopError(err):
		return fateStop, ""
	case errors.As(err, &noMetadata):
		// No broker answered in time: an outage, which ends.
		return fateResend, ""
	case kerr.IsRetriable(err):
		return fateResend, ""
	}
	// Anything else is an error the agent has no rule for: holding the line and saying so is
	// safe (nothing is lost, nothing leaves the topic), dead-lettering it might not be.
	return fateStop, ""
}

// isStopError reports the refusals that are about the configuration or the cluster: every
// line would meet them, so none is dead-lettered for them.
func isStopError(err error) bool {
	for _, e := range []error{
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.SaslAuthenticationFailed,
		kerr.UnknownTopicOrPartition, kerr.InvalidTopicException, kerr.UnsupportedVersion,
		kerr.UnsupportedForMessageFormat, kerr.UnsupportedCompressionType, kerr.InvalidRequiredAcks,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// errorName is the Kafka error's name (MESSAGE_TOO_LARGE) when err carries one, else a short
// name of the client-side error.
func errorName(err error) string {
	var ke *kerr.Error
	var tooLarge *producer.RecordTooLargeError
	var unrouted *linerecord.RouteError
	var expired *producer.DeliveryTimeoutError
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.As(err, &tooLarge):
		return "RECORD_TOO_LARGE"
	case errors.As(err, &unrouted):
		return "UNROUTABLE"
	case errors.As(err, &expired):
		return "DELIVERY_TIMEOUT"
	}
	return "ERROR"
}
