// ControlProducer: the Java client as the cluster fault suite's control (reliability/cluster_test.go).
// It does with the Apache Kafka Java KafkaProducer what the agent does with stdin: every line of
// standard input is one record, keyed by the first capture group of --key-regex (as the agent's
// --key-regex), sent with acks=all and idempotence, the producer properties given as -X KEY=VALUE
// (the agent's flag). Acknowledgements and failures are counted in the callbacks; the first few
// failures are printed (exception class and message) on stderr, and a JSON summary is the last
// line of stdout. Exit status: 0 only if every line was acknowledged (committed, in transactional
// mode), 1 otherwise, 2 for bad usage.
//
//   java -cp "$KAFKA_LIB/*:DIR" ControlProducer --bootstrap B --topic T [--key-regex RE]
//       [-X key=value ...] [--transactional-id ID --commit-lines N --commit-ms T]
//       [--shutdown-timeout-ms MS] [--slow-send-ms MS]
//
// Transactional mode (--transactional-id): initTransactions, then a transaction is committed
// every --commit-lines lines or --commit-ms milliseconds. The lines of the open transaction are
// kept: when a transaction cannot commit (an abortable error), it is aborted and its lines are
// sent again in the next one, as an exactly-once application would. Every commit is printed on
// stderr as "commit EPOCH_MS LINES".
//
// Send latency: the time of every send() call is measured (it blocks for metadata and buffer
// memory); calls slower than --slow-send-ms (default 500) are printed on stderr as
// "slow-send EPOCH_MS MS", and the summary has their count, the maximum (also without the first
// call, which waits for the first metadata) and the 99th percentile.
//
// It is compiled at test time with javac against the cluster's jars; nothing else uses it.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ControlProducer {
    private static final int MAX_PRINTED_ERRORS = 5;

    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong printed = new AtomicLong();
    private final Map<String, AtomicLong> errorsByClass = new ConcurrentHashMap<>();
    private final List<String> firstErrors = java.util.Collections.synchronizedList(new ArrayList<>());

    // send() latency, in microseconds; a histogram by power of two for the 99th percentile.
    private final long[] sendHist = new long[64];
    private long sendMaxMicros;
    private long sendMaxLaterMicros; // every send() but the first (which waits for the first metadata)
    private long sendCalls;
    private long slowSends;
    private long slowSendMs = 500;

    private long sent;
    private long commits;
    private long aborts;
    private long committedLines;

    public static void main(String[] args) {
        int code;
        try {
            code = new ControlProducer().run(args);
        } catch (IllegalArgumentException e) {
            System.err.println("usage: " + e.getMessage());
            code = 2;
        } catch (Throwable e) {
            System.err.println("control: " + e.getClass().getName() + ": " + e.getMessage());
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        // Halt, not exit: a producer thread that still runs must not keep the JVM alive.
        Runtime.getRuntime().halt(code);
    }

    private final class Counted implements Callback {
        @Override
        public void onCompletion(RecordMetadata m, Exception e) {
            if (e == null) {
                acked.incrementAndGet();
                return;
            }
            failure(e);
        }
    }

    private void failure(Throwable e) {
        failed.incrementAndGet();
        errorsByClass.computeIfAbsent(e.getClass().getName(), k -> new AtomicLong()).incrementAndGet();
        if (printed.incrementAndGet() <= MAX_PRINTED_ERRORS) {
            String s = e.getClass().getName() + ": " + e.getMessage();
            firstErrors.add(s);
            System.err.println("failure " + System.currentTimeMillis() + " " + s);
        }
    }

    private int run(String[] args) throws Exception {
        String bootstrap = null, topic = null, txnId = null;
        Pattern keyRe = null;
        long commitLines = 10000, commitMs = 1000, shutdownMs = 120000;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (a) {
                case "--bootstrap": bootstrap = need(a, v); i++; break;
                case "--topic": topic = need(a, v); i++; break;
                case "--key-regex": keyRe = Pattern.compile(need(a, v)); i++; break;
                case "--transactional-id": txnId = need(a, v); i++; break;
                case "--commit-lines": commitLines = Long.parseLong(need(a, v)); i++; break;
                case "--commit-ms": commitMs = Long.parseLong(need(a, v)); i++; break;
                case "--shutdown-timeout-ms": shutdownMs = Long.parseLong(need(a, v)); i++; break;
                case "--slow-send-ms": slowSendMs = Long.parseLong(need(a, v)); i++; break;
                case "-X": {
                    String kv = need(a, v);
                    i++;
                    int eq = kv.indexOf('=');
                    if (eq <= 0) throw new IllegalArgumentException("-X wants KEY=VALUE, got " + kv);
                    props.put(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        if (bootstrap == null || topic == null) throw new IllegalArgumentException("--bootstrap and --topic are required");
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");
        props.putIfAbsent(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "kafkatrail-control");
        if (txnId != null) props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        long t0 = System.currentTimeMillis();
        // ISO-8859-1 maps bytes to chars one to one: the value is the line's bytes as they are.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.ISO_8859_1), 1 << 16);
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props);
        boolean ok;
        try {
            ok = txnId == null ? plain(p, in, topic, keyRe) : transactional(p, in, topic, keyRe, commitLines, commitMs);
        } finally {
            p.close(Duration.ofMillis(shutdownMs));
        }
        long elapsed = System.currentTimeMillis() - t0;
        long a = txnId == null ? acked.get() : committedLines;
        ok = ok && a == sent && (txnId != null || failed.get() == 0);
        System.out.println(summary(a, elapsed, txnId != null));
        return ok ? 0 : 1;
    }

    private static String need(String flag, String v) {
        if (v == null) throw new IllegalArgumentException(flag + " needs a value");
        return v;
    }

    private ProducerRecord<byte[], byte[]> record(String topic, Pattern keyRe, String line) {
        byte[] value = line.getBytes(StandardCharsets.ISO_8859_1);
        byte[] key = null;
        if (keyRe != null) {
            Matcher m = keyRe.matcher(line);
            if (m.find() && m.groupCount() >= 1 && m.group(1) != null) key = m.group(1).getBytes(StandardCharsets.ISO_8859_1);
        }
        return new ProducerRecord<>(topic, key, value);
    }

    private Future<RecordMetadata> timedSend(KafkaProducer<byte[], byte[]> p, ProducerRecord<byte[], byte[]> r, Callback cb) {
        long s = System.nanoTime();
        try {
            return p.send(r, cb);
        } finally {
            long us = (System.nanoTime() - s) / 1000;
            sendHist[64 - Long.numberOfLeadingZeros(Math.max(us, 1))]++;
            sendMaxMicros = Math.max(sendMaxMicros, us);
            if (sendCalls++ > 0) sendMaxLaterMicros = Math.max(sendMaxLaterMicros, us);
            if (us >= slowSendMs * 1000) {
                slowSends++;
                System.err.println("slow-send " + System.currentTimeMillis() + " " + us / 1000);
            }
        }
    }

    private boolean plain(KafkaProducer<byte[], byte[]> p, BufferedReader in, String topic, Pattern keyRe) throws Exception {
        Callback cb = new Counted();
        String line;
        while ((line = in.readLine()) != null) {
            sent++;
            try {
                timedSend(p, record(topic, keyRe, line), cb);
            } catch (KafkaException e) { // send() throws only what did not reach the callback
                failure(e);
            }
        }
        p.flush();
        return true;
    }

    // transactional sends the lines in transactions; the open transaction's lines are kept and
    // sent again after an abort.
    private boolean transactional(KafkaProducer<byte[], byte[]> p, BufferedReader in, String topic, Pattern keyRe,
                                  long commitLines, long commitMs) throws Exception {
        initWithRetry(p);
        List<String> open = new ArrayList<>();
        p.beginTransaction();
        long openedAt = System.currentTimeMillis();
        // Reading runs on its own thread so that a commit is due by time even when no line comes.
        java.util.concurrent.BlockingQueue<String> q = new java.util.concurrent.LinkedBlockingQueue<>(10000);
        final String eof = new String("\u0000eof");
        Thread reader = new Thread(() -> {
            try {
                String l;
                while ((l = in.readLine()) != null) q.put(l);
            } catch (Exception e) {
                System.err.println("control: reading stdin: " + e);
            } finally {
                try { q.put(eof); } catch (InterruptedException ignored) { }
            }
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
        Callback cb = new Counted();
        boolean done = false;
        while (!done) {
            long wait = Math.max(1, openedAt + commitMs - System.currentTimeMillis());
            String line = q.poll(wait, java.util.concurrent.TimeUnit.MILLISECONDS);
            if (line == eof) {
                done = true;
            } else if (line != null) {
                sent++;
                open.add(line);
                try {
                    timedSend(p, record(topic, keyRe, line), cb);
                } catch (KafkaException e) {
                    failure(e);
                }
            }
            if (done || open.size() >= commitLines || System.currentTimeMillis() - openedAt >= commitMs) {
                if (!open.isEmpty()) commitOrRedo(p, topic, keyRe, open, cb);
                open.clear();
                if (!done) {
                    p.beginTransaction();
                    openedAt = System.currentTimeMillis();
                }
            }
        }
        return true;
    }

    private static void initWithRetry(KafkaProducer<byte[], byte[]> p) {
        for (int attempt = 1; ; attempt++) {
            try {
                p.initTransactions();
                return;
            } catch (TimeoutException e) {
                // initTransactions may be called again after a timeout.
                System.err.println("control: initTransactions timed out (attempt " + attempt + "): " + e.getMessage());
                if (attempt >= 10) throw e;
            }
        }
    }

    // commitOrRedo commits the open transaction; on an abortable error it aborts and sends the
    // same lines in a new transaction, until one commits. Fatal errors end the run.
    private void commitOrRedo(KafkaProducer<byte[], byte[]> p, String topic, Pattern keyRe, List<String> lines, Callback cb) {
        for (int attempt = 1; ; attempt++) {
            try {
                commitWithRetry(p);
                commits++;
                committedLines += lines.size();
                System.err.println("commit " + System.currentTimeMillis() + " " + lines.size());
                return;
            } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                throw e;
            } catch (KafkaException e) {
                System.err.println("abort " + System.currentTimeMillis() + " " + e.getClass().getName() + ": " + e.getMessage());
                abortWithRetry(p);
                aborts++;
                if (attempt >= 50) throw e;
                p.beginTransaction();
                for (String l : lines) {
                    try {
                        timedSend(p, record(topic, keyRe, l), cb);
                    } catch (KafkaException se) {
                        failure(se);
                    }
                }
            }
        }
    }

    private static void commitWithRetry(KafkaProducer<byte[], byte[]> p) {
        for (int attempt = 1; ; attempt++) {
            try {
                p.commitTransaction();
                return;
            } catch (TimeoutException e) {
                // commitTransaction may be called again after a timeout; it resumes the commit.
                System.err.println("control: commitTransaction timed out (attempt " + attempt + ")");
                if (attempt >= 20) throw e;
            }
        }
    }

    private static void abortWithRetry(KafkaProducer<byte[], byte[]> p) {
        for (int attempt = 1; ; attempt++) {
            try {
                p.abortTransaction();
                return;
            } catch (TimeoutException e) {
                System.err.println("control: abortTransaction timed out (attempt " + attempt + ")");
                if (attempt >= 20) throw e;
            }
        }
    }

    private long sendP99Micros() {
        long total = 0;
        for (long c : sendHist) total += c;
        if (total == 0) return 0;
        long want = (long) Math.ceil(total * 0.99), seen = 0;
        for (int b = 0; b < sendHist.length; b++) {
            seen += sendHist[b];
            if (seen >= want) return 1L << Math.max(0, b); // the bucket's upper bound
        }
        return sendMaxMicros;
    }

    private String summary(long ackedOrCommitted, long elapsedMs, boolean txn) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("sent", sent);
        m.put("acked", acked.get());
        m.put("failed", failed.get());
        m.put("delivered", ackedOrCommitted);
        m.put("elapsed_ms", elapsedMs);
        m.put("send_max_ms", sendMaxMicros / 1000.0);
        m.put("send_max_later_ms", sendMaxLaterMicros / 1000.0);
        m.put("send_p99_ms", sendP99Micros() / 1000.0);
        m.put("slow_sends", slowSends);
        if (txn) {
            m.put("commits", commits);
            m.put("aborts", aborts);
        }
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (b.length() > 1) b.append(',');
            b.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        b.append(",\"errors\":{");
        boolean first = true;
        for (Map.Entry<String, AtomicLong> e : errorsByClass.entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append(json(e.getKey())).append(':').append(e.getValue().get());
        }
        b.append("},\"first_errors\":[");
        synchronized (firstErrors) {
            for (int i = 0; i < firstErrors.size(); i++) {
                if (i > 0) b.append(',');
                b.append(json(firstErrors.get(i)));
            }
        }
        return b.append("]}").toString();
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : (s == null ? "null" : s).toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
