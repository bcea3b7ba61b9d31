package accumulator

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

// TestBatchNodeAndRecordHeader: a batch knows the node it was drained for (-1 before), and a
// record's header can be read back from the batch, as telemetry does for a record it traces
// at completion.
func TestBatchNodeAndRecordHeader(t *testing.T) {
	a := newTestAccumulator(Config{})
	cluster := newCluster(map[int32][]metadata.TopicPartition{7: {p0}})
	var batch *ProducerBatch
	for i, hs := range [][]kmsg.Header{
		nil,
		{{Key: "app", Value: []byte("x")}, {Key: "traceparent", Value: []byte("tp-1")}},
		{{Key: "traceparent", Value: []byte("tp-2")}},
	} {
		res, err := a.Append(context.Background(), p0, AppendRecord{Timestamp: t0, Value: value, Headers: hs, Now: t0})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		batch = res.Batch
	}
	if batch.Node != -1 {
		t.Fatalf("Node before any drain = %d, want -1", batch.Node)
	}
	for i, want := range []string{"", "tp-1", "tp-2", ""} { // index 3: no such record
		if got := string(batch.RecordHeader(i, "traceparent")); got != want {
			t.Fatalf("RecordHeader(%d) = %q, want %q", i, got, want)
		}
	}
	if got := batch.RecordHeader(1, "missing"); got != nil {
		t.Fatalf("RecordHeader of a header the record lacks = %q, want nil", got)
	}
	if got := a.Drain(cluster, []int32{7}, 1<<20, t0); len(got[7]) != 1 || got[7][0] != batch {
		t.Fatalf("Drain = %v, want the batch", got)
	}
	if batch.Node != 7 {
		t.Fatalf("Node after the drain for node 7 = %d", batch.Node)
	}
	// Compression (Close at drain) leaves the uncompressed records readable.
	if got := string(batch.RecordHeader(2, "traceparent")); got != "tp-2" {
		t.Fatalf("RecordHeader after drain = %q, want tp-2", got)
	}
}
