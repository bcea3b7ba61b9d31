#!/usr/bin/env bash
# The background half of `make demo` (scripts/demo-run.sh starts it in a session of its own,
# so that stopping the demo stops a build in progress too): Jaeger, then Prometheus, each
# found (JAEGER_BIN / PROMETHEUS_BIN, PATH) or built (scripts/tools.sh), then started on the
# ports demo-run.sh chose, which the agent already exports to. Says on stderr when each is up;
# the build's own output goes to $DEMO_DIR/tools.log.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${DEMO_DIR:?run through scripts/demo.sh}" "${DEMO_START:?}"
LOG=$DEMO_DIR/tools.log
say() { printf '\033[1m[demo] %s\033[0m (%ds after make demo started)\n' "$*" $(($(date +%s) - DEMO_START)) >&2; }

for tool in jaeger prometheus; do
  if ! "$HERE/tools.sh" path "$tool" >>"$LOG" 2>&1; then
    say "could not build $tool: see $LOG"
    continue
  fi
  if ! "$HERE/$tool.sh" start >>"$LOG" 2>&1; then
    say "$tool did not start: see $LOG"
    continue
  fi
  date +%s >"$DEMO_DIR/$tool.up"
  case $tool in
    jaeger) say "Jaeger is up: $JAEGER_QUERY_URL/search?service=kafkatrail-agent (traces from now on)" ;;
    prometheus) say "Prometheus is up: $PROMETHEUS_URL/graph?g0.expr=rate(kafkatrail_agent_lines_read_total%5B1m%5D) (metrics from now on)" ;;
  esac
done
