package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster fault scenarios: the agent and a Java producer (the control: the Apache Kafka Java
// client, reliability/javactl/ControlProducer.java) through the same faults of a real three-node
// cluster (cluster_test.go), each on its own topic with the same replica assignment (RF 3, min
// ISR 2, message.timestamp.type=LogAppendTime so that every record carries the time the leader
// appended it), fed the same keyed lines ("kKK NNNNNNNNN ...", key = first field, both clients'
// key regex), concurrently. Each topic is read back afterwards: lost (a line the scenario needs
// that is not there; a line the scenario allows to fail is lost only if the client did not report
// it failed), duplicated (extra copies), reordered (a line after a higher-numbered line of its key
// in its partition), the exit status, and a recovery time from the append times.
//
// The rule: where Java loses nothing and keeps order, the agent must not lose or reorder; it
// must not have more duplicates than Java. A Java row that loses or reorders means the scenario is
// wrong and fails too.
//
//   go test -run 'TestClusterFaults/^b2_' -v ./reliability/   one scenario (names below)

// clusterRate is each client's pace in lines a second.
var clusterRate = size(10000, 3000)

// requestTimeout and deliveryTimeout are request.timeout.ms and delivery.timeout.ms of the
// scenarios that outlast one of them (b, d, g, i): the 5 s and 20 s. Not shorter in CI:
// a hung node stalls every partition whose ISR holds it (acks=all) until the controller fences
// it, about 9-12 s (broker.session.timeout.ms, and a controller election when the hung node was
// the active controller); a shorter delivery.timeout.ms would expire records everywhere.
var requestTimeout, deliveryTimeout = 5 * time.Second, 20 * time.Second

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// hold lets a fault (or the load around it) last d: a scenario's timing, not a wait for a
// condition.
func hold(d time.Duration) { time.Sleep(d) }

func TestClusterFaults(t *testing.T) {
	if os.Getenv("RELIABILITY_CLUSTER") == "off" {
		t.Skip("RELIABILITY_CLUSTER=off")
	}
	c := theCluster(t)
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *cluster)
	}{
		// First: every node is killed and restarts on its logs, which is quickest before the
		// other scenarios have filled them (after them, three nodes recovering together can
		// outlast the start deadline). The cluster stays on its new ports; the suite reads them
		// back (cluster.move).
		{"n_cluster_moves", clusterMoved},
		{"a_leader_kill", clusterLeaderKill},
		{"b1_leader_paused", clusterLeaderPaused},
		{"b2_leader_paused_past_delivery_timeout", clusterLeaderPausedLong},
		{"b3_leader_paused_while_another_partition_bumps", clusterLeaderPausedWhileBump},
		{"c_two_brokers_down", clusterTwoDown},
		{"d_partition_without_leader", clusterNoLeader},
		{"e_topic_recreated", clusterRecreated},
		{"f_election_and_reassignment", clusterReassign},
		{"g1_refused_record_one_partition", func(t *testing.T, c *cluster) { clusterRefused(t, c, false) }},
		{"g2_refused_record_busy", func(t *testing.T, c *cluster) { clusterRefused(t, c, true) }},
		{"h_first_bootstrap_broker_down", clusterBootstrapDown},
		{"i_transactions_data_leader_paused", clusterTxnLeaderPaused},
		{"j_exactly_once_state_leader_down", clusterStateLeaderDown},
		{"k_metadata_idle", clusterMetadataIdle},
		{"l_hung_leader_cpu", clusterHungLeaderCPU},
		{"m_slow_broker", clusterSlowBroker},
		{"o_acl_granted_late", clusterACLLate},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, c) })
	}
}

// ---------------------------------------------------------------------------------------------
// A scenario's two clients.

// pair is one scenario: the agent and the control, each on its own topic of the same assignment,
// fed the same lines.
type pair struct {
	t          *testing.T
	c          *cluster
	partitions int
	assignment [][]int32
	configs    map[string]string
	spec       clientSpec
	f          *feed
	kinds      []string
	topics     map[string]string
	clients    map[string]*clusterClient
	rows       map[string]*crow
	endedAt    time.Time // when the input ended (finish)
}

var clientKinds = []string{"agent", "Java"}

// newPair creates the two topics and the rows; start starts the clients.
func newPair(t *testing.T, c *cluster, scenario string, assignment [][]int32, configs map[string]string, spec clientSpec,
	line func(buf []byte, i int) []byte) *pair {
	t.Helper()
	if line == nil {
		line = func(buf []byte, i int) []byte { return keyedLine(buf, i, keyedLineLen) }
	}
	p := &pair{t: t, c: c, partitions: len(assignment), assignment: assignment, spec: spec, f: newFeed(line),
		kinds: clientKinds, topics: map[string]string{}, clients: map[string]*clusterClient{}, rows: map[string]*crow{},
		configs: map[string]string{"message.timestamp.type": "LogAppendTime"}}
	for k, v := range configs {
		p.configs[k] = v
	}
	for _, k := range p.kinds {
		p.rows[k] = reportCluster(t, scenario, k)
	}
	t.Cleanup(func() { p.f.end() })
	c.waitHealthy(t, 2*time.Minute)
	stamp := time.Now().UnixNano() % 1e6
	short, _, _ := strings.Cut(strings.TrimPrefix(t.Name(), "TestClusterFaults/"), "_")
	for _, k := range p.kinds {
		p.topics[k] = fmt.Sprintf("cl-%s-%s-%d", short, strings.ToLower(k), stamp)
		c.createTopic(t, p.topics[k], assignment, p.configs)
	}
	// Registered after the topics: runs before their deletion.
	t.Cleanup(func() { c.heal(t) })
	return p
}

// start starts both clients.
func (p *pair) start() {
	p.t.Helper()
	for _, k := range p.kinds {
		p.clients[k] = startClient(p.t, p.c, p.f, k, p.topics[k], p.spec)
	}
}

// warm waits until every topic holds records.
func (p *pair) warm() {
	p.t.Helper()
	for _, k := range p.kinds {
		w := p.c.access().watch(p.t, p.topics[k])
		w.waitAtLeast(1, time.Minute, p.clients[k].process())
	}
}

