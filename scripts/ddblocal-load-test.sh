#!/usr/bin/env bash
# The DynamoDB Local launcher under CPU load: N starts (default 50) through
# `scripts/ddblocal.sh run`, one after the other, while one `yes` process per
# core keeps every core busy. Each run's command checks that the server
# answers a ListTables request, then exits; the launcher then stops the
# server. A run that has not finished BOUND seconds after it began (default
# 300: the launcher's start timeout, 120 s, plus its bounded stop, with room
# to spare) counts as a hang and is killed.
#
#   scripts/ddblocal-load-test.sh [N]
#
# Prints one line per run and a summary: hangs (must be 0), failures, and
# the time per start (from the launch to the server's first answer, as the
# launcher reports it) and per run (start, check, stop). Exits 1 on any hang
# or failure. The load processes are started and killed by pid.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${1:-50}"
BOUND="${DDBLOCAL_LOAD_BOUND:-300}"
unset DYNAMODB_ENDPOINT

work="$(mktemp -d)"
hogs=()
cleanup() {
  local pid
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${hogs[@]}"; do
    wait "$pid" 2>/dev/null || true # killed with SIGTERM, which yes does not catch
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The first run installs DynamoDB Local and builds the launcher if needed,
# before the load starts, so that every measured run does the same work.
bash scripts/ddblocal.sh run true

for _ in $(seq 1 "$(nproc)"); do
  yes >/dev/null &
  hogs+=($!)
done
echo "load: ${#hogs[@]} yes processes (pids ${hogs[*]}) on $(nproc) cores; bound ${BOUND}s per run"

# shellcheck disable=SC2016 # expanded by the run's own shell
check='code="$(curl -s -o /dev/null -w "%{http_code}" --max-time 10 --noproxy "*" -X POST \
  -H "Content-Type: application/x-amz-json-1.0" -H "X-Amz-Target: DynamoDB_20120810.ListTables" \
  -d "{}" "$DYNAMODB_ENDPOINT/")"; [ "$code" != 000 ]'

hangs=0 failures=0
starts=() runs=()
for i in $(seq 1 "$N"); do
  began=$(date +%s%N)
  rc=0
  timeout -k 10 "$BOUND" bash scripts/ddblocal.sh run sh -c "$check" >"$work/out" 2>&1 || rc=$?
  took_ms=$(( ($(date +%s%N) - began) / 1000000 ))
  # "ddblocal: started pid N at URL in 12.345s" (or "in 850ms")
  start="$(sed -nE 's/^ddblocal: started pid [0-9]+ at [^ ]+ in (.*)$/\1/p' "$work/out" | tail -n1)"
  start_ms="$(awk -v d="$start" 'BEGIN {
    if (d ~ /ms$/) { sub(/ms$/, "", d); printf "%d", d }
    else if (d ~ /^[0-9.]+s$/) { sub(/s$/, "", d); printf "%d", d * 1000 }
    else if (d ~ /m/) { split(d, a, "m"); sub(/s$/, "", a[2]); printf "%d", (a[1] * 60 + a[2]) * 1000 } }')"
  if (( rc == 124 || rc == 137 )); then
    hangs=$((hangs + 1))
    verdict="HANG"
  elif (( rc != 0 )); then
    failures=$((failures + 1))
    verdict="FAIL (status $rc)"
  else
    verdict="ok"
    starts+=("$start_ms")
    runs+=("$took_ms")
  fi
  printf 'run %2d: %-16s start %6s ms, run %6d ms\n' "$i" "$verdict" "${start_ms:--}" "$took_ms"
  if [[ "$verdict" != ok ]]; then
    sed 's/^/    /' "$work/out" | tail -n 20
  fi
done

stats() { # stats VALUES...: mean, median, max
  printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1; s += $1 }
    END { if (NR) printf "mean %d ms, median %d ms, max %d ms", s / NR, v[int((NR + 1) / 2)], v[NR] }'
}
echo "summary: $N runs under load: $hangs hangs, $failures failures"
if (( ${#starts[@]} > 0 )); then
  echo "  time per start (launch to first answer): $(stats "${starts[@]}")"
  echo "  time per run (start, check, stop):       $(stats "${runs[@]}")"
fi
(( hangs == 0 && failures == 0 ))
