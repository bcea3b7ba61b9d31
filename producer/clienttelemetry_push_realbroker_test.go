package producer

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
)

// telemetryPush is one payload the test broker's receiver (scripts/kafka/telemetry/
// FileClientTelemetry.java) wrote: its header fields and the MetricsData the broker handed over.
type telemetryPush struct {
	instanceID, clientID, contentType string
	terminating                       bool
	data                              *metricspb.MetricsData
}

// readTelemetryPushes reads the receiver's file from offset from: header lines
// "push k=v ... bytes=N" each followed by N bytes of payload.
func readTelemetryPushes(t *testing.T, path string, from int64) []telemetryPush {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(f)
	var out []telemetryPush
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out // the receiver may be writing the next one
		}
		fields := map[string]string{}
		for _, kv := range strings.Fields(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "push ")) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		n, err := strconv.Atoi(fields["bytes"])
		if err != nil {
			t.Fatalf("receiver file: bad header %q", line)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return out
		}
		// The broker hands the receiver the payload decompressed (PushTelemetryRequest.metricsData).
		md := new(metricspb.MetricsData)
		if err := proto.Unmarshal(payload, md); err != nil {
			t.Fatalf("push from %s: not an OTLP MetricsData (%s): %v", fields["client_instance_id"], fields["content_type"], err)
		}
		out = append(out, telemetryPush{instanceID: fields["client_instance_id"], clientID: fields["client_id"],
			contentType: fields["content_type"], terminating: fields["terminating"] == "true", data: md})
	}
}

// pushMetrics indexes a push's metrics by name.
func pushMetrics(p telemetryPush) map[string]*metricspb.Metric {
	return metricsByName(p.data)
}

// clientMetricsTool runs Kafka's kafka-client-metrics tool (ClientMetricsCommand) against the
// test broker with the broker's jars.
func clientMetricsTool(t *testing.T, bootstrap string, args ...string) {
	t.Helper()
	lib := kafkatest.Lib(t)
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, append([]string{"-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", lib + "/*", "org.apache.kafka.tools.ClientMetricsCommand", "--bootstrap-server", bootstrap}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-client-metrics %v: %v\n%s", args, err, out)
	}
}

