package telemetry

// The span and metric vocabulary of kafkatrail. Dashboards, alerts and the README are written
// against these names, so they change only with a note in the changelog. OpenTelemetry's names
// are used where the semantic conventions have one (messaging.*, error.type, server.*,
// network.io.direction, log.file.path); everything else is kafkatrail.*.
//
// Prometheus sees these names through the OTLP translation (Prometheus's OTLP receiver and the
// prometheus exporter both apply it): dots become underscores, the unit is appended as a suffix
// (s -> _seconds, By -> _bytes, annotations in braces like {record} add nothing) and counters
// end in _total. For example:
//
//	kafkatrail.producer.stage.duration (histogram, s) -> kafkatrail_producer_stage_duration_seconds_bucket{stage="drain"}
//	messaging.client.sent.messages     (counter)      -> messaging_client_sent_messages_total
//	kafkatrail.producer.inflight.requests (gauge)     -> kafkatrail_producer_inflight_requests{kafkatrail_node_id="1"}
//	kafkatrail.agent.file.behind       (gauge, By)    -> kafkatrail_agent_file_behind_bytes
//
// Attribute keys become labels the same way (messaging.destination.name ->
// messaging_destination_name). Resource attributes (service.name, ...) arrive as job/instance
// and target_info.

// SemconvVersion is the release of the OpenTelemetry semantic conventions (messaging, Kafka)
// the spans and metrics follow; docs/telemetry.md lists them against it.
const SemconvVersion = "1.44.0"

// InstrumentationName names kafkatrail's tracer and meter (the instrumentation scope).
const InstrumentationName = "github.com/kafkatrail/kafkatrail"

// DefaultServiceName is service.name when neither Config.ServiceName nor OTEL_SERVICE_NAME is set.
const DefaultServiceName = "kafkatrail-agent"

// DefaultSampleRatio is the share of records traced when neither Config.SampleRatio nor
// OTEL_TRACES_SAMPLER says otherwise: 1 %, enough to see every stage of typical records at a
// rate a trace backend absorbs, at a cost per unsampled record of nothing (see BenchmarkSendTracing).
const DefaultSampleRatio = 0.01

// DefaultTraceHeader is the record header that carries the send span's W3C trace context, so a
// consumer continues the trace.
const DefaultTraceHeader = "traceparent"

// Span names.
//
// A sampled record's trace is a `send {topic}` span (kind PRODUCER) whose children tile it
// exactly, in this order, so that their durations add up to the parent's:
//
//	append            Send called -> record in a batch (waits for metadata and buffer memory)
//	drain             in a batch -> batch drained for a node (linger, readiness, retry backoff)
//	doSend            drained -> request framed and handed to its connection
//	completedSend     handed over -> the write of its last byte returned (the writer's stamp)
//	completedReceive  written -> the response's last byte read (the reader's stamp)
//	callback          response read -> the record's callback returned
//
// drain, doSend, completedSend and completedReceive repeat for every attempt of a retried
// batch, each set carrying its attempt number. A record that failed before reaching a broker
// has only the stages it reached, then callback.
//
// Connection-level spans are roots of their own traces (kind CLIENT), recorded whenever tracing
// is on, whatever the ratio (they are few, and they explain the slow records): connect (from the
// connection attempt to READY, or to the failure) with children dial, tlsHandshake,
// saslAuthenticate and ApiVersions for the steps taken; and one Metadata span per metadata request.
//
// The full reference, generated from this file, is docs/telemetry.md.
const (
	SpanSendPrefix       = "send " // + topic: "send orders"
	SpanRead             = "read"
	SpanAppend           = "append"
	SpanDrain            = "drain"
	SpanDoSend           = "doSend"
	SpanCompletedSend    = "completedSend"
	SpanCompletedReceive = "completedReceive"
	SpanCallback         = "callback"
	SpanConnect          = "connect"
	SpanDial             = "dial"
	SpanTLSHandshake     = "tlsHandshake"
	SpanSASLAuthenticate = "saslAuthenticate"
	SpanAPIVersions      = "ApiVersions"
	SpanMetadata         = "Metadata"
)

