#!/usr/bin/env bash
# Jaeger v2 (all-in-one, in-memory storage) on 127.0.0.1, for local runs and the
# end-to-end tests. The binary is built once from tools/go.mod (scripts/tools.sh).
#
#   jaeger.sh start    start with configs/jaeger.yaml, wait until GET /api/services answers 200
#                      (exits 75 if the state dir or a port is in use)
#   jaeger.sh stop     TERM it by its PID (KILL after 10 s)
#   jaeger.sh status   exit 0 if running, 3 if not
#   jaeger.sh env      print `export JAEGER_...=...` lines: eval "$(jaeger.sh env)"
#
# Environment (each port is on JAEGER_LISTEN_HOST, default 127.0.0.1):
#   JAEGER_QUERY_PORT (16686, HTTP API), JAEGER_QUERY_GRPC_PORT (16685),
#   JAEGER_OTLP_GRPC_PORT (4317), JAEGER_OTLP_HTTP_PORT (4318),
#   JAEGER_STATE (state dir, default /tmp/kafkatrail-jaeger-$JAEGER_QUERY_PORT: pid, log, config),
#   JAEGER_START_TIMEOUT (seconds, default 60), KAFKATRAIL_CACHE (binary cache, see tools.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NAME=jaeger
HOST=127.0.0.1
export JAEGER_LISTEN_HOST=$HOST
export JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT:-16686}
export JAEGER_QUERY_GRPC_PORT=${JAEGER_QUERY_GRPC_PORT:-16685}
export JAEGER_OTLP_GRPC_PORT=${JAEGER_OTLP_GRPC_PORT:-4317}
export JAEGER_OTLP_HTTP_PORT=${JAEGER_OTLP_HTTP_PORT:-4318}
PORTS=("$JAEGER_QUERY_PORT" "$JAEGER_QUERY_GRPC_PORT" "$JAEGER_OTLP_GRPC_PORT" "$JAEGER_OTLP_HTTP_PORT")
STATE=${JAEGER_STATE:-/tmp/kafkatrail-jaeger-$JAEGER_QUERY_PORT}
PIDFILE=$STATE/jaeger.pid
LOG=$STATE/jaeger.log
READY_PATH=/api/services
START_DEADLINE=${JAEGER_START_TIMEOUT:-60}
STOP_DEADLINE=10

# shellcheck source=lib/daemon.sh
. "$HERE/lib/daemon.sh"

cmd_start() {
  BINARY=$("$HERE/tools.sh" path jaeger)
  mkdir -p "$STATE"
  # The config is copied into the state dir, so the process's command line names STATE
  # (stop and status recognise the process behind the PID file by it).
  cp "$ROOT/configs/jaeger.yaml" "$STATE/jaeger.yaml"
  # configs/jaeger.yaml already binds every endpoint to JAEGER_LISTEN_HOST; the --set flags
  # repeat the four endpoints so that they stay on loopback whatever the file says.
  daemon_start --config "$STATE/jaeger.yaml" \
    --set "extensions.jaeger_query.http.endpoint=$HOST:$JAEGER_QUERY_PORT" \
    --set "extensions.jaeger_query.grpc.endpoint=$HOST:$JAEGER_QUERY_GRPC_PORT" \
    --set "receivers.otlp.protocols.grpc.endpoint=$HOST:$JAEGER_OTLP_GRPC_PORT" \
    --set "receivers.otlp.protocols.http.endpoint=$HOST:$JAEGER_OTLP_HTTP_PORT"
}

cmd_env() {
  printf 'export %s=%q\n' \
    JAEGER_QUERY_URL "http://$HOST:$JAEGER_QUERY_PORT" \
    JAEGER_OTLP_GRPC_ENDPOINT "http://$HOST:$JAEGER_OTLP_GRPC_PORT" \
    JAEGER_OTLP_HTTP_ENDPOINT "http://$HOST:$JAEGER_OTLP_HTTP_PORT" \
    JAEGER_LOG "$LOG" \
    JAEGER_BIN "$("$HERE/tools.sh" path jaeger)"
}

case ${1:-} in
  start) cmd_start ;;
  stop) BINARY=jaeger; daemon_stop ;;
  status) BINARY=jaeger; daemon_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
