package reliability

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// batchRecords returns the record count of a partition's record batch.
func batchRecords(p kmsg.ProduceRequestTopicPartition) int32 {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(p.Records); err != nil {
		return 0
	}
	return b.NumRecords
}

// stdinLines returns n numbered lines.
func stdinLines(n int) []byte {
	var buf []byte
	for i := 0; i < n; i++ {
		buf = testkit.NumberedLine(buf, i, lineLen)
	}
	return buf
}

// TestBrokerErrors runs the agent binary (standard input) against an in-process kfake cluster
// whose ControlKey injects errors into the agent's requests.
func TestBrokerErrors(t *testing.T) {
	n := size(100_000, 20_000)
	type injector func(c *kfake.Cluster, hits *atomic.Int32)
	failFirst := func(times int32, code int16) injector {
		return func(c *kfake.Cluster, hits *atomic.Int32) {
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				if hits.Load() >= times {
					return nil, nil, false
				}
				c.KeepControl()
				hits.Add(1)
				return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return code }), nil, true
			})
		}
	}
	for _, tc := range []struct {
		name      string
		autoTopic bool
		inject    injector
		args      []string
		lines     int
		wantExit  int
		wantErr   []string // in stderr, for a failure
		maxTook   time.Duration
	}{
		{name: "NOT_LEADER_OR_FOLLOWER ×5 (retried)", autoTopic: true, inject: failFirst(5, kerr.NotLeaderForPartition.Code), lines: n},
		{name: "REQUEST_TIMED_OUT ×5 (retried)", autoTopic: true, inject: failFirst(5, kerr.RequestTimedOut.Code), lines: n},
		{name: "MESSAGE_TOO_LARGE for batches of more than one record ×5 (split)", autoTopic: true, lines: n,
			inject: func(c *kfake.Cluster, hits *atomic.Int32) {
				c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
					req := r.(*kmsg.ProduceRequest)
					big := false
					for _, t := range req.Topics {
						for _, p := range t.Partitions {
							big = big || batchRecords(p) > 1
						}
					}
					if !big || hits.Load() >= 5 {
						c.KeepControl()
						return nil, nil, false
					}
					c.KeepControl()
					hits.Add(1)
					// The answer is made up: nothing of this request is written. A one-record
					// batch beside a big one must therefore not be answered with success (the
					// record would be acknowledged and lost), but with a retriable error that says
					// it was not written.
					return kafkatest.ProduceError(req, func(p kmsg.ProduceRequestTopicPartition) int16 {
						if batchRecords(p) > 1 {
							return kerr.MessageTooLarge.Code
						}
						return kerr.NotLeaderForPartition.Code
					}), nil, true
				})
			}},
		{name: "TOPIC_AUTHORIZATION_FAILED (fails fast, named)", autoTopic: true, lines: 100, wantExit: 1,
			wantErr: []string{"TOPIC_AUTHORIZATION_FAILED"}, maxTook: 10 * time.Second,
			inject: func(c *kfake.Cluster, hits *atomic.Int32) {
				c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					hits.Add(1)
					return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
						return kerr.TopicAuthorizationFailed.Code
					}), nil, true
				})
			}},
		// Five lines only: each line waits max.block.ms for the topic's metadata on its own, so
		// the exit comes after 5 × 2 s (100 lines would take 200 s).
		{name: "unknown topic, auto-creation off (max.block.ms=2000)", autoTopic: false, lines: 5, wantExit: 1,
			args: []string{"-X", "max.block.ms=2000"}, wantErr: []string{"max.block.ms", "rel-kfake"}, maxTook: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := report(t, "5. kfake: "+tc.name)
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(3)}
			if tc.autoTopic {
				opts = append(opts, kfake.AllowAutoTopicCreation())
			}
			c, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var hits atomic.Int32
			if tc.inject != nil {
				tc.inject(c, &hits)
			}
			topic := "rel-kfake-" + strings.Fields(tc.name)[0]
			args := append([]string{"--brokers", strings.Join(c.ListenAddrs(), ","), "--topic", topic,
				"--log-format", "text", "--log-level", agentLogLevel(), "--shutdown-timeout", "60s"}, tc.args...)
			start := time.Now()
			a := startAgent(t, bytes.NewReader(stdinLines(tc.lines)), nil, args...)
			wait := 3 * time.Minute
			if tc.maxTook > 0 {
				wait = tc.maxTook + 30*time.Second
			}
			code := a.wait(wait)
			took := a.done.Sub(start)
			a.checkNoPanic()
			rd := kafkaAccess{seeds: c.ListenAddrs()}
			var cnt lineCount
			if tc.wantExit == 0 || tc.autoTopic {
				cnt = rd.countLines(t, topic, tc.lines)
			} else {
				cnt = lineCount{lost: int64(tc.lines)}
			}
			rep.counts(int64(tc.lines), cnt)
			rep.Recovery = "exit " + secs(took)
			rep.note("exit status %d, %d requests answered with the error", code, hits.Load())
			if tc.wantExit == 0 {
				if code != 0 {
					t.Fatalf("exit status %d, want 0; log:\n%s", code, a.logTail())
				}
				if tc.inject != nil && hits.Load() == 0 {
					t.Fatal("no request reached the fault")
				}
				if cnt.lost != 0 || cnt.dup != 0 {
					t.Fatalf("%d lost, %d duplicated", cnt.lost, cnt.dup)
				}
				return
			}
			// A failure: every line reported failed by the exit status, none silently lost.
			rep.Lost = 0
			log := a.log()
			last := ""
			for _, l := range lines([]byte(log)) {
				if strings.HasPrefix(l, "agent:") {
					last = l
				}
			}
			rep.note("%d lines reported failed: %q", int64(tc.lines)-cnt.distinct, last)
			if code != tc.wantExit {
				t.Fatalf("exit status %d, want %d; log:\n%s", code, tc.wantExit, a.logTail())
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(last, s) {
					t.Errorf("the agent's last words %q do not name %q; log:\n%s", last, s, a.logTail())
				}
			}
			if !strings.Contains(last, "lines failed") {
				t.Errorf("the agent's last words %q do not count the failed lines", last)
			}
			if tc.maxTook > 0 && took > tc.maxTook {
				t.Errorf("took %v to fail, more than %v", took, tc.maxTook)
			}
		})
	}
}
