#!/usr/bin/env bash
# Builds the heavy observability tools once, each from its own Go module in tools/NAME/
# (whose go.mod pins it as a `tool` dependency), into a cache, and reuses them. Each tool
# has a module of its own because one module cannot hold both: minimal version selection
# lifts Jaeger's prometheus/client_golang to the version Prometheus needs, and Jaeger v1.76.0
# no longer compiles against it.
#
#   tools.sh build [NAME...]   build NAME (jaeger, prometheus; default: all) unless cached
#   tools.sh path NAME         print the binary's path: JAEGER_BIN / PROMETHEUS_BIN, a fit one on
#                              PATH, else the cached build (built first if needed)
#   tools.sh version NAME      print the pinned module version of NAME (from tools/NAME/go.mod)
#
# Cache: ${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}/bin/NAME-VERSION[-TAGS] (a version bump in
# tools/NAME/go.mod builds a new binary; an old one stays until removed). A cold build takes
# about 6-8 minutes per tool on 2 cores (the module download included); a cached run
# takes well under a second. Parallel callers wait on a lock instead of building twice.
# Progress goes to stderr; `path` prints only the path on stdout.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools # tools/jaeger, tools/prometheus: one module per tool
CACHE=${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}
BIN=$CACHE/bin
GO=${GO:-go}

log() { echo "tools.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# pkg NAME: the Go package of a tool; mod NAME: its module.
pkg() {
  case $1 in
    jaeger) echo github.com/jaegertracing/jaeger/cmd/jaeger ;;
    prometheus) echo github.com/prometheus/prometheus/cmd/prometheus ;;
    *) die "unknown tool '$1' (jaeger, prometheus)" ;;
  esac
}
mod() {
  case $1 in
    jaeger) echo github.com/jaegertracing/jaeger ;;
    prometheus) echo github.com/prometheus/prometheus ;;
    *) die "unknown tool '$1' (jaeger, prometheus)" ;;
  esac
}

version() {
  local m v
  m=$(mod "$1")
  # The require line in tools/NAME/go.mod: "\tMODULE vX.Y.Z" (or "require MODULE vX.Y.Z").
  v=$(awk -v m="$m" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$TOOLS/$1/go.mod")
  [[ -n $v ]] || die "$m is not required in $TOOLS/$1/go.mod"
  echo "$v"
}

# tags NAME: Go build tags. Prometheus without its service discoveries (remove_all_sd: no
# AWS, Azure, GCE, Kubernetes, ... SDKs) builds in a fraction of the time; the tests and the
# demo only push over OTLP (static scrape configs still work).
tags() {
  case $1 in
    prometheus) echo remove_all_sd ;;
    *) echo "" ;;
  esac
}

# bin_path NAME: the cached binary, keyed by version and build tags.
bin_path() {
  local t
  t=$(tags "$1")
  echo "$BIN/$1-$(version "$1")${t:+-${t//,/-}}"
}

# installed NAME: a usable binary the user already has, printed if there is one: the one
# JAEGER_BIN / PROMETHEUS_BIN names (it must exist), else one on PATH of a version that works
# with configs/ (Jaeger v2, whose binary is named jaeger; Prometheus 3.x, for its OTLP
# receiver flag). Set JAEGER_BIN= or PROMETHEUS_BIN= (empty) to always use the pinned build.
installed() {
  local var bin v
  case $1 in
    jaeger) var=JAEGER_BIN ;;
    prometheus) var=PROMETHEUS_BIN ;;
    *) die "unknown tool '$1' (jaeger, prometheus)" ;;
  esac
  if [[ -n ${!var+set} ]]; then
    bin=${!var}
    [[ -z $bin ]] && return 1
    [[ -x $bin ]] || die "$var=$bin is not an executable"
    echo "$bin"
    return 0
  fi
  bin=$(command -v "$1" 2>/dev/null) || return 1
  v=$("$bin" --version 2>&1 | head -n 5) || return 1
  case $1 in
    jaeger) [[ $v =~ (^|[^0-9])v?2\.[0-9]+ ]] || { log "ignoring $bin: not Jaeger v2 ($v)"; return 1; } ;;
    prometheus) [[ $v =~ version\ 3\.[0-9]+ ]] || { log "ignoring $bin: not Prometheus 3.x"; return 1; } ;;
  esac
  echo "$bin"
}

# build NAME: nothing if the user has one (installed), else the pinned build (build_pinned).
build() {
  installed "$1" >/dev/null || build_pinned "$1"
}

build_pinned() {
  local name=$1 out pkg t0 tmp
  out=$(bin_path "$name")
  pkg=$(pkg "$name")
  [[ -x $out ]] && return 0
  mkdir -p "$BIN"
  exec {lockfd}>"$BIN/.$name.lock"
  if ! flock -n "$lockfd"; then
    log "another run is building $name; waiting for it"
    flock "$lockfd"
  fi
  if [[ -x $out ]]; then exec {lockfd}>&-; return 0; fi
  command -v "$GO" >/dev/null || die "go not found on PATH"
  log "building $name $(version "$name") into $out (first time only: about 6-8 minutes on 2 cores)"
  t0=$SECONDS
  tmp=$out.tmp.$$
  # tools/NAME/go.sum must already hold every hash (it is committed): no -mod=mod.
  # A progress dot every 30 s so a long build does not look hung.
  # (The ticker closes its copy of the lock, so a stuck sleep cannot hold it.)
  ( exec {lockfd}>&-; while sleep 30; do printf '.' >&2; done ) &
  local ticker=$!
  if ! (cd "$TOOLS/$name" && "$GO" build -trimpath -tags="$(tags "$name")" -ldflags='-s -w' -o "$tmp" "$pkg"); then
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    rm -f "$tmp"
    die "building $name failed"
  fi
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  mv -f "$tmp" "$out"
  exec {lockfd}>&-
  echo >&2
  log "built $name in $((SECONDS - t0))s"
}

case ${1:-} in
  build)
    shift
    (($#)) || set -- jaeger prometheus
    for n in "$@"; do build "$n"; done
    ;;
  path)
    [[ $# -eq 2 ]] || die "usage: $0 path NAME"
    if installed "$2"; then exit 0; fi
    build_pinned "$2"
    bin_path "$2"
    ;;
  version)
    [[ $# -eq 2 ]] || die "usage: $0 version NAME"
    version "$2"
    ;;
  *) echo "usage: $0 build [NAME...] | path NAME | version NAME" >&2; exit 2 ;;
esac
