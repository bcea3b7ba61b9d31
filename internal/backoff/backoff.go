// Package backoff is the Java client's ExponentialBackoff (org.apache.kafka.common.utils), which
// the connection states, the accumulator's retries and the metadata refreshes share.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Multiplier and Jitter are the Java client's RETRY_BACKOFF_EXP_BASE and RETRY_BACKOFF_JITTER
// (CommonClientConfigs), which every exponential backoff of the producer uses (KIP-580).
const (
	Multiplier = 2
	Jitter     = 0.2
)

// Exponential is the Java client's ExponentialBackoff: initial * multiplier^attempts, capped at
// max, scaled by a random factor in [1-jitter, 1+jitter] so that clients that failed together
// do not retry together. With max at or below initial it is a constant max, without jitter.
//
// It is not safe for concurrent use: its random source belongs to one goroutine (the sender's).
type Exponential struct {
	initial    time.Duration
	multiplier float64
	max        time.Duration
	jitter     float64
	expMax     float64 // attempts beyond which the term stops growing
	rnd        *rand.Rand
}

// New returns the backoff from initial to maxInterval; rnd is the jitter's source.
func New(initial time.Duration, multiplier float64, maxInterval time.Duration, jitter float64, rnd *rand.Rand) *Exponential {
	b := &Exponential{initial: min(initial, maxInterval), multiplier: multiplier, max: maxInterval, jitter: jitter, rnd: rnd}
	if maxInterval > initial {
		b.expMax = math.Log(float64(maxInterval)/float64(max(initial, time.Millisecond))) / math.Log(multiplier)
	}
	return b
}

// Backoff returns the wait after attempts failures (0 for the first wait).
func (b *Exponential) Backoff(attempts int) time.Duration {
	if b.expMax == 0 {
		return b.initial
	}
	exp := min(float64(attempts), b.expMax)
	term := float64(b.initial) * math.Pow(b.multiplier, exp)
	factor := 1.0
	if b.jitter >= math.SmallestNonzeroFloat64 {
		lo, hi := 1-b.jitter, 1+b.jitter
		factor = lo + b.rnd.Float64()*(hi-lo)
	}
	d := time.Duration(factor * term)
	return min(d, b.max)
}
