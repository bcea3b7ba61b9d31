package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestConnectAndFileStats: Connect fetches the topic's metadata before any line; FileStats
// shows the followed file while RunTail runs; Connect after the agent stopped is not an error.
func TestConnectAndFileStats(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Tail, cfg.StartAt, cfg.StateDir = c.ListenAddrs(), "logs", []string{path}, "beginning", dir
	cfg.Producer["max.block.ms"] = "2000"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fs := a.FileStats(); fs != nil {
		t.Fatalf("FileStats before RunTail: %+v", fs)
	}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.RunTail(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fs := a.FileStats()
		if len(fs) == 1 && fs[0].LinesAcked == 3 {
			if fs[0].Path != path || fs[0].Size != 14 || fs[0].ReadOffset != 14 {
				t.Errorf("file stats %+v", fs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file stats after 20s: %+v", fs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v", err)
	}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatalf("Connect after the agent stopped: %v, want nil", err)
	}
}
