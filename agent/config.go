package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// Config is the agent's configuration. One struct feeds the command line (every field is a
// flag of the same name), the YAML config file (the same names as keys), the environment
// (KAFKATRAIL_ and the name in upper case with '-' as '_', env.go) and the README's reference.
// Producer properties live under `producer` by their Java names (`-X linger.ms=10`,
// `producer: {linger.ms: 10}`, KAFKATRAIL_PRODUCER_LINGER_MS=10).
type Config struct {
	Brokers []string `koanf:"brokers" doc:"Kafka bootstrap servers, HOST:PORT[,HOST:PORT] (sets bootstrap.servers)"`
	Topic   string   `koanf:"topic" doc:"topic every line is sent to, or a template such as logs-{service}: {name} is a JSON field of the line (a.b for a nested one), a --parse-regex group, or {host}, {file.name}, {file.dir}"`
	Tail    []string `koanf:"tail" doc:"file path or glob to follow; repeat for more (re-scanned for new files)"`
	// Inputs are the file's `inputs:` entries, each a map of its keys (InputConfigs reads them).
	Inputs []map[string]any `koanf:"inputs" doc:"in the file only: more inputs, each {name, tail (or stdin: true), and any of the keys of how lines become records: topic, format, multiline, key, header, include-lines, exclude-lines, redact, ...}; a key an input leaves out takes the top level's value. All inputs share one producer (its connections and buffer.memory), the read-ahead budget and the dead-letter file; an input that sets a rate limit key has a limit of its own. See Inputs"`
	Stdin  bool             `koanf:"stdin" doc:"read lines from standard input (the default when no --tail is given and stdin is not a terminal)"`

	KeyField string `koanf:"key-field" doc:"record key from this field of a JSON line (dotted path for a nested field: a.b)"`
	Key      string `koanf:"key" doc:"record key as a template like --topic's, such as {k8s.namespace.name}/{k8s.pod.name}/{k8s.container.name} to keep each container's lines in order on one partition; a line that lacks a part gets no key"`
	KeyRegex string `koanf:"key-regex" doc:"record key from the first capture group of this regular expression"`

	// Routing and headers (linerecord/route.go, linerecord/template.go).
	ParseRegex    string   `koanf:"parse-regex" doc:"regular expression matched against each line; its named groups, (?P<name>...), are {name} in --topic and --header templates"`
	FallbackTopic string   `koanf:"fallback-topic" doc:"with a --topic template: topic of the lines it cannot route (a part missing from the line, an illegal topic name, a topic beyond --max-topics); empty: such a line fails alone, counted"`
	MaxTopics     int      `koanf:"max-topics" doc:"with a --topic template: the most distinct topics it may route lines to, at most 10000 (the fallback topic not counted); the lines of any further topic go to --fallback-topic, or fail"`
	Header        []string `koanf:"header" doc:"record header KEY=VALUE, VALUE a template like --topic's (a header whose value the line lacks is omitted); repeat for more"`

	// Filters and redaction (linerecord/filter.go), before anything else is made of a line.
	IncludeLines []string               `koanf:"include-lines" doc:"regular expression: only lines that match one of these are sent (repeat for more; in the environment one per line). A line left out is counted (kafkatrail.agent.lines.dropped, reason not_included) and its file's checkpoint moves past it"`
	ExcludeLines []string               `koanf:"exclude-lines" doc:"regular expression: lines that match one of these are not sent, after --include-lines (repeat for more; in the environment one per line); counted (reason excluded), the checkpoint moves past them"`
	Redact       []linerecord.Redaction `koanf:"redact" doc:"PATTERN=>REPLACEMENT (in the file also {pattern: ..., replacement: ...}): every match of the regular expression PATTERN in a kept line is replaced (REPLACEMENT may use $1 or ${name} for the match's groups; without =>, [REDACTED]) before the line is routed, keyed and sent, so the masked text is in no record, header, span, log line or dead letter. Rules apply in order; repeat for more (in the environment one per line)"`

	StateDir           string        `koanf:"state-dir" doc:"directory of the checkpoint file (file offsets acknowledged by Kafka)"`
	StartAt            string        `koanf:"start-at" doc:"where to start in a file seen for the first time: beginning or end (a saved checkpoint always wins)"`
	MaxLineBytes       int           `koanf:"max-line-bytes" doc:"longest line sent as one record; 0: max.request.size less 16 KiB of room for headers and framing"`
	LongLines          string        `koanf:"long-lines" doc:"what to do with a longer line: truncate, split or drop (each counted and logged)"`
	PartialLineIdle    time.Duration `koanf:"partial-line-idle" doc:"a last line without a newline is sent after the file has not grown for this long"`
	MaxInFlightBytes   int           `koanf:"max-in-flight-bytes" doc:"bytes of file lines read and not yet acknowledged, across all files; reading pauses there (the files are the buffer). 0: what the producer can have in flight, (max.in.flight.requests.per.connection + 1) x the topic's partitions x batch.size (known once its metadata is: 32 x batch.size until then), at least 2 MiB and at most buffer.memory"`
	CheckpointInterval time.Duration `koanf:"checkpoint-interval" doc:"how often acknowledged file positions are saved to the state directory (write, fsync, rename), at most: while lines flow, once per interval; a file whose every line read is acknowledged is saved at once when the last save is an interval old, else an interval after it; after a crash, lines acknowledged since the last save are sent again: a shorter interval means fewer duplicates and more fsyncs"`
	DeadLetterTopic    string        `koanf:"dead-letter-topic" doc:"topic of the lines Kafka refuses for good because of the line itself (too large, invalid, a topic policy, a line the --topic template cannot route): each keeps its key and headers and gains kafkatrail.dead_letter.* headers naming the error, the topic, the source and offset; a line this topic refuses too goes to the dead-letter file. Empty: the dead-letter file only"`
	DeadLetterMaxBytes int           `koanf:"dead-letter-max-bytes" doc:"largest size of the dead-letter file, dead-letters.jsonl in --state-dir (one JSON object a line). Once full it takes nothing more: sending stops (nothing is dropped; /readyz says why) until the file is moved away; a dead letter larger than this stops sending too (a stdin line fails at once)"`
	ShutdownTimeout    time.Duration `koanf:"shutdown-timeout" doc:"on SIGINT/SIGTERM or end of stdin, how long to wait for acknowledgements before giving up"`

	Multiline         string        `koanf:"multiline" doc:"join the lines of a stack trace into one record: java or python (see Multiline events); empty: off, unless multiline-start or multiline-continue is set"`
	MultilineStart    string        `koanf:"multiline-start" doc:"regular expression (Go syntax): a line that matches starts an event, and the lines after it that do not are appended to it with their newlines"`
	MultilineContinue string        `koanf:"multiline-continue" doc:"regular expression (Go syntax): a line that matches is appended to the event before it, with its newline (set this or multiline-start)"`
	MultilineTimeout  time.Duration `koanf:"multiline-timeout" doc:"a pending event is sent once its file (or stdin) has not grown for this long: its next line could still have continued it"`
	MultilineMaxLines int           `koanf:"multiline-max-lines" doc:"most lines of one event: a longer event, like one longer than max-line-bytes, goes by long-lines (truncated, split into parts or dropped whole)"`

	ContainerFormat string `koanf:"container-format" doc:"a container runtime's framing taken off each line (see Kubernetes): cri (containerd, CRI-O), docker (json-file), auto (per file: its first line in either format decides, lines before it that are neither go as they are) or off. The message alone is the record, the pieces of a line the runtime cut at 16 KiB are joined (under long-lines), the runtime's time is the record's CreateTime, the stream is kept; a line not in the format goes as it is, counted. Empty: auto for files under /var/log/containers and /var/log/pods, off for other files and stdin"`

	HeaderPath  string `koanf:"header-path" doc:"name of the record header carrying the source file path; empty: none"`
	HeaderHost  string `koanf:"header-host" doc:"name of the record header carrying the host name; empty: none"`
	HostName    string `koanf:"host-name" doc:"the host name that lines carry (host.name in the JSON envelope, the header-host header, {host} in templates) and that the default transactional-id is made from; empty: the system's host name. In a Kubernetes pod, where that is the pod's name, set it to the node's (the chart sets KAFKATRAIL_HOST_NAME from spec.nodeName)"`
	TraceHeader string `koanf:"trace-header" doc:"record header for a W3C trace context found in the line (traceparent, or trace_id and span_id JSON fields); empty: none"`

	// Encodings and timestamps: envelope.go, timestamp.go.
	Format          string `koanf:"format" doc:"record value: raw (the line, byte for byte), json (an ECS-style JSON envelope: @timestamp, message, host.name, log.file.path or input.type stdin, log.offset) or json-merge (a line that is a JSON object, with those fields added where it has none of its own; any other line as json)"`
	TimestampField  string `koanf:"timestamp-field" doc:"JSON field of the line (dotted path for a nested field) holding the event time: it becomes the record's CreateTime and @timestamp; a line without it, or with one that does not parse, gets the read time (counted, never failed). Empty: the read time"`
	TimestampLayout string `koanf:"timestamp-layout" doc:"how --timestamp-field is written: rfc3339 (fractional seconds accepted), rfc3339nano, unix, unix_ms, unix_us, unix_ns (a number, or a string of one), or a Go time layout such as 2006-01-02 15:04:05.000 (UTC unless it has a zone)"`

	TraceSampleRatio float64 `koanf:"trace-sample-ratio" doc:"share of records traced, 0 to 1 (a line's own sampled trace context is always followed); -1: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else 0.01"`
	TraceSlowerThan  string  `koanf:"trace-slower-than" doc:"also trace every record whose Send-to-acknowledgement latency exceeds this duration (e.g. 250ms), whatever the sampling said; p99: follow the moving p99; empty: off. At most 1000 such traces a second"`
	TraceBatchStages string  `koanf:"trace-batch-stages" doc:"where a batch's stages (drain, doSend, completedSend, completedReceive) are exported: per-record (in every traced record's trace) or per-batch (once per batch attempt, in the trace of its first traced record; the others link to it: about half the bytes a traced record at high sampling ratios)"`

	LogLevel  string `koanf:"log-level" doc:"debug, info, warn or error"`
	LogFormat string `koanf:"log-format" doc:"text or json; default: text on a terminal, json otherwise"`

	HTTP string `koanf:"http" doc:"HOST:PORT of the agent's own page: / (live status and recent traces), /healthz, /readyz, /metrics (Prometheus), /api/status, /api/traces; empty: off. It has no authentication: keep it on 127.0.0.1 or behind a firewall"`

	// Rate limit: reading slows down to these, across all files and stdin (ratelimit.go).
	MaxLinesPerSecond int `koanf:"max-lines-per-second" doc:"read at most this many lines a second, across all files and stdin: reading pauses (nothing is dropped), with a burst of a tenth of a second's worth; the time paused is on the status page and in kafkatrail.agent.rate_limit.wait; 0: no limit"`
	MaxBytesPerSecond int `koanf:"max-bytes-per-second" doc:"read at most this many bytes of lines a second, across all files and stdin, as max-lines-per-second does for lines; 0: no limit"`

	ExactlyOnce     bool          `koanf:"exactly-once" doc:"send the lines of followed files exactly once (only with --tail or inputs; every input in one transaction): lines and file positions are committed together in Kafka transactions, and a restart resumes at the last commit, read from --state-topic; consumers must read with isolation.level=read_committed"`
	TransactionalID string        `koanf:"transactional-id" doc:"with --exactly-once: the producer's transactional.id, the same across restarts of one agent and different for every agent; default: kafkatrail-HOST-HASH, HASH from --state-topic and the --tail patterns"`
	StateTopic      string        `koanf:"state-topic" doc:"with --exactly-once: compacted topic of the committed file positions (created with 1 partition if missing; an existing topic must have cleanup.policy=compact)"`
	CommitInterval  time.Duration `koanf:"commit-interval" doc:"with --exactly-once: how often the transaction is committed; read_committed consumers see a line up to this much later"`
	CommitMaxLines  int           `koanf:"commit-max-lines" doc:"with --exactly-once: commit as soon as a transaction holds this many lines"`

	Producer map[string]string `koanf:"producer" doc:"producer properties by their Java names (-X key=value)"`
}

