package main

import (
	"context"
	"runtime"
	"syscall"
	"time"
)

// A log agent spends most of its life nearly idle: a burst of lines every so often. With
// several Ps, Go's scheduler answers each goroutine woken in a burst (the file's follower, the
// sender, a connection's reader) by waking a second thread that spins looking for work and
// parks again, and each wake and park is a context switch, which one P does not pay
// (docs/benchmarks.md's steady-rate section measures the agent this way). So while the
// agent uses little CPU it runs on one P, and it goes back to the runtime's default as soon as
// it is busy: procsGovernor decides, from the process's CPU time each second. A GOMAXPROCS
// the user set is left alone.
const (
	procsInterval = time.Second
	// procsQuiet is the CPU, in cores, under which procsQuietIntervals intervals in a row put
	// the agent on one P; procsBusy the CPU over which one interval puts it back. One P gives
	// at most about one core, so procsBusy is well under it: a load that needs more shows
	// before it is held back.
	procsQuiet          = 0.25
	procsBusy           = 0.6
	procsQuietIntervals = 5
)

// procsGovernor is the decision: fed the CPU used over each interval (observe), it tells set
// to run on one P, or restore to go back to the runtime's default.
type procsGovernor struct {
	one     bool // running on one P
	quiet   int  // intervals in a row under procsQuiet
	set     func(int) int
	restore func()
}

// observe takes the CPU, in cores, the process used over the last interval.
func (g *procsGovernor) observe(cores float64) {
	switch {
	case g.one && cores > procsBusy:
		g.one, g.quiet = false, 0
		g.restore()
	case !g.one && cores < procsQuiet:
		if g.quiet++; g.quiet >= procsQuietIntervals {
			g.one, g.quiet = true, 0
			g.set(1)
		}
	case !g.one:
		g.quiet = 0
	}
}

// governProcs runs the governor until ctx ends, then gives the runtime its default back. It
// does nothing when GOMAXPROCS is set or the runtime has one P anyway.
func governProcs(ctx context.Context, environ []string) {
	if lookupEnv(environ, "GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) == 1 {
		return
	}
	g := &procsGovernor{set: runtime.GOMAXPROCS, restore: runtime.SetDefaultGOMAXPROCS}
	defer func() {
		if g.one {
			runtime.SetDefaultGOMAXPROCS()
		}
	}()
	t := time.NewTicker(procsInterval)
	defer t.Stop()
	last, lastAt := processCPU(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cpu := processCPU()
			if elapsed := now.Sub(lastAt); elapsed > 0 {
				g.observe(float64(cpu-last) / float64(elapsed))
			}
			last, lastAt = cpu, now
		}
	}
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
