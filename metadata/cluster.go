package metadata

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionInfo is what the cluster says about one partition.
type PartitionInfo struct {
	Partition int32
	// Leader is the leader's node id, -1 when the partition has none right now.
	Leader int32
	// LeaderEpoch is the leader epoch the broker reported, -1 when unknown.
	LeaderEpoch int32
	// Err is the partition's error from the metadata response (kerr), nil when none.
	Err error
}

// Cluster is an immutable snapshot of the cluster: brokers, topics, partitions and leaders.
// Readers get it from Metadata.Fetch and may keep and share it freely.
type Cluster struct {
	nodes       []Node
	nodesByID   map[int32]Node
	topics      map[string][]PartitionInfo // sorted by partition
	topicIDs    map[string][16]byte
	topicErrors map[string]error
	byNode      map[int32][]TopicPartition // sorted by topic, then partition
	available   map[string][]int32         // partitions with a leader, per topic: Send asks per record
	bootstrap   bool
	clusterID   string
	controller  int32
}

// emptyCluster returns a cluster with no brokers and no topics.
func emptyCluster() *Cluster {
	return &Cluster{
		nodesByID:   map[int32]Node{},
		topics:      map[string][]PartitionInfo{},
		topicIDs:    map[string][16]byte{},
		topicErrors: map[string]error{},
		byNode:      map[int32][]TopicPartition{},
		available:   map[string][]int32{},
		controller:  -1,
	}
}

// bootstrapCluster turns bootstrap addresses into nodes with ids -1, -2, ... so the network
// client can connect to them before any broker is known by id.
func bootstrapCluster(nodes []Node) *Cluster {
	c := emptyCluster()
	c.bootstrap = true
	c.nodes = nodes
	for _, n := range nodes {
		c.nodesByID[n.ID] = n
	}
	return c
}

// Nodes returns the brokers, in the order the metadata response listed them.
func (c *Cluster) Nodes() []Node { return slices.Clone(c.nodes) }

// Node returns the broker with the given id.
func (c *Cluster) Node(id int32) (Node, bool) {
	n, ok := c.nodesByID[id]
	return n, ok
}

// IsBootstrap reports whether this cluster is made of the bootstrap addresses only, before any
// metadata response.
func (c *Cluster) IsBootstrap() bool { return c.bootstrap }

// ClusterID returns the cluster id the brokers reported, "" when unknown.
func (c *Cluster) ClusterID() string { return c.clusterID }

// Controller returns the controller's node id, -1 when unknown.
func (c *Cluster) Controller() int32 { return c.controller }

// LeaderFor returns the leader of tp; ok is false when the partition is unknown or has no leader.
func (c *Cluster) LeaderFor(tp TopicPartition) (node int32, ok bool) {
	p, found := c.partition(tp)
	if !found || p.Leader < 0 {
		return -1, false
	}
	return p.Leader, true
}

// Partition returns everything known about tp.
func (c *Cluster) Partition(tp TopicPartition) (PartitionInfo, bool) { return c.partition(tp) }

func (c *Cluster) partition(tp TopicPartition) (PartitionInfo, bool) {
	ps := c.topics[tp.Topic]
	i, found := slices.BinarySearchFunc(ps, tp.Partition, func(p PartitionInfo, id int32) int {
		return int(p.Partition) - int(id)
	})
	if !found {
		return PartitionInfo{}, false
	}
	return ps[i], true
}

// PartitionsForNode returns the partitions node leads, sorted by topic then partition.
func (c *Cluster) PartitionsForNode(node int32) []TopicPartition {
	return slices.Clone(c.byNode[node])
}

// PartitionCount returns the number of partitions of topic, 0 when the topic is unknown.
func (c *Cluster) PartitionCount(topic string) int { return len(c.topics[topic]) }

// AvailablePartitions returns the partitions of topic that have a leader, in partition order.
func (c *Cluster) AvailablePartitions(topic string) []int32 {
	// Computed once per snapshot: the sticky partitioner asks for every unkeyed record.
	// Callers must not modify the slice.
	return c.available[topic]
}

// Topics returns the topics the snapshot knows partitions for, sorted.
func (c *Cluster) Topics() []string {
	ts := slices.AppendSeq(make([]string, 0, len(c.topics)), maps.Keys(c.topics))
	slices.Sort(ts)
	return ts
}

// TopicID returns the topic's id (Kafka 2.8+ brokers), ok false when unknown.
func (c *Cluster) TopicID(topic string) (id [16]byte, ok bool) {
	id, ok = c.topicIDs[topic]
	return id, ok
}

