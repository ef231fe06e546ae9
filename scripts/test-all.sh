#!/usr/bin/env bash
# Every test of both modules, at once (make test runs it against one
# DynamoDB Local): the root package's tests in two shards by name, the
# root module's other packages then the tools module. The tests mostly wait
# on DynamoDB Local and on timers, so three `go test` processes overlap well
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
# (about half of its time); the second: every other test of it. QUIET are
# run alone once the rest has ended: they check that admission loses no
# lock at a steady backend, and this machine's own other test processes
# are no steady backend (one run in four lost 13 of 151 locks beside them;
# a promise issue 60 still has open at scale).
SHARD='^Test[A-L]'
QUIET='^(TestAdmissionRefusesRatherThanLoses|TestUnpacedAskAtAMovingRateLosesNone)$'
ROOT_PKG="$($GO list .)"
mapfile -t OTHERS < <($GO list ./... | grep -vxF "$ROOT_PKG")
mkdir -p .cache
rm -f .cache/test-[1-5].log # no log of an earlier run is printed as this one's

part() { # part N DESCRIPTION CMD...: run CMD with its output in .cache/test-N.log
  local n=$1 what=$2
  shift 2
  { echo "== $what: $*"; "$@"; } > ".cache/test-$n.log" 2>&1
}
part 1 "root package, tests ${SHARD}" "$GO" test "${FLAGS[@]}" -run "$SHARD" -skip "$QUIET" . & p1=$!
part 2 "root package, the other tests" "$GO" test "${FLAGS[@]}" -skip "$SHARD|$QUIET" . & p2=$!
# The rest one after the other, beside the two shards: three processes on
# one DynamoDB Local at most (four at once made its round trips spike past
# a test's 5 s wait).
(
  r=0
  part 3 "module ., other packages" "$GO" test "${FLAGS[@]}" "${OTHERS[@]}" || r=1
  part 4 "module tools" "$GO" -C tools test "${FLAGS[@]}" ./... || r=1
  exit $r
) & p3=$!

rc=0
for p in $p1 $p2 $p3; do
  wait "$p" || rc=1
done
part 5 "root package, alone: ${QUIET}" "$GO" test "${FLAGS[@]}" -run "$QUIET" . || rc=1
for n in 1 2 3 4 5; do
  cat ".cache/test-$n.log"
done
exit $rc
