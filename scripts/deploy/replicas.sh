#!/usr/bin/env bash
# scripts/deploy/replicas.sh: several `specdec serve` replicas on loopback ports behind nginx.
#
#   replicas.sh [start] [options] -- SERVE_ARGS...   run in the foreground until SIGINT/SIGTERM
#   replicas.sh status  --run-dir DIR                every process, its port and /health
#   replicas.sh stop    --run-dir DIR                stops a running `start` (and all it runs)
#   replicas.sh restart-replica --run-dir DIR I      (re)starts replica I (1..N) on its port
#
# start launches N replicas (`specdec serve --host 127.0.0.1 --port BASE_PORT+I-1 SERVE_ARGS`),
# renders scripts/deploy/nginx.conf.template into RUN_DIR/nginx.conf and runs nginx on it
# without root (every path it writes is under RUN_DIR), waits until every replica's /health
# answers 200 (a replica still loading its model may answer 503 or nothing: it keeps polling)
# and nginx answers, then prints the URL on stdout. A replica that dies is reported, not
# restarted: nginx routes around it, and `restart-replica` brings it back (docs/deploy.md).
# On SIGINT/SIGTERM it stops nginx (nginx -s quit) and the replicas (SIGTERM; SIGKILL after
# --stop-timeout) and exits 0.
#
# Options of start (defaults in brackets):
#   --replicas N        replicas [3]
#   --port P            nginx's port [8080]
#   --listen ADDR       nginx's address [127.0.0.1]; 0.0.0.0 for every interface
#   --base-port B       first replica's port; replica I listens on B+I-1 [P+1]
#   --run-dir DIR       config, logs, pid files [${TMPDIR:-/tmp}/specdec-replicas-P]
#   --build DIR         build directory holding specdec [<repo>/build]
#   --cli FILE          the specdec binary [BUILD/specdec]
#   --nginx FILE        the nginx binary [nginx from PATH, else /usr/sbin/nginx]
#   --max-fails N       nginx max_fails per replica [3]
#   --fail-timeout S    nginx fail_timeout in seconds [10]
#   --read-timeout S    nginx proxy_read_timeout in seconds [600]
#   --tries N           proxy_next_upstream_tries [3]
#   --max-body SIZE     nginx client_max_body_size, kept in memory [1m]; a replica refuses
#                       bodies over its --max-body-bytes (1 MiB by default) anyway
#   --start-timeout S   how long to wait for the replicas and nginx [120]
#   --stop-timeout S    how long stopping may take before SIGKILL [40: the replicas' default
#                       --shutdown-grace of 30 s lets streams in progress finish first]
#   SERVE_ARGS          passed to every replica (-m MODEL [-md DRAFT] -t 2 ...); not --host/--port
#
# Run directory: nginx.conf, nginx-error.log, access.log, nginx.pid, replica-I.log,
# replica-I.pid, replica-I.port, supervisor.pid, url, serve-args (NUL-separated), cli, ...
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true  # "&" in a replacement is just "&"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

