package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// lineEndCounts are what the agent says about its lines: its totals (Stats), the topic's counts
// (TopicStats, /api/status routing), and the metrics it exports.
type lineEndCounts struct {
	read, sent, acked, failed, unsent, deadLettered, filtered int64
	resent                                                    int64 // at least
}

// lineEndCase is one way a line can end (README "How a line can end"), run through a real agent
// on a kfake cluster.
type lineEndCase struct {
	name  string
	stdin bool
	lines []string
	// refuse, when set, is the error code every produce request meets while the fault is on;
	// the fault is on from the start until the agent sent a line again (a line expired, or, with
	// --exactly-once, a transaction aborted and its lines were read again), or, with
	// stopInFault, for the whole run, which is stopped while it is on.
	refuse      int16
	stopInFault bool
	mutate      func(*Config)
	want        lineEndCounts
	// errorLogged is the message of an ERROR the case must log: a line lost, or sending stopped
	// for a refusal an operator must act on. Without it no ERROR may be logged but for
	// mayLogError, a run that did end in an error (the stop came before the lines went).
	errorLogged    string
	errorLoggedEOS string
	mayLogError    bool
}

// TestHowALineCanEnd runs every way a line can end, with and without --exactly-once, and checks
// that what the agent says agrees with what happened: acknowledged means acknowledged (with
// --exactly-once, committed), failed means lost, a dead letter is counted as one, a line of an
// aborted transaction is sent again (not acknowledged twice), and nothing that was not lost is
// logged as an error. The totals, the topic's counts and the exported metrics must agree.
func TestHowALineCanEnd(t *testing.T) {
	lines := make([]string, 20)
	for i := range lines {
		lines[i] = fmt.Sprintf("line-%02d", i)
	}
	long := strings.Repeat("L", 4000)
	withLong := append(append(append([]string{}, lines[:10]...), long), lines[10:]...)
	fast := func(cfg *Config) {
		cfg.Producer["delivery.timeout.ms"] = "600"
		cfg.Producer["request.timeout.ms"] = "300"
	}
	cases := []lineEndCase{
		{name: "acknowledged", lines: lines, want: lineEndCounts{read: 20, sent: 20, acked: 20}},
		{name: "left out", lines: lines, mutate: func(cfg *Config) { cfg.ExcludeLines = []string{`line-1[0-4]`} },
			want: lineEndCounts{read: 15, sent: 15, acked: 15, filtered: 5}}, // Stats.LinesRead: the lines sent
		{name: "retried past delivery.timeout.ms, sent again", lines: lines, refuse: kerr.NotEnoughReplicas.Code, mutate: fast,
			want: lineEndCounts{read: 20, sent: 20, acked: 20, resent: 1}},
		{name: "refused for good, dead-lettered", lines: withLong, mutate: func(cfg *Config) { cfg.DeadLetterTopic = "dlq" },
			want: lineEndCounts{read: 21, sent: 21, acked: 20, deadLettered: 1}},
		{name: "refused for the configuration, stopped, resumed", lines: lines, refuse: kerr.TopicAuthorizationFailed.Code,
			want: lineEndCounts{read: 20, sent: 20, acked: 20, resent: 1}, errorLogged: "sending stopped"},
		{name: "given up at the stop", lines: lines, refuse: kerr.NotEnoughReplicas.Code, stopInFault: true,
			mutate: func(cfg *Config) { cfg.ShutdownTimeout = 500 * time.Millisecond },
			want:   lineEndCounts{read: 20, sent: 20}, mayLogError: true},
		{name: "stdin acknowledged", stdin: true, lines: lines, want: lineEndCounts{read: 20, sent: 20, acked: 20}},
		{name: "stdin lost", stdin: true, lines: lines, refuse: kerr.NotEnoughReplicas.Code, stopInFault: true, mutate: fast,
			want: lineEndCounts{read: 20, sent: 20, failed: 20}, errorLogged: "line lost"},
	}
	for _, eos := range []bool{false, true} {
		for _, tc := range cases {
			if eos && tc.stdin {
				continue // --exactly-once is for files only
			}
			name := tc.name
			if eos {
				name += " (exactly-once)"
			}
			t.Run(name, func(t *testing.T) { runLineEnd(t, tc, eos) })
		}
	}
}

