#!/usr/bin/env bash
# make demo: a real Kafka broker and the agent tailing a generated, rotating sample log, with
# the agent's own page; Jaeger and Prometheus join when they are ready. Everything on
# 127.0.0.1. Prints where to look, runs until Ctrl-C, then stops every process it started, by
# PID.
#
# Kafka and the agent start first: the page shows traced records within a minute or two on a
# fresh machine (the Kafka jars are fetched once). Jaeger and Prometheus are built from Go
# modules in the background the first time (about 15 minutes on 2 cores; later runs take a
# second), or taken from JAEGER_BIN / PROMETHEUS_BIN or PATH (Jaeger v2, Prometheus 3.x); the
# agent's OTLP export reaches them from the moment they are up. Nothing is lost from Kafka
# meanwhile: only spans and metrics exported before then are dropped.
#
#   DEMO_SECONDS=N   the unattended form, for tests: exit 0 once the page holds a trace with all
#                    six stages and Jaeger does too (within N seconds), exit 1 if not.
#   DEMO_CHECK=page  with DEMO_SECONDS: wait for the page's trace only, not for Jaeger's.
#   DEMO_HTTP_PORT   the agent's own page (default 8686).
#   DEMO_DIR         scratch directory (default /tmp/kafkatrail-demo).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
t0=$SECONDS
export DEMO_START=${DEMO_START:-$(date +%s)}
step() { printf '\n\033[1m[%s] %s\033[0m (%ds)\n' "$1" "$2" $((SECONDS - t0)) >&2; }

export DEMO_DIR=${DEMO_DIR:-/tmp/kafkatrail-demo}
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
# Side by side: the jars' download waits on the network, the build on the CPU.
step 1/2 "dependencies (kcat, Java, Maven, the Kafka 4.4.0 jars) and the agent's build"
go build -o "$DEMO_DIR/agent" ./cmd/agent >"$DEMO_DIR/build.log" 2>&1 &
build=$!
scripts/deps.sh --demo
if ! wait "$build"; then
  cat "$DEMO_DIR/build.log" >&2
  echo "demo: building the agent failed" >&2
  exit 1
fi
step 2/2 "starting Kafka and the agent (Jaeger and Prometheus join when ready)"
exec scripts/kafka/with-broker.sh scripts/demo-run.sh
