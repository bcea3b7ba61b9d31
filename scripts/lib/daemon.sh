# Shared by scripts/jaeger.sh and scripts/prometheus.sh (sourced, not run): start a
# server in its own session with a PID file, wait until an HTTP URL answers 200 within a
# deadline, check that it listens on loopback only, stop it by PID.
#
# The caller sets: NAME (for messages), STATE (its state dir), PIDFILE, LOG, BINARY
# (the executable, to recognise the process behind a PID file), HOST, PORTS (array of
# TCP ports it will listen on), READY_PATH (HTTP path on HOST:${PORTS[0]} that answers
# 200 when ready), START_DEADLINE and STOP_DEADLINE (seconds).

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

# running_pid: prints the PID from the PID file if that process is still our server.
running_pid() {
  [[ -f $PIDFILE ]] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled PID: the process must run our binary with our state dir.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$STATE" || return 1
  echo "$pid"
}

# listeners PID: the TCP addresses the process listens on, one per line.
listeners() {
  ss -Hltnp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $4 }'
}

# check_loopback PID: fails if the process listens on anything but 127.0.0.0/8 or [::1].
check_loopback() {
  local addr bad=()
  command -v ss >/dev/null || { log "ss not found: cannot check the listening addresses"; return 0; }
  while read -r addr; do
    [[ -z $addr ]] && continue
    case $addr in
      127.*:* | \[::1\]:*) ;;
      *) bad+=("$addr") ;;
    esac
  done < <(listeners "$1")
  if ((${#bad[@]})); then
    log "listens on non-loopback addresses: ${bad[*]}"
    return 1
  fi
}

# daemon_start ARGS...: runs "$BINARY" ARGS... in its own session (a Ctrl-C in the caller's
# terminal does not reach it; the caller stops it by PID), waits until ready.
daemon_start() {
  local pid p t0=$SECONDS
  [[ -n $STATE && $STATE != / ]] || die "refusing state dir '$STATE'"
  mkdir -p "$STATE"
  exec {lockfd}>"$STATE.lock"
  if ! flock -n "$lockfd"; then
    log "state dir $STATE is in use (pid $(cat "$PIDFILE" 2>/dev/null || echo '?')); stop it with '$0 stop' or move the ports"
    exit 75
  fi
  if pid=$(running_pid); then
    log "already running (pid $pid); stop it with '$0 stop'"
    exit 75
  fi
  rm -f "$PIDFILE"
  for p in "${PORTS[@]}"; do
    if tcp_open "$p"; then
      ss -ltnp "( sport = :$p )" >&2 2>/dev/null || true
      log "port $HOST:$p is already in use; move it (see the environment variables in $0)"
      exit 75
    fi
  done
  : >"$LOG"
  # The inner shell writes its own PID, then execs the server (same PID). The lock fd is
  # inherited: held while the server lives.
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PIDFILE" "$BINARY" "$@" </dev/null >>"$LOG" 2>&1 &
  local deadline=$((SECONDS + START_DEADLINE)) code
  while :; do
    if [[ -s $PIDFILE ]] && pid=$(cat "$PIDFILE"); then
      if ! kill -0 "$pid" 2>/dev/null; then
        log "exited during startup; last log lines ($LOG):"
        tail -n 40 "$LOG" >&2 || true
        rm -f "$PIDFILE"
        exit 1
      fi
      code=$(http_status "${PORTS[0]}" "$READY_PATH")
      if [[ $code == 200 ]]; then
        local all=1
        for p in "${PORTS[@]}"; do tcp_open "$p" || all=0; done
        ((all)) && break
      fi
    fi
    if ((SECONDS >= deadline)); then
      log "not ready after ${START_DEADLINE}s; last log lines ($LOG):"
      tail -n 40 "$LOG" >&2 || true
      daemon_stop || true
      exit 1
    fi
    sleep 0.1
  done
  if ! check_loopback "$pid"; then
    daemon_stop || true
    exit 1
  fi
  log "started pid $pid in $((SECONDS - t0))s, listening on $(listeners "$pid" | sort | tr '\n' ' ')(log: $LOG)"
}

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
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE"
  log "stopped pid $pid"
}

daemon_status() {
  local pid
  if pid=$(running_pid); then
    echo "running pid $pid: $(listeners "$pid" | sort | tr '\n' ' ')"
    return 0
  fi
  echo "not running"
  return 3
}
