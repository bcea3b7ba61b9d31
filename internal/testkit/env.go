package testkit

import (
	"os"
	"strings"
)

// AgentEnv is the environment tests run the agent binary in: this process's, less the agent's
// own variables (KAFKATRAIL_*, and the deprecated AGENT_* names) and OpenTelemetry's (OTEL_*),
// with HOME in the temporary directory and
// every exporter off. No collector runs for these tests: without that the exporters retry
// against 127.0.0.1:4317, log a warning every 10 s and add about 2 s to every exit. A test that
// wants an exporter appends its OTEL_* settings (the last value of a key wins).
func AgentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAFKATRAIL_") && !strings.HasPrefix(kv, "AGENT_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+os.TempDir(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
}
