#!/usr/bin/env bash
# Fetches Apache Kafka (broker + tools + log4j2 SLF4J 1.x binding) from Maven
# Central into a cache directory and prints that lib directory.
#
#   scripts/kafka/fetch.sh          # fetch if needed, print the lib dir
#   scripts/kafka/fetch.sh --print  # print the lib dir only, never fetch
#
# Cache: ${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}/kafka-4.4.0/lib
# The fetch is skipped when the lib dir is complete for the current pom.xml
# (a marker holds the pom's sha256), so a second run takes milliseconds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA_VERSION=4.4.0
CACHE=${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}
DIR=$CACHE/kafka-$KAFKA_VERSION
LIB=$DIR/lib
MARKER=$DIR/.complete
# Named in full: Maven 3.8.7 maps the `dependency:` prefix to an old plugin.
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

if [[ ${1:-} == --print ]]; then
  echo "$LIB"
  exit 0
fi

want=$(sha256sum "$HERE/pom.xml" | cut -d' ' -f1)
if [[ -d $LIB && -f $MARKER && $(cat "$MARKER") == "$want" ]]; then
  echo "$LIB"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn not found (run scripts/deps.sh)" >&2; exit 1; }
mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/lib.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetch.sh: fetching Kafka $KAFKA_VERSION jars from Maven Central into $LIB" >&2
start=$SECONDS
mvnlog=$DIR/mvn.log
if ! mvn -B -q -Dstyle.color=never -f "$HERE/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
    -DoutputDirectory="$tmp" -DincludeScope=runtime </dev/null >"$mvnlog" 2>&1; then
  cat "$mvnlog" >&2
  echo "fetch.sh: mvn copy-dependencies failed" >&2
  exit 1
fi
for need in kafka_2.13-$KAFKA_VERSION.jar kafka-tools-$KAFKA_VERSION.jar kafka-clients-$KAFKA_VERSION.jar; do
  [[ -f $tmp/$need ]] || { echo "fetch.sh: $need missing after fetch" >&2; exit 1; }
done
ls "$tmp"/log4j-slf4j-impl-*.jar >/dev/null 2>&1 || { echo "fetch.sh: log4j-slf4j-impl missing" >&2; exit 1; }
if ls "$tmp"/log4j-slf4j2-impl-*.jar >/dev/null 2>&1; then
  echo "fetch.sh: log4j-slf4j2-impl present: Kafka 4.x needs the SLF4J 1.x binding" >&2
  exit 1
fi
rm -rf "$LIB"
mv "$tmp" "$LIB"
trap - EXIT
echo "$want" >"$MARKER"
echo "fetch.sh: $(ls "$LIB" | wc -l) jars in $((SECONDS - start)) s" >&2
echo "$LIB"
