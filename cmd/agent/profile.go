package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile to $KAFKATRAIL_CPUPROFILE while the agent runs, for
// `go tool pprof`; it returns the function that stops it. Without the variable it does nothing.
func startProfile() func() {
	path := os.Getenv("KAFKATRAIL_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