func runLineEnd(t *testing.T, tc lineEndCase, eos bool) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dlq": nil})
	data := strings.Join(tc.lines, "\n") + "\n"
	var cfg Config
	if eos {
		cfg = eosConfig(c, "logs", writeTemp(t, "app.log", []byte(data)), t.TempDir())
	} else {
		cfg = DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.StateDir = c.ListenAddrs(), "logs", t.TempDir()
		cfg.Producer["linger.ms"] = "0"
		if tc.stdin {
			cfg.Stdin = true
		} else {
			cfg.Tail, cfg.StartAt = []string{writeTemp(t, "app.log", []byte(data))}, "beginning"
		}
	}
	if tc.mutate != nil {
		tc.mutate(&cfg)
	}
	var faultOn atomic.Bool
	var refused atomic.Int64
	if tc.refuse != 0 {
		faultOn.Store(true)
		c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if !faultOn.Load() {
				return nil, nil, false
			}
			refused.Add(1)
			return kafkatest.ProduceError(r.(*kmsg.ProduceRequest), func(kmsg.ProduceRequestTopicPartition) int16 { return tc.refuse }), nil, true
		})
	}
	logs := &recordedLog{}
	reader := sdkmetric.NewManualReader()
	env := telemetry.ReadEnv(func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}[k]
	})
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Env: &env, ExtraMetricReader: reader, ErrorLogger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	a, err := New(cfg, slog.New(logs), tel)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	if tc.stdin {
		go func() { done <- a.RunStdin(ctx, strings.NewReader(data)) }()
	} else {
		go func() { done <- a.RunTail(ctx) }()
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			select {
			case err := <-done:
				if !tc.stdin || !tc.stopInFault {
					t.Fatalf("the run ended (%v) before %s", err, what)
				}
				done <- err
				return
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("not %s within 30 s: stats %s, files %+v", what, statsLine(a), a.FileStats())
			}
		}
	}
	if tc.refuse != 0 {
		if tc.stopInFault {
			waitUntil("refused", func() bool { return refused.Load() > 0 })
		} else {
			waitUntil("a line sent again", func() bool { return a.Stats().LinesResent.Load() > 0 })
			faultOn.Store(false)
		}
	}
	var runErr error
	switch {
	case tc.stdin:
		runErr = <-done
	case tc.stopInFault:
		cancel()
		runErr = <-done
	default:
		waitUntil("every line acknowledged or dead-lettered", func() bool {
			st := a.Stats()
			return st.LinesAcked.Load()+st.LinesDeadLettered.Load()+st.LinesFiltered.Load() == int64(len(tc.lines))
		})
		cancel()
		runErr = <-done
	}
	if tc.stopInFault != (runErr != nil && !errors.Is(runErr, ErrInterrupted)) {
		t.Errorf("the run ended with %v", runErr)
	}

	st := a.Stats()
	got := lineEndCounts{read: st.LinesRead.Load(), acked: st.LinesAcked.Load(), failed: st.LinesFailed.Load(),
		unsent: st.LinesUnsent.Load(), deadLettered: st.LinesDeadLettered.Load(), filtered: st.LinesFiltered.Load(),
		resent: st.LinesResent.Load()}
	var topic TopicStats
	for _, ts := range a.TopicStats() {
		if ts.Topic == "logs" {
			topic = ts
		}
	}
	got.sent = topic.LinesSent
	want := tc.want
	if tc.stopInFault && !tc.stdin && !eos {
		want.unsent = got.unsent // the lines in flight at the stop: at least one
		if got.unsent == 0 {
			t.Errorf("no line counted as not delivered before the stop")
		}
	}
	if got.resent >= want.resent {
		// At least: a line expires as often as the fault outlives delivery.timeout.ms, and with
		// --exactly-once every line of an aborted transaction is sent again.
		want.resent = got.resent
	}
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if topic.LinesAcked != got.acked || topic.LinesFailed != got.failed || topic.LinesDeadLettered != got.deadLettered {
		t.Errorf("topic logs %+v, disagrees with the totals %+v", topic, got)
	}
	if !tc.stdin {
		// The file's own counts, on the Files table: with --exactly-once they too count a line
		// once its transaction committed.
		fs := a.FileStats()
		if len(fs) != 1 || int64(fs[0].LinesAcked) != got.acked || int64(fs[0].LinesDeadLettered) != got.deadLettered || fs[0].LinesFailed != 0 {
			t.Errorf("file stats %+v disagree with the totals %+v", fs, got)
		}
	}
	if !tc.stopInFault && topic.InFlight() != 0 {
		t.Errorf("topic logs %+v: %d in flight after every line ended", topic, topic.InFlight())
	}

	// The metrics say the same: the reporter's last report runs as the run ends.
	m := collectCounters(t, reader)
	for name, n := range map[string]int64{
		telemetry.MetricAgentLinesAcked: got.acked, telemetry.MetricAgentLinesFailed: got.failed,
		telemetry.MetricAgentLinesDeadLettered: got.deadLettered, telemetry.MetricAgentLinesResent: got.resent,
		telemetry.MetricAgentLinesSent: got.sent,
	} {
		if m[name] != n {
			t.Errorf("metric %s = %d, want %d (the agent's own count)", name, m[name], n)
		}
	}

	// The log says what happened: nothing is called lost that was not, nor refused in an
	// earlier run in this one.
	mustLog := tc.errorLogged
	if eos {
		mustLog = tc.errorLoggedEOS
	}
	logged := false
	for _, r := range logs.all() {
		if r.level < slog.LevelError {
			continue
		}
		switch {
		case mustLog != "" && strings.Contains(r.msg, mustLog):
			logged = true
		case !tc.mayLogError:
			t.Errorf("logged an error where nothing was lost: %s %v", r.msg, r.attrs)
		}
	}
	if mustLog != "" && !logged {
		t.Errorf("no ERROR %q logged", mustLog)
	}
	for _, r := range logs.all() {
		for _, wrong := range []string{"earlier run", "failed for good", "a restart sends them again"} {
			if strings.Contains(r.msg, wrong) {
				t.Errorf("logged %q: %s", wrong, r.msg)
			}
		}
	}
	t.Logf("stats %+v; run error: %v", got, runErr)
}

func statsLine(a *Agent) string {
	st := a.Stats()
	return fmt.Sprintf("read %d acked %d failed %d unsent %d dead-lettered %d resent %d", st.LinesRead.Load(),
		st.LinesAcked.Load(), st.LinesFailed.Load(), st.LinesUnsent.Load(), st.LinesDeadLettered.Load(), st.LinesResent.Load())
}

// collectCounters sums every int64 sum metric the reader holds, by name.
func collectCounters(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					out[m.Name] += dp.Value
				}
			}
		}
	}
	return out
}

// recordedLog is a slog.Handler that keeps every record, for tests that check what was logged.
type recordedLog struct {
	mu      sync.Mutex
	records []loggedRecord
	attrs   []slog.Attr
}

type loggedRecord struct {
	level slog.Level
	msg   string
	attrs string
}

func (l *recordedLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *recordedLog) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, "%s ", a); return true })
	l.mu.Lock()
	l.records = append(l.records, loggedRecord{r.Level, r.Message, b.String()})
	l.mu.Unlock()
	return nil
}

func (l *recordedLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordedLog) WithGroup(string) slog.Handler      { return l }

func (l *recordedLog) all() []loggedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedRecord(nil), l.records...)
}
