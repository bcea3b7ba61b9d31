package main

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// telemetryFlushTimeout is how long the exit may wait to flush telemetry: 2 s when an OTLP
// endpoint the agent exports to answers, a moment otherwise. Without it, `app | agent` with no
// collector running (the SDK's default endpoint is localhost:4317) would sit out the whole
// timeout retrying a connection that is refused.
func telemetryFlushTimeout(environ func(string) string) time.Duration {
	endpoints := otlpEndpoints(environ)
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

// otlpEndpoints lists host:port of the OTLP endpoints traces and metrics are exported to, per
// the standard OTEL_* variables.
func otlpEndpoints(environ func(string) string) []string {
	var out []string
	for _, signal := range []string{"TRACES", "METRICS"} {
		exporter := environ("OTEL_" + signal + "_EXPORTER")
		if exporter != "" && exporter != "otlp" {
			continue
		}
		proto := firstNonEmpty(environ("OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL"), environ("OTEL_EXPORTER_OTLP_PROTOCOL"), "grpc")
		port := "4317"
		if strings.HasPrefix(proto, "http") {
			port = "4318"
		}
		ep := firstNonEmpty(environ("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT"), environ("OTEL_EXPORTER_OTLP_ENDPOINT"), "http://localhost:"+port)
		if !strings.Contains(ep, "://") {
			ep = "http://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || u.Hostname() == "" {
			continue
		}
		p := u.Port()
		if p == "" {
			p = port
			if u.Scheme == "https" {
				p = "443"
			}
		}
		out = append(out, net.JoinHostPort(u.Hostname(), p))
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