// Values of the stage attribute of MetricStageDuration: the stage span names.
const (
	StageRead             = SpanRead
	StageAppend           = SpanAppend
	StageDrain            = SpanDrain
	StageDoSend           = SpanDoSend
	StageCompletedSend    = SpanCompletedSend
	StageCompletedReceive = SpanCompletedReceive
	StageCallback         = SpanCallback
)

// Attribute values.
const (
	messagingSystemKafka   = "kafka"
	messagingOperationSend = "send"
	networkIODirectionTx   = "transmit"
	networkIODirectionRx   = "receive"
)

// Values of error.type for failures that are not a Kafka error code (those use the code's name,
// e.g. NOT_LEADER_OR_FOLLOWER).
const (
	ErrorTypeDeliveryTimeout = "DELIVERY_TIMEOUT"  // delivery.timeout.ms passed
	ErrorTypeDisconnected    = "NETWORK_EXCEPTION" // the connection closed before the response
	ErrorTypeRequestTimeout  = "REQUEST_TIMEOUT"   // request.timeout.ms passed; the connection was closed
	ErrorTypeProducerClosed  = "PRODUCER_CLOSED"   // Close gave up on the record
	ErrorTypeBufferExhausted = "BUFFER_EXHAUSTED"  // no buffer memory within max.block.ms
	ErrorTypeRecordTooLarge  = "RECORD_TOO_LARGE"  // larger than max.request.size or buffer.memory
	ErrorTypeAuthentication  = "AUTHENTICATION"    // SASL or TLS refused us
	ErrorTypeConnection      = "CONNECTION_FAILED" // the TCP connection could not be made (refused, unreachable, DNS)
	ErrorTypeMetadata        = "METADATA_TIMEOUT"  // the topic's metadata did not arrive within max.block.ms
	ErrorTypeCanceled        = "CANCELED"          // the caller's context ended
	ErrorTypeOther           = "_OTHER"            // anything else
)

