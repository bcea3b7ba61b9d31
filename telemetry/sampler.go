package telemetry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// samplerFromConfig returns the sampler that decides which records (and other root spans) are
// traced, and whether tracing can produce anything at all (false for a ratio of 0 and
// always_off, so the observer skips even the decision). Precedence: an explicit ratio
// (the agent's --trace-sample-ratio), then OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// then parent-based DefaultSampleRatio.
func samplerFromConfig(ratio *float64, env Env) (sdktrace.Sampler, bool, error) {
	if ratio != nil {
		if *ratio < 0 || *ratio > 1 {
			return nil, false, fmt.Errorf("trace sample ratio %v: must be between 0 and 1", *ratio)
		}
		// Still on at 0: a line whose trace context is sampled is traced (parent-based).
		return newParentRatio(*ratio), true, nil
	}
	name := env.Sampler
	if name == "" {
		return newParentRatio(DefaultSampleRatio), true, nil
	}
	arg := env.SamplerArg
	argRatio := func() (float64, error) {
		if arg == "" {
			return 1, nil // the specification's default for the ratio samplers
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), true, nil
	case "always_off":
		return sdktrace.NeverSample(), false, nil
	case "traceidratio":
		r, err := argRatio()
		if err != nil {
			return nil, false, err
		}
		return sdktrace.TraceIDRatioBased(r), r > 0, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), true, nil
	case "parentbased_always_off":
		// Still on: a line whose trace context is sampled is traced.
		return sdktrace.ParentBased(sdktrace.NeverSample()), true, nil
	case "parentbased_traceidratio":
		r, err := argRatio()
		if err != nil {
			return nil, false, err
		}
		return newParentRatio(r), true, nil
	}
	return nil, false, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: supported are always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

// parentRatio is ParentBased(TraceIDRatioBased(ratio)), whose decision for a root (a record
// whose log line carried no trace context: nearly all of them) StartSend takes itself:
// TraceIDRatioBased samples when the trace id's last 8 bytes, shifted right once, are below
// ratio * 2^63. Asking the SDK sampler costs far more a record (its parameters are large structs
// copied through interfaces); instead sampleRoot draws those 8 bytes and compares them, the
// SDK's own rule. The draw is the runtime's per-thread generator: no state shared between the
// goroutines that send, and each record an independent coin.
type parentRatio struct {
	sdktrace.Sampler
	bound uint64 // 0 when no root is ever sampled (ratio 0)
	// th is the sampling threshold of OpenTelemetry's consistent probability sampling for the
	// same probability (otThreshold), and thValue its tracestate form ("th:fd70a3d70a3d71");
	// thValue is empty when the probability is too small to express.
	th      uint64
	thValue string
}

func newParentRatio(ratio float64) parentRatio {
	s := parentRatio{Sampler: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))}
	switch {
	case ratio >= 1:
		s.bound = 1 << 63
	case ratio > 0:
		s.bound = uint64(ratio * (1 << 63)) // as TraceIDRatioBased computes it
	}
	if s.bound > 0 {
		p := float64(s.bound) / (1 << 63)
		if th, ok := otThreshold(p); ok {
			s.th, s.thValue = th, "th:"+formatThreshold(th)
		}
	}
	return s
}

// otMaxAdjustedCount is 2^56: OpenTelemetry's consistent probability sampling compares 56 bits
// of randomness (R) with a rejection threshold (T), and samples when R >= T.
const otMaxAdjustedCount = 1 << 56

// otThreshold returns the rejection threshold T of probability p, 2^56 - round(p * 2^56), as
// the specification's "TraceState: Probability Sampling" and the Collector's
// pkg/sampling.ProbabilityToThreshold compute it at full precision; false when p is below
// 2^-56 (not expressible) or above 1.
func otThreshold(p float64) (uint64, bool) {
	if p < 1.0/otMaxAdjustedCount || p > 1 {
		return 0, false
	}
	return otMaxAdjustedCount - uint64(math.Round(p*otMaxAdjustedCount)), true
}