// EffectiveMaxInFlightBytes is max-in-flight-bytes, or its default for the producer
// configuration pc before the topic's partitions are known: 32 batches, at least
// DefaultMinInFlightBytes, at most buffer.memory (which bounds it anyway).
func (c *Config) EffectiveMaxInFlightBytes(pc producer.Config) int64 {
	return c.MaxInFlightBytesFor(pc, 0)
}

// MaxInFlightBytesFor is max-in-flight-bytes, or its default once the topic is known to have
// partitions partitions (0: not known): as much as the producer itself can have unacknowledged,
// a batch filling and max.in.flight.requests.per.connection requests in flight, each with a
// batch of every partition (RecordAccumulator.drainBatchesForOneNode takes one per partition),
// so that the read-ahead never caps a broker the producer could keep busy; at least
// DefaultMinInFlightBytes, at most buffer.memory.
func (c *Config) MaxInFlightBytesFor(pc producer.Config, partitions int) int64 {
	if c.MaxInFlightBytes > 0 {
		return int64(c.MaxInFlightBytes)
	}
	want := 32 * int64(pc.BatchSize)
	if partitions > 0 {
		want = int64(pc.MaxInFlightRequestsPerConnection+1) * int64(partitions) * int64(pc.BatchSize)
	}
	return min(max(want, DefaultMinInFlightBytes), pc.BufferMemory)
}

