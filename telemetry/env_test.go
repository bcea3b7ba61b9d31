package telemetry

import (
	"testing"
	"time"
)

func TestEnvOTLPEndpoints(t *testing.T) {
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
			got := ReadEnv(func(k string) string { return tc.env[k] }).OTLPEndpoints()
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

// TestReadEnv: the variables as the SDK reads them: names of exporters and samplers trimmed
// (samplers and the exemplar filter in lower case), the batch span processor's numbers as
// positive integers only, its times in milliseconds.
func TestReadEnv(t *testing.T) {
	env := map[string]string{
		"OTEL_TRACES_EXPORTER": " otlp ", "OTEL_TRACES_SAMPLER": "TraceIdRatio", "OTEL_TRACES_SAMPLER_ARG": "0.5",
		"OTEL_METRICS_EXEMPLAR_FILTER": "Always_Off", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "-3",
		"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "soon",
	}
	got := ReadEnv(func(k string) string { return env[k] })
	if got.TracesExporter != "otlp" || got.Sampler != "traceidratio" || got.SamplerArg != "0.5" || got.ExemplarFilter != "always_off" {
		t.Errorf("names: %+v", got)
	}
	if got.BSPMaxQueueSize != 100 || got.BSPMaxExportBatchSize != 0 || got.BSPScheduleDelay != 250*time.Millisecond || got.BSPExportTimeout != 0 {
		t.Errorf("numbers: %+v", got)
	}
	if o := exportOptionsOf(got); o.delay != 250*time.Millisecond || o.timeout != defaultExportTimeout || o.batch != 0 {
		t.Errorf("export options %+v", o)
	}
	if d := got.SamplingDescription(nil); d != "OTEL_TRACES_SAMPLER=traceidratio 0.5" {
		t.Errorf("sampling %q", d)
	}
	if d := got.SamplingDescription(Ratio(0.25)); d != "25% of records (--trace-sample-ratio)" {
		t.Errorf("sampling %q", d)
	}
	if d := (Env{}).SamplingDescription(nil); d != "1% of records (the default)" {
		t.Errorf("sampling %q", d)
	}
}
