package statuspage_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// stages are a tailed line's: read (its file's modification time to Send), then the six.
var stages = []string{"read", "append", "drain", "doSend", "completedSend", "completedReceive", "callback"}

// TestAgentStatusPageEndToEnd runs the agent as users do, tailing a file into the real broker
// with --http 127.0.0.1:0 and every record traced, then checks the endpoints and that the page
// draws a record's read stage and six stages in headless Chromium (Debian's chromium package; scripts/deps.sh
// installs it). The screenshot is left in $KAFKATRAIL_SCREENSHOT, else in the temp directory.
func TestAgentStatusPageEndToEnd(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t) // skips under -short
	chromium := findChromium(t)
	topic := kafkatest.NewTopic(t, 3)
	dir := t.TempDir()

	bin := buildAgent(t, dir)

	logPath := filepath.Join(dir, "app.log")
	app, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	var appMu sync.Mutex
	written := 0
	write := func(n int) {
		appMu.Lock()
		defer appMu.Unlock()
		w := bufio.NewWriter(app)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, `{"level":"info","msg":"request served","n":%d,"path":"/api/orders"}`+"\n", written)
			written++
		}
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
	}
	write(100)
	// One line over the topic's max.message.bytes: the broker refuses it for good, and it is
	// dead-lettered (to the dead-letter file), so the page shows a dead letter by reason and by
	// file.
	limit := "6000"
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := kafkatest.NewAdmin(t).AlterTopicConfigs(actx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topic)
	acancel()
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("max.message.bytes of %s: %v", topic, err)
	}
	fmt.Fprintf(app, `{"level":"info","msg":"%s"}`+"\n", strings.Repeat("x", 8000))

	a := startPageAgent(t, bin, dir, "--brokers", bootstrap, "--topic", topic, "--tail", logPath,
		"--start-at", "beginning", "--state-dir", filepath.Join(dir, "state"),
		"--trace-sample-ratio", "1", "-X", "linger.ms=5")
	base, logTail := a.base, a.logTail
	t.Logf("status page at %s", base)

	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	var ready string
	waitFor(t, 30*time.Second, "/readyz to turn 200", logTail, func() bool {
		code, body := httpGet(t, base+"/readyz")
		ready = body
		return code == 200
	})
	t.Logf("/readyz: %s", strings.TrimSpace(ready))

	// Keep lines coming, so that throughput is live while the page is looked at.
	ctx, cancel := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				write(5)
			}
		}
	}()
	defer func() { cancel(); <-writerDone }()

	var st statuspage.Status
	waitFor(t, 30*time.Second, "the first 100 lines acknowledged", logTail, func() bool {
		getJSON(t, base+"/api/status", &st)
		return st.Totals.LinesAcked >= 100 && len(st.Files) == 1 && len(st.Brokers) > 0
	})
	if f := st.Files[0]; f.Path != logPath || f.ReadOffset == 0 || f.Size < f.ReadOffset {
		t.Errorf("file in /api/status: %+v", f)
	}
	waitFor(t, 30*time.Second, "the long line dead-lettered", logTail, func() bool {
		getJSON(t, base+"/api/status", &st)
		return st.Delivery.DeadLettered == 1
	})
	if f, d := st.Files[0], st.Delivery; f.LinesDeadLettered != 1 || len(d.DeadLetters) != 1 || d.DeadLetters[0].Reason != "too_large" || d.DeadLetters[0].Destination != "file" {
		t.Errorf("dead letters in /api/status: file %+v, delivery %+v; want the long line, too_large, in the file", f, d)
	}
	if !st.Ready || st.Info.Topic != topic || st.Info.Mode != "tail" || !strings.Contains(st.Info.Sampling, "100% of records") {
		t.Errorf("/api/status: %+v", st)
	}
	// A plain --topic: one row, every line read is sent to it.
	if r := st.Routing; len(r.Topics) != 1 || r.Topics[0].Topic != topic || r.Topics[0].LinesSent < r.Topics[0].LinesAcked || r.Topics[0].LinesAcked < 100 || r.Unrouted != nil {
		t.Errorf("routing in /api/status: %+v", r)
	}

	var tb statuspage.TracesBody
	waitFor(t, 30*time.Second, "a trace with read and six stages in /api/traces", logTail, func() bool {
		getJSON(t, base+"/api/traces?limit=1", &tb)
		return len(tb.Traces) == 1 && len(tb.Traces[0].Stages) == len(stages)
	})
	for i, s := range tb.Traces[0].Stages {
		if s.Name != stages[i] {
			t.Errorf("stage %d of the last trace is %s, want %s", i, s.Name, stages[i])
		}
	}
	// read ends where the send span starts; the file's modification time is at most seconds old.
	if r := tb.Traces[0].Stages[0]; r.Name == "read" && (r.StartUS+r.DurationUS > 1 || r.StartUS+r.DurationUS < -1 || r.DurationUS > 30e6) {
		t.Errorf("read stage %+v: want it to end at the trace's start, within 30 s of it", r)
	}
	// The line age over the last minute: the lines are acknowledged well within seconds.
	waitFor(t, 15*time.Second, "line_age in /api/status", logTail, func() bool {
		getJSON(t, base+"/api/status", &st)
		return st.LineAge != nil && st.LineAge.Count > 0
	})
	if a := st.LineAge; !(a.P50Seconds > 0 && a.P50Seconds <= a.P99Seconds && a.P99Seconds < 30 && a.MeanSeconds > 0) {
		t.Errorf("line_age in /api/status: %+v", *a)
	}

	// The agent's own metrics are copied from its counters once a second: wait for them.
	wantMetrics := []string{"kafkatrail_producer_stage_duration_seconds_bucket", `stage="read"`,
		"kafkatrail_producer_record_age_seconds_bucket", "kafkatrail_agent_lines_read_total",
		"kafkatrail_agent_checkpoint_lag_bytes", "kafkatrail_producer_inflight_requests",
		"messaging_client_operation_duration_seconds_bucket",
		"kafkatrail_agent_lines_sent_total", "kafkatrail_agent_lines_acked_total", `messaging_destination_name="` + topic + `"`}
	var missing []string
	waitFor(t, 15*time.Second, "every expected metric in /metrics", func() string { return strings.Join(missing, "\n") }, func() bool {
		code, metrics := httpGet(t, base+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		missing = missing[:0]
		for _, want := range wantMetrics {
			if !strings.Contains(metrics, want) {
				missing = append(missing, want)
			}
		}
		return len(missing) == 0
	})

	// The page in a real browser: its script polls the JSON endpoints and draws the waterfall.
	dom := runChromium(t, chromium, "--dump-dom", base+"/")
	checkWaterfall(t, dom)
	if m := regexp.MustCompile(`id="age-p50">([^<]*)<`).FindStringSubmatch(dom); m == nil || !strings.ContainsAny(m[1], "0123456789") {
		t.Errorf("the page's line-age card reads %v, want a duration", m)
	}
	if m := regexp.MustCompile(`id="dl-reasons">([^<]*)<`).FindStringSubmatch(dom); m == nil || m[1] != "too_large 1 (file)" {
		t.Errorf("the page's dead letters by reason read %v, want too_large 1 (file)", m)
	}
	if !strings.Contains(dom, `data-topic="`+topic+`"`) {
		t.Errorf("the page has no row for topic %s in its Topics table", topic)
	}
	if !strings.Contains(dom, `data-file="`+logPath+`"`) {
		t.Errorf("the page has no row for %s in its Files table", logPath)
	}
	for _, b := range st.Brokers {
		if !strings.Contains(dom, fmt.Sprintf(`data-node="%d"`, b.ID)) {
			t.Errorf("the page has no row for broker node %d in its Brokers table", b.ID)
		}
	}
	shot := os.Getenv("KAFKATRAIL_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(os.TempDir(), "kafkatrail-statuspage.png")
	}
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1280,1400", "--hide-scrollbars", base+"/")
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v (size %v)", shot, err, fi)
	} else {
		t.Logf("screenshot: %s", shot)
	}

	cancel()
	<-writerDone
	a.stop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the page still answers after the agent exited")
	}
}