// expect is what a scenario accepts and checks.
type expect struct {
	exits []int // accepted exit statuses (default: 0)
	// agentExits, when set, are the agent's accepted exit statuses: 3 where it keeps a refused
	// line as a dead letter (stdin: none lost) and Java reports it failed (1).
	agentExits []int
	// mayFail: lines that may be missing if the client reported that many failed (records that
	// expire during a longer outage, by design of the scenario).
	mayFail func(cc *clusterClient, i int) bool
	// refused: lines that must not land and must be reported failed.
	refused func(i int) bool
	// excluded: lines not counted at all (deleted with their topic).
	excluded  func(cc *clusterClient, i int) bool
	committed bool // read at read_committed (transactions)
	// controlMayReorder, when set, says why the Java control may reorder in this scenario (a
	// behaviour of the Java client seen there, not a wrong scenario): its reordering is noted,
	// not failed, and the agent must keep order all the same.
	controlMayReorder string
	wait              time.Duration // how long the clients may take to finish once the input ended (default 3 min)
	// recovery returns the row's recovery column.
	recovery func(cc *clusterClient, kc *keyedCount, out clientOutcome) string
	// check is the scenario's own check of one client: it notes what it saw and returns false to
	// fail the row.
	check func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool
}

// clientResult is one client's figures before the verdict.
type clientResult struct {
	logText      string // the client's output
	out          clientOutcome
	kc           keyedCount
	lost         int64
	mayMissing   int64
	ownOK        bool
	refusedFound int64
}

// finish ends the input, waits for both clients, reads both topics back and decides the rows.
func (p *pair) finish(e expect) {
	t := p.t
	t.Helper()
	n := p.f.end()
	p.endedAt = time.Now()
	if e.wait == 0 {
		e.wait = 3 * time.Minute
	}
	if len(e.exits) == 0 {
		e.exits = []int{0}
	}
	deadline := time.Now().Add(e.wait)
	res := map[string]*clientResult{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	outs := map[string]clientOutcome{}
	for _, k := range p.kinds {
		cc := p.clients[k]
		if cc.path == "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := cc.finishStdin(time.Until(deadline))
				mu.Lock()
				outs[k] = o
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, k := range p.kinds {
		if cc := p.clients[k]; cc.path != "" {
			outs[k] = cc.finish(t, time.Until(deadline), n)
		}
	}
	// Java first: a check of the agent's row may compare with Java's figures.
	for _, k := range []string{"Java", "agent"} {
		cc, r := p.clients[k], p.rows[k]
		cr := &clientResult{out: outs[k], ownOK: true, logText: cc.process().log()}
		res[k] = cr
		cr.kc = readKeyed(t, p.c.access(), cc.topic, p.partitions, n, e.committed)
		kc := &cr.kc
		refusedN := int64(0)
		var reqMissing int64
		for i := range n {
			isRefused := e.refused != nil && e.refused(i)
			if isRefused {
				refusedN++
				if kc.firstTS[i] != 0 {
					cr.refusedFound++
				}
			}
		}
		for _, i := range kc.missing {
			switch {
			case e.excluded != nil && e.excluded(cc, i):
			case e.refused != nil && e.refused(i):
			case e.mayFail != nil && e.mayFail(cc, i):
				cr.mayMissing++
			default:
				reqMissing++
			}
		}
		if e.excluded != nil {
			kc.dup, kc.reordered, kc.misrouted = kc.among(func(i int) bool { return !e.excluded(cc, i) }, p.partitions)
		}
		reported := max(0, cr.out.failed-refusedN)
		silent := max(0, cr.mayMissing-reported)
		cr.lost = reqMissing + silent
		r.Sent, r.Delivered, r.Lost, r.Dup, r.Reordered = int64(n), kc.distinct, cr.lost, kc.dup, kc.reordered
		r.Exit = strconv.Itoa(cr.out.exit)
		if cr.out.exit == -9 {
			r.Exit = "killed"
		}
		if e.recovery != nil {
			r.Recovery = e.recovery(cc, kc, cr.out)
		}
		fail := func(format string, args ...any) { r.note(format, args...); cr.ownOK = false }
		if cr.out.stuck != "" {
			fail("%s", cr.out.stuck)
		}
		if len(cr.out.restarts) > 0 {
			r.note("restarted %d× after a failure, %v later (as configs/kafkatrail-agent.service: Restart=on-failure); first: %.200s",
				len(cr.out.restarts), restartSec, cr.out.restarts[0])
		}
		exits := e.exits
		if k == "agent" && e.agentExits != nil {
			exits = e.agentExits
		}
		if !slices.Contains(exits, cr.out.exit) {
			msg := cr.out.firstError
			if msg == "" {
				msg = firstLogLine(cc.process().log())
			}
			fail("exit %s (expected %s): %.160s", r.Exit, joinInts(exits), msg)
		}
		if cr.mayMissing > 0 {
			r.note("%s lines missing that the scenario lets fail (%s reported failed)", num(cr.mayMissing), num(reported))
		}
		if silent > 0 {
			fail("%s lines neither delivered nor reported failed", num(silent))
		}
		if reqMissing > 0 {
			fail("%s lines missing (first: %s)", num(reqMissing), firstMissing(kc.missing, func(i int) bool {
				return (e.excluded == nil || !e.excluded(cc, i)) && (e.refused == nil || !e.refused(i)) && (e.mayFail == nil || !e.mayFail(cc, i))
			}))
		}
		if cr.refusedFound > 0 {
			fail("%d lines that must be refused are in Kafka", cr.refusedFound)
		}
		if kc.unexpected > 0 || kc.misrouted > 0 {
			fail("%d records that are not this run's lines, %d in another partition than their key's", kc.unexpected, kc.misrouted)
		}
		if e.check != nil && !e.check(cc, kc, cr.out, r) {
			cr.ownOK = false
		}
	}
	// The rule, and the control's own soundness.
	ag, jv := res["agent"], res["Java"]
	ar, jr := p.rows["agent"], p.rows["Java"]
	javaOrderOK := jv.kc.reordered == 0 || e.controlMayReorder != ""
	jr.Pass = jv.ownOK && jv.lost == 0 && javaOrderOK
	switch {
	case jv.lost > 0 || !javaOrderOK:
		jr.note("the control lost %s and reordered %s: the scenario is wrong", num(jv.lost), num(jv.kc.reordered))
	case jv.kc.reordered > 0:
		jr.note("reordered %s: %s", num(jv.kc.reordered), e.controlMayReorder)
	}
	ar.Pass = ag.ownOK
	if jv.lost == 0 && ag.lost > 0 {
		ar.Pass = false
		ar.note("lost %s where Java lost none", num(ag.lost))
	}
	if (jv.kc.reordered == 0 || e.controlMayReorder != "") && ag.kc.reordered > 0 {
		ar.Pass = false
		ar.note("reordered %s where Java kept order (or where its reordering is its own)", num(ag.kc.reordered))
	}
	// Where Java gives lines up (reported failed after delivery.timeout.ms), the agent sends
	// them again until acknowledged: a line whose expired batch had been sent may have been
	// written too, so it may repeat. Such duplicates are bounded by the lines it sent again.
	resent := loggedCount(ag.logText, "lines_resent")
	switch extra := ag.kc.dup - jv.kc.dup; {
	case extra <= 0:
	case jv.out.failed > 0 && resent > 0 && extra <= resent:
		ar.note("%s duplicates (Java %s, which reported %s failed): lines sent again after they expired, of %s sent again",
			num(ag.kc.dup), num(jv.kc.dup), num(jv.out.failed), num(resent))
	default:
		ar.Pass = false
		ar.note("%s duplicates, Java %s (%s lines sent again)", num(ag.kc.dup), num(jv.kc.dup), num(max(resent, 0)))
	}
	for _, k := range p.kinds {
		r := p.rows[k]
		r.decided = true
		if !r.Pass {
			t.Errorf("%s: %s: %s\n%s log:\n%s", r.Scenario, k, r.Result, k, logTailOf(p.clients[k].process()))
		} else if r.Result == "" {
			r.Result = fmt.Sprintf("exit %s", r.Exit)
		}
	}
}

// finishStdin is finish for a stdin client, without the test's t (it runs on its own goroutine).
func (cc *clusterClient) finishStdin(timeout time.Duration) clientOutcome {
	var out clientOutcome
	select {
	case <-cc.proc.exited:
		out.exit = exitCode(cc.proc.err)
	case <-time.After(timeout):
		_ = cc.proc.cmd.Process.Kill()
		<-cc.proc.exited
		out.exit = -9
		out.stuck = fmt.Sprintf("still running %v after its input ended: killed", timeout.Round(time.Second))
	}
	log := cc.proc.log()
	if cc.kind == "agent" {
		if m := agentFailedRe.FindStringSubmatch(log); m != nil {
			out.failed, _ = strconv.ParseInt(m[1], 10, 64)
			out.firstError = m[3]
		}
		return out
	}
	out.java = parseJavaSummary(log)
	if out.java != nil {
		out.failed = out.java.Failed
		if len(out.java.FirstErrors) > 0 {
			out.firstError = out.java.FirstErrors[0]
		}
	}
	return out
}

func logTailOf(a *agentProc) string {
	if a == nil {
		return "(not started)"
	}
	return a.logTail()
}

func firstLogLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "msg=telemetry") {
			return l
		}
	}
	return ""
}