// Attribute keys. The messaging.*, error.type, server.*, network.io.direction and log.file.path
// keys are OpenTelemetry's; partition ids are strings, as the conventions say.
const (
	AttrMessagingSystem          = "messaging.system"                   // "kafka"
	AttrMessagingOperationName   = "messaging.operation.name"           // "send"
	AttrMessagingOperationType   = "messaging.operation.type"           // "send"
	AttrMessagingDestinationName = "messaging.destination.name"         // topic
	AttrMessagingPartitionID     = "messaging.destination.partition.id" // "3"
	AttrMessagingKafkaOffset     = "messaging.kafka.offset"             // int
	AttrMessagingKafkaTombstone  = "messaging.kafka.message.tombstone"  // bool, only when true
	AttrMessagingClientID        = "messaging.client.id"                // client.id
	AttrMessagingKafkaKey        = "messaging.kafka.message.key"        // a keyed record's key, when valid UTF-8
	AttrMessagingKafkaClusterID  = "messaging.kafka.cluster.id"         // the cluster id from the metadata responses
	AttrMessagingBatchCount      = "messaging.batch.message_count"      // records in the batch
	AttrErrorType                = "error.type"                         // Kafka error name, e.g. TOPIC_AUTHORIZATION_FAILED
	AttrServerAddress            = "server.address"                     // broker host
	AttrServerPort               = "server.port"                        // broker port
	AttrNetworkPeerAddress       = "network.peer.address"               // the IP its connection reached (the advertised name resolved)
	AttrClientInstanceID         = "kafkatrail.client.instance.id"      // the KIP-714 client instance id the broker assigned
	AttrNetworkPeerPort          = "network.peer.port"                  // the port its connection reached
	AttrNetworkIODirection       = "network.io.direction"               // transmit | receive
	AttrLogFilePath              = "log.file.path"                      // agent: the file (not set for stdin)

	AttrNodeID          = "kafkatrail.node.id"                // broker node id (negative: a bootstrap address)
	AttrBatchBytes      = "kafkatrail.batch.bytes"            // batch size on the wire
	AttrCorrelationID   = "kafkatrail.request.correlation_id" // request header's correlation id
	AttrAPIVersion      = "kafkatrail.request.api_version"    // negotiated version of the request
	AttrAPI             = "kafkatrail.request.api"            // Kafka API name: Produce, Metadata, ApiVersions, InitProducerId
	AttrAttempt         = "kafkatrail.attempt"                // 1 for the first attempt, 2 for the first retry, ...
	AttrConnectionState = "kafkatrail.connection.state"       // DISCONNECTED | CONNECTING | CHECKING_API_VERSIONS | READY | AUTHENTICATION_FAILED
	AttrCompression     = "kafkatrail.compression"            // none | gzip | snappy | lz4 | zstd
	AttrSASLMechanism   = "kafkatrail.sasl.mechanism"         // PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
	AttrStage           = "kafkatrail.stage"                  // append | drain | doSend | completedSend | completedReceive | callback
	AttrInput           = "kafkatrail.input"                  // agent: "stdin" for lines read from standard input (files have log.file.path)
	AttrAgentInput      = "kafkatrail.agent.input"            // agent: the input the lines are of (default: the flags'; else its name in inputs:)
	AttrDropReason      = "kafkatrail.reason"                 // why the agent dropped a line
	// AttrDeadLetterDestination is where a dead letter went: topic or file.
	AttrDeadLetterDestination = "kafkatrail.dead_letter.destination"
	AttrTraceReason           = "kafkatrail.trace.reason" // on send spans: sampled (at Send) | slow | error (at the callback)
	// AttrMessagingDestinationTemplate is the --topic template a topic's name came from (logs-{service}),
	// on send spans and the conventions' two metrics, for topics a template named.
	AttrMessagingDestinationTemplate = "messaging.destination.template"
	AttrTraceThreshold               = "kafkatrail.trace.threshold" // on slow records' send spans: the latency threshold, s
	AttrTraceLink                    = "kafkatrail.trace.link"      // on a send span's links: what the linked span is (batch)
)

// TraceLinkBatch is AttrTraceLink on a send span's link to its batch's doSend in another
// record's trace (ObserverConfig.BatchStages).
const TraceLinkBatch = "batch"

// Values of AttrTraceReason: why a record's trace was kept.
const (
	TraceReasonSampled = "sampled" // the sampler said so at Send (or the log line's trace was sampled)
	TraceReasonSlow    = "slow"    // its Send-to-acknowledgement latency passed the threshold (--trace-slower-than)
	TraceReasonError   = "error"   // it failed (in Send, or refused or expired), traced at its callback, at most DefaultErrorTracesPerSecond a second
)

