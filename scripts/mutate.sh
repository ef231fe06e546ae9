#!/usr/bin/env bash
# Mutation testing of the safety net: for every row of scripts/mutations.tsv,
# copy the working tree to a scratch directory, apply the row's single-line
# change (it must match exactly once), and run the row's detector on the
# copy. A mutation that breaks a documented promise must be found, by the
# simulation within MUTATE_SEEDS seeds or by the named test.
#
#   scripts/mutate.sh [ID...]     run the named rows (default: all)
#
# Detectors: "sim" runs the deterministic simulation (no DynamoDB Local)
# with -sim.failfast for up to MUTATE_SEEDS seeds (default 10000) from seed
# MUTATE_BASE (default 1) and
# -sim.avoid=MUTATE_AVOID (default: the simulation's own default, which
# leaves out the documented limits of docs/SIMULATION.md); "test:NAME" runs the root
# package's tests matching ^NAME$ against DYNAMODB_ENDPOINT (make mutate
# starts a DynamoDB Local for it), "test:./internal/PKG:NAME" those of that
# package. Prints one Markdown row per mutation,
# and exits non-zero if one was not found or did not apply.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TABLE="$ROOT/scripts/mutations.tsv"
SEEDS="${MUTATE_SEEDS:-10000}"
AVOID=()
[[ -n "${MUTATE_AVOID:-}" ]] && AVOID=(-sim.avoid="$MUTATE_AVOID")
want=" $* "
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

rc=0
echo "| id | mutation | promise | detector | result |"
echo "|---|---|---|---|---|"
while IFS=$'\t' read -r id file old new detector promise; do
  [[ -z "$id" || "$id" == \#* ]] && continue
  [[ "$want" == "  " || "$want" == *" $id "* ]] || continue
  dir="$scratch/$id"
  mkdir -p "$dir"
  (cd "$ROOT" && tar --exclude=./.git --exclude=./.cache --exclude=./tools -cf - .) | tar -xf - -C "$dir"
  if ! python3 - "$dir/$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
n = s.count(old)
if n != 1:
    sys.exit(f"{path}: the text to mutate occurs {n} times")
open(path, "w").write(s.replace(old, new))
PY
  then
    echo "| $id | \`$file\` | $promise | $detector | NOT APPLIED |"; rc=1; rm -rf "$dir"; continue
  fi
  if ! (cd "$dir" && go vet . ./internal/sim >/dev/null 2>&1); then
    echo "| $id | \`$file\` | $promise | $detector | DOES NOT BUILD |"; rc=1; rm -rf "$dir"; continue
  fi
  start=$SECONDS
  case "$detector" in
    sim)
      out="$(cd "$dir" && go test -count=1 -timeout 0 ./internal/sim -run '^TestSimulation$' -sim.seeds="$SEEDS" \
        -sim.base="${MUTATE_BASE:-1}" -sim.budget=0 -sim.failfast "${AVOID[@]}" 2>&1)"
      status=$?
      [[ -n "${MUTATE_LOG:-}" ]] && printf "%s\n" "$out" > "$MUTATE_LOG.$id"
      seed="$(grep -oE 'seed [0-9]+: [0-9]+ violations' <<<"$out" | head -n1 | grep -oE '^seed [0-9]+')"
      inv="$(grep -oE 'invariant [0-9]+' <<<"$out" | head -n1)"
      if [[ -z "$seed" ]]; then
        # A hung seed is a liveness violation (no progress for 2 minutes).
        seed="$(grep -oE 'seed [0-9]+ hung' <<<"$out" | head -n1 | grep -oE '^seed [0-9]+')"
        [[ -n "$seed" ]] && inv="hung"
      fi
      if (( status != 0 )) && [[ -n "$seed" ]]; then
        result="found: $seed ($inv), $((SECONDS - start)) s"
      elif (( status != 0 )); then
        result="FAILED OTHERWISE: $(tail -n1 <<<"$out")"; rc=1
      else
        result="NOT FOUND in $SEEDS seeds"; rc=1
      fi
      ;;
    test:*)
      name="${detector#test:}"
      pkg=.
      if [[ "$name" == *:* ]]; then # test:./internal/x:NAME, a test of another package
        pkg="${name%%:*}"; name="${name#*:}"
      fi
      out="$(cd "$dir" && go test -count=1 -race -run "^${name}\$" "$pkg" 2>&1)"
      if (( $? != 0 )) && grep -q -- "--- FAIL: ${name}" <<<"$out"; then
        result="found by $name, $((SECONDS - start)) s"
      else
        result="NOT FOUND by $name"; rc=1
      fi
      ;;
    *) result="unknown detector"; rc=1 ;;
  esac
  echo "| $id | \`$file\`: \`$old\` → \`$new\` | $promise | $detector | $result |"
  rm -rf "$dir"
done < "$TABLE"
exit $rc