// Values of trace-batch-stages.
const (
	TraceStagesPerRecord = "per-record"
	TraceStagesPerBatch  = "per-batch"
)

// SlowerThan parses trace-slower-than: 0 when off, telemetry.SlowerThanP99 for p99, else a
// positive duration.
func (c *Config) SlowerThan() (time.Duration, error) {
	switch v := strings.TrimSpace(c.TraceSlowerThan); v {
	case "":
		return 0, nil
	case "p99":
		return telemetry.SlowerThanP99, nil
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("want a positive duration such as 250ms, or p99; got %q", v)
		}
		return d, nil
	}
}

// DefaultConfig returns the defaults every other source overrides.
func DefaultConfig() Config {
	return Config{
		StateDir:           defaultStateDir(),
		StartAt:            string(filetail.DefaultStartAt),
		LongLines:          string(filetail.DefaultLongLines),
		PartialLineIdle:    filetail.DefaultPartialLineIdle,
		CheckpointInterval: filetail.DefaultCheckpointInterval,
		ShutdownTimeout:    30 * time.Second,
		DeadLetterMaxBytes: 100 << 20,
		HeaderPath:         "source.path",
		HeaderHost:         "source.host",
		TraceHeader:        "traceparent",
		MaxTopics:          100, // routing: a bad field cannot create thousands of topics
		TraceSampleRatio:   -1,
		TraceBatchStages:   TraceStagesPerRecord,
		StateTopic:         "kafkatrail-state",
		CommitInterval:     time.Second,
		CommitMaxLines:     100000,
		LogLevel:           "info",
		Producer:           map[string]string{},
		// Rate limit: off.
		MaxLinesPerSecond: 0,
		MaxBytesPerSecond: 0,

		// Encodings and timestamps.
		Format:          linerecord.FormatRaw,
		TimestampLayout: "rfc3339",

		// Multiline events (off unless a preset or a pattern is set).
		MultilineTimeout:  filetail.DefaultMultilineTimeout,
		MultilineMaxLines: filetail.DefaultMultilineMaxLines,
	}
}

