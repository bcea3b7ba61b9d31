package main

import "testing"

func TestModuleOf(t *testing.T) {
	for sym, want := range map[string]string{
		"google.golang.org/grpc.(*Server).Serve":                     "google.golang.org/grpc",
		"go.opentelemetry.io/otel/sdk/trace.(*tracer).Start":         "go.opentelemetry.io/otel/sdk",
		"type:.eq.github.com/xdg-go/stringprep.Profile":              "github.com/xdg-go/stringprep",
		"github.com/kafkatrail/kafkatrail/filetail.(*Splitter).Feed": "github.com/kafkatrail/kafkatrail",
		"runtime.mallocgc":         "Go (standard library, runtime)",
		"sync/atomic.(*Int64).Add": "Go (standard library, runtime)",
		"go:itab.*github.com/prometheus/client_golang/prometheus.counter": "github.com/prometheus/client_golang",
	} {
		if got := moduleOf(sym); got != want {
			t.Errorf("moduleOf(%q) = %q, want %q", sym, got, want)
		}
	}
}
