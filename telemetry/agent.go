package telemetry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// StdinPath is the path AgentMetrics.File takes for standard input. Its series carry
// kafkatrail.input="stdin" instead of a log.file.path: "-" is no file's path.
const StdinPath = "-"

// inputStdin is AttrInput's value for standard input.
const inputStdin = "stdin"

// AgentMetrics are the agent's file and line metrics (MetricAgent*). Each watched file gets a
// FileMetrics from File; the files-watched gauge counts those not yet closed. Safe for
// concurrent use.
type AgentMetrics struct {
	linesRead, bytesRead, truncated, split, dropped metric.Int64Counter
	containerLines                                  metric.Int64Counter
	rateLimitWait                                   metric.Float64Counter
	linesSent, linesAcked, linesFailed, unrouted    metric.Int64Counter
	encodingFallback, saslAuths, tokenFetches       metric.Int64Counter
	deadLettered, resent                            metric.Int64Counter
	sendingStopped                                  atomic.Bool

	mu    sync.Mutex
	files map[*FileMetrics]struct{}
}

// FileMetrics records one file's metrics; its attribute set is built once, so recording
// allocates nothing. Safe for concurrent use.
type FileMetrics struct {
	m     *AgentMetrics
	kvs   []attribute.KeyValue // the path (or stdin's input) and the agent's input, if named
	attrs metric.MeasurementOption
	// size, read and committed are the file's length, read offset and checkpointed offset,
	// observed when a reader collects; oldest is File.OldestUnacked in nanoseconds (stdin has none).
	size, read, committed, oldest atomic.Int64
	stdin                         bool
}

