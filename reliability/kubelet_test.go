package reliability

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// TestKubeletRotation is the kubelet's log rotation of a chatty CRI container (containerd,
// CRI-O) while it writes 20,000 numbered lines a second, every tenth line as P/F pieces. At each
// rotation the kubelet gzips the rotated file before the newest and deletes it, renames 0.log
// to 0.log.<time> and has the runtime reopen 0.log (the runtime writes to the renamed file until
// it has). The agent follows <dir>/var/log/containers/*.log with --container-format cri, as a
// DaemonSet does: the link there keeps its name and resolves to each new 0.log in turn, and the
// rotated names are not under the glob.
//
// Every line must arrive once, the pieces of a line joined into one record. The kubelet deletes
// only files older than the newest rotated one, which the agent, following each 0.log in turn,
// holds open: nothing is lost by construction, provided the agent sees each 0.log.
//
// The first row rotates every 500 ms (full: 20 s; CI: 4 s), faster than a kubelet can (its
// containerLogMonitorInterval is at least 3 s) and faster than the agent's 1 s re-scan, which is
// what finds a new 0.log: a rotation changes nothing in /var/log/containers, the directory the
// agent watches. The second rotates every 3 s (full: 20 s; CI: 7 s, two rotations), the
// kubelet's fastest.
func TestKubeletRotation(t *testing.T) {
	b := theBroker(t)
	const rate = 20000
	for _, tc := range []struct {
		name   string
		every  time.Duration
		length time.Duration
	}{
		{"4. rotation: kubelet (rename to 0.log.<time>, older gzipped; CRI)", 500 * time.Millisecond, size(20*time.Second, 4*time.Second)},
		{"4. rotation: kubelet at its fastest, every 3 s (rename to 0.log.<time>, older gzipped; CRI)", 3 * time.Second, size(20*time.Second, 7*time.Second)},
	} {
		t.Run(tc.every.String(), func(t *testing.T) {
			rep := report(t, tc.name)
			topic, dir := b.newTopic(t, 3), t.TempDir()
			state := filepath.Join(dir, "state")
			rd := b.reader()
			w := rd.watch(t, topic)
			c := newCRILog(t, dir)

			c.write(1000, time.Now())
			a := startAgent(t, nil, nil, tailArgs(b.bootstrap(), topic, filepath.Join(dir, "var/log/containers/*.log"), state,
				"--container-format", "cri")...)
			// The agent must know the file before its first rotation (the first scan finds it).
			w.waitAtLeast(1000, time.Minute, a)

			run := c.start(rate, tc.every)
			start := time.Now()
			waitFor(t, tc.length+time.Minute, 50*time.Millisecond, func() bool { return time.Since(start) >= tc.length },
				func() string { return "writing" })
			sent, rotations := run.stop()
			stopped := time.Now()

			// Until every line is in Kafka, or the topic stops growing: lost lines never come,
			// and the row says how many rather than failing on a long wait.
			var caughtUp time.Time
			last, since := int64(-1), time.Now()
			waitFor(t, 3*time.Minute, 50*time.Millisecond, func() bool {
				n := w.get()
				if n >= int64(sent) {
					caughtUp = time.Now()
					return true
				}
				if n != last {
					last, since = n, time.Now()
				}
				return time.Since(since) >= 10*time.Second
			}, func() string {
				return fmt.Sprintf("%d of %d records in Kafka; agent log:\n%s", last, sent, a.logTail())
			})
			a.stop(time.Minute)
			a.checkNoPanic()

			cnt := rd.countLines(t, topic, sent)
			rep.counts(int64(sent), cnt)
			if !caughtUp.IsZero() {
				rep.Recovery = secs(caughtUp.Sub(stopped))
			}
			// Each 0.log the agent found is logged once: "following file".
			followed := strings.Count(a.log(), `msg="following file"`)
			rep.note("%d rotations every %v at %d lines/s, %s lines in pieces; the agent followed %d of the %d files; recovery = from the last write until all of it is in Kafka",
				rotations, tc.every, rate, num(int64(c.pieced)), followed, rotations+1)
			if cnt.torn > 0 || cnt.spliced > 0 {
				t.Errorf("%d torn and %d spliced records: a line's pieces were not joined into one record", cnt.torn, cnt.spliced)
			}
			if cnt.lost != 0 || cnt.dup != 0 {
				rep.note("lost = the lines of the files the agent never followed")
				t.Fatalf("%d of %d lines lost, %d duplicated (the agent followed %d of the %d files); agent log:\n%s",
					cnt.lost, sent, cnt.dup, followed, rotations+1, a.logTail())
			}
		})
	}
}

// criLog is a CRI container's log as the kubelet lays it out under a node's root:
// var/log/pods/<ns>_<pod>_<uid>/<container>/0.log, linked from
// var/log/containers/<pod>_<ns>_<container>-<id>.log. Its lines are the numbered lines
// (testkit.NumberedLine, without the newline) in the runtime's framing.
type criLog struct {
	t    *testing.T
	path string // the pod's 0.log

	mu     sync.Mutex // the runtime's writes and reopens
	f      *os.File
	next   int // the number of the next line
	pieced int // lines written in pieces
	buf    []byte
}

