package statuspage

import (
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/agent"
	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

// AgentSources reads a running agent: its line counters, its followed files, its topics, and the broker
// connections its producer's observer saw (obs may be nil: no brokers shown, never ready).
func AgentSources(a *agent.Agent, obs *telemetry.ProducerObserver) Sources {
	src := Sources{
		Counters: func() Counters {
			st := a.Stats()
			return Counters{LinesRead: st.LinesRead.Load(), BytesRead: st.BytesRead.Load(),
				LinesAcked: st.LinesAcked.Load(), LinesFailed: st.LinesFailed.Load(),
				LinesDeadLettered: st.LinesDeadLettered.Load(), LinesResent: st.LinesResent.Load(),
				TimestampFallbacks: st.Encoding.TimestampFallbacks.Load(), MergeFallbacks: st.Encoding.MergeFallbacks.Load(),
				MessagesCut: st.Encoding.MessagesCut.Load()}
		},
		Files: func() []File {
			fs := a.InputFileStats()
			out := make([]File, 0, len(fs))
			for _, f := range fs {
				file := File{
					Input: f.Input, Path: f.Path, Size: f.Size, ReadOffset: f.ReadOffset, Committed: f.Committed,
					Unread: max(f.Size-f.ReadOffset, 0), CheckpointLag: max(f.ReadOffset-f.Committed, 0),
					OldestUnackedSeconds: f.OldestUnacked.Seconds(),
					InFlight:             f.InFlight, LinesRead: f.LinesRead, LinesAcked: f.LinesAcked, LinesFailed: f.LinesFailed, LinesDeadLettered: f.LinesDeadLettered,
					Gone: f.Gone, LinesJoined: f.Container.Joined, LinesMalformed: f.Container.Malformed,
				}
				if f.Container.Format != filetail.ContainerOff {
					file.ContainerFormat = string(f.Container.Format)
				}
				out = append(out, file)
			}
			return out
		},
		Topics: func() Routing {
			ts := a.TopicStats()
			r := Routing{Topics: make([]Topic, 0, len(ts)), Unrouted: a.UnroutedLines()}
			for _, t := range ts {
				r.Topics = append(r.Topics, Topic{Topic: t.Topic, LinesSent: t.LinesSent, LinesAcked: t.LinesAcked,
					LinesFailed: t.LinesFailed, LinesDeadLettered: t.LinesDeadLettered, InFlight: t.InFlight()})
			}
			return r
		},
	}
	src.RateLimit = func() RateLimit {
		rl := a.RateLimit()
		return RateLimit{LinesPerSecond: rl.LinesPerSecond, BytesPerSecond: rl.BytesPerSecond, PausedSeconds: rl.Paused.Seconds()}
	}
	src.Delivery = func() Delivery {
		d := a.Delivery()
		out := Delivery{Waiting: d.Waiting, Resent: d.Resent, DeadLetters: make([]DeadLetterCount, 0, len(d.DeadLettered)),
			DeadLetterTopic: d.DeadLetterTopic, DeadLetterFile: d.DeadLetterFile}
		if d.Stopped != nil {
			out.Stopped, out.StoppedSeconds, out.StoppedInput = d.Stopped.Error(), time.Since(d.StoppedSince).Seconds(), d.StoppedInput
		}
		for _, c := range d.DeadLettered {
			out.DeadLetters = append(out.DeadLetters, DeadLetterCount{Reason: c.Reason, Destination: c.Destination, Lines: c.Lines})
			out.DeadLettered += c.Lines
		}
		return out
	}
	src.Inputs = func() []Input {
		is := a.InputStats()
		out := make([]Input, 0, len(is))
		for _, s := range is {
			in := Input{Name: s.Name, Source: strings.Join(s.Tail, " "), Files: s.Files, Topic: s.Topic,
				LinesRead: s.LinesRead, LinesSent: s.LinesSent, LinesAcked: s.LinesAcked, LinesFailed: s.LinesFailed,
				LinesDeadLettered: s.LinesDeadLettered, LinesNotIncluded: s.NotIncluded, LinesExcluded: s.Excluded}
			if s.Stdin {
				in.Source = "stdin"
			}
			if s.Stopped != nil {
				in.Stopped, in.StoppedSeconds = s.Stopped.Error(), time.Since(s.StoppedSince).Seconds()
			}
			if s.OwnRateLimit {
				p := s.RatePaused.Seconds()
				in.RatePausedSeconds = &p
			}
			out = append(out, in)
		}
		return out
	}
	if obs != nil {
		src.Producer = obs.Status
	}
	return src
}