func firstMissing(missing []int, counted func(int) bool) string {
	var out []string
	for _, i := range missing {
		if counted(i) {
			out = append(out, strconv.Itoa(i))
			if len(out) == 3 {
				break
			}
		}
	}
	return strings.Join(out, ", ")
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, " or ")
}

// writtenIn reports whether line i was written to cc's input between a and b.
func writtenIn(cc *clusterClient, i int, a, b time.Time) bool {
	w := cc.in.writtenAt(i)
	return !w.IsZero() && !w.Before(a) && !w.After(b)
}

// partsOf is the list form of a partition set, for messages.
func partsOf(ps []int32) string {
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(int(p)))
	}
	return strings.Join(s, ",")
}

// sinceOr is t - from as a row's time, or "never" when ok is false.
func sinceOr(t time.Time, ok bool, from time.Time) string {
	if !ok {
		return "never"
	}
	return secs(max(0, t.Sub(from)))
}

// ---------------------------------------------------------------------------------------------
// a. Leader kill -9 and restart, three times.

func clusterLeaderKill(t *testing.T, c *cluster) {
	const kills = 3
	p := newPair(t, c, fmt.Sprintf("a. leader of partition 0 kill -9, restart ×%d (%d lines/s)", kills, clusterRate),
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=120000", "request.timeout.ms=30000"}}, nil)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	type killed struct {
		at    time.Time
		node  int
		parts map[string][]int32
	}
	var ks []killed
	for k := 1; k <= kills; k++ {
		n := c.leaderOf(t, p.topics["agent"], 0)
		kl := killed{node: n, parts: map[string][]int32{}}
		for _, kind := range p.kinds {
			kl.parts[kind] = c.ledBy(t, p.topics[kind], n)
		}
		c.kill(t, n)
		kl.at = time.Now()
		ks = append(ks, kl)
		t.Logf("kill %d: node %d (agent's partitions %v, Java's %v)", k, n, kl.parts["agent"], kl.parts["Java"])
		hold(size(8*time.Second, 4*time.Second))
		c.restart(t, n)
		c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
		hold(time.Second)
	}
	hold(2 * time.Second)
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			var ds []time.Duration
			for _, kl := range ks {
				first, ok := kc.firstAfter(kl.at, kl.parts[cc.kind])
				if !ok {
					return "never"
				}
				ds = append(ds, first.Sub(kl.at))
			}
			return recoveries(ds)
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("recovery: from each kill to the next record on the partitions the killed node led")
			return true
		},
	})
}

// ---------------------------------------------------------------------------------------------
// b. The leader of a busy partition SIGSTOPped past request.timeout.ms; and past
// delivery.timeout.ms, then 2,000 more lines.

func shortTimeoutProps() []string {
	return []string{"request.timeout.ms=" + ms(requestTimeout), "delivery.timeout.ms=" + ms(deliveryTimeout)}
}

// pauseLeader starts the pair at clusterRate and, once it flows, SIGSTOPs the node n that leads
// partition 0 of the agent's topic; parts are the partitions n leads in each client's topic.
func (p *pair) pauseLeader(t *testing.T, c *cluster) (n int, parts map[string][]int32, paused time.Time) {
	t.Helper()
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(time.Second)
	n = c.leaderOf(t, p.topics["agent"], 0)
	parts = map[string][]int32{}
	for _, k := range p.kinds {
		parts[k] = c.ledBy(t, p.topics[k], n)
	}
	c.pause(t, n)
	return n, parts, time.Now()
}

func clusterLeaderPaused(t *testing.T, c *cluster) {
	pauseFor := requestTimeout + 3*time.Second
	p := newPair(t, c, fmt.Sprintf("b. leader of partition 0 SIGSTOP %v (request.timeout.ms %v, delivery.timeout.ms %v), SIGCONT",
		pauseFor, requestTimeout, deliveryTimeout), rotatedAssignment(6, 0), nil, clientSpec{props: shortTimeoutProps()}, nil)
	n, parts, paused := p.pauseLeader(t, c)
	hold(pauseFor)
	c.cont(t, n)
	resumed := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(3 * time.Second)
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(resumed, parts[cc.kind])
			return sinceOr(first, ok, resumed)
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("node %d paused %v; partitions %s without a record for %s", n, pauseFor.Round(100*time.Millisecond),
				partsOf(parts[cc.kind]), secs(kc.longestGap(paused.Add(-time.Second), p.endedAt, parts[cc.kind])))
			return true
		},
	})
}

