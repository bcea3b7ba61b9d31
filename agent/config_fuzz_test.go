package agent_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kafkatrail/kafkatrail/agent"
	"github.com/kafkatrail/kafkatrail/producer"
)

// FuzzLoad feeds agent.Load a YAML file and command-line arguments, as `agent --config FILE
// ARGS...` would: it must not panic; an error must be an error (never a half-filled config
// used silently); a configuration that loads must validate without panicking and print, in
// `agent check`'s form, no SASL password. Seeds: agent/testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("brokers: [127.0.0.1:9092]\ntopic: logs\ntail: [/var/log/*.log]\n"), "")
	f.Add([]byte("brokers: 127.0.0.1:9092\ntopic: logs\nproducer:\n  linger.ms: 10\n  sasl.password: hunter2-secret\n"), "--log-level debug")
	f.Add([]byte("topic: t\nmax-line-bytes: lots\n"), "--brokers a:1")
	f.Add([]byte("brokres: [x]\n"), "-X linger.ms=5")
	f.Add([]byte("topic: [a, b]\npartial-line-idle: 5\n"), "--shutdown-timeout 1s")
	f.Add([]byte("producer: 7\n"), "")
	f.Add([]byte("producer:\n  linger.mss: 5\n"), "-X =x")
	f.Add([]byte("{{{"), "")
	f.Add([]byte("tail:\n  - a\n  - {b: c}\n"), "--tail x,y")
	f.Add([]byte("key-regex: '('\nkey-field: k\n"), "--start-at middle")
	f.Fuzz(func(t *testing.T, yaml []byte, args string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(path, yaml, 0o600); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		agent.Flags(fs)
		if err := fs.Parse(append(strings.Fields(args), "--config", path)); err != nil {
			return // pflag's own errors: not ours to fuzz
		}
		cfg, err := agent.Load(fs, nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		_ = cfg.Validate()
		pw := cfg.Producer["sasl.password"]
		for _, line := range cfg.Redacted() {
			if pw != "" && strings.HasPrefix(line, "producer.sasl.password=") && strings.Contains(line, pw) {
				t.Fatalf("agent check would print the password: %q", line)
			}
		}
	})
}

// FuzzProducerConfigSet sets one producer property by its Java name: no panic; an error names the
// key; a value that was accepted validates without panicking and is never printed when secret.
// Seeds: agent/testdata/fuzz/FuzzProducerConfigSet.
func FuzzProducerConfigSet(f *testing.F) {
	for _, p := range producer.Properties() {
		f.Add(p.Key, p.Default)
	}
	f.Add("linger.ms", "-1")
	f.Add("batch.size", "99999999999999999999")
	f.Add("acks", "2")
	f.Add("bootstrap.servers", " , ,")
	f.Add("enable.idempotence", "yes")
	f.Add("sasl.password", "hunter2-secret")
	f.Add("no.such.property", "1")
	f.Add("max.in.flight.requests.per.connection", "6")
	f.Fuzz(func(t *testing.T, key, value string) {
		pc := producer.DefaultConfig()
		err := pc.Set(key, value)
		if err != nil {
			var ce *producer.ConfigError
			if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), key) {
				t.Fatalf("Set(%q, %q): %v does not name the key", key, value, err)
			}
			return
		}
		_ = pc.Validate()
		for _, p := range pc.Values() {
			if p.Secret && p.Key == key && strings.TrimSpace(value) != "" && strings.Contains(p.Default, strings.TrimSpace(value)) &&
				p.Default != "[redacted]" {
				t.Fatalf("secret %s printed as %q", key, p.Default)
			}
		}
	})
}
