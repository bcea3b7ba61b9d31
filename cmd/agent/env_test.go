package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/agent"
)

// azurePipelinesEnv is a part of what Azure Pipelines sets on every build machine.
var azurePipelinesEnv = []string{"AGENT_OS=Linux", "AGENT_NAME=Azure Pipelines 3", "AGENT_ID=12",
	"AGENT_MACHINENAME=fv-az123", "AGENT_TEMPDIRECTORY=/home/vsts/work/_temp", "AGENT_JOBSTATUS=Succeeded"}

// logLinesNaming returns the lines of log that mention name as a whole variable name.
func logLinesNaming(log, name string) []string {
	re := regexp.MustCompile(`(^|[^A-Z0-9_])` + regexp.QuoteMeta(name) + `($|[^A-Z0-9_])`)
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// TestAgentRunsAmongForeignAgentVariables runs the agent as a build machine would: among Azure
// Pipelines' AGENT_ variables (which used to stop it at start with exit 2), configured by
// KAFKATRAIL_ variables, one former AGENT_ name of a key, a typo and the project's own
// variables. Its lines reach Kafka; the former name and the typo are warned about once each,
// also after a SIGHUP reload; the other variables are not mentioned.
func TestAgentRunsAmongForeignAgentVariables(t *testing.T) {
	bootstrap, topic, dir, path, lw := tailSetup(t, 1)
	lw.Write(50) // before the start: read only if AGENT_START_AT=beginning was
	typo := agent.EnvName("topic") + "C"
	env := append([]string{
		agent.EnvName("brokers") + "=" + bootstrap,
		agent.EnvName("topic") + "=" + topic,
		agent.EnvName("state-dir") + "=" + dir + "/state",
		agent.EnvName("log-format") + "=text",
		"AGENT_START_AT=beginning",
		typo + "=" + topic,
		"KAFKATRAIL_STATE=" + dir + "/kafka", "KAFKATRAIL_CACHE=" + dir + "/cache", "KAFKATRAIL_UPDATE_README=1",
	}, azurePipelinesEnv...)
	a := startAgent(t, env, "--tail", path)
	// The warnings come first, before the configuration is validated: the agent still runs
	// once they are out, or it refused to start.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(a.log(), "AGENT_START_AT") {
		select {
		case <-a.exited:
			t.Fatalf("the agent exited at start (%v):\n%s", a.err, a.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning about AGENT_START_AT within 30 s:\n%s", a.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitForRecords(t, bootstrap, topic, 50, time.Minute, a)

	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(a.log(), "SIGHUP: configuration reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged within 30 s:\n%s", a.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.stop(time.Minute)

	log := a.log()
	if lines := logLinesNaming(log, "AGENT_START_AT"); len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") ||
		len(logLinesNaming(lines[0], "KAFKATRAIL_START_AT")) != 1 {
		t.Errorf("want one warning naming AGENT_START_AT and KAFKATRAIL_START_AT, got %q", lines)
	}
	if lines := logLinesNaming(log, typo); len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
		t.Errorf("want one warning naming %s, got %q", typo, lines)
	}
	for _, name := range []string{"AGENT_OS", "AGENT_NAME", "AGENT_ID", "KAFKATRAIL_STATE", "KAFKATRAIL_CACHE", "KAFKATRAIL_UPDATE_README"} {
		if lines := logLinesNaming(log, name); len(lines) != 0 {
			t.Errorf("the log mentions %s: %q", name, lines)
		}
	}
}

// TestCheckReadsTheEnvironment: `agent check` reads the KAFKATRAIL_ names, the former AGENT_
// names with a warning naming the new one, the new name winning when both are set; it warns
// about a typo naming it and still passes; it passes among foreign AGENT_ variables.
func TestCheckReadsTheEnvironment(t *testing.T) {
	typo := agent.EnvName("topic") + "C"
	for _, tc := range []struct {
		name     string
		env      []string
		topic    string            // want topic=... on stdout
		warnings map[string]string // variable: a text its one warning holds
	}{
		{"new names", []string{"KAFKATRAIL_TOPIC=new", "KAFKATRAIL_BROKERS=127.0.0.1:9092"}, "new", nil},
		{"former names", []string{"AGENT_TOPIC=old", "AGENT_BROKERS=127.0.0.1:9092"}, "old",
			map[string]string{"AGENT_TOPIC": "use=KAFKATRAIL_TOPIC", "AGENT_BROKERS": "use=KAFKATRAIL_BROKERS"}},
		{"new wins", []string{"AGENT_TOPIC=old", "KAFKATRAIL_TOPIC=new", "KAFKATRAIL_BROKERS=127.0.0.1:9092"}, "new",
			map[string]string{"AGENT_TOPIC": "KAFKATRAIL_TOPIC is set and wins"}},
		{"typo", []string{typo + "=x", "KAFKATRAIL_TOPIC=t", "KAFKATRAIL_BROKERS=127.0.0.1:9092"}, "t",
			map[string]string{typo: "unknown environment variable"}},
		{"foreign", append([]string{"KAFKATRAIL_TOPIC=t", "KAFKATRAIL_BROKERS=127.0.0.1:9092"}, azurePipelinesEnv...), "t", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgent(t, nil, 30*time.Second, append(tc.env, "KAFKATRAIL_LOG_FORMAT=text"), "check")
			if r.code != 0 || !strings.Contains(r.stdout, "configuration OK") {
				t.Fatalf("check exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "\ntopic="+tc.topic+"\n") {
				t.Errorf("want topic=%s in:\n%s", tc.topic, r.stdout)
			}
			if n := strings.Count(r.stderr, "level=WARN"); n != len(tc.warnings) {
				t.Errorf("%d warnings, want %d:\n%s", n, len(tc.warnings), r.stderr)
			}
			for name, text := range tc.warnings {
				if lines := logLinesNaming(r.stderr, name); len(lines) != 1 || !strings.Contains(lines[0], text) {
					t.Errorf("want one warning naming %s with %q, got %q", name, text, lines)
				}
			}
		})
	}
}
