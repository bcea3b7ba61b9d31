package agent

import (
	"errors"
	"strings"
	"testing"
)

// keyErrors returns the keys of the ConfigErrors in err.
func keyErrors(err error) map[string]string {
	out := map[string]string{}
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if errors.As(e, &ce) {
			out[ce.Key] = ce.Reason
		}
	}
	return out
}

func TestExactlyOnceConfig(t *testing.T) {
	base := []string{"--brokers", "127.0.0.1:9092", "--topic", "t"}
	for _, tc := range []struct {
		name    string
		args    []string
		wantKey string // "" when valid
		reason  string
	}{
		{"with tail", []string{"--exactly-once", "--tail", "/var/log/*.log"}, "", ""},
		{"with stdin", []string{"--exactly-once", "--stdin"}, "exactly-once", "needs --tail"},
		{"without any source", []string{"--exactly-once"}, "exactly-once", "needs --tail"},
		{"user transactional.id", []string{"--tail", "/x", "-X", "transactional.id=mine"}, "producer.transactional.id", "--exactly-once"},
		{"user transactional.id with exactly-once", []string{"--exactly-once", "--tail", "/x", "-X", "transactional.id=mine"}, "producer.transactional.id", "--transactional-id"},
		{"commit interval too long", []string{"--exactly-once", "--tail", "/x", "--commit-interval", "40s"}, "commit-interval", "transaction.timeout.ms"},
		{"commit interval zero", []string{"--exactly-once", "--tail", "/x", "--commit-interval", "0s"}, "commit-interval", "positive"},
		{"no lines", []string{"--exactly-once", "--tail", "/x", "--commit-max-lines", "0"}, "commit-max-lines", "positive"},
		{"no state topic", []string{"--exactly-once", "--tail", "/x", "--state-topic", ""}, "state-topic", "required"},
		{"idempotence off", []string{"--exactly-once", "--tail", "/x", "-X", "enable.idempotence=false"}, "producer.enable.idempotence", "requires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append(base, tc.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			reason, ok := keyErrors(err)[tc.wantKey]
			if !ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Validate = %v; want an error for %s saying %q", err, tc.wantKey, tc.reason)
			}
		})
	}
}

func TestExactlyOnceTransactionalID(t *testing.T) {
	c := DefaultConfig()
	c.ExactlyOnce = true
	c.Tail = []string{"/b/*.log", "/a/*.log"}
	id := c.EffectiveTransactionalID()
	if !strings.HasPrefix(id, "kafkatrail-") {
		t.Fatalf("default id %q", id)
	}
	c.Tail = []string{"/a/*.log", "/b/*.log"}
	if got := c.EffectiveTransactionalID(); got != id {
		t.Fatalf("the order of the patterns changed the id: %q, %q", id, got)
	}
	c.Tail = []string{"/c/*.log"}
	if got := c.EffectiveTransactionalID(); got == id {
		t.Fatalf("other patterns, same id %q", got)
	}
	c.StateTopic = "other-state"
	c.Tail = []string{"/a/*.log", "/b/*.log"}
	if got := c.EffectiveTransactionalID(); got == id {
		t.Fatalf("another state topic, same id %q", got)
	}
	c.TransactionalID = "mine"
	if got := c.EffectiveTransactionalID(); got != "mine" {
		t.Fatalf("--transactional-id mine gave %q", got)
	}
	c.Brokers = []string{"127.0.0.1:9092"}
	pc, err := c.ProducerConfig()
	if err != nil || pc.TransactionalID != "mine" {
		t.Fatalf("producer transactional.id = %q, %v", pc.TransactionalID, err)
	}
}
