#!/usr/bin/env bash
# The reliability suite (reliability/, its own Go module): the agent binary through broker and
# agent crashes, network faults (toxiproxy in process, in front of a broker that advertises the
# proxy), rotation torture, injected broker errors (kfake), bad input and security; then each
# fuzz target for a bounded time. Prints a table of figures: lines sent, delivered, lost,
# duplicated, recovery time.
#
#   scripts/reliability.sh full   the sizes of docs/reliability.md, which it rewrites (make reliability)
#   scripts/reliability.sh ci     smaller sizes, a few seconds of fuzzing, prints the table only
#                                 (make reliability-ci; about 14 minutes on 2 cores, 10 of them
#                                 the cluster scenarios)
#
# The suite starts its own broker with scripts/kafka/broker.sh (a private state dir and free
# ports above 31000, all on 127.0.0.1) and stops it by its PID; it needs what scripts/deps.sh
# installs (Java and the Kafka jars). Exit status: that of the tests and the fuzzing.
#
# The cluster fault scenarios (reliability/cluster_faults_test.go, table "Cluster faults (three
# brokers)") run the agent beside a Java producer (reliability/javactl, compiled with javac at
# test time) on a three-node cluster that scripts/kafka/cluster.sh starts once (CLUSTER_SH
# overrides the script; base port 29192 and state /tmp/kafkatrail-cluster-suite, or
# RELIABILITY_CLUSTER_PORT and RELIABILITY_CLUSTER_STATE) and stops by its PIDs at the end: about
# 10 minutes in CI form. RELIABILITY_CLUSTER=off skips them.
#
#   RELIABILITY_CLUSTER_ROWS=lmn scripts/reliability.sh full
#                                 only the cluster scenarios of those letters, at full size, no
#                                 fuzzing: their rows replace the rows of the same letters in
#                                 docs/reliability.md's cluster table (the rest of the file stays)
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GO=${GO:-go}
mode=${1:-ci}
# Fuzzing is bounded by a number of executions, not a duration: with go1.26 a duration
# -fuzztime can end in a spurious "context deadline exceeded" failure with no failing input
# (golang/go#75804, fixed in go1.27). The counts take about 3 s each (CI) and a minute each (full)
# on 2 cores.
case $mode in
  full) scale=20; timeout=150m ;;
  ci) scale=1; timeout=30m ;;
  *) echo "usage: $0 full|ci" >&2; exit 2 ;;
esac

rows=${RELIABILITY_CLUSTER_ROWS:-}
if [[ -n $rows ]]; then
  [[ $mode == full && $rows =~ ^[a-z]+$ ]] || { echo "RELIABILITY_CLUSTER_ROWS: letters of cluster scenarios, with full" >&2; exit 2; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
report=$work/table.md
t0=$SECONDS
rc=0

echo "reliability ($mode): scenarios" >&2
run=()
[[ -z $rows ]] || run=(-run "^TestClusterFaults\$/^[$rows]")
(cd "$ROOT/reliability" && $GO vet ./... &&
  RELIABILITY_MODE=$mode RELIABILITY_REPORT=$report $GO test -count=1 -timeout "$timeout" "${run[@]}" ./...) || rc=$?
t_suite=$((SECONDS - t0))

if [[ -n $rows ]]; then
  doc=$ROOT/docs/reliability.md
  # The table's rows, the old ones of other letters and the new ones, in letter order (stable:
  # a scenario's rows keep theirs). A row's letter is the first character of its first cell.
  new=$work/rows.md
  grep -E "^\| [$rows][0-9]*\. " "$report" >"$new" || true
  if [[ ! -s $new ]] || ((rc != 0)); then
    echo "reliability: no rows for '$rows', or a scenario failed: docs/reliability.md left as it was" >&2
    exit $((rc == 0 ? 1 : rc))
  fi
  awk -v rows="$rows" -v new="$new" '
    function flush(   n, i, line, cmd) {
      fflush()
      while ((getline line < new) > 0) table[++nt] = line
      cmd = "sort -s -k1,1"
      for (i = 1; i <= nt; i++) print substr(table[i], 3, 1) "\t" table[i] | cmd
      close(cmd)
      done = 1
    }
    /^### Cluster faults/ { incluster = 1 }
    incluster && !done && /^\|---/ { print; intable = 1; next }
    intable && /^\| / {
      if (index(rows, substr($0, 3, 1)) == 0) table[++nt] = $0
      next
    }
    intable && !done { flush(); intable = 0 }
    { print }
    END { if (intable && !done) flush() }
  ' "$doc" | sed -E 's/^[a-z]\t//' >"$work/doc.md" && cp "$work/doc.md" "$doc"
  echo "merged the rows of scenarios [$rows] into $doc" >&2
  exit 0
fi

# Each fuzz target for a bounded time; a failure leaves its input in the package's testdata/fuzz.
fuzz=$work/fuzz.md
printf '| fuzz target | time | executions | result |\n|---|---:|---:|---|\n' >"$fuzz"
for target in network:FuzzReadFrame:30000 network:FuzzDecodeResponse:10000 consumer:FuzzDecodeBatches:10000 agent:FuzzLoad:200 agent:FuzzProducerConfigSet:5000 linerecord:FuzzAppendJSONString:20000 linerecord:FuzzEncode:10000 filetail:FuzzSplitter:20000 filetail:FuzzCRIDecode:20000 linerecord:FuzzTemplate:5000 linerecord:FuzzLineFields:10000; do
  IFS=: read -r pkg name count <<<"$target"
  count=$((count * scale))
  echo "reliability ($mode): fuzzing $name for $count executions" >&2
  f0=$SECONDS
  out=$(cd "$ROOT" && $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "${count}x" "./$pkg/" 2>&1)
  frc=$?
  fuzztime="$((SECONDS - f0)) s"
  execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -n 1 | cut -d' ' -f2)
  if ((frc == 0)); then
    result=PASS
  else
    result="**FAIL**: $(grep -m1 -E 'Failing input|panic|--- FAIL' <<<"$out" | tr '|' '/')"
    echo "$out" | tail -n 40 >&2
    rc=1
  fi
  printf '| `%s` (%s/) | %s | %s | %s |\n' "$name" "$pkg" "$fuzztime" "$(printf "%'d" "${execs:-0}" 2>/dev/null || echo "${execs:-0}")" "$result" >>"$fuzz"
