package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// fakeClock is the limiter's clock in tests: a sleep moves it forward by exactly its duration,
// so the time the limiter makes lines take is exact and no test waits for it.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept int // sleeps so far
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.slept++
	return ctx.Err()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// withFakeClock makes r use a new fake clock.
func withFakeClock(r *rateLimiter) *fakeClock {
	c := newFakeClock()
	r.now, r.sleep = c.now, c.sleep
	return c
}

// near reports whether got is want within a microsecond (the float arithmetic of the buckets).
func near(got, want time.Duration) bool {
	return math.Abs(float64(got-want)) <= float64(time.Microsecond)
}

func TestRateLimiterLines(t *testing.T) {
	const rate, m = 100, 1000
	r := newRateLimiter(rate, 0)
	c := withFakeClock(r)
	start := c.now()
	for range m {
		if err := r.wait(context.Background(), 50); err != nil {
			t.Fatal(err)
		}
	}
	burst := rate * rateBurstSeconds // ten lines pass at once
	want := time.Duration((m - burst) / rate * float64(time.Second))
	if got := c.now().Sub(start); !near(got, want) {
		t.Fatalf("%d lines at %d lines/s took %v, want %v ((M - burst) / N)", m, rate, got, want)
	}
	if got := r.pausedTime(); !near(got, want) {
		t.Fatalf("paused %v, want %v", got, want)
	}
}

func TestRateLimiterBytes(t *testing.T) {
	const rate = 1000 // bytes a second: a burst of 100 bytes, less than one line
	r := newRateLimiter(0, rate)
	c := withFakeClock(r)
	start := c.now()
	for range 20 {
		if err := r.wait(context.Background(), 300); err != nil {
			t.Fatal(err)
		}
	}
	// A line longer than the burst is not stuck: it takes its bytes in debt and waits it off.
	want := time.Duration((20*300 - 100) * float64(time.Second) / rate)
	if got := c.now().Sub(start); !near(got, want) {
		t.Fatalf("20 lines of 300 bytes at %d B/s took %v, want %v", rate, got, want)
	}
}

// Both limits: each line waits for the stricter.
func TestRateLimiterBoth(t *testing.T) {
	r := newRateLimiter(10, 1000) // bursts of 1 line and 100 bytes
	c := withFakeClock(r)
	start := c.now()
	for range 11 {
		if err := r.wait(context.Background(), 10); err != nil { // 110 bytes: the line limit is the stricter
			t.Fatal(err)
		}
	}
	if got, want := c.now().Sub(start), time.Second; !near(got, want) {
		t.Fatalf("took %v, want %v (10 lines/s)", got, want)
	}
	c.advance(time.Hour) // full buckets again
	start = c.now()
	for range 3 {
		if err := r.wait(context.Background(), 1050); err != nil { // 3150 bytes: the byte limit is the stricter
			t.Fatal(err)
		}
	}
	if got, want := c.now().Sub(start), 3050*time.Millisecond; !near(got, want) {
		t.Fatalf("took %v, want %v (1000 B/s)", got, want)
	}
}

// After an idle time, the burst passes without a pause, and no more than the burst.
func TestRateLimiterBurstAfterIdle(t *testing.T) {
	r := newRateLimiter(1000, 0) // a burst of 100 lines
	c := withFakeClock(r)
	for range 500 {
		_ = r.wait(context.Background(), 1)
	}
	c.advance(time.Minute)
	before := c.slept
	for range 100 {
		_ = r.wait(context.Background(), 1)
	}
	if c.slept != before {
		t.Fatalf("%d of the burst's lines waited", c.slept-before)
	}
	_ = r.wait(context.Background(), 1)
	if c.slept != before+1 {
		t.Fatal("the line after the burst did not wait")
	}
}

// A wait ends with the run's context: shutdown is not held by the limit.
func TestRateLimiterStopsWithTheContext(t *testing.T) {
	r := newRateLimiter(0, 1) // one byte a second: a megabyte line waits for days
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.wait(ctx, 1<<20) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("wait = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end with its context")
	}
	if r.pausedTime() <= 0 {
		t.Fatal("the interrupted wait is not counted as paused")
	}
}

