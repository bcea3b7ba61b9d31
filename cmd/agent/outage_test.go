package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/freeport"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// privateBroker is a broker of this test's own (the shared one must stay up for the other
// packages' tests), managed through scripts/kafka/broker.sh.
type privateBroker struct {
	t     *testing.T
	env   []string
	port  int
	state string
}

func startPrivateBroker(t *testing.T) *privateBroker {
	t.Helper()
	kafkatest.Bootstrap(t) // the environment make test sets up (jars fetched, Java present)
	// Below the kernel's ephemeral range (32768-60999 by default): the broker is stopped and
	// resumed on the same ports, and a port that an outgoing connection of any test took in
	// between (its local end, or its TIME_WAIT) would refuse the resumed broker's bind.
	port, err := freeport.Base(freeport.Fixed+os.Getpid()%400*10, freeport.FixedEnd, 8)
	if err != nil {
		t.Fatal(err)
	}
	b := &privateBroker{t: t, port: port, state: filepath.Join(os.TempDir(), fmt.Sprintf("kafkatrail-outage-%d", port))}
	b.env = append(os.Environ(), fmt.Sprintf("KAFKA_PORT=%d", port), "KAFKATRAIL_STATE="+b.state)
	b.run("start")
	t.Cleanup(func() {
		b.run("stop")
		os.RemoveAll(b.state)
		os.Remove(b.state + ".lock")
	})
	return b
}

func (b *privateBroker) bootstrap() string { return fmt.Sprintf("127.0.0.1:%d", b.port) }

func (b *privateBroker) run(verb string) {
	b.t.Helper()
	cmd := exec.Command("../../scripts/kafka/broker.sh", verb)
	cmd.Env = b.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.t.Fatalf("broker.sh %s: %v\n%s", verb, err, out)
	}
}

