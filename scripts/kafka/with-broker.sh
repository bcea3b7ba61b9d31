#!/usr/bin/env bash
# Runs a command with the real test broker up and its environment exported
# (see `broker.sh env`), then ALWAYS stops the broker, also on failure or
# Ctrl-C. Exits with the command's status; on failure prints the broker log tail.
# The broker's own settings come from the environment (see broker.sh).
#
#   scripts/kafka/with-broker.sh go test ./...
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKER=$HERE/broker.sh
# shellcheck source=scripts/lib/child.sh
. "$HERE/../lib/child.sh"
[[ $# -ge 1 ]] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

# Several `make test` runs may share a machine. Unless KAFKA_PORT or
# KAFKATRAIL_STATE is set, a busy default broker (exit 75 from `broker.sh
# start`: state dir or port in use) moves this run to the next free base port
# 19092, 19102, ... with its own state dir /tmp/kafkatrail-kafka-PORT. 19192 is left out:
# it is `make test-kafka39`'s Kafka 3.9.1 broker (Makefile, KAFKA39_PORT).
if [[ -n ${KAFKA_PORT:-} || -n ${KAFKATRAIL_STATE:-} ]]; then
  bases=("${KAFKA_PORT:-9092}")
  auto=0
else
  bases=(9092 $(seq 19092 10 19282 | grep -vx 19192))
  auto=1
fi
t0=$SECONDS
started=0
for base in "${bases[@]}"; do
  if ((auto)); then
    export KAFKA_PORT=$base
    if ((base == 9092)); then
      export KAFKATRAIL_STATE=/tmp/kafkatrail-kafka
    else
      export KAFKATRAIL_STATE=/tmp/kafkatrail-kafka-$base
    fi
  fi
  "$BROKER" start
  rc=$?
  if ((rc == 0)); then
    started=1
    break
  fi
  ((rc == 75 && auto)) || exit "$rc"
  echo "with-broker.sh: base port $base busy, trying the next one" >&2
done
((started)) || { echo "with-broker.sh: no free base port among ${bases[*]}" >&2; exit 1; }
stopped=0
stop() {
  ((stopped)) && return
  stopped=1
  "$BROKER" stop || true
}
trap 'stop' EXIT
echo "with-broker.sh: broker ready after $((SECONDS - t0))s" >&2

eval "$("$BROKER" env)"
# The receiver plugin was this broker's (read by start only): brokers the command starts for
# itself (outage and reliability tests) stay default ones.
unset KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN
run_child "$@"
if ((rc != 0)); then
  echo "with-broker.sh: command failed (exit $rc); broker log tail ($KAFKA_BROKER_LOG):" >&2
  tail -n 40 "$KAFKA_BROKER_LOG" >&2 || true
fi
stop
exit "$rc"
