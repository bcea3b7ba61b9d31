package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Isolation levels of ListOffsets and Fetch.
const isolationReadCommitted = 1

// Special ListOffsets timestamps.
const (
	offsetLatest   = -1 // the end; at read_committed the last stable offset
	offsetEarliest = -2 // the log start offset
)

// fetchMaxBytes bounds one fetch response (the broker returns at least one whole batch even
// when it is larger).
const fetchMaxBytes = 8 << 20

// maxFetchVersion keeps Fetch at v12, the last version that names topics rather than topic ids:
// every broker since Kafka 2.8 speaks it, and the reader then needs no topic ids.
const maxFetchVersion = 12

// ReadCommitted reads every partition of topic from its log start to its last stable offset
// (the end of what transactions have decided) at the time of the call, at isolation level
// read_committed, and calls each with every record of a committed transaction or of no
// transaction, in offset order per partition. Control records and the records of aborted
// transactions are skipped, as the Java consumer's Fetcher skips them. An error from each stops
// the read and is returned.
func (c *Client) ReadCommitted(ctx context.Context, topic string, each func(Record) error) error {
	n, err := c.partitions(ctx, topic)
	if err != nil {
		return err
	}
	for p := int32(0); p < int32(n); p++ {
		if err := c.readPartition(ctx, topic, p, each); err != nil {
			return fmt.Errorf("read_committed %s/%d: %w", topic, p, err)
		}
	}
	return nil
}

func (c *Client) readPartition(ctx context.Context, topic string, partition int32, each func(Record) error) error {
	start, err := c.listOffset(ctx, topic, partition, offsetEarliest)
	if err != nil {
		return err
	}
	end, err := c.listOffset(ctx, topic, partition, offsetLatest)
	if err != nil {
		return err
	}
	for offset := start; offset < end; {
		var resp kmsg.FetchResponseTopicPartition
		err := c.do(ctx, "Fetch", func() error {
			leader, err := c.leader(ctx, topic, partition)
			if err != nil {
				return err
			}
			resp, err = c.fetch(ctx, leader, topic, partition, offset)
			return err
		})
		if errors.Is(err, kerr.OffsetOutOfRange) {
			// The log start moved past offset (retention or compaction removed segments).
			if start, err = c.listOffset(ctx, topic, partition, offsetEarliest); err != nil {
				return err
			}
			offset = max(offset, start)
			continue
		}
		if err != nil {
			return err
		}
		next, err := deliverCommitted(resp, partition, offset, end, each)
		if err != nil {
			return err
		}
		offset = next
	}
	return nil
}

// deliverCommitted hands each the committed records of resp from offset up to end and returns
// the next offset to fetch. Aborted transactions are tracked as in the Java Fetcher: a
// transaction's producer id joins the aborted set when a batch of that producer reaches the
// aborted transaction's first offset, and leaves it at the producer's ABORT marker; a
// transactional batch of a producer in the set is skipped.
func deliverCommitted(resp kmsg.FetchResponseTopicPartition, partition int32, offset, end int64, each func(Record) error) (int64, error) {
	batches, err := decodeBatches(resp.RecordBatches)
	if err != nil && len(batches) == 0 {
		return offset, err
	}
	aborted := slices.Clone(resp.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return int(min(max(a.FirstOffset-b.FirstOffset, -1), 1))
	})
	abortedPIDs := map[int64]bool{}
	for i := range batches {
		b := &batches[i]
		if b.lastOffset() < offset {
			continue // a whole batch before the fetch offset (the broker returns whole batches)
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= b.lastOffset() {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		skip := false
		switch {
		case b.isControl():
			if b.controlType() == controlAbort {
				delete(abortedPIDs, b.ProducerID)
			}
			skip = true
		case b.isTransactional() && abortedPIDs[b.ProducerID]:
			skip = true
		}
		if !skip {
			for _, r := range b.records {
				off := b.FirstOffset + int64(r.OffsetDelta)
				if off < offset || off >= end {
					continue
				}
				rec := Record{Partition: partition, Offset: off, Key: r.Key, Value: r.Value,
					Timestamp: time.UnixMilli(b.FirstTimestamp + r.TimestampDelta64)}
				if err := each(rec); err != nil {
					return offset, err
				}
			}
		}
		offset = b.lastOffset() + 1
	}
	if err != nil {
		// Corrupt bytes after good batches: the good ones were delivered; the next fetch
		// starts at the bad one and reports it.
		return offset, nil
	}
	return offset, nil
}

// fetch sends one read_committed Fetch for partition at offset to the leader.
func (c *Client) fetch(ctx context.Context, leader int32, topic string, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = isolationReadCommitted
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.FetchOffset = offset
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = fetchMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.roundTrip(ctx, leader, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return p, err
			}
			return p, nil
		}
	}
	return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch %s/%d: partition missing from the response", topic, partition)
}

// listOffset returns partition's offset for timestamp (offsetEarliest, or offsetLatest: the last
// stable offset at read_committed).
func (c *Client) listOffset(ctx context.Context, topic string, partition int32, timestamp int64) (int64, error) {
	var offset int64
	err := c.do(ctx, "ListOffsets", func() error {
		leader, err := c.leader(ctx, topic, partition)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = isolationReadCommitted
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = partition
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = timestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.roundTrip(ctx, leader, req)
		if err != nil {
			return err
		}
		for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.Partition != partition {
					continue
				}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
				offset = p.Offset
				return nil
			}
		}
		return fmt.Errorf("ListOffsets %s/%d: partition missing from the response", topic, partition)
	})
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	return offset, nil
}
