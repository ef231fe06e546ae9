#!/usr/bin/env bash
# Run dynamolock v5's own external test suite against ./v5compat.
#
#   scripts/v5-suite.sh [go test flags...]     (make v5-suite)
#
# v5's test files (the `package dynamolock_test` files at the root of its
# repository) are read at run time from a git directory of v5's repository,
# V5_REPO (default /work/.mirror/cirello-io+dynamolock/repo), at revision
# V5_REV (default HEAD); nothing of v5 is committed here. They are copied
# into v5compat/ as v5suite_*_test.go, run, and removed (even on failure or
# interrupt). Only these changes are made to them:
#
#   - the import path: cirello.io/dynamolock/v5 becomes
#     github.com/arielsrv/dynamolock/v2/v5compat (the package name stays
#     dynamolock);
#   - the server start: TestMain, which starts DynamoDB Local from a jar in
#     ./local-dynamodb, is replaced by one that only runs the tests, and the
#     server's address, localhost:8000 in the files, becomes the one that
#     scripts/ddblocal.sh started (or DYNAMODB_ENDPOINT, when set);
#   - Lock.RVN, which v5's external tests call but v5 defines in an
#     internal test file (lock_internal_test.go), is given by a generated
#     internal test file, v5suite_rvn_test.go, as the lock's
#     RecordVersionNumber.
#
# v5's files need no Go 1.27 language or library feature that Go 1.26
# lacks (they compile unchanged under the module's go 1.26 line).
#
# The tests listed in SKIP below assert a v5 defect or v5's log text; they
# are skipped, each with its reason. V5_SUITE_ALL=1 runs them too (they are
# then expected to fail).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
V5_REPO="${V5_REPO:-/work/.mirror/cirello-io+dynamolock/repo}"
V5_REV="${V5_REV:-HEAD}"
PKG="$ROOT/v5compat"

# Tests that assert a v5 defect or v5's log text: name, then why.
SKIP=(
)

if [[ -z "${DYNAMODB_ENDPOINT:-}" ]]; then
  exec bash "$ROOT/scripts/ddblocal.sh" run bash "${BASH_SOURCE[0]}" "$@"
fi

git -C "$V5_REPO" rev-parse --verify -q "$V5_REV^{commit}" >/dev/null ||
  { echo "v5-suite: no revision $V5_REV in V5_REPO=$V5_REPO" >&2; exit 1; }
addr="${DYNAMODB_ENDPOINT#*://}"
addr="${addr%%/*}"

cleanup() { rm -f "$PKG"/v5suite_*_test.go; }
trap cleanup EXIT INT TERM
cleanup

files=()
while IFS= read -r f; do
  [[ "$f" == *_test.go && "$f" != */* ]] || continue
  if git -C "$V5_REPO" show "$V5_REV:$f" | grep "^package dynamolock_test$" >/dev/null; then
    files+=("$f")
  fi
done < <(git -C "$V5_REPO" ls-tree --name-only "$V5_REV")
(( ${#files[@]} > 0 )) || { echo "v5-suite: no external test files at $V5_REV" >&2; exit 1; }

for f in "${files[@]}"; do
  out="$PKG/v5suite_$f"
  git -C "$V5_REPO" show "$V5_REV:$f" |
    sed -e 's#"cirello.io/dynamolock/v5"#"github.com/arielsrv/dynamolock/v2/v5compat"#' \
        -e "s#localhost:8000#$addr#g" |
    awk '
      # TestMain: its server start goes; the imports it alone used stay used.
      /^func TestMain\(m \*testing\.M\) \{$/ {
        print "func TestMain(m *testing.M) {"
        print "\t// v5-suite: DynamoDB Local is started by scripts/ddblocal.sh."
        print "\tflag.Parse()"
        print "\t_, _ = exec.LookPath, net.Dial"
        print "\tos.Exit(m.Run())"
        print "}"
        skipping = 1
        next
      }
      skipping && /^}$/ { skipping = 0; next }
      !skipping { print }
    ' > "$out"
done

cat > "$PKG/v5suite_rvn_test.go" <<'EOF'
package dynamolock

// RVN is the lock's record version number, which v5's external tests
// read through a method v5 defines in an internal test file.
func (l *Lock) RVN() string { return l.Native().RecordVersionNumber() }
EOF

echo "v5-suite: ${#files[@]} files of $V5_REPO at $(git -C "$V5_REPO" rev-parse --short "$V5_REV"), server $addr" >&2
skip=""
if [[ "${V5_SUITE_ALL:-}" != 1 ]]; then
  for ((i = 0; i < ${#SKIP[@]}; i += 2)); do
    echo "v5-suite: skipped ${SKIP[i]}: ${SKIP[i+1]}" >&2
    skip+="${skip:+|}^${SKIP[i]}\$"
  done
fi
cd "$ROOT"
go test -race -count=1 -timeout 15m ${skip:+-skip "$skip"} "$@" ./v5compat
