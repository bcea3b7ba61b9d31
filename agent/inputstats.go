package agent

import (
	"strings"
	"time"
)

// InputStats is one running input's account, for the status page: its source, its lines by
// outcome, the lines its filters left out, and whether its sending is stopped.
type InputStats struct {
	Name string
	// Stdin says it reads standard input; else Tail are its patterns and Files the files it
	// follows now.
	Stdin bool
	Tail  []string
	Files int
	// Topic is its --topic (or template).
	Topic string
	// LinesRead counts the lines it read (those left out included); LinesSent, LinesAcked,
	// LinesFailed and LinesDeadLettered its lines by outcome (its topics' counts).
	LinesRead, LinesSent, LinesAcked, LinesFailed, LinesDeadLettered int64
	// NotIncluded and Excluded count the lines its include-lines and exclude-lines left out.
	NotIncluded, Excluded int64
	// Stopped is why its sending stopped, since StoppedSince; nil while it goes on.
	Stopped      error
	StoppedSince time.Time
	// OwnRateLimit says it has a rate limit of its own, which paused its reading RatePaused.
	OwnRateLimit bool
	RatePaused   time.Duration
}

// InputStats returns each running input's account, in the agent's order. Safe for concurrent
// use.
func (a *Agent) InputStats() []InputStats {
	inputs := a.inputList()
	out := make([]InputStats, 0, len(inputs))
	for _, in := range inputs {
		s := InputStats{Name: in.name, Stdin: in.cfg.Stdin, Tail: in.cfg.Tail, Topic: in.cfg.Topic,
			OwnRateLimit: in.limit != nil && in.limit != a.limit}
		if s.OwnRateLimit {
			s.RatePaused = in.limit.pausedTime()
		}
		if in.cfg.Stdin {
			s.LinesRead = a.stdinRead.lines.Load()
		} else if t := in.tailer.Load(); t != nil {
			tot := t.Stats().Totals
			s.Files, s.LinesRead = tot.Files, int64(tot.LinesRead)
		}
		for _, ts := range in.line.rules.TopicStats() {
			s.LinesSent += ts.LinesSent
			s.LinesAcked += ts.LinesAcked
			s.LinesFailed += ts.LinesFailed
			s.LinesDeadLettered += ts.LinesDeadLettered
		}
		prefix := sourceKey(in, "")
		a.filtered.m.Range(func(k, v any) bool {
			if strings.HasPrefix(k.(string), prefix) {
				c := v.(*filterCounts)
				s.NotIncluded += c.notIncluded.Load()
				s.Excluded += c.excluded.Load()
			}
			return true
		})
		if st := in.stopped.Load(); st != nil {
			s.Stopped, s.StoppedSince = st.err, st.since
		}
		out = append(out, s)
	}
	return out
}