// TopicError returns the error the last metadata response gave for topic (a kerr error such as
// kerr.UnknownTopicOrPartition or kerr.TopicAuthorizationFailed), nil when none. The producer uses
// it to fail fast on authorization errors instead of waiting for max.block.ms.
func (c *Cluster) TopicError(topic string) error { return c.topicErrors[topic] }

// clusterFromResponse builds the snapshot for resp, after the Java client's
// Metadata.handleMetadataResponse. prev is the snapshot it replaces and lastSeen the last leader
// epoch seen per partition, which it updates: see updateLatestMetadata.
func clusterFromResponse(resp *kmsg.MetadataResponse, prev *Cluster, lastSeen map[TopicPartition]int32) *Cluster {
	c := emptyCluster()
	if resp.ClusterID != nil {
		c.clusterID = *resp.ClusterID
	}
	c.controller = resp.ControllerID
	for _, b := range resp.Brokers {
		n := Node{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			n.Rack = *b.Rack
		}
		c.nodes = append(c.nodes, n)
		c.nodesByID[n.ID] = n
	}
	// Before Metadata v9 (Kafka 2.4) a broker's leader epochs are not reliable while a
	// reassignment is in progress (MetadataResponse.hasReliableLeaderEpochs).
	reliableEpochs := resp.GetVersion() >= 9
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue // a v10+ response to a request by topic id only; we request by name
		}
		name := *t.Topic
		// As in Java, the ids are compared only when the response has one: a zero id (a
		// pre-v10 response, or a topic in error) says nothing about whether the topic changed.
		var topicID, oldTopicID [16]byte
		if t.TopicID != ([16]byte{}) {
			topicID = t.TopicID
			c.topicIDs[name] = topicID
			oldTopicID = prev.topicIDs[name]
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			// Java keeps no partitions of a topic in error.
			c.topicErrors[name] = err
			continue
		}
		if len(t.Partitions) == 0 {
			continue
		}
		ps := make([]PartitionInfo, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			info := PartitionInfo{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Err: kerr.ErrorForCode(p.ErrorCode)}
			if info, ok := updateLatestMetadata(TopicPartition{name, p.Partition}, info, reliableEpochs, topicID, oldTopicID, prev, lastSeen); ok {
				ps = append(ps, info)
			}
		}
		if len(ps) == 0 {
			continue
		}
		slices.SortFunc(ps, func(a, b PartitionInfo) int { return int(a.Partition) - int(b.Partition) })
		c.topics[name] = ps
		for _, p := range ps {
			if p.Leader >= 0 {
				c.byNode[p.Leader] = append(c.byNode[p.Leader], TopicPartition{name, p.Partition})
				c.available[name] = append(c.available[name], p.Partition)
			}
		}
	}
	for _, tps := range c.byNode {
		slices.SortFunc(tps, func(a, b TopicPartition) int {
			if a.Topic != b.Topic {
				if a.Topic < b.Topic {
					return -1
				}
				return 1
			}
			return int(a.Partition) - int(b.Partition)
		})
	}
	return c
}

// updateLatestMetadata is the Java client's Metadata.updateLatestMetadata: which version of tp's
// partition metadata the new snapshot keeps. With a reliable epoch the one from the response
// wins when no epoch was seen for tp yet, when the topic id changed (the topic was deleted and
// created again, and its epochs started over; an old id that is unknown counts as changed,
// because a client can miss the moment the topic was gone), or when its epoch is at least the
// last seen one; otherwise the previous snapshot's partition stays (ok false when it has none),
// because the answer came from a broker that lags behind. Without a reliable epoch the
// response's partition is taken without its epoch and tp's last seen epoch is forgotten.
func updateLatestMetadata(tp TopicPartition, info PartitionInfo, reliableEpochs bool, topicID, oldTopicID [16]byte,
	prev *Cluster, lastSeen map[TopicPartition]int32) (PartitionInfo, bool) {
	if !reliableEpochs || info.LeaderEpoch < 0 {
		delete(lastSeen, tp)
		info.LeaderEpoch = -1
		return info, true
	}
	current, seen := lastSeen[tp]
	switch {
	case !seen,
		topicID != ([16]byte{}) && topicID != oldTopicID,
		info.LeaderEpoch >= current:
		lastSeen[tp] = info.LeaderEpoch
		return info, true
	}
	return prev.partition(tp)
}

// String summarises the snapshot for logs.
func (c *Cluster) String() string {
	return "cluster{nodes:" + strconv.Itoa(len(c.nodes)) + " topics:" + strconv.Itoa(len(c.topics)) + "}"
}
