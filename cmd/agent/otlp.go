package main

import (
	"net"
	"time"
)

// telemetryFlushTimeout is how long the exit may wait to flush telemetry: 2 s when an OTLP
// endpoint the agent exports to answers, a moment otherwise. Without it, `app | agent` with no
// collector running (the SDK's default endpoint is localhost:4317) would sit out the whole
// timeout retrying a connection that is refused.
func telemetryFlushTimeout(endpoints []string) time.Duration {
	if len(endpoints) == 0 {
		return 2 * time.Second // console, prometheus or none: nothing to wait for on a network
	}
	for _, hp := range endpoints {
		if c, err := net.DialTimeout("tcp", hp, 300*time.Millisecond); err == nil {
			c.Close()
			return 2 * time.Second
		}
	}
	return 200 * time.Millisecond
}
