#!/usr/bin/env bash
# under-load.sh: runs a command with CPU hogs beside it, as a machine that is building or
# testing something else runs it (CI shares its cores with whatever ran before). The hogs are
# busy shell loops (nothing to install), one per core unless KAFKATRAIL_HOGS says how many,
# at the lowest priority unless KAFKATRAIL_HOG_NICE says otherwise (0: the same as the tests).
# They are stopped by PID when the command ends, however it ends; its exit status is returned.
#
#   scripts/under-load.sh make test
#   KAFKATRAIL_HOGS=4 scripts/under-load.sh go test -race ./filetail/
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 command [args...]" >&2; exit 2; }
hogs=${KAFKATRAIL_HOGS:-$(nproc)}
nice_level=${KAFKATRAIL_HOG_NICE:-0}
pids=()
stop_hogs() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
  ((${#pids[@]})) && wait "${pids[@]}" 2>/dev/null || true
}
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
  nice -n "$nice_level" bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "under-load: $hogs CPU hogs (nice $nice_level, pids ${pids[*]}) beside: $*" >&2
rc=0
"$@" || rc=$?
exit $rc
