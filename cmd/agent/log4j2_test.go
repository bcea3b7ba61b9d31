package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// log4j2Program logs with log4j2's default configuration (no configuration file: ERROR and
// above to the console, the exception on the lines after the message and an empty line after
// it): a line alone, an exception, an exception with two causes, and one with a suppressed
// exception and a cause, each between two lines.
const log4j2Program = `
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

public class Log4j2Trace {
    static void fail(int depth) { if (depth == 0) throw new IllegalStateException("boom"); fail(depth - 1); }

    public static void main(String[] args) {
        Logger log = LogManager.getLogger("com.example.App");
        log.error("line 0 alone");
        try { fail(3); } catch (RuntimeException e) { log.error("line 1 failed", e); }
        log.error("line 2 alone");
        try {
            try { fail(2); } catch (RuntimeException e) { throw new RuntimeException("wrapped", new java.io.IOException("disk full", e)); }
        } catch (RuntimeException e) { log.error("line 3 failed", e); }
        log.error("line 4 alone");
        RuntimeException top = new IllegalArgumentException("bad input", new java.net.SocketTimeoutException("read timed out"));
        top.addSuppressed(new IllegalStateException("close failed"));
        log.error("line 5 failed", top);
        log.error("line 6 alone");
    }
}
`

// TestMultilineJavaRealLog4j2: the output of a real log4j2 (the broker's jars), piped into the
// agent with --multiline java: every message logged with an exception is one record with its
// exception's first line, its frames, its causes and suppressed exceptions (and the empty line
// log4j2 ends it with); every line logged alone is a record of its own.
func TestMultilineJavaRealLog4j2(t *testing.T) {
	out := log4j2Output(t)
	if !strings.Contains(out, "\nCaused by: ") || !strings.Contains(out, "Suppressed: ") || !strings.Contains(out, "\n\tat ") {
		t.Fatalf("log4j2 wrote no stack trace with a cause and a suppressed exception:\n%s", out)
	}
	bootstrap, topic := kafkatest.Bootstrap(t), kafkatest.NewTopic(t, 1)
	a := startPipedAgent(t, "--brokers", bootstrap, "--topic", topic, "--stdin", "--multiline", "java", "--log-format", "text")
	if _, err := a.in.Write([]byte(out)); err != nil {
		t.Fatal(err)
	}
	a.in.Close()
	recs := kafkatest.Consume(t, topic, 7, 30*time.Second)
	for i, r := range recs {
		v := string(r.Value)
		lines := strings.Split(v, "\n")
		if !strings.Contains(lines[0], fmt.Sprintf("ERROR line %d ", i)) {
			t.Fatalf("record %d begins %q, want log line %d:\n%s", i, lines[0], i, v)
		}
		if i%2 == 0 {
			if len(lines) != 1 {
				t.Fatalf("record %d, a line logged alone, has %d lines:\n%s", i, len(lines), v)
			}
			continue
		}
		if len(lines) < 3 || !strings.Contains(lines[1], "Exception: ") || !strings.HasPrefix(lines[2], "\tat ") {
			t.Fatalf("record %d is not the message, the exception and its frames:\n%s", i, v)
		}
		for _, want := range map[int][]string{3: {"Caused by: java.io.IOException: disk full", "Caused by: java.lang.IllegalStateException: boom"},
			5: {"Suppressed: java.lang.IllegalStateException: close failed", "Caused by: java.net.SocketTimeoutException: read timed out"}}[i] {
			if !strings.Contains(v, want) {
				t.Fatalf("record %d lacks %q:\n%s", i, want, v)
			}
		}
	}
	if want := strings.TrimSuffix(out, "\n"); strings.Join(values(recs), "\n") != want {
		t.Fatalf("the records, joined, are not log4j2's output:\n%s", strings.Join(values(recs), "\n---\n"))
	}
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// log4j2Output compiles and runs log4j2Program against the test broker's log4j2 jars
// (KAFKA_LIB) and returns what it wrote to stdout.
func log4j2Output(t *testing.T) string {
	t.Helper()
	lib := kafkatest.Lib(t)
	jars, _ := filepath.Glob(filepath.Join(lib, "log4j-*.jar"))
	if len(jars) < 2 {
		t.Fatalf("no log4j2 jars in %s", lib)
	}
	src := filepath.Join(t.TempDir(), "Log4j2Trace.java")
	if err := os.WriteFile(src, []byte(log4j2Program), 0o600); err != nil {
		t.Fatal(err)
	}
	return javatest.Compile(t, jars, src).Run(t, "Log4j2Trace")
}