done
t_all=$((SECONDS - t0))

[[ -s $report ]] || echo "| (no scenario ran: see the test output above) |" >"$report"
echo
echo "Reliability ($mode form) — $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; scenarios ${t_suite}s, all ${t_all}s"
echo
grep -v '^<!--' "$report"
echo
cat "$fuzz"
echo

if [[ $mode == full ]]; then
  doc=$ROOT/docs/reliability.md
  {
    cat <<'EOF'
# Reliability: figures

Generated by `make reliability` (scripts/reliability.sh full); do not edit by hand. `make
reliability-ci` runs the same scenarios with smaller sizes and a few seconds of fuzzing, and
prints the table without writing this file.

The suite (`reliability/`, its own Go module) runs the agent binary (built without `-race`) as a
user would. It starts its own Kafka 4.4.0 broker (scripts/kafka/broker.sh, private state dir and
ports) whose PLAINTEXT listener advertises the address of a toxiproxy proxy running in the test
process (`KAFKA_ADVERTISED_PORT`), so that the agent cannot bypass the proxy; the suite reads Kafka
back through the SASL listener, which the toxics do not touch. Lines are numbered, 100 bytes with
the newline, so a checkpoint offset says how many lines it covers.

- **sent**: lines written (or piped); **delivered**: distinct lines found in Kafka, byte for
  byte; **lost**: lines never found (for a run that fails on purpose, lines the agent neither
  delivered nor reported failed through its exit status); **duplicated**: extra copies.
- **recovery**: broker crash: from the broker being ready again to the topic's next new record
  (mean and max over the crashes); agent crash: from the restart to the next new record; network
  fault and rotation: from the end of the fault (or of writing) until every line written is in
  Kafka; kfake and security: time to the agent's exit.
- A row that says FAIL is a defect the suite found; its result column says what it saw.
- **Cluster faults (three brokers)** (after the scenarios): the agent and a Java producer (the
  control) through the same faults of a three-node cluster, side by side; its own definitions
  are above its table.

EOF
    echo "## Scenarios ($(date -u '+%Y-%m-%d'), $(nproc) cores, scenarios ${t_suite}s)"
    echo
    grep -v '^<!--' "$report"
    echo
    echo "## Fuzzing"
    echo
    echo "Frame reading and response decoding (network/fuzz_test.go), record batch decoding (consumer/fuzz_test.go), configuration loading and producer"
    echo "properties (agent/config_fuzz_test.go); seed corpora in each package's testdata/fuzz."
    echo
    cat "$fuzz"
  } >"$doc"
  echo "wrote $doc" >&2
fi
exit "$rc"