// defaultStateDir is $STATE_DIRECTORY (systemd), else ~/.local/state/kafkatrail, else a
// directory in the working directory.
func defaultStateDir() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h + "/.local/state/kafkatrail"
	}
	return ".kafkatrail-state"
}

// ConfigError names the configuration key that is wrong.
type ConfigError = linerecord.ConfigError

// LineConfig is the configuration of how lines become records (one input's, the implicit one
// of flags and the environment).
func (c *Config) LineConfig() linerecord.Config {
	lc := linerecord.Config{
		Topic: c.Topic, FallbackTopic: c.FallbackTopic, MaxTopics: c.MaxTopics, ParseRegex: c.ParseRegex,
		Key: c.Key, KeyField: c.KeyField, KeyRegex: c.KeyRegex,
		Header: c.Header, HeaderPath: c.HeaderPath, HeaderHost: c.HeaderHost, TraceHeader: c.TraceHeader,
		HostName: c.EffectiveHostName(),
		Format:   c.Format, TimestampField: c.TimestampField, TimestampLayout: c.TimestampLayout,
		IncludeLines: c.IncludeLines, ExcludeLines: c.ExcludeLines, Redact: c.Redact,
	}
	if pc, err := c.ProducerConfig(); err == nil {
		lc.MaxRequestSize = pc.MaxRequestSize
	}
	return lc
}