func TestRateLimiterOff(t *testing.T) {
	var r *rateLimiter = newRateLimiter(0, 0)
	if r != nil {
		t.Fatal("no limit must be a nil limiter (nothing on the hot path)")
	}
	if err := r.wait(context.Background(), 1<<20); err != nil || r.pausedTime() != 0 {
		t.Fatal("a nil limiter waits")
	}
}

func TestValidateRateLimit(t *testing.T) {
	for _, key := range []string{"max-lines-per-second", "max-bytes-per-second"} {
		c := DefaultConfig()
		c.Brokers, c.Topic = []string{"127.0.0.1:9092"}, "t"
		if key == "max-lines-per-second" {
			c.MaxLinesPerSecond = -1
		} else {
			c.MaxBytesPerSecond = -5
		}
		var ce *ConfigError
		found := false
		for _, e := range unjoin(c.Validate()) {
			if errors.As(e, &ce) && ce.Key == key && strings.Contains(ce.Reason, "negative") {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: error %v does not name the key", key, c.Validate())
		}
	}
}

// The agent's files and stdin go through the limiter: M lines take (M - burst) / N seconds of
// the agent's own clock, and every line is delivered.
func TestRateLimitedAgent(t *testing.T) {
	const rate, m = 200, 600
	var data bytes.Buffer
	for i := range m {
		fmt.Fprintf(&data, "line %04d\n", i)
	}
	want := time.Duration((m - rate*rateBurstSeconds) / rate * float64(time.Second))

	t.Run("files", func(t *testing.T) {
		a, _, _ := newFileAgent(t, 1, data.Bytes(), func(cfg *Config) { cfg.MaxLinesPerSecond = rate })
		c := withFakeClock(a.limit)
		start := c.now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.RunTail(ctx) }()
		waitForFile(t, a, 20*time.Second, func(fs filetail.FileStats) bool { return fs.LinesAcked == m })
		cancel()
		if err := <-done; !errors.Is(err, ErrInterrupted) {
			t.Fatalf("RunTail: %v", err)
		}
		if got := c.now().Sub(start); !near(got, want) {
			t.Fatalf("%d lines at %d lines/s took %v of the agent's clock, want %v", m, rate, got, want)
		}
		if rl := a.RateLimit(); rl.LinesPerSecond != rate || !near(rl.Paused, want) {
			t.Fatalf("RateLimit() = %+v, want %d lines/s and %v paused", rl, rate, want)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "logs"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Stdin, cfg.MaxLinesPerSecond = cl.ListenAddrs(), "logs", true, rate
		a, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := withFakeClock(a.limit)
		start := c.now()
		if err := a.RunStdin(context.Background(), bytes.NewReader(data.Bytes())); err != nil {
			t.Fatalf("RunStdin: %v", err)
		}
		if got := a.Stats().LinesAcked.Load(); got != m {
			t.Fatalf("%d lines acknowledged, want %d", got, m)
		}
		if got := c.now().Sub(start); !near(got, want) {
			t.Fatalf("%d lines at %d lines/s took %v of the agent's clock, want %v", m, rate, got, want)
		}
	})
}

// With --exactly-once a line waits for the rate limit before it takes the committer's lock: a
// long wait (a large line under --max-bytes-per-second) does not hold a commit back, which
// would let transaction.timeout.ms abort the transaction.
func TestRateLimitWaitsOutsideTheCommitLock(t *testing.T) {
	waiting, release := make(chan struct{}), make(chan struct{})
	lim := newRateLimiter(0, 1)
	lim.sleep = func(ctx context.Context, _ time.Duration) error {
		close(waiting)
		select {
		case <-release:
			return context.Canceled // the run ended: the line is not sent
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a := &Agent{limit: lim, inputs: []*input{{name: ImplicitInput, limit: lim}}}
	a.redo = newRedelivery(a)
	c := newTxnCommitter(a, "txn", nil, nil)
	handle := c.fileLinesOf(c.parts[0], &filetail.File{})
	done := make(chan error, 1)
	go func() { done <- handle(context.Background(), filetail.Line{Data: make([]byte, 1000)}) }()
	<-waiting
	locked := make(chan struct{})
	go func() {
		c.mu.Lock() // what a commit takes
		c.mu.Unlock()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("the commit lock is held while a line waits for the rate limit")
	}
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler returned %v, want the wait's error", err)
	}
}
