#!/usr/bin/env bash
# Times `make demo` as a new user meets it: from a fresh clone of this checkout's HEAD, with
# empty caches (the project's cache: Kafka jars, Jaeger, Prometheus; Maven's local
# repository; and, unless DEMO_TIME_GO=warm, Go's build and module caches), to the first
# trace with all six stages on the agent's page and to the first one in Jaeger. Prints both,
# in seconds from the start of `make demo`. Debian packages (kcat, Java, Maven) are taken as
# installed: scripts/deps.sh --demo installs them otherwise.
#
#   scripts/demo-time.sh               both times (Jaeger's includes its first build: minutes)
#   DEMO_TIME_CHECK=page scripts/demo-time.sh   the page's only
#   DEMO_TIME_GO=warm                  keep Go's caches (what a Go developer's machine has)
#   DEMO_TIME_LIMIT=N                  give up after N s (default 2400)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d /tmp/kafkatrail-demo-time.XXXXXX)
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
git clone -q "$ROOT" "$tmp/clone"
env=(KAFKATRAIL_CACHE="$tmp/cache" MAVEN_OPTS="-Dmaven.repo.local=$tmp/m2" DEMO_DIR="$tmp/demo"
  KAFKATRAIL_STATE="$tmp/kafka" DEMO_SECONDS="${DEMO_TIME_LIMIT:-2400}" DEMO_CHECK="${DEMO_TIME_CHECK:-all}"
  DEMO_HTTP_PORT="${DEMO_HTTP_PORT:-18687}")
if [[ ${DEMO_TIME_GO:-cold} != warm ]]; then
  env+=(GOCACHE="$tmp/gocache" GOMODCACHE="$tmp/gomod" GOFLAGS=-modcacherw)
fi
echo "demo-time.sh: make demo in a fresh clone ($(git -C "$ROOT" rev-parse --short HEAD)), caches empty: kafkatrail, maven$([[ ${DEMO_TIME_GO:-cold} != warm ]] && echo ', go')" >&2
t0=$SECONDS
rc=0
(cd "$tmp/clone" && env "${env[@]}" make demo) 2>&1 | tee "$tmp/demo.log" >&2 || rc=$?
page=$(sed -n 's/.*the page shows a trace with all six stages, \([0-9]*\)s after.*/\1/p' "$tmp/demo.log" | head -n 1)
jaeger=$(sed -n 's/.*Jaeger holds a trace with all six stages, \([0-9]*\)s after.*/\1/p' "$tmp/demo.log" | head -n 1)
echo "demo-time.sh: first six-stage trace on the page: ${page:-none} s; in Jaeger: ${jaeger:-none} s (make demo ran $((SECONDS - t0)) s, exit $rc)"
[[ -n $page ]]