// hungLeaderRate is scenario l's pace: low, so that what the clients burn while the leader
// hangs is their waiting, not their work.
const hungLeaderRate = 200

// clusterHungLeaderCPU: the leader of every partition hangs (SIGSTOP) for request.timeout.ms
// while lines keep coming slowly. Nothing can be sent meanwhile: each client's CPU over the
// pause is what its waiting costs, near idle for Java, and so for the agent (a sender loop
// that spins on a node whose batches it cannot send would burn a core here).
func clusterHungLeaderCPU(t *testing.T, c *cluster) {
	p := newPair(t, c, fmt.Sprintf("l. CPU while the leader of every partition is SIGSTOPped for request.timeout.ms (%v), %d lines/s",
		requestTimeout, hungLeaderRate), [][]int32{{1, 2, 3}, {1, 3, 2}, {1, 2, 3}}, nil, clientSpec{props: shortTimeoutProps()}, nil)
	p.start()
	p.f.pace(hungLeaderRate)
	p.warm()
	hold(time.Second)
	n := c.leaderOf(t, p.topics["agent"], 0)
	parts := map[string][]int32{}
	for _, k := range p.kinds {
		parts[k] = c.ledBy(t, p.topics[k], n)
	}
	before := map[string]time.Duration{}
	for _, k := range p.kinds {
		before[k] = procCPU(t, p.clients[k].process().cmd.Process.Pid)
	}
	c.pause(t, n)
	paused := time.Now()
	hold(requestTimeout)
	used := map[string]time.Duration{}
	for _, k := range p.kinds {
		used[k] = procCPU(t, p.clients[k].process().cmd.Process.Pid) - before[k]
	}
	window := time.Since(paused)
	c.cont(t, n)
	resumed := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(2 * time.Second)
	share := func(k string) float64 { return used[k].Seconds() / window.Seconds() }
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(resumed, parts[cc.kind])
			return sinceOr(first, ok, resumed)
		},
		check: func(cc *clusterClient, _ *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("CPU while node %d hung (partitions %s): %v in %v, %.1f%% of a core",
				n, partsOf(parts[cc.kind]), used[cc.kind].Round(time.Millisecond), window.Round(100*time.Millisecond), 100*share(cc.kind))
			// Near idle as Java is: at most twice Java's share, or 10 % of a core, whichever is
			// more (the JVM's own share on an idle second is a few percent).
			if limit := max(2*share("Java"), 0.10); cc.kind == "agent" && share("agent") > limit {
				r.note("more than %.0f%% of a core while nothing can be sent", 100*limit)
				return false
			}
			return true
		},
	})
}

// procCPU is the CPU time (user and system) process pid has used so far, from /proc.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("CPU of %d: %v", pid, err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces: utime
	// and stime are the stat's 14th and 15th, in clock ticks (USER_HZ, 100 on Linux).
	rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(rest) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(rest[11], 10, 64)
	stime, err2 := strconv.ParseInt(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// expiringRequestTimeout and expiringDeliveryTimeout are the timeouts of the scenarios whose
// records must expire while a node hangs (b2, i): delivery.timeout.ms shorter than the ~9 s the
// controller takes to fence a hung node, so that batches expire whatever the failover does.
var expiringRequestTimeout, expiringDeliveryTimeout = 3 * time.Second, 8 * time.Second

func expiringProps() []string {
	return []string{"request.timeout.ms=" + ms(expiringRequestTimeout), "delivery.timeout.ms=" + ms(expiringDeliveryTimeout)}
}

func clusterLeaderPausedLong(t *testing.T, c *cluster) {
	deliveryTimeout := expiringDeliveryTimeout
	pauseFor := deliveryTimeout + 20*time.Second
	const after = 2000
	p := newPair(t, c, fmt.Sprintf("b. leader of partition 0 SIGSTOP %v (20 s past delivery.timeout.ms %v, request.timeout.ms %v), SIGCONT, then %s more lines",
		pauseFor, deliveryTimeout, expiringRequestTimeout, num(after)), rotatedAssignment(6, 0), nil, clientSpec{props: expiringProps(),
		shutdownWait: deliveryTimeout + 10*time.Second}, nil)
	n, _, paused := p.pauseLeader(t, c)
	hold(pauseFor)
	p.f.pace(0)
	c.cont(t, n)
	resumed := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	back := time.Now()
	from := p.f.lines()
	p.f.add(after)
	p.finish(expect{
		exits: []int{0, 1},
		// Lines written from delivery.timeout.ms before the pause to its end may expire, on every
		// partition (acks=all waits for the hung node until it is fenced); the client must report
		// them failed.
		mayFail: func(cc *clusterClient, i int) bool {
			return writtenIn(cc, i, paused.Add(-deliveryTimeout), resumed)
		},
		wait: deliveryTimeout + time.Minute,
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(back, nil)
			return sinceOr(first, ok, back)
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			got := kc.delivered(from, after)
			r.note("node %d paused; %s of the %s lines after it was back delivered", n, num(int64(got)), num(after))
			if out.failed > 0 {
				r.note("%s reported failed: %.120s", num(out.failed), out.firstError)
			}
			return got == after
		},
	})
}

