package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// IsolateAWS gives a test only the AWS variables kv (KEY, value, KEY, value, ...): every AWS_
// variable of the developer's shell is unset for the test, the shared config and credentials
// files point at nothing and instance metadata is off, so the AWS SDK's default chain sees only
// what the test sets up.
func IsolateAWS(t testing.TB, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "") // restored after the test
			os.Unsetenv(k)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}
