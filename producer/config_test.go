package producer

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultConfigMatchesJavaClient(t *testing.T) {
	c := DefaultConfig()
	want := map[string][2]any{
		"acks":                                  {c.Acks, "all"},
		"enable.idempotence":                    {c.EnableIdempotence, true},
		"linger.ms":                             {c.LingerMs, 5},
		"batch.size":                            {c.BatchSize, 16384},
		"buffer.memory":                         {c.BufferMemory, int64(33554432)},
		"max.in.flight.requests.per.connection": {c.MaxInFlightRequestsPerConnection, 5},
		"retries":                               {c.Retries, 2147483647},
		"delivery.timeout.ms":                   {c.DeliveryTimeoutMs, 120000},
		"request.timeout.ms":                    {c.RequestTimeoutMs, 30000},
		"max.block.ms":                          {c.MaxBlockMs, 60000},
		"max.request.size":                      {c.MaxRequestSize, 1048576},
		"retry.backoff.ms":                      {c.RetryBackoffMs, 100},
		"retry.backoff.max.ms":                  {c.RetryBackoffMaxMs, 1000},
		"partitioner.adaptive.partitioning.enable": {c.PartitionerAdaptivePartitioningEnable, true},
		"partitioner.availability.timeout.ms":      {c.PartitionerAvailabilityTimeoutMs, 0},
		"reconnect.backoff.ms":                     {c.ReconnectBackoffMs, 50},
		"reconnect.backoff.max.ms":                 {c.ReconnectBackoffMaxMs, 1000},
		"metadata.max.age.ms":                      {c.MetadataMaxAgeMs, 300000},
		"metadata.max.idle.ms":                     {c.MetadataMaxIdleMs, 300000},
		"metadata.recovery.strategy":               {c.MetadataRecoveryStrategy, "rebootstrap"},
		"metadata.recovery.rebootstrap.trigger.ms": {c.MetadataRecoveryRebootstrapTriggerMs, 300000},
		"connections.max.idle.ms":                  {c.ConnectionsMaxIdleMs, 540000},
		"compression.type":                         {c.CompressionType, "none"},
		"compression.gzip.level":                   {c.CompressionGzipLevel, -1},
		"compression.lz4.level":                    {c.CompressionLz4Level, 9},
		"compression.zstd.level":                   {c.CompressionZstdLevel, 3},
		"socket.connection.setup.timeout.ms":       {c.SocketConnectionSetupTimeoutMs, 10000},
		"transaction.timeout.ms":                   {c.TransactionTimeoutMs, 60000},
		"allow.auto.create.topics":                 {c.AllowAutoCreateTopics, true},
		"partitioner.ignore.keys":                  {c.PartitionerIgnoreKeys, false},
		"security.protocol":                        {c.SecurityProtocol, "PLAINTEXT"},
		"max.receive.bytes":                        {c.MaxReceiveBytes, int32(104857600)},
	}
	for key, v := range want {
		if v[0] != v[1] {
			t.Errorf("default %s = %v, the Java client's is %v", key, v[0], v[1])
		}
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	checkValidateNamesTheKey(t, nil, []validateCase{
		{"no bootstrap", func(c *Config) { c.BootstrapServers = nil }, "bootstrap.servers", "required"},
		{"bad bootstrap", func(c *Config) { c.BootstrapServers = []string{"nohost"} }, "bootstrap.servers", "host:port"},
		{"idempotence needs acks=all", func(c *Config) { c.Acks = "1" }, "enable.idempotence", "enable.idempotence=true requires acks=all"},
		{"idempotence in flight", func(c *Config) { c.MaxInFlightRequestsPerConnection = 6 }, "enable.idempotence", "<= 5"},
		{"acks", func(c *Config) { c.Acks = "two" }, "acks", "0, 1, all"},
		{"codec", func(c *Config) { c.CompressionType = "brotli" }, "compression.type", "brotli"},
		// KIP-390's validators: CompressionType.GZIP/LZ4/ZSTD.levelValidator().
		{"gzip level 0", func(c *Config) { c.CompressionGzipLevel = 0 }, "compression.gzip.level", "1 to 9, or -1"},
		{"gzip level 10", func(c *Config) { c.CompressionGzipLevel = 10 }, "compression.gzip.level", "1 to 9, or -1"},
		{"lz4 level 18", func(c *Config) { c.CompressionLz4Level = 18 }, "compression.lz4.level", "1 to 17"},
		{"lz4 level 0", func(c *Config) { c.CompressionLz4Level = 0 }, "compression.lz4.level", "1 to 17"},
		{"zstd level 23", func(c *Config) { c.CompressionZstdLevel = 23 }, "compression.zstd.level", "-131072 to 22"},
		{"zstd level below", func(c *Config) { c.CompressionZstdLevel = -131073 }, "compression.zstd.level", "-131072 to 22"},
		{"batch.size", func(c *Config) { c.BatchSize = 0 }, "batch.size", "positive"},
		{"linger", func(c *Config) { c.LingerMs = -1 }, "linger.ms", "negative"},
		{"delivery timeout", func(c *Config) { c.DeliveryTimeoutMs = 1000 }, "delivery.timeout.ms", "linger.ms + request.timeout.ms"},
		{"protocol", func(c *Config) { c.SecurityProtocol = "TLS" }, "security.protocol", "SASL_SSL"},
		{"mechanism", func(c *Config) {
			c.SecurityProtocol = "SASL_PLAINTEXT"
			c.SASLUsername = "u"
			c.SASLMechanism = "NTLM"
		}, "sasl.mechanism", "SCRAM-SHA-512"},
		{"sasl user", func(c *Config) { c.SecurityProtocol = "SASL_SSL"; c.SASLMechanism = "PLAIN" }, "sasl.username", "required"},
		{"cert without key", func(c *Config) { c.SSLCertificateLocation = "/c.pem" }, "ssl.certificate.location", "together"},
		// ProducerConfig: define(METADATA_MAX_IDLE_CONFIG, ..., atLeast(5000), ...)
		{"metadata idle", func(c *Config) { c.MetadataMaxIdleMs = 4999 }, "metadata.max.idle.ms", "at least 5000, got 4999"},
	})
}

// validateCase is one broken config for checkValidateNamesTheKey: mutate breaks it, and
// Validate must return an error on key whose reason contains text.
type validateCase struct {
	name   string
	mutate func(*Config)
	key    string
	text   string
}

// checkValidateNamesTheKey runs each case as a subtest on a valid config (the defaults with a
// bootstrap server, then base when not nil) broken by the case's mutate.
func checkValidateNamesTheKey(t *testing.T, base func(*Config), cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.BootstrapServers = []string{"127.0.0.1:9092"}
			if base != nil {
				base(&c)
			}
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate accepted a broken config")
			}
			found := false
			for _, e := range unjoin(err) {
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

func TestValidateAcceptsDefaultsAndNonIdempotentAcks(t *testing.T) {
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9092", "[::1]:9093"}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	c.EnableIdempotence = false
	for _, acks := range []string{"0", "1", "all", "-1"} {
		c.Acks = acks
		if err := c.Validate(); err != nil {
			t.Fatalf("acks=%s rejected: %v", acks, err)
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
