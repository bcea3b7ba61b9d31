package agent

import (
	"sync"
	"sync/atomic"

	"github.com/kafkatrail/kafkatrail/linerecord"
)

// filterCounts are one source's lines that the input's filters left out, by reason. Written by
// the source's reader, read by the metrics goroutine.
type filterCounts struct {
	notIncluded, excluded atomic.Int64
}

func (c *filterCounts) add(reason string) {
	if reason == linerecord.FilteredExcluded {
		c.excluded.Add(1)
	} else {
		c.notIncluded.Add(1)
	}
}

// filterCountsBySource holds each source's filterCounts, by sourceKey: the metrics report them
// per file, as the other line counts.
type filterCountsBySource struct{ m sync.Map } // sourceKey -> *filterCounts

// lookup returns the counts of the source key, nil when none of its lines was left out.
func (f *filterCountsBySource) lookup(key string) *filterCounts {
	if c, ok := f.m.Load(key); ok {
		return c.(*filterCounts)
	}
	return nil
}

// of returns the counts of the source key, made at its first line left out.
func (f *filterCountsBySource) of(key string) *filterCounts {
	if c := f.lookup(key); c != nil {
		return c
	}
	c, _ := f.m.LoadOrStore(key, new(filterCounts))
	return c.(*filterCounts)
}

// lineFiltered is the end of a line the input's filters left out: nothing of it is sent, its
// file's checkpoint moves past it as if it were acknowledged, and it is counted by reason.
func (a *Agent) lineFiltered(src *lineOrigin, path string, end int64, reason string) {
	if src.file != nil {
		src.file.Skip(end)
	}
	if src.replay {
		return // counted when the round that aborted left it out
	}
	if src.filtered == nil {
		src.filtered = a.filtered.of(sourceKey(src.in, path))
	}
	src.filtered.add(reason)
	a.stats.LinesFiltered.Add(1)
}

// sourceKey names a source of lines: its input and its path ("" for stdin). Two inputs that
// follow one file are two sources.
func sourceKey(in *input, path string) string { return in.name + "\x00" + path }
