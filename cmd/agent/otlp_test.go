package main

import (
	"net"
	"testing"
	"time"
)

func TestOTLPEndpointsFollowTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"defaults", nil, []string{"localhost:4317", "localhost:4317"}},
		{"generic", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, []string{"collector:4317", "collector:4317"}},
		{"per signal and http", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:9090/api/v1/otlp/v1/metrics",
			"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf", "OTEL_TRACES_EXPORTER": "none"}, []string{"127.0.0.1:9090"}},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "prometheus"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := otlpEndpoints(func(k string) string { return tc.env[k] })
			if len(got) != len(tc.want) {
				t.Fatalf("endpoints %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("endpoints %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestFlushTimeoutIsShortWithoutACollector(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := "http://" + l.Addr().String()
	env := func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return up
		}
		return ""
	}
	if d := telemetryFlushTimeout(env); d != 2*time.Second {
		t.Fatalf("a listening collector gets %v to flush, want 2s", d)
	}
	l.Close()
	if d := telemetryFlushTimeout(env); d >= time.Second {
		t.Fatalf("no collector: the exit waits %v", d)
	}
}
