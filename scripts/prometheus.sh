#!/usr/bin/env bash
# Prometheus 3.x with its OTLP receiver on 127.0.0.1, for local runs and the end-to-end
# tests. The binary is built once from tools/go.mod (scripts/tools.sh).
#
#   prometheus.sh start    fresh storage, start with configs/prometheus.yml, wait until
#                          GET /-/ready answers 200 (exits 75 if the state dir or port is in use)
#   prometheus.sh stop     TERM it by its PID (KILL after 20 s)
#   prometheus.sh status   exit 0 if running, 3 if not
#   prometheus.sh env      print `export PROMETHEUS_...=...` lines: eval "$(prometheus.sh env)"
#
# OTLP metrics over HTTP (protobuf) go to http://127.0.0.1:PORT/api/v1/otlp/v1/metrics:
#   OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/protobuf
#   OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=http://127.0.0.1:9090/api/v1/otlp/v1/metrics
# Exemplars are stored (--enable-feature=exemplar-storage).
#
# Environment: PROMETHEUS_PORT (9090), PROMETHEUS_STATE (default
# /tmp/kafkatrail-prometheus-$PROMETHEUS_PORT: pid, log, TSDB, wiped at start),
# PROMETHEUS_CONFIG (default configs/prometheus.yml), PROMETHEUS_START_TIMEOUT (seconds,
# default 60), KAFKATRAIL_CACHE (binary cache, see tools.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NAME=prometheus
HOST=127.0.0.1
PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
PORTS=("$PROMETHEUS_PORT")
STATE=${PROMETHEUS_STATE:-/tmp/kafkatrail-prometheus-$PROMETHEUS_PORT}
CONFIG=${PROMETHEUS_CONFIG:-$ROOT/configs/prometheus.yml}
PIDFILE=$STATE/prometheus.pid
LOG=$STATE/prometheus.log
READY_PATH=/-/ready
START_DEADLINE=${PROMETHEUS_START_TIMEOUT:-60}
STOP_DEADLINE=20

# shellcheck source=lib/daemon.sh
. "$HERE/lib/daemon.sh"

cmd_start() {
  BINARY=$("$HERE/tools.sh" path prometheus)
  [[ -f $CONFIG ]] || die "no config at $CONFIG"
  mkdir -p "$STATE"
  if running_pid >/dev/null; then
    log "already running (pid $(cat "$PIDFILE")); stop it with '$0 stop'"
    exit 75
  fi
  rm -rf "$STATE/data"
  cp "$CONFIG" "$STATE/prometheus.yml"
  daemon_start \
    --config.file="$STATE/prometheus.yml" \
    --storage.tsdb.path="$STATE/data" \
    --storage.tsdb.retention.time=1d \
    --web.listen-address="$HOST:$PROMETHEUS_PORT" \
    --web.enable-otlp-receiver \
    --enable-feature=exemplar-storage \
    --log.level=info
}

cmd_env() {
  printf 'export %s=%q\n' \
    PROMETHEUS_URL "http://$HOST:$PROMETHEUS_PORT" \
    PROMETHEUS_OTLP_METRICS_ENDPOINT "http://$HOST:$PROMETHEUS_PORT/api/v1/otlp/v1/metrics" \
    PROMETHEUS_LOG "$LOG"
}

case ${1:-} in
  start) cmd_start ;;
  stop) daemon_stop ;;
  status) daemon_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
