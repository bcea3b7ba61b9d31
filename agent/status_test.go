package agent

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// newFileAgent builds an agent following a new file holding data, from its beginning, into the
// topic "logs" of a kfake cluster with that many partitions; mutate adjusts the configuration.
func newFileAgent(t *testing.T, partitions int32, data []byte, mutate func(*Config)) (*Agent, string, *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	path := writeTemp(t, "app.log", data)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), "logs", []string{path}, string(filetail.StartAtBeginning), t.TempDir()
	mutate(&cfg)
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, path, c
}

// TestConnectAndFileStats: Connect fetches the topic's metadata before any line; FileStats
// shows the followed file while RunTail runs; Connect after the agent stopped is not an error.
func TestConnectAndFileStats(t *testing.T) {
	a, path, _ := newFileAgent(t, 1, []byte("one\ntwo\nthree\n"), func(cfg *Config) { cfg.Producer["max.block.ms"] = "2000" })
	if fs := a.FileStats(); fs != nil {
		t.Fatalf("FileStats before RunTail: %+v", fs)
	}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	fs := waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool { return fs.LinesAcked == 3 })
	if fs.Path != path || fs.Size != 14 || fs.ReadOffset != 14 {
		t.Errorf("file stats %+v", fs)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatalf("Connect after the agent stopped: %v, want nil", err)
	}
}

// TestMaxInFlightBytes: with a budget of a few lines, every line of a file is still delivered
// (the budget comes back with each acknowledgement), the bytes held never pass the budget
// (sampled while it runs), and none are held at the end.
func TestMaxInFlightBytes(t *testing.T) {
	line := []byte("0123456789012345678901234567890123456789012345678\n")                                     // 50 bytes with the newline
	a, _, _ := newFileAgent(t, 3, bytes.Repeat(line, 2000), func(cfg *Config) { cfg.MaxInFlightBytes = 500 }) // ten lines of 49 bytes
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	var peak int64
	waitForFile(t, a, 30*time.Second, func(fs filetail.FileStats) bool {
		peak = max(peak, a.readAhead.used.Load())
		return fs.LinesAcked == 2000
	})
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	if peak > 500 {
		t.Errorf("%d bytes of lines held at once, budget 500", peak)
	}
	if u := a.readAhead.used.Load(); u != 0 {
		t.Errorf("%d bytes still held after every line was acknowledged", u)
	}
}

// TestRefusedLinesAreDeadLettered: lines the broker refuses for good (INVALID_RECORD) are
// dead letters: each is kept in the dead-letter file with the broker's error, the file's
// checkpoint moves past it, and its bytes go back to the read-ahead budget, so a refusing
// broker neither stops reading nor pins the checkpoint.
func TestRefusedLinesAreDeadLettered(t *testing.T) {
	line := []byte("0123456789012345678901234567890123456789012345678\n") // 50 bytes with the newline
	const lines = 100
	var stateDir string
	a, _, c := newFileAgent(t, 1, bytes.Repeat(line, lines), func(cfg *Config) { cfg.MaxInFlightBytes = 500; stateDir = cfg.StateDir })
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 {
			return kerr.InvalidRecord.Code // not retriable
		}), nil, true
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	if fs := waitForFile(t, a, 30*time.Second, func(fs filetail.FileStats) bool { return fs.LinesDeadLettered == lines }); fs.Committed != 50*lines || fs.LinesFailed != 0 {
		t.Errorf("file stats %+v: want every line dead-lettered and committed", fs)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v, want a normal stop", err)
	}
	if u := a.readAhead.used.Load(); u != 0 {
		t.Errorf("%d bytes still held after every line was dead-lettered", u)
	}
	letters := readDeadLetters(t, stateDir)
	if len(letters) != lines {
		t.Fatalf("%d dead letters, want %d", len(letters), lines)
	}
	for i, l := range letters {
		if l.Reason != DeadLetterInvalidRecord || l.Error != "INVALID_RECORD" || *l.Value != string(line[:49]) || *l.Offset != int64(50*(i+1)) {
			t.Fatalf("dead letter %d: %+v, want the line, INVALID_RECORD, ending at %d", i, l, 50*(i+1))
		}
	}
	if d := a.Delivery(); len(d.DeadLettered) != 1 || d.DeadLettered[0] != (DeadLetterCount{DeadLetterInvalidRecord, DeadLetterToFile, lines}) {
		t.Errorf("dead-letter counts %+v", d.DeadLettered)
	}
}

