package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kafkatrail/kafkatrail/agent"
)

// progress draws one status line on a terminal while stdin is sent: lines read and
// acknowledged, the rate, and how many are still waiting for Kafka. It draws nothing when
// stderr is not a terminal (scripts and logs get no carriage returns). It stops when ctx ends
// and returns once the line is cleared.
func progress(ctx context.Context, w io.Writer, stats *agent.Stats, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	start := time.Now()
	var lastAcked int64
	last := start
	for {
		select {
		case <-ctx.Done():
			fmt.Fprint(w, "\r\033[K")
			return
		case now := <-t.C:
			read, acked, failed := stats.LinesRead.Load(), stats.LinesAcked.Load(), stats.LinesFailed.Load()
			rate := float64(acked-lastAcked) / now.Sub(last).Seconds()
			lastAcked, last = acked, now
			line := fmt.Sprintf("\r\033[Ksent %d  acked %d  %.0f lines/s  in flight %d", read, acked, rate, read-acked-failed)
			if failed > 0 {
				line += fmt.Sprintf("  FAILED %d", failed)
			}
			fmt.Fprintf(w, "%s  (%s)", line, now.Sub(start).Round(time.Second))
		}
	}
}