// clusterLeaderPausedWhileBump is the duplicate case: the busiest leader SIGSTOPped
// for 15 s (past request.timeout.ms, long enough for the controller to move its partitions) on
// a topic whose max.message.bytes is below batch.size, so that the batches held up during the
// pause are split when they go again; and while it is paused, one line too large for the topic
// on a partition led by another node, whose refusal leaves a gap there that only an epoch bump
// repairs. The paused node may have written requests it never answered: their retries must
// keep their producer id, epoch and sequences whatever the other partition's bump does, or the
// broker writes them twice.
func clusterLeaderPausedWhileBump(t *testing.T, c *cluster) {
	const longLen = 8000
	pauseFor, times := 15*time.Second, size(3, 1)
	var longAt sync.Map // line numbers of the too-large lines
	line := func(buf []byte, i int) []byte {
		if _, ok := longAt.Load(i); ok {
			return keyedLine(buf, i, longLen)
		}
		return keyedLine(buf, i, keyedLineLen)
	}
	const after = 2000
	p := newPair(t, c, fmt.Sprintf("b. leader of partition 0 SIGSTOP %v ×%d at %d lines/s, max.message.bytes=6000 below batch.size "+
		"(batches split), and a line too large for the topic on a partition led elsewhere during each pause (an epoch bump there); "+
		"then %s more lines once every earlier one was delivered or expired",
		pauseFor, times, clusterRate, num(after)), rotatedAssignment(6, 0), map[string]string{"max.message.bytes": "6000"},
		clientSpec{props: shortTimeoutProps(), shutdownWait: deliveryTimeout + 20*time.Second}, line)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(time.Second)
	type window struct{ from, to time.Time }
	var pauses []window
	var nodes []int
	for range times {
		n := c.leaderOf(t, p.topics["agent"], 0)
		nodes = append(nodes, n)
		led := map[int32]bool{}
		for _, part := range c.ledBy(t, p.topics["agent"], n) {
			led[part] = true
		}
		c.pause(t, n)
		paused := time.Now()
		hold(2 * time.Second)
		// The too-large line goes to a partition the paused node does not lead.
		p.f.pace(0)
		for led[partitionOf(p.f.lines(), 6)] {
			p.f.add(1)
		}
		longAt.Store(p.f.lines(), true)
		p.f.add(1)
		p.f.pace(clusterRate)
		hold(pauseFor - 2*time.Second)
		c.cont(t, n)
		pauses = append(pauses, window{paused, time.Now()})
		c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
		hold(5 * time.Second)
	}
	// The windows below let nearly every line fail. The writer stops, and once every line it
	// wrote has been delivered or has expired (delivery.timeout.ms after the last; the last
	// window closes before that), the lines written then must all arrive.
	p.f.pace(0)
	hold(deliveryTimeout + time.Second)
	from := p.f.lines()
	p.f.add(after)
	refused := func(i int) bool { _, ok := longAt.Load(i); return ok }
	p.finish(expect{
		// Java can put lines of a partition out of order here: it splits a batch the broker
		// refused as too large and then gets OUT_OF_ORDER_SEQUENCE_NUMBER for the batch behind
		// it, on the partition that bumped its epoch.
		controlMayReorder: "the Java client's split of a batch refused as too large, retried after OUT_OF_ORDER_SEQUENCE_NUMBER, beside an epoch bump (its own behaviour; the agent keeps order)",
		exits:             []int{1},
		// The agent keeps the too-large lines as dead letters (3), and loses the stdin lines
		// that expired, as Java does (1).
		agentExits: []int{1, 3},
		refused:    refused,
		// A line written from delivery.timeout.ms before a pause to delivery.timeout.ms after it
		// may expire, if the client reports it failed: after SIGCONT the lines written during the
		// pause go first, their batches split and resent at a fraction of the rate, so a line
		// written just after the pause can wait behind them past its delivery timeout.
		mayFail: func(cc *clusterClient, i int) bool {
			for _, w := range pauses {
				if writtenIn(cc, i, w.from.Add(-deliveryTimeout), w.to.Add(deliveryTimeout)) {
					return true
				}
			}
			return false
		},
		wait: deliveryTimeout + time.Minute,
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			var worst time.Duration
			for _, w := range pauses {
				if first, ok := kc.firstAfter(w.to, nil); ok {
					worst = max(worst, first.Sub(w.to))
				}
			}
			return "max " + secs(worst) + " to the next record after SIGCONT"
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			named := strings.Contains(out.firstError, "MESSAGE_TOO_LARGE") || strings.Contains(out.firstError, "RecordTooLarge")
			got := kc.delivered(from, after)
			r.note("nodes paused %v; %s of the %s lines after the last window delivered; %s reported failed: %.120s",
				nodes, num(int64(got)), num(after), num(out.failed), out.firstError)
			if cc.kind == "agent" {
				// The agent keeps the too-large lines as dead letters; its expired lines are
				// reported failed, as Java's are.
				kept := deadLettersNamed(cc.state, "MESSAGE_TOO_LARGE")
				r.note("%d dead-lettered (MESSAGE_TOO_LARGE)", kept)
				return kept == times && got == after
			}
			if !named && out.failed > 0 && !strings.Contains(out.firstError, "expir") && !strings.Contains(out.firstError, "Timeout") {
				r.note("the first failure names neither the too-large line nor an expiry")
			}
			return out.failed >= int64(times) && got == after
		},
	})
}

// ---------------------------------------------------------------------------------------------
// c. Two of three brokers down for 20 s, back within delivery.timeout.ms.

func clusterTwoDown(t *testing.T, c *cluster) {
	down := 20 * time.Second
	p := newPair(t, c, fmt.Sprintf("c. two of three brokers kill -9 for %v, restarted (delivery.timeout.ms 120 s)", down),
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=120000", "request.timeout.ms=30000"}}, nil)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(time.Second)
	c.kill(t, 2)
	c.kill(t, 3)
	killed := time.Now()
	hold(down)
	c.restart(t, 2, 3)
	back := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(3 * time.Second)
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(back, nil)
			all, aok := kc.lastIn(func(i int) bool { w := cc.in.writtenAt(i); return !w.IsZero() && w.Before(back) })
			return fmt.Sprintf("first %s, all in %s", sinceOr(first, ok, back), sinceOr(all, aok, back))
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("nodes 2, 3 down %s (kill to restarted); %s", secs(back.Sub(killed)), errorsSeen(cc.proc.log()))
			return true
		},
	})
}

// errorsSeen counts the broker error names in a client's log.
func errorsSeen(log string) string {
	var s []string
	for _, e := range []string{"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER",
		"TimeoutException", "NOT_CONTROLLER", "LEADER_NOT_AVAILABLE"} {
		if n := strings.Count(log, e); n > 0 {
			s = append(s, fmt.Sprintf("%s ×%d", e, n))
		}
	}
	if len(s) == 0 {
		return "no broker error named in its log"
	}
	return "its log names " + strings.Join(s, ", ")
}

// ---------------------------------------------------------------------------------------------
// d. A partition with no leader for longer than delivery.timeout.ms, then back.