// Metric names. Units are UCUM, as OpenTelemetry wants: s, By, 1, and {annotations} for counts.
const (
	// Producer: OpenTelemetry messaging metrics.
	MetricOperationDuration = "messaging.client.operation.duration" // histogram s: Send called -> callback returned, per record; error.type on failure
	MetricSentMessages      = "messaging.client.sent.messages"      // counter {message}: records the producer attempted (sent in a request); error.type on the failed ones

	// Producer: records and stages.
	MetricStageDuration    = "kafkatrail.producer.stage.duration"        // histogram s, stage=...: read and append per record; the other stages per batch attempt
	MetricRecordAge        = "kafkatrail.producer.record.age"            // histogram s: a record's age at acknowledgement, its data written (Record.Written) -> acknowledged
	MetricRecordQueueTime  = "kafkatrail.producer.record.queue.duration" // histogram s: batch created (or re-enqueued) -> drained (Java record-queue-time)
	MetricRecordsRetried   = "kafkatrail.producer.records.retried"       // counter {record}, error.type: records in batches sent again (Java record-retry-rate)
	MetricRecordsFailed    = "kafkatrail.producer.records.failed"        // counter {record}, error.type: records whose callback got an error (Java record-error-rate)
	MetricBatchSize        = "kafkatrail.producer.batch.size"            // histogram By: batch size on the wire, after compression (Java batch-size)
	MetricBatchRecords     = "kafkatrail.producer.batch.records"         // histogram {record}: records per batch
	MetricCompressionRatio = "kafkatrail.producer.compression.ratio"     // histogram 1: compressed / uncompressed bytes per batch (Java compression-rate)
	MetricThrottleTime     = "kafkatrail.producer.throttle.duration"     // histogram s, node: throttle time a broker reported in a produce response

	// Producer: buffer pool (buffer.memory) and metadata, observed when a reader collects.
	MetricBufferTotal     = "kafkatrail.producer.buffer.total"     // gauge By: buffer.memory
	MetricBufferAvailable = "kafkatrail.producer.buffer.available" // gauge By: memory not held by batches (Java buffer-available-bytes)
	MetricBufferWaiting   = "kafkatrail.producer.buffer.waiting"   // gauge {waiter}: Sends blocked on memory (Java waiting-threads)
	MetricBufferWaitTime  = "kafkatrail.producer.buffer.wait.time" // counter s: total time Sends spent blocked on memory (Java bufferpool-wait-time)
	MetricBufferExhausted = "kafkatrail.producer.buffer.exhausted" // counter {allocation}: Sends failed after max.block.ms without memory
	MetricMetadataAge     = "kafkatrail.producer.metadata.age"     // gauge s: time since the last successful metadata response (Java metadata-age)

	// Network: per broker node.
	MetricInFlightRequests    = "kafkatrail.producer.inflight.requests" // gauge {request}, node: requests sent and not answered (Java requests-in-flight)
	MetricRequestDuration     = "kafkatrail.request.duration"           // histogram s, node, api, error.type: request queued -> response read (Java request-latency)
	MetricNetworkIO           = "kafkatrail.network.io"                 // counter By, node, network.io.direction: bytes written and read (Java outgoing/incoming-byte-rate)
	MetricConnectionCount     = "kafkatrail.connection.count"           // gauge {connection}, node, kafkatrail.connection.state: 1 per known node, in its current state
	MetricConnectionCreations = "kafkatrail.connection.creations"       // counter {connection}, node: connections established (TCP, TLS, SASL done)
	MetricConnectionCloses    = "kafkatrail.connection.closes"          // counter {connection}, node: established connections that closed
	MetricConnectionFailures  = "kafkatrail.connection.failures"        // counter {connection}, node, error.type: connection attempts that failed before being established
	MetricConnectionSetup     = "kafkatrail.connection.setup.duration"  // histogram s, node: connection attempt -> established

	// Telemetry itself.
	MetricSpansDropped = "kafkatrail.telemetry.spans.dropped" // counter {span}: spans dropped because the export queue was full
	// gauge {instance}, kafkatrail.client.instance.id: 1 for the client instance id the broker
	// assigned (KIP-714), once it did: it joins the broker's client metrics with these.
	MetricClientInstance = "kafkatrail.producer.client.instance"

	// Agent: per file (log.file.path; kafkatrail.input="stdin" for stdin). Recorded through Provider.Agent().
	MetricAgentLinesRead     = "kafkatrail.agent.lines.read"     // counter {line}
	MetricAgentBytesRead     = "kafkatrail.agent.bytes.read"     // counter By
	MetricAgentFileBehind    = "kafkatrail.agent.file.behind"    // gauge By: file size minus the read offset
	MetricAgentCheckpointLag = "kafkatrail.agent.checkpoint.lag" // gauge By: read offset minus the committed (acknowledged) offset
	// gauge s: how long ago the oldest line of the file not yet acknowledged was read (0: none).
	// Line age is otherwise recorded at acknowledgement, which an outage stops; this grows.
	MetricAgentFileOldestUnacked = "kafkatrail.agent.file.oldest_unacked.age"
	MetricAgentLinesTruncated    = "kafkatrail.agent.lines.truncated" // counter {line}: lines cut at the long-line limit
	MetricAgentLinesSplit        = "kafkatrail.agent.lines.split"     // counter {line}: long lines sent as several records
	MetricAgentLinesDropped      = "kafkatrail.agent.lines.dropped"   // counter {line}, kafkatrail.reason: lines not sent
	// counter {line}, kafkatrail.reason: container log lines (--container-format) that were not a
	// runtime's one whole line: joined (written in pieces, joined into one), malformed (not in the
	// file's format: sent as they are), interrupted (pieces sent without their last piece).
	MetricAgentContainerLines = "kafkatrail.agent.container.lines"
	MetricAgentFilesWatched   = "kafkatrail.agent.files.watched"   // gauge {file}: files being tailed
	MetricAgentRateLimitWait  = "kafkatrail.agent.rate_limit.wait" // counter s: time reading was paused by the rate limit

	// Agent: per topic (messaging.destination.name), as --topic (a template) routes lines.
	MetricAgentLinesSent     = "kafkatrail.agent.lines.sent"     // counter {line}: lines routed to the topic and handed to the producer
	MetricAgentLinesAcked    = "kafkatrail.agent.lines.acked"    // counter {line}: lines Kafka acknowledged (with --exactly-once: whose transaction committed)
	MetricAgentLinesFailed   = "kafkatrail.agent.lines.failed"   // counter {line}: lines lost (stdin's lines not delivered)
	MetricAgentLinesUnrouted = "kafkatrail.agent.lines.unrouted" // counter {line}, kafkatrail.reason: lines the topic template gave no topic of their own (sent to --fallback-topic, or failed)

	// Agent: lines Kafka did not take at the first try.
	MetricAgentLinesDeadLettered = "kafkatrail.agent.lines.dead_lettered" // counter {line}, kafkatrail.reason, kafkatrail.dead_letter.destination: lines refused for good, kept as dead letters
	MetricAgentLinesResent       = "kafkatrail.agent.lines.resent"        // counter {line}: failed lines the agent sent again
	MetricAgentSendingStopped    = "kafkatrail.agent.sending.stopped"     // gauge: 1 while sending is stopped by a refusal about the configuration or the cluster

	// Agent: what --format and --timestamp-field did instead of failing a line.
	MetricAgentLinesEncodingFallback = "kafkatrail.agent.lines.encoding_fallback" // counter {line}, kafkatrail.reason: timestamp, json_merge, message_cut

	// Agent: SASL on the producer's connections (KIP-368 re-authentication, OAUTHBEARER tokens).
	MetricAgentSASLAuthentications = "kafkatrail.agent.sasl.authentications" // counter {authentication}, kafkatrail.reason: connect, reauthenticate
	MetricAgentSASLTokenFetches    = "kafkatrail.agent.sasl.token_fetches"   // counter {fetch}, error.type on the failed ones
)

