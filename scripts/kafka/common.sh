# Shared by scripts/kafka/broker.sh and scripts/kafka/cluster.sh (sourced, not run, after the
# caller set NAME and STATE): the Java binary, the Kafka version and its jars, the daemon
# helpers (scripts/lib/daemon.sh) and the logging configuration (logging.sh).
#
# The version: start takes KAFKA_VERSION and records it in the state dir; every later command
# uses the recorded one, so that a server is never started again with other jars than its data
# was written by.

# shellcheck source=scripts/lib/daemon.sh
. "$HERE/../lib/daemon.sh"
# shellcheck source=scripts/kafka/logging.sh
. "$HERE/logging.sh"

if [[ -n ${JAVA:-} ]]; then :
elif [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then JAVA=$JAVA_HOME/bin/java
else JAVA=java
fi

if [[ ${1:-} != start && -f $STATE/version ]]; then
  VERSION=$(cat "$STATE/version")
  if [[ -n ${KAFKA_VERSION:-} && $KAFKA_VERSION != "$VERSION" ]]; then
    log "KAFKA_VERSION=$KAFKA_VERSION ignored: the $NAME in $STATE runs $VERSION"
  fi
else
  VERSION=${KAFKA_VERSION:-4.4.0}
fi

# fetch [--print]: the directory of the version's jars, fetched once (fetch.sh).
fetch() { KAFKA_VERSION=$VERSION "$HERE/fetch.sh" "$@"; }

# cluster_id: a random Kafka Uuid in its base64url form (what `StorageTool random-uuid` prints),
# made here to save a JVM start. Kafka rejects IDs starting with '-'.
cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    [[ $id != -* && ${#id} -eq 22 ]] && { echo "$id"; return; }
  done
}

# launch_kafka PIDFILE LOGFILE LIB PROPERTIES: starts a Kafka server (kafka.Kafka PROPERTIES, the
# jars in LIB and the caller's KAFKA_EXTRA_CP directory if set, HEAP, and the caller's
# KAFKA_JVM_PROPS array of -D options if set) with daemon_launch and returns at once.
launch_kafka() {
  # shellcheck disable=SC2086
  daemon_launch "$1" "$2" \
    "$JAVA" $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    ${KAFKA_JVM_PROPS[@]+"${KAFKA_JVM_PROPS[@]}"} \
    "$(logging_opt "$VERSION" "$CONF" broker)" \
    -cp "$3/*${KAFKA_EXTRA_CP:+:$KAFKA_EXTRA_CP}" kafka.Kafka "$4"
}

# kafka_java HEAP ARGS...: runs a Kafka Java tool with the version's classpath (replaces the shell).
kafka_java() {
  local heap=$1 lib
  shift
  [[ $# -ge 1 ]] || die "usage: $0 java CLASS [ARGS...]"
  lib=$(fetch)
  mkdir -p "$CONF"
  have_logging "$VERSION" "$CONF" || write_logging "$VERSION" "$CONF"
  exec "$JAVA" "$heap" -cp "$lib/*" "$(logging_opt "$VERSION" "$CONF" tools)" "$@"
}