func clusterNoLeader(t *testing.T, c *cluster) {
	down := deliveryTimeout + 5*time.Second
	// Partition 0 has one replica, on node 3: stopping node 3 leaves it without a leader while the
	// other partitions (RF 3, led by nodes 1 and 2) go on. With one replica, the topic's
	// min.insync.replicas is 1.
	// A topic's partitions are created with one replication factor: partition 0 is reassigned
	// to node 3 alone after the creation.
	assignment := [][]int32{{3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {1, 2, 3}, {2, 3, 1}, {1, 2, 3}}
	p := newPair(t, c, fmt.Sprintf("d. partition 0 (one replica) without a leader for %v (delivery.timeout.ms %v), then back", down, deliveryTimeout),
		assignment, map[string]string{"min.insync.replicas": "1"}, clientSpec{props: shortTimeoutProps(),
			shutdownWait: deliveryTimeout + 10*time.Second}, nil)
	single := slices.Clone(assignment)
	single[0] = []int32{3}
	adm := c.admin(t)
	p.alter(adm, func(q int32) bool { return q == 0 }, single)
	p.waitReassigned(adm, single)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(time.Second)
	c.stopNode(t, 3)
	stopped := time.Now()
	hold(down)
	c.restart(t, 3)
	back := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(size(8*time.Second, 5*time.Second))
	p.finish(expect{
		exits: []int{0, 1},
		mayFail: func(cc *clusterClient, i int) bool {
			return partitionOf(i, 6) == 0 && writtenIn(cc, i, stopped.Add(-deliveryTimeout), back)
		},
		wait: deliveryTimeout + time.Minute,
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(back, []int32{0})
			return sinceOr(first, ok, back)
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			got, want := 0, 0
			for i := range kc.firstTS {
				if partitionOf(i, 6) == 0 && cc.in.writtenAt(i).After(back) {
					want++
					if kc.firstTS[i] != 0 {
						got++
					}
				}
			}
			r.note("partition 0 after it was back: %s of %s lines delivered", num(int64(got)), num(int64(want)))
			if out.failed > 0 {
				r.note("%s reported failed: %.120s", num(out.failed), out.firstError)
			}
			return got == want && want > 0
		},
	})
}

// ---------------------------------------------------------------------------------------------
// e. The topic deleted and created again (same name) with its leaders on other brokers, while
// producing.

func clusterRecreated(t *testing.T, c *cluster) {
	p := newPair(t, c, "e. topic deleted and created again (same name, every leader on another broker) while producing",
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=30000", "request.timeout.ms=10000"}}, nil)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(2 * time.Second)
	cl := c.access().client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	again := rotatedAssignment(6, 1)
	deleted := time.Now()
	for _, k := range p.kinds {
		p.recreate(adm, cl, p.topics[k], again)
	}
	for _, k := range p.kinds {
		c.waitLeaders(t, p.topics[k], again)
	}
	created := time.Now()
	t.Logf("deleted and created again in %v", created.Sub(deleted))
	hold(size(10*time.Second, 6*time.Second))
	p.finish(expect{
		// Lines written before the topic existed again went to the deleted topic or waited for
		// the new one: not counted (lost, duplicated or reordered), and they may fail.
		exits:    []int{0, 1},
		excluded: func(cc *clusterClient, i int) bool { return cc.in.writtenAt(i).Before(created) },
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(created, nil)
			return sinceOr(first, ok, created)
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			from, _ := cc.in.linesWrittenIn(created, time.Now())
			r.note("the %s lines written before the new topic was ready are not counted; topic gone for %s", num(int64(from)),
				secs(created.Sub(deleted)))
			return true
		},
	})
}

