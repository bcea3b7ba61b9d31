package telemetry

import (
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// TestLateResourceGainsTheClientInstanceID: the resource is the process's until the broker
// assigned an id, then the process's with kafkatrail.client.instance.id, the same pointer
// while the id stays (an exporter encodes it once), a new one when it changes.
func TestLateResourceGainsTheClientInstanceID(t *testing.T) {
	base := resource.NewSchemaless(attribute.String("service.name", "kafkatrail-test"))
	l := newLateResource(base)
	if l.current() != base {
		t.Fatal("not watching: want the base resource")
	}
	var id atomic.Value
	id.Store("")
	l.watch(func() string { return id.Load().(string) })
	if l.current() != base {
		t.Fatal("no id yet: want the base resource")
	}
	id.Store("AAAAAAAAAAAAAAAAAAAAAQ")
	first := l.current()
	if v, ok := first.Set().Value(AttrClientInstanceID); !ok || v.AsString() != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("resource %v, want %s", first, AttrClientInstanceID)
	}
	if v, ok := first.Set().Value("service.name"); !ok || v.AsString() != "kafkatrail-test" {
		t.Fatalf("resource %v lost service.name", first)
	}
	if l.current() != first {
		t.Fatal("the same id gave a new resource")
	}
	id.Store("AAAAAAAAAAAAAAAAAAAAAg")
	if second := l.current(); second == first {
		t.Fatal("a new id kept the old resource")
	}
}
