// Package reliability runs the agent binary through faults, restarts and bad input and reports
// figures: lines sent, delivered, lost and duplicated, and recovery times, one row per scenario.
//
// RELIABILITY_MODE=full uses the sizes of docs/reliability.md (make reliability); anything else
// (default: ci) uses smaller ones (make reliability-ci). RELIABILITY_REPORT names the file the
// table is written to when the tests end. See scripts/reliability.sh.
package reliability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// full is true for `make reliability`: the sizes of the issue. CI runs smaller ones.
var full = os.Getenv("RELIABILITY_MODE") == "full"

// size returns the full-form value or the CI-form value.
func size[T any](fullValue, ciValue T) T {
	if full {
		return fullValue
	}
	return ciValue
}

var (
	repoRoot string // the main module, ..
	agentBin string // the agent built without -race: its memory is what users get
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = root
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxiproxy's toxics log through the global logger
	dir, err := os.MkdirTemp("", "kafkatrail-reliability")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentBin = filepath.Join(dir, "agent")
	if bin := os.Getenv("RELIABILITY_AGENT_BIN"); bin != "" {
		agentBin = bin // investigation: an instrumented build
	} else if err := buildAgent(); err != nil {
		fmt.Fprintln(os.Stderr, "building the agent:", err)
		return 1
	}
	code := m.Run()
	stopSuiteBroker()
	stopSuiteCluster()
	removeJavaControl()
	if err := writeReport(os.Getenv("RELIABILITY_REPORT")); err != nil {
		fmt.Fprintln(os.Stderr, "writing the report:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func buildAgent() error {
	build := exec.Command("go", "build", "-o", agentBin, "./cmd/agent")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	return build.Run()
}
