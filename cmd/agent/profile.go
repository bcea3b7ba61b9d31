package main

import (
	"fmt"
	"io"
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
	stopCPU := startToFile("KAFKATRAIL_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile)
	stopTrace := startToFile("KAFKATRAIL_EXECTRACE", trace.Start, trace.Stop)
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

// startToFile starts a recording (a CPU profile, an execution trace) into the file named by the
// environment variable env, and returns the function that stops it and closes the file. Without
// the variable, or when the file cannot be created or the recording not started (said on
// stderr), it records nothing and returns a function that does nothing: a profile is an aid,
// never a reason for the agent not to run.
func startToFile(env string, start func(io.Writer) error, stop func()) func() {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %s: %v\n", env, err)
		return func() {}
	}
	if err := start(f); err != nil {
		fmt.Fprintf(os.Stderr, "agent: %s: %v\n", env, err)
		f.Close()
		return func() {}
	}
	return func() {
		stop()
		f.Close()
	}
}
