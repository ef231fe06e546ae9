#!/usr/bin/env bash
# Exact replay check of the deterministic simulation (docs/SIMULATION.md,
# "Determinism and exact replay"): runs every seed FIRST..LAST twice, the two
# runs as two processes at once, each writing its whole trace with
# -sim.trace, and compares the two files byte for byte.
#
#   scripts/replay-check.sh FIRST LAST [SIM FLAGS...]
#   scripts/replay-check.sh 1 100
#   scripts/replay-check.sh 1 40 -sim.clocks=within
#   RACE=1 scripts/replay-check.sh 1 20          # test binary built with -race
#   STEPS=1 scripts/replay-check.sh 1 40         # also -sim.steps: every granted step
#
# Prints one line: the flags, the seeds, how many pairs differed and which.
# The traces of differing seeds stay in .cache/replay/ (sN.a.trace,
# sN.b.trace: diff them to find the first differing line); the others are
# removed. With STEPS=1 the step logs (sN.a.steps, sN.b.steps) stay beside
# them: the first differing key line (grep -a '^[0-9]* ') names the two
# steps the runs granted in another order, with the goroutines' stacks.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,18p' "$0"; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
first=$1 last=$2
shift 2
out="$ROOT/.cache/replay"
mkdir -p "$out"
bin="$out/sim.test"
race=()
[[ -n "${RACE:-}" ]] && race=(-race)
(cd "$ROOT" && go test "${race[@]}" -c -o "$bin" ./internal/sim) || exit 1
differ=0 n=0 list=""
for s in $(seq "$first" "$last"); do
  steps_a=() steps_b=()
  [[ -n "${STEPS:-}" ]] && steps_a=(-sim.steps="$out/s$s.a.steps") steps_b=(-sim.steps="$out/s$s.b.steps")
  "$bin" -test.run '^TestSimulation$' -sim.seed="$s" -sim.trace="$out/s$s.a.trace" "${steps_a[@]}" "$@" >/dev/null 2>&1 &
  "$bin" -test.run '^TestSimulation$' -sim.seed="$s" -sim.trace="$out/s$s.b.trace" "${steps_b[@]}" "$@" >/dev/null 2>&1
  wait
  n=$((n + 1))
  if cmp -s "$out/s$s.a.trace" "$out/s$s.b.trace"; then
    rm -f "$out/s$s.a.trace" "$out/s$s.b.trace" "$out/s$s.a.steps" "$out/s$s.b.steps"
  else
    differ=$((differ + 1)) list="$list $s"
  fi
done
echo "flags: ${*:-(defaults)}; seeds $first-$last: $differ of $n pairs differ:${list:- none}"
[[ $differ -eq 0 ]]
