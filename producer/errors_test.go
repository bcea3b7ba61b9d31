package producer

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestNeedsMetadataRefreshIsJavasInvalidMetadataException pins the set to the error codes whose
// Java exception extends org.apache.kafka.common.errors.InvalidMetadataException, no more and no
// less: NOT_ENOUGH_REPLICAS used to refresh metadata (its leader is right), and
// LISTENER_NOT_FOUND, UNKNOWN_TOPIC_ID and INCONSISTENT_TOPIC_ID did not.
func TestNeedsMetadataRefreshIsJavasInvalidMetadataException(t *testing.T) {
	java := map[int16]bool{
		kerr.UnknownTopicOrPartition.Code:     true, // UnknownTopicOrPartitionException
		kerr.LeaderNotAvailable.Code:          true, // LeaderNotAvailableException
		kerr.NotLeaderForPartition.Code:       true, // NotLeaderOrFollowerException
		kerr.ReplicaNotAvailable.Code:         true, // ReplicaNotAvailableException
		kerr.NetworkException.Code:            true, // NetworkException
		kerr.KafkaStorageError.Code:           true, // KafkaStorageException
		kerr.ListenerNotFound.Code:            true, // ListenerNotFoundException
		kerr.FencedLeaderEpoch.Code:           true, // FencedLeaderEpochException
		kerr.PreferredLeaderNotAvailable.Code: true, // PreferredLeaderNotAvailableException
		kerr.EligibleLeadersNotAvailable.Code: true, // EligibleLeadersNotAvailableException
		kerr.ElectionNotNeeded.Code:           true, // ElectionNotNeededException
		kerr.UnknownTopicID.Code:              true, // UnknownTopicIdException
		kerr.InconsistentTopicID.Code:         true, // InconsistentTopicIdException
	}
	for code := int16(-1); code <= 140; code++ {
		err := kerr.ErrorForCode(code)
		if err == nil {
			continue
		}
		t.Run(err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("produce t-0: %w", err)
			if got := needsMetadataRefresh(wrapped); got != java[code] {
				t.Fatalf("needsMetadataRefresh(%v) = %v, want %v", err, got, java[code])
			}
		})
	}
	if !needsMetadataRefresh(&networkError{Node: 1}) {
		t.Fatal("a disconnection (Java's NetworkException) does not refresh metadata")
	}
}
