#!/usr/bin/env bash
# `make demo`: see cmd/lock-example at work against DynamoDB Local.
#
# Starts DynamoDB Local (installed and started as for `make test`, and
# stopped at the end whatever happens; an endpoint in DYNAMODB_ENDPOINT is
# used instead and left as it is), builds lock-example, creates a lock table, runs two lock-example
# processes at once on the same lock, shows that their jobs never overlap
# and that a third, non-waiting run is turned away, runs three --shared
# runs at once beside an exclusive one that waits for them, then prints
# the lock table. Talks to nothing but 127.0.0.1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ "${1:-}" != "--with-endpoint" ]]; then
  exec bash scripts/ddblocal.sh run bash "$0" --with-endpoint
fi

case "${DYNAMODB_ENDPOINT:-}" in
  http://127.0.0.1:* | http://localhost:* | "http://[::1]:"*) ;;
  *)
    echo "demo: DYNAMODB_ENDPOINT=${DYNAMODB_ENDPOINT:-} is not a DynamoDB Local on this machine; refusing" >&2
    exit 1
    ;;
esac
# Nothing else may point lock-example elsewhere, nor send real credentials:
# lock-example asks the AWS SDK's default chain for credentials first (the
# shared files, SSO, container and instance roles) and uses dummy ones for
# DynamoDB Local only when the chain has none.
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_DYNAMODB AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY \
  AWS_ACCESS_KEY AWS_SECRET_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_CONTAINER_CREDENTIALS_FULL_URI \
  AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
export DYNAMODB_ENDPOINT

if [[ -t 1 ]]; then bold=$'\033[1m' off=$'\033[0m'; else bold="" off=""; fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$off"; }

work="$(mktemp -d)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building lock-example"
go build -o "$work/lock-example" ./cmd/lock-example
# Every lock-example run is bounded (SIGTERM after 90 s, SIGKILL 5 s later),
# so every wait below for one is bounded too.
le() { timeout -k 5 90 "$work/lock-example" --table demo-locks "$@"; }

say "DynamoDB Local at $DYNAMODB_ENDPOINT: creating the lock table"
le create-table

# The job: print when it starts and ends, and notice if another copy runs at
# the same time (mkdir is atomic: only one copy can hold the directory).
# shellcheck disable=SC2016 # expanded by the job's own shell
job='now() { date +%H:%M:%S; }
echo "$(now)  [$RUN] start  (fencing token $DYNAMOLOCK_FENCING_TOKEN)" | tee -a "$LOG"
mkdir "$MARK" 2>/dev/null || echo "$(now)  [$RUN] OVERLAP: another run is inside" | tee -a "$LOG"
sleep 2
rmdir "$MARK"
echo "$(now)  [$RUN] end" | tee -a "$LOG"'
export LOG="$work/log" MARK="$work/inside"

say "two runs of one job at once, on lock \"nightly-report\" (--wait-for-lock)"
echo "    lock-example --owner worker-A --wait-for-lock --timeout 30s nightly-report sh -c '<job>' &"
echo "    lock-example --owner worker-B --wait-for-lock --timeout 30s nightly-report sh -c '<job>' &"
RUN=A le --owner worker-A --lease 4s --wait-for-lock --timeout 30s --data "run A" nightly-report sh -c "$job" &
pids+=($!)
RUN=B le --owner worker-B --lease 4s --wait-for-lock --timeout 30s --data "run B" nightly-report sh -c "$job" &
pids+=($!)

# While one of them holds the lock, a third run that does not wait is turned
# away at once with exit status 75.
for _ in $(seq 1 300); do
  grep -q ' start ' "$LOG" 2>/dev/null && break
  sleep 0.05
done
rc=0
RUN=C le --owner worker-C nightly-report sh -c "$job" || rc=$?
echo "          [C] lock-example without --wait-for-lock exited with $rc (75: lock busy)"

status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
pids=()

say "checking the runs' log"
cat "$LOG"
if [[ "$status" != 0 || "$rc" != 75 ]]; then
  echo "demo: FAILED: a run exited with $status, the busy run with $rc" >&2
  exit 1
fi
if grep -q OVERLAP "$LOG" || [[ "$(grep -c ' start ' "$LOG")" != 2 ]] ||
  [[ "$(awk '{print $3}' "$LOG" | tr -d '\n')" != startendstartend ]]; then
  echo "demo: FAILED: the runs overlapped" >&2
  exit 1
fi
echo "OK: each run started only after the other had ended; they never overlapped"

say "three --shared runs at once on lock \"db\", and an exclusive run beside them"
echo "    lock-example --shared --wait-for-lock db sh -c '<job>' &    (three times)"
echo "    lock-example --wait-for-lock db sh -c '<job>'"
# shellcheck disable=SC2016 # expanded by the job's own shell
sjob='echo "$(date +%H:%M:%S)  [$RUN] start" | tee -a "$LOG2"; sleep 1; echo "$(date +%H:%M:%S)  [$RUN] end" | tee -a "$LOG2"'
export LOG2="$work/log2"
for r in S1 S2 S3; do
  RUN=$r le --shared --wait-for-lock --lease 4s db sh -c "$sjob" &
  pids+=($!)
done
for _ in $(seq 1 300); do
  [[ "$(grep -c ' start' "$LOG2" 2>/dev/null)" == 3 ]] && break
  sleep 0.05
done
RUN=X le --wait-for-lock --lease 4s db sh -c "$sjob"
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
pids=()
# Shared runs overlap: the three start before any ends. The exclusive run
# starts after all three have ended.
order="$(awk '{ printf "%s-%s ", ($2 == "[X]") ? "X" : "S", $3 }' "$LOG2")"
if [[ "$status" != 0 || "$order" != "S-start S-start S-start S-end S-end S-end X-start X-end " ]]; then
  echo "demo: FAILED: shared runs did not run together, or the exclusive run overlapped them" >&2
  exit 1
fi
echo "OK: the shared runs ran together; the exclusive run started once they had all ended"

say "the lock table (lock-example list)"
le list
say "one lock (lock-example show nightly-report): released, the last run's --data kept"
le show nightly-report
