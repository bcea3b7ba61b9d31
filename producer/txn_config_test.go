package producer

import (
	"errors"
	"strings"
	"testing"
)

func TestTxnConfigDefaultsAndJavaNames(t *testing.T) {
	c := DefaultConfig()
	if c.TransactionalID != "" || c.TransactionTimeoutMs != 60000 {
		t.Fatalf("defaults transactional.id=%q transaction.timeout.ms=%d; Java's are empty and 60000",
			c.TransactionalID, c.TransactionTimeoutMs)
	}
	c.BootstrapServers = []string{"127.0.0.1:9092"}
	if err := c.SetAll(map[string]string{"transactional.id": "orders-1", "transaction.timeout.ms": "15000"}); err != nil {
		t.Fatal(err)
	}
	if c.TransactionalID != "orders-1" || c.TransactionTimeoutMs != 15000 {
		t.Fatalf("properties not applied: %q %d", c.TransactionalID, c.TransactionTimeoutMs)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("transaction.timeout.ms", "a minute"); err == nil || !strings.Contains(err.Error(), "transaction.timeout.ms") {
		t.Fatalf("bad transaction.timeout.ms: %v", err)
	}
}

func TestTxnConfigValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		key    string
		text   string
	}{
		{"needs idempotence", func(c *Config) { c.EnableIdempotence = false }, "enable.idempotence",
			`transactional.id="tx" requires enable.idempotence=true`},
		{"needs acks=all", func(c *Config) { c.EnableIdempotence = false; c.Acks = "1" }, "acks",
			`transactional.id="tx" requires acks=all, got "1"`},
		{"timeout", func(c *Config) { c.TransactionTimeoutMs = 0 }, "transaction.timeout.ms", "positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.BootstrapServers = []string{"127.0.0.1:9092"}
			c.TransactionalID = "tx"
			tc.mutate(&c)
			err := c.Validate()
			var found bool
			for _, e := range unwrapJoined(err) {
				var ce *ConfigError
				if errors.As(e, &ce) && ce.Key == tc.key && strings.Contains(ce.Reason, tc.text) {
					found = true
				}
			}
			if !found {
				t.Fatalf("Validate() = %v; want an error on %s saying %q", err, tc.key, tc.text)
			}
		})
	}
}

func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
