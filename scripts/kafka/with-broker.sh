#!/usr/bin/env bash
# Runs a command with the real test broker up and its environment exported
# (see `broker.sh env`), then ALWAYS stops the broker, also on failure or
# Ctrl-C. Exits with the command's status; on failure prints the broker log tail.
#
#   scripts/kafka/with-broker.sh go test ./...
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKER=$HERE/broker.sh
[[ $# -ge 1 ]] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

t0=$SECONDS
"$BROKER" start || exit 1
stopped=0
stop() {
  ((stopped)) && return
  stopped=1
  "$BROKER" stop || true
}
child=
# On INT/TERM: pass the signal to the command's process group (go test and the
# test binaries it runs), wait for it, stop the broker, exit 128+signal.
on_signal() {
  trap - INT TERM
  if [[ -n $child ]]; then
    kill -"$1" -- "-$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  stop
  exit "$2"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'stop' EXIT
echo "with-broker.sh: broker ready after $((SECONDS - t0))s" >&2

eval "$("$BROKER" env)"
# Job control: the command runs in its own process group, so signals can be
# forwarded to all of it, and `wait` returns as soon as a signal arrives.
set -m
"$@" &
child=$!
wait "$child"
rc=$?
set +m
if ((rc != 0)); then
  echo "with-broker.sh: command failed (exit $rc); broker log tail ($KAFKA_BROKER_LOG):" >&2
  tail -n 40 "$KAFKA_BROKER_LOG" >&2 || true
fi
stop
exit "$rc"
