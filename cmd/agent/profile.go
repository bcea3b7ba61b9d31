package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile writes a CPU profile to $KAFKATRAIL_CPUPROFILE while the agent runs, and the
// allocations since start to $KAFKATRAIL_MEMPROFILE when it stops, for `go tool pprof`, and an
// execution trace to $KAFKATRAIL_EXECTRACE, for `go tool trace` (where goroutines wait, which a
// CPU profile cannot show); it returns the function that stops them. Without the variables it
// does nothing.
func startProfile() func() {
	stopCPU := func() {}
	if path := os.Getenv("KAFKATRAIL_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err != nil {
			fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_CPUPROFILE: %v\n", err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_CPUPROFILE: %v\n", err)
			f.Close()
		} else {
			stopCPU = func() {
				pprof.StopCPUProfile()
				f.Close()
			}
		}
	}
	stopTrace := func() {}
	if path := os.Getenv("KAFKATRAIL_EXECTRACE"); path != "" {
		if f, err := os.Create(path); err != nil {
			fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_EXECTRACE: %v\n", err)
		} else if err := trace.Start(f); err != nil {
			fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_EXECTRACE: %v\n", err)
			f.Close()
		} else {
			stopTrace = func() {
				trace.Stop()
				f.Close()
			}
		}
	}
	mem := os.Getenv("KAFKATRAIL_MEMPROFILE")
	return func() {
		stopCPU()
		stopTrace()
		if mem == "" {
			return
		}
		f, err := os.Create(mem)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent: KAFKATRAIL_MEMPROFILE: %v\n", err)
		}
	}
}
