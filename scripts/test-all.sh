#!/usr/bin/env bash
# Every test of both modules, at once (make test runs it against one
# DynamoDB Local): the root package's tests in two shards by name, the
# root module's other packages, and the tools module. The tests mostly wait
# on DynamoDB Local and on timers, so four `go test` processes overlap well
# on two cores: the root package alone takes about 8.5 minutes under -race,
# close to its 9-minute bound, and about half that per shard.
#
# Each part's output goes to .cache/test-N.log and is printed whole when
# every part has ended, in order; the script fails if any part failed.
#
# Environment: GO (default go), TEST_FLAGS (default -race -count=1
# -timeout 9m), DYNAMODB_ENDPOINT (the tests' own launcher starts a server
# when it is unset).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
read -r -a FLAGS <<< "${TEST_FLAGS:--race -count=1 -timeout 9m}"
# The first shard: the root package's tests whose names start with A-L
# (about half of its time); the second: every other test of it.
SHARD='^Test[A-L]'
ROOT_PKG="$($GO list .)"
mapfile -t OTHERS < <($GO list ./... | grep -vxF "$ROOT_PKG")
mkdir -p .cache

part() { # part N DESCRIPTION CMD...: run CMD with its output in .cache/test-N.log
  local n=$1 what=$2
  shift 2
  { echo "== $what: $*"; "$@"; } > ".cache/test-$n.log" 2>&1
}
part 1 "root package, tests ${SHARD}" "$GO" test "${FLAGS[@]}" -run "$SHARD" . & p1=$!
part 2 "root package, the other tests" "$GO" test "${FLAGS[@]}" -skip "$SHARD" . & p2=$!
part 3 "module ., other packages" "$GO" test "${FLAGS[@]}" "${OTHERS[@]}" & p3=$!
part 4 "module tools" "$GO" -C tools test "${FLAGS[@]}" ./... & p4=$!

rc=0
n=0
for p in $p1 $p2 $p3 $p4; do
  n=$((n + 1))
  wait "$p" || rc=1
  cat ".cache/test-$n.log"
done
exit $rc
