package filetail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCopytruncateBetweenTwoReads: the file is truncated and rewritten, past the read offset,
// while the follower is in the middle of reading it (between two reads of one pass, so no stat
// shows a shrink). The follower must notice that the file no longer begins with its fingerprint
// and start again at 0, rather than go on at the old offset in the new content: that would send
// a record made of the start of an old line and the end of a new one, and skip the new content's
// first lines. Found by the reliability suite (copytruncate every 100 ms at 50,000 lines/s).
func TestCopytruncateBetweenTwoReads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	var old, fresh strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&old, "old-%04d\n", i)
	}
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&fresh, "new-%04d\n", i)
	}
	if err := os.WriteFile(path, []byte(old.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(filepath.Join(dir, "state"), path)
	cfg.ReadBufferBytes = 64 // many reads per pass: the rewrite lands between two of them
	cfg.StartAt = StartAtBeginning
	var once sync.Once
	r := &recorder{}
	handle := func(ctx context.Context, f *File, l Line) error {
		// The handler runs between two reads of the same pass: rewrite the file here, as a
		// copytruncate followed by fast writes would, already longer than the read offset.
		once.Do(func() {
			if err := os.Truncate(path, 0); err != nil {
				t.Error(err)
			}
			fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Error(err)
				return
			}
			fd.WriteString(fresh.String())
			fd.Close()
		})
		return r.handle(ctx, f, l)
	}
	tl, err := NewTailer(cfg, eachLine(handle), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the last new line", func() bool {
		for _, d := range r.data() {
			if d == "new-0199" {
				return true
			}
		}
		return false
	})
	seen := map[string]int{}
	for _, d := range r.data() {
		valid := len(d) == 8 && (strings.HasPrefix(d, "old-") || strings.HasPrefix(d, "new-"))
		// A started old line may be sent as it was when the truncation was seen (by design: its
		// bytes were in the file); nothing else that is not a whole line may appear.
		if !valid && !(len(d) < 8 && strings.HasPrefix("old-0000", d[:min(len(d), 4)])) {
			t.Errorf("record %q is no line of either content", d)
		}
		seen[d]++
	}
	for i := 0; i < 200; i++ {
		if l := fmt.Sprintf("new-%04d", i); seen[l] != 1 {
			t.Errorf("%s received %d times, want once", l, seen[l])
		}
	}
}
