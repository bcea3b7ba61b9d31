package agent

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The rate limit (--max-lines-per-second, --max-bytes-per-second) slows reading down: a line
// waits before it is handed to sendLine until the limit allows it, which pauses its file (or
// stdin), and nothing is dropped. One limiter serves every file and stdin, so the limit is the
// agent's, not a file's.
//
// It is a token bucket per dimension. A bucket holds at most a tenth of a second's worth of
// tokens (at least one line, or one byte), so after an idle time a burst of at most that
// much passes at once and the rate over any second stays within the limit plus a tenth. A
// line takes its tokens even when the bucket does not hold enough (a line longer than the
// byte burst is never stuck): the bucket goes into debt and the line waits until the debt is
// paid back, so the waits of the lines that follow add up to exactly the rate. This is how
// golang.org/x/time/rate's reservations work.

// rateBurstSeconds is the bucket's size in seconds of the rate.
const rateBurstSeconds = 0.1

// rateLimiter is safe for concurrent use. A nil *rateLimiter is no limit.
type rateLimiter struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error // returns ctx.Err() when ctx ends first

	mu           sync.Mutex
	lines, bytes tokenBucket

	// paused is the total time lines spent waiting, in nanoseconds, for the status page and
	// the metrics. Concurrent waits each count.
	paused atomic.Int64
}

// tokenBucket is one dimension of the limit; rate 0 is no limit on it. Under rateLimiter.mu.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// newRateLimiter returns the limiter for linesPerSecond and bytesPerSecond (0: no limit on
// that one), or nil when both are 0.
func newRateLimiter(linesPerSecond, bytesPerSecond int) *rateLimiter {
	if linesPerSecond <= 0 && bytesPerSecond <= 0 {
		return nil
	}
	r := &rateLimiter{now: time.Now, sleep: sleepCtx}
	r.lines.init(float64(linesPerSecond))
	r.bytes.init(float64(bytesPerSecond))
	return r
}

func (b *tokenBucket) init(rate float64) {
	if rate <= 0 {
		return
	}
	b.rate = rate
	b.burst = max(rate*rateBurstSeconds, 1)
	b.tokens = b.burst
}

// take takes n tokens at now and returns how long the taker must wait for the debt it leaves.
func (b *tokenBucket) take(now time.Time, n float64) time.Duration {
	if b.rate == 0 {
		return 0
	}
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// wait takes one line of size bytes and waits until the limit allows it, or until ctx ends
// (its error: the line is not sent, the run is ending).
func (r *rateLimiter) wait(ctx context.Context, size int) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	now := r.now()
	d := max(r.lines.take(now, 1), r.bytes.take(now, float64(size)))
	r.mu.Unlock()
	if d <= 0 {
		return nil
	}
	err := r.sleep(ctx, d)
	r.paused.Add(int64(r.now().Sub(now)))
	return err
}

// pausedTime is the total time lines waited for the limit.
func (r *rateLimiter) pausedTime() time.Duration {
	if r == nil {
		return 0
	}
	return time.Duration(r.paused.Load())
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RateLimit describes the configured rate limit and the time reading spent paused by it.
type RateLimit struct {
	LinesPerSecond, BytesPerSecond int // 0: no limit
	Paused                         time.Duration
}

// RateLimit returns the rate limit and the time spent paused by it so far. Safe to call from
// any goroutine.
func (a *Agent) RateLimit() RateLimit {
	return RateLimit{LinesPerSecond: a.cfg.MaxLinesPerSecond, BytesPerSecond: a.cfg.MaxBytesPerSecond,
		Paused: a.ratePaused()}
}

// ratePaused is the time lines waited for a rate limit: the shared one's and every input's own
// (those stopped by a reload too).
func (a *Agent) ratePaused() time.Duration {
	d := a.limit.pausedTime()
	a.inputsMu.RLock()
	defer a.inputsMu.RUnlock()
	for _, in := range slices.Concat(a.inputs, a.retired) {
		if in.limit != a.limit {
			d += in.limit.pausedTime()
		}
	}
	return d
}

// validateRateLimit checks the rate limit's keys.
func (c *Config) validateRateLimit(bad func(key, format string, args ...any)) {
	if c.MaxLinesPerSecond < 0 {
		bad("max-lines-per-second", "must not be negative (0: no limit), got %d", c.MaxLinesPerSecond)
	}
	if c.MaxBytesPerSecond < 0 {
		bad("max-bytes-per-second", "must not be negative (0: no limit), got %d", c.MaxBytesPerSecond)
	}
}
