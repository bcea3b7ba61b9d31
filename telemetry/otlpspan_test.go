package telemetry

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// TestRequestAttrsShared: the records of one batch attempt share their doSend's attribute list;
// any value that differs (another request, attempt, batch) makes a list of its own.
func TestRequestAttrsShared(t *testing.T) {
	o := &ProducerObserver{}
	a := requestKey{attempt: 1, node: 1, correlation: 7, version: 11, records: 100, bytes: 4096}
	first := o.requestAttrs(a).kvs
	if again := o.requestAttrs(a).kvs; &again[0] != &first[0] {
		t.Fatal("the same request's records got lists of their own")
	}
	b := a
	b.correlation = 8
	other := o.requestAttrs(b).kvs
	if &other[0] == &first[0] {
		t.Fatal("another request reused the list")
	}
	want := map[string]int64{AttrAttempt: 1, AttrNodeID: 1, AttrMessagingBatchCount: 100, AttrBatchBytes: 4096,
		AttrCorrelationID: 8, AttrAPIVersion: 11}
	for _, kv := range other {
		if w, ok := want[string(kv.Key)]; !ok || kv.Value.Type() != attribute.INT64 || kv.Value.AsInt64() != w {
			t.Errorf("%s = %v, want %d", kv.Key, kv.Value.Emit(), w)
		}
	}
	b.attempt = 2
	if retry := o.requestAttrs(b).kvs; retry[0].Value.AsInt64() != 2 {
		t.Fatalf("attempt %d, want 2", retry[0].Value.AsInt64())
	}
}
