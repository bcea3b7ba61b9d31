package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// deadLetterFile is the agent's local dead-letter file in its state dir.
const deadLetterFile = "dead-letters.jsonl"

// createTopic creates the topic name with partitions and the topic configs, on the suite broker.
func (s *suite) createTopic(t *testing.T, name string, partitions int32, configs map[string]string) {
	t.Helper()
	cl := s.reader().client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// newTopicWith is newTopic with topic configs.
func (s *suite) newTopicWith(t *testing.T, partitions int32, configs map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("rel-dl-%d", time.Now().UnixNano()%1e9)
	s.createTopic(t, name, partitions, configs)
	return name
}

// appendLine appends s and a newline to the file at path.
func appendLine(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s + "\n"); err != nil {
		t.Fatal(err)
	}
}

// waitFileCheckpointed waits until the agent's checkpoint of path is at the file's end.
func waitFileCheckpointed(t *testing.T, state, path string, a *agentProc, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, 50*time.Millisecond, func() bool {
		ok, _ := checkpointsCover(t, state, []string{path})
		return ok
	}, func() string {
		_, why := checkpointsCover(t, state, []string{path})
		return why + "; log:\n" + a.logTail()
	})
}

// loggedCount is the value of key=N in the agent's last "producer closed" line, -1 if none.
func loggedCount(log, key string) int64 {
	m := regexp.MustCompile(key+`=(\d+)`).FindAllStringSubmatch(log, -1)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return n
}

// TestRefusedLine is issue 28's case: a tailed file of numbered lines with one 8,000-byte line
// among them, on a topic of max.message.bytes=6000. The broker refuses the long line for good;
// it becomes a dead letter (in the dead-letter topic, or the local file), named in the log, and
// the file's checkpoint passes it. After SIGTERM (exit 0) and a restart on the same state dir
// with more lines, every numbered line is in the topic exactly once and the second run sends
// the long line nowhere again.
func TestRefusedLine(t *testing.T) {
	b := theBroker(t)
	n := size(20000, 2000)
	for _, toTopic := range []bool{true, false} {
		dest := "the dead-letter file"
		if toTopic {
			dest = "--dead-letter-topic"
		}
		t.Run(dest, func(t *testing.T) {
			rep := report(t, fmt.Sprintf("11. refused line: one 8,000-byte line amid %s lines, topic max.message.bytes=6000; SIGTERM, restart, %s more lines (%s)",
				num(int64(2*n)), num(int64(n)), dest))
			topic := b.newTopicWith(t, 3, map[string]string{"max.message.bytes": "6000"})
			dir := t.TempDir()
			path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
			lf := newLineFile(t, path)
			t.Cleanup(lf.Close)
			long := "LONG-" + strings.Repeat("x", 7995)
			lf.Write(n)
			appendLine(t, path, long)
			lf.Write(n)
			extra := []string{}
			var dlq string
			if toTopic {
				dlq = b.newTopic(t, 1)
				extra = append(extra, "--dead-letter-topic", dlq)
			}
			args := tailArgs(b.bootstrap(), topic, path, state, extra...)
			a := startAgent(t, nil, nil, args...)
			waitFileCheckpointed(t, state, path, a, 3*time.Minute)
			where := filepath.Join(state, deadLetterFile)
			if toTopic {
				where = "topic " + dlq
			}
			waitLog(t, a, "line dead-lettered", time.Minute)
			if !strings.Contains(a.log(), where) {
				t.Fatalf("the log does not name where the line went (%s):\n%s", where, a.logTail())
			}
			a.stop(time.Minute)
			a.checkNoPanic()

			lf.Write(n)
			a2 := startAgent(t, nil, nil, args...)
			waitFileCheckpointed(t, state, path, a2, 3*time.Minute)
			a2.stop(time.Minute)
			a2.checkNoPanic()
			if strings.Contains(a2.log(), "dead-lettered") {
				t.Fatalf("the restarted agent refused the long line again:\n%s", a2.logTail())
			}

			rd := b.reader()
			c := rd.countLines(t, topic, 3*n)
			rep.counts(int64(3*n), c)
			kept := 0
			if toTopic {
				for _, v := range rd.values(t, dlq) {
					if string(v) == long {
						kept++
					}
				}
			} else {
				for _, l := range testkit.DeadLetters(t, state) {
					if l["value"] == long && l["error"] == "MESSAGE_TOO_LARGE" {
						kept++
					}
				}
			}
			rep.note("the long line kept %d× in %s (MESSAGE_TOO_LARGE), the second run refused nothing; the batches around it split to fit 6000 bytes",
				kept, where)
			if c.lost != 0 || c.dup != 0 || kept != 1 {
				t.Fatalf("%d lost, %d duplicated, the long line kept %d times (want 0, 0, 1)", c.lost, c.dup, kept)
			}
		})
	}
}