// Validate checks the agent's own keys and the producer properties; every error names its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Topic == "" && (len(c.Inputs) == 0 || len(c.Tail) > 0 || c.Stdin) {
		bad("topic", "required")
	}
	errs = append(errs, c.validateInputs()...)
	lc := c.LineConfig()
	lc.Validate(bad) // the topic or template, the key, the headers, the format
	if c.ExactlyOnce && linerecord.IsTemplate(c.Topic) && c.FallbackTopic == "" {
		// A line that cannot be routed fails, which aborts its transaction; after a restart
		// the same line fails again: the run could never get past it.
		bad("fallback-topic", "required with --exactly-once and a --topic template: a line the template cannot route would abort its transaction, and again after every restart")
	}
	if len(c.Brokers) == 0 && c.Producer["bootstrap.servers"] == "" {
		bad("brokers", "required (or producer bootstrap.servers)")
	}
	if err := filetail.StartPosition(c.StartAt).Valid(); err != nil {
		bad("start-at", "%v", err)
	}
	if err := filetail.LongLinePolicy(c.LongLines).Valid(); err != nil {
		bad("long-lines", "%v", err)
	}
	if c.MaxLineBytes < 0 {
		bad("max-line-bytes", "must not be negative, got %d", c.MaxLineBytes)
	}
	if c.MaxInFlightBytes < 0 {
		bad("max-in-flight-bytes", "must not be negative, got %d", c.MaxInFlightBytes)
	}
	if c.PartialLineIdle <= 0 {
		bad("partial-line-idle", "must be positive, got %v", c.PartialLineIdle)
	}
	if c.CheckpointInterval <= 0 {
		bad("checkpoint-interval", "must be positive, got %v", c.CheckpointInterval)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive, got %v", c.ShutdownTimeout)
	}
	if c.DeadLetterMaxBytes <= 0 {
		bad("dead-letter-max-bytes", "must be positive, got %d", c.DeadLetterMaxBytes)
	}
	if t := c.DeadLetterTopic; t != "" {
		if p := linerecord.TopicNameProblem(t); p != "" {
			bad("dead-letter-topic", "%q is not a legal Kafka topic name: %s", t, p)
		} else if t == c.Topic || t == c.FallbackTopic {
			bad("dead-letter-topic", "%q is a topic lines are sent to: a line it refuses could not be dead-lettered there", t)
		}
	}
	c.validateMultiline(bad)
	if err := filetail.ContainerFormat(c.ContainerFormat).Valid(); err != nil {
		bad("container-format", "%v", err)
	}
	if r := c.TraceSampleRatio; r != -1 && (r < 0 || r > 1) {
		bad("trace-sample-ratio", "must be between 0 and 1 (or -1 for the OTEL_TRACES_SAMPLER environment), got %v", r)
	}
	if _, err := c.SlowerThan(); err != nil {
		bad("trace-slower-than", "%v", err)
	}
	switch c.TraceBatchStages {
	case TraceStagesPerRecord, TraceStagesPerBatch:
	default:
		bad("trace-batch-stages", "must be %s or %s, got %q", TraceStagesPerRecord, TraceStagesPerBatch, c.TraceBatchStages)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		bad("log-format", "must be text or json, got %q", c.LogFormat)
	}
	if c.HTTP != "" {
		if _, port, err := net.SplitHostPort(c.HTTP); err != nil {
			bad("http", "want HOST:PORT (e.g. 127.0.0.1:9100), got %q", c.HTTP)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			bad("http", "port must be a number from 0 to 65535, got %q", port)
		}
	}
	if c.Stdin && len(c.Tail) > 0 {
		bad("stdin", "--stdin and --tail cannot be combined")
	}
	if _, ok := c.Producer["transactional.id"]; ok {
		bad("producer.transactional.id", "the agent sets transactional.id itself: use --exactly-once (and --transactional-id to choose the id)")
	}
	if c.ExactlyOnce {
		if (len(c.Tail) == 0 && len(c.Inputs) == 0) || c.Stdin {
			bad("exactly-once", "needs --tail: standard input cannot be read again after a crash, so its lines cannot be sent exactly once")
		}
		if strings.TrimSpace(c.StateTopic) == "" {
			bad("state-topic", "required with --exactly-once")
		}
		if c.CommitInterval <= 0 {
			bad("commit-interval", "must be positive, got %v", c.CommitInterval)
		} else if pc, err := c.ProducerConfig(); err == nil && c.CommitInterval >= time.Duration(pc.TransactionTimeoutMs)*time.Millisecond/2 {
			bad("commit-interval", "%v must be less than half of producer transaction.timeout.ms (%d ms), or the coordinator aborts transactions that are still filling",
				c.CommitInterval, pc.TransactionTimeoutMs)
		}
		if c.CommitMaxLines <= 0 {
			bad("commit-max-lines", "must be positive, got %d", c.CommitMaxLines)
		}
	}
	c.validateRateLimit(bad)
	if _, err := c.ProducerConfig(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxLineBytes > 0 {
		if pc, err := c.ProducerConfig(); err == nil && c.MaxLineBytes > pc.MaxRequestSize {
			bad("max-line-bytes", "%d is larger than max.request.size (%d): such records could never be sent",
				c.MaxLineBytes, pc.MaxRequestSize)
		}
	}
	return errors.Join(errs...)
}

