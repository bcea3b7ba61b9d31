#!/usr/bin/env bash
# make bench: the side-by-side producer benchmark of issue 6 (docs/benchmarks.md).
#
# Installs what is missing (scripts/deps.sh: kcat, Java, Kafka 4.4.0; Debian's rsyslog and
# rsyslog-kafka), builds the agent (no -race), the bench module's programs (bench/: kgoprod,
# runbench, otlpsink) and, once, the OpenTelemetry Collector with the OpenTelemetry Collector
# Builder (cached in ${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}/bin), then runs
# bench/cmd/runbench under scripts/kafka/with-broker.sh, which writes docs/benchmarks.md and
# docs/benchmarks.json (BENCH_OUT to write elsewhere).
#
#   scripts/bench.sh                      # full: BENCH_RUNS=3, BENCH_RECORDS=2000000, BENCH_FILE_LINES=1000000
#   BENCH_RECORDS=200000 BENCH_FILE_LINES=200000 BENCH_RUNS=1 scripts/bench.sh   # quick
#   scripts/bench.sh otelcol              # only build (or find) the collector and print its path
#
# Other settings: see `Method` in docs/benchmarks.md (BENCH_SECTIONS, BENCH_SIZES, ...).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}
BIN=$CACHE/bin
GO=${GO:-go}
OCB_VERSION=v0.165.0
OTELCOL=$BIN/otelcol-bench-$OCB_VERSION
OCB=$BIN/ocb-$OCB_VERSION/builder

log() { echo "bench.sh: $*" >&2; }
die() { log "$*"; exit 1; }

apt_install() {
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "need root or sudo to install: $*"
    sudo=(sudo)
  fi
  command -v apt-get >/dev/null || die "no apt-get; install by hand: $*"
  log "installing $*"
  local out
  out=$(mktemp)
  # policy-rc.d exit 101: the packages' scripts must not start a system rsyslogd.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    made_policy=1
  fi
  if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } \
    </dev/null >"$out" 2>&1; then
    cat "$out" >&2
    ((made_policy)) && "${sudo[@]}" rm -f "$policy"
    rm -f "$out"
    die "apt-get failed"
  fi
  ((made_policy)) && "${sudo[@]}" rm -f "$policy"
  rm -f "$out"
}

# build_otelcol: the OpenTelemetry Collector for the file path, built once with the
# OpenTelemetry Collector Builder from bench/otelcol/builder-config.yaml (about 3-4 minutes on
# 2 cores the first time, the module download included). Parallel callers wait on a lock.
build_otelcol() {
  [[ -x $OTELCOL ]] && return 0
  mkdir -p "$BIN"
  exec {lockfd}>"$BIN/.otelcol-bench.lock"
  flock "$lockfd"
  if [[ -x $OTELCOL ]]; then exec {lockfd}>&-; return 0; fi
  local t0=$SECONDS tmp
  if [[ ! -x $OCB ]]; then
    log "installing the OpenTelemetry Collector Builder $OCB_VERSION"
    GOBIN=$(dirname "$OCB") "$GO" install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
  fi
  tmp=$(mktemp -d)
  cp "$ROOT/bench/otelcol/builder-config.yaml" "$tmp/"
  log "building the OpenTelemetry Collector $OCB_VERSION (first time only: about 3-4 minutes)"
  if ! (cd "$tmp" && "$OCB" --config builder-config.yaml --ldflags='-s -w' >build.log 2>&1); then
    tail -n 30 "$tmp/build.log" >&2
    rm -rf "$tmp"
    exec {lockfd}>&-
    return 1
  fi
  mv -f "$tmp/_build/otelcol-bench" "$OTELCOL"
  rm -rf "$tmp"
  exec {lockfd}>&-
  log "built $OTELCOL in $((SECONDS - t0))s"
}

if [[ ${1:-} == otelcol ]]; then
  build_otelcol
  echo "$OTELCOL"
  exit 0
fi

t0=$SECONDS
export BENCH_T0=${BENCH_T0:-$(date +%s)}
"$ROOT/scripts/deps.sh"
missing=()
[[ -x /usr/sbin/rsyslogd ]] || missing+=(rsyslog)
[[ -e /usr/lib/x86_64-linux-gnu/rsyslog/omkafka.so || -n $(find /usr/lib -name omkafka.so -print -quit 2>/dev/null) ]] || missing+=(rsyslog-kafka)
if ((${#missing[@]})); then
  apt_install "${missing[@]}" || log "rsyslog could not be installed: its runs will fail and say why"
fi

OUT=$(mktemp -d /tmp/kafkatrail-bench-bin.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
log "building the agent and the bench programs"
# As `make agent` builds it: static, no cgo.
(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -o "$OUT/agent" ./cmd/agent)
(cd "$ROOT/bench" && "$GO" build -o "$OUT/kgoprod" ./kgoprod && "$GO" build -o "$OUT/runbench" ./cmd/runbench &&
  "$GO" build -o "$OUT/otlpsink" ./cmd/otlpsink)

# The release's sizes (the report's last section): dist/ of HEAD, made if it is of another commit.
head=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)
if [[ -n $head ]] && ! grep -q "\"commit\": \"$head\"" "$ROOT/dist/metadata.json" 2>/dev/null; then
  log "make release (dist/ for $head: the report gives its sizes)"
  (cd "$ROOT" && make -s release >/dev/null) || log "make release failed: the report has no release sizes"
fi

otel_args=(--otelcol "$OTELCOL")
if ! build_otelcol; then
  log "the OpenTelemetry Collector could not be built; its runs are skipped"
  otel_args=(--otelcol "" --otelcol-missing "the OpenTelemetry Collector Builder $OCB_VERSION failed to build it (see the make bench output)")
fi
log "ready after $((SECONDS - t0))s; starting the broker and the runs"

cd "$ROOT"
"$ROOT/scripts/kafka/with-broker.sh" "$OUT/runbench" \
  --agent "$OUT/agent" --kgoprod "$OUT/kgoprod" --otlpsink "$OUT/otlpsink" \
  --broker-sh "$ROOT/scripts/kafka/broker.sh" --out "${BENCH_OUT:-$ROOT/docs}" --dist "$ROOT/dist" "${otel_args[@]}"
rc=$?
log "make bench took $((SECONDS - t0))s"
exit $rc
