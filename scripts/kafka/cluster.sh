#!/usr/bin/env bash
# A real three-node Apache Kafka cluster (KRaft) on 127.0.0.1, for tests of leader changes,
# ISR shrinks, node crashes and pauses. Every node is broker and controller (3 voters, a
# static quorum: controller.quorum.voters). Jars come from Maven Central (see fetch.sh).
#
#   cluster.sh start          fresh state (wipe + format), start all 3, wait until every node is
#                             ready and a metadata request lists 3 brokers; exits 75 if the state
#                             dir or a port is in use by another cluster
#   cluster.sh stop           TERM all nodes by PID (KILL after 30 s), remove the pid files
#   cluster.sh status         exit 0 if all 3 run (none paused), print PIDs and bootstrap; 3 otherwise
#   cluster.sh env            print `export KAFKA_CLUSTER_...=...` lines: eval "$(cluster.sh env)"
#   cluster.sh kill N...      kill -9 node N (1..3): a crash
#   cluster.sh pause N...     SIGSTOP node N (a hung broker: connections stay open, nothing answers)
#   cluster.sh cont N...      SIGCONT node N
#   cluster.sh stop-node N... TERM node N and wait for it to exit (KILL after 30 s)
#   cluster.sh restart N...   start node N again on its existing data (after kill or stop-node; a
#                             paused node is killed first, a running one stopped), wait until it
#                             serves (its port accepts and it answers ApiVersions). Several nodes
#                             are started together: with a majority down, a node cannot serve
#                             until enough voters are back, so restart them in one call
#   cluster.sh pid N          print node N's PID
#   cluster.sh advertise N [HOST:PORT]  node N's client listener is advertised at HOST:PORT (a
#                             proxy in front of it) from its next restart; without an address, at
#                             its own port again
#   cluster.sh move SHIFT     (0 or 5..9) kill every node and start them again with their client listeners
#                             SHIFT ports away from home (0: home again): a cluster whose brokers
#                             all changed address (pods rescheduled), on the same data; controller
#                             and replication ports stay
#   cluster.sh java CLASS [ARGS...]   run a Kafka Java tool class with the cluster's classpath
#                             (e.g. org.apache.kafka.tools.TopicCommand --bootstrap-server ...)
#
# Ports (KAFKA_CLUSTER_PORT is the base, default 29092): node i listens on
#   PLAINTEXT   127.0.0.1:BASE+10*(i-1)     (29092, 29102, 29112): clients (plus the shift of
#               `move`, kept in the state dir)
#   CONTROLLER  127.0.0.1:BASE+10*(i-1)+1   (29093, 29103, 29113)
#   REPLICATION 127.0.0.1:BASE+10*(i-1)+2   (29094, 29104, 29114): between brokers, so that a
#               client listener behind a proxy (`advertise`) or moved (`move`) leaves
#               replication alone
#   SASL_PLAINTEXT 127.0.0.1:BASE+10*(i-1)+3 (29095, 29105, 29115): PLAIN, user bob/bob-secret,
#               who may do only what ACLs grant him
#
# Authorization: StandardAuthorizer, ACLs in the cluster's metadata. The PLAINTEXT,
# REPLICATION and CONTROLLER listeners' principal (User:ANONYMOUS) is a super user, so every
# client of those does everything; the SASL user bob starts with no permission at all.
#
# Environment: KAFKATRAIL_CLUSTER_STATE (default /tmp/kafkatrail-cluster), KAFKATRAIL_CACHE (jar
# cache), KAFKA_CLUSTER_PORT, KAFKA_CLUSTER_HEAP_OPTS (per node, default -Xms256m -Xmx512m),
# KAFKA_START_TIMEOUT (seconds, default 120), KAFKA_VERSION (default 4.4.0; read by start,
# which records it in the state dir for the other commands), JAVA (default: java on PATH / $JAVA_HOME).
#
# State dir: nodeN/server.properties, nodeN/data, nodeN/node.log (appended to across restarts,
# each start marked), nodeN/node.pid, config/ (logging), format.log, version.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=cluster
STATE=${KAFKATRAIL_CLUSTER_STATE:-/tmp/kafkatrail-cluster}
BASE=${KAFKA_CLUSTER_PORT:-29092}
HOST=127.0.0.1
HEAP=${KAFKA_CLUSTER_HEAP_OPTS:--Xms256m -Xmx512m}
START_DEADLINE=${KAFKA_START_TIMEOUT:-120}
STOP_DEADLINE=30
NODES=(1 2 3)
CONF=$STATE/config