// TestTailBrokerDown30sLosesNothingAndBoundsMemory stops the broker for 30 s while the
// application keeps logging: reading pauses when the producer's buffer is full, resident memory
// stays bounded, and once the broker is back every line arrives.
func TestTailBrokerDown30sLosesNothingAndBoundsMemory(t *testing.T) {
	b := startPrivateBroker(t)
	dir := t.TempDir()
	// A build without -race: its memory is what users get.
	bin := filepath.Join(dir, "agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "app.log")
	topic := "outage"
	lw := testkit.NewLineFile(t, path, lineLen)
	lw.Write(20000)
	const bufferMemory = 8 << 20
	args := append(tailArgs(b.bootstrap(), topic, path, filepath.Join(dir, "state")),
		"-X", fmt.Sprintf("buffer.memory=%d", bufferMemory),
		// Far shorter than the outage: a line that cannot be buffered in time is offered again,
		// not failed.
		"-X", "max.block.ms=2000")
	saved := agentBin
	agentBin = bin
	a := startAgent(t, nil, args...)
	agentBin = saved
	waitForRecords(t, b.bootstrap(), topic, lw.Next, time.Minute, a)

	b.run("stop")
	down := time.Now()
	var peak int64
	for time.Since(down) < 30*time.Second {
		lw.Write(2000) // about 140 KB: 4.2 MB per second, far more than the buffer holds
		if r := a.rss(); r > peak {
			peak = r
		}
		time.Sleep(30 * time.Millisecond) // the application's pace, not a wait for the agent
	}
	written := lw.Next
	b.run("resume")
	back := time.Now()
	waitForRecords(t, b.bootstrap(), topic, written, 3*time.Minute, a)
	recovered := time.Since(back)
	a.stop(time.Minute)
	checkOutageLogged(t, a.log(), b.bootstrap(), back.Sub(down))
	lost, dup := countLines(t, b.bootstrap(), topic, written)
	t.Logf("broker down 30 s: %d lines written in all, %d lost, %d duplicated; peak RSS %.1f MiB (buffer.memory %d MiB); all delivered %v after the broker returned",
		written, lost, dup, float64(peak)/(1<<20), bufferMemory>>20, recovered.Round(100*time.Millisecond))
	if lost != 0 {
		t.Fatalf("%d lines lost", lost)
	}
	// buffer.memory plus a constant: the runtime, read buffers and the acknowledgement trackers.
	if limit := int64(bufferMemory + 48<<20); peak > limit {
		t.Fatalf("peak RSS %d MiB over buffer.memory + 48 MiB", peak>>20)
	}
	if strings.Contains(a.log(), "level=ERROR") {
		t.Logf("agent logged errors during the outage:\n%s", a.log())
	}
}

// TestTailOutageLongerThanDeliveryTimeoutLosesNothing stops the broker for longer than
// delivery.timeout.ms while the application keeps logging: the records that expire are sent
// again by the agent itself, so once the broker is back every line arrives, the agent never
// stopped or exited, and no restart was needed. Duplicates can only be lines whose expired
// batch had been sent (its first attempt may have been written), so there are no more of them
// than lines sent again.
func TestTailOutageLongerThanDeliveryTimeoutLosesNothing(t *testing.T) {
	b := startPrivateBroker(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	topic := "outage-expiry"
	lw := testkit.NewLineFile(t, path, lineLen)
	lw.Write(5000)
	args := append(tailArgs(b.bootstrap(), topic, path, filepath.Join(dir, "state")),
		"-X", "delivery.timeout.ms=6000", "-X", "request.timeout.ms=2000", "-X", "linger.ms=5",
		"-X", "max.block.ms=2000")
	a := startAgent(t, nil, args...)
	waitForRecords(t, b.bootstrap(), topic, lw.Next, time.Minute, a)

	b.run("stop")
	down := time.Now()
	for time.Since(down) < 20*time.Second { // more than three delivery timeouts
		lw.Write(200)
		time.Sleep(50 * time.Millisecond) // the application's pace, not a wait for the agent
	}
	written := lw.Next
	b.run("resume")
	waitForRecords(t, b.bootstrap(), topic, written, 3*time.Minute, a)
	select {
	case <-a.exited:
		t.Fatalf("the agent exited during the outage: %v; log:\n%s", a.err, a.log())
	default:
	}
	a.stop(time.Minute)
	lost, dup := countLines(t, b.bootstrap(), topic, written)
	m := regexp.MustCompile(`lines_resent=(\d+)`).FindStringSubmatch(readFile(a.logf))
	if m == nil {
		t.Fatalf("no lines_resent in the agent's log:\n%s", a.log())
	}
	resent, _ := strconv.Atoi(m[1])
	t.Logf("broker down 20 s, delivery.timeout.ms 6 s: %d lines written, %d lost, %d duplicated, %d sent again by the agent",
		written, lost, dup, resent)
	if lost != 0 {
		t.Fatalf("%d lines lost", lost)
	}
	if resent == 0 {
		t.Fatalf("no line was sent again: the outage did not outlast delivery.timeout.ms")
	}
	if dup > resent {
		t.Fatalf("%d duplicates, more than the %d lines sent again", dup, resent)
	}
}

// checkOutageLogged asserts what the agent's info-level log says of a broker (node 1 at addr)
// stopped for about outage: one warning that it is unreachable, however many attempts failed,
// repeated at most every 30 s while it stays down, and one info line when it is reachable
// again, with how long it was not. With no other broker to reach, the producer goes back to
// the bootstrap server (KIP-899), the same broker here: the outage may be told of it as the
// bootstrap server instead, or as both.
func checkOutageLogged(t *testing.T, log, addr string, outage time.Duration) {
	t.Helper()
	node := "broker node 1 (" + addr + ")"
	bootstrap := "bootstrap server " + addr
	var first, repeats, back int
	var attempts int
	var down time.Duration
	failed := regexp.MustCompile(`failed_attempts=(\d+)`)
	took := regexp.MustCompile(`reachable (?:again )?after ([0-9.]+(?:ms|s|m[0-9.]*s?))`)
	var said []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, node) || strings.Contains(line, bootstrap) {
			said = append(said, line)
		}
		switch {
		case strings.Contains(line, node+" unreachable: "):
			first++
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "records for its partitions wait and retry") {
				t.Errorf("warning: %s", line)
			}
		case strings.Contains(line, "no broker reachable: "+bootstrap+" unreachable"):
			first++
			if !strings.Contains(line, "level=WARN") {
				t.Errorf("warning: %s", line)
			}
		case strings.Contains(line, node+" still unreachable after "),
			strings.Contains(line, "no broker reachable yet after ") && strings.Contains(line, bootstrap):
			repeats++
		case strings.Contains(line, node+" reachable again after "), strings.Contains(line, bootstrap+" reachable after "):
			back++
			if !strings.Contains(line, "level=INFO") {
				t.Errorf("recovery not at info: %s", line)
			}
			if m := failed.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				attempts = max(attempts, n)
			}
			if m := took.FindStringSubmatch(line); m != nil {
				d, _ := time.ParseDuration(m[1])
				down = max(down, d)
			}
		}
	}
	t.Logf("broker down %v: %d warning, %d repeats, %d recovery line (down %v, %d failed attempts):\n%s",
		outage.Round(100*time.Millisecond), first, repeats, back, down, attempts, strings.Join(said, "\n"))
	// One warning and one recovery line for each name the broker went by: node 1, whose
	// first failed attempt may come before the rebootstrap, and the bootstrap server.
	if first < 1 || first > 2 || back != first {
		t.Fatalf("%d 'unreachable' warnings and %d 'reachable again' lines for %s and the %s, want one of each per name; log:\n%s", first, back, node, bootstrap, log)
	}
	if most := int(outage/(30*time.Second)) + 1; repeats > most {
		t.Errorf("%d repeated warnings in %v, want at most %d (one per 30 s)", repeats, outage, most)
	}
	if attempts <= first+repeats {
		t.Errorf("%d failed attempts for %d warnings: want fewer warnings than attempts", attempts, first+repeats)
	}
	// The outage counts from the first refused attempt, after the broker began to stop; the
	// recovery is after the broker is back.
	if down < outage/2 || down > outage+time.Minute {
		t.Errorf("logged down time %v for an outage of %v", down, outage)
	}
}
