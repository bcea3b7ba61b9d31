#!/usr/bin/env bash
# make demo: a real Kafka broker, Jaeger, Prometheus and the agent tailing a generated,
# rotating sample log, everything on 127.0.0.1. Prints where to look, runs until Ctrl-C, then
# stops every process it started, by PID.
#
# The first run installs and builds what it needs: the Kafka jars (about a minute), Jaeger and
# Prometheus from Go modules (about 15 minutes on 2 cores). Later runs start in about 20 s.
#
#   DEMO_SECONDS=N   stop by itself after N seconds, after checking that Jaeger holds a trace
#                    with all six stages (exit 1 if not): the unattended form, for tests.
#   DEMO_HTTP_PORT   the agent's own page (default 8686).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
t0=$SECONDS
step() { printf '\n\033[1m[%s] %s\033[0m (%ds)\n' "$1" "$2" $((SECONDS - t0)) >&2; }

step 1/4 "dependencies: kcat, Java, Maven, the Kafka 4.4.0 jars"
scripts/deps.sh
step 2/4 "Jaeger and Prometheus (built once from Go modules; the first time takes about 15 minutes)"
scripts/tools.sh build jaeger prometheus
step 3/4 "building the agent"
export DEMO_DIR=${DEMO_DIR:-/tmp/kafkatrail-demo}
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
go build -o "$DEMO_DIR/agent" ./cmd/agent
step 4/4 "starting Kafka, Jaeger, Prometheus and the agent"
export DEMO_START=$(( $(date +%s) - (SECONDS - t0) ))
exec scripts/kafka/with-broker.sh scripts/with-observability.sh scripts/demo-run.sh
