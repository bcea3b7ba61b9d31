package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
)

// TestCPUSplit: a sample goes to the first part whose function is on its stack (a traced
// record's start inside StartSend is not the decision), the others to rest, and the parts add
// up to the total.
func TestCPUSplit(t *testing.T) {
	fn := map[string]*profile.Function{}
	var funcs []*profile.Function
	loc := func(name string) *profile.Location {
		f := fn[name]
		if f == nil {
			f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
			fn[name] = f
			funcs = append(funcs, f)
		}
		return &profile.Location{ID: uint64(len(funcs)*10 + len(fn)), Line: []profile.Line{{Function: f}}}
	}
	const tel = "github.com/kafkatrail/kafkatrail/telemetry."
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	add := func(ns int64, stack ...string) {
		s := &profile.Sample{Value: []int64{1, ns}}
		for _, name := range stack { // leaf first, as pprof keeps them
			s.Location = append(s.Location, loc(name))
		}
		p.Sample = append(p.Sample, s)
	}
	add(1e9, "math/rand/v2.Uint64", tel+"(*ProducerObserver).StartSend", "main.main")
	add(2e9, "runtime.mallocgc", tel+"(*ProducerObserver).newRecordTrace", tel+"(*ProducerObserver).StartSend")
	add(3e9, tel+"(*TraceEncoder).Encode", tel+"(*exportProcessor).run")
	add(4e9, tel+"(*histSeries).record", tel+"(*ProducerObserver).Appended")
	add(5e9, "github.com/kafkatrail/kafkatrail/producer.(*Sender).run")
	for i, l := range func() []*profile.Location {
		var all []*profile.Location
		for _, s := range p.Sample {
			all = append(all, s.Location...)
		}
		return all
	}() {
		l.ID = uint64(i + 1)
		p.Location = append(p.Location, l)
	}
	p.Function = funcs
	path := filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := cpuSplit(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"decision": 1, "traced: start": 2, "traced: export": 3, "metrics": 4, "rest": 5, "total": 15}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("%s = %v s, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