// MetricDesc describes one metric: what the README lists and what the metric tests check.
type MetricDesc struct {
	Name  string
	Kind  string // counter, histogram or gauge (an observable gauge or an up-down counter)
	Unit  string
	Attrs []string
	Doc   string
}

// Metrics is every metric kafkatrail produces, in the order the README lists them.
var Metrics = []MetricDesc{
	{MetricOperationDuration, "histogram", "s", []string{AttrMessagingSystem, AttrMessagingOperationName, AttrMessagingOperationType, AttrMessagingDestinationName, AttrMessagingDestinationTemplate, AttrMessagingPartitionID, AttrServerAddress, AttrServerPort, AttrErrorType}, "Send called to callback returned, per record"},
	{MetricSentMessages, "counter", "{message}", []string{AttrMessagingSystem, AttrMessagingOperationName, AttrMessagingDestinationName, AttrMessagingDestinationTemplate, AttrMessagingPartitionID, AttrServerAddress, AttrServerPort, AttrErrorType}, "records the producer attempted to send (put in a produce request), acknowledged or not; error.type on the ones that failed. A record that failed in Send or expired before it was ever sent is not counted (the conventions: MUST NOT count messages created but not sent); kafkatrail.producer.records.failed has it"},
	{MetricStageDuration, "histogram", "s", []string{AttrStage, AttrMessagingDestinationName}, "time in each lifecycle stage: read and append per record, the others per batch attempt"},
	{MetricRecordAge, "histogram", "s", []string{AttrMessagingDestinationName}, "a record's age when the broker acknowledged it: from when its data was written (for the agent: the line's timestamp field, else its file's modification time at read, else, for stdin, the read) to the acknowledgement; only records whose Written is known"},
	{MetricRecordQueueTime, "histogram", "s", []string{AttrMessagingDestinationName}, "batch created (or re-enqueued for retry) to drained"},
	{MetricRecordsRetried, "counter", "{record}", []string{AttrMessagingDestinationName, AttrErrorType}, "records in batches that are sent again"},
	{MetricRecordsFailed, "counter", "{record}", []string{AttrMessagingDestinationName, AttrErrorType}, "records whose callback got an error"},
	{MetricBatchSize, "histogram", "By", []string{AttrMessagingDestinationName, AttrCompression}, "batch size on the wire, after compression"},
	{MetricBatchRecords, "histogram", "{record}", []string{AttrMessagingDestinationName}, "records per batch"},
	{MetricCompressionRatio, "histogram", "1", []string{AttrMessagingDestinationName, AttrCompression}, "compressed over uncompressed size, per batch"},
	{MetricThrottleTime, "histogram", "s", []string{AttrNodeID}, "throttle time reported in produce responses (the producer sends nothing more to that broker meanwhile, KIP-219)"},
	{MetricBufferTotal, "gauge", "By", nil, "buffer.memory"},
	{MetricBufferAvailable, "gauge", "By", nil, "buffer memory not held by batches"},
	{MetricBufferWaiting, "gauge", "{waiter}", nil, "Sends blocked waiting for buffer memory"},
	{MetricBufferWaitTime, "counter", "s", nil, "total time Sends spent blocked on buffer memory"},
	{MetricBufferExhausted, "counter", "{allocation}", nil, "Sends that failed after max.block.ms without memory"},
	{MetricMetadataAge, "gauge", "s", nil, "time since the last successful metadata response"},
	{MetricInFlightRequests, "gauge", "{request}", []string{AttrNodeID}, "requests sent to the node and not answered"},
	{MetricRequestDuration, "histogram", "s", []string{AttrNodeID, AttrAPI, AttrErrorType}, "request queued to response read, every API"},
	{MetricNetworkIO, "counter", "By", []string{AttrNodeID, AttrNetworkIODirection}, "bytes written to and read from brokers"},
	{MetricConnectionCount, "gauge", "{connection}", []string{AttrNodeID, AttrConnectionState}, "1 per known node, in its current connection state"},
	{MetricConnectionCreations, "counter", "{connection}", []string{AttrNodeID}, "connections established"},
	{MetricConnectionCloses, "counter", "{connection}", []string{AttrNodeID}, "established connections that closed"},
	{MetricConnectionFailures, "counter", "{connection}", []string{AttrNodeID, AttrErrorType}, "connection attempts that failed"},
	{MetricConnectionSetup, "histogram", "s", []string{AttrNodeID}, "connection attempt to established (TCP, TLS, SASL)"},
	{MetricSpansDropped, "counter", "{span}", nil, "spans dropped because the export queue was full"},
	{MetricClientInstance, "gauge", "{instance}", []string{AttrClientInstanceID}, "1, with the client instance id the broker assigned the producer for its client metrics (KIP-714), once it did (enable.metrics.push and a broker that takes them): the broker labels the metrics it receives with the same id (client_instance_id), so a query can join the two (an info metric, as target_info)"},
	{MetricAgentLinesRead, "counter", "{line}", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "lines read"},
	{MetricAgentBytesRead, "counter", "By", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "bytes read"},
	{MetricAgentFileBehind, "gauge", "By", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "bytes between the read offset and the end of the file"},
	{MetricAgentCheckpointLag, "gauge", "By", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "bytes read but not yet acknowledged and checkpointed"},
	{MetricAgentFileOldestUnacked, "gauge", "s", []string{AttrLogFilePath, AttrAgentInput}, "how long ago the oldest line of the file not yet acknowledged (nor dead-lettered) was read, 0 when every line read has its outcome: it rises second by second through an outage, when no line is acknowledged and the line-age histogram records nothing"},
	{MetricAgentLinesTruncated, "counter", "{line}", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "lines cut at the long-line limit"},
	{MetricAgentLinesSplit, "counter", "{line}", []string{AttrLogFilePath, AttrInput, AttrAgentInput}, "long lines sent as several records"},
	{MetricAgentLinesDropped, "counter", "{line}", []string{AttrLogFilePath, AttrInput, AttrAgentInput, AttrDropReason}, "lines not sent"},
	{MetricAgentContainerLines, "counter", "{line}", []string{AttrLogFilePath, AttrInput, AttrAgentInput, AttrDropReason}, "container log lines that were not one whole line of the runtime: joined (its pieces joined into one), malformed (not in the file's container format: sent as it is), interrupted (its pieces sent without their last)"},
	{MetricAgentFilesWatched, "gauge", "{file}", nil, "files being tailed"},
	{MetricAgentRateLimitWait, "counter", "s", nil, "time lines waited for --max-lines-per-second and --max-bytes-per-second, all files and stdin together"},
	{MetricAgentLinesSent, "counter", "{line}", []string{AttrMessagingDestinationName}, "lines routed to the topic and handed to the producer"},
	{MetricAgentLinesAcked, "counter", "{line}", []string{AttrMessagingDestinationName}, "lines Kafka acknowledged"},
	{MetricAgentLinesFailed, "counter", "{line}", []string{AttrMessagingDestinationName}, "lines whose delivery failed"},
	{MetricAgentLinesUnrouted, "counter", "{line}", []string{AttrDropReason}, "lines the --topic template gave no topic of their own (reason: missing, illegal_name, max_topics); they went to --fallback-topic, or failed"},
	{MetricAgentLinesDeadLettered, "counter", "{line}", []string{AttrDropReason, AttrDeadLetterDestination}, "lines Kafka refused for good because of the line itself, kept as dead letters, whose files' checkpoints moved past them (reason: too_large, invalid_record, invalid_timestamp, policy_violation, unroutable; destination: topic, the --dead-letter-topic, or file, dead-letters.jsonl in --state-dir)"},
	{MetricAgentLinesResent, "counter", "{line}", nil, "failed lines the agent sent again (expired after delivery.timeout.ms, or refused for a reason that may pass): the files are the buffer, and a line is sent until acknowledged"},
	{MetricAgentSendingStopped, "gauge", "1", nil, "1 while sending is stopped by a refusal about the configuration or the cluster (an ACL, authentication, a missing topic) or a full dead-letter file: reading pauses, and sending resumes once a line is delivered"},
	{MetricAgentLinesEncodingFallback, "counter", "{line}", []string{AttrDropReason}, "lines sent otherwise than --format and --timestamp-field asked, never failed (reason: timestamp: the read time was used; json_merge: not a JSON object, sent as the json envelope; message_cut: the envelope's message cut to fit max.request.size)"},
	{MetricAgentSASLAuthentications, "counter", "{authentication}", []string{AttrDropReason}, "successful SASL exchanges of the producer's connections (reason: connect, or reauthenticate before the broker's session ended, KIP-368)"},
	{MetricAgentSASLTokenFetches, "counter", "{fetch}", []string{AttrErrorType}, "OAUTHBEARER tokens fetched from the token endpoint or read from their file; error.type on the fetches that failed"},
}
