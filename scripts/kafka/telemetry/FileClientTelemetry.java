package org.kafkatrail.telemetry;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

/**
 * The test broker's client telemetry receiver (KIP-714), for kafkatrail's tests: every payload a
 * client pushes is appended to the file named by the broker property
 * kafkatrail.client.telemetry.file, as one header line
 * "push client_instance_id=ID client_id=ID terminating=BOOL content_type=TYPE bytes=N\n"
 * followed by the N bytes of the payload as the broker hands them over (MetricsData, already
 * decompressed by the broker). A broker finds a ClientTelemetry among its metric.reporters, so the
 * class is a MetricsReporter too; ClientTelemetry is the interface of Kafka 3.7 to 4.x.
 */
public class FileClientTelemetry implements MetricsReporter, ClientTelemetry, ClientTelemetryReceiver {
    private String path;

    @Override
    public void configure(Map<String, ?> configs) {
        Object file = configs.get("kafkatrail.client.telemetry.file");
        if (file == null) {
            throw new IllegalArgumentException("kafkatrail.client.telemetry.file is not set");
        }
        path = file.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this;
    }

    @Override
    public synchronized void exportMetrics(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String header = "push client_instance_id=" + payload.clientInstanceId()
            + " client_id=" + context.clientId()
            + " terminating=" + payload.isTerminating()
            + " content_type=" + payload.contentType()
            + " bytes=" + bytes.length + "\n";
        try (FileOutputStream out = new FileOutputStream(path, true)) {
            out.write(header.getBytes(StandardCharsets.UTF_8));
            out.write(bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
