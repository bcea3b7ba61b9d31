package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/agent"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// createLimitedTopic creates a topic of partitions on the test broker whose max.message.bytes
// is limit, deleted when the test ends, and returns its name.
func createLimitedTopic(t *testing.T, prefix string, partitions int32, limit int) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	adm := kafkatest.NewAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := fmt.Sprint(limit)
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"max.message.bytes": &v}, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic)
	})
	return topic
}

// appendRaw appends s to the file at path.
func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonLineIsDeadLetteredOnceAndNothingIsSentTwice is issue 28's case on the real broker:
// a topic with max.message.bytes=6000, a tailed file of 500 short lines, one 8,000-byte line,
// 500 short lines. The broker refuses the long line for good; it goes to the dead-letter topic
// (named in the log), with the refusal in its headers, and the file's checkpoint moves past it.
// After SIGTERM (exit 0: nothing was lost) and a restart on the same state dir with 500 more
// lines, every short line is in the topic exactly once, and the second run does not send the
// long line again.
func TestPoisonLineIsDeadLetteredOnceAndNothingIsSentTwice(t *testing.T) {
	bootstrap, _, dir, path, lw := tailSetup(t, 1)
	topic := createLimitedTopic(t, "poison", 3, 6000)
	dlq := kafkatest.NewTopic(t, 1)
	state := filepath.Join(dir, "state")
	long := "LONG-" + strings.Repeat("x", 7995)
	lw.Write(500)
	appendRaw(t, path, long+"\n")
	lw.Write(500) // line-500..999: the numbering skips nothing, the long line is not numbered

	args := append(tailArgs(bootstrap, topic, path, state), "--dead-letter-topic", dlq)
	a := startAgent(t, nil, args...)
	waitForRecords(t, bootstrap, topic, 1000, time.Minute, a)
	recs := kafkatest.Consume(t, dlq, 1, time.Minute)
	if len(recs) != 1 || string(recs[0].Value) != long {
		t.Fatalf("dead-letter topic: %d records, want the long line", len(recs))
	}
	h := headers(recs[0])
	if h[agent.HeaderDeadLetterError] != "MESSAGE_TOO_LARGE" || h[agent.HeaderDeadLetterReason] != agent.DeadLetterTooLarge ||
		h[agent.HeaderDeadLetterTopic] != topic || h[agent.HeaderDeadLetterSource] != path ||
		h[agent.HeaderDeadLetterOffset] != fmt.Sprint(500*lineLen+len(long)+1) {
		t.Errorf("dead letter's headers %v", h)
	}
	waitCond(t, "the dead letter logged, naming the topic", func() bool {
		log := readFile(a.logf)
		return strings.Contains(log, "line dead-lettered") && strings.Contains(log, "dead_letter=\"topic "+dlq+"\"")
	}, a)
	a.stop(time.Minute)

	lw.Write(500)
	b := startAgent(t, nil, args...)
	waitForRecords(t, bootstrap, topic, 1500, time.Minute, b)
	b.stop(time.Minute)
	if lost, dup := countLines(t, bootstrap, topic, lw.Next); lost != 0 || dup != 0 {
		t.Fatalf("%d of %d short lines lost, %d sent twice after the restart", lost, lw.Next, dup)
	}
	if log := readFile(b.logf); strings.Contains(log, "dead-lettered") {
		t.Errorf("the restarted agent sent the refused line again:\n%s", tail(log))
	}
	if n := len(kcatValues(t, bootstrap, dlq)); n != 1 {
		t.Errorf("dead-letter topic holds %d records after the restart, want 1", n)
	}
}

// TestStdinExitStatusTellsDeadLettersFromLoss: stdin with a line too large for its topic and no
// dead-letter topic: the line goes to the dead-letter file in --state-dir, every other line
// arrives, and the exit status is 3 ("some dead-lettered, none lost"), not 1.
func TestStdinExitStatusTellsDeadLettersFromLoss(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topic := createLimitedTopic(t, "stdin-poison", 1, 6000)
	state := t.TempDir()
	long := strings.Repeat("y", 8000)
	in := numberedLines(3, 20)
	in.WriteString(long + "\n")
	in.Write(numberedLines(3, 20).Bytes())
	r := runAgent(t, in, 2*time.Minute, nil, "--brokers", bootstrap, "--topic", topic, "--state-dir", state, "--log-level", "warn")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", r.code, tail(r.stderr))
	}
	if !strings.Contains(r.stderr, "1 of 7 lines were refused by Kafka and dead-lettered") || !strings.Contains(r.stderr, "none was lost") {
		t.Errorf("stderr does not say what was dead-lettered:\n%s", tail(r.stderr))
	}
	letters := testkit.DeadLetters(t, state)
	if len(letters) != 1 || letters[0]["value"] != long || letters[0]["error"] != "MESSAGE_TOO_LARGE" || letters[0]["source"] != "stdin" {
		t.Fatalf("dead-letter file holds %d lines, want the long line refused with MESSAGE_TOO_LARGE", len(letters))
	}
	if vals := kcatValues(t, bootstrap, topic); len(vals) != 6 {
		t.Errorf("%d records in the topic, want the 6 short lines", len(vals))
	}
}

// TestStdinTopicMissingExitsOne: a topic that does not exist, where the cluster does not
// create topics, is about the configuration, not a line: nothing is dead-lettered. stdin has no
// file to wait on, so its lines fail at once and the exit status is 1, naming the topic (a
// followed file's lines would wait until the topic exists).
func TestStdinTopicMissingExitsOne(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	state := t.TempDir()
	r := runAgent(t, numberedLines(3, 20), time.Minute, nil, "--brokers", bootstrap, "--topic", "no-such-topic-kafkatrail",
		"--state-dir", state, "-X", "allow.auto.create.topics=false", "-X", "max.block.ms=500", "--log-level", "error")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, tail(r.stderr))
	}
	if !strings.Contains(r.stderr, "3 of 3 lines failed") || !strings.Contains(r.stderr, "no-such-topic-kafkatrail") {
		t.Fatalf("stderr does not give the count and the first error:\n%s", tail(r.stderr))
	}
	if letters := testkit.DeadLetters(t, state); len(letters) != 0 {
		t.Errorf("%d dead letters for a missing topic, want none", len(letters))
	}
}
