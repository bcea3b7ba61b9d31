package telemetry

import (
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// What the messaging conventions put on a send and on its metrics beyond the topic: the
// partition, the leader it went to (server.address and server.port, the broker's advertised
// host and port) and the cluster id. The observer learns the brokers' addresses and the
// cluster id from the metadata responses it sees (RequestDone), the same responses the
// producer's metadata is built from, and a batch's leader from the node it was drained for
// (accumulator.ProducerBatch.Node).

// brokerAddr is a broker's advertised address as the metadata responses give it. Immutable:
// a broker that moves gets a new one.
type brokerAddr struct {
	host string
	port int
	kvs  [2]attribute.KeyValue // server.address, server.port
	// peer is the address its connection reached (the advertised name resolved), for
	// network.peer.address and network.peer.port on spans; peerKVs is empty before the first
	// connection (and after the node's address changed, until it connects again).
	peer    string
	peerKVs []attribute.KeyValue
}

// withPeer returns a's copy with the connection's remote address peer (IP:port).
func (a *brokerAddr) withPeer(peer string) *brokerAddr {
	return &brokerAddr{host: a.host, port: a.port, kvs: a.kvs, peer: peer, peerKVs: peerAttrs(peer)}
}

// peerAttrs are network.peer.address and network.peer.port of a connection's remote address
// peer (IP:port); none when it does not parse.
func peerAttrs(peer string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(peer)
	if err != nil {
		return nil
	}
	kvs := []attribute.KeyValue{attribute.String(AttrNetworkPeerAddress, host)}
	if p, err := strconv.Atoi(port); err == nil {
		kvs = append(kvs, attribute.Int(AttrNetworkPeerPort, p))
	}
	return kvs
}

func newBrokerAddr(host string, port int) *brokerAddr {
	return &brokerAddr{host: host, port: port,
		kvs: [2]attribute.KeyValue{attribute.String(AttrServerAddress, host), attribute.Int(AttrServerPort, port)}}
}

// metadataSeen keeps the cluster id and the brokers' addresses of a metadata response. They
// change rarely: the common case compares and stores nothing.
func (o *ProducerObserver) metadataSeen(resp *kmsg.MetadataResponse) {
	if id := resp.ClusterID; id != nil && *id != "" {
		if cur := o.clusterID.Load(); cur == nil || cur.Value.AsString() != *id {
			kv := attribute.String(AttrMessagingKafkaClusterID, *id)
			o.clusterID.Store(&kv)
		}
	}
	for _, b := range resp.Brokers {
		n := o.node(b.NodeID)
		if a := n.addr.Load(); a == nil || a.host != b.Host || a.port != int(b.Port) {
			n.addr.Store(newBrokerAddr(b.Host, int(b.Port)))
		}
	}
}

// partitionKey identifies a partition's measurement attributes. The leader is part of the key
// because server.address is: a leader change starts new series, as it should.
type partitionKey struct {
	topic     string
	partition int32 // -1: not known (a record that failed in Send)
	node      int32 // -1: not known (a batch never drained)
}

// partitionAttrs are the attribute sets of the messaging metrics for one (topic, partition,
// leader), built once so that a batch's measurements allocate nothing. Their number is bounded
// by the topics' partitions times the brokers that lead them.
type partitionAttrs struct {
	node    int32
	leader  *nodeAttrs  // node's, nil for -1: its address is compared with addr on a lookup
	addr    *brokerAddr // the leader's address the sets were built with; nil when unknown
	attrs   []attribute.KeyValue
	sentOpt metric.MeasurementOption
	opOK    durationSeries // the send duration of an acknowledged record
	failed  sync.Map       // error.type -> *failedAttrs
}

// failedAttrs are a partition's series for the records that failed with one error.type.
type failedAttrs struct {
	sentOpt metric.MeasurementOption
	op      durationSeries
}

// maxIndexedPartition bounds the partitions a topic keeps in its slice (topicAttrs.parts):
// past it, lookups go to the map alone.
const maxIndexedPartition = 1 << 12

// partition returns the metric attributes of records of topic t sent to partition through
// node (either -1 when not known). Once per batch: the common case is an atomic load, an index
// and two compares (the partition's latest entry, whose leader and its address are unchanged).
func (o *ProducerObserver) partition(t *topicAttrs, partition, node int32) *partitionAttrs {
	if parts := t.parts.Load(); parts != nil && partition >= 0 && int(partition) < len(*parts) {
		if p := (*parts)[partition]; p != nil && p.node == node && (p.leader == nil || p.leader.addr.Load() == p.addr) {
			return p
		}
	}
	var leader *nodeAttrs
	var addr *brokerAddr
	if node >= 0 {
		leader = o.node(node)
		addr = leader.addr.Load()
	}
	k := partitionKey{topic: t.name, partition: partition, node: node}
	if v, ok := o.partitions.Load(k); ok {
		if p := v.(*partitionAttrs); p.addr == addr {
			t.index(partition, p)
			return p
		}
	}
	p := &partitionAttrs{node: node, leader: leader, addr: addr}
	p.attrs = append(make([]attribute.KeyValue, 0, 7), t.opAttrs()...)
	if partition >= 0 {
		p.attrs = append(p.attrs, attribute.String(AttrMessagingPartitionID, strconv.Itoa(int(partition))))
	}
	if addr != nil {
		p.attrs = append(p.attrs, addr.kvs[:]...)
	}
	p.sentOpt = metric.WithAttributeSet(attribute.NewSet(p.sentAttrs()...))
	p.opOK = o.m.opDuration.series(attribute.NewSet(p.attrs...))
	o.partitions.Store(k, p)
	t.index(partition, p)
	return p
}

// index makes p partition's entry in t.parts (copy on write: lookups read it without a lock).
func (t *topicAttrs) index(partition int32, p *partitionAttrs) {
	if partition < 0 || partition >= maxIndexedPartition {
		return
	}
	t.partsMu.Lock()
	defer t.partsMu.Unlock()
	var parts []*partitionAttrs
	if cur := t.parts.Load(); cur != nil {
		parts = *cur
	}
	next := make([]*partitionAttrs, max(len(parts), int(partition)+1))
	copy(next, parts)
	next[partition] = p
	t.parts.Store(&next)
}

// sentAttrs are messaging.client.sent.messages' attributes: the operation duration's less
// messaging.operation.type, which the conventions do not list for it.
func (p *partitionAttrs) sentAttrs() []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(p.attrs))
	for _, kv := range p.attrs {
		if kv.Key != AttrMessagingOperationType {
			out = append(out, kv)
		}
	}
	return out
}

// failure returns the partition's series for records that failed with error type et.
func (p *partitionAttrs) failure(o *ProducerObserver, et string) *failedAttrs {
	if v, ok := p.failed.Load(et); ok {
		return v.(*failedAttrs)
	}
	kv := attribute.String(AttrErrorType, et)
	f := &failedAttrs{
		sentOpt: metric.WithAttributeSet(attribute.NewSet(append(p.sentAttrs(), kv)...)),
		op:      o.m.opDuration.series(attribute.NewSet(append(p.attrs[:len(p.attrs):len(p.attrs)], kv)...)),
	}
	v, _ := p.failed.LoadOrStore(et, f)
	return v.(*failedAttrs)
}
