package agent

import (
	"context"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// metricsReporter copies the tailer's and the agent's counters into the OpenTelemetry agent
// metrics once a second. Polling keeps the read path free of metric calls; a second of delay
// is nothing for counters and gauges scraped every 15 s or more.
type metricsReporter struct {
	a     *Agent
	files map[string]*fileReport // by path
	stdin *fileReport
	// paused is the rate limit's paused time already reported.
	paused time.Duration
	// fallbacks (timestamp, json_merge, message_cut) and sasl (connect, reauthenticate, token
	// fetches, failed fetches) are the counts already reported; reported says the series exist.
	fallbacks [3]int64
	sasl      [4]int64
	reported  bool
	// topics are by topic name: at most --max-topics and the fallback, as the router bounds them.
	topics   map[string]*topicReport
	unrouted map[string]int64 // by reason, as last reported
	// deadLetters and resent are the counts last reported.
	deadLetters map[deadLetterKey]int64
	resent      int64
}

type topicReport struct {
	m                   *telemetry.TopicMetrics
	sent, acked, failed int64
}

type fileReport struct {
	m *telemetry.FileMetrics
	// t is the tailer the counts below are of: an input that a reload restarted counts its
	// file's lines from zero again.
	t                                   *filetail.Tailer
	lines, bytes                        int64
	truncated, split, dropped, seenRead uint64
	container                           containerReport
	notIncluded, excluded               int64 // filterCounts reported
}

// reportFiltered adds the lines the filters left out since the last report (c nil: none yet).
func (fr *fileReport) reportFiltered(c *filterCounts) {
	if c == nil {
		return
	}
	if n := c.notIncluded.Load(); n > fr.notIncluded {
		fr.m.Dropped(linerecord.FilteredNotIncluded, int(n-fr.notIncluded))
		fr.notIncluded = n
	}
	if n := c.excluded.Load(); n > fr.excluded {
		fr.m.Dropped(linerecord.FilteredExcluded, int(n-fr.excluded))
		fr.excluded = n
	}
}

// containerReport is what was reported of a source's filetail.ContainerCounts.
type containerReport struct{ joined, malformed, interrupted uint64 }

// report adds to m the counts that grew since the last report.
func (c *containerReport) report(m *telemetry.FileMetrics, joined, malformed, interrupted uint64) {
	for _, x := range []struct {
		reason string
		seen   *uint64
		now    uint64
	}{{"joined", &c.joined, joined}, {"malformed", &c.malformed, malformed}, {"interrupted", &c.interrupted, interrupted}} {
		if x.now > *x.seen {
			m.ContainerLines(x.reason, int(x.now-*x.seen))
			*x.seen = x.now
		}
	}
}

// startMetrics starts the goroutine that reports the agent's metrics (reportMetrics); stop ends
// it after a last report and returns once it exited.
func (a *Agent) startMetrics() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.reportMetrics(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (a *Agent) reportMetrics(ctx context.Context) {
	if a.tel == nil {
		return
	}
	r := &metricsReporter{a: a, files: map[string]*fileReport{}, topics: map[string]*topicReport{}, unrouted: map[string]int64{},
		deadLetters: map[deadLetterKey]int64{}}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	defer r.close()
	for {
		select {
		case <-ctx.Done():
			r.report()
			return
		case <-t.C:
			r.report()
		}
	}
}

func (r *metricsReporter) report() {
	am := r.a.tel.Agent()
	if p := r.a.ratePaused(); p > r.paused {
		am.RateLimitWait(p - r.paused)
		r.paused = p
	}
	seen := map[string]bool{}
	for _, in := range r.a.inputList() {
		t := in.tailer.Load()
		if t == nil {
			continue
		}
		for _, f := range t.Stats().Files {
			key := sourceKey(in, f.Path)
			seen[key] = true
			fr := r.files[key]
			if fr == nil {
				fr = &fileReport{m: am.InputFile(in.name, f.Path), t: t}
				r.files[key] = fr
			}
			if fr.t != t { // restarted from its checkpoint: its counts start again
				fr.t, fr.lines, fr.truncated, fr.split, fr.dropped = t, 0, 0, 0, 0
				fr.container = containerReport{}
			}
			if d := int64(f.LinesRead) - fr.lines; d > 0 {
				// Bytes from the read offset; a copytruncate reset is not counted backwards.
				fr.m.Read(int(d), int(max(f.ReadOffset-fr.bytes, 0)))
			}
			fr.lines, fr.bytes = int64(f.LinesRead), f.ReadOffset
			for ; fr.truncated < f.Truncated; fr.truncated++ {
				fr.m.Truncated()
			}
			for ; fr.split < f.Split; fr.split++ {
				fr.m.Split()
			}
			if f.Dropped > fr.dropped {
				fr.m.Dropped("long-line", int(f.Dropped-fr.dropped))
				fr.dropped = f.Dropped
			}
			fr.reportFiltered(r.a.filtered.lookup(key))
			fr.container.report(fr.m, f.Container.Joined, f.Container.Malformed, f.Container.Interrupted)
			fr.m.SetPosition(f.Size, f.ReadOffset, f.Committed)
			fr.m.SetOldestUnacked(f.OldestUnacked)
		}
	}
	for key, fr := range r.files {
		if !seen[key] {
			fr.m.Close()
			delete(r.files, key)
		}
	}
	r.reportTopics(am)
	r.reportEncodingAndSASL(am)
	for _, in := range r.a.inputList() {
		if in.cfg.Stdin {
			r.reportStdin(am, in)
		}
	}
}

// reportStdin adds what reading stdin (input in, the only one that reads it) met since the last
// report.
func (r *metricsReporter) reportStdin(am *telemetry.AgentMetrics, in *input) {
	if r.stdin == nil {
		r.stdin = &fileReport{m: am.InputFile(in.name, telemetry.StdinPath)}
	}
	lines, bytes := r.a.stdinRead.lines.Load(), r.a.stdinRead.bytes.Load()
	if d := lines - r.stdin.lines; d > 0 {
		r.stdin.m.Read(int(d), int(bytes-r.stdin.bytes))
	}
	r.stdin.lines, r.stdin.bytes = lines, bytes
	for n := r.a.stats.LongLines.Truncated.Load(); r.stdin.truncated < n; r.stdin.truncated++ {
		r.stdin.m.Truncated()
	}
	for n := r.a.stats.LongLines.Split.Load(); r.stdin.split < n; r.stdin.split++ {
		r.stdin.m.Split()
	}
	if n := r.a.stats.LongLines.Dropped.Load(); n > r.stdin.dropped {
		r.stdin.m.Dropped("long-line", int(n-r.stdin.dropped))
		r.stdin.dropped = n
	}
	r.stdin.reportFiltered(r.a.filtered.lookup(sourceKey(in, "")))
	c := &r.a.stats.Container
	r.stdin.container.report(r.stdin.m, c.Joined.Load(), c.Malformed.Load(), c.Interrupted.Load())
}

// reportTopics adds each topic's line counts since the last report, and the unrouted lines.
func (r *metricsReporter) reportTopics(am *telemetry.AgentMetrics) {
	for _, ts := range r.a.TopicStats() {
		tr := r.topics[ts.Topic]
		if tr == nil {
			tr = &topicReport{m: am.Topic(ts.Topic)}
			r.topics[ts.Topic] = tr
		}
		tr.m.Lines(ts.LinesSent-tr.sent, ts.LinesAcked-tr.acked, ts.LinesFailed-tr.failed)
		tr.sent, tr.acked, tr.failed = ts.LinesSent, ts.LinesAcked, ts.LinesFailed
	}
	for reason, n := range r.a.UnroutedLines() {
		if d := n - r.unrouted[reason]; d > 0 {
			am.Unrouted(reason, d)
		}
		r.unrouted[reason] = n
	}
	d := r.a.Delivery()
	for _, c := range d.DeadLettered {
		key := deadLetterKey{c.Reason, c.Destination}
		if n := c.Lines - r.deadLetters[key]; n > 0 {
			am.DeadLettered(c.Reason, c.Destination, n)
		}
		r.deadLetters[key] = c.Lines
	}
	if n := d.Resent - r.resent; n > 0 {
		am.Resent(n)
	}
	r.resent = d.Resent
	am.SendingStopped(d.Stopped != nil)
}

func (r *metricsReporter) close() {
	for _, fr := range r.files {
		fr.m.Close()
	}
	if r.stdin != nil {
		r.stdin.m.Close()
	}
}

// reportEncodingAndSASL copies the encoding fallbacks and the producer's SASL counters. The
// series of a configured feature are created at the first report, with 0, so that a healthy
// agent's panel reads 0 rather than nothing.
func (r *metricsReporter) reportEncodingAndSASL(am *telemetry.AgentMetrics) {
	first := !r.reported
	r.reported = true
	delta := func(last *int64, now int64, emit func(int64)) {
		if d := now - *last; d > 0 || first {
			emit(d)
			*last = now
		}
	}
	if c := &r.a.cfg; c.Format != linerecord.FormatRaw || c.TimestampField != "" {
		enc := &r.a.stats.Encoding
		delta(&r.fallbacks[0], enc.TimestampFallbacks.Load(), func(n int64) { am.EncodingFallback("timestamp", n) })
		delta(&r.fallbacks[1], enc.MergeFallbacks.Load(), func(n int64) { am.EncodingFallback("json_merge", n) })
		delta(&r.fallbacks[2], enc.MessagesCut.Load(), func(n int64) { am.EncodingFallback("message_cut", n) })
	}
	if st, ok := r.a.prod.SASLStats(); ok {
		delta(&r.sasl[0], st.Authentications, func(n int64) { am.SASLAuthentications(n, false) })
		delta(&r.sasl[1], st.Reauthentications, func(n int64) { am.SASLAuthentications(n, true) })
		delta(&r.sasl[2], st.TokenFetches, func(n int64) { am.TokenFetches(n, false) })
		delta(&r.sasl[3], st.TokenFailures, func(n int64) { am.TokenFetches(n, true) })
	}
}
