// Package javatest compiles and runs the small Java programs that some tests take as their
// oracle: the Java client's own classes (from the test broker's jars, KAFKA_LIB) or another
// Java library's, asked what bytes they would send, so that a test compares ours with theirs.
package javatest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tool is the JDK's tool: JAVA_HOME's when it has it, else the one on PATH.
func Tool(name string) string {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", name); fileExists(p) {
			return p
		}
	}
	return name
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// KafkaLib is the directory of the test broker's jars (KAFKA_LIB, set by
// `scripts/kafka/broker.sh env`), as a class path entry ("dir/*").
func KafkaLib(t testing.TB) string {
	t.Helper()
	lib := os.Getenv("KAFKA_LIB")
	if lib == "" {
		if testing.Short() {
			t.Skip("needs the test broker's jars (KAFKA_LIB unset); skipped in -short mode")
		}
		t.Fatal("KAFKA_LIB unset: run the tests with `make test` (it starts a broker), or eval \"$(scripts/kafka/broker.sh env)\"")
	}
	return filepath.Join(lib, "*")
}

// Program is Java sources compiled once for a test, and the class path to run them with.
type Program struct {
	classpath string
	env       []string // nil: the test's environment
}

// Compile compiles srcs with javac against classpath (entries joined with the path separator)
// into a directory of the test's.
func Compile(t testing.TB, classpath []string, srcs ...string) *Program {
	t.Helper()
	dir := t.TempDir()
	cp := strings.Join(classpath, string(os.PathListSeparator))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-nowarn", "-d", dir, "-cp", cp}, srcs...)
	if out, err := exec.CommandContext(ctx, Tool("javac"), args...).CombinedOutput(); err != nil {
		t.Fatalf("javac %v: %v\n%s", srcs, err, out)
	}
	return &Program{classpath: cp + string(os.PathListSeparator) + dir}
}

// Run runs class main of the program with args and returns its standard output; a non-zero
// exit fails the test with its standard error.
func (p *Program) Run(t testing.TB, main string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Tool("java"), append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", p.classpath, main}, args...)...)
	cmd.Env = p.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java %s %v: %v\n%s", main, args, err, stderr.String())
	}
	return string(out)
}

// MavenClasspath resolves the dependencies of pom (a packaging-pom project that lists the
// Java libraries a test takes as its oracle) with Maven, fetching them into the local
// repository the first time, and returns their jars as class path entries.
func MavenClasspath(t testing.TB, pom string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "classpath.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-Dstyle.color=never", "-f", pom,
		"dependency:build-classpath", "-Dmdep.outputFile="+out)
	cmd.Stdin = nil
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mvn dependency:build-classpath -f %s: %v\n%s", pom, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), string(os.PathListSeparator))
}

// Env returns the program with env (KEY=value entries) as the whole environment of the runs
// that follow, besides PATH and JAVA_HOME.
func (p *Program) Env(env ...string) *Program {
	q := *p
	q.env = append([]string{"PATH=" + os.Getenv("PATH"), "JAVA_HOME=" + os.Getenv("JAVA_HOME")}, env...)
	return &q
}
