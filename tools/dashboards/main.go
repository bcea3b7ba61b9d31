// Command dashboards writes kafkatrail's Grafana dashboards (dashboards/*.json at the
// repository root) from typed Go (github.com/grafana/grafana-foundation-sdk/go), with the
// metric and attribute names read from telemetry/names.go and translated the way
// Prometheus's OTLP receiver translates them. Run from tools/:
//
//	go run ./dashboards            # writes ../dashboards/*.json
//	go run ./dashboards -check     # exits 1 if a checked-in file is stale
//
// dashboards_test.go fails when the checked-in JSON differs from what this generates.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "../dashboards", "directory of the dashboard JSON files")
	names := flag.String("names", "../telemetry/names.go", "telemetry/names.go: the metric and attribute names")
	check := flag.Bool("check", false, "do not write: exit 1 if a file is missing or stale")
	flag.Parse()
	if err := run(*out, *names, *check); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

func run(out, namesPath string, check bool) error {
	n, err := LoadNames(namesPath)
	if err != nil {
		return err
	}
	files, err := Generate(n)
	if err != nil {
		return err
	}
	if u := n.Unused(); len(u) > 0 {
		fmt.Fprintf(os.Stderr, "dashboards: metrics no panel shows: %v\n", u)
	}
	stale := 0
	for _, f := range files {
		p := filepath.Join(out, f.Name)
		old, _ := os.ReadFile(p)
		if bytes.Equal(old, f.JSON) {
			continue
		}
		if check {
			fmt.Fprintf(os.Stderr, "dashboards: %s is stale: run `cd tools && go run ./dashboards`\n", p)
			stale++
			continue
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.JSON, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "dashboards: wrote %s\n", p)
	}
	if stale > 0 {
		return fmt.Errorf("%d stale file(s)", stale)
	}
	return nil
}