// The agent's producer defaults that differ from the Java client's (both can be overridden with
// -X client.id=... and -X buffer.memory=...).
const (
	AgentClientID          = "kafkatrail-agent"
	AgentBufferMemory      = 8 << 20
	AgentBatchSize         = 64 << 10
	AgentDeliveryTimeoutMs = 600000
)

// ProducerConfig builds the producer's configuration: the Java defaults, then the brokers, then
// every producer property. Errors name the property (as producer.<key>).
func (c *Config) ProducerConfig() (producer.Config, error) {
	pc := producer.DefaultConfig()
	pc.ClientID = AgentClientID
	// The files are the agent's durable buffer, so its memory buffer need only keep the
	// brokers busy: 8 MiB does (5 requests in flight per broker of up to batch.size per
	// partition), and keeps the agent's resident memory near 40 MiB instead of 130.
	pc.BufferMemory = AgentBufferMemory
	// A batch is the most a partition ships per request, and a connection has at most five
	// requests in flight (max.in.flight.requests.per.connection, one batch per partition each,
	// as Java drains): so batch.size x 5 per round trip is a partition's ceiling. The Java
	// client's 16 KiB lets a busy log fall behind a broker that is a WAN's round trip away
	// (docs/benchmarks.md measures it); four times that lifts the ceiling fourfold, and
	// linger.ms still sends small batches at low rates (a batch takes batch.size of
	// buffer.memory while it fills: 128 of them fit in 8 MiB).
	pc.BatchSize = AgentBatchSize
	// A record that waits in memory for a broker that is down is not lost by waiting: its
	// line is on disk and reading is paused. Expiring it after the Java client's 2 minutes
	// only turns a long outage into failed lines; 10 minutes rides out a broker restart on a
	// loaded machine and still reports a cluster that is gone.
	pc.DeliveryTimeoutMs = AgentDeliveryTimeoutMs
	if len(c.Brokers) > 0 {
		pc.BootstrapServers = c.Brokers
	}
	if err := pc.SetAll(c.Producer); err != nil {
		return pc, prefixProducerKey(err)
	}
	if c.ExactlyOnce {
		pc.TransactionalID = c.EffectiveTransactionalID()
	}
	if err := pc.Validate(); err != nil {
		return pc, prefixProducerKey(err)
	}
	return pc, nil
}

