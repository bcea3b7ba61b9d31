package linerecord

import (
	"fmt"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/producer"
)

// defaultConfig is the agent's defaults for lines (agent.DefaultConfig's), topic "t", on host
// test-host (the agent's default is the system's host name).
func defaultConfig() Config {
	return Config{Topic: "t", MaxTopics: 100, HeaderPath: "source.path", HeaderHost: "source.host", HostName: "test-host",
		Format: FormatRaw, TimestampLayout: "rfc3339", MaxRequestSize: 1 << 20}
}

// check is Validate's first error, nil without one.
func (c *Config) check() error {
	var first error
	c.Validate(func(key, format string, args ...any) {
		if first == nil {
			first = &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)}
		}
	})
	return first
}

// newRecordBuilder is a builder of c with rules of its own.
func newRecordBuilder(c *Config) *Builder {
	r, err := Compile(*c, nil)
	if err != nil {
		panic(err)
	}
	return r.NewBuilder()
}

// buildLine is Build without its routing error.
func (b *Builder) buildLine(l filetail.Line, path string) *producer.Record {
	r, _ := b.Build(l, path)
	return r
}
