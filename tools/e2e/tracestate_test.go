package e2e

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAgentSamplingProbabilityInJaeger runs the agent at a head sampling ratio of 1/4 and
// reads its traces back from Jaeger with the OpenTelemetry Collector's own tracestate parser
// (pkg/sampling): every sampled record's spans carry `ot=th:c` with a randomness value that
// threshold keeps, so each counts for 4 records, and the adjusted counts add up to the lines
// sent (within five standard deviations). The records themselves carry the same tracestate in
// a header beside their traceparent, as a consumer reads them.
func TestAgentSamplingProbabilityInJaeger(t *testing.T) {
	const service, lines, p = "kafkatrail-agent-sampling", 800, 0.25
	topic, jaegerURL := runTracingAgent(t, "agent (sampling probability)", "e2e-sampling", service,
		[]string{"--trace-sample-ratio", fmt.Sprint(p)}, nil, lines,
		func(i int) string { return fmt.Sprintf("e2e sampled line %d", i) })

	// The records: those that carry a tracestate header, by trace id.
	headers := map[string]string{}
	bootstrap := backend(t, "KAFKA_BOOTSTRAP")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for read := 0; read < lines; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of %d records read back: %v", read, lines, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			var tp, ts string
			for _, h := range r.Headers {
				switch h.Key {
				case "traceparent":
					tp = string(h.Value)
				case "tracestate":
					ts = string(h.Value)
				}
			}
			if ts != "" {
				if len(tp) != 55 {
					t.Fatalf("record %d has tracestate %q and traceparent %q", r.Offset, ts, tp)
				}
				headers[tp[3:35]] = ts
			}
		})
	}

	op := "send " + topic
	var traces jaegerTraces
	err = poll(ctx, 30*time.Second, 300*time.Millisecond, func() (bool, error) {
		q := url.Values{"service": {service}, "operation": {op}, "limit": {"2000"}, "lookback": {"1h"}}
		if err := getJSON(ctx, jaegerURL, "/api/traces", q, &traces); err != nil {
			return false, err
		}
		if len(traces.Data) != len(headers) {
			return false, fmt.Errorf("%d traces of %q in Jaeger, %d records with a tracestate header", len(traces.Data), op, len(headers))
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var adjusted float64
	for _, tr := range traces.Data {
		for _, s := range tr.Spans {
			var state string
			for _, tag := range s.Tags {
				if tag.Key == "w3c.tracestate" {
					state = fmt.Sprint(tag.Value)
				}
			}
			w3c, err := sampling.NewW3CTraceState(state)
			if err != nil {
				t.Fatalf("trace %s, span %s: tracestate %q: %v", tr.TraceID, s.OperationName, state, err)
			}
			ot := w3c.OTelValue()
			th, hasTh := ot.TValueThreshold()
			rnd, hasRv := ot.RValueRandomness()
			if !hasTh || !hasRv || !th.ShouldSample(rnd) || ot.AdjustedCount() != 1/p {
				t.Fatalf("trace %s, span %s: tracestate %q: threshold %v (%v), randomness (%v), adjusted count %v; want th:c with a kept rv, adjusted count %v",
					tr.TraceID, s.OperationName, state, th.TValue(), hasTh, hasRv, ot.AdjustedCount(), 1/p)
			}
			if s.OperationName == op {
				adjusted += ot.AdjustedCount()
				if h, ok := headers[tr.TraceID]; !ok || h != state {
					t.Fatalf("trace %s: the record's tracestate header %q (%v), its span's %q", tr.TraceID, h, ok, state)
				}
			}
		}
	}
	sigma := math.Sqrt(lines*p*(1-p)) / p
	if math.Abs(adjusted-lines) > 5*sigma {
		t.Fatalf("adjusted counts add up to %.0f, want %d ± %.0f", adjusted, lines, 5*sigma)
	}
	t.Logf("%d traces in Jaeger, each span's tracestate read by the Collector's pkg/sampling: adjusted count %v each, %.0f in all for %d lines",
		len(traces.Data), 1/p, adjusted, lines)
}
