#!/usr/bin/env bash
# The inside of `make demo` (scripts/demo.sh), run with Kafka up and its environment exported:
# a sample log generator and the agent with its page, at once; Jaeger and Prometheus in the
# background (scripts/demo-observability.sh) on ports chosen here, which the agent exports to
# from its start. Ctrl-C stops everything it started, by PID (the outer script then stops Kafka).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${DEMO_DIR:?run through scripts/demo.sh}" "${KAFKA_BOOTSTRAP:?}"
HTTP_PORT=${DEMO_HTTP_PORT:-8686}
LOG=$DEMO_DIR/app.log
DEMO_START=${DEMO_START:-$(date +%s)}
export DEMO_START
pids=()
obs=
cleanup() {
  local p
  if [[ -n $obs ]]; then
    kill -TERM -- "-$obs" 2>/dev/null || true # its session: a build in progress too
    wait "$obs" 2>/dev/null || true
    obs=
  fi
  "$ROOT/scripts/jaeger.sh" stop >/dev/null 2>&1 || true
  "$ROOT/scripts/prometheus.sh" stop >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

# Ports for Jaeger and Prometheus, chosen now (they start later): the defaults, or all of them
# moved by 20000, 20100, ... when one is taken, as scripts/with-observability.sh does.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [[ -z ${JAEGER_QUERY_PORT:-} && -z ${PROMETHEUS_PORT:-} ]]; then
  for off in 0 20000 20100 20200 20300 20400; do
    all=1
    for p in 16686 16685 4317 4318 9090; do port_free $((p + off)) || all=0; done
    if ((all)); then
      export JAEGER_QUERY_PORT=$((16686 + off)) JAEGER_QUERY_GRPC_PORT=$((16685 + off))
      export JAEGER_OTLP_GRPC_PORT=$((4317 + off)) JAEGER_OTLP_HTTP_PORT=$((4318 + off))
      export PROMETHEUS_PORT=$((9090 + off))
      break
    fi
  done
fi
export JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT:-16686} PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
export JAEGER_OTLP_GRPC_PORT=${JAEGER_OTLP_GRPC_PORT:-4317}
export JAEGER_STATE=$DEMO_DIR/jaeger PROMETHEUS_STATE=$DEMO_DIR/prometheus
export JAEGER_QUERY_URL=http://127.0.0.1:$JAEGER_QUERY_PORT PROMETHEUS_URL=http://127.0.0.1:$PROMETHEUS_PORT
JAEGER_OTLP_GRPC_ENDPOINT=http://127.0.0.1:$JAEGER_OTLP_GRPC_PORT
PROMETHEUS_OTLP_METRICS_ENDPOINT=$PROMETHEUS_URL/api/v1/otlp/v1/metrics

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
OTEL_BSP_SCHEDULE_DELAY=1000 \
  "$DEMO_DIR/agent" --brokers "$KAFKA_BOOTSTRAP" --topic demo-logs --tail "$LOG" \
  --state-dir "$DEMO_DIR/state" --start-at beginning --key-field user_id \
  --trace-sample-ratio 0.05 --http "127.0.0.1:$HTTP_PORT" --log-format text \
  >"$DEMO_DIR/agent.log" 2>&1 &
agent=$!
pids+=($agent)

setsid "$ROOT/scripts/demo-observability.sh" &
obs=$!

# The page is up once /readyz answers (the agent has its first metadata).
for _ in $(seq 150); do
  curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_PORT/readyz" 2>/dev/null && break
  kill -0 "$agent" 2>/dev/null || { echo "demo: the agent exited; its log:" >&2; tail -n 30 "$DEMO_DIR/agent.log" >&2; exit 1; }
  sleep 0.2
done

cat >&2 <<MSG

kafkatrail demo is running (ready after $(( $(date +%s) - DEMO_START ))s). Everything listens on 127.0.0.1.
  Open the agent's page:     http://127.0.0.1:$HTTP_PORT/   (throughput, lag per file, line age, in-flight, recent records: read and the six stages)
  Watch the topic:           kcat -C -b $KAFKA_BOOTSTRAP -t demo-logs -o end -f '%k %h %s\\n'
  Ship your own log:         $DEMO_DIR/agent --brokers $KAFKA_BOOTSTRAP --topic my-logs --tail /path/to/app.log
  Jaeger, Prometheus:        $JAEGER_QUERY_URL/ and $PROMETHEUS_URL/ once the lines below say they are up
                             (the first run builds them: about 15 minutes; JAEGER_BIN / PROMETHEUS_BIN to use your own)
  Grafana dashboards:        dashboards/*.json (provisioning in dashboards/provisioning/)
  Logs:                      $DEMO_DIR/agent.log, the sample log $LOG (rotated every 20,000 lines)
Press Ctrl-C to stop everything.
MSG

# has_six_stages reads a trace list on stdin (the page's /api/traces or Jaeger's /api/traces)
# and succeeds if one trace has the read stage and all six stages.
has_six_stages() {
  python3 -c '
import json, sys
want = {"read", "append", "drain", "doSend", "completedSend", "completedReceive", "callback"}
body = json.load(sys.stdin)
for t in body.get("traces") or body.get("data") or []:
    names = {s["name"] for s in t.get("stages", [])} | {s["operationName"] for s in t.get("spans", [])}
    if want <= names:
        sys.exit(0)
sys.exit(1)'
}

if [[ -n ${DEMO_SECONDS:-} ]]; then
  deadline=$((SECONDS + DEMO_SECONDS))
  page=0 jaeger=0
  [[ ${DEMO_CHECK:-all} == page ]] && jaeger=1 # the page only: Jaeger's build is not waited for
  while ((SECONDS < deadline && !(page && jaeger))); do
    if ((!page)) && curl -fsS "http://127.0.0.1:$HTTP_PORT/api/traces?limit=50" 2>/dev/null | has_six_stages; then
      page=1
      echo "demo check: the page shows a trace with all six stages, $(( $(date +%s) - DEMO_START ))s after make demo started" >&2
    fi
    if ((!jaeger)) && [[ -e $DEMO_DIR/jaeger.up ]] &&
      curl -fsS "$JAEGER_QUERY_URL/api/traces?service=kafkatrail-agent&limit=50&operation=send%20demo-logs" 2>/dev/null | has_six_stages; then
      jaeger=1
      echo "demo check: Jaeger holds a trace with all six stages, $(( $(date +%s) - DEMO_START ))s after make demo started" >&2
    fi
    sleep 1
  done
  if ((page && jaeger)); then exit 0; fi
  ((page)) || echo "demo check: no trace with all six stages on the page after ${DEMO_SECONDS}s" >&2
  ((jaeger)) || echo "demo check: no trace with all six stages in Jaeger after ${DEMO_SECONDS}s" >&2
  echo "agent log:" >&2
  tail -n 30 "$DEMO_DIR/agent.log" >&2
  exit 1
fi
wait "$agent"
