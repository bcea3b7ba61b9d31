package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The three-node cluster of the cluster fault scenarios (cluster_faults_test.go): started by
// scripts/kafka/cluster.sh (CLUSTER_SH, default <repo>/scripts/kafka/cluster.sh) once for the
// suite, at the first scenario that needs it, and stopped by its PIDs when the tests end. Every
// node is broker and controller; RF 3 and min.insync.replicas 2 by default, no automatic leader
// rebalance. Its base port is 29192 and its state /tmp/kafkatrail-cluster-suite
// (RELIABILITY_CLUSTER_PORT and RELIABILITY_CLUSTER_STATE move them).
//
// RELIABILITY_CLUSTER_REUSE=1 (to iterate on one scenario) uses a cluster already running with
// that port and state and leaves it running.

type cluster struct {
	script    string
	env       []string
	bootstrap string
	nodes     [4]string // nodes[1..3]: each node's PLAINTEXT address
	lib       string    // the Kafka jars (KAFKA_LIB)
	version   string
	state     string // the state dir (removed after the stop, unless reused)
	reused    bool
	// sasl is the SASL_PLAINTEXT bootstrap, where user saslUser may do only what ACLs grant.
	sasl, saslUser, saslPassword string

	mu     sync.Mutex
	pids   [4]int  // the last PID seen of each node (stopped by it at the end if still alive)
	down   [4]bool // killed or stopped by a scenario, not restarted yet
	paused [4]bool
}

var (
	clusterOnce  sync.Once
	suiteCluster *cluster
	clusterErr   error
)

// theCluster returns the suite's cluster, starting it at the first call.
func theCluster(t *testing.T) *cluster {
	t.Helper()
	clusterOnce.Do(func() { suiteCluster, clusterErr = startCluster() })
	if clusterErr != nil {
		t.Fatalf("three-node cluster: %v", clusterErr)
	}
	return suiteCluster
}

func clusterScript() string {
	if s := os.Getenv("CLUSTER_SH"); s != "" {
		return s
	}
	return filepath.Join(repoRoot, "scripts/kafka/cluster.sh")
}

func startCluster() (*cluster, error) {
	c := &cluster{script: clusterScript()}
	if _, err := os.Stat(c.script); err != nil {
		return nil, fmt.Errorf("cluster.sh: %v (set CLUSTER_SH to scripts/kafka/cluster.sh of a tree that has it)", err)
	}
	port := os.Getenv("RELIABILITY_CLUSTER_PORT")
	if port == "" {
		port = "29192"
	}
	state := os.Getenv("RELIABILITY_CLUSTER_STATE")
	if state == "" {
		state = "/tmp/kafkatrail-cluster-suite"
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAFKA_CLUSTER_") && !strings.HasPrefix(kv, "KAFKATRAIL_CLUSTER_") {
			env = append(env, kv)
		}
	}
	c.env = append(env, "KAFKA_CLUSTER_PORT="+port, "KAFKATRAIL_CLUSTER_STATE="+state)
	c.state = state
	if os.Getenv("RELIABILITY_CLUSTER_REUSE") == "1" {
		if out, err := c.run("status"); err != nil {
			return nil, fmt.Errorf("RELIABILITY_CLUSTER_REUSE=1 but cluster.sh status: %v\n%s", err, out)
		}
		c.reused = true
	} else {
		t0 := time.Now()
		if out, err := c.run("start"); err != nil {
			return nil, fmt.Errorf("cluster.sh start: %v\n%s", err, out)
		}
		fmt.Fprintf(os.Stderr, "cluster: started in %v\n", time.Since(t0).Round(100*time.Millisecond))
	}
	out, err := c.run("env")
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("cluster.sh env: %v\n%s", err, out)
	}
	vals := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
		if ok {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			vals[k] = strings.Trim(v, "'")
		}
	}
	c.bootstrap, c.lib, c.version = vals["KAFKA_CLUSTER_BOOTSTRAP"], vals["KAFKA_LIB"], vals["KAFKA_CLUSTER_VERSION"]
	c.sasl, c.saslUser, c.saslPassword = vals["KAFKA_CLUSTER_SASL_BOOTSTRAP"], vals["KAFKA_CLUSTER_SASL_USER"], vals["KAFKA_CLUSTER_SASL_PASSWORD"]
	for i := 1; i <= 3; i++ {
		c.nodes[i] = vals[fmt.Sprintf("KAFKA_CLUSTER_NODE%d", i)]
		if c.nodes[i] == "" {
			c.stop()
			return nil, fmt.Errorf("cluster.sh env printed no KAFKA_CLUSTER_NODE%d:\n%s", i, out)
		}
		c.refreshPID(i)
	}
	if c.bootstrap == "" || c.lib == "" || c.sasl == "" {
		c.stop()
		return nil, fmt.Errorf("cluster.sh env: no KAFKA_CLUSTER_BOOTSTRAP, KAFKA_CLUSTER_SASL_BOOTSTRAP or KAFKA_LIB:\n%s", out)
	}
	return c, nil
}

