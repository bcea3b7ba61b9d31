package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// TestDirtyBuildShipsALine: a developer's `go build` in a git checkout with changes not
// committed stamps the module's version as a pseudo-version ending in "+dirty", which KIP-511's
// pattern refuses: the broker closed such a client's connection before ApiVersions completed,
// and the agent never connected. The build here is made as a developer makes it (-buildvcs=true
// in a copy of this checkout, with this tree's changes and one untracked file), and must ship its
// line.
func TestDirtyBuildShipsALine(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	topic := kafkatest.NewTopic(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := strings.TrimSpace(gitOut(t, ctx, "../..", "rev-parse", "--show-toplevel"))
	clone := filepath.Join(t.TempDir(), "checkout")
	gitOut(t, ctx, "", "clone", "-q", "--no-checkout", root, clone)
	// The commit this tree is at, then the tree's own changes and untracked files: the copy
	// builds what this test runs in, not only what was committed.
	gitOut(t, ctx, clone, "checkout", "-q", strings.TrimSpace(gitOut(t, ctx, root, "rev-parse", "HEAD")))
	if diff := gitOut(t, ctx, root, "diff", "--binary", "HEAD"); diff != "" {
		apply := exec.CommandContext(ctx, "git", "apply", "--whitespace=nowarn")
		apply.Dir, apply.Stdin = clone, strings.NewReader(diff)
		if out, err := apply.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v\n%s", err, out)
		}
	}
	for _, f := range strings.Fields(gitOut(t, ctx, root, "ls-files", "--others", "--exclude-standard")) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(clone, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(clone, "NOTES.txt"), []byte("a developer's note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-o", bin, "./cmd/agent")
	build.Dir = clone
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The build is the one the bug needs: Go stamped a version the broker's pattern refuses.
	v, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		t.Fatalf("agent --version: %v", err)
	}
	if !strings.Contains(string(v), "+dirty") {
		t.Fatalf("agent --version = %q: the build was not stamped as a modified checkout", v)
	}

	run := exec.CommandContext(ctx, bin, "--brokers", bootstrap, "--topic", topic, "--log-level", "warn")
	run.Stdin = strings.NewReader("a line from a developer's build\n")
	run.Env = testkit.AgentEnv()
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("agent: %v\n%s", err, tail(stderr.String()))
	}
	if vals := kcatValues(t, bootstrap, topic); len(vals) != 1 || vals[0] != "a line from a developer's build" {
		t.Fatalf("topic holds %q, want the one line", vals)
	}
}

func gitOut(t *testing.T, ctx context.Context, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