// TestOutagePastDeliveryTimeout: the proxy blackholes every connection to the broker for
// several delivery.timeout.ms while the application keeps writing: every record in the agent's
// buffer expires, more than once, and the agent sends each line again by itself until the
// broker is back. Every line arrives, the agent never exits (no restart), and duplicates are
// at most the lines it sent again (only a line whose expired batch had been sent can repeat).
func TestOutagePastDeliveryTimeout(t *testing.T) {
	if noProxy {
		t.Skip("RELIABILITY_NO_PROXY=1: no proxy to put toxics on")
	}
	b := theBroker(t)
	timeout := size(10*time.Second, 3*time.Second)
	outage := 4 * timeout
	rep := report(t, fmt.Sprintf("11. outage past delivery.timeout.ms: blackhole %v with delivery.timeout.ms=%v, lines written throughout", outage, timeout))
	f := newScenario(t, b)
	a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), f.topic, f.path, f.state,
		"-X", fmt.Sprintf("delivery.timeout.ms=%d", timeout.Milliseconds()),
		"-X", fmt.Sprintf("request.timeout.ms=%d", (timeout/3).Milliseconds()),
		"-X", "max.block.ms=2000")...)
	pw := startPaced(f.lf, 5000, 0, nil)
	defer func() {
		select {
		case <-pw.done:
		default:
			pw.stop()
		}
	}()
	f.w.waitAtLeast(500, time.Minute, a)
	b.addToxic(t, `{"name":"exp_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
	b.addToxic(t, `{"name":"exp_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	removed := false
	defer func() {
		if !removed {
			b.removeToxic(t, "exp_up")
			b.removeToxic(t, "exp_down")
		}
	}()
	start := time.Now()
	waitFor(t, outage+time.Minute, 50*time.Millisecond, func() bool { return time.Since(start) >= outage },
		func() string { return "outage length" })
	if !a.running() {
		t.Fatalf("the agent exited during the outage; log:\n%s", a.logTail())
	}
	b.removeToxic(t, "exp_up")
	b.removeToxic(t, "exp_down")
	removed = true
	healed := time.Now()
	sent := pw.stop()
	caughtUp := f.w.waitAtLeast(int64(sent), 3*time.Minute, a)
	a.stop(time.Minute)
	a.checkNoPanic()
	c := f.rd.countLines(t, f.topic, sent)
	rep.counts(int64(sent), c)
	rep.Recovery = secs(caughtUp.Sub(healed))
	resent := loggedCount(a.log(), "lines_resent")
	rep.note("%s lines sent again by the agent, no restart; duplicates = lines whose expired batch had been sent", num(resent))
	if c.lost != 0 || resent <= 0 || c.dup > resent {
		t.Fatalf("%d lost, %d duplicated, %d sent again: want none lost, some sent again, duplicates at most those", c.lost, c.dup, resent)
	}
}

// TestDeadLetterReasons is the bad-input table's row per dead-letter reason the real broker
// can give: a file of numbered lines with one line Kafka refuses for good in the middle. The
// line goes to the dead-letter file with its reason and the broker's error, every numbered
// line arrives once, the checkpoint passes the refused line, and the agent exits 0.
func TestDeadLetterReasons(t *testing.T) {
	b := theBroker(t)
	n := size(20000, 1000)
	for _, tc := range []struct {
		name, reason, errName string
		configs               map[string]string
		bad                   string
		args                  func(topic string) (target string, extra []string)
	}{
		{"a line of 8,000 bytes in a topic of max.message.bytes=6000 (MESSAGE_TOO_LARGE)", "too_large", "MESSAGE_TOO_LARGE",
			map[string]string{"max.message.bytes": "6000"}, "LONG " + strings.Repeat("x", 7995),
			func(topic string) (string, []string) { return topic, nil }},
		{"a keyless line in a compacted topic (INVALID_RECORD)", "invalid_record", "INVALID_RECORD",
			map[string]string{"cleanup.policy": "compact"}, "no key here",
			func(topic string) (string, []string) { return topic, []string{"--key-regex", `^(line-\d+) `} }},
		{"a timestamp older than message.timestamp.before.max.ms (INVALID_TIMESTAMP)", "invalid_timestamp", "INVALID_TIMESTAMP",
			map[string]string{"message.timestamp.before.max.ms": "3600000"}, `{"ts":"2001-01-01T00:00:00Z","msg":"old"}`,
			func(topic string) (string, []string) { return topic, []string{"--timestamp-field", "ts"} }},
		{"a line the --topic template cannot route, no fallback", "unroutable", "UNROUTABLE",
			nil, "a line with no kind",
			func(topic string) (string, []string) {
				return strings.TrimSuffix(topic, "-line") + "-{kind}", []string{"--parse-regex", `^(?P<kind>line)-`}
			}},
		{"a --topic template naming a topic that does not exist (auto-creation off)", "unknown_topic", "UNKNOWN_TOPIC_OR_PARTITION",
			nil, "nosuch-1 a line for a topic nobody created",
			func(topic string) (string, []string) {
				return strings.TrimSuffix(topic, "-line") + "-{kind}", []string{"--parse-regex", `^(?P<kind>[a-z]+)-`,
					"-X", "allow.auto.create.topics=false", "-X", "max.block.ms=2000"}
			}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			rep := report(t, "6. bad input: dead letter: "+tc.name)
			topic := fmt.Sprintf("rel-dl-%d-line", time.Now().UnixNano()%1e9)
			b.createTopic(t, topic, 3, tc.configs)
			target, extra := tc.args(topic)
			dir := t.TempDir()
			path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
			lf := newLineFile(t, path)
			t.Cleanup(lf.Close)
			lf.Write(n / 2)
			appendLine(t, path, tc.bad)
			lf.Write(n - n/2)
			a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), target, path, state, extra...)...)
			waitFileCheckpointed(t, state, path, a, 3*time.Minute)
			a.stop(time.Minute)
			a.checkNoPanic()
			c := b.reader().countLines(t, topic, n)
			rep.counts(int64(n), c)
			letters := testkit.DeadLetters(t, state)
			ok := len(letters) == 1 && letters[0]["value"] == tc.bad && letters[0]["reason"] == tc.reason &&
				strings.Contains(fmt.Sprint(letters[0]["error"], letters[0]["message"]), tc.errName)
			if len(letters) == 1 {
				rep.note("the line in %s: reason %v, error %v", deadLetterFile, letters[0]["reason"], letters[0]["error"])
			}
			if c.lost != 0 || c.dup != 0 || !ok {
				t.Fatalf("%d lost, %d duplicated; dead letters %v (want the line, %s, %s)", c.lost, c.dup, letters, tc.reason, tc.errName)
			}
		})
	}
}

