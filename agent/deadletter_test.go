package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// checkWholeLines wants every line of path to be one JSON object.
func checkWholeLines(t *testing.T, path string, want int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s ends inside an entry: %q", path, b[max(0, len(b)-40):])
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(b) == 0 {
		lines = nil
	}
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%s line %d is not an entry (%v): %q", path, i+1, err, l)
		}
	}
	if len(lines) != want {
		t.Fatalf("%s holds %d entries, want %d", path, len(lines), want)
	}
}

// A write that failed part of the way, or a crash during one, leaves a torn entry: the next
// write, and the next start, cut it back to the last whole entry, so that every entry stays
// readable (the torn one's line is written again: its write never counted).
func TestDeadLetterFileTornEntry(t *testing.T) {
	dir := t.TempDir()
	d := newDeadLetterFile(dir, 1<<20, nil)
	if err := d.write([]byte(`{"value":"one"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	torn := func() {
		f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"value":"a torn ent`)
		f.Close()
	}
	torn()
	if err := d.write([]byte(`{"value":"two"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	checkWholeLines(t, d.path, 2)

	torn()
	// At start (New repairs the file of its state directory).
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.StateDir = []string{"127.0.0.1:1"}, "logs", dir
	if _, err := New(cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	checkWholeLines(t, d.path, 2)

	// A file that is one torn entry and nothing else is cut to nothing.
	os.WriteFile(d.path, []byte(`{"value":"tor`), 0o640)
	if err := d.repair(); err != nil {
		t.Fatal(err)
	}
	checkWholeLines(t, d.path, 0)
}

// The file's directory is synced when a write created the file: its name must survive a power
// loss as its content does. Not again once it exists.
func TestDeadLetterFileCreationSyncsItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	var synced []string
	syncDirFunc = func(d string) error { synced = append(synced, d); return syncDir(d) }
	t.Cleanup(func() { syncDirFunc = syncDir })
	d := newDeadLetterFile(dir, 1<<20, nil)
	for range 2 {
		if err := d.write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced %q, want %s once (when the file was created)", synced, dir)
	}
}

// The size bound holds for the first entry too: an entry larger than the bound is refused even
// by an empty file, with an error naming the setting.
func TestDeadLetterFileEntryOverTheBound(t *testing.T) {
	d := newDeadLetterFile(t.TempDir(), 100, nil)
	err := d.write(bytes.Repeat([]byte("x"), 101))
	if !errors.Is(err, errDeadLetterTooLarge) || !strings.Contains(err.Error(), "dead-letter-max-bytes") {
		t.Fatalf("an entry of 101 bytes into a file of at most 100: %v, want errDeadLetterTooLarge", err)
	}
	if _, err := os.Stat(d.path); err == nil {
		if b, _ := os.ReadFile(d.path); len(b) > 0 {
			t.Fatalf("the file holds %d bytes", len(b))
		}
	}
	if err := d.write(append(bytes.Repeat([]byte("x"), 99), '\n')); err != nil {
		t.Fatalf("an entry of exactly the bound: %v", err)
	}
}

// stdin cannot be read again and must not hold its pipe: a line refused for good whose dead
// letter the full file cannot keep fails at once (the run ends, the line counted failed),
// rather than stopping until the file is moved.
func TestStdinDeadLetterFileFullFailsTheLine(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	refuseLargeBatches(c)
	state := t.TempDir()
	full := bytes.Repeat([]byte("{}\n"), 2000) // 6000 bytes of 6000
	if err := os.WriteFile(filepath.Join(state, DeadLetterFileName), full, 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Stdin, cfg.StateDir, cfg.DeadLetterMaxBytes = c.ListenAddrs(), "logs", true, state, 6000
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := "a\n" + strings.Repeat("x", 4000) + "\nb\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.RunStdin(ctx, strings.NewReader(in)); ctx.Err() != nil {
		t.Fatalf("RunStdin still running after 30 s (%v): the full dead-letter file holds the pipe", err)
	}
	if a.Stats().LinesFailed.Load() != 1 || a.Stats().LinesAcked.Load() != 2 || a.Stats().LinesDeadLettered.Load() != 0 {
		t.Fatalf("failed %d acked %d dead-lettered %d, want 1 2 0", a.Stats().LinesFailed.Load(), a.Stats().LinesAcked.Load(), a.Stats().LinesDeadLettered.Load())
	}
	if err := a.Stats().FirstError(); err == nil || !errors.Is(err, errDeadLetterFull) {
		t.Errorf("first error %v, want the full dead-letter file named", err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, DeadLetterFileName)); !bytes.Equal(b, full) {
		t.Error("the full dead-letter file changed")
	}
}