// stopSuiteCluster stops the cluster (TestMain, after the tests) and removes its state.
func stopSuiteCluster() {
	if suiteCluster != nil && !suiteCluster.reused {
		suiteCluster.stop()
		os.RemoveAll(suiteCluster.state)
		os.Remove(suiteCluster.state + ".lock")
	}
}

// stop continues paused nodes, runs cluster.sh stop, then kills by PID any node still alive.
func (c *cluster) stop() {
	c.mu.Lock()
	pids := c.pids
	c.mu.Unlock()
	for _, pid := range pids {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	if out, err := c.run("stop"); err != nil {
		fmt.Fprintf(os.Stderr, "cluster.sh stop: %v\n%s", err, out)
	}
	for i, pid := range pids {
		if pid > 0 && isClusterNode(pid) {
			fmt.Fprintf(os.Stderr, "cluster: node %d (pid %d) survived cluster.sh stop: SIGKILL\n", i, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// isClusterNode reports whether pid is a Kafka node (not a recycled PID).
func isClusterNode(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "kafka.Kafka")
}

func (c *cluster) run(args ...string) (string, error) {
	cmd := exec.Command(c.script, args...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) mustRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := c.run(args...); err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *cluster) refreshPID(n int) {
	out, err := c.run("pid", strconv.Itoa(n))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
		c.mu.Lock()
		c.pids[n] = pid
		c.mu.Unlock()
	}
}

// kill, pause, cont, stopNode and restart act on node n through cluster.sh and remember its
// state, so that heal can undo what a failed scenario left behind.
func (c *cluster) kill(t *testing.T, n int)     { t.Helper(); c.act(t, "kill", n, true, false) }
func (c *cluster) pause(t *testing.T, n int)    { t.Helper(); c.act(t, "pause", n, false, true) }
func (c *cluster) cont(t *testing.T, n int)     { t.Helper(); c.act(t, "cont", n, false, false) }
func (c *cluster) stopNode(t *testing.T, n int) { t.Helper(); c.act(t, "stop-node", n, true, false) }

// act runs `cluster.sh VERB n` and records the state it leaves node n in (cluster.sh fails,
// and so the test, on a node that is not in a state the verb applies to).
func (c *cluster) act(t *testing.T, verb string, n int, down, paused bool) {
	t.Helper()
	c.mustRun(t, verb, strconv.Itoa(n))
	c.setState(n, down, paused)
}

func (c *cluster) setState(n int, down, paused bool) {
	c.mu.Lock()
	c.down[n], c.paused[n] = down, paused
	c.mu.Unlock()
}

// restart starts the given nodes on their data (in one call: with a majority down a node
// serves only once enough voters are back) and waits until they serve.
func (c *cluster) restart(t *testing.T, ns ...int) {
	t.Helper()
	args := []string{"restart"}
	for _, n := range ns {
		args = append(args, strconv.Itoa(n))
	}
	c.mustRun(t, args...)
	for _, n := range ns {
		c.setState(n, false, false)
		c.refreshPID(n)
	}
}

// heal continues paused nodes and restarts stopped ones (a scenario's cleanup, whatever
// happened), then waits until every partition of topics has its full ISR again.
func (c *cluster) heal(t *testing.T, topics ...string) {
	t.Helper()
	var down []int
	for n := 1; n <= 3; n++ {
		c.mu.Lock()
		p, d := c.paused[n], c.down[n]
		c.mu.Unlock()
		if p {
			c.cont(t, n)
		}
		if d {
			down = append(down, n)
		}
	}
	if len(down) > 0 {
		c.restart(t, down...)
	}
	c.waitHealthy(t, 2*time.Minute, topics...)
}

// access reads the cluster with franz-go.
func (c *cluster) access() kafkaAccess {
	return kafkaAccess{seeds: strings.Split(c.bootstrap, ",")}
}

func (c *cluster) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl := c.access().client(t)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// nodeOf returns the node number of a broker address, 0 if none.
func (c *cluster) nodeOf(addr string) int {
	for i := 1; i <= 3; i++ {
		if c.nodes[i] == addr {
			return i
		}
	}
	return 0
}

// partitionState is one partition's leader, replicas and ISR (node ids are node numbers).
type partitionState struct {
	leader   int32
	replicas []int32
	isr      []int32
}

// describe returns the partitions of topic, or an error when the metadata did not answer.
func (c *cluster) describe(adm *kadm.Client, topic string) (map[int32]partitionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s not in metadata", topic)
	}
	if td.Err != nil {
		return nil, td.Err
	}
	out := map[int32]partitionState{}
	for p, pd := range td.Partitions {
		out[p] = partitionState{leader: pd.Leader, replicas: pd.Replicas, isr: pd.ISR}
	}
	return out, nil
}

// leaderOf waits until topic's partition p has a leader and returns it.
func (c *cluster) leaderOf(t *testing.T, topic string, p int32) int {
	t.Helper()
	adm := c.admin(t)
	leader := int32(-1)
	waitFor(t, time.Minute, 100*time.Millisecond, func() bool {
		ps, err := c.describe(adm, topic)
		if err != nil {
			return false
		}
		leader = ps[p].leader
		return leader > 0
	}, func() string { return fmt.Sprintf("%s/%d has no leader", topic, p) })
	return int(leader)
}

// ledBy returns topic's partitions whose leader is node n (metadata as the cluster sees it now).
func (c *cluster) ledBy(t *testing.T, topic string, n int) []int32 {
	t.Helper()
	ps, err := c.describe(c.admin(t), topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	var out []int32
	for p, s := range ps {
		if int(s.leader) == n {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// waitHealthy waits until the cluster lists 3 brokers and every partition of topics has a
// leader and its whole replica set in the ISR.
func (c *cluster) waitHealthy(t *testing.T, timeout time.Duration, topics ...string) {
	t.Helper()
	adm := c.admin(t)
	var why string
	waitFor(t, timeout, 200*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bs, err := adm.ListBrokers(ctx)
		if err != nil || len(bs) != 3 {
			why = fmt.Sprintf("brokers %v (%v)", bs.NodeIDs(), err)
			return false
		}
		for _, topic := range topics {
			ps, err := c.describe(adm, topic)
			if err != nil {
				why = fmt.Sprintf("%s: %v", topic, err)
				return false
			}
			for p, s := range ps {
				if s.leader < 0 || len(s.isr) != len(s.replicas) {
					why = fmt.Sprintf("%s/%d: leader %d, replicas %v, ISR %v", topic, p, s.leader, s.replicas, s.isr)
					return false
				}
			}
		}
		return true
	}, func() string { return "cluster not healthy: " + why })
}

// createTopic creates topic with an explicit replica assignment (assignment[p] = the replicas of
// partition p, the first the preferred leader) and configs, and waits until every partition has
// its preferred leader and full ISR. It is deleted when the test ends.
func (c *cluster) createTopic(t *testing.T, topic string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	cl := c.access().client(t)
	defer cl.Close()
	if err := createTopicAssigned(cl, topic, assignment, configs); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		cl := c.access().client(t)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
	})
	c.waitLeaders(t, topic, assignment)
}

func createTopicAssigned(cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, reps := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, tr := range resp.Topics {
		if err := kerr.ErrorForCode(tr.ErrorCode); err != nil {
			msg := ""
			if tr.ErrorMessage != nil {
				msg = ": " + *tr.ErrorMessage
			}
			return fmt.Errorf("%w%s", err, msg)
		}
	}
	return nil
}

// waitLeaders waits until every partition of topic is led by its preferred replica with its
// whole replica set in the ISR.
//
// Every broker is asked, not one: each applies the metadata log on its own, so a topic one
// broker already leads can still be unknown to another for a moment, and the next client to
// ask (a describe, the producer under test) may ask that one.
func (c *cluster) waitLeaders(t *testing.T, topic string, assignment [][]int32) {
	t.Helper()
	cl := c.access().client(t)
	defer cl.Close()
	var why string
	waitFor(t, time.Minute, 100*time.Millisecond, func() bool {
		for node := int32(1); node <= 3; node++ {
			ps, err := describeOn(cl, node, topic)
			if err != nil {
				why = fmt.Sprintf("node %d: %v", node, err)
				return false
			}
			if len(ps) != len(assignment) {
				why = fmt.Sprintf("node %d: %d of %d partitions", node, len(ps), len(assignment))
				return false
			}
			for p, reps := range assignment {
				s := ps[int32(p)]
				if s.leader != reps[0] || len(s.isr) != len(reps) {
					why = fmt.Sprintf("node %d: %s/%d: leader %d, ISR %v, want leader %d, ISR %v", node, topic, p, s.leader, s.isr, reps[0], reps)
					return false
				}
			}
		}
		return true
	}, func() string { return "topic not ready: " + why })
}

// describeOn returns the partitions of topic as broker node sees them.
func describeOn(cl *kgo.Client, node int32, topic string) (map[int32]partitionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	raw, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("topic %s not in metadata", topic)
	}
	td := resp.Topics[0]
	if err := kerr.ErrorForCode(td.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]partitionState{}
	for _, pd := range td.Partitions {
		out[pd.Partition] = partitionState{leader: pd.Leader, replicas: pd.Replicas, isr: pd.ISR}
	}
	return out, nil
}

// rotatedAssignment is partitions partitions with replicas [1+(p+shift)%3, ...]: leaders spread
// over the three nodes, partition p led by node 1+(p+shift)%3.
func rotatedAssignment(partitions int, shift int) [][]int32 {
	out := make([][]int32, partitions)
	for p := range out {
		for r := 0; r < 3; r++ {
			out[p] = append(out[p], int32(1+(p+shift+r)%3))
		}
	}
	return out
}

// txnCoordinator returns the node coordinating transactional id id.
func (c *cluster) txnCoordinator(t *testing.T, id string) int {
	t.Helper()
	adm := c.admin(t)
	var node int
	var last error
	waitFor(t, time.Minute, 200*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs := adm.FindTxnCoordinators(ctx, id)
		r, ok := rs[id]
		if !ok || r.Err != nil {
			last = errors.Join(last, r.Err)
			return false
		}
		node = int(r.NodeID)
		return node >= 1 && node <= 3
	}, func() string { return fmt.Sprintf("no coordinator for %s: %v", id, last) })
	return node
}