// NewAgentMetrics creates the agent's instruments in mp.
func NewAgentMetrics(mp metric.MeterProvider) (*AgentMetrics, error) {
	meter := mp.Meter(InstrumentationName)
	a := &AgentMetrics{files: map[*FileMetrics]struct{}{}}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	a.linesRead = counter(MetricAgentLinesRead, "{line}", "Lines read.")
	a.bytesRead = counter(MetricAgentBytesRead, "By", "Bytes read.")
	a.truncated = counter(MetricAgentLinesTruncated, "{line}", "Lines cut at the long-line limit.")
	a.split = counter(MetricAgentLinesSplit, "{line}", "Long lines sent as several records.")
	a.dropped = counter(MetricAgentLinesDropped, "{line}", "Lines not sent.")
	a.containerLines = counter(MetricAgentContainerLines, "{line}", "Container log lines that were not one whole line of the runtime.")
	var err error
	a.rateLimitWait, err = meter.Float64Counter(MetricAgentRateLimitWait, metric.WithUnit("s"),
		metric.WithDescription("Time reading was paused by the rate limit."))
	errs = append(errs, err)
	a.linesSent = counter(MetricAgentLinesSent, "{line}", "Lines routed to the topic and handed to the producer.")
	a.linesAcked = counter(MetricAgentLinesAcked, "{line}", "Lines Kafka acknowledged.")
	a.linesFailed = counter(MetricAgentLinesFailed, "{line}", "Lines whose delivery failed.")
	a.unrouted = counter(MetricAgentLinesUnrouted, "{line}", "Lines the topic template gave no topic of their own.")
	a.encodingFallback = counter(MetricAgentLinesEncodingFallback, "{line}", "Lines sent otherwise than --format and --timestamp-field asked.")
	a.saslAuths = counter(MetricAgentSASLAuthentications, "{authentication}", "Successful SASL exchanges of the producer's connections.")
	a.tokenFetches = counter(MetricAgentSASLTokenFetches, "{fetch}", "OAUTHBEARER tokens fetched.")
	a.deadLettered = counter(MetricAgentLinesDeadLettered, "{line}", "Lines refused for good, kept as dead letters.")
	a.resent = counter(MetricAgentLinesResent, "{line}", "Failed lines the agent sent again.")
	stopped, err := meter.Int64ObservableGauge(MetricAgentSendingStopped, metric.WithUnit("1"),
		metric.WithDescription("1 while sending is stopped by a refusal about the configuration or the cluster."))
	errs = append(errs, err)
	behind, err := meter.Int64ObservableGauge(MetricAgentFileBehind, metric.WithUnit("By"),
		metric.WithDescription("Bytes between the read offset and the end of the file."))
	errs = append(errs, err)
	lag, err := meter.Int64ObservableGauge(MetricAgentCheckpointLag, metric.WithUnit("By"),
		metric.WithDescription("Bytes read but not yet acknowledged and checkpointed."))
	errs = append(errs, err)
	oldest, err := meter.Float64ObservableGauge(MetricAgentFileOldestUnacked, metric.WithUnit("s"),
		metric.WithDescription("How long ago the oldest line of the file not yet acknowledged was read."))
	errs = append(errs, err)
	watched, err := meter.Int64ObservableGauge(MetricAgentFilesWatched, metric.WithUnit("{file}"),
		metric.WithDescription("Files being tailed."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		for f := range a.files {
			read := f.read.Load()
			o.ObserveInt64(behind, max(f.size.Load()-read, 0), f.attrs)
			o.ObserveInt64(lag, max(read-f.committed.Load(), 0), f.attrs)
			if !f.stdin {
				o.ObserveFloat64(oldest, time.Duration(f.oldest.Load()).Seconds(), f.attrs)
			}
		}
		o.ObserveInt64(watched, int64(len(a.files)))
		var st int64
		if a.sendingStopped.Load() {
			st = 1
		}
		o.ObserveInt64(stopped, st)
		return nil
	}, behind, lag, oldest, watched, stopped)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// RateLimitWait adds d to the time reading was paused by the rate limit.
func (a *AgentMetrics) RateLimitWait(d time.Duration) {
	if d > 0 {
		a.rateLimitWait.Add(context.Background(), d.Seconds())
	}
}

// File starts reporting the file at path (StdinPath for standard input). Close it when the
// file is no longer watched.
func (a *AgentMetrics) File(path string) *FileMetrics { return a.InputFile("", path) }

// InputFile is File for the agent's input named input (AttrAgentInput; none when empty): two
// inputs that follow one file report it apart.
func (a *AgentMetrics) InputFile(input, path string) *FileMetrics {
	f := &FileMetrics{m: a, kvs: []attribute.KeyValue{attribute.String(AttrLogFilePath, path)}}
	if path == StdinPath {
		f.kvs[0] = attribute.String(AttrInput, inputStdin)
		f.stdin = true
	}
	if input != "" {
		f.kvs = append(f.kvs, attribute.String(AttrAgentInput, input))
	}
	f.attrs = metric.WithAttributeSet(attribute.NewSet(f.kvs...))
	a.mu.Lock()
	a.files[f] = struct{}{}
	a.mu.Unlock()
	return f
}

// Read counts lines and the bytes they took (newlines included).
func (f *FileMetrics) Read(lines, bytes int) {
	ctx := context.Background()
	f.m.linesRead.Add(ctx, int64(lines), f.attrs)
	f.m.bytesRead.Add(ctx, int64(bytes), f.attrs)
}

// Truncated counts a line cut at the long-line limit.
func (f *FileMetrics) Truncated() { f.m.truncated.Add(context.Background(), 1, f.attrs) }

// Split counts a long line sent as several records.
func (f *FileMetrics) Split() { f.m.split.Add(context.Background(), 1, f.attrs) }

// Dropped counts n lines not sent, with a short reason (a few fixed values: "long-line",
// "not_included", "excluded").
func (f *FileMetrics) Dropped(reason string, n int) {
	f.m.dropped.Add(context.Background(), int64(n), metric.WithAttributes(append(f.kvs[:len(f.kvs):len(f.kvs)], attribute.String(AttrDropReason, reason))...))
}

// ContainerLines counts n container log lines that were not one whole line of the runtime, by
// reason: "joined", "malformed" or "interrupted".
func (f *FileMetrics) ContainerLines(reason string, n int) {
	f.m.containerLines.Add(context.Background(), int64(n), metric.WithAttributes(append(f.kvs[:len(f.kvs):len(f.kvs)], attribute.String(AttrDropReason, reason))...))
}

// SetPosition updates the gauges: size is the file's length, read the offset read up to,
// committed the offset acknowledged and checkpointed. Pass -1 to leave one unchanged.
func (f *FileMetrics) SetPosition(size, read, committed int64) {
	if size >= 0 {
		f.size.Store(size)
	}
	if read >= 0 {
		f.read.Store(read)
	}
	if committed >= 0 {
		f.committed.Store(committed)
	}
}

// SetOldestUnacked updates the oldest unacknowledged line's age gauge (filetail's
// File.OldestUnacked; 0 when every line read has its outcome).
func (f *FileMetrics) SetOldestUnacked(age time.Duration) { f.oldest.Store(int64(age)) }

// Close stops reporting the file's gauges; its counters keep their totals.
func (f *FileMetrics) Close() {
	f.m.mu.Lock()
	delete(f.m.files, f)
	f.m.mu.Unlock()
}

// TopicMetrics records the line counts of one topic the agent sends to; its attribute set is
// built once, so recording allocates nothing. Safe for concurrent use.
type TopicMetrics struct {
	m     *AgentMetrics
	attrs metric.MeasurementOption
}

// Topic starts reporting the lines of topic. The agent bounds the topics (--max-topics), and
// with them the attribute sets.
func (a *AgentMetrics) Topic(topic string) *TopicMetrics {
	return &TopicMetrics{m: a, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrMessagingDestinationName, topic)))}
}