// recreate deletes topic and creates it again with assignment at once. The cluster creates
// topics a client asks for (auto.create.topics.enable) and the Java producer always asks, so a
// client may create it first, with the broker's defaults: then it is deleted again, until the
// suite's creation wins (it is one round trip after the deletion, a client's two).
func (p *pair) recreate(adm *kadm.Client, cl *kgo.Client, topic string, assignment [][]int32) {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rs, err := adm.DeleteTopics(ctx, topic)
		cancel()
		if err == nil {
			err = rs.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			p.t.Fatalf("delete %s: %v", topic, err)
		}
		err = createTopicAssigned(cl, topic, assignment, p.configs)
		if err == nil {
			if attempt > 1 {
				p.t.Logf("%s: created again at attempt %d (a client's auto-creation came first before)", topic, attempt)
			}
			return
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || attempt == 50 {
			p.t.Fatalf("create %s again (attempt %d): %v", topic, attempt, err)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// f. Preferred-leader election and a partition reassignment under load.

func clusterReassign(t *testing.T, c *cluster) {
	p := newPair(t, c, "f. replicas reordered + preferred-leader election, then partitions 0-1 reassigned to 2 replicas and back to 3, under load",
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=120000", "request.timeout.ms=30000"}}, nil)
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(2 * time.Second)
	adm := c.admin(t)
	began := time.Now()
	// 1. Every partition's replicas rotated by one: the preferred leader is another node; the
	// election moves every leader.
	rotated := rotatedAssignment(6, 1)
	p.alter(adm, func(int32) bool { return true }, rotated)
	p.elect(adm)
	for _, k := range p.kinds {
		c.waitLeaders(t, p.topics[k], rotated)
	}
	elected := time.Now()
	hold(2 * time.Second)
	// 2. Partitions 0 and 1 lose their leader's replica (RF 2): the leader moves again.
	shrunk := slices.Clone(rotated)
	for q := range 2 {
		shrunk[q] = rotated[q][1:]
	}
	p.alter(adm, func(q int32) bool { return q < 2 }, shrunk)
	p.waitReassigned(adm, shrunk)
	hold(2 * time.Second)
	// 3. And get it back as their last replica (a real copy of the partition).
	grown := slices.Clone(rotated)
	for q := range 2 {
		grown[q] = append(slices.Clone(rotated[q][1:]), rotated[q][0])
	}
	p.alter(adm, func(q int32) bool { return q < 2 }, grown)
	p.waitReassigned(adm, grown)
	done := time.Now()
	t.Logf("elected in %v, reassigned by %v", elected.Sub(began), done.Sub(began))
	hold(2 * time.Second)
	all := []int32{0, 1, 2, 3, 4, 5}
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			return "longest gap " + secs(kc.longestGapEach(began, done, all))
		},
		check: func(cc *clusterClient, kc *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("recovery: the longest time a partition went without a record while leaders moved (%s)", secs(done.Sub(began)))
			return true
		},
	})
}

// alter reassigns the partitions of both topics that sel selects to assignment[p].
func (p *pair) alter(adm *kadm.Client, sel func(int32) bool, assignment [][]int32) {
	p.t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for _, k := range p.kinds {
		for q, reps := range assignment {
			if sel(int32(q)) {
				req.Assign(p.topics[k], int32(q), reps)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		p.t.Fatalf("alter partition assignments: %v", err)
	}
}

// elect runs a preferred-leader election on every partition of both topics.
func (p *pair) elect(adm *kadm.Client) {
	p.t.Helper()
	s := kadm.TopicsSet{}
	for _, k := range p.kinds {
		for q := range p.partitions {
			s.Add(p.topics[k], int32(q))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, s)
	if err != nil {
		p.t.Fatalf("elect leaders: %v", err)
	}
	for _, ps := range rs {
		for _, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				p.t.Fatalf("elect %s/%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
			}
		}
	}
}

// waitReassigned waits until no reassignment is in progress on either topic and every partition
// has the replicas of assignment, all in sync.
func (p *pair) waitReassigned(adm *kadm.Client, assignment [][]int32) {
	p.t.Helper()
	var why string
	waitFor(p.t, 2*time.Minute, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s := kadm.TopicsSet{}
		for _, k := range p.kinds {
			for q := range p.partitions {
				s.Add(p.topics[k], int32(q))
			}
		}
		rs, err := adm.ListPartitionReassignments(ctx, s)
		if err != nil {
			why = err.Error()
			return false
		}
		for _, ps := range rs {
			if len(ps) > 0 {
				why = fmt.Sprintf("%d reassignments in progress", len(ps))
				return false
			}
		}
		for _, k := range p.kinds {
			st, err := p.c.describe(adm, p.topics[k])
			if err != nil {
				why = err.Error()
				return false
			}
			for q, reps := range assignment {
				s := st[int32(q)]
				if !sameSet(s.replicas, reps) || len(s.isr) != len(reps) || s.leader < 0 {
					why = fmt.Sprintf("%s/%d: replicas %v ISR %v leader %d, want %v", p.topics[k], q, s.replicas, s.isr, s.leader, reps)
					return false
				}
			}
		}
		return true
	}, func() string { return "reassignment: " + why })
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// longestGapEach is the longest time one of parts went without a new record between from and to.
func (kc *keyedCount) longestGapEach(from, to time.Time, parts []int32) time.Duration {
	var worst time.Duration
	for _, q := range parts {
		worst = max(worst, kc.longestGap(from, to, []int32{q}))
	}
	return worst
}

// ---------------------------------------------------------------------------------------------
// g. A record the broker refuses (MESSAGE_TOO_LARGE) among short ones.

func clusterRefused(t *testing.T, c *cluster, busy bool) {
	const before, longLen, afterN = 500, 8000, 2000
	var longAt atomic.Int64
	longAt.Store(before)
	line := func(buf []byte, i int) []byte {
		if int64(i) == longAt.Load() {
			return keyedLine(buf, i, longLen)
		}
		return keyedLine(buf, i, keyedLineLen)
	}
	assignment, label := [][]int32{{1, 2, 3}}, fmt.Sprintf("g. max.message.bytes=6000, batch.size=4096: %d short lines, one of %s bytes, %s short lines; one partition",
		before, num(longLen), num(afterN))
	if busy {
		longAt.Store(-1) // chosen under load
		assignment = rotatedAssignment(6, 0)
		label = fmt.Sprintf("g. max.message.bytes=6000, batch.size=4096: one line of %s bytes among short ones at %d lines/s; 6 partitions",
			num(longLen), clusterRate)
	}
	props := append(shortTimeoutProps(), "batch.size=4096")
	p := newPair(t, c, label, assignment, map[string]string{"max.message.bytes": "6000"}, clientSpec{props: props,
		shutdownWait: deliveryTimeout + 20*time.Second}, line)
	p.start()
	started := time.Now()
	if busy {
		p.f.pace(clusterRate)
		p.warm()
		hold(2 * time.Second)
		p.f.pace(0)
		longAt.Store(int64(p.f.lines()))
		p.f.add(1)
		p.f.pace(clusterRate)
		hold(3 * time.Second)
	} else {
		p.f.add(before + 1 + afterN)
	}
	p.finish(expect{
		exits:      []int{1},
		agentExits: []int{3},
		refused:    func(i int) bool { return int64(i) == longAt.Load() },
		wait:       deliveryTimeout + time.Minute,
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			all, ok := kc.lastIn(func(i int) bool { return int64(i) != longAt.Load() })
			return fmt.Sprintf("exit %s, all in %s", secs(cc.proc.done.Sub(cc.start)), sinceOr(all, ok, started))
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			if cc.kind == "agent" {
				kept := deadLettersNamed(cc.state, "MESSAGE_TOO_LARGE")
				r.note("the refused line dead-lettered %d× (MESSAGE_TOO_LARGE), exit 3: none lost", kept)
				return kept == 1
			}
			named := strings.Contains(out.firstError, "MESSAGE_TOO_LARGE") || strings.Contains(out.firstError, "RecordTooLarge")
			r.note("%s reported failed: %.140s", num(out.failed), out.firstError)
			if !named || out.failed < 1 {
				r.note("the refused line is not reported as too large")
				return false
			}
			return true
		},
	})
}

// ---------------------------------------------------------------------------------------------
// h. A bootstrap list whose first broker is down.

func clusterBootstrapDown(t *testing.T, c *cluster) {
	p := newPair(t, c, "h. bootstrap list node 1, 2, 3 with node 1 stopped; node 1 restarted under load",
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=120000", "request.timeout.ms=30000"},
			bootstrap: c.bootstrap}, nil)
	if !strings.HasPrefix(c.bootstrap, c.nodes[1]+",") {
		t.Fatalf("bootstrap %s does not start with node 1 (%s)", c.bootstrap, c.nodes[1])
	}
	c.stopNode(t, 1)
	p.start()
	p.f.pace(clusterRate)
	hold(size(10*time.Second, 5*time.Second))
	c.restart(t, 1)
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(2 * time.Second)
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(cc.start, nil)
			return "first record " + sinceOr(first, ok, cc.start) + " after start"
		},
	})
}

// ---------------------------------------------------------------------------------------------
// i and j. Transactions (the agent with --exactly-once following a file, the control
// transactional on stdin, the same commit interval), read at read_committed.

const clusterCommitMs, clusterCommitLines = 500, 10000

// txnIDOn returns a transactional id starting with prefix whose coordinator is node n.
func txnIDOn(t *testing.T, c *cluster, prefix string, n int) string {
	t.Helper()
	for k := range 200 {
		id := fmt.Sprintf("%s-%d", prefix, k)
		if c.txnCoordinator(t, id) == n {
			return id
		}
	}
	t.Fatalf("no transactional id %s-K coordinated by node %d", prefix, n)
	return ""
}

// commitTimes returns when cc committed a transaction: the control prints "commit MS LINES"; the
// exactly-once agent writes its checkpoint after every commit (polled).
func commitTimes(cc *clusterClient) []time.Time {
	if cc.kind == "agent" {
		return cc.commits()
	}
	var out []time.Time
	for _, l := range strings.Split(cc.proc.log(), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "commit" {
			if msec, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out = append(out, time.UnixMilli(msec))
			}
		}
	}
	return out
}

func firstCommitAfter(cc *clusterClient, at time.Time) (time.Time, bool) {
	for _, c := range commitTimes(cc) {
		if c.After(at) {
			return c, true
		}
	}
	return time.Time{}, false
}

func eosSpec(props []string) clientSpec {
	return clientSpec{props: props, exactlyOnce: true, commitMs: clusterCommitMs, commitLines: clusterCommitLines}
}

