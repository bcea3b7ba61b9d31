#!/usr/bin/env bash
# Fetches Apache Kafka (broker + tools + the logging binding its version needs) from Maven
# Central into a cache directory and prints that lib directory.
#
#   scripts/kafka/fetch.sh                        # fetch if needed, print the lib dir
#   scripts/kafka/fetch.sh --print                # print the lib dir only, never fetch
#   KAFKA_VERSION=3.9.1 scripts/kafka/fetch.sh    # another version, in its own lib dir
#
# Cache: ${KAFKATRAIL_CACHE:-$HOME/.cache/kafkatrail}/kafka-$KAFKA_VERSION/lib
# KAFKA_VERSION defaults to 4.4.0. 4.x comes from pom.xml (log4j2 with the SLF4J 1.x binding),
# 3.x from pom-3.xml (reload4j, which kafka_2.13 3.x brings itself); either is given the
# version with -Dkafka.version. The fetch is skipped when the lib dir is complete for the
# current pom (a marker holds the pom's sha256; the version is in the dir's name), so a
# second run takes milliseconds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
case $KAFKA_VERSION in
  4.*) POM=$HERE/pom.xml ;;
  3.*) POM=$HERE/pom-3.xml ;;
  *) echo "fetch.sh: KAFKA_VERSION=$KAFKA_VERSION: only 3.x and 4.x are known" >&2; exit 1 ;;
esac
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

want=$(sha256sum "$POM" | cut -d' ' -f1)
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
if ! mvn -B -q -Dstyle.color=never -f "$POM" "$DEP_PLUGIN:copy-dependencies" \
    -Dkafka.version="$KAFKA_VERSION" \
    -DoutputDirectory="$tmp" -DincludeScope=runtime </dev/null >"$mvnlog" 2>&1; then
  cat "$mvnlog" >&2
  echo "fetch.sh: mvn copy-dependencies failed" >&2
  exit 1
fi
for need in kafka_2.13-$KAFKA_VERSION.jar kafka-tools-$KAFKA_VERSION.jar kafka-clients-$KAFKA_VERSION.jar; do
  [[ -f $tmp/$need ]] || { echo "fetch.sh: $need missing after fetch" >&2; exit 1; }
done
if [[ $POM == "$HERE/pom.xml" ]]; then
  ls "$tmp"/log4j-slf4j-impl-*.jar >/dev/null 2>&1 || { echo "fetch.sh: log4j-slf4j-impl missing" >&2; exit 1; }
  if ls "$tmp"/log4j-slf4j2-impl-*.jar >/dev/null 2>&1; then
    echo "fetch.sh: log4j-slf4j2-impl present: Kafka 4.x needs the SLF4J 1.x binding" >&2
    exit 1
  fi
else
  # Without a binding Kafka 3.x would log nothing at all (SLF4J's no-op logger).
  ls "$tmp"/slf4j-reload4j-*.jar "$tmp"/reload4j-*.jar >/dev/null 2>&1 ||
    { echo "fetch.sh: slf4j-reload4j or reload4j missing" >&2; exit 1; }
fi
rm -rf "$LIB"
mv "$tmp" "$LIB"
trap - EXIT
echo "$want" >"$MARKER"
echo "fetch.sh: $(ls "$LIB" | wc -l) jars in $((SECONDS - start)) s" >&2
echo "$LIB"
