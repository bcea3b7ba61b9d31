package deploy

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// agentDir holds the agent built for the tests, once a test asked for it.
var agentDir string

// agentBinary builds the agent once, for every test that runs it.
var agentBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kafkatrail-deploy-agent-")
	if err != nil {
		return "", err
	}
	agentDir = dir
	bin := filepath.Join(dir, "agent")
	// The repository's agent, built with this test's settings rather than `make agent`'s
	// (CGO_ENABLED=0, -trimpath): those would compile the standard library again instead of
	// sharing the build cache with this module, and change nothing in how a configuration is
	// read.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/agent")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build ./cmd/agent: " + e.err.Error() + "\n" + string(e.out)
}

// TestMain removes the agent built for the tests. Helm's own log (its warnings about values
// that the schema test gives on purpose) is kept to errors.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	code := m.Run()
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

// The agent accepts the configuration the chart gives it: `agent check` with the rendered
// agent.yaml, the container's arguments and its environment as the pod would have it (the
// Secret's values stand in for themselves), exits 0 and names no unknown variable.
func TestAgentAcceptsRenderedConfig(t *testing.T) {
	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	each(t, func(t *testing.T, o objects) {
		dir := t.TempDir()
		path := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(path, []byte(o.configMap.Data["agent.yaml"]), 0o600); err != nil {
			t.Fatal(err)
		}
		c := o.container(t)
		args := slices.Clone(c.Args)
		i := slices.Index(args, "--config")
		if i < 0 || args[i+1] != "/etc/kafkatrail/agent.yaml" {
			t.Fatalf("args %q", args)
		}
		args[i+1] = path
		environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		// What the Secret would hold: its key's name, and for the password a value that
		// must not be printed.
		const password = "s3cr3t-from-the-secret"
		for _, e := range c.Env {
			v := e.Value
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				v = "from-secret-" + e.ValueFrom.SecretKeyRef.Key
				if e.ValueFrom.SecretKeyRef.Key == "password" {
					v = password
				}
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
				v = "node-1"
			case e.ValueFrom != nil:
				t.Fatalf("env %s: %+v", e.Name, e.ValueFrom)
			}
			environ = append(environ, e.Name+"="+strings.ReplaceAll(v, "$(NODE_NAME)", "node-1"))
		}
		cmd := exec.Command(bin, append([]string{"check"}, args...)...)
		cmd.Env = environ
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("agent check %q: exit %d\n%s\nagent.yaml:\n%s", args, code, stderr.String(), o.configMap.Data["agent.yaml"])
		}
		if !strings.Contains(stdout.String(), "configuration OK") {
			t.Errorf("agent check: %s", stdout.String())
		}
		if strings.Contains(stderr.String(), "unknown environment variable") {
			t.Errorf("the agent does not know a variable the chart sets:\n%s", stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), password) {
			t.Errorf("agent check printed the password")
		}
		// The SASL settings reached the agent: the mechanism from the file, the user name
		// from the variable (the password is masked).
		if o.service != nil {
			for _, want := range []string{"producer.sasl.mechanism=SCRAM-SHA-256", "producer.sasl.username=from-secret-username",
				"producer.security.protocol=SASL_SSL", "producer.ssl.key.location=/etc/kafkatrail-tls/tls.key"} {
				if !strings.Contains(stdout.String(), want+"\n") {
					t.Errorf("agent check does not say %s:\n%s", want, stdout.String())
				}
			}
		}
		t.Logf("agent check: exit %d\n%s", code, stderr.String())
	})
}
