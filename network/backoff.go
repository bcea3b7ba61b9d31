package network

import (
	"math"
	"math/rand/v2"
	"time"
)

// exponentialBackoff is the Java client's ExponentialBackoff: initial * multiplier^attempts,
// capped at max, scaled by a random factor in [1-jitter, 1+jitter] so that clients that failed
// together do not retry together.
//
// It is not safe for concurrent use: its random source belongs to the sender goroutine.
type exponentialBackoff struct {
	initial    time.Duration
	multiplier float64
	max        time.Duration
	jitter     float64
	expMax     float64 // attempts beyond which the term stops growing
	rnd        *rand.Rand
}

func newExponentialBackoff(initial time.Duration, multiplier float64, maxInterval time.Duration, jitter float64, rnd *rand.Rand) *exponentialBackoff {
	b := &exponentialBackoff{initial: initial, multiplier: multiplier, max: maxInterval, jitter: jitter, rnd: rnd}
	if maxInterval > initial {
		b.expMax = math.Log(float64(maxInterval)/float64(max(initial, time.Millisecond))) / math.Log(multiplier)
	}
	return b
}

// backoff returns the wait after attempts failures (0 for the first wait).
func (b *exponentialBackoff) backoff(attempts int) time.Duration {
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
