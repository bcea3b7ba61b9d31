#!/usr/bin/env bash
# The inside of `make demo` (scripts/demo.sh), run with Kafka, Jaeger and Prometheus up and
# their environment exported: a sample log generator and the agent, stopped by PID on Ctrl-C
# (the outer scripts then stop the servers).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${DEMO_DIR:?run through scripts/demo.sh}" "${KAFKA_BOOTSTRAP:?}" "${JAEGER_QUERY_URL:?}"
HTTP_PORT=${DEMO_HTTP_PORT:-8686}
LOG=$DEMO_DIR/app.log
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

# A sample application: JSON lines, some carrying a W3C trace context, about 200 a second,
# rotated by rename every 20,000 lines (the agent finishes the old file, then the new one).
generate() {
  local i=0 n=0
  while :; do
    for _ in $(seq 50); do
      i=$((i + 1))
      if ((i % 10 == 0)); then
        printf '{"level":"info","msg":"order placed","order":%d,"user_id":"u%d","traceparent":"00-%032x-%016x-01"}\n' \
          "$i" $((i % 97)) $((RANDOM * 65536 + i)) $((RANDOM + 1))
      else
        printf '{"level":"info","msg":"request served","request":%d,"user_id":"u%d","ms":%d}\n' "$i" $((i % 97)) $((RANDOM % 300))
      fi
    done >>"$LOG"
    n=$((n + 50))
    if ((n >= 20000)); then
      mv "$LOG" "$LOG.$(date +%s)"
      n=0
    fi
    sleep 0.25
  done
}
generate &
pids+=($!)

OTEL_SERVICE_NAME=kafkatrail-agent \
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=$JAEGER_OTLP_GRPC_ENDPOINT \
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc \
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=$PROMETHEUS_OTLP_METRICS_ENDPOINT \
OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/protobuf \
OTEL_METRIC_EXPORT_INTERVAL=5000 \
  "$DEMO_DIR/agent" --brokers "$KAFKA_BOOTSTRAP" --topic demo-logs --tail "$LOG" \
  --state-dir "$DEMO_DIR/state" --start-at beginning --key-field user_id \
  --trace-sample-ratio 0.05 --http "127.0.0.1:$HTTP_PORT" --log-format text \
  >"$DEMO_DIR/agent.log" 2>&1 &
agent=$!
pids+=($agent)

cat >&2 <<MSG

kafkatrail demo is running (ready after $(( $(date +%s) - ${DEMO_START:-$(date +%s)} ))s). Everything listens on 127.0.0.1:
  the agent's own page   http://127.0.0.1:$HTTP_PORT/   (throughput, lag per file, in-flight, recent traces)
  Jaeger (traces API)    $JAEGER_QUERY_URL/api/traces?service=kafkatrail-agent&limit=5
  Prometheus (API)       $PROMETHEUS_URL/api/v1/query?query=kafkatrail_agent_lines_read_total
  Kafka                  kcat -C -b $KAFKA_BOOTSTRAP -t demo-logs -o end -f '%k %h %s\\n'
  sample log             $LOG (rotated every 20,000 lines)
  agent log              $DEMO_DIR/agent.log
Dashboards for Grafana: dashboards/*.json (provisioning in dashboards/provisioning/).
Press Ctrl-C to stop everything.
MSG

if [[ -n ${DEMO_SECONDS:-} ]]; then
  deadline=$((SECONDS + DEMO_SECONDS))
  found=0
  while ((SECONDS < deadline)); do
    if curl -fsS "$JAEGER_QUERY_URL/api/traces?service=kafkatrail-agent&limit=50&operation=send%20demo-logs" 2>/dev/null |
      python3 -c '
import json, sys
want = {"append", "drain", "doSend", "completedSend", "completedReceive", "callback"}
for t in json.load(sys.stdin).get("data") or []:
    names = {s["operationName"] for s in t["spans"]}
    if want <= names:
        print("trace", t["traceID"], "has", sorted(names & want))
        sys.exit(0)
sys.exit(1)'; then
      found=1
      break
    fi
    sleep 2
  done
  if ((found)); then echo "demo check: a trace with all six stages is in Jaeger" >&2; exit 0; fi
  echo "demo check: no trace with all six stages in Jaeger after ${DEMO_SECONDS}s; agent log:" >&2
  tail -n 30 "$DEMO_DIR/agent.log" >&2
  exit 1
fi
wait "$agent"