// TestMaxInFlightBytesForPartitions: once the topic's partitions are known, the default is what
// the producer can have in flight (a batch filling and 5 requests, each with a batch of every
// partition), within the same bounds.
func TestMaxInFlightBytesForPartitions(t *testing.T) {
	for _, tc := range []struct {
		set, batch, partitions int
		buffer                 int64
		want                   int64
	}{
		{0, 64 << 10, 6, 8 << 20, 6 * 6 * 64 << 10}, // 2.25 MiB
		{0, 64 << 10, 1, 8 << 20, 2 << 20},          // 384 KiB: the floor
		{0, 64 << 10, 100, 8 << 20, 8 << 20},        // never more than buffer.memory
		{4096, 64 << 10, 6, 8 << 20, 4096},          // set: as set
	} {
		cfg := Config{MaxInFlightBytes: tc.set}
		pc := producerConfigForTest(tc.batch, tc.buffer)
		if got := cfg.MaxInFlightBytesFor(pc, tc.partitions); got != tc.want {
			t.Errorf("set %d, batch.size %d, %d partitions, buffer.memory %d: %d, want %d", tc.set, tc.batch, tc.partitions, tc.buffer, got, tc.want)
		}
	}
}

// TestEffectiveMaxInFlightBytes: the default follows batch.size within its bounds.
func TestEffectiveMaxInFlightBytes(t *testing.T) {
	for _, tc := range []struct {
		set, batch int
		buffer     int64
		want       int64
	}{
		{0, 16384, 8 << 20, 2 << 20}, // 32 x 16 KiB = 512 KiB: the 2 MiB floor
		{0, 1 << 20, 64 << 20, 32 << 20},
		{0, 1 << 20, 8 << 20, 8 << 20}, // never more than buffer.memory
		{4096, 16384, 8 << 20, 4096},
	} {
		cfg := Config{MaxInFlightBytes: tc.set}
		pc := producerConfigForTest(tc.batch, tc.buffer)
		if got := cfg.EffectiveMaxInFlightBytes(pc); got != tc.want {
			t.Errorf("set %d, batch.size %d, buffer.memory %d: %d, want %d", tc.set, tc.batch, tc.buffer, got, tc.want)
		}
	}
}

// TestExactlyOnceStatsShowCommittedPositions: with --exactly-once a file's Committed is the
// position its last committed transaction holds, not how far the broker acknowledged: lines
// acknowledged inside an open transaction are not committed yet, nor counted as acknowledged.
func TestExactlyOnceStatsShowCommittedPositions(t *testing.T) {
	a, _, _ := newFileAgent(t, 1, []byte("one\ntwo\nthree\n"), func(cfg *Config) {
		cfg.ExactlyOnce = true
		cfg.CommitInterval = 25 * time.Second // no commit while the test looks; the last one at the stop
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	acked := func(fs filetail.FileStats) bool { return fs.LinesRead == 3 && fs.InFlight == 0 }
	if fs := waitForFile(t, a, 20*time.Second, acked); fs.Committed != 0 || fs.BytesBehind != 14 || fs.LinesAcked != 0 {
		t.Fatalf("acknowledged, not committed: %+v, want Committed 0, 14 bytes behind, none counted acknowledged", fs)
	}
	if n := a.Stats().LinesAcked.Load(); n != 0 {
		t.Fatalf("%d lines counted acknowledged before their transaction committed", n)
	}
	cancel() // the run ends with a last commit
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	if fs := a.FileStats(); len(fs) != 1 || fs[0].Committed != 14 || fs[0].BytesBehind != 0 || fs[0].LinesAcked != 3 {
		t.Fatalf("after the last commit: %+v, want Committed 14 and 3 lines acknowledged", fs)
	}
	if n := a.Stats().LinesAcked.Load(); n != 3 {
		t.Fatalf("%d lines counted acknowledged after the last commit, want 3", n)
	}
}

// waitForFile polls a's FileStats until it shows one file for which cond holds, and returns
// that file's stats; it fails the test after timeout.
func waitForFile(t *testing.T, a *Agent, timeout time.Duration, cond func(filetail.FileStats) bool) filetail.FileStats {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if fs := a.FileStats(); len(fs) == 1 && cond(fs[0]) {
			return fs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("file stats after %v: %+v (the read-ahead holds %d bytes)", timeout, a.FileStats(), a.readAhead.used.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunTailSizesTheReadAheadFromThePartitions: with the default --max-in-flight-bytes, the
// read-ahead starts at 32 batches and grows to what the producer can have in flight once the
// topic's 12 partitions are known.
func TestRunTailSizesTheReadAheadFromThePartitions(t *testing.T) {
	a, _, _ := newFileAgent(t, 12, []byte("one\n"), func(*Config) {})
	before := a.readAhead.limit.Load()
	want := a.cfg.MaxInFlightBytesFor(a.pc, 12)
	if before != a.cfg.EffectiveMaxInFlightBytes(a.pc) || want <= before {
		t.Fatalf("limit %d before RunTail, %d for 12 partitions: want the first smaller", before, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for a.readAhead.limit.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := a.readAhead.limit.Load()
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	if got != want {
		t.Fatalf("read-ahead limit %d, want %d ((5+1) x 12 partitions x batch.size %d)", got, want, a.pc.BatchSize)
	}
}
