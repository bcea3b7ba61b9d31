package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/producer"
)

func load(t *testing.T, args []string, environ []string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return Load(fs, environ)
}

// writeFile writes a configuration file holding body and returns its path.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	return writeTemp(t, "agent.yaml", []byte(body))
}

// writeTemp writes data to a file name in a new temporary directory and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	file := writeFile(t, `
brokers: [127.0.0.1:9092]
topic: from-file
key-field: user
shutdown-timeout: 10s
max-line-bytes: 4096
producer:
  linger.ms: 50
  compression.type: gzip
`)
	c, err := load(t, []string{"--config", file, "--topic", "from-flag", "-X", "compression.type=zstd"},
		[]string{"KAFKATRAIL_TOPIC=from-env", "KAFKATRAIL_KEY_FIELD=account", "KAFKATRAIL_PRODUCER_LINGER_MS=20", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key       string
		got, want any
	}{
		{"topic (flag beats env and file)", c.Topic, "from-flag"},
		{"key-field (env beats file)", c.KeyField, "account"},
		{"shutdown-timeout (file)", c.ShutdownTimeout, 10 * time.Second},
		{"max-line-bytes (file)", c.MaxLineBytes, 4096},
		{"linger.ms (env beats file)", c.Producer["linger.ms"], "20"},
		{"compression.type (-X beats file)", c.Producer["compression.type"], "zstd"},
		{"start-at (default)", c.StartAt, "end"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.key, ch.got, ch.want)
		}
	}
	if len(c.Brokers) != 1 || c.Brokers[0] != "127.0.0.1:9092" {
		t.Errorf("brokers = %v", c.Brokers)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	pc, err := c.ProducerConfig()
	if err != nil || pc.LingerMs != 20 || pc.CompressionType != "zstd" {
		t.Fatalf("producer config %+v, %v", pc, err)
	}
}

func TestLoadListsFromFlagsAndEnv(t *testing.T) {
	c, err := load(t, []string{"--tail", "/var/log/a.log", "--tail", "/var/log/*.log", "--brokers", "h1:9092,h2:9092"},
		[]string{"KAFKATRAIL_TOPIC=t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tail) != 2 || len(c.Brokers) != 2 || c.Brokers[1] != "h2:9092" {
		t.Fatalf("tail %v brokers %v", c.Tail, c.Brokers)
	}
	c, err = load(t, nil, []string{"KAFKATRAIL_TAIL=/a.log,/b/*.log", "KAFKATRAIL_BROKERS=h:1"})
	if err != nil || len(c.Tail) != 2 || c.Brokers[0] != "h:1" {
		t.Fatalf("env lists: %v %v %v", c.Tail, c.Brokers, err)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		environ []string
		args    []string
		want    string
	}{
		{"unknown file key", "topic: t\nbrokerz: [x]\n", nil, nil, "brokerz: unknown key"},
		{"unknown producer property", "topic: t\nproducer:\n  lingr.ms: 5\n", nil, nil, "producer.lingr.ms: unknown producer property"},
		{"wrong type", "topic: t\nmax-line-bytes: lots\n", nil, nil, "max-line-bytes"},
		{"env of the wrong type", "", []string{"KAFKATRAIL_MAX_LINE_BYTES=lots"}, nil, "max-line-bytes"},
		{"bad -X", "", nil, []string{"-X", "linger.ms"}, "-X: want key=value"},
		{"yaml syntax", "topic: [unclosed\n", nil, nil, "config:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			_, err := load(t, args, tc.environ)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Brokers = []string{"127.0.0.1:9092"}
		c.Topic = "t"
		return c
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		key    string
	}{
		{"topic", func(c *Config) { c.Topic = "" }, "topic"},
		{"brokers", func(c *Config) { c.Brokers = nil }, "brokers"},
		{"start-at", func(c *Config) { c.StartAt = "middle" }, "start-at"},
		{"long-lines", func(c *Config) { c.LongLines = "fold" }, "long-lines"},
		{"key-regex without group", func(c *Config) { c.KeyRegex = "user=\\w+" }, "key-regex"},
		{"key-regex invalid", func(c *Config) { c.KeyRegex = "(" }, "key-regex"},
		{"max-line-bytes over max.request.size", func(c *Config) { c.MaxLineBytes = 2 << 20 }, "max-line-bytes"},
		{"producer property", func(c *Config) { c.Producer["acks"] = "1" }, "producer.enable.idempotence"},
		{"log-level", func(c *Config) { c.LogLevel = "loud" }, "log-level"},
		{"http without port", func(c *Config) { c.HTTP = "127.0.0.1" }, "http"},
		{"http bad port", func(c *Config) { c.HTTP = "127.0.0.1:http" }, "http"},
		{"checkpoint-interval", func(c *Config) { c.CheckpointInterval = 0 }, "checkpoint-interval"},
		{"trace-slower-than", func(c *Config) { c.TraceSlowerThan = "fast" }, "trace-slower-than"},
		{"trace-batch-stages", func(c *Config) { c.TraceBatchStages = "per-line" }, "trace-batch-stages"},
		{"container-format", func(c *Config) { c.ContainerFormat = "crio" }, "container-format"},
		{"exactly-once template without fallback", func(c *Config) { c.Topic, c.ExactlyOnce, c.Tail = "logs-{a}", true, []string{"/x"} }, "fallback-topic"},
		{"the line settings too", func(c *Config) { c.Format = "xml" }, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			err := c.Validate()
			var ce *ConfigError
			found := false
			for _, e := range unjoin(err) {
				if errors.As(e, &ce) && ce.Key == tc.key {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %v does not name %s", err, tc.key)
			}
		})
	}
	if c := base(); c.Validate() != nil {
		err := c.Validate()
		t.Fatalf("a minimal config is refused: %v", err)
	}
}

func TestRedactedHidesSecrets(t *testing.T) {
	c := DefaultConfig()
	c.Brokers = []string{"127.0.0.1:9094"}
	c.Topic = "t"
	c.Producer = map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
		"sasl.username": "alice", "sasl.password": "s3cr3t-value"}
	out := strings.Join(c.Redacted(), "\n")
	if strings.Contains(out, "s3cr3t-value") {
		t.Fatal("Redacted prints the SASL password")
	}
	if !strings.Contains(out, "producer.sasl.username=alice") || !strings.Contains(out, "producer.sasl.password=[redacted]") {
		t.Fatalf("Redacted output lacks the expected lines:\n%s", out)
	}
}

// TestDocumentedFileDefaults pins the file settings' defaults as the README, `agent --help` and
// configs/agent.yaml state them. filetail holds each default once; this is where a change to
// one of them would show as a change of the agent's documented behaviour.
func TestDocumentedFileDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	Flags(fs)
	help := map[string]string{ // flag: its default in --help and in the README's reference
		"start-at": "end", "max-line-bytes": "0", "long-lines": "split",
		"partial-line-idle": "5s", "checkpoint-interval": "1s",
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range help {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %q, documented %q", name, got, want)
		}
		row := "| `--" + name + "` | `" + EnvName(name) + "` | `" + want + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks the reference row %q", row)
		}
	}
	if !strings.Contains(string(readme), "`--max-line-bytes` (default: max.request.size less 16 KiB)") {
		t.Error("README.md no longer says the long-line limit is max.request.size less 16 KiB")
	}
	example, err := os.ReadFile("../configs/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"start-at: end ", "long-lines: split "} {
		if !strings.Contains(string(example), line) {
			t.Errorf("configs/agent.yaml lacks %q", line)
		}
	}

	// max-line-bytes 0 is max.request.size less 16 KiB, whatever max.request.size is.
	c := DefaultConfig()
	if got := c.EffectiveMaxLineBytes(); got != 1<<20-16<<10 {
		t.Errorf("default line limit %d, want 1 MiB less 16 KiB", got)
	}
	if pc := producer.DefaultConfig(); pc.MaxRequestSize != filetail.DefaultMaxRequestSize {
		t.Errorf("filetail derives its default line limit from a max.request.size of %d; the producer's is %d",
			filetail.DefaultMaxRequestSize, pc.MaxRequestSize)
	}
	c.Producer = map[string]string{"max.request.size": "2097152"}
	if got := c.EffectiveMaxLineBytes(); got != 2<<20-16<<10 {
		t.Errorf("line limit with max.request.size=2 MiB: %d, want 2 MiB less 16 KiB", got)
	}
	c.MaxLineBytes = 4096
	if got := c.EffectiveMaxLineBytes(); got != 4096 {
		t.Errorf("max-line-bytes 4096 gives a limit of %d", got)
	}
}