// TestDeadLetterReasonsInjected is the bad-input table's row for the dead-letter reasons no
// stock Apache Kafka broker gives on a produce (a POLICY_VIOLATION comes from a broker's own
// record validation, as managed Kafka services add): kfake answers the one line's batch with it
// (batch.size=1: a batch is one record), and the line must be dead-lettered alone, every other
// line arriving once.
func TestDeadLetterReasonsInjected(t *testing.T) {
	n := size(20000, 1000)
	for _, tc := range []struct {
		name, reason string
		code         int16
	}{
		{"a line the broker's record policy refuses (POLICY_VIOLATION, kfake)", "policy_violation", kerr.PolicyViolation.Code},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			rep := report(t, "6. bad input: dead letter: "+tc.name)
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "rel-dl-injected"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const marker = "REFUSE-THIS-LINE"
			var hits atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ProduceRequest)
				for _, tp := range req.Topics {
					for _, p := range tp.Partitions {
						if bytes.Contains(p.Records, []byte(marker)) {
							hits.Add(1)
							return kafkatest.ProduceError(req, func(kmsg.ProduceRequestTopicPartition) int16 { return tc.code }), nil, true
						}
					}
				}
				return nil, nil, false
			})
			dir := t.TempDir()
			path, state := filepath.Join(dir, "app.log"), filepath.Join(dir, "state")
			lf := newLineFile(t, path)
			t.Cleanup(lf.Close)
			lf.Write(n / 2)
			bad := marker + " a line the broker refuses for good"
			appendLine(t, path, bad)
			lf.Write(n - n/2)
			a := startAgent(t, nil, nil, tailArgs(strings.Join(c.ListenAddrs(), ","), "rel-dl-injected", path, state,
				"-X", "batch.size=1", "-X", "compression.type=none")...)
			waitFileCheckpointed(t, state, path, a, 3*time.Minute)
			a.stop(time.Minute)
			a.checkNoPanic()
			cnt := kafkaAccess{seeds: c.ListenAddrs()}.countLines(t, "rel-dl-injected", n)
			rep.counts(int64(n), cnt)
			letters := testkit.DeadLetters(t, state)
			ok := len(letters) == 1 && letters[0]["value"] == bad && letters[0]["reason"] == tc.reason && hits.Load() > 0
			if len(letters) == 1 {
				rep.note("the line in %s: reason %v, error %v", deadLetterFile, letters[0]["reason"], letters[0]["error"])
			}
			if cnt.lost != 0 || cnt.dup != 0 || !ok {
				t.Fatalf("%d lost, %d duplicated; dead letters %v (want the line, %s); %d requests refused", cnt.lost, cnt.dup, letters, tc.reason, hits.Load())
			}
		})
	}
}

// deadLettersNamed counts the dead letters in state's dead-letter file whose error is errName.
func deadLettersNamed(state, errName string) int {
	b, err := os.ReadFile(filepath.Join(state, deadLetterFile))
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["error"] == errName {
			n++
		}
	}
	return n
}