// TestRealBrokerTelemetryPush subscribes one client id to three metric name prefixes with the
// kafka-client-metrics tool and produces: the broker's receiver must get our pushes (OTLP
// MetricsData), holding only the subscribed names, record.send.total deltas adding up to the
// records produced, a connection created, the node latency with its node_id; after the
// operator adds a prefix (the broker answers the next push UNKNOWN_SUBSCRIPTION_ID), pushes
// with the new prefix under the same client instance id; and a last push with Terminating set
// when the producer closes.
func TestRealBrokerTelemetryPush(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	file := os.Getenv("KAFKA_CLIENT_TELEMETRY_FILE")
	if file == "" {
		t.Fatal("the broker has no client telemetry receiver (KAFKA_CLIENT_TELEMETRY_FILE unset): `make test` starts it with one; by hand, start it with KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN=1 scripts/kafka/broker.sh start")
	}
	var from int64
	if st, err := os.Stat(file); err == nil {
		from = st.Size()
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	clientID := "kip714-" + hex.EncodeToString(suffix)
	// Only this test's client id matches, so other tests' producers on the broker are not
	// subscribed and the pushes read back are ours.
	prefixes := kipPrefix + "record.," + kipPrefix + "connection.creation.," + kipNodePrefix
	clientMetricsTool(t, bootstrap, "--alter", "--name", clientID, "--interval", "500",
		"--metrics", prefixes, "--match", "client_id="+clientID)
	t.Cleanup(func() { clientMetricsTool(t, bootstrap, "--delete", "--name", clientID) })

	topic := kafkatest.NewTopic(t, 3)
	p := newTestProducer(t, []string{bootstrap}, func(c *Config) { c.ClientID = clientID })
	const n = 500
	mustProduceAll(t, p, topic, makeRecords(n, 50), 30*time.Second)

	// At least two regular pushes: the first is jittered over 0.5..1.5 intervals.
	deadline := time.Now().Add(15 * time.Second)
	var pushes []telemetryPush
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pushes = readTelemetryPushes(t, file, from); len(pushes) >= 2 {
			break
		}
	}
	if len(pushes) < 2 {
		t.Fatalf("%d pushes from %s in the receiver's file after 15 s, want >= 2 (broker log: %s)", len(pushes), clientID, os.Getenv("KAFKA_BROKER_LOG"))
	}
	// The id the broker assigned and labels the pushes with is the producer's (Java's
	// KafkaProducer.clientInstanceId): what joins them with the agent's own telemetry.
	if id := p.ClientInstanceID(); id == "" || id != pushes[0].instanceID {
		t.Fatalf("ClientInstanceID() = %q, the broker received pushes from instance %q", id, pushes[0].instanceID)
	}
	// The operator changes the subscription: the next push meets UNKNOWN_SUBSCRIPTION_ID, the
	// producer asks for the subscription again at once and pushes the new prefix too.
	before := len(readTelemetryPushes(t, file, from))
	const added = kipPrefix + "produce.throttle."
	clientMetricsTool(t, bootstrap, "--alter", "--name", clientID, "--metrics", prefixes+","+added)
	deadline = time.Now().Add(10 * time.Second)
	resubscribed := false
	for ; time.Now().Before(deadline) && !resubscribed; time.Sleep(100 * time.Millisecond) {
		for _, push := range readTelemetryPushes(t, file, from)[before:] {
			if _, ok := pushMetrics(push)[added+"time.avg"]; ok {
				resubscribed = true
			}
		}
	}
	if !resubscribed {
		t.Fatalf("no push with %stime.avg within 10 s of the subscription's change", added)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pushes = readTelemetryPushes(t, file, from)
	last := pushes[len(pushes)-1]
	if !last.terminating {
		t.Fatalf("the last of %d pushes is not terminating: Close sent no terminating push", len(pushes))
	}

	var sent, retried float64
	names := map[string]bool{}
	connections := 0.0
	nodeLatency := false
	for i, push := range pushes {
		if push.clientID != clientID || push.instanceID != pushes[0].instanceID {
			t.Fatalf("push %d from client %s instance %s, want %s instance %s", i, push.clientID, push.instanceID, clientID, pushes[0].instanceID)
		}
		if push.terminating != (i == len(pushes)-1) {
			t.Fatalf("push %d of %d: terminating=%v", i, len(pushes), push.terminating)
		}
		for _, rm := range push.data.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					names[m.Name] = true
					if strings.HasPrefix(m.Name, added) && i < before {
						t.Errorf("push %d carries %s before the subscription asked for it", i, m.Name)
					}
					if !strings.HasPrefix(m.Name, kipPrefix+"record.") && !strings.HasPrefix(m.Name, kipPrefix+"connection.creation.") &&
						!strings.HasPrefix(m.Name, kipNodePrefix) && !strings.HasPrefix(m.Name, added) {
						t.Errorf("push %d carries %s, which the subscription did not ask for", i, m.Name)
					}
					switch m.Name {
					case kipPrefix + "record.send.total":
						sum := m.GetSum()
						if sum == nil || sum.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA || !sum.IsMonotonic {
							t.Fatalf("record.send.total is %v, want a monotonic delta Sum (the broker asks for delta)", m.Data)
						}
						sent += sum.DataPoints[0].GetAsDouble()
					case kipPrefix + "record.retry.total":
						retried += m.GetSum().DataPoints[0].GetAsDouble()
					case kipPrefix + "connection.creation.total":
						connections += m.GetSum().DataPoints[0].GetAsDouble()
					case kipNodePrefix + "request.latency.max":
						for _, dp := range m.GetGauge().DataPoints {
							if len(dp.Attributes) == 1 && dp.Attributes[0].Key == "node_id" && !math.IsNaN(dp.GetAsDouble()) {
								nodeLatency = true
							}
						}
					}
				}
			}
		}
	}
	for _, want := range []string{"record.send.total", "record.send.rate", "record.queue.time.avg", "record.queue.time.max",
		"record.error.total", "record.retry.total", "connection.creation.total", "connection.creation.rate",
		"node.request.total", "node.request.latency.avg", "node.request.size.max"} {
		if !names[kipPrefix+want] {
			t.Errorf("no push carried %s%s (got %v)", kipPrefix, want, names)
		}
	}
	// As in Java, a record counts as sent at every attempt: the records produced plus the retries.
	if sent != n+retried {
		t.Errorf("record.send.total deltas add up to %v over %d pushes, want the %d records produced + %v retried", sent, len(pushes), n, retried)
	}
	if connections < 1 {
		t.Errorf("connection.creation.total adds up to %v, want >= 1", connections)
	}
	if !nodeLatency {
		t.Errorf("no push carried node.request.latency.max with a node_id and a value")
	}
	t.Logf("%d pushes (content type %s), %d metric names, %v records sent, %v retried", len(pushes), last.contentType, len(names), sent, retried)
}
