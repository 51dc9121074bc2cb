#!/usr/bin/env bash
# Gate "fuzz": runs scripts/fuzz.sh --seconds N (short 10, full 120) over every fuzz target
# and collects its per-target lines ("fuzz <name>: <execs> execs, cov <edges>, ft <features>,
# <N> s, crashes 0"). Fails on a crash (fuzz.sh exits non-zero), on a missing fuzz.sh and on
# a run that reports no target. FUZZ_BUILD, if set, is passed as fuzz.sh's --build (its
# default is its own fuzzing build, which differs from the Release build the other gates use).
#   GATE_MODE=short ... bash scripts/gates/fuzz.sh   (run by scripts/release-gates.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=10
[ "$GATE_MODE" = full ] && seconds=120
fuzz=$root/scripts/fuzz.sh
if [ ! -f "$fuzz" ]; then
  echo "fuzz: scripts/fuzz.sh missing" | tee -a "$FIGURES"
  exit 1
fi
mkdir -p "$GATE_WORK"
args=(--seconds "$seconds")
[ -n "${FUZZ_BUILD:-}" ] && args+=(--build "$FUZZ_BUILD")
status=0
bash "$fuzz" "${args[@]}" 2>&1 | tee "$GATE_WORK/fuzz.out" || status=$?
grep -E '^fuzz[ :]' "$GATE_WORK/fuzz.out" >> "$FIGURES" || true  # per target, and fuzz.sh's total
targets=$(grep -c '^fuzz ' "$GATE_WORK/fuzz.out" || true)
clean=$(grep -c '^fuzz .*, crashes 0$' "$GATE_WORK/fuzz.out" || true)
echo "fuzz targets: $targets, without crashes: $clean, fuzz.sh exit status $status" | tee -a "$FIGURES"
[ "$status" -eq 0 ] && [ "$targets" -gt 0 ] && [ "$clean" -eq "$targets" ]
