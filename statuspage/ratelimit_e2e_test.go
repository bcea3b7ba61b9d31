package statuspage_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// TestAgentRateLimitEndToEnd runs the agent binary on two files with --max-lines-per-second
// into the real broker: the limit holds across both files (the run takes at least (M - burst) /
// N seconds), every line arrives (a pause, never a drop), and /api/status and /metrics show
// the limit and the time spent paused.
func TestAgentRateLimitEndToEnd(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t) // skips under -short
	topic := kafkatest.NewTopic(t, 3)
	dir := t.TempDir()
	bin := buildAgent(t, dir)

	logs := filepath.Join(dir, "logs") // the agent's own log stays out of the glob
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	const rate, perFile = 1000, 1500
	want := map[string]bool{}
	for _, name := range []string{"a.log", "b.log"} {
		f, err := os.Create(filepath.Join(logs, name))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := range perFile {
			line := fmt.Sprintf("%s line %05d", name, i)
			want[line] = true
			fmt.Fprintln(w, line)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	total := len(want)

	start := time.Now()
	a := startPageAgent(t, bin, dir, "--brokers", bootstrap, "--topic", topic, "--tail", filepath.Join(logs, "*.log"),
		"--start-at", "beginning", "--state-dir", filepath.Join(dir, "state"),
		"--max-lines-per-second", strconv.Itoa(rate), "-X", "linger.ms=5")
	base, logTail := a.base, a.logTail

	// While it runs, reading is paused by the limit and says so.
	var st statuspage.Status
	waitFor(t, 30*time.Second, "paused time in /api/status", logTail, func() bool {
		getJSON(t, base+"/api/status", &st)
		return st.RateLimit.PausedSeconds > 0
	})
	if st.RateLimit.LinesPerSecond != rate || st.RateLimit.BytesPerSecond != 0 {
		t.Errorf("rate limit in /api/status: %+v", st.RateLimit)
	}
	waitFor(t, 30*time.Second, "every line acknowledged", logTail, func() bool {
		getJSON(t, base+"/api/status", &st)
		return st.Totals.LinesAcked >= int64(total)
	})
	took := time.Since(start)
	// A lower bound only: a loaded machine makes the run slower, never faster.
	if minTook := time.Duration(float64(total-rate/10) / rate * float64(time.Second)); took < minTook {
		t.Errorf("%d lines at %d lines/s took %v, want at least %v", total, rate, took, minTook)
	}
	if st.Totals.LinesRead != int64(total) || st.Totals.LinesFailed != 0 {
		t.Errorf("totals %+v, want %d read and none failed", st.Totals, total)
	}
	waitFor(t, 15*time.Second, "the rate-limit wait in /metrics", logTail, func() bool {
		_, metrics := httpGet(t, base+"/metrics")
		m := regexp.MustCompile(`(?m)^kafkatrail_agent_rate_limit_wait_seconds_total(?:\{[^}]*\})? ([0-9.e+-]+)$`).FindStringSubmatch(metrics)
		if m == nil {
			return false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return err == nil && v > 0
	})

	a.stop()

	// Nothing dropped: every line is in the topic, once.
	got := map[string]int{}
	for _, r := range kafkatest.Consume(t, topic, total, 30*time.Second) {
		got[string(r.Value)]++
	}
	for line := range want {
		if got[line] != 1 {
			t.Fatalf("%q is in the topic %d times, want once (%d distinct records)", line, got[line], len(got))
		}
	}
	t.Logf("%d lines from 2 files at %d lines/s took %v; paused %.1f s in all (both files' waits)", total, rate, took.Round(time.Millisecond), st.RateLimit.PausedSeconds)
}