// checkWaterfall asserts that the DOM has a trace element with a bar for read and each of the
// six stages, in order.
func checkWaterfall(t *testing.T, dom string) {
	t.Helper()
	traces := strings.Split(dom, `class="trace" data-trace-id="`)
	if len(traces) < 2 {
		t.Fatalf("no trace drawn in the page; DOM:\n%s", truncate(dom, 4000))
	}
	barRE := regexp.MustCompile(`class="bar[^"]*" data-stage="([A-Za-z]+)"[^>]*style="left: ?[0-9.]+%; ?width: ?[0-9.]+%;?"`)
	first := traces[1]
	var got []string
	for _, m := range barRE.FindAllStringSubmatch(first, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != strings.Join(stages, ",") {
		t.Fatalf("the first trace's bars are %v, want %v; its DOM:\n%s", got, stages, truncate(first, 4000))
	}
	t.Logf("%d traces drawn; the first has bars %v", len(traces)-1, got)
}

func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: run scripts/deps.sh (it installs Debian's chromium package)")
	return ""
}

// runChromium runs headless Chromium on its own throwaway profile and returns its output.
// The virtual time budget lets the page's one-second polls run before the DOM is dumped or
// the screenshot taken.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, args...)
	cmd := exec.CommandContext(ctx, chromium, all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, truncate(stderr.String(), 4000))
	}
	t.Logf("chromium %s took %v", args[0], time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

func waitFor(t *testing.T, timeout time.Duration, what string, logTail func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v; see:\n%s", what, timeout, truncate(logTail(), 8000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := httpGet(t, url)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// cleanEnv is the test's environment without the agent's and OpenTelemetry's variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KAFKATRAIL_") || strings.HasPrefix(kv, "AGENT_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// pageAgent is the agent binary run with its status page on (--http 127.0.0.1:0), telemetry
// export off, its log in its own file.
type pageAgent struct {
	t       *testing.T
	cmd     *exec.Cmd
	exited  chan error
	stopped bool
	logPath string
	base    string // the status page's URL, without a trailing slash
}

// buildAgent builds the agent binary into dir.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/kafkatrail/kafkatrail/cmd/agent").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

// startPageAgent starts bin with args and --http 127.0.0.1:0, waits for the page's address in
// its log, and kills it at the end of the test unless stop ran.
func startPageAgent(t *testing.T, bin, dir string, args ...string) *pageAgent {
	t.Helper()
	// No collector: the page shows traces and metrics all the same.
	return startPageAgentEnv(t, bin, dir, []string{"OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none"}, args...)
}

// startPageAgentEnv is startPageAgent with env added to a clean environment.
func startPageAgentEnv(t *testing.T, bin, dir string, env []string, args ...string) *pageAgent {
	t.Helper()
	a := &pageAgent{t: t, exited: make(chan error, 1), logPath: filepath.Join(dir, "agent.log")}
	lf, err := os.Create(a.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	a.cmd = exec.Command(bin, append(args, "--http", "127.0.0.1:0")...)
	a.cmd.Stdout, a.cmd.Stderr = lf, lf
	a.cmd.Env = append(cleanEnv(), env...)
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exited <- a.cmd.Wait() }()
	t.Cleanup(func() {
		if !a.stopped {
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	})
	urlRE := regexp.MustCompile(`"msg":"status page","url":"(http://127\.0\.0\.1:\d+/)"`)
	waitFor(t, 30*time.Second, "the status page's address in the log", a.logTail, func() bool {
		if m := urlRE.FindStringSubmatch(a.logTail()); m != nil {
			a.base = strings.TrimSuffix(m[1], "/")
			return true
		}
		return false
	})
	return a
}

func (a *pageAgent) logTail() string { b, _ := os.ReadFile(a.logPath); return string(b) }

// stop sends SIGTERM and fails the test unless the agent exits 0 within 40 s.
func (a *pageAgent) stop() {
	a.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.exited:
		a.stopped = true
		if err != nil {
			a.t.Fatalf("agent exited with %v; log:\n%s", err, a.logTail())
		}
	case <-time.After(40 * time.Second):
		a.t.Fatalf("agent did not stop within 40s of SIGTERM; log:\n%s", a.logTail())
	}
}