// formatThreshold is a threshold's tracestate form: 14 hex digits without their trailing
// zeros, and "0" for 0 (every trace sampled).
func formatThreshold(th uint64) string {
	if th == 0 {
		return "0"
	}
	return strings.TrimRight(fmt.Sprintf("%014x", th), "0")
}

// traceState returns the tracestate of a root this sampler sampled: the OpenTelemetry entry
// with the threshold and an explicit randomness value (`ot=th:…;rv:…`), so that a collector
// computes the span's adjusted count (1/p) and a consistent sampler downstream decides on
// it. The randomness is explicit because the trace id's low bits are drawn for
// TraceIDRatioBased (sampleRoot), not uniform over the 56 bits the threshold compares: rv is
// uniform among the values the threshold keeps, as a consistent sampler's sampled traces' are.
// It is empty when the probability cannot be expressed. header is the tracestate's header
// value (what traceStateValue returns of a span context holding it), nil when it is empty.
func (s parentRatio) traceState() (ts trace.TraceState, header []byte) {
	if s.thValue == "" {
		return trace.TraceState{}, nil
	}
	rv := s.th + rand.Uint64N(otMaxAdjustedCount-s.th)
	// Built by hand, the header with it: fmt.Sprintf and TraceState.String were most of a
	// traced record's start.
	header = make([]byte, 0, len("ot=")+len(s.thValue)+len(";rv:")+14)
	header = append(append(append(header, "ot="...), s.thValue...), ";rv:"...)
	header = appendHex14(header, rv)
	ts, err := trace.TraceState{}.Insert("ot", string(header[len("ot="):]))
	if err != nil {
		return trace.TraceState{}, nil // cannot happen: the value is hex, colons and a semicolon
	}
	return ts, header
}

// appendHex14 appends v's 14 low hex digits (56 bits), zero-padded, as %014x does.
func appendHex14(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 52; shift >= 0; shift -= 4 {
		b = append(b, digits[v>>uint(shift)&0xf])
	}
	return b
}

// sampleRoot decides a root record: it returns false, or true and the low half of a trace id
// that TraceIDRatioBased at the ratio samples (uniform among those: it is the number drawn), so
// that a downstream sampler of the same ratio keeps the trace.
func (s parentRatio) sampleRoot() (lo uint64, ok bool) {
	if s.bound == 0 {
		return 0, false
	}
	lo = rand.Uint64()
	return lo, lo>>1 < s.bound
}

// decidedKey marks a context whose span the observer already decided to sample.
type decidedKey struct{}

// markDecided returns ctx marked so that providerSampler samples spans started from it, with
// state as their tracestate (when it is empty, the parent's).
func markDecided(ctx context.Context, state trace.TraceState) context.Context {
	return context.WithValue(ctx, decidedKey{}, state)
}

// providerSampler is the tracer provider's sampler. The observer decides whether a record is
// traced before it starts any span (so an unsampled record allocates nothing), and marks the
// context of a sampled one; this sampler honours that mark, so the SDK does not decide a second
// time on a trace id of its own, and leaves every other span to the configured sampler.
type providerSampler struct{ inner sdktrace.Sampler }

// ProviderSampler wraps a sampler for a TracerProvider that a ProducerObserver records into: it
// samples the spans whose record the observer decided to trace and asks inner about the rest.
// Setup installs it; tests that build their own provider use it too.
func ProviderSampler(inner sdktrace.Sampler) sdktrace.Sampler { return providerSampler{inner: inner} }

func (s providerSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.ParentContext != nil {
		if state, ok := p.ParentContext.Value(decidedKey{}).(trace.TraceState); ok {
			if state.Len() == 0 {
				state = trace.SpanContextFromContext(p.ParentContext).TraceState()
			}
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: state}
		}
	}
	return s.inner.ShouldSample(p)
}

func (s providerSampler) Description() string {
	return "KafkatrailDecided{" + s.inner.Description() + "}"
}
