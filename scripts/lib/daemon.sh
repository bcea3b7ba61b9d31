# Shared by scripts/jaeger.sh, scripts/prometheus.sh and scripts/kafka/{broker,cluster}.sh
# (sourced, not run): start a server in its own session with a PID file, wait until it is ready
# within a deadline, check that it listens on loopback only, stop it by PID.
#
# The caller sets: NAME (for messages), STATE (its state dir), PIDFILE, LOG, HOST, PORTS (array
# of TCP ports it will listen on), START_DEADLINE and STOP_DEADLINE (seconds); for daemon_start
# also BINARY (the executable) and READY_PATH (HTTP path on HOST:${PORTS[0]} that answers 200
# when ready). PID_MATCH (default: STATE) is what the command line of the process behind the
# PID file must contain, so that a recycled PID is never taken for the server.

log() { echo "$NAME.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# tcp_open PORT: true if something accepts TCP connections on HOST:PORT.
tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null; }

# http_status PORT PATH: prints the HTTP status code of GET http://HOST:PORT/PATH
# (bash's /dev/tcp, so curl is not needed), or nothing if it cannot connect.
http_status() {
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "GET %s HTTP/1.0\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$3" "$1" "$2" >&3
    IFS=" " read -r _ code _ <&3 && echo "$code"' _ "$HOST" "$1" "$2" 2>/dev/null || true
}

# pid_of FILE MATCH: prints the PID in FILE if that process is alive and its command line
# contains MATCH (the guard against a recycled PID).
pid_of() {
  [[ -f $1 ]] || return 1
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
  echo "$pid"
}

# running_pid: prints the PID from the PID file if that process is still our server.
running_pid() { pid_of "$PIDFILE" "${PID_MATCH:-$STATE}"; }

# listeners PID: the TCP addresses the process listens on, one per line.
listeners() {
  ss -Hltnp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $4 }'
}

# check_loopback PID: fails if the process listens on anything but 127.0.0.0/8 or [::1] (Java's
# sockets show 127.0.0.1 IPv4-mapped, [::ffff:127.0.0.1]).
check_loopback() {
  local addr bad=()
  command -v ss >/dev/null || { log "ss not found: cannot check the listening addresses"; return 0; }
  while read -r addr; do
    [[ -z $addr ]] && continue
    case $addr in
      127.*:* | \[::1\]:* | \[::ffff:127.*\]:*) ;;
      *) bad+=("$addr") ;;
    esac
  done < <(listeners "$1")
  if ((${#bad[@]})); then
    log "pid $1 listens on non-loopback addresses: ${bad[*]}"
    return 1
  fi
}

# lock_state WHO HINT: takes the lock of the state dir or exits 75 (busy), saying that WHO holds
# it and what to do (HINT). The lock fd is inherited by the servers started later, so it is held
# while they live (the kernel drops it when the last exits): a second start on the same state
# dir never wipes the state of a live server.
lock_state() {
  exec {lockfd}>"$STATE.lock"
  if ! flock -n "$lockfd"; then
    log "state dir $STATE is in use by $1 (pid $(cat "${PIDFILE:-}" 2>/dev/null || echo '?')); $2"
    exit 75
  fi
}

# ports_free HINT PORT...: exits 75 (busy), saying what to do (HINT), if a port is in use.
ports_free() {
  local hint=$1 p
  shift
  for p in "$@"; do
    if tcp_open "$p"; then
      ss -ltnp "( sport = :$p )" >&2 2>/dev/null || true
      log "port $HOST:$p is already in use; $hint"
      exit 75
    fi
  done
}

# daemon_launch PIDFILE LOGFILE COMMAND...: runs COMMAND in its own session (a Ctrl-C in the
# caller's terminal does not reach it; the caller stops it by PID), its output appended to
# LOGFILE, and returns at once. The inner shell writes its own PID, then execs the command
# (same PID).
daemon_launch() {
  local pidfile=$1 logfile=$2
  shift 2
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 &
}

# daemon_wait READY TAIL: waits until the server in PIDFILE is alive and the command READY
# succeeds. If the server exits first, or START_DEADLINE passes (then it is stopped), prints the
# last TAIL lines of LOG and exits 1.
daemon_wait() {
  local ready=$1 tail=$2 deadline=$((SECONDS + START_DEADLINE)) pid
  while :; do
    if [[ -s $PIDFILE ]] && pid=$(cat "$PIDFILE"); then
      if ! kill -0 "$pid" 2>/dev/null; then
        log "exited during startup; its first errors and last log lines ($LOG):"
        # The cause (a port that cannot be bound, a bad setting) is logged before the shutdown
        # that fills the tail.
        grep -m 5 -E '\b(ERROR|FATAL)\b' "$LOG" >&2 || true
        tail -n "$tail" "$LOG" >&2 || true
        rm -f "$PIDFILE"
        exit 1
      fi
      "$ready" && return 0
    fi
    if ((SECONDS >= deadline)); then
      log "not ready after ${START_DEADLINE}s; last log lines ($LOG):"
      tail -n "$tail" "$LOG" >&2 || true
      daemon_stop || true
      exit 1
    fi
    sleep 0.1
  done
}

# http_ready: true once READY_PATH answers 200 and every port accepts connections.
http_ready() {
  local p
  [[ $(http_status "${PORTS[0]}" "$READY_PATH") == 200 ]] || return 1
  for p in "${PORTS[@]}"; do tcp_open "$p" || return 1; done
}

# daemon_start ARGS...: runs "$BINARY" ARGS... (daemon_launch), waits until ready (http_ready).
daemon_start() {
  local pid t0=$SECONDS
  [[ -n $STATE && $STATE != / ]] || die "refusing state dir '$STATE'"
  mkdir -p "$STATE"
  lock_state "another $NAME" "stop it with '$0 stop' or move the ports"
  if pid=$(running_pid); then
    log "already running (pid $pid); stop it with '$0 stop'"
    exit 75
  fi
  rm -f "$PIDFILE"
  ports_free "move it (see the environment variables in $0)" "${PORTS[@]}"
  : >"$LOG"
  daemon_launch "$PIDFILE" "$LOG" "$BINARY" "$@"
  daemon_wait http_ready 40
  pid=$(cat "$PIDFILE")
  if ! check_loopback "$pid"; then
    daemon_stop || true
    exit 1
  fi
  log "started pid $pid in $((SECONDS - t0))s, listening on $(listeners "$pid" | sort | tr '\n' ' ')(log: $LOG)"
}

# daemon_stop: TERM the server by its PID, KILL it after STOP_DEADLINE, remove the PID file.
daemon_stop() {
  local pid
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_DEADLINE))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "pid $pid still alive after ${STOP_DEADLINE}s: KILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  # Wait for the KILLed process to be gone (it is not our child: poll).
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE"
  log "stopped pid $pid"
}

# daemon_status [WHERE]: exit 0 and print the PID and WHERE (default: the addresses it listens
# on) if the server runs, 3 if not.
daemon_status() {
  local pid
  if pid=$(running_pid); then
    echo "running pid $pid: ${1:-$(listeners "$pid" | sort | tr '\n' ' ')}"
    return 0
  fi
  echo "not running"
  return 3
}
