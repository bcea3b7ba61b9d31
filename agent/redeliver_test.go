package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

// readDeadLetters reads the dead-letter file of stateDir, in order.
func readDeadLetters(t *testing.T, stateDir string) []deadLetterRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(stateDir, DeadLetterFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []deadLetterRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r deadLetterRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("dead-letter line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClassify is the README's "How a line can end" table, one row per error: the fate the
// agent gives a line whose record failed with it.
func TestClassify(t *testing.T) {
	expired := &producer.DeliveryTimeoutError{Partition: "logs-0", Records: 1, Cause: kerr.NotLeaderForPartition}
	for _, tc := range []struct {
		err       error
		templated bool
		fate      fate
		reason    string
	}{
		// Sent again by the agent: an outage outlived delivery.timeout.ms, or no broker answered.
		{expired, false, fateResend, ""},
		{&producer.DeliveryTimeoutError{Partition: "logs-0"}, false, fateResend, ""},
		// An expiry is sent again whatever its last error was: a partition whose leader moved
		// answers UNKNOWN_TOPIC_OR_PARTITION until the metadata catches up.
		{&producer.DeliveryTimeoutError{Partition: "logs-0", Cause: kerr.UnknownTopicOrPartition}, false, fateResend, ""},
		{&producer.DeliveryTimeoutError{Partition: "logs-x-0", Cause: kerr.UnknownTopicOrPartition}, true, fateResend, ""},
		{&producer.DeliveryTimeoutError{Partition: "logs-0", Cause: kerr.MessageTooLarge}, false, fateResend, ""},
		{&producer.MetadataTimeoutError{Topic: "logs"}, false, fateResend, ""},
		{kerr.NotEnoughReplicas, false, fateResend, ""},
		{kerr.RequestTimedOut, false, fateResend, ""},
		{producer.ErrBatchHadInvalidRecords, false, fateResend, ""},
		// Dead letters: the line itself.
		{kerr.MessageTooLarge, false, fateDeadLetter, DeadLetterTooLarge},
		{kerr.RecordListTooLarge, false, fateDeadLetter, DeadLetterTooLarge},
		{&producer.RecordTooLargeError{Size: 2 << 20, Limit: 1 << 20, Key: "max.request.size"}, false, fateDeadLetter, DeadLetterTooLarge},
		{kerr.InvalidRecord, false, fateDeadLetter, DeadLetterInvalidRecord},
		{kerr.CorruptMessage, false, fateDeadLetter, DeadLetterInvalidRecord},
		{kerr.InvalidTimestamp, false, fateDeadLetter, DeadLetterInvalidTimestamp},
		{kerr.PolicyViolation, false, fateDeadLetter, DeadLetterPolicyViolation},
		{&linerecord.RouteError{}, true, fateDeadLetter, DeadLetterUnroutable},
		{&producer.MetadataTimeoutError{Topic: "logs-x", Cause: kerr.UnknownTopicOrPartition}, true, fateDeadLetter, DeadLetterUnknownTopic},
		// Stops: the configuration or the cluster, never the line.
		{&producer.MetadataTimeoutError{Topic: "logs", Cause: kerr.UnknownTopicOrPartition}, false, fateStop, ""},
		{fmt.Errorf("topic %q: %w", "logs", kerr.TopicAuthorizationFailed), false, fateStop, ""},
		{kerr.ClusterAuthorizationFailed, false, fateStop, ""},
		{kerr.SaslAuthenticationFailed, false, fateStop, ""},
		{kerr.UnsupportedCompressionType, false, fateStop, ""},
		{errors.New("an error the agent has no rule for"), false, fateStop, ""},
		// Given up: the agent is stopping.
		{producer.ErrProducerClosed, false, fateGivenUp, ""},
		{context.Canceled, false, fateGivenUp, ""},
	} {
		f, reason := classify(tc.err, tc.templated)
		if f != tc.fate || reason != tc.reason {
			t.Errorf("classify(%v, templated %v) = %d %q, want %d %q", tc.err, tc.templated, f, reason, tc.fate, tc.reason)
		}
	}
}

// refuseLargeBatches makes kfake cluster c answer a produce request with MESSAGE_TOO_LARGE when
// one of its batches is over 1000 bytes (a long line's), and take the others.
func refuseLargeBatches(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				if len(p.Records) > 1000 {
					return kafkatest.ProduceError(req, func(kmsg.ProduceRequestTopicPartition) int16 { return kerr.MessageTooLarge.Code }), nil, true
				}
			}
		}
		return nil, nil, false
	})
}

