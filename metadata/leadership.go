package metadata

import (
	"maps"
	"slices"
	"strings"
)

// LeaderHint is a partition's new leader as a produce response names it (KIP-951's
// CurrentLeader), for UpdatePartitionLeadership.
type LeaderHint struct {
	TopicPartition
	Leader      int32
	LeaderEpoch int32
}

// UpdatePartitionLeadership applies leaders named in produce responses without waiting for a
// metadata response, after the Java Metadata.updatePartitionLeadership: nodes (the response's
// NodeEndpoints) join the known brokers, and a hint is ignored when the partition is unknown,
// when its epoch is not newer than the known leader's, or when its leader is not a known node.
// It returns the partitions that changed, whose epochs become the last seen ones (as a metadata
// response's would). The metadata version does not change: a regular
// update still follows, and waiters for one keep waiting.
func (m *Metadata) UpdatePartitionLeadership(hints []LeaderHint, nodes []Node) []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.cluster.Load()
	if old.bootstrap {
		return nil
	}
	nodesByID := maps.Clone(old.nodesByID)
	allNodes := slices.Clone(old.nodes)
	for _, n := range nodes {
		if _, ok := nodesByID[n.ID]; !ok && n.ID >= 0 {
			nodesByID[n.ID] = n
			allNodes = append(allNodes, n)
		}
	}
	var changed []TopicPartition
	topics := maps.Clone(old.topics)
	for _, h := range hints {
		ps := topics[h.Topic]
		i := slices.IndexFunc(ps, func(p PartitionInfo) bool { return p.Partition == h.Partition })
		if i < 0 || h.Leader < 0 || h.LeaderEpoch < 0 {
			continue
		}
		if cur := ps[i]; cur.LeaderEpoch >= 0 && h.LeaderEpoch <= cur.LeaderEpoch {
			continue
		}
		if _, ok := nodesByID[h.Leader]; !ok {
			continue
		}
		if len(changed) == 0 || !slices.ContainsFunc(changed, func(tp TopicPartition) bool { return tp.Topic == h.Topic }) {
			ps = slices.Clone(ps) // snapshots are shared: copy a topic before its first change
			topics[h.Topic] = ps
		}
		ps[i].Leader, ps[i].LeaderEpoch, ps[i].Err = h.Leader, h.LeaderEpoch, nil
		// Java records the hint's epoch as the last seen one, so that a lagging broker's
		// metadata at an older epoch does not put the old leader back.
		m.lastSeenLeaderEpochs[h.TopicPartition] = h.LeaderEpoch
		changed = append(changed, h.TopicPartition)
	}
	if len(changed) == 0 {
		return nil
	}
	c := &Cluster{
		nodes:       allNodes,
		nodesByID:   nodesByID,
		topics:      topics,
		topicIDs:    old.topicIDs,
		topicErrors: old.topicErrors,
		byNode:      map[int32][]TopicPartition{},
		available:   map[string][]int32{},
		clusterID:   old.clusterID,
		controller:  old.controller,
	}
	c.indexLeaders()
	m.cluster.Store(c)
	return changed
}

// indexLeaders fills byNode and available from topics.
func (c *Cluster) indexLeaders() {
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		for _, p := range c.topics[name] {
			if p.Leader >= 0 {
				c.byNode[p.Leader] = append(c.byNode[p.Leader], TopicPartition{name, p.Partition})
				c.available[name] = append(c.available[name], p.Partition)
			}
		}
	}
	for _, tps := range c.byNode {
		slices.SortFunc(tps, func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition) - int(b.Partition)
		})
	}
}

// LeaderEpochFor returns tp's leader epoch; ok is false when the partition is unknown, has no
// leader, or the broker did not report an epoch.
func (c *Cluster) LeaderEpochFor(tp TopicPartition) (epoch int32, ok bool) {
	p, found := c.partition(tp)
	if !found || p.Leader < 0 || p.LeaderEpoch < 0 {
		return -1, false
	}
	return p.LeaderEpoch, true
}
