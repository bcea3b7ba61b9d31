package agent

import (
	"sync"

	"github.com/kafkatrail/kafkatrail/linerecord"
)

// pipeline is an input's way from a line to a record: its rules (topic or template, key,
// headers, format: package linerecord) and a builder for each goroutine that sends its lines.
// The agent has one, the input its flags and environment describe.
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