func clusterTxnLeaderPaused(t *testing.T, c *cluster) {
	deliveryTimeout := expiringDeliveryTimeout
	pauseFor := deliveryTimeout + 10*time.Second
	spec := eosSpec(expiringProps())
	p := newPair(t, c, fmt.Sprintf("i. transactions (commit every %d ms): coordinator node 1, data leader node 2 SIGSTOP %v (delivery.timeout.ms %v), SIGCONT; read_committed",
		clusterCommitMs, pauseFor, deliveryTimeout), rotatedAssignment(6, 0), nil, spec, nil)
	p.coordinatedOn(t, c, 1, []int32{1, 3, 2})
	p.start()
	p.f.pace(clusterRate)
	p.warm()
	hold(2 * time.Second)
	c.pause(t, 2)
	paused := time.Now()
	hold(pauseFor)
	c.cont(t, 2)
	resumed := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(3 * time.Second)
	p.finish(expect{
		committed: true,
		recovery: func(cc *clusterClient, _ *keyedCount, _ clientOutcome) string {
			at, ok := firstCommitAfter(cc, resumed)
			return "next commit " + sinceOr(at, ok, resumed)
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			var during int
			for _, ct := range commitTimes(cc) {
				if ct.After(paused) && ct.Before(resumed) {
					during++
				}
			}
			r.note("%d commits during the pause, %d in all", during, len(commitTimes(cc)))
			if out.java != nil && out.java.Aborts > 0 {
				r.note("%d transactions aborted and sent again", out.java.Aborts)
			}
			if cc.kind == "agent" {
				// The agent aborts and resumes from the last commit in the same process, as the
				// Java control aborts and sends again: no supervisor's restart.
				if n := strings.Count(cc.process().log(), "resuming from the last commit in this process"); n > 0 {
					r.note("%d transactions aborted and resumed in the same process", n)
				}
				if len(out.restarts) > 0 {
					r.note("the agent exited %d× instead of resuming in the same process; first: %.160s", len(out.restarts), out.restarts[0])
					return false
				}
			}
			return true
		},
	})
}

// coordinatedOn gives both clients transactional ids whose coordinator is node, and the agent a
// compacted state topic of one partition on replicas (its leader first).
func (p *pair) coordinatedOn(t *testing.T, c *cluster, node int, replicas []int32) {
	t.Helper()
	p.spec.agentTxnID = txnIDOn(t, c, p.topics["agent"]+"-txn", node)
	p.spec.javaTxnID = txnIDOn(t, c, p.topics["Java"]+"-txn", node)
	p.spec.stateTopic = p.topics["agent"] + "-state"
	c.createTopic(t, p.spec.stateTopic, [][]int32{replicas}, map[string]string{"cleanup.policy": "compact"})
}

func clusterStateLeaderDown(t *testing.T, c *cluster) {
	down := size(12*time.Second, 8*time.Second)
	spec := eosSpec([]string{"delivery.timeout.ms=120000", "request.timeout.ms=30000"})
	p := newPair(t, c, fmt.Sprintf("j. exactly-once start while node 3 is down (kill -9, restarted after %v): the agent's state topic leader, both clients' transaction coordinator; read_committed", down),
		rotatedAssignment(6, 0), nil, spec, nil)
	p.coordinatedOn(t, c, 3, []int32{3, 1, 2})
	c.kill(t, 3)
	killed := time.Now()
	p.start()
	p.f.pace(clusterRate)
	hold(down)
	c.restart(t, 3)
	back := time.Now()
	c.waitHealthy(t, 2*time.Minute, p.topics["agent"], p.topics["Java"])
	hold(3 * time.Second)
	p.finish(expect{
		committed: true,
		recovery: func(cc *clusterClient, _ *keyedCount, _ clientOutcome) string {
			at, ok := firstCommitAfter(cc, cc.start)
			return "first commit " + sinceOr(at, ok, cc.start) + " after start"
		},
		check: func(cc *clusterClient, _ *keyedCount, _ clientOutcome, r *crow) bool {
			r.note("node 3 down %s", secs(back.Sub(killed)))
			return true
		},
	})
}

// ---------------------------------------------------------------------------------------------
// k. Past metadata.max.idle.ms: bursts of lines with idle gaps longer than it.

func clusterMetadataIdle(t *testing.T, c *cluster) {
	const idleMs = 5000
	gap, burst := 7*time.Second, size(5000, 1000)
	total := size(2*time.Minute, 35*time.Second)
	p := newPair(t, c, fmt.Sprintf("k. metadata.max.idle.ms=%d: a burst of %s lines every %v for %v", idleMs, num(int64(burst)), gap, total),
		rotatedAssignment(6, 0), nil, clientSpec{props: []string{"delivery.timeout.ms=120000", "request.timeout.ms=30000",
			fmt.Sprintf("metadata.max.idle.ms=%d", idleMs)}}, nil)
	p.start()
	type burstAt struct {
		at       time.Time
		from, to int
	}
	var bursts []burstAt
	began := time.Now()
	for time.Since(began) < total {
		from := p.f.lines()
		p.f.add(burst)
		bursts = append(bursts, burstAt{at: time.Now(), from: from, to: from + burst})
		hold(gap)
	}
	worst := map[string]time.Duration{}
	p.finish(expect{
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			var firsts, alls []time.Duration
			for _, b := range bursts {
				first, ok := kc.firstAfter(b.at, nil)
				all, aok := kc.lastIn(func(i int) bool { return i >= b.from && i < b.to })
				if !ok || !aok {
					worst[cc.kind] = -1
					return "a burst never arrived"
				}
				if b.from == 0 {
					continue // the first burst waits for the client's start
				}
				firsts, alls = append(firsts, first.Sub(b.at)), append(alls, all.Sub(b.at))
			}
			worst[cc.kind] = slices.Max(alls)
			return fmt.Sprintf("burst's first record: max %s; whole burst: max %s (the first burst, at the start, not counted)",
				secs(slices.Max(firsts)), secs(slices.Max(alls)))
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			if out.java != nil {
				r.note("send() max %.1f ms after the first call (%.0f ms with it), p99 ≤ %.2f ms, %d calls over 500 ms",
					out.java.SendMaxLate, out.java.SendMaxMs, out.java.SendP99Ms, out.java.SlowSends)
			}
			if cc.kind == "agent" {
				if j, ok := worst["Java"]; ok && j >= 0 && worst["agent"] >= 0 && worst["agent"] > j+time.Second {
					r.note("a burst took %s to land, Java's at most %s: a stall", secs(worst["agent"]), secs(j))
					return false
				}
			}
			return true
		},
	})
}
