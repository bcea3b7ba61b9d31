package main

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// stages are the lifecycle stages in the order of a record's trace.
var stages = []string{"StageRead", "StageAppend", "StageDrain", "StageDoSend", "StageCompletedSend", "StageCompletedReceive", "StageCallback"}

func producerOverview(n *Names) *dashboard.DashboardBuilder {
	sent := n.Metric("MetricSentMessages")
	opDur := n.Metric("MetricOperationDuration")
	stage := n.Metric("MetricStageDuration")
	queue := n.Metric("MetricRecordQueueTime")
	retried := n.Metric("MetricRecordsRetried")
	failed := n.Metric("MetricRecordsFailed")
	batchSize := n.Metric("MetricBatchSize")
	batchRecs := n.Metric("MetricBatchRecords")
	ratio := n.Metric("MetricCompressionRatio")
	spansDropped := n.Metric("MetricSpansDropped")
	topicL := n.Label("AttrMessagingDestinationName")
	stageL := n.Label("AttrStage")
	errL := n.Label("AttrErrorType")
	comprL := n.Label("AttrCompression")
	m := base(topicL, "$topic")
	// messaging.client.sent.messages counts every record attempted; the acknowledged ones are
	// its series without error.type.
	acked := m + fmt.Sprintf(`,%s=""`, errL)
	// Failed and retried records have no series before the first one (orZero): they read 0 for
	// every topic that has sent records.
	sentSel := fmt.Sprintf("%s{%s}", sent, m)

	d := filtered(n, sent, "topic", "Topic", topicL,
		"kafkatrail: Producer overview", "kafkatrail-producer-overview",
		"Records acknowledged, end-to-end latency (Send to callback), where the time goes stage by stage, "+
			"errors and retries. Latency panels show exemplars: a dot opens the record's trace in Jaeger.")

	d = d.WithRow(dashboard.NewRowBuilder("Throughput")).
		WithPanel(statPanel("Records acknowledged / s", "messaging.client.sent.messages without error.type: records a broker acknowledged.", "ops",
			fmt.Sprintf("sum(%s)", rate(sent, acked)))).
		WithPanel(statPanel("End-to-end p99", "messaging.client.operation.duration: Send called to callback returned, 99th percentile.", "s",
			quantile(0.99, opDur, m))).
		WithPanel(statPanel("Records failed / s", "kafkatrail.producer.records.failed, every error.type.", "ops",
			orZero(fmt.Sprintf("sum(%s)", rate(failed, m)), sentSel))).
		WithPanel(statPanel("Records retried / s", "kafkatrail.producer.records.retried, every error.type.", "ops",
			orZero(fmt.Sprintf("sum(%s)", rate(retried, m)), sentSel))).
		WithPanel(statPanel("Spans dropped / s", "kafkatrail.telemetry.spans.dropped: traced records' spans the export queue "+
			"could not take (the collector is slow or down; the records themselves are not affected). The status page's "+
			"telemetry line says whether each export works.", "ops",
			orZero(fmt.Sprintf("sum(%s)", rate(spansDropped, base())), sentSel))).
		WithPanel(ts("Records acknowledged / s by topic", "messaging.client.sent.messages without error.type, per topic.", "ops", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s) (%s)", topicL, rate(sent, acked)), legend(topicL)))).
		WithPanel(ts("Records per batch and batch size", "kafkatrail.producer.batch.records and kafkatrail.producer.batch.size (on the wire, after compression), means.", "short", 12, 8).
			WithTarget(q(mean(batchRecs, m), "records per batch")).
			WithTarget(q(mean(batchSize, m), "bytes per batch")).
			OverrideByName("bytes per batch", []dashboard.DynamicConfigValue{{Id: "unit", Value: "bytes"}, {Id: "custom.axisPlacement", Value: "right"}}))

	lat := ts("End-to-end latency (Send to callback)", "messaging.client.operation.duration percentiles. Exemplars link to traces.", "s", 16, 9)
	for _, p := range []float64{0.5, 0.9, 0.99, 0.999} {
		lat = lat.WithTarget(qx(quantile(p, opDur, m), fmt.Sprintf("p%g", p*100)))
	}
	d = d.WithRow(dashboard.NewRowBuilder("End-to-end latency")).
		WithPanel(lat).
		WithPanel(ts("Mean end-to-end latency by topic", "messaging.client.operation.duration mean per topic.", "s", 8, 9).
			WithTarget(q(mean(opDur, m, topicL), legend(topicL)))).
		WithPanel(latencyHeatmap("End-to-end latency distribution", "messaging.client.operation.duration buckets; exemplars link to traces.", opDur, m, 24))

	d = d.WithRow(dashboard.NewRowBuilder("Stage breakdown (the waterfall in aggregate)")).
		WithPanel(stacked(ts("Mean time per stage (stacked)",
			"kafkatrail.producer.stage.duration mean per stage, stacked in trace order: read (line written to Send) and append are per record, the other stages per batch attempt.", "s", 12, 9)).
			WithTarget(q(mean(stage, m, stageL), legend(stageL)))).
		WithPanel(func() *timeseries.PanelBuilder {
			p := ts("p99 per stage", "kafkatrail.producer.stage.duration 99th percentile per stage. Exemplars link to traces.", "s", 12, 9)
			for _, s := range stages {
				st := n.Const(s)
				p = p.WithTarget(qx(quantile(0.99, stage, base(topicL, "$topic", stageL, st)), st))
			}
			return p
		}())
	for _, s := range stages {
		st := n.Const(s)
		d = d.WithPanel(latencyHeatmap("Stage "+st, "kafkatrail.producer.stage.duration{stage=\""+st+"\"} buckets.",
			stage, base(topicL, "$topic")+fmt.Sprintf(`,%s="%s"`, stageL, st), 8))
	}
	d = d.WithPanel(ts("Record queue time", "kafkatrail.producer.record.queue.duration: batch created (or re-enqueued) to drained (Java record-queue-time).", "s", 24, 8).
		WithTarget(qx(quantile(0.5, queue, m), "p50")).
		WithTarget(qx(quantile(0.99, queue, m), "p99")))

	d = d.WithRow(dashboard.NewRowBuilder("Errors and retries")).
		WithPanel(ts("Records failed / s by error.type", "kafkatrail.producer.records.failed: records whose callback got an error, by Kafka error name or DELIVERY_TIMEOUT, ...", "ops", 12, 8).
			WithTarget(q(orZero(fmt.Sprintf("sum by (%s, %s) (%s)", topicL, errL, rate(failed, m)), sentSel, topicL), legend(topicL, errL)))).
		WithPanel(ts("Records retried / s by error.type", "kafkatrail.producer.records.retried: records in batches sent again.", "ops", 12, 8).
			WithTarget(q(orZero(fmt.Sprintf("sum by (%s, %s) (%s)", topicL, errL, rate(retried, m)), sentSel, topicL), legend(topicL, errL)))).
		WithPanel(ts("Compression ratio", "kafkatrail.producer.compression.ratio: compressed over uncompressed bytes per batch (mean).", "percentunit", 24, 6).
			WithTarget(q(mean(ratio, m, comprL), legend(comprL))))

	d = d.WithRow(dashboard.NewRowBuilder("Recent traces")).
		WithPanel(tracesTable("Recent traces", "Jaeger search: the most recent traces of the service; open one for its send span and six stages.", ""))
	return d
}

func networkInflight(n *Names) *dashboard.DashboardBuilder {
	inflight := n.Metric("MetricInFlightRequests")
	reqDur := n.Metric("MetricRequestDuration")
	io := n.Metric("MetricNetworkIO")
	conns := n.Metric("MetricConnectionCount")
	created := n.Metric("MetricConnectionCreations")
	closed := n.Metric("MetricConnectionCloses")
	failures := n.Metric("MetricConnectionFailures")
	setup := n.Metric("MetricConnectionSetup")
	throttle := n.Metric("MetricThrottleTime")
	metaAge := n.Metric("MetricMetadataAge")
	bufTotal := n.Metric("MetricBufferTotal")
	bufAvail := n.Metric("MetricBufferAvailable")
	bufWaiting := n.Metric("MetricBufferWaiting")
	bufWait := n.Metric("MetricBufferWaitTime")
	bufExh := n.Metric("MetricBufferExhausted")
	nodeL := n.Label("AttrNodeID")
	apiL := n.Label("AttrAPI")
	dirL := n.Label("AttrNetworkIODirection")
	stateL := n.Label("AttrConnectionState")
	errL := n.Label("AttrErrorType")
	m := base(nodeL, "$node")
	b := base()
	// Closes and failures have no series before the first one (orZero): they read 0 for every
	// node the producer knows, which kafkatrail.connection.count has from its first state.
	nodes := fmt.Sprintf("%s{%s}", conns, m)

	d := filtered(n, inflight, "node", "Broker node", nodeL,
		"kafkatrail: Network and in-flight", "kafkatrail-network-inflight",
		"Per broker: requests in flight, connection states and churn, request latency by API, bytes; "+
			"the buffer pool and metadata age.")

	reqLat := ts("Request latency p99 by broker and API", "kafkatrail.request.duration: request queued to response read (Java request-latency). Exemplars link to traces.", "s", 12, 8)
	reqLat = reqLat.WithTarget(qx(quantile(0.99, reqDur, m, nodeL, apiL), "node "+legend(nodeL)+" "+legend(apiL)))
	d = d.WithRow(dashboard.NewRowBuilder("In flight and latency")).
		WithPanel(ts("In-flight requests per broker", "kafkatrail.producer.inflight.requests: sent and not answered (Java requests-in-flight); max.in.flight.requests.per.connection caps it.", "short", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s) (%s{%s})", nodeL, inflight, m), "node "+legend(nodeL)))).
		WithPanel(reqLat).
		WithPanel(ts("Requests / s by broker and API", "kafkatrail.request.duration count.", "reqps", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s, %s) (%s)", nodeL, apiL, rate(reqDur+"_count", m)), "node "+legend(nodeL)+" "+legend(apiL)))).
		WithPanel(latencyHeatmap("Request latency distribution", "kafkatrail.request.duration buckets, every API.", reqDur, m, 12))

	d = d.WithRow(dashboard.NewRowBuilder("Connections")).
		WithPanel(stacked(ts("Connections by state", "kafkatrail.connection.count: one per known node, in its current state.", "short", 12, 8)).
			WithTarget(q(fmt.Sprintf("sum by (%s) (%s{%s})", stateL, conns, m), legend(stateL)))).
		WithPanel(ts("Connection state per broker", "kafkatrail.connection.count per node and state (1: the node is in that state).", "short", 12, 8).
			WithTarget(q(fmt.Sprintf("max by (%s, %s) (%s{%s}) > 0", nodeL, stateL, conns, m), "node "+legend(nodeL)+" "+legend(stateL)))).
		WithPanel(ts("Connections created and closed / s", "kafkatrail.connection.creations and kafkatrail.connection.closes.", "cps", 8, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s) (%s)", nodeL, rate(created, m)), "created node "+legend(nodeL))).
			WithTarget(q(orZero(fmt.Sprintf("sum by (%s) (%s)", nodeL, rate(closed, m)), nodes, nodeL), "closed node "+legend(nodeL)))).
		WithPanel(ts("Connection failures / s", "kafkatrail.connection.failures: attempts that failed before being established, by error.type.", "cps", 8, 8).
			WithTarget(q(orZero(fmt.Sprintf("sum by (%s, %s) (%s)", nodeL, errL, rate(failures, m)), nodes, nodeL), "node "+legend(nodeL)+" "+legend(errL)))).
		WithPanel(ts("Connection setup time", "kafkatrail.connection.setup.duration: attempt to established (TCP, TLS, SASL, ApiVersions).", "s", 8, 8).
			WithTarget(q(mean(setup, m, nodeL), "mean node "+legend(nodeL))))

	d = d.WithRow(dashboard.NewRowBuilder("Bytes and throttling")).
		WithPanel(ts("Bytes / s by broker and direction", "kafkatrail.network.io (Java outgoing-byte-rate, incoming-byte-rate).", "Bps", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s, %s) (%s)", nodeL, dirL, rate(io, m)), "node "+legend(nodeL)+" "+legend(dirL)))).
		WithPanel(ts("Throttle time", "kafkatrail.producer.throttle.duration: throttle time brokers reported in produce responses (mean and max bucket p99).", "s", 12, 8).
			WithTarget(q(mean(throttle, m, nodeL), "mean node "+legend(nodeL))).
			WithTarget(qx(quantile(0.99, throttle, m, nodeL), "p99 node "+legend(nodeL))))

	d = d.WithRow(dashboard.NewRowBuilder("Buffer pool and metadata")).
		WithPanel(ts("Buffer memory", "kafkatrail.producer.buffer.total (buffer.memory) and .available (not held by batches).", "bytes", 8, 8).
			WithTarget(q(fmt.Sprintf("sum(%s{%s})", bufTotal, b), "total")).
			WithTarget(q(fmt.Sprintf("sum(%s{%s})", bufAvail, b), "available"))).
		WithPanel(ts("Sends waiting for memory", "kafkatrail.producer.buffer.waiting (Java waiting-threads); kafkatrail.producer.buffer.wait.time as a share of time; buffer.exhausted: Sends that gave up after max.block.ms.", "short", 8, 8).
			WithTarget(q(fmt.Sprintf("sum(%s{%s})", bufWaiting, b), "waiting")).
			WithTarget(q(fmt.Sprintf("sum(%s)", rate(bufWait, b)), "blocked seconds / s")).
			WithTarget(q(fmt.Sprintf("sum(%s)", rate(bufExh, b)), "exhausted / s"))).
		WithPanel(ts("Metadata age", "kafkatrail.producer.metadata.age: time since the last successful metadata response (Java metadata-age).", "s", 8, 8).
			WithTarget(q(fmt.Sprintf("max by (instance) (%s{%s})", metaAge, b), legend("instance"))))

	d = d.WithRow(dashboard.NewRowBuilder("Connection traces")).
		WithPanel(tracesTable("Connection traces", "Jaeger search: connect spans (dial, tlsHandshake, saslAuthenticate, ApiVersions).", n.Const("SpanConnect")))
	return d
}

func agentFiles(n *Names) *dashboard.DashboardBuilder {
	lines := n.Metric("MetricAgentLinesRead")
	bytesRead := n.Metric("MetricAgentBytesRead")
	behind := n.Metric("MetricAgentFileBehind")
	ckLag := n.Metric("MetricAgentCheckpointLag")
	oldest := n.Metric("MetricAgentFileOldestUnacked")
	truncated := n.Metric("MetricAgentLinesTruncated")
	split := n.Metric("MetricAgentLinesSplit")
	dropped := n.Metric("MetricAgentLinesDropped")
	container := n.Metric("MetricAgentContainerLines")
	watched := n.Metric("MetricAgentFilesWatched")
	age := n.Metric("MetricRecordAge")
	acked := n.Metric("MetricAgentLinesAcked")
	lost := n.Metric("MetricAgentLinesFailed")
	deadLettered := n.Metric("MetricAgentLinesDeadLettered")
	resent := n.Metric("MetricAgentLinesResent")
	fileL := n.Label("AttrLogFilePath")
	// Standard input has no log.file.path: its series say kafkatrail.input="stdin", which the
	// per-file panels group by too, so stdin gets a legend of its own.
	inputL := n.Label("AttrInput")
	// Two inputs that follow one file are two series, told apart by kafkatrail.agent.input.
	agentInputL := n.Label("AttrAgentInput")
	reasonL := n.Label("AttrDropReason")
	m := base(fileL, "$file")
	// Truncated, split and dropped lines have no series before the first one (orZero): they read
	// 0 for every file watched and for stdin, which kafkatrail.agent.file.behind has while they
	// are read. The zeros are grouped by both labels, so a file and stdin each get their own.
	inputs := fmt.Sprintf("%s{%s}", behind, m)
	perInput := func(counter string, extra ...string) string {
		by := append([]string{fileL, inputL, agentInputL}, extra...)
		return orZero(fmt.Sprintf("sum by (%s) (%s)", strings.Join(by, ", "), rate(counter, m)), inputs, fileL, inputL, agentInputL)
	}

	d := filtered(n, lines, "file", "File", fileL,
		"kafkatrail: Agent and files", "kafkatrail-agent-files",
		"The agent's files: lines and bytes read, bytes behind the end of each file (read lag), bytes read "+
			"but not yet acknowledged (checkpoint lag), and long or dropped lines.")

	d = d.WithRow(dashboard.NewRowBuilder("Reading")).
		WithPanel(statPanel("Files watched", "kafkatrail.agent.files.watched.", "short", fmt.Sprintf("sum(%s{%s})", watched, base()))).
		WithPanel(statPanel("Lines read / s", "kafkatrail.agent.lines.read, every file.", "ops", fmt.Sprintf("sum(%s)", rate(lines, m)))).
		WithPanel(statPanel("Bytes behind (all files)", "kafkatrail.agent.file.behind summed: bytes not read yet.", "bytes", fmt.Sprintf("sum(%s{%s})", behind, m))).
		WithPanel(statPanel("Checkpoint lag (all files)", "kafkatrail.agent.checkpoint.lag summed: bytes read, not yet acknowledged.", "bytes", fmt.Sprintf("sum(%s{%s})", ckLag, m))).
		WithPanel(ts("Lines read / s by file", "kafkatrail.agent.lines.read.", "ops", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s, %s, %s) (%s)", fileL, inputL, agentInputL, rate(lines, m)), legend(fileL, inputL, agentInputL)))).
		WithPanel(ts("Bytes read / s by file", "kafkatrail.agent.bytes.read.", "Bps", 12, 8).
			WithTarget(q(fmt.Sprintf("sum by (%s, %s, %s) (%s)", fileL, inputL, agentInputL, rate(bytesRead, m)), legend(fileL, inputL, agentInputL))))

	d = d.WithRow(dashboard.NewRowBuilder("Lag")).
		WithPanel(ts("Bytes behind the end of each file", "kafkatrail.agent.file.behind: file size minus the read offset. Growing: the agent cannot keep up (or Kafka pushes back).", "bytes", 12, 8).
			WithTarget(q(fmt.Sprintf("max by (%s, %s, %s) (%s{%s})", fileL, inputL, agentInputL, behind, m), legend(fileL, inputL, agentInputL)))).
		WithPanel(ts("Checkpoint lag per file", "kafkatrail.agent.checkpoint.lag: read offset minus the committed (acknowledged) offset; what a crash would re-send.", "bytes", 12, 8).
			WithTarget(q(fmt.Sprintf("max by (%s, %s, %s) (%s{%s})", fileL, inputL, agentInputL, ckLag, m), legend(fileL, inputL, agentInputL)))).
		WithPanel(ts("Oldest unacknowledged line per file", "kafkatrail.agent.file.oldest_unacked.age: how long ago the oldest line of the file "+
			"not yet acknowledged was read (0: none waiting). It rises second by second through an outage, when no line is acknowledged and the "+
			"line age beside it records nothing. Files only: standard input is not measured and reads 0.", "s", 12, 8).
			WithTarget(q(orZero(fmt.Sprintf("max by (%s, %s, %s) (%s{%s})", fileL, inputL, agentInputL, oldest, m), inputs, fileL, inputL, agentInputL),
				legend(fileL, inputL, agentInputL)))).
		WithPanel(func() *timeseries.PanelBuilder {
			p := ts("Line age at acknowledgement", "kafkatrail.producer.record.age: from when a line was written (its --timestamp-field, else its file's "+
				"modification time at read, else stdin's read) to Kafka's acknowledgement; how late logs reach Kafka. Every file and topic. Exemplars link to traces.", "s", 12, 8)
			for _, phi := range []float64{0.5, 0.99, 0.999} {
				p = p.WithTarget(qx(quantile(phi, age, base()), fmt.Sprintf("p%g", phi*100)))
			}
			return p
		}())

	// Lost, dead-lettered and resent lines have no series before the first one (orZero): they
	// read 0 once a line was acknowledged.
	ackedSel := fmt.Sprintf("%s{%s}", acked, base())
	d = d.WithRow(dashboard.NewRowBuilder("How lines ended")).
		WithPanel(ts("Lines by outcome / s", "Every input's lines by how they ended (README: How a line can end). acknowledged: "+
			"kafkatrail.agent.lines.acked (with --exactly-once: their transaction committed); lost: kafkatrail.agent.lines.failed "+
			"(only standard input's lines can be lost: a file's are sent again or by the next start); dead-lettered: "+
			"kafkatrail.agent.lines.dead_lettered (refused for good, kept in the dead-letter topic or file); sent again: "+
			"kafkatrail.agent.lines.resent (every send after a line's first: an expiry, a stop's probe, an aborted transaction).", "ops", 24, 8).
			WithTarget(q(fmt.Sprintf("sum(%s)", rate(acked, base())), "acknowledged")).
			WithTarget(q(orZero(fmt.Sprintf("sum(%s)", rate(lost, base())), ackedSel), "lost")).
			WithTarget(q(orZero(fmt.Sprintf("sum(%s)", rate(deadLettered, base())), ackedSel), "dead-lettered")).
			WithTarget(q(orZero(fmt.Sprintf("sum(%s)", rate(resent, base())), ackedSel), "sent again")))

	d = d.WithRow(dashboard.NewRowBuilder("Long and dropped lines")).
		WithPanel(ts("Lines truncated / s", "kafkatrail.agent.lines.truncated: cut at the long-line limit (--long-lines truncate).", "ops", 8, 8).
			WithTarget(q(perInput(truncated), legend(fileL, inputL, agentInputL)))).
		WithPanel(ts("Lines split / s", "kafkatrail.agent.lines.split: sent as several records (--long-lines split).", "ops", 8, 8).
			WithTarget(q(perInput(split), legend(fileL, inputL, agentInputL)))).
		WithPanel(ts("Lines dropped / s", "kafkatrail.agent.lines.dropped, by reason.", "ops", 8, 8).
			WithTarget(q(perInput(dropped, reasonL), legend(fileL, inputL, agentInputL, reasonL)))).
		WithPanel(ts("Container log lines / s", "kafkatrail.agent.container.lines, by reason: joined (a line the runtime wrote in pieces, joined), "+
			"malformed (not in the file's container format: sent as it is), interrupted (pieces sent without their last).", "ops", 24, 8).
			WithTarget(q(perInput(container, reasonL), legend(fileL, inputL, agentInputL, reasonL))))

	d = d.WithRow(dashboard.NewRowBuilder("Recent traces")).
		WithPanel(tracesTable("Recent traces", "Jaeger search: the most recent traces of the agent.", ""))
	return d
}
