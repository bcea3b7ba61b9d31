package reliability

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestRotationTorture rotates the file every 100 ms while the application writes 50,000 lines a
// second (full: 20 s, 1M lines; CI: 4 s, 200k lines). The writer rotates itself between two
// writes, so nothing is written between a copy and its truncation.
//
// The agent re-scans its globs once a second, so a file that lives 100 ms under the followed name
// may never be seen there: the glob covers the rotated names too (app.log*), as it must for
// rotations faster than the re-scan. A file renamed away is then recognised by its identity; a
// copytruncate copy is a new file (new inode) and is read in full, so its lines that were read
// from app.log before the truncation arrive twice: duplicates by construction.
//
// The last row follows app.log alone with copytruncate: lines the agent had not read when the
// file was truncated exist only in the copy, which it does not follow: lost by construction.
func TestRotationTorture(t *testing.T) {
	b := theBroker(t)
	length := size(20*time.Second, 4*time.Second)
	const rate = 50000
	for _, tc := range []struct {
		name     string
		glob     string // relative to the directory
		copy     bool
		informal bool // loss by construction: reported, not asserted
	}{
		{"rename+create every 100 ms; glob app.log*", "app.log*", false, false},
		{"copytruncate every 100 ms; glob app.log*", "app.log*", true, false},
		{"copytruncate every 100 ms; app.log only (loss by construction)", "app.log", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := report(t, "4. rotation: "+tc.name)
			f := newScenario(t, b)
			topic, dir, lf, rd, w := f.topic, f.dir, f.lf, f.rd, f.w
			lf.Write(1000)
			a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, filepath.Join(dir, tc.glob), f.state)...)
			// The agent must know the file before its first rotation.
			w.waitAtLeast(1000, time.Minute, a)
			rotate := func(lf *lineFile, n int) {
				to := fmt.Sprintf("%s.%d", lf.Path, n)
				if tc.copy {
					lf.RotateCopyTruncate(to)
				} else {
					lf.RotateRename(to)
				}
			}
			pw := startPaced(lf, rate, 100*time.Millisecond, rotate)
			start := time.Now()
			waitFor(t, length+time.Minute, 50*time.Millisecond, func() bool { return time.Since(start) >= length },
				func() string { return "writing" })
			sent := pw.stop()
			stopped := time.Now()
			rotations := pw.rotations
			if !tc.informal {
				// Every file, the rotated ones included, acknowledged to its end.
				paths, _ := filepath.Glob(filepath.Join(dir, tc.glob))
				why := ""
				waitFor(t, 3*time.Minute, 100*time.Millisecond, func() (ok bool) {
					ok, why = checkpointsCover(t, filepath.Join(dir, "state"), paths)
					return ok
				}, func() string { return why + "; agent log:\n" + a.logTail() })
			} else {
				w.settle(time.Minute)
			}
			caughtUp := time.Now()
			a.stop(time.Minute)
			a.checkNoPanic()
			c := rd.countLines(t, topic, sent)
			rep.counts(int64(sent), c)
			rep.Recovery = secs(caughtUp.Sub(stopped))
			rep.note("%d rotations in %v at %d lines/s; recovery = from the last write until all of it is in Kafka", rotations, length, rate)
			if c.torn > 0 {
				// Reported, not failed: the follower sends a started last line when it finds the
				// file truncated, by design (follower.restart).
				rep.note("⚠ %d torn records: the start of a line the agent had read partly when the file was truncated, sent as a record", c.torn)
			}
			if c.spliced > 0 {
				rep.note("%d spliced records (the start of one line joined to bytes of another)", c.spliced)
				t.Errorf("%d spliced records: a line read partly before a copytruncate was completed with bytes of the new content", c.spliced)
			}
			if tc.informal {
				rep.note("lost = lines unread at a truncation, which only the unfollowed copy holds")
				if c.dup != 0 {
					t.Fatalf("%d duplicated", c.dup)
				}
				return
			}
			if tc.copy {
				rep.note("duplicates = lines read from app.log before a truncation and again from its copy")
			}
			if c.lost != 0 {
				t.Fatalf("%d of %d lines lost", c.lost, sent)
			}
			if !tc.copy && c.dup != 0 {
				t.Fatalf("%d duplicated", c.dup)
			}
		})
	}
}
