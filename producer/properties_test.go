package producer

import (
	"errors"
	"strings"
	"testing"
)

func TestSetParsesJavaProperties(t *testing.T) {
	c := DefaultConfig()
	err := c.SetAll(map[string]string{
		"bootstrap.servers":  "127.0.0.1:9092, 127.0.0.1:9093",
		"linger.ms":          "20",
		"enable.idempotence": "false",
		"acks":               "1",
		"buffer.memory":      "1048576",
		"compression.type":   "zstd",
		// Refused as unknown while the idle time was a constant.
		"metadata.max.idle.ms": "5000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.BootstrapServers) != 2 || c.BootstrapServers[1] != "127.0.0.1:9093" || c.LingerMs != 20 ||
		c.EnableIdempotence || c.Acks != "1" || c.BufferMemory != 1<<20 || c.CompressionType != "zstd" || c.MetadataMaxIdleMs != 5000 {
		t.Fatalf("properties not applied: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSetNamesTheKeyOnError(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"lingr.ms", "5", "lingr.ms: unknown producer property"},
		{"linger.ms", "soon", "linger.ms: want an integer"},
		{"enable.idempotence", "yes please", "enable.idempotence: want true or false"},
	} {
		c := DefaultConfig()
		err := c.Set(tc.key, tc.value)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%q, %q) = %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}

func TestPropertiesListEveryKeyWithItsDefault(t *testing.T) {
	props := Properties()
	byKey := map[string]Property{}
	for _, p := range props {
		if p.Doc == "" {
			t.Errorf("%s has no doc", p.Key)
		}
		byKey[p.Key] = p
	}
	for key, def := range map[string]string{"linger.ms": "5", "acks": "all", "batch.size": "16384", "enable.idempotence": "true"} {
		if byKey[key].Default != def {
			t.Errorf("%s default %q, want %q", key, byKey[key].Default, def)
		}
	}
	c := DefaultConfig()
	c.SASLPassword = "hunter2"
	for _, p := range c.Values() {
		if strings.Contains(p.Default, "hunter2") {
			t.Fatalf("Values leaks %s", p.Key)
		}
	}
}
