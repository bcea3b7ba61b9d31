package reliability

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// pacedWriter appends numbered lines at a steady rate from its own goroutine until stopped.
type pacedWriter struct {
	lf      *lineFile
	mu      sync.Mutex
	stopped chan struct{}
	done    chan struct{}
	// rotate, when set, runs every rotateEvery on the writer's goroutine, between two writes.
	rotate      func(lf *lineFile, n int)
	rotateEvery time.Duration
	rotations   int
}

// startPaced writes perSecond lines a second, in 10 ms slices.
func startPaced(lf *lineFile, perSecond int, rotateEvery time.Duration, rotate func(*lineFile, int)) *pacedWriter {
	pw := &pacedWriter{lf: lf, stopped: make(chan struct{}), done: make(chan struct{}), rotate: rotate, rotateEvery: rotateEvery}
	go func() {
		defer close(pw.done)
		start := time.Now()
		written := 0
		nextRotate := start.Add(rotateEvery)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pw.stopped:
				return
			case now := <-tick.C:
				// Catch up to the schedule: the rate holds even if a tick was late.
				due := int(now.Sub(start).Seconds() * float64(perSecond))
				pw.mu.Lock()
				if due > written {
					lf.Write(due - written)
					written = due
				}
				if pw.rotate != nil && !now.Before(nextRotate) {
					pw.rotations++
					pw.rotate(lf, pw.rotations)
					nextRotate = nextRotate.Add(rotateEvery)
				}
				pw.mu.Unlock()
			}
		}
	}()
	return pw
}

// stop stops writing and returns how many lines were written in all.
func (pw *pacedWriter) stop() int {
	close(pw.stopped)
	<-pw.done
	return pw.lf.Next
}

// written returns the lines written so far.
func (pw *pacedWriter) written() int {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.lf.Next
}

// TestNetworkFaults puts toxics on the proxy that the broker advertises, while an application
// writes lines at a steady rate: 200 ms latency, a bandwidth limit, connections reset, and a
// blackhole (toxiproxy's timeout toxic: nothing passes, connections stay open). The writer stops
// when the toxic is removed; recovery is from the removal until every line written is in Kafka.
// 0 lost, 0 duplicated (idempotence), the agent's resident memory bounded by buffer.memory plus
// a constant.
func TestNetworkFaults(t *testing.T) {
	if noProxy {
		t.Skip("RELIABILITY_NO_PROXY=1: no proxy to put toxics on")
	}
	b := theBroker(t)
	faultFor := size(20*time.Second, 3*time.Second)
	for _, tc := range []struct {
		name   string
		toxics []string // toxic JSON; each is removed by its name
		names  []string
		length time.Duration
		rate   int
	}{
		{"200 ms latency each way", []string{
			`{"name":"lat_up","type":"latency","stream":"upstream","attributes":{"latency":200}}`,
			`{"name":"lat_down","type":"latency","stream":"downstream","attributes":{"latency":200}}`,
		}, []string{"lat_up", "lat_down"}, faultFor, 20000},
		{"bandwidth 256 KB/s to the broker", []string{
			`{"name":"bw","type":"bandwidth","stream":"upstream","attributes":{"rate":256}}`,
		}, []string{"bw"}, faultFor, 20000},
		{"reset_peer (connections reset after 500 ms)", []string{
			`{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":500}}`,
		}, []string{"reset"}, faultFor, 20000},
		{"reset_peer at once (a proxy whose broker is down)", []string{
			`{"name":"reset0","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`,
		}, []string{"reset0"}, faultFor, 20000},
		{fmt.Sprintf("blackhole %v (timeout toxic)", size(30*time.Second, 5*time.Second)), []string{
			`{"name":"bh_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
			`{"name":"bh_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`,
		}, []string{"bh_up", "bh_down"}, size(30*time.Second, 5*time.Second), 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := report(t, "3. network: "+tc.name)
			f := newScenario(t, b)
			topic, lf, rd, w := f.topic, f.lf, f.rd, f.w
			const bufferMemory = 8 << 20
			a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, f.path, f.state,
				"-X", fmt.Sprintf("buffer.memory=%d", bufferMemory), "-X", "max.block.ms=2000")...)
			pw := startPaced(lf, tc.rate, 0, nil)
			defer func() {
				select {
				case <-pw.done:
				default:
					pw.stop()
				}
			}()
			// Flowing before the fault: 2 s (CI: 1 s) of normal operation give the resident memory
			// to compare.
			w.waitAtLeast(int64(tc.rate/10), time.Minute, a)
			a.peakRSS(true)
			flowing := time.Now()
			waitFor(t, time.Minute, 50*time.Millisecond, func() bool { return time.Since(flowing) >= size(2*time.Second, time.Second) },
				func() string { return "warm-up" })
			normal := a.peakRSS(true)
			for _, js := range tc.toxics {
				b.addToxic(t, js)
			}
			removed := false
			defer func() {
				if !removed {
					for _, n := range tc.names {
						b.removeToxic(t, n)
					}
				}
			}()
			faultStart := time.Now()
			atStart := w.get()
			// The fault lasts its length; the writer keeps writing.
			waitFor(t, tc.length+time.Minute, 50*time.Millisecond, func() bool { return time.Since(faultStart) >= tc.length },
				func() string { return "fault length" })
			during := w.get() - atStart
			for _, n := range tc.names {
				b.removeToxic(t, n)
			}
			removed = true
			healed := time.Now()
			sent := pw.stop()
			caughtUp := w.waitAtLeast(int64(sent), 3*time.Minute, a)
			peak := a.peakRSS(false)
			a.stop(time.Minute)
			a.checkNoPanic()
			c := rd.countLines(t, topic, sent)
			rep.counts(int64(sent), c)
			rep.Recovery = secs(caughtUp.Sub(healed))
			rep.note("%v fault at %d lines/s, %s records landed during it; peak RSS %.1f MiB during the fault, %.1f MiB before it (buffer.memory %d MiB)",
				tc.length, tc.rate, num(max(during, 0)), float64(peak)/(1<<20), float64(normal)/(1<<20), bufferMemory>>20)
			if c.lost != 0 || c.dup != 0 {
				t.Fatalf("%d lost, %d duplicated; agent log:\n%s", c.lost, c.dup, a.logTail())
			}
			// Bounded: buffer.memory plus the runtime, the read buffers, the acknowledgement
			// trackers and the garbage collector's headroom (about 40 MiB at this rate without a
			// fault).
			if limit := int64(bufferMemory + 64<<20); peak > limit {
				t.Fatalf("peak RSS %.1f MiB over buffer.memory + 64 MiB", float64(peak)/(1<<20))
			}
		})
	}
}