// checkpoint-interval reaches the tailer that saves the checkpoints.
func TestCheckpointIntervalReachesTheTailer(t *testing.T) {
	cfg := DefaultConfig()
	if got := (&input{cfg: cfg}).tailerConfig().CheckpointInterval; got != time.Second {
		t.Fatalf("default checkpoint interval %v, want 1s", got)
	}
	cfg.CheckpointInterval = 200 * time.Millisecond
	if got := (&input{cfg: cfg}).tailerConfig().CheckpointInterval; got != 200*time.Millisecond {
		t.Fatalf("checkpoint interval %v, want 200ms", got)
	}
}

// --header is one header per flag (a value may hold commas); the file takes a list and
// KAFKATRAIL_HEADER a comma-separated list.
func TestLoadHeaders(t *testing.T) {
	c, err := load(t, []string{"--brokers", "127.0.0.1:9092", "--topic", "logs-{service}", "--header", "tags=a,b", "--header", "svc={service}", "--max-topics", "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Header) != "[tags=a,b svc={service}]" || c.MaxTopics != 7 {
		t.Errorf("headers %q, max-topics %d", c.Header, c.MaxTopics)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "brokers: [127.0.0.1:9092]\ntopic: t\nheader: [\"env=prod\", \"svc={service}\"]\nfallback-topic: other\n")
	c, err = load(t, []string{"--config", file}, nil)
	if err != nil || fmt.Sprint(c.Header) != "[env=prod svc={service}]" || c.FallbackTopic != "other" {
		t.Errorf("from the file: %q, %q, %v", c.Header, c.FallbackTopic, err)
	}
	c, err = load(t, nil, []string{"KAFKATRAIL_BROKERS=127.0.0.1:9092", "KAFKATRAIL_TOPIC=t", "KAFKATRAIL_HEADER=env=prod,svc={service}", "KAFKATRAIL_PARSE_REGEX=(?P<x>a)"})
	if err != nil || fmt.Sprint(c.Header) != "[env=prod svc={service}]" || c.ParseRegex != "(?P<x>a)" {
		t.Errorf("from the environment: %q, %q, %v", c.Header, c.ParseRegex, err)
	}
	if d := DefaultConfig(); d.MaxTopics != 100 || d.FallbackTopic != "" {
		t.Errorf("defaults: max-topics %d, fallback-topic %q", d.MaxTopics, d.FallbackTopic)
	}
}

// TestLoadFiltersAndRedact: --include-lines, --exclude-lines and --redact are one pattern per
// flag (a pattern may hold commas), one per line in the environment, and a list in the file
// where a redact rule is PATTERN=>REPLACEMENT or {pattern, replacement}; a rule without a
// replacement gets [REDACTED], and a pattern that does not compile names its key.
func TestLoadFiltersAndRedact(t *testing.T) {
	want := []linerecord.Redaction{{Pattern: `(card=)\d{4,}`, Replacement: "${1}****"}, {Pattern: `token=\S+`, Replacement: "[REDACTED]"}}
	c, err := load(t, []string{"--brokers", "127.0.0.1:9092", "--topic", "t", "--exclude-lines", `GET /health`, "--exclude-lines", `\d{3,4} ms`,
		"--include-lines", `^(ERR|WARN)`, "--redact", `(card=)\d{4,}=>${1}****`, "--redact", `token=\S+`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.ExcludeLines) != `[GET /health \d{3,4} ms]` || fmt.Sprint(c.IncludeLines) != `[^(ERR|WARN)]` || !slices.Equal(c.Redact, want) {
		t.Errorf("flags: include %q exclude %q redact %+v", c.IncludeLines, c.ExcludeLines, c.Redact)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err = load(t, nil, []string{"KAFKATRAIL_BROKERS=127.0.0.1:9092", "KAFKATRAIL_TOPIC=t",
		"KAFKATRAIL_EXCLUDE_LINES=GET /health\n\\d{3,4} ms\n", "KAFKATRAIL_REDACT=(card=)\\d{4,}=>${1}****\ntoken=\\S+"})
	if err != nil || fmt.Sprint(c.ExcludeLines) != `[GET /health \d{3,4} ms]` || !slices.Equal(c.Redact, want) {
		t.Errorf("environment: exclude %q redact %+v, %v", c.ExcludeLines, c.Redact, err)
	}
	file := writeFile(t, "brokers: [127.0.0.1:9092]\ntopic: t\nexclude-lines: ['GET /health', '\\d{3,4} ms']\n"+
		"redact:\n  - pattern: '(card=)\\d{4,}'\n    replacement: '${1}****'\n  - 'token=\\S+'\n")
	c, err = load(t, []string{"--config", file}, nil)
	if err != nil || fmt.Sprint(c.ExcludeLines) != `[GET /health \d{3,4} ms]` || !slices.Equal(c.Redact, want) {
		t.Errorf("file: exclude %q redact %+v, %v", c.ExcludeLines, c.Redact, err)
	}
	c.Redact = append(c.Redact, linerecord.Redaction{Pattern: "("})
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Key != "redact" {
		t.Errorf("a redact pattern that does not compile: %v, want an error on redact", err)
	}
}