// EffectiveHostName is --host-name, or the system's host name ("" if it has none).
func (c *Config) EffectiveHostName() string {
	if c.HostName != "" {
		return c.HostName
	}
	h, _ := os.Hostname()
	return h
}

// EffectiveTransactionalID is --transactional-id, or the default derived from the host name,
// the state topic and the tail patterns (and the file's inputs): stable across restarts of one agent, and different for
// two agents of one host that follow other files (they must not fence each other).
func (c *Config) EffectiveTransactionalID() string {
	if c.TransactionalID != "" {
		return c.TransactionalID
	}
	host := c.EffectiveHostName()
	if host == "" {
		host = "localhost"
	}
	globs := slices.Clone(c.Tail)
	// The file's inputs too, each as its name and its patterns: an agent without inputs keeps
	// the id it had.
	for _, entry := range c.Inputs {
		name, _ := entry["name"].(string)
		own := fmt.Sprint(entry["tail"])
		globs = append(globs, "input "+name+" "+own)
	}
	slices.Sort(globs)
	h := sha256.Sum256([]byte(c.StateTopic + "\x00" + strings.Join(globs, "\x00")))
	return "kafkatrail-" + host + "-" + hex.EncodeToString(h[:4])
}

// EffectiveMaxLineBytes resolves the max-line-bytes default against max.request.size
// (filetail.MaxLineBytesFor).
func (c *Config) EffectiveMaxLineBytes() int {
	if c.MaxLineBytes > 0 {
		return c.MaxLineBytes
	}
	pc, _ := c.ProducerConfig()
	return filetail.MaxLineBytesFor(pc.MaxRequestSize)
}

func prefixProducerKey(err error) error {
	var errs []error
	for _, e := range unjoin(err) {
		var ce *producer.ConfigError
		if errors.As(e, &ce) {
			key := "producer." + ce.Key
			if ce.Key == "bootstrap.servers" {
				key = "brokers"
			}
			errs = append(errs, &ConfigError{Key: key, Reason: ce.Reason})
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Flags declares every configuration key as a flag on fs (plus -X for producer properties).
func Flags(fs *pflag.FlagSet) {
	def := DefaultConfig()
	for _, f := range configKeys() {
		if f.key == "producer" || f.key == "inputs" {
			continue // -X; a file's list
		}
		v := reflect.ValueOf(def).FieldByIndex(f.index)
		switch f.kind {
		case reflect.String:
			fs.String(f.key, v.String(), f.doc)
		case reflect.Bool:
			fs.Bool(f.key, v.Bool(), f.doc)
		case reflect.Int:
			fs.Int(f.key, int(v.Int()), f.doc)
		case reflect.Float64:
			fs.Float64(f.key, v.Float(), f.doc)
		case reflect.Slice:
			fs.StringArray(f.key, nil, f.doc)
		case durationKind:
			fs.Duration(f.key, time.Duration(v.Int()), f.doc)
		}
	}
	fs.StringArrayP("producer-property", "X", nil, "producer property by its Java name: -X key=value (repeatable)")
	fs.String("config", "", "YAML configuration file")
}

// durationKind marks time.Duration fields (reflect reports them as Int64).
const durationKind = reflect.Int64

type configKey struct {
	key   string
	doc   string
	kind  reflect.Kind
	index []int
}

func configKeys() []configKey {
	t := reflect.TypeOf(Config{})
	out := make([]configKey, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, configKey{key: f.Tag.Get("koanf"), doc: f.Tag.Get("doc"), kind: f.Type.Kind(), index: f.Index})
	}
	return out
}

// Load builds the configuration from, in rising precedence: defaults, the YAML file named by
// --config (or KAFKATRAIL_CONFIG), the KAFKATRAIL_* environment (and the deprecated AGENT_ names
// of keys), and the flags set on fs (already parsed). Unknown file keys and values of the wrong
// type are errors naming the key; an unknown variable is not (ReadEnv reports it): the
// environment is shared with other programs.
func Load(fs *pflag.FlagSet, environ []string) (Config, error) {
	k := koanf.New("/")
	def := DefaultConfig()
	if err := k.Load(confmap.Provider(toMap(def), "/"), nil); err != nil {
		return def, err
	}

	envMap, envPath, _ := fromEnv(environ)
	path, _ := fs.GetString("config")
	if path == "" {
		path = envPath
	}
	if path != "" {
		fk := koanf.New("/")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return def, &ConfigError{Key: "config", Reason: fmt.Sprintf("%s: %v", path, err)}
		}
		if err := checkKeys(fk.Keys(), path); err != nil {
			return def, err
		}
		if err := k.Merge(fk); err != nil {
			return def, err
		}
	}

	if err := k.Load(confmap.Provider(envMap, "/"), nil); err != nil {
		return def, err
	}

	flagMap := map[string]any{}
	var flagErr error
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "config":
		case "producer-property":
			vals, _ := fs.GetStringArray(f.Name)
			for _, kv := range vals {
				key, value, ok := strings.Cut(kv, "=")
				if !ok || key == "" {
					flagErr = &ConfigError{Key: "-X", Reason: fmt.Sprintf("want key=value, got %q", kv)}
					return
				}
				flagMap["producer/"+strings.TrimSpace(key)] = value
			}
		case "header", "include-lines", "exclude-lines", "redact":
			// One value per flag: a header or a regular expression may hold commas.
			vals, _ := fs.GetStringArray(f.Name)
			flagMap[f.Name] = vals
		case "tail", "brokers":
			vals, _ := fs.GetStringArray(f.Name)
			var list []string
			for _, v := range vals {
				list = append(list, splitList(v)...)
			}
			flagMap[f.Name] = list
		default:
			flagMap[f.Name] = f.Value.String()
		}
	})
	if flagErr != nil {
		return def, flagErr
	}
	if err := k.Load(confmap.Provider(flagMap, "/"), nil); err != nil {
		return def, err
	}

	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return def, fmt.Errorf("configuration: %w", err)
	}
	c.Producer = map[string]string{}
	for _, key := range k.Keys() {
		if prop, ok := strings.CutPrefix(key, "producer/"); ok {
			c.Producer[prop] = fmt.Sprint(k.Get(key))
		}
	}
	return c, nil
}