log() { echo "[replicas] $*" >&2; }
die() { echo "[replicas] error: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# ---------------------------------------------------------------------------------------------
# Helpers

# True while PID names a process that has not exited (a zombie counts as exited).
alive() {
  local pid=$1 stat
  [[ -n $pid ]] || return 1
  if [[ -d /proc ]]; then
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
  else
    kill -0 "$pid" 2>/dev/null
  fi
}

# The HTTP status of GET PATH on 127.0.0.1:PORT (bash's /dev/tcp: no curl needed); 000 when
# nothing answers within 2 s.
http_status() (
  local host=$1 port=$2 path=$3 line=""
  if exec 3<>"/dev/tcp/$host/$port"; then
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$host" >&3 || true
    read -r -t 2 line <&3 || true
  fi
  [[ $line =~ ^HTTP/[0-9.]+\ ([0-9]{3}) ]] && echo "${BASH_REMATCH[1]}" || echo 000
) 2>/dev/null

read_file() { if [[ -r $1 ]]; then cat "$1"; fi; }

# Waits until GET /health on HOST:PORT is 200 while process PID lives (unless PID is empty).
wait_healthy() {
  local what=$1 host=$2 port=$3 pid=$4 timeout=$5 code
  local deadline=$((SECONDS + timeout))
  while :; do
    code=$(http_status "$host" "$port" /health)
    [[ $code == 200 ]] && return 0
    if [[ -n $pid ]] && ! alive "$pid"; then
      log "$what exited before it was healthy"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "$what not healthy after ${timeout}s (last /health status: $code)"
      return 1
    fi
    sleep 0.2
  done
}

# Sends SIG to every live PID, then waits up to TIMEOUT seconds; SIGKILLs the survivors.
terminate() {
  local sig=$1 timeout=$2 pid deadline
  shift 2
  for pid in "$@"; do
    if alive "$pid"; then kill "-$sig" "$pid" 2>/dev/null || true; fi
  done
  deadline=$((SECONDS + timeout))
  for pid in "$@"; do
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
    if alive "$pid"; then
      log "pid $pid still running after ${timeout}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

# ---------------------------------------------------------------------------------------------
# Replicas (shared by start and restart-replica; RUN_DIR, CLI and SERVE_ARGS set)

# Starts replica I on its port in the background; records its pid.
launch_replica() {
  local i=$1 port
  port=$(cat "$RUN_DIR/replica-$i.port")
  log "replica $i: $CLI serve --host 127.0.0.1 --port $port ${SERVE_ARGS[*]}"
  echo "=== $(date '+%F %T') starting on port $port" >>"$RUN_DIR/replica-$i.log"
  "$CLI" serve --host 127.0.0.1 --port "$port" "${SERVE_ARGS[@]}" \
    </dev/null >>"$RUN_DIR/replica-$i.log" 2>&1 &
  echo $! >"$RUN_DIR/replica-$i.pid"
}

load_run_dir() {
  [[ -n ${RUN_DIR:-} ]] || die "--run-dir DIR is required"
  [[ -r $RUN_DIR/serve-args && -r $RUN_DIR/cli ]] || die "$RUN_DIR is not a replicas run directory"
  CLI=$(cat "$RUN_DIR/cli")
  mapfile -d '' -t SERVE_ARGS <"$RUN_DIR/serve-args"
  REPLICAS=$(cat "$RUN_DIR/replicas")
  STOP_TIMEOUT=$(cat "$RUN_DIR/stop-timeout")
}

nginx_cmd() {
  NGINX_CMD=("$NGINX" -p "$RUN_DIR/" -c "$RUN_DIR/nginx.conf" -e "$RUN_DIR/nginx-error.log"
             -g "daemon off; pid $RUN_DIR/nginx.pid;")
}

# ---------------------------------------------------------------------------------------------
# start

NGINX_PID=""
SUPERVISING=0

stop_all() {
  local pids=() i pid
  ((SUPERVISING)) || return 0
  SUPERVISING=0
  trap - INT TERM
  if alive "$NGINX_PID"; then
    log "stopping nginx (quit: it finishes the requests in flight)"
    "${NGINX_CMD[@]}" -s quit 2>/dev/null || kill -QUIT "$NGINX_PID" 2>/dev/null || true
  fi
  for ((i = 1; i <= REPLICAS; i++)); do
    pid=$(read_file "$RUN_DIR/replica-$i.pid")
    alive "$pid" && pids+=("$pid")
  done
  if ((${#pids[@]})); then
    log "stopping ${#pids[@]} replica(s): SIGTERM"
    terminate TERM "$STOP_TIMEOUT" "${pids[@]}"
  fi
  [[ -n $NGINX_PID ]] && terminate TERM "$STOP_TIMEOUT" "$NGINX_PID"
  rm -f "$RUN_DIR/supervisor.pid"
  log "stopped"
}

on_signal() {
  log "signal received: stopping"
  stop_all
  exit 0
}

cmd_start() {
  local replicas=3 port=8080 listen=127.0.0.1 base_port="" build="$ROOT/build" cli=""
  local max_fails=3 fail_timeout=10 read_timeout=600 tries=3 max_body=1m
  START_TIMEOUT=120 STOP_TIMEOUT=40 NGINX="" RUN_DIR=""
  while (($#)); do
    case $1 in
      --replicas) replicas=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --listen) listen=$2; shift 2 ;;
      --base-port) base_port=$2; shift 2 ;;
      --run-dir) RUN_DIR=$2; shift 2 ;;
      --build) build=$2; shift 2 ;;
      --cli) cli=$2; shift 2 ;;
      --nginx) NGINX=$2; shift 2 ;;
      --max-fails) max_fails=$2; shift 2 ;;
      --fail-timeout) fail_timeout=$2; shift 2 ;;
      --read-timeout) read_timeout=$2; shift 2 ;;
      --tries) tries=$2; shift 2 ;;
      --max-body) max_body=$2; shift 2 ;;
      --start-timeout) START_TIMEOUT=$2; shift 2 ;;
      --stop-timeout) STOP_TIMEOUT=$2; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      --) shift; break ;;
      *) die "unknown option '$1' (serve flags go after --; see --help)" ;;
    esac
  done
  SERVE_ARGS=("$@")
  local n
  for n in "$replicas" "$port" "$max_fails" "$fail_timeout" "$read_timeout" "$tries" \
           "$START_TIMEOUT" "$STOP_TIMEOUT" ${base_port:+"$base_port"}; do
    [[ $n =~ ^[0-9]+$ ]] || die "not a number: '$n'"
  done
  ((replicas >= 1)) || die "--replicas must be at least 1"
  [[ $max_body =~ ^[0-9]+[kKmM]?$ ]] || die "--max-body: a size like 1048576, 512k or 4m"
  base_port=${base_port:-$((port + 1))}
  ((base_port + replicas - 1 <= 65535)) || die "replica ports beyond 65535"
  ((${#SERVE_ARGS[@]})) || die "no serve arguments: add -- -m MODEL.gguf [...]"
  for n in "${SERVE_ARGS[@]}"; do
    case $n in
      --host | --host=* | --port | --port=*) die "$n: the script sets the replicas' host and port" ;;
    esac
  done
  CLI=${cli:-$build/specdec}
  [[ -x $CLI ]] || die "$CLI not found: build it (cmake --build build --target specdec) or pass --cli"
  if [[ -z $NGINX ]]; then
    NGINX=$(command -v nginx || true)
    [[ -n $NGINX ]] || NGINX=/usr/sbin/nginx
  fi
  [[ -x $NGINX ]] || die "nginx not found (apt-get install nginx-light, or pass --nginx FILE)"
  RUN_DIR=${RUN_DIR:-${TMPDIR:-/tmp}/specdec-replicas-$port}
  mkdir -p "$RUN_DIR"
  RUN_DIR=$(cd "$RUN_DIR" && pwd)
  if [[ -r $RUN_DIR/supervisor.pid ]] && alive "$(cat "$RUN_DIR/supervisor.pid")"; then
    die "$RUN_DIR is in use by pid $(cat "$RUN_DIR/supervisor.pid") (replicas.sh stop --run-dir $RUN_DIR)"
  fi
  mkdir -p "$RUN_DIR"/tmp/{client_body,proxy,fastcgi,uwsgi,scgi}
  REPLICAS=$replicas
  echo "$replicas" >"$RUN_DIR/replicas"
  echo "$CLI" >"$RUN_DIR/cli"
  echo "$NGINX" >"$RUN_DIR/nginx"
  echo "$STOP_TIMEOUT" >"$RUN_DIR/stop-timeout"
  printf '%s\0' "${SERVE_ARGS[@]}" >"$RUN_DIR/serve-args"
  rm -f "$RUN_DIR"/replica-*.pid "$RUN_DIR/nginx.pid" "$RUN_DIR/url"

  # The config.
  local servers="" i line
  for ((i = 1; i <= replicas; i++)); do
    echo $((base_port + i - 1)) >"$RUN_DIR/replica-$i.port"
    servers+="        server 127.0.0.1:$((base_port + i - 1)) max_fails=$max_fails fail_timeout=${fail_timeout}s;"$'\n'
  done
  servers=${servers%$'\n'}
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line == '@UPSTREAM_SERVERS@' ]]; then
      printf '%s\n' "$servers"
      continue
    fi
    line=${line//@RUN_DIR@/$RUN_DIR}
    line=${line//@LISTEN@/$listen:$port}
    line=${line//@READ_TIMEOUT@/${read_timeout}s}
    line=${line//@NEXT_UPSTREAM_TRIES@/$tries}
    line=${line//@MAX_BODY@/$max_body}
    printf '%s\n' "$line"
  done <"$HERE/nginx.conf.template" >"$RUN_DIR/nginx.conf"
  nginx_cmd
  "${NGINX_CMD[@]}" -t -q 2>>"$RUN_DIR/nginx-error.log" \
    || die "nginx rejects $RUN_DIR/nginx.conf: $(tail -n 3 "$RUN_DIR/nginx-error.log")"

  echo $$ >"$RUN_DIR/supervisor.pid"
  SUPERVISING=1
  trap on_signal INT TERM
  trap stop_all EXIT

  for ((i = 1; i <= replicas; i++)); do launch_replica "$i"; done
  log "nginx: ${NGINX_CMD[*]}"
  "${NGINX_CMD[@]}" </dev/null >>"$RUN_DIR/nginx-error.log" 2>&1 &
  NGINX_PID=$!

  local deadline=$((SECONDS + START_TIMEOUT)) pid
  for ((i = 1; i <= replicas; i++)); do
    pid=$(cat "$RUN_DIR/replica-$i.pid")
    wait_healthy "replica $i (port $(cat "$RUN_DIR/replica-$i.port"))" 127.0.0.1 \
      "$(cat "$RUN_DIR/replica-$i.port")" "$pid" $((deadline > SECONDS ? deadline - SECONDS : 1)) \
      || { tail -n 20 "$RUN_DIR/replica-$i.log" >&2; exit 1; }
  done
  local probe=$listen
  [[ $probe == 0.0.0.0 || $probe == '*' || $probe == '[::]' ]] && probe=127.0.0.1
  wait_healthy "nginx (port $port)" "$probe" "$port" "$NGINX_PID" 10 \
    || { tail -n 20 "$RUN_DIR/nginx-error.log" >&2; exit 1; }

  local url="http://$probe:$port"
  echo "$url" >"$RUN_DIR/url"
  log "$replicas replicas on ports $base_port..$((base_port + replicas - 1)) behind nginx; run dir $RUN_DIR"
  echo "$url"

  # Supervise: report replicas that die or come back; stop everything if nginx dies.
  local -A state=()
  for ((i = 1; i <= replicas; i++)); do state[$i]=up; done
  while :; do
    sleep 1 &
    wait $! || true
    if ! alive "$NGINX_PID"; then
      log "nginx exited: stopping (see $RUN_DIR/nginx-error.log)"
      exit 1
    fi
    for ((i = 1; i <= replicas; i++)); do
      pid=$(read_file "$RUN_DIR/replica-$i.pid")
      if alive "$pid"; then
        [[ ${state[$i]} == up ]] || log "replica $i is running again (pid $pid)"
        state[$i]=up
      elif [[ ${state[$i]} == up ]]; then
        state[$i]=down
        log "replica $i (port $(cat "$RUN_DIR/replica-$i.port"), pid $pid) exited; nginx routes" \
          "around it. Bring it back: $0 restart-replica --run-dir $RUN_DIR $i"
      fi
    done
  done
}

# ---------------------------------------------------------------------------------------------
# status, stop, restart-replica

parse_run_dir_args() {
  RUN_DIR="" POSITIONAL=()
  while (($#)); do
    case $1 in
      --run-dir) RUN_DIR=$2; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      *) POSITIONAL+=("$1"); shift ;;
    esac
  done
  load_run_dir
}

cmd_status() {
  parse_run_dir_args "$@"
  local i pid port ok=0 sup url host
  sup=$(read_file "$RUN_DIR/supervisor.pid")
  if alive "$sup"; then echo "supervisor  pid $sup  running"; else echo "supervisor  not running"; ok=1; fi
  pid=$(read_file "$RUN_DIR/nginx.pid")
  url=$(read_file "$RUN_DIR/url")
  host=${url#http://}
  if alive "$pid" && [[ -n $url ]]; then
    echo "nginx       pid $pid  $url  /health $(http_status "${host%:*}" "${url##*:}" /health)"
  else
    echo "nginx       not running"; ok=1
  fi
  for ((i = 1; i <= REPLICAS; i++)); do
    port=$(cat "$RUN_DIR/replica-$i.port")
    pid=$(read_file "$RUN_DIR/replica-$i.pid")
    if alive "$pid"; then
      echo "replica $i   pid $pid  port $port  /health $(http_status 127.0.0.1 "$port" /health)"
    else
      echo "replica $i   port $port  not running"; ok=1
    fi
  done
  return $ok
}

cmd_stop() {
  parse_run_dir_args "$@"
  local sup
  sup=$(read_file "$RUN_DIR/supervisor.pid")
  alive "$sup" || die "no supervisor running for $RUN_DIR"
  kill -TERM "$sup"
  local limit=$((2 * STOP_TIMEOUT + 10))
  local deadline=$((SECONDS + limit))
  while alive "$sup" && ((SECONDS < deadline)); do sleep 0.2; done
  if alive "$sup"; then die "pid $sup did not stop within $limit s"; fi
  log "stopped"
}

cmd_restart_replica() {
  parse_run_dir_args "$@"
  if ((${#POSITIONAL[@]} != 1)) || [[ ! ${POSITIONAL[0]} =~ ^[0-9]+$ ]]; then
    die "usage: replicas.sh restart-replica --run-dir DIR I"
  fi
  local i=${POSITIONAL[0]} pid port
  ((i >= 1 && i <= REPLICAS)) || die "replica $i: there are $REPLICAS"
  port=$(cat "$RUN_DIR/replica-$i.port")
  pid=$(read_file "$RUN_DIR/replica-$i.pid")
  if alive "$pid"; then
    log "replica $i (pid $pid) is running: SIGTERM first (it drains: requests in progress finish)"
    terminate TERM "$STOP_TIMEOUT" "$pid"
  fi
  launch_replica "$i"
  pid=$(cat "$RUN_DIR/replica-$i.pid")
  wait_healthy "replica $i (port $port)" 127.0.0.1 "$port" "$pid" 120 \
    || { tail -n 20 "$RUN_DIR/replica-$i.log" >&2; exit 1; }
  log "replica $i is healthy on port $port (pid $pid); nginx sends it requests again once its" \
    "fail_timeout has passed"
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  status) shift; cmd_status "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  restart-replica) shift; cmd_restart_replica "$@" ;;
  -h | --help) usage ;;
  *) cmd_start "$@" ;;
esac
