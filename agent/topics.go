package agent

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/linerecord"
)

// TopicStats are the line counts of one topic the agent sends to.
type TopicStats = linerecord.TopicStats

// Why a line's topic template gave no topic: the values of kafkatrail.reason on
// kafkatrail.agent.lines.unrouted, and the keys of Agent.UnroutedLines.
const (
	UnroutedMissing     = linerecord.UnroutedMissing
	UnroutedIllegalName = linerecord.UnroutedIllegalName
	UnroutedMaxTopics   = linerecord.UnroutedMaxTopics
)

// TopicStats returns the line counts of every topic lines were routed to, sorted by topic (the
// fallback topic included once configured; a plain --topic from the start): every input's, a
// topic two inputs send to counted once with both's lines. Safe for concurrent use.
func (a *Agent) TopicStats() []TopicStats {
	var out []TopicStats
	a.inputsMu.RLock()
	inputs := slices.Concat(a.inputs, a.retired)
	a.inputsMu.RUnlock()
	for _, in := range inputs {
		for _, ts := range in.line.rules.TopicStats() {
			if i := slices.IndexFunc(out, func(o TopicStats) bool { return o.Topic == ts.Topic }); i >= 0 {
				out[i].LinesSent += ts.LinesSent
				out[i].LinesAcked += ts.LinesAcked
				out[i].LinesFailed += ts.LinesFailed
				out[i].LinesDeadLettered += ts.LinesDeadLettered
				continue
			}
			out = append(out, ts)
		}
	}
	slices.SortFunc(out, func(x, y TopicStats) int { return strings.Compare(x.Topic, y.Topic) })
	return out
}

// UnroutedLines counts the lines whose topic template gave no topic of their own, by reason
// (UnroutedMissing, ...): they went to --fallback-topic, or failed without one; every input's.
// nil when no input has a topic template. Safe for concurrent use.
func (a *Agent) UnroutedLines() map[string]int64 {
	var out map[string]int64
	a.inputsMu.RLock()
	inputs := slices.Concat(a.inputs, a.retired)
	a.inputsMu.RUnlock()
	for _, in := range inputs {
		for reason, n := range in.line.rules.UnroutedLines() {
			if out == nil {
				out = map[string]int64{}
			}
			out[reason] += n
		}
	}
	return out
}

// countOutcome counts a line of src under its record's topic as ending with outcome
// (linerecord.OutcomeAcked, ...).
func (a *Agent) countOutcome(src *lineOrigin, topic string, outcome int) {
	src.in.line.rules.CountOutcome(topic, outcome, 1)
}

// maybeWarnTimestamp logs the first line of a run whose --timestamp-field was missing or did
// not parse (the rest are counted, and the count logged at the end: logEncoding), so that a
// wrong field name or layout shows at once.
func (a *Agent) maybeWarnTimestamp(in *input, b *linerecord.Builder, l filetail.Line, path string) {
	v, fellBack := b.TimestampFellBack()
	if !fellBack || !a.timestampWarned.CompareAndSwap(false, true) {
		return
	}
	a.log.Warn("line without a usable --timestamp-field: it gets the read time (counted; logged once)",
		"timestamp_field", in.cfg.TimestampField, "timestamp_layout", in.cfg.TimestampLayout,
		"value", string(v[:min(len(v), 100)]), "path", path, "offset", l.Start)
}

// logEncoding reports, at the end of a run, the lines that fell back on something: a wrong
// --timestamp-field or layout shows here rather than nowhere.
func logEncoding(s *linerecord.EncodingStats, log *slog.Logger, c *Config) {
	ts, merge, cut := s.TimestampFallbacks.Load(), s.MergeFallbacks.Load(), s.MessagesCut.Load()
	if ts > 0 {
		log.Warn("lines without a usable --timestamp-field got the read time", "lines", ts,
			"timestamp_field", c.TimestampField, "timestamp_layout", c.TimestampLayout)
	}
	if merge > 0 {
		log.Info("json-merge: lines that were not a JSON object went as the json envelope", "lines", merge)
	}
	if cut > 0 {
		log.Warn("json envelope: messages cut to fit max.request.size (log.flags truncated)", "lines", cut)
	}
}
