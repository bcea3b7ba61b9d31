package reliability

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadBackToSettledEndOffsets: the read-back that counts lines lost must read to end offsets
// the cluster agrees on. Here the first ListOffsets answer is a stale leader's (a log end
// 400 records short, as a leader paused past its session answers just after SIGCONT): the
// read-back asks again until two answers agree, and finds every record. Read to the first
// answer, it counted 400 records lost that were in the topic.
func TestReadBackToSettledEndOffsets(t *testing.T) {
	const topic, n, stale = "rel-readback", 1000, 600
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acc := kafkaAccess{seeds: c.ListenAddrs()}
	prod := acc.client(t, kgo.DefaultProduceTopic(topic))
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "line-%09d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var staleAnswers atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Timestamp = rp.Partition, stale, rp.CurrentLeaderEpoch, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		staleAnswers.Add(1)
		return resp, nil, true // once: the control is dropped after it answered
	})
	got := 0
	acc.consume(t, topic, func(*kgo.Record) { got++ })
	if staleAnswers.Load() != 1 {
		t.Fatalf("the stale answer was given %d times, want once", staleAnswers.Load())
	}
	if got != n {
		t.Fatalf("read back %d of %d records: the read-back stopped at a stale end offset", got, n)
	}
}