// Lines counts lines sent to the topic, acknowledged and failed since the last call.
func (t *TopicMetrics) Lines(sent, acked, failed int64) {
	ctx := context.Background()
	if sent > 0 {
		t.m.linesSent.Add(ctx, sent, t.attrs)
	}
	if acked > 0 {
		t.m.linesAcked.Add(ctx, acked, t.attrs)
	}
	if failed > 0 {
		t.m.linesFailed.Add(ctx, failed, t.attrs)
	}
}

// Unrouted counts n lines the topic template gave no topic of their own, with a short reason
// (a few fixed values: "missing", "illegal_name", "max_topics").
func (a *AgentMetrics) Unrouted(reason string, n int64) {
	a.unrouted.Add(context.Background(), n, metric.WithAttributes(attribute.String(AttrDropReason, reason)))
}

// DeadLettered counts n lines kept as dead letters, by reason and destination (topic, file).
func (a *AgentMetrics) DeadLettered(reason, destination string, n int64) {
	a.deadLettered.Add(context.Background(), n, metric.WithAttributes(attribute.String(AttrDropReason, reason),
		attribute.String(AttrDeadLetterDestination, destination)))
}

// Resent counts n failed lines sent again.
func (a *AgentMetrics) Resent(n int64) { a.resent.Add(context.Background(), n) }

// SendingStopped sets the sending-stopped gauge.
func (a *AgentMetrics) SendingStopped(stopped bool) { a.sendingStopped.Store(stopped) }

// EncodingFallback counts n lines that --format or --timestamp-field could not treat as asked,
// by reason (timestamp, json_merge, message_cut).
func (a *AgentMetrics) EncodingFallback(reason string, n int64) {
	a.encodingFallback.Add(context.Background(), n, metric.WithAttributes(attribute.String(AttrDropReason, reason)))
}

// SASLAuthentications counts n successful SASL exchanges; reauth says they renewed the session
// of an established connection (KIP-368) rather than opened one.
func (a *AgentMetrics) SASLAuthentications(n int64, reauth bool) {
	reason := "connect"
	if reauth {
		reason = "reauthenticate"
	}
	a.saslAuths.Add(context.Background(), n, metric.WithAttributes(attribute.String(AttrDropReason, reason)))
}

// TokenFetches counts n OAUTHBEARER token fetches, failed ones with error.type.
func (a *AgentMetrics) TokenFetches(n int64, failed bool) {
	if failed {
		a.tokenFetches.Add(context.Background(), n, metric.WithAttributes(attribute.String(AttrErrorType, "token_fetch_failed")))
		return
	}
	a.tokenFetches.Add(context.Background(), n)
}
