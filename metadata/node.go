// Package metadata holds the producer's view of the cluster: brokers, topics, partitions and
// their leaders, refreshed by the sender goroutine and read by producing goroutines.
package metadata

import (
	"net"
	"strconv"
)

// Node is a broker as the cluster metadata names it. Bootstrap addresses are nodes with negative
// ids until the first metadata response replaces them with the real brokers.
type Node struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// Addr returns "host:port", ready for net.Dial.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", the form the Java client prints.
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}