func newCRILog(t *testing.T, root string) *criLog {
	t.Helper()
	c := &criLog{t: t, path: filepath.Join(root, "var/log/pods/shop_web-7d9f8c6b5-x2kqz_3b8e2f1c-6c1d-4a55-9a0e-6f0a1c2d3e4f/nginx/0.log")}
	link := filepath.Join(root, "var/log/containers/web-7d9f8c6b5-x2kqz_shop_nginx-4f1c6d7e8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d.log")
	for _, d := range []string{filepath.Dir(c.path), filepath.Dir(link)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.reopen()
	if err := os.Symlink(c.path, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.f.Close() })
	return c
}

// reopen is the runtime's ReopenContainerLog: it closes its descriptor and opens (creates) 0.log.
func (c *criLog) reopen() {
	if c.f != nil {
		c.f.Close()
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		c.t.Error(err)
		return
	}
	c.f = f
}

// write appends n lines written at now, in writes of about 64 KiB. Every tenth line goes in two
// pieces (P, then F) and every fiftieth in three, as the runtime cuts a line longer than its
// buffer; every seventh whole line goes to stderr. The pieces of one line are never split
// between two writes' files: the runtime reopens between writes.
func (c *criLog) write(n int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := now.Format(time.RFC3339Nano)
	for n > 0 {
		c.buf = c.buf[:0]
		for n > 0 && len(c.buf) < 64<<10 {
			i := c.next
			msg := testkit.NumberedLine(nil, i, lineLen)
			msg = msg[:len(msg)-1]
			var cuts []int
			switch {
			case i%50 == 25:
				cuts = []int{20, 60}
			case i%10 == 5:
				cuts = []int{40}
			}
			stream := "stdout"
			if cuts == nil && i%7 == 3 {
				stream = "stderr"
			}
			if cuts != nil {
				c.pieced++
			}
			from := 0
			for _, cut := range cuts {
				c.buf = fmt.Appendf(c.buf, "%s %s P %s\n", ts, stream, msg[from:cut])
				from = cut
			}
			c.buf = fmt.Appendf(c.buf, "%s %s F %s\n", ts, stream, msg[from:])
			c.next++
			n--
		}
		if _, err := c.f.Write(c.buf); err != nil {
			c.t.Error(err)
			return
		}
	}
}

// criRun is the runtime writing at a steady pace and the kubelet rotating, until stopped.
type criRun struct {
	c         *criLog
	stopped   chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
	rotations int
}

// start has the runtime write perSecond lines a second (in 10 ms slices) and the kubelet rotate
// 0.log every period.
func (c *criLog) start(perSecond int, period time.Duration) *criRun {
	r := &criRun{c: c, stopped: make(chan struct{})}
	c.t.Cleanup(func() { r.stop() }) // a test failed before stopping them: not after its end
	r.wg.Add(2)
	go func() { // the runtime
		defer r.wg.Done()
		begin, before := time.Now(), c.lines()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stopped:
				return
			case now := <-tick.C:
				// Catch up to the schedule: the rate holds even if a tick was late.
				if n := int(now.Sub(begin).Seconds()*float64(perSecond)) - (c.lines() - before); n > 0 {
					c.write(n, now)
				}
			}
		}
	}()
	go func() { // the kubelet
		defer r.wg.Done()
		// The kubelet names a rotated file after the second it rotated it: rotations closer
		// than a second apart take the seconds of a clock that advances one a rotation, so that
		// no name is reused (a real kubelet rotates a container's log at most once per
		// containerLogMonitorInterval, 10 s by default).
		names := time.Now().UTC()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-r.stopped:
				return
			case <-tick.C:
			}
			r.rotations++
			c.rotate(names.Add(time.Duration(r.rotations) * time.Second))
		}
	}()
	return r
}

// lines returns the lines written so far.
func (c *criLog) lines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// rotate is the kubelet's rotateLog: the rotated files but the newest are gone already; the
// newest (rotated last time) is gzipped to <name>.gz and deleted; 0.log is renamed to
// 0.log.<20060102-150405>; then the runtime reopens 0.log. The runtime goes on writing to its
// descriptor between the rename and the reopen: those lines are in the renamed file.
func (c *criLog) rotate(at time.Time) {
	rotated, _ := filepath.Glob(c.path + ".*")
	for _, p := range rotated {
		if !strings.HasSuffix(p, ".gz") {
			c.compress(p)
		}
	}
	if err := os.Rename(c.path, c.path+"."+at.Format("20060102-150405")); err != nil {
		c.t.Error(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reopen()
}

// compress gzips p to p.gz (through a temporary file, as the kubelet does) and deletes p.
func (c *criLog) compress(p string) {
	in, err := os.Open(p)
	if err != nil {
		c.t.Error(err)
		return
	}
	defer in.Close()
	out, err := os.Create(p + ".gz.tmp")
	if err != nil {
		c.t.Error(err)
		return
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p+".gz.tmp", p+".gz")
	}
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil {
		c.t.Error(err)
	}
}

// stop stops the runtime and the kubelet and returns the lines written and the rotations.
func (r *criRun) stop() (sent, rotations int) {
	r.once.Do(func() { close(r.stopped) })
	r.wg.Wait()
	return r.c.lines(), r.rotations
}
