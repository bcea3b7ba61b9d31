package reliability

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// The cluster scenarios where the brokers stay up but are not where or what the client
// expects: one broker slow behind a latency proxy (m), and every broker moving to another
// address behind a stable bootstrap name (n). Both use cluster.sh's client listener, which
// is apart from replication: a proxy in front of it, or a move, leaves replication alone.

// newProxy starts a toxiproxy proxy to upstream on a free port of 127.0.0.1, stopped when the
// test ends.
func newProxy(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// advertise has node n's client listener advertised at addr (a proxy) from its next restart;
// "" puts it back at its own address.
func (c *cluster) advertise(t *testing.T, n int, addr string) {
	t.Helper()
	args := []string{"advertise", strconv.Itoa(n)}
	if addr != "" {
		args = append(args, addr)
	}
	c.mustRun(t, args...)
}

// move kills every node and starts them again with their client listeners shift ports from
// home (0: home), then reads the new addresses (bootstrap, nodes) back from cluster.sh env:
// the scenarios after it use the cluster where it is now.
func (c *cluster) move(t *testing.T, shift int) {
	t.Helper()
	c.mustRun(t, "move", strconv.Itoa(shift))
	out, err := c.run("env")
	if err != nil {
		t.Fatalf("cluster.sh env: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, "'")
		c.mu.Lock()
		switch {
		case k == "KAFKA_CLUSTER_BOOTSTRAP":
			c.bootstrap = v
		case strings.HasPrefix(k, "KAFKA_CLUSTER_NODE"):
			if i, err := strconv.Atoi(strings.TrimPrefix(k, "KAFKA_CLUSTER_NODE")); err == nil && i >= 1 && i <= 3 {
				c.nodes[i] = v
			}
		}
		c.mu.Unlock()
	}
	for n := 1; n <= 3; n++ {
		c.setState(n, false, false)
		c.refreshPID(n)
	}
}

// slowLatency is what the slow broker's proxy adds to every response: enough that its five
// requests in flight cannot carry a uniform third of the lines, so that its queues grow.
const slowLatency = 200 * time.Millisecond

// slowBrokerBuffer is scenario m's buffer.memory: small beside the input, so that Send waits for
// room most of the run and the queues' lengths say how fast each broker takes its share (with
// the default 32 MiB, most of the input fits in the buffer at once, and the run's length is
// whatever the partitioner put on the slow broker early on).
const slowBrokerBuffer = 4 << 20

// slowBrokerLines is how many keyless lines each client sends in scenario m.
var slowBrokerLines = size(1_000_000, 300_000)

// clusterSlowBroker: node 3 answers every request slowLatency late (its client listener behind
// a latency proxy, advertised as the proxy's address; replication is not slowed), and each
// client in turn sends keyless lines as fast as it takes them. Records/s over the records'
// append times (startup left out) and the share of the records that went to node 3's
// partitions. Java's adaptive partitioner (KIP-794) is the bar: the agent sends the slow broker
// no larger a share (and the row shows both throughputs).
func clusterSlowBroker(t *testing.T, c *cluster) {
	const slow = 3
	proxy := newProxy(t, "slow-node", c.nodes[slow])
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, slowLatency.Milliseconds()))); err != nil {
		t.Fatal(err)
	}
	c.waitHealthy(t, 2*time.Minute)
	c.advertise(t, slow, proxy.Listen)
	c.restart(t, slow)
	t.Cleanup(func() {
		c.advertise(t, slow, "")
		c.restart(t, slow)
		c.waitHealthy(t, 2*time.Minute)
	})
	c.waitHealthy(t, 2*time.Minute)

	scenario := fmt.Sprintf("m. one slow broker: node %d answers %v late (behind a latency proxy), %s keyless lines at full speed, buffer.memory %d MiB, each client alone",
		slow, slowLatency, num(int64(slowBrokerLines)), slowBrokerBuffer>>20)
	input := filepath.Join(t.TempDir(), "lines")
	writeNumberedLines(t, input, slowBrokerLines)
	type result struct {
		rate  float64 // records/s over the append times
		share float64 // of the records, on the slow node's partitions
	}
	res := map[string]result{}
	rows := map[string]*crow{}
	for _, kind := range []string{"Java", "agent"} {
		r := reportCluster(t, scenario, kind)
		rows[kind] = r
		topic := fmt.Sprintf("cl-m-%s-%d", strings.ToLower(kind), time.Now().UnixNano()%1e6)
		assignment := rotatedAssignment(6, 0)
		c.createTopic(t, topic, assignment, map[string]string{"message.timestamp.type": "LogAppendTime"})
		ps, err := c.describe(c.admin(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		onSlow := map[int32]bool{}
		for p, s := range ps {
			if s.leader == slow {
				onSlow[p] = true
			}
		}
		if len(onSlow) != 2 {
			t.Fatalf("%s: node %d leads partitions %v, want 2 of 6", topic, slow, onSlow)
		}
		f, err := os.Open(input)
		if err != nil {
			t.Fatal(err)
		}
		proc := startFullSpeed(t, c, kind, topic, f, "buffer.memory="+strconv.Itoa(slowBrokerBuffer))
		code := proc.wait(5 * time.Minute)
		f.Close()
		r.Exit = strconv.Itoa(code)

		tl := newTally(slowBrokerLines)
		var first, last int64
		perPart := map[int32]int64{}
		c.access().consume(t, topic, func(rec *kgo.Record) {
			tl.add(t, rec.Value)
			perPart[rec.Partition]++
			ts := rec.Timestamp.UnixMilli()
			if first == 0 || ts < first {
				first = ts
			}
			last = max(last, ts)
		})
		lc := tl.result()
		r.Sent, r.Delivered, r.Lost, r.Dup, r.Reordered = int64(slowBrokerLines), lc.distinct, lc.lost, lc.dup, 0
		var toSlow int64
		for p, n := range perPart {
			if onSlow[p] {
				toSlow += n
			}
		}
		span := time.Duration(max(last-first, 1)) * time.Millisecond
		res[kind] = result{rate: float64(lc.distinct) / span.Seconds(), share: float64(toSlow) / float64(max(lc.records, 1))}
		r.Recovery = "-"
		r.note("%s records/s over %v of append times; %.1f%% to node %d's partitions (a uniform spread: 33.3%%)",
			num(int64(res[kind].rate)), span.Round(10*time.Millisecond), 100*res[kind].share, slow)
		r.Pass = code == 0 && lc.lost == 0 && lc.dup == 0 && lc.torn == 0 && lc.spliced == 0
		if !r.Pass {
			r.note("exit %d, lost %d, duplicated %d, torn %d, spliced %d", code, lc.lost, lc.dup, lc.torn, lc.spliced)
		}
	}
	ag, jv := res["agent"], res["Java"]
	ar := rows["agent"]
	// The records/s ratio is reported, not asserted (speed is the benchmarks' to judge; the two
	// runs share two cores with three brokers). What decides the row is the share: a producer
	// that spreads keyless records uniformly sends the slow broker a third of them, and its
	// throughput falls to what that broker takes; Java's adaptive partitioner is the bar, with
	// a few points for the partitioners' own randomness.
	ar.note("%.2fx Java's records/s", ag.rate/jv.rate)
	if ag.share > jv.share+0.05 {
		ar.Pass = false
		ar.note("a larger share to the slow broker than Java's %.1f%%", 100*jv.share)
	}
	for _, k := range []string{"Java", "agent"} {
		r := rows[k]
		r.decided = true
		if !r.Pass {
			t.Errorf("%s: %s: %s", r.Scenario, k, r.Result)
		}
	}
}

// writeNumberedLines writes lines 0..n-1 (testkit.NumberedLine, lineLen bytes each) to path.
func writeNumberedLines(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := range n {
		buf = testkit.NumberedLine(buf[:0], i, lineLen)
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// startFullSpeed starts a client that sends its stdin (in) to topic, keyless, with the suite's
// producer properties, and exits once everything is acknowledged.
func startFullSpeed(t *testing.T, c *cluster, kind, topic string, in *os.File, props ...string) *agentProc {
	t.Helper()
	var xs []string
	for _, p := range append(slices.Clone(clusterProps), props...) {
		xs = append(xs, "-X", p)
	}
	if kind == "agent" {
		args := append([]string{"--brokers", c.bootstrap, "--topic", topic, "--stdin", "--state-dir", t.TempDir(),
			"--header-path=", "--header-host=", "--log-level", agentLogLevel(), "--log-format", "text"}, xs...)
		return startAgent(t, in, nil, args...)
	}
	dir := javaControl(t, c)
	// The JVM's own compilers and collector: the other scenarios' control runs C1 only with
	// the serial collector to spare the brokers CPU, which would handicap a throughput figure.
	args := append([]string{"-Xms64m", "-Xmx384m",
		"-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties"),
		"-cp", filepath.Join(c.lib, "*") + string(os.PathListSeparator) + dir, "ControlProducer",
		"--bootstrap", c.bootstrap, "--topic", topic}, xs...)
	return startProc(t, "java", javatest.Tool("java"), in, nil, args...)
}

// clusterMoved: the clients know the cluster through one stable bootstrap address (a proxy, as
// a DNS name or a load balancer in front of a Kubernetes StatefulSet would be); under load,
// every broker is killed and comes back on another address, so that no broker the clients learned
// from metadata exists any more, and the bootstrap name follows the cluster. Java goes back to
// bootstrap.servers (metadata.recovery.strategy=rebootstrap, its default since 4.0; KIP-899);
// so must the agent. Recovery: from the cluster serving again to the first record after.
func clusterMoved(t *testing.T, c *cluster) {
	const shift = 5
	c.waitHealthy(t, 2*time.Minute)
	home := c.nodes[1]
	bootstrap := newProxy(t, "bootstrap", home)
	p := newPair(t, c, fmt.Sprintf("n. the cluster moves: every broker killed and restarted on another port behind one stable bootstrap address, under %s lines/s",
		num(int64(clusterRate))), rotatedAssignment(6, 0), nil, clientSpec{bootstrap: bootstrap.Listen}, nil)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(2 * time.Second)
	moved := time.Now()
	c.move(t, shift)
	if c.nodes[1] == home {
		t.Fatalf("node 1 still at %s after the move", home)
	}
	if err := bootstrap.Update(&toxiproxy.Proxy{Listen: bootstrap.Listen, Upstream: c.nodes[1], Enabled: true}); err != nil {
		t.Fatalf("bootstrap proxy: %v", err)
	}
	serving := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(5 * time.Second)
	all := make([]int32, p.partitions)
	for i := range all {
		all[i] = int32(i)
	}
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(serving, all)
			return sinceOr(first, ok, serving)
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("brokers down %v (all three restarted on new ports); no record for %s", serving.Sub(moved).Round(100*time.Millisecond),
				secs(kc.longestGap(moved.Add(-time.Second), p.endedAt, all)))
			if _, ok := kc.firstAfter(serving, all); !ok {
				r.note("nothing written after the cluster came back")
				return false
			}
			return true
		},
	})
}
