# Shared by scripts/kafka/with-broker.sh and scripts/with-observability.sh (sourced, not run):
# run the wrapped command so that a Ctrl-C or TERM reaches all of it, and the caller's `stop`
# (which it defines) always runs.

# run_child COMMAND...: runs COMMAND in its own process group (job control), so that signals can
# be forwarded to all of it (go test and the test binaries it runs) and `wait` returns as soon as
# a signal arrives. On INT/TERM: passes the signal to the group, waits for it, calls stop and
# exits 128+signal. Otherwise sets rc to the command's exit status.
run_child() {
  child=
  trap 'on_signal INT 130' INT
  trap 'on_signal TERM 143' TERM
  set -m
  "$@" &
  child=$!
  wait "$child"
  rc=$?
  set +m
}

on_signal() {
  trap - INT TERM
  if [[ -n $child ]]; then
    kill -"$1" -- "-$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  stop
  exit "$2"
}
