package producer

import (
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
	checkValidateNamesTheKey(t, func(c *Config) { c.TransactionalID = "tx" }, []validateCase{
		{"needs idempotence", func(c *Config) { c.EnableIdempotence = false }, "enable.idempotence",
			`transactional.id="tx" requires enable.idempotence=true`},
		{"needs acks=all", func(c *Config) { c.EnableIdempotence = false; c.Acks = "1" }, "acks",
			`transactional.id="tx" requires acks=all, got "1"`},
		{"timeout", func(c *Config) { c.TransactionTimeoutMs = 0 }, "transaction.timeout.ms", "positive"},
	})
}
