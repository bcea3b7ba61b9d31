package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// admin creates, counts and deletes the benchmark's topics.
type admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newAdmin(bootstrap string) (*admin, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID("runbench-admin"))
	if err != nil {
		return nil, err
	}
	return &admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (a *admin) close() { a.cl.Close() }

// createTopic creates a topic with the given partitions (replication factor 1) and waits until
// its metadata shows every partition with a leader.
func (a *admin) createTopic(ctx context.Context, topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := a.adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("create topic %s: %w", topic, resp.Err)
	}
	err = waitFor(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, error) {
		md, err := a.adm.Metadata(ctx, topic)
		if err != nil {
			return false, nil
		}
		t, ok := md.Topics[topic]
		if !ok || t.Err != nil || int32(len(t.Partitions)) != partitions {
			return false, nil
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("topic %s: no leaders: %w", topic, err)
	}
	// Metadata names a leader a little before the leader hosts the partition (a produce right
	// after creation can get NOT_LEADER_FOR_PARTITION, and some clients then wait for their
	// next metadata refresh, 5 s in kgo): wait until every partition answers ListOffsets.
	err = waitFor(ctx, 60*time.Second, 50*time.Millisecond, func() (bool, error) {
		offs, err := a.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, nil
		}
		n := 0
		ok := true
		offs.Each(func(o kadm.ListedOffset) {
			n++
			if o.Err != nil {
				ok = false
			}
		})
		return ok && int32(n) == partitions, nil
	})
	if err != nil {
		return fmt.Errorf("topic %s: partitions not ready: %w", topic, err)
	}
	time.Sleep(200 * time.Millisecond)
	return nil
}

// count returns the number of records in a topic: the sum of its partitions' end offsets
// (every benchmark topic is new, so its start offsets are 0).
func (a *admin) count(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	offs, err := a.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && ferr == nil {
			ferr = o.Err
		}
		n += o.Offset
	})
	return n, ferr
}

// perPartition returns each partition's end offset, for the JSON (how evenly a tool spread).
func (a *admin) perPartition(ctx context.Context, topic string) map[int32]int64 {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	offs, err := a.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil
	}
	m := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
	return m
}

func (a *admin) deleteTopic(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := a.adm.DeleteTopics(ctx, topic)
	if err != nil {
		return err
	}
	return resp.Error()
}

// firstValue returns the value of one record of the topic (the first fetched), for the JSON:
// what each tool actually wrote.
func (a *admin) firstValue(ctx context.Context, bootstrap, topic string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("runbench-peek"))
	if err != nil {
		return ""
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1)
		var v string
		fs.EachRecord(func(r *kgo.Record) {
			if v == "" {
				v = string(r.Value)
				if len(r.Headers) > 0 {
					v = fmt.Sprintf("%s (headers: %d)", v, len(r.Headers))
				}
			}
		})
		if v != "" {
			return v
		}
	}
	return ""
}
