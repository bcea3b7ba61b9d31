#!/usr/bin/env bash
# Runs a command with Jaeger and Prometheus up (scripts/jaeger.sh, scripts/prometheus.sh) and
# their environment exported (JAEGER_QUERY_URL, JAEGER_OTLP_GRPC_ENDPOINT,
# JAEGER_OTLP_HTTP_ENDPOINT, PROMETHEUS_URL, PROMETHEUS_OTLP_METRICS_ENDPOINT), then ALWAYS
# stops both, also on failure or Ctrl-C. Exits with the command's status; on failure prints
# the tail of both logs. Builds the binaries first if they are not cached (scripts/tools.sh:
# about 25 minutes for both on a busy 2-core machine the first time, under a second later).
#
#   scripts/with-observability.sh go test ./e2e/
#
# Unless JAEGER_QUERY_PORT or PROMETHEUS_PORT is set, a run that finds the default ports
# busy (another run on the machine) moves all of them by 20000, 20100, ... (Jaeger's HTTP API
# 16686 -> 36686, OTLP/gRPC 4317 -> 24317, Prometheus 9090 -> 29090).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/child.sh
. "$HERE/lib/child.sh"
[[ $# -ge 1 ]] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

"$HERE/tools.sh" build jaeger prometheus || exit 1

if [[ -n ${JAEGER_QUERY_PORT:-} || -n ${PROMETHEUS_PORT:-} ]]; then
  offsets=(0)
  auto=0
else
  offsets=(0 20000 20100 20200 20300 20400)
  auto=1
fi

started=()
stopped=0
stop() {
  ((stopped)) && return
  stopped=1
  local s
  for s in "${started[@]}"; do "$HERE/$s.sh" stop || true; done
}
trap stop EXIT

t0=$SECONDS
ok=0
for off in "${offsets[@]}"; do
  if ((auto)); then
    export JAEGER_QUERY_PORT=$((16686 + off)) JAEGER_QUERY_GRPC_PORT=$((16685 + off))
    export JAEGER_OTLP_GRPC_PORT=$((4317 + off)) JAEGER_OTLP_HTTP_PORT=$((4318 + off))
    export PROMETHEUS_PORT=$((9090 + off))
  fi
  "$HERE/jaeger.sh" start
  rc=$?
  if ((rc == 0)); then
    started+=(jaeger)
    "$HERE/prometheus.sh" start
    rc=$?
    if ((rc == 0)); then
      started+=(prometheus)
      ok=1
      break
    fi
    "$HERE/jaeger.sh" stop || true
    started=()
  fi
  ((rc == 75 && auto)) || exit "$rc"
  echo "with-observability.sh: ports at offset $off busy, trying the next ones" >&2
done
((ok)) || { echo "with-observability.sh: no free ports among offsets ${offsets[*]}" >&2; exit 1; }
echo "with-observability.sh: Jaeger and Prometheus ready after $((SECONDS - t0))s" >&2

eval "$("$HERE/jaeger.sh" env)"
eval "$("$HERE/prometheus.sh" env)"

run_child "$@"
if ((rc != 0)); then
  echo "with-observability.sh: command failed (exit $rc); Jaeger log tail ($JAEGER_LOG):" >&2
  tail -n 20 "$JAEGER_LOG" >&2 || true
  echo "with-observability.sh: Prometheus log tail ($PROMETHEUS_LOG):" >&2
  tail -n 20 "$PROMETHEUS_LOG" >&2 || true
fi
stop
exit "$rc"