// refuseWhile makes kfake cluster c answer every produce request with NOT_ENOUGH_REPLICAS
// (retriable: the producer retries until delivery.timeout.ms) while refusing is set.
func refuseWhile(c *kfake.Cluster, refusing *atomic.Bool) {
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
			return kerr.NotEnoughReplicas.Code
		}), nil, true
	})
}

// consumeValues reads every record of topic from kfake cluster c, by value.
func consumeValues(t *testing.T, c *kfake.Cluster, topic string, want int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]int{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records of %s within 20 s", n, want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	return seen
}

// eachOnce checks that seen holds line-0000..line-(n-1) once each.
func eachOnce(t *testing.T, seen map[string]int, n int) {
	t.Helper()
	for i := range n {
		if c := seen[fmt.Sprintf("line-%04d", i)]; c != 1 {
			t.Errorf("line-%04d arrived %d times, want once", i, c)
		}
	}
}

// TestExpiredLinesAreSentAgain: the broker answers every produce request with a retriable
// error for longer than delivery.timeout.ms, so every line expires at least once; the agent
// sends each again by itself, without a restart, until the broker takes it: every line
// arrives exactly once (the broker wrote none of the failed attempts), the file's checkpoint
// reaches its end, nothing is reported failed, and the run ends normally.
func TestExpiredLinesAreSentAgain(t *testing.T) {
	const lines = 200
	var data bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&data, "line-%04d\n", i)
	}
	a, _, c := newFileAgent(t, 2, data.Bytes(), func(cfg *Config) {
		cfg.Producer["delivery.timeout.ms"] = "600"
		cfg.Producer["request.timeout.ms"] = "300"
		cfg.Producer["linger.ms"] = "5"
	})
	var refusing atomic.Bool
	refusing.Store(true)
	refuseWhile(c, &refusing)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for a.Stats().LinesResent.Load() < 2*lines {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines sent again within 20 s, want every line at least twice", a.Stats().LinesResent.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fs := a.FileStats(); len(fs) != 1 || fs[0].Committed != 0 || fs[0].LinesFailed != 0 {
		t.Fatalf("file stats during the refusals %+v: want nothing committed, nothing failed", fs)
	}
	refusing.Store(false)
	fs := waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == int64(data.Len()) })
	if fs.LinesFailed != 0 || fs.LinesDeadLettered != 0 {
		t.Errorf("file stats %+v: want nothing failed or dead-lettered", fs)
	}
	eachOnce(t, consumeValues(t, c, "logs", lines), lines)
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v, want a normal stop", err)
	}
	if a.Stats().LinesFailed.Load() != 0 || a.readAhead.used.Load() != 0 {
		t.Errorf("%d lines failed, %d read-ahead bytes held; want none", a.Stats().LinesFailed.Load(), a.readAhead.used.Load())
	}
}

// TestRefusalAboutTheClusterStopsAndResumes: a refusal that is not the line's (no ACL for the
// topic) stops sending: no line is dead-lettered, reading pauses, Delivery names the cause;
// once the broker takes lines again, sending resumes by itself and every line arrives once.
func TestRefusalAboutTheClusterStopsAndResumes(t *testing.T) {
	const lines = 50
	var data bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&data, "line-%04d\n", i)
	}
	a, _, c := newFileAgent(t, 1, data.Bytes(), func(*Config) {})
	var refusing atomic.Bool
	refusing.Store(true)
	var refused atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
			return kerr.TopicAuthorizationFailed.Code
		}), nil, true
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for refused.Load() < 3 { // the requests in flight when the first refusal came, refused too
		if time.Now().After(deadline) {
			t.Fatalf("%d produce requests refused within 20 s, want 3", refused.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := a.Delivery()
	if d.Stopped == nil || !errors.Is(d.Stopped, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Delivery().Stopped = %v, want TOPIC_AUTHORIZATION_FAILED", d.Stopped)
	}
	if len(d.DeadLettered) != 0 {
		t.Fatalf("dead letters %+v for a refusal about the cluster", d.DeadLettered)
	}
	if fs := a.FileStats(); fs[0].Committed != 0 {
		t.Fatalf("committed %d while every line is refused", fs[0].Committed)
	}
	refusing.Store(false)
	fs := waitForFile(t, a, 40*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == int64(data.Len()) })
	if fs.LinesFailed != 0 || fs.LinesDeadLettered != 0 {
		t.Errorf("file stats %+v: want nothing failed or dead-lettered", fs)
	}
	if d := a.Delivery(); d.Stopped != nil {
		t.Errorf("still stopped after every line was delivered: %v", d.Stopped)
	}
	eachOnce(t, consumeValues(t, c, "logs", lines), lines)
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v, want a normal stop", err)
	}
}