# shellcheck source=scripts/kafka/common.sh
. "$HERE/common.sh"

port() { echo $((BASE + 10 * ($1 - 1) + $(port_shift))); }
controller_port() { echo $((BASE + 10 * ($1 - 1) + 1)); }
replication_port() { echo $((BASE + 10 * ($1 - 1) + 2)); }
sasl_port() { echo $((BASE + 10 * ($1 - 1) + 3)); }
SASL_USER=bob
SASL_PASSWORD=bob-secret
# port_shift: how far `move` put the client listeners from home.
port_shift() { cat "$STATE/shift" 2>/dev/null || echo 0; }
# advertised N: the address node N's client listener is advertised at (`advertise`).
advertised() { cat "$(node_dir "$1")/advertise" 2>/dev/null || echo "$HOST:$(port "$1")"; }
node_dir() { echo "$STATE/node$1"; }
pidfile() { echo "$STATE/node$1/node.pid"; }
node_log() { echo "$STATE/node$1/node.log"; }

bootstrap() {
  local i out=()
  for i in "${NODES[@]}"; do out+=("$HOST:$(port "$i")"); done
  (IFS=,; echo "${out[*]}")
}

voters() {
  local i out=()
  for i in "${NODES[@]}"; do out+=("$i@$HOST:$(controller_port "$i")"); done
  (IFS=,; echo "${out[*]}")
}

check_node() {
  [[ ${1:-} =~ ^[1-3]$ ]] || die "node must be 1, 2 or 3 (got '${1:-}')"
}

# kafka_ask PORT REQUEST N: sends REQUEST (a printf format of \x escapes: a whole Kafka
# request, size first) to 127.0.0.1:PORT and prints the first N bytes of the answer as hex.
# Plain bash and od: a JVM tool would cost seconds of CPU on every poll.
kafka_ask() {
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "$3" >&3
    od -An -v -tx1 -N "$4" <&3 | tr -d " \n"' _ "$HOST" "$1" "$2" "$3" 2>/dev/null || true
}

# Non-flexible request header v1: api key, api version, correlation id 7, client id
# "kafkatrail" (10 bytes). Versions every broker since 2.x and still 4.x answer.
CLIENT_ID='\x00\x0akafkatrail'
# ApiVersions v0 (no body): 20 bytes. Answer: size, correlation id, error code.
APIVERSIONS_REQ="\\x00\\x00\\x00\\x14\\x00\\x12\\x00\\x00\\x00\\x00\\x00\\x07$CLIENT_ID"
# Metadata v4, no topics, no auto-creation: 25 bytes. Answer: size, correlation id,
# throttle time, then the brokers array, whose length is what we want.
METADATA_REQ="\\x00\\x00\\x00\\x19\\x00\\x03\\x00\\x04\\x00\\x00\\x00\\x07$CLIENT_ID\\x00\\x00\\x00\\x00\\x00"

