package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// TestApplyInputsUnderLoad: while three writers append to three files, a reload changes the
// inputs: a changed input (a key added) restarts from its checkpoint, a removed one stops after
// its lines were acknowledged and saves its checkpoint, an added one starts; a second reload
// brings the removed input back. Every line of every file reaches its topic exactly once, in
// its order, and the changed input's lines carry the key from some line on.
func TestApplyInputsUnderLoad(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ta", "tb", "tc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".log") }
	written := map[string]*atomic.Int64{}
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(path(name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		written[name] = new(atomic.Int64)
	}
	ctx, stopWriting := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	for _, name := range []string{"a", "b", "c"} {
		writers.Go(func() {
			f, err := os.OpenFile(path(name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := 0; ctx.Err() == nil; i++ {
				var batch strings.Builder
				for j := range 20 {
					fmt.Fprintf(&batch, "%s-%06d k=%s%d\n", name, i*20+j, name, j%3)
				}
				if _, err := f.WriteString(batch.String()); err != nil {
					t.Error(err)
					return
				}
				written[name].Add(20)
				time.Sleep(2 * time.Millisecond) // a steady load, not a burst
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), string(filetail.StartAtBeginning), t.TempDir()
	cfg.ShutdownTimeout = 20 * time.Second
	inputA := map[string]any{"name": "a", "tail": []string{path("a")}, "topic": "ta"}
	inputB := map[string]any{"name": "b", "tail": []string{path("b")}, "topic": "tb"}
	inputC := map[string]any{"name": "c", "tail": []string{path("c")}, "topic": "tc"}
	cfg.Inputs = []map[string]any{inputA, inputB}
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTail(t, a)
	acked := func(name string, n uint64) func() bool {
		return func() bool {
			for _, f := range a.InputFileStats() {
				if f.Input == name && f.LinesAcked >= n {
					return true
				}
			}
			return false
		}
	}
	waitUntil(t, 30*time.Second, "a and b under way", func() bool { return acked("a", 500)() && acked("b", 500)() })

	changed := cfg
	changedA := map[string]any{"name": "a", "tail": []string{path("a")}, "topic": "ta", "key-regex": `k=(\S+)`}
	changed.Inputs = []map[string]any{changedA, inputC}
	if err := a.ApplyInputs(context.Background(), &changed); err != nil {
		t.Fatal(err)
	}
	bStopped, err := testkit.CheckpointOffset(filepath.Join(cfg.StateDir, "inputs", "b"), path("b"))
	if err != nil || bStopped == 0 {
		t.Fatalf("input b's checkpoint after it stopped: %d, %v", bStopped, err)
	}
	var names []string
	for _, in := range a.inputList() {
		names = append(names, in.name)
	}
	if fmt.Sprint(names) != "[a c]" {
		t.Errorf("inputs after the reload %v, want [a c]", names)
	}
	waitUntil(t, 30*time.Second, "c under way", acked("c", 500))

	changed.Inputs = []map[string]any{changedA, inputB, inputC}
	if err := a.ApplyInputs(context.Background(), &changed); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "b under way again", acked("b", 200))
	stopWriting()
	writers.Wait()
	for _, name := range []string{"a", "b", "c"} {
		waitUntil(t, 30*time.Second, name+" acknowledged to its end", func() bool {
			for _, f := range a.InputFileStats() {
				if f.Input == name && f.Committed == f.Size && f.Size > 0 && f.InFlight == 0 {
					st, err := os.Stat(path(name))
					return err == nil && st.Size() == f.Size
				}
			}
			return false
		})
	}
	stop()

	for _, name := range []string{"a", "b", "c"} {
		recs := topicRecords(t, c, "t"+name, false)
		n := int(written[name].Load())
		if len(recs) != n {
			t.Errorf("topic t%s: %d records, want the %d lines of %s.log once each", name, len(recs), n, name)
		}
		keyed := -1
		for i, r := range recs {
			if want := fmt.Sprintf("%s-%06d ", name, i); !strings.HasPrefix(string(r.Value), want) {
				t.Fatalf("topic t%s: record %d is %q, want line %q: a line lost, repeated or out of order", name, i, r.Value, want)
			}
			if name == "a" && r.Key != nil && keyed < 0 {
				keyed = i
			}
			if name == "a" && keyed >= 0 && r.Key == nil {
				t.Fatalf("topic ta: record %d has no key, after record %d had one", i, keyed)
			}
		}
		if last := recs[len(recs)-1]; name == "a" && (keyed <= 0 || !strings.HasSuffix(string(last.Value), " k="+string(last.Key))) {
			t.Errorf("topic ta: the key starts at record %d (want after the first and before the last)", keyed)
		}
	}
}
