#!/usr/bin/env bash
# Release gates for `tessera serve` (docs/server.md, "Release gates"): model switches under
# load, a soak with RSS bounds, overload with wrk, kill -9 of the worker mid-stream, fuzzing.
# Each gate is one script under scripts/gates/; this one runs them, prints their figures and
# PASS/FAIL, writes DIR/release-gates/summary.md and exits 1 if any gate failed.
#   scripts/release-gates.sh                      # --short (what CI runs), build dir "build"
#   scripts/release-gates.sh --full --skip fuzz   # the full figures
#   scripts/release-gates.sh --only switches,kill9 --build /tmp/build
# Needs DIR/apps/tessera and DIR/tests/server/make_test_model, node, curl, wrk;
# stories260k at $TESSERA_SHARED_DIR/models/stories260k (default ../shared).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ALL_GATES=(switches soak overload kill9 fuzz)

usage() {
  echo "usage: $0 [--short|--full] [--build DIR] [--only GATE[,GATE]] [--skip GATE[,GATE]]" >&2
  echo "gates: ${ALL_GATES[*]}" >&2
  exit 2
}
mode=short build=$root/build only="" skip=""
while [ $# -gt 0 ]; do
  case $1 in
    --short) mode=short ;;
    --full) mode=full ;;
    --build) [ $# -ge 2 ] || usage; build=$2; shift ;;
    --only) [ $# -ge 2 ] || usage; only=$2; shift ;;
    --skip) [ $# -ge 2 ] || usage; skip=$2; shift ;;
    -h | --help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
known() { local g; for g in "${ALL_GATES[@]}"; do [ "$g" = "$1" ] && return 0; done; return 1; }
in_list() { [[ ",$2," == *",$1,"* ]]; }
for g in ${only//,/ } ${skip//,/ }; do known "$g" || { echo "unknown gate: $g" >&2; usage; }; done
gates=()
for g in "${ALL_GATES[@]}"; do
  if [ -n "$only" ] && ! in_list "$g" "$only"; then continue; fi
  if [ -n "$skip" ] && in_list "$g" "$skip"; then continue; fi
  gates+=("$g")
done
[ ${#gates[@]} -gt 0 ] || { echo "no gate selected" >&2; exit 2; }

build=$(cd "$build" 2> /dev/null && pwd) || { echo "build directory missing" >&2; exit 2; }
export TESSERA=$build/apps/tessera MAKE_TEST_MODEL=$build/tests/server/make_test_model
for exe in "$TESSERA" "$MAKE_TEST_MODEL"; do
  [ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 2; }
done
for tool in node curl wrk timeout; do
  command -v "$tool" > /dev/null || { echo "missing $tool (scripts/setup.sh installs it)" >&2; exit 2; }
done
export SHARED=${TESSERA_SHARED_DIR:-$root/../shared}
export GATE_MODE=$mode
out=$build/release-gates
rm -rf "$out"
mkdir -p "$out/models"
export MODELS_DIR=$out/models

# A gate that hangs is stopped (and fails) after this long; the gates bound their own waits.
gate_limit=600
[ "$mode" = full ] && gate_limit=2400
results=() total_t0=$SECONDS
for g in "${gates[@]}"; do
  echo "=== gate $g ($mode)"
  export GATE_WORK=$out/$g FIGURES=$out/$g.figures
  : > "$FIGURES"
  t0=$SECONDS status=0
  timeout -k 10 "$gate_limit" bash "$root/scripts/gates/$g.sh" 2>&1 | tee "$out/$g.log" || status=$?
  [ "$status" -eq 124 ] && echo "$g: stopped after $gate_limit s" | tee -a "$FIGURES"
  verdict=PASS
  [ "$status" -eq 0 ] || verdict=FAIL
  echo "=== gate $g: $verdict ($((SECONDS - t0)) s)"
  results+=("$g $verdict $((SECONDS - t0))")
done
total_s=$((SECONDS - total_t0))

failed=0
{
  echo "# Release gates ($mode)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo 'no git'), $(nproc) cores, ${total_s} s in all"
  echo
  echo "| gate | result | seconds |"
  echo "|---|---|---|"
  for r in "${results[@]}"; do
    read -r g verdict s <<< "$r"
    echo "| $g | $verdict | $s |"
  done
  for r in "${results[@]}"; do
    read -r g verdict _ <<< "$r"
    echo
    echo "## $g: $verdict"
    echo
    sed 's/^/- /' "$out/$g.figures"
    # The failed checks, so the summary says why (else the log's last lines).
    if [ "$verdict" = FAIL ]; then
      grep -q '^FAIL: ' "$out/$g.log" && grep '^FAIL: ' "$out/$g.log" | sed 's/^/- /' ||
        tail -n 5 "$out/$g.log" | sed 's/^/- log: /'
    fi
  done
} > "$out/summary.md"
echo
cat "$out/summary.md"
for r in "${results[@]}"; do
  read -r _ verdict _ <<< "$r"
  [ "$verdict" = PASS ] || failed=$((failed + 1))
done
echo
echo "summary: $out/summary.md; $failed of ${#results[@]} gate(s) failed"
[ "$failed" -eq 0 ]