// TestDeadLetterTopic: a line too large for its topic (max.message.bytes) goes to the
// dead-letter topic with its key and headers and the dead-letter headers; one too large for the
// dead-letter topic as well goes to the dead-letter file. Both files' checkpoints pass them,
// and the lines around them arrive once.
func TestDeadLetterTopic(t *testing.T) {
	small, smaller := "3000", "6000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dlq": {"max.message.bytes": &smaller}})
	ctx := context.Background()
	mid, huge := strings.Repeat("m", 4000), strings.Repeat("h", 8000)
	data := "before\n" + mid + "\n" + "between\n" + huge + "\n" + "after\n"
	path := writeTemp(t, "app.log", []byte(data))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), "logs", []string{path}, string(filetail.StartAtBeginning), t.TempDir()
	cfg.DeadLetterTopic = "dlq"
	cfg.Producer["linger.ms"] = "0"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.RunTail(rctx) }()
	fs := waitForFile(t, a, 30*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == int64(len(data)) })
	if fs.LinesDeadLettered != 2 || fs.LinesFailed != 0 {
		t.Errorf("file stats %+v: want 2 dead-lettered, none failed", fs)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	seen := consumeValues(t, c, "logs", 3)
	for _, v := range []string{"before", "between", "after"} {
		if seen[v] != 1 {
			t.Errorf("%q arrived %d times in logs, want once", v, seen[v])
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	var recs []*kgo.Record
	for len(recs) < 1 && pctx.Err() == nil {
		recs = append(recs, cl.PollFetches(pctx).Records()...)
	}
	if len(recs) != 1 || string(recs[0].Value) != mid {
		t.Fatalf("dead-letter topic holds %d records, want the 4000-byte line", len(recs))
	}
	h := map[string]string{}
	for _, kv := range recs[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	if h[HeaderDeadLetterReason] != DeadLetterTooLarge || h[HeaderDeadLetterError] != "MESSAGE_TOO_LARGE" || h[HeaderDeadLetterTopic] != "logs" ||
		h[HeaderDeadLetterSource] != path || h[HeaderDeadLetterOffset] != fmt.Sprint(len("before\n"+mid+"\n")) || h["source.path"] != path {
		t.Errorf("dead letter's headers %v", h)
	}
	letters := readDeadLetters(t, cfg.StateDir)
	if len(letters) != 1 || *letters[0].Value != huge || letters[0].Error != "MESSAGE_TOO_LARGE" || letters[0].Topic != "logs" {
		t.Fatalf("dead-letter file %+v, want the 8000-byte line", letters)
	}
	want := []DeadLetterCount{{DeadLetterTooLarge, DeadLetterToFile, 1}, {DeadLetterTooLarge, DeadLetterToTopic, 1}}
	if got := a.Delivery().DeadLettered; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dead-letter counts %+v, want %+v", got, want)
	}
}

// TestDeadLetterFileFullStops: a dead-letter file that is full takes nothing more, and the
// agent stops sending rather than drop the line; once the file is moved away, the dead letter
// is written to a new one, sending resumes, and the checkpoint passes it.
func TestDeadLetterFileFullStops(t *testing.T) {
	var stateDir string
	data := "a\n" + strings.Repeat("x", 4000) + "\n" + "b\n"
	a, _, c := newFileAgent(t, 1, []byte(data), func(cfg *Config) { cfg.DeadLetterMaxBytes = 5000; stateDir = cfg.StateDir })
	refuseLargeBatches(c)
	dlPath := filepath.Join(stateDir, DeadLetterFileName)
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dlPath, bytes.Repeat([]byte("{}\n"), 1000), 0o640); err != nil { // 3000 bytes: no room for the long line
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err, _, _ := a.redo.Stopped(); err != nil {
			if !errors.Is(err, errDeadLetterFull) {
				t.Fatalf("stopped for %v, want the full dead-letter file", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not stop for its full dead-letter file within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fs := a.FileStats(); fs[0].Committed != 2 {
		t.Fatalf("committed %d with the dead letter unwritten, want 2 (after the first line)", fs[0].Committed)
	}
	if err := os.Rename(dlPath, dlPath+".1"); err != nil {
		t.Fatal(err)
	}
	fs := waitForFile(t, a, 40*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == int64(len(data)) })
	if fs.LinesDeadLettered != 1 {
		t.Errorf("file stats %+v, want one dead letter", fs)
	}
	if letters := readDeadLetters(t, stateDir); len(letters) != 1 || len(*letters[0].Value) != 4000 {
		t.Errorf("new dead-letter file %+v, want the long line", letters)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
}

// consumeInOrder reads want records of topic's partition 0 from kfake cluster c, in their order.
func consumeInOrder(t *testing.T, c *kfake.Cluster, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records of %s within 20 s", len(got), want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestResentLinesKeepTheirFileOrder: a file's lines that expire are sent again before any line
// read after them: in their partition they stay in file order. A line read after them used to
// be free to go as soon as the last of them was taken off the queue, before the producer had
// it: the hook holds that moment open (the file gets its new line, the broker takes lines
// again) until the new line has gone out, and the new line must still come after every line
// sent again.
func TestResentLinesKeepTheirFileOrder(t *testing.T) {
	const lines = 100
	var data bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&data, "line-%04d\n", i)
	}
	a, path, c := newFileAgent(t, 1, data.Bytes(), func(cfg *Config) {
		cfg.Producer["delivery.timeout.ms"] = "600"
		cfg.Producer["request.timeout.ms"] = "300"
		cfg.Producer["linger.ms"] = "5"
	})
	var refusing, armed, appended atomic.Bool
	refusing.Store(true)
	refuseWhile(c, &refusing)
	appendLine := func() {
		if appended.Swap(true) {
			return
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(f, "line-%04d\n", lines)
		f.Close()
	}
	var held atomic.Bool
	testHookResend = func(l *redoLine) {
		if !armed.Load() || l.src.held.Load() != 0 {
			return // the source's reading still waits for this line
		}
		// The source's reader is free while this line is not yet the producer's: the file
		// gets a new line, the broker takes lines again; wait until the reader has sent the
		// new line (taken its read-ahead bytes) and lines are acknowledged, or 2 s.
		armed.Store(false)
		held.Store(true)
		used, acked := a.readAhead.used.Load(), a.Stats().LinesAcked.Load()
		refusing.Store(false)
		appendLine()
		deadline := time.Now().Add(2 * time.Second)
		for (a.readAhead.used.Load() <= used || a.Stats().LinesAcked.Load() <= acked) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() { testHookResend = nil })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for a.Stats().LinesResent.Load() < lines {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines sent again within 20 s, want every line at least once", a.Stats().LinesResent.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The next round of lines sent again meets the hook. Then the broker takes lines again and
	// the file gets its new line, if the hook has not done both.
	resent := a.Stats().LinesResent.Load()
	armed.Store(true)
	deadline = time.Now().Add(20 * time.Second)
	for a.Stats().LinesResent.Load() < resent+lines && !held.Load() {
		if time.Now().After(deadline) {
			t.Fatal("no new round of lines sent again within 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	armed.Store(false)
	refusing.Store(false)
	appendLine()
	size := int64(data.Len()) + int64(len("line-0000\n"))
	waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool { return fs.Committed == size })
	got := consumeInOrder(t, c, "logs", lines+1)
	for i, v := range got {
		if want := fmt.Sprintf("line-%04d", i); v != want {
			t.Fatalf("record %d of the partition is %s, want %s (the hook held the moment open: %v)", i, v, want, held.Load())
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
}