// toMap turns a Config into koanf's flat key map.
func toMap(c Config) map[string]any {
	m := map[string]any{}
	v := reflect.ValueOf(c)
	for _, f := range configKeys() {
		if f.key == "producer" {
			continue
		}
		m[f.key] = v.FieldByIndex(f.index).Interface()
	}
	return m
}

// checkKeys refuses keys the agent does not know, naming them and the file.
func checkKeys(keys []string, path string) error {
	known := map[string]reflect.Kind{}
	for _, f := range configKeys() {
		known[f.key] = f.kind
	}
	var errs []error
	probe := producer.DefaultConfig()
	for _, key := range keys {
		if prop, ok := strings.CutPrefix(key, "producer/"); ok {
			if err := probe.Set(prop, "0"); err != nil && strings.Contains(err.Error(), "unknown producer property") {
				errs = append(errs, &ConfigError{Key: "producer." + prop, Reason: "unknown producer property in " + path})
			}
			continue
		}
		if _, ok := known[key]; !ok {
			errs = append(errs, &ConfigError{Key: key, Reason: "unknown key in " + path})
		}
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Redacted returns the configuration as key/value lines for `agent check`, with secrets masked.
func (c *Config) Redacted() []string {
	var lines []string
	v := reflect.ValueOf(*c)
	for _, f := range configKeys() {
		if f.key == "producer" || f.key == "inputs" {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s=%v", f.key, v.FieldByIndex(f.index).Interface()))
	}
	// Each input's effective settings: what it sets and what it takes from the top level.
	inputs, _ := c.InputConfigs()
	for _, in := range inputs {
		iv := reflect.ValueOf(in.Config)
		for _, f := range configKeys() {
			if slices.Contains(inputKeys, f.key) {
				lines = append(lines, fmt.Sprintf("inputs[%s].%s=%v", in.Name, f.key, iv.FieldByIndex(f.index).Interface()))
			}
		}
	}
	if pc, err := c.ProducerConfig(); err == nil {
		for _, p := range pc.Values() {
			lines = append(lines, fmt.Sprintf("producer.%s=%s", p.Key, p.Default))
		}
	}
	return lines
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
