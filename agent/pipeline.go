package agent

import (
	"sync"
	"sync/atomic"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
)

// pipeline is an input's way from a line to a record: its rules (topic or template, key,
// headers, format, filters: package linerecord) and a builder for each goroutine that sends
// its lines.
type pipeline struct {
	rules    *linerecord.Rules
	builders sync.Pool // *linerecord.Builder
}

// newPipeline compiles c; the builders count what the format fell back on into stats.
func newPipeline(c linerecord.Config, stats *linerecord.EncodingStats) (*pipeline, error) {
	rules, err := linerecord.Compile(c, stats)
	if err != nil {
		return nil, err
	}
	p := &pipeline{rules: rules}
	p.builders.New = func() any { return rules.NewBuilder() }
	return p, nil
}

// builder takes a builder for the calling goroutine; put gives it back once its record is
// sent (Send copies it).
func (p *pipeline) builder() *linerecord.Builder { return p.builders.Get().(*linerecord.Builder) }

func (p *pipeline) put(b *linerecord.Builder) { p.builders.Put(b) }

// input is one source of lines the agent runs: its name, its effective configuration (the top
// level's with what its `inputs:` entry sets), its pipeline, and, while RunTail runs, its
// tailer. Inputs share the producer, the read-ahead budget, the rate limit, the redelivery and
// the dead-letter destinations; each keeps its own checkpoints (inputStateDir).
type input struct {
	name   string
	cfg    Config
	line   *pipeline
	tailer atomic.Pointer[filetail.Tailer]
	// limit is the rate limit its lines wait for: the agent's, shared, unless the input sets
	// its own (NamedConfig.OwnRateLimit). nil: none.
	limit *rateLimiter
	// cancel ends the tailer's Run, which closes done (startInput; RunTail only).
	cancel func()
	done   chan struct{}

	// stopped is why the redelivery stopped sending this input's lines (a refusal about the
	// configuration or the cluster met by one of them), nil while they go; probing says its
	// oldest stopped line is out as the probe (under redelivery.mu). outstanding counts its
	// lines the redelivery holds. Another input's lines go on meanwhile.
	stopped     atomic.Pointer[stopState]
	probing     bool
	outstanding atomic.Int64
}

// newInputs builds the inputs of cfg (Config.InputConfigs), counting what their formats fell
// back on into stats.
func newInputs(cfg *Config, stats *linerecord.EncodingStats, shared *rateLimiter, onTopic func(topic, template string)) ([]*input, error) {
	named, err := cfg.InputConfigs()
	if err != nil {
		return nil, err
	}
	out := make([]*input, 0, len(named))
	for _, n := range named {
		in, err := newInput(n, cfg.StateDir, stats, shared, onTopic)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// newInput builds the input of n, whose checkpoints are kept under stateDir (inputStateDir),
// and whose lines wait for the shared rate limit unless it has its own.
// onTopic hears of each topic a template names first (linerecord.Config.OnTopic); may be nil.
func newInput(n NamedConfig, stateDir string, stats *linerecord.EncodingStats, shared *rateLimiter,
	onTopic func(topic, template string)) (*input, error) {
	lc := n.LineConfig()
	lc.OnTopic = onTopic
	p, err := newPipeline(lc, stats)
	if err != nil {
		return nil, err
	}
	n.StateDir = inputStateDir(stateDir, n.Name)
	in := &input{name: n.Name, cfg: n.Config, line: p, limit: shared}
	if n.OwnRateLimit {
		in.limit = newRateLimiter(n.MaxLinesPerSecond, n.MaxBytesPerSecond)
	}
	return in, nil
}