# answers_apiversions PORT: true if the node answers ApiVersions with no error.
answers_apiversions() {
  local hex
  hex=$(kafka_ask "$1" "$APIVERSIONS_REQ" 10)
  [[ ${#hex} -eq 20 && ${hex:8:8} == 00000007 && ${hex:16:4} == 0000 ]]
}

# metadata_brokers PORT: prints how many live brokers the node's metadata lists (nothing if
# it does not answer).
metadata_brokers() {
  local hex
  hex=$(kafka_ask "$1" "$METADATA_REQ" 16)
  [[ ${#hex} -eq 32 && ${hex:8:8} == 00000007 ]] || return 0
  echo $((16#${hex:24:8}))
}

# running_pid N: prints the PID from node N's pid file if that process is still our node
# (kafka.Kafka with this node's config).
running_pid() { pid_of "$(pidfile "$1")" "kafka.Kafka $(node_dir "$1")/server.properties"; }

# paused PID: true if the process is stopped (SIGSTOP).
paused() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} == T ]]
}

# wait_gone PID SECONDS: true once PID has exited (it is not our child: poll).
wait_gone() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

write_node_config() {
  local i=$1 dir
  dir=$(node_dir "$i")
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<EOF
# Generated by scripts/kafka/cluster.sh: node $i of a three-node KRaft test cluster.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$(voters)
controller.listener.names=CONTROLLER
inter.broker.listener.name=REPLICATION
listeners=PLAINTEXT://$HOST:$(port "$i"),REPLICATION://$HOST:$(replication_port "$i"),SASL_PLAINTEXT://$HOST:$(sasl_port "$i"),CONTROLLER://$HOST:$(controller_port "$i")
advertised.listeners=PLAINTEXT://$(advertised "$i"),REPLICATION://$HOST:$(replication_port "$i"),SASL_PLAINTEXT://$HOST:$(sasl_port "$i")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
log.dirs=$dir/data

num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
auto.create.topics.enable=true
delete.topic.enable=true
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
# Tests elect preferred leaders themselves; an automatic rebalance would move leaders under them.
auto.leader.rebalance.enable=false

# Three JVMs share 2 cores and small heaps: fewer threads, and a 32 MB cleaner buffer
# instead of 128 MB (only __consumer_offsets and __transaction_state are compacted).
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.dedupe.buffer.size=33554432
EOF
}

# launch N LIB: starts node N in its own session (a Ctrl-C in the caller's terminal does not
# hit it: it is stopped by PID) and returns at once. The inner shell writes its own PID,
# then execs java (same PID). Its output is appended to the node's log after a marker.
launch() {
  local i=$1 lib=$2 dir
  dir=$(node_dir "$i")
  rm -f "$(pidfile "$i")"
  echo "==== cluster.sh: node $i starting at $(date -Is) ====" >>"$(node_log "$i")"
  launch_kafka "$(pidfile "$i")" "$(node_log "$i")" "$lib" "$dir/server.properties"
}

# log_size N: bytes in node N's log now (readiness looks only at what comes after).
log_size() { stat -c %s "$(node_log "$1")" 2>/dev/null || echo 0; }

# node_started N OFFSET: true if node N logged "Kafka Server started" after OFFSET.
node_started() { tail -c +"$(($2 + 1))" "$(node_log "$1")" 2>/dev/null | grep -q 'Kafka Server started'; }

# wait_serving DEADLINE CHECK_BROKERS N:OFFSET...: waits until each node is alive, has logged
# its start after OFFSET and answers ApiVersions; with CHECK_BROKERS=1 also until every
# node's metadata lists all 3 brokers. On a node's death or the deadline: its log tail, exit 1.
wait_serving() {
  local deadline=$1 check_brokers=$2 arg i off pid pending n
  shift 2
  while :; do
    pending=0
    for arg in "$@"; do
      i=${arg%%:*} off=${arg#*:}
      if ! pid=$(cat "$(pidfile "$i")" 2>/dev/null) || [[ -z $pid ]]; then
        pending=1
        continue
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        log "node $i (pid $pid) exited during startup; its first errors and last lines of $(node_log "$i"):"
        grep -m 5 -E '\b(ERROR|FATAL)\b' "$(node_log "$i")" >&2 || true
        tail -n 60 "$(node_log "$i")" >&2 || true
        rm -f "$(pidfile "$i")"
        return 1
      fi
      if ! node_started "$i" "$off" || ! answers_apiversions "$(port "$i")"; then
        pending=1
        continue
      fi
      if ((check_brokers)); then
        n=$(metadata_brokers "$(port "$i")")
        [[ ${n:-0} -eq ${#NODES[@]} ]] || pending=1
      fi
    done
    ((pending)) || return 0
    if ((SECONDS >= deadline)); then
      for arg in "$@"; do
        i=${arg%%:*}
        log "node $i not serving after ${START_DEADLINE}s (metadata lists $(metadata_brokers "$(port "$i")") brokers); last lines of $(node_log "$i"):"
        tail -n 30 "$(node_log "$i")" >&2 || true
      done
      return 1
    fi
    sleep 0.3
  done
}

cmd_start() {
  local i pid
  [[ -n $STATE && $STATE != / ]] || die "refusing state dir '$STATE'"
  mkdir -p "$(dirname "$STATE")"
  # One cluster per state dir. The lock is taken here and inherited by the three JVMs, so it
  # is held while any of them lives (the kernel drops it when the last exits): a second start
  # on the same state dir never wipes a live cluster. A node started later by `restart` gets
  # the lock only if no other node holds it; the running_pid check below covers the rest.
  # Exit 75 (busy) tells callers to pick another KAFKATRAIL_CLUSTER_STATE/KAFKA_CLUSTER_PORT.
  lock_state "another cluster or start" "stop it with '$0 stop' or set KAFKATRAIL_CLUSTER_STATE and KAFKA_CLUSTER_PORT"
  for i in "${NODES[@]}"; do
    if pid=$(running_pid "$i"); then
      log "node $i already running (pid $pid); stop the cluster with '$0 stop'"
      exit 75
    fi
  done
  local ports=()
  for i in "${NODES[@]}"; do ports+=("$(port "$i")" "$(controller_port "$i")" "$(replication_port "$i")" "$(sasl_port "$i")"); done
  ports_free "another cluster? set KAFKA_CLUSTER_PORT to another base port" "${ports[@]}"
  command -v "$JAVA" >/dev/null || die "java not found (run scripts/deps.sh)"
  local lib
  lib=$(fetch)
  local t0=$SECONDS

  for i in "${NODES[@]}"; do rm -rf "$(node_dir "$i")"; done
  rm -rf "$CONF" "$STATE/format.log" "$STATE/version" "$STATE/shift"
  mkdir -p "$STATE"
  write_logging "$VERSION" "$CONF"
  for i in "${NODES[@]}"; do write_node_config "$i"; done

  # Format the three nodes in parallel: each is a short-lived tool JVM (C1 only and serial GC
  # start fastest), about 2 s of CPU each. With controller.quorum.voters set, neither version
  # wants --standalone or --initial-controllers.
  local cid pids=() failed=0
  cid=$(cluster_id)
  for i in "${NODES[@]}"; do
    "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp "$lib/*" \
      "$(logging_opt "$VERSION" "$CONF" tools)" \
      kafka.tools.StorageTool format -t "$cid" -c "$(node_dir "$i")/server.properties" \
      </dev/null >"$(node_dir "$i")/format.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      failed=1
      cat "$(node_dir "${NODES[$i]}")/format.log" >&2
    fi
  done
  ((failed)) && die "kafka-storage format failed"
  echo "$VERSION" >"$STATE/version"
  local t_format=$SECONDS

  local waits=()
  for i in "${NODES[@]}"; do
    launch "$i" "$lib"
    waits+=("$i:$(log_size "$i")")
  done
  if ! wait_serving $((SECONDS + START_DEADLINE)) 1 "${waits[@]}"; then
    cmd_stop || true
    exit 1
  fi
  for i in "${NODES[@]}"; do
    if ! check_loopback "$(running_pid "$i")"; then
      cmd_stop || true
      exit 1
    fi
  done
  log "started Kafka $VERSION, 3 nodes, in $((SECONDS - t0))s (format $((t_format - t0))s, nodes $((SECONDS - t_format))s):" \
    "bootstrap $(bootstrap), pids $(for i in "${NODES[@]}"; do printf '%s ' "$(running_pid "$i")"; done)(logs: $STATE/node*/node.log)"
}

# stop_nodes N...: TERM the given nodes (a paused one is continued, or the TERM would wait
# forever), KILL what is still alive after STOP_DEADLINE, remove the pid files.
stop_nodes() {
  local i pid pids=() names=()
  for i in "$@"; do
    if pid=$(running_pid "$i"); then
      kill -TERM "$pid" 2>/dev/null || true
      kill -CONT "$pid" 2>/dev/null || true
      pids+=("$pid")
      names+=("node $i pid $pid")
    else
      rm -f "$(pidfile "$i")"
      log "node $i not running"
    fi
  done
  local deadline=$((SECONDS + STOP_DEADLINE)) alive
  while :; do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    if ((SECONDS >= deadline)); then
      for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
          log "pid $pid still alive after ${STOP_DEADLINE}s: KILL"
          kill -KILL "$pid" 2>/dev/null || true
        fi
      done
      for pid in "${pids[@]}"; do wait_gone "$pid" 5 || true; done
      break
    fi
    sleep 0.2
  done
  for i in "$@"; do rm -f "$(pidfile "$i")"; done
  ((${#names[@]})) && log "stopped ${names[*]}"
  return 0
}

cmd_stop() { stop_nodes "${NODES[@]}"; }

cmd_kill() {
  local i pid
  for i in "$@"; do
    check_node "$i"
    if ! pid=$(running_pid "$i"); then
      log "node $i not running"
      continue
    fi
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || die "node $i (pid $pid) still alive after kill -9"
    rm -f "$(pidfile "$i")"
    log "killed node $i (pid $pid)"
  done
}

# cmd_signal SIG N...: sends SIG to the given nodes.
cmd_signal() {
  local sig=$1 i pid
  shift
  for i in "$@"; do
    check_node "$i"
    pid=$(running_pid "$i") || die "node $i not running"
    kill -"$sig" "$pid"
    log "node $i (pid $pid): SIG$sig"
  done
}

cmd_stop_node() {
  local i
  for i in "$@"; do check_node "$i"; done
  stop_nodes "$@"
}

cmd_restart() {
  local i p pid lib stop=() kill=()
  for i in "$@"; do check_node "$i"; done
  for i in "$@"; do
    [[ -f $(node_dir "$i")/server.properties && -d $(node_dir "$i")/data ]] ||
      die "node $i has no state in $STATE: run '$0 start' first"
    if pid=$(running_pid "$i"); then
      if paused "$pid"; then kill+=("$i"); else stop+=("$i"); fi
    fi
  done
  # A paused node is a hung one: restarting it is a crash and a start.
  ((${#kill[@]})) && cmd_kill "${kill[@]}"
  ((${#stop[@]})) && stop_nodes "${stop[@]}"
  for i in "$@"; do
    # Its ports may still be taken by something else (another cluster reusing them).
    for p in "$(port "$i")" "$(controller_port "$i")" "$(replication_port "$i")" "$(sasl_port "$i")"; do
      tcp_open "$p" && { log "port $HOST:$p is in use: cannot restart node $i"; exit 75; }
    done
  done
  lib=$(fetch)
  mkdir -p "$CONF"
  have_logging "$VERSION" "$CONF" || write_logging "$VERSION" "$CONF"
  # Hold the state dir's lock if no other node does (all were down), so that it keeps
  # protecting the state while these nodes live.
  exec {lockfd}>"$STATE.lock"
  flock -n "$lockfd" || true
  local t0=$SECONDS waits=()
  for i in "$@"; do
    waits+=("$i:$(log_size "$i")")
    launch "$i" "$lib"
  done
  exec {lockfd}>&-
  if ! wait_serving $((SECONDS + START_DEADLINE)) 0 "${waits[@]}"; then
    for i in "$@"; do cmd_kill "$i" || true; done
    exit 1
  fi
  for i in "$@"; do
    log "restarted node $i (pid $(running_pid "$i")) in $((SECONDS - t0))s: $HOST:$(port "$i")"
  done
}

cmd_advertise() {
  local i=$1
  check_node "$i"
  [[ -f $(node_dir "$i")/server.properties ]] || die "node $i has no state in $STATE: run '$0 start' first"
  if [[ -n ${2:-} ]]; then
    [[ $2 =~ ^[^:]+:[0-9]+$ ]] || die "advertise: HOST:PORT expected (got '$2')"
    echo "$2" >"$(node_dir "$i")/advertise"
  else
    rm -f "$(node_dir "$i")/advertise"
  fi
  write_node_config "$i"
  log "node $i: client listener advertised at $(advertised "$i") from its next restart"
}

cmd_move() {
  local shift=$1 i
  [[ $shift =~ ^[05-9]$ ]] ||
    die "move: SHIFT must be 0 or 5..9 (1 to 3 are the controller, replication and SASL ports; got '$shift')"
  # Killed, not stopped: the last node's controlled shutdown would wait out STOP_DEADLINE
  # for a quorum that has gone. The OS keeps what they wrote (page cache), as a node's crash.
  local pid
  for i in "${NODES[@]}"; do
    if pid=$(running_pid "$i"); then cmd_kill "$i"; fi
  done
  echo "$shift" >"$STATE/shift"
  for i in "${NODES[@]}"; do write_node_config "$i"; done
  # Every node recovers its logs after the kill, all at once: give them twice the time.
  START_DEADLINE=$((START_DEADLINE * 2))
  cmd_restart "${NODES[@]}"
}

cmd_pid() {
  check_node "${1:-}"
  running_pid "$1" || die "node $1 not running"
}

cmd_status() {
  local i pid all=1 state
  for i in "${NODES[@]}"; do
    if pid=$(running_pid "$i"); then
      state=running
      if paused "$pid"; then state=paused; all=0; fi
      echo "node $i $state pid $pid: PLAINTEXT $HOST:$(port "$i") (advertised $(advertised "$i")) CONTROLLER $HOST:$(controller_port "$i") REPLICATION $HOST:$(replication_port "$i") SASL_PLAINTEXT $HOST:$(sasl_port "$i")"
    else
      all=0
      echo "node $i not running: PLAINTEXT $HOST:$(port "$i")"
    fi
  done
  echo "bootstrap $(bootstrap) (Kafka $VERSION, state $STATE)"
  ((all)) && return 0
  return 3
}

# export_line NAME VALUE: an export line for eval; the value is quoted only if it needs it, so
# that the lines also read as plain NAME=VALUE (the bootstrap's commas stay as they are).
export_line() {
  if [[ $2 =~ ^[A-Za-z0-9_.,:/@+=-]*$ ]]; then
    printf 'export %s=%s\n' "$1" "$2"
  else
    printf 'export %s=%q\n' "$1" "$2"
  fi
}

cmd_env() {
  local i
  export_line KAFKA_CLUSTER_BOOTSTRAP "$(bootstrap)"
  for i in "${NODES[@]}"; do
    export_line "KAFKA_CLUSTER_NODE$i" "$HOST:$(port "$i")"
  done
  local sasl=()
  for i in "${NODES[@]}"; do sasl+=("$HOST:$(sasl_port "$i")"); done
  export_line KAFKA_CLUSTER_SASL_BOOTSTRAP "$(IFS=,; echo "${sasl[*]}")"
  export_line KAFKA_CLUSTER_SASL_USER "$SASL_USER"
  export_line KAFKA_CLUSTER_SASL_PASSWORD "$SASL_PASSWORD"
  export_line KAFKA_CLUSTER_STATE "$STATE"
  export_line KAFKA_LIB "$(fetch --print)"
  export_line KAFKA_CLUSTER_VERSION "$VERSION"
}

usage() {
  echo "usage: $0 start|stop|status|env|kill N|pause N|cont N|stop-node N|restart N|pid N|advertise N [HOST:PORT]|move SHIFT|java CLASS [ARGS...]" >&2
  exit 2
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  kill | pause | cont | stop-node | restart)
    [[ $# -ge 1 ]] || usage
    case $cmd in
      kill) cmd_kill "$@" ;;
      pause) cmd_signal STOP "$@" ;;
      cont) cmd_signal CONT "$@" ;;
      stop-node) cmd_stop_node "$@" ;;
      restart) cmd_restart "$@" ;;
    esac
    ;;
  pid) cmd_pid "$@" ;;
  advertise)
    [[ $# -ge 1 ]] || usage
    cmd_advertise "$@"
    ;;
  move)
    [[ $# -eq 1 ]] || usage
    cmd_move "$1"
    ;;
  java) kafka_java -Xmx256m "$@" ;;
  *) usage ;;
esac
