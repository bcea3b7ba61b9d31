package consumer

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeBatch builds a v2 batch of values (uncompressed) at firstOffset with the given
// attributes and producer id, CRC included.
func encodeBatch(firstOffset int64, attrs int16, producerID int64, values ...string) []byte {
	var records []byte
	for i, v := range values {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = []byte(v)
		raw := r.AppendTo(nil)
		r.Length = int32(len(raw) - 1)
		records = r.AppendTo(records)
	}
	b := kmsg.NewRecordBatch()
	b.FirstOffset = firstOffset
	b.Magic = 2
	b.Attributes = attrs
	b.ProducerID = producerID
	b.LastOffsetDelta = int32(len(values) - 1)
	b.NumRecords = int32(len(values))
	b.Records = records
	b.Length = int32(49 + len(records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32c))
	return out
}

// TestDeliverCommittedAbortMarker: a producer's aborted records are skipped until its ABORT
// marker; its later transaction (after the marker) is delivered.
func TestDeliverCommittedAbortMarker(t *testing.T) {
	abortKey := []byte{0, 0, 0, controlAbort}
	marker := kmsg.NewRecord()
	marker.Key = abortKey
	var data []byte
	data = append(data, encodeBatch(0, attrTransactional, 7, "aborted-1", "aborted-2")...)
	data = append(data, encodeBatch(2, 0, -1, "plain")...)
	ctl := encodeBatch(3, attrTransactional|attrControl, 7, "")
	// Replace the control batch's record with a marker whose key is the ABORT type.
	{
		var b batch
		if err := b.ReadFrom(ctl); err != nil {
			t.Fatal(err)
		}
		raw := marker.AppendTo(nil)
		marker.Length = int32(len(raw) - 1)
		b.Records = marker.AppendTo(nil)
		b.Length = int32(49 + len(b.Records))
		ctl = b.AppendTo(nil)
		binary.BigEndian.PutUint32(ctl[17:21], crc32.Checksum(ctl[21:], crc32c))
	}
	data = append(data, ctl...)
	data = append(data, encodeBatch(4, attrTransactional, 7, "committed")...)
	resp := kmsg.NewFetchResponseTopicPartition()
	resp.RecordBatches = data
	resp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 0}}
	var got []string
	next, err := deliverCommitted(resp, 0, 0, 5, func(r Record) error { got = append(got, string(r.Value)); return nil })
	if err != nil || next != 5 {
		t.Fatalf("deliverCommitted = %d, %v", next, err)
	}
	if want := "[plain committed]"; stringsOf(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}

func stringsOf(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}

// FuzzDecodeBatches: no input makes the batch decoder panic or allocate without bound.
func FuzzDecodeBatches(f *testing.F) {
	f.Add(encodeBatch(0, 0, -1, "a", "bc"))
	f.Add(append(encodeBatch(5, attrTransactional, 3, "x"), encodeBatch(6, 0, -1, "y")[:20]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp := kmsg.NewFetchResponseTopicPartition()
		resp.RecordBatches = data
		resp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 3, FirstOffset: 0}}
		_, _ = deliverCommitted(resp, 0, 0, 1<<40, func(Record) error { return nil })
	})
}
