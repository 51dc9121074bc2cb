#!/usr/bin/env bash
# Fuzzes tessera's parsers with libFuzzer (clang-14, ASan+UBSan; fuzz/README.md).
#
#   [JOBS=N] scripts/fuzz.sh [--seconds N] [--build DIR] [--merge] [TARGET...]
#   scripts/fuzz.sh --seconds 30 tokenizer chat_template
#
# Configures (if needed) and builds DIR (default: build-fuzz in the repo) with
# -DTESSERA_FUZZ=ON, then runs each target (all by default) for N seconds (default 60) under
# nice, JOBS at a time (default: the number of cores; each target is one process, so N is
# each target's own time whatever JOBS is), on a scratch copy of fuzz/corpus/<target> inside
# DIR. --merge
# merges the inputs that reach new edges back into fuzz/corpus/<target> (libFuzzer -merge=1).
# Prints one line per target:
#   fuzz <name>: <execs> execs, cov <edges>, ft <features>, <N> s, crashes <0|1>
# and a final line; exits 1 if any target crashed (the artifact and how to reproduce it are
# printed).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_TARGET=60
BUILD="$REPO/build-fuzz"
MERGE=0
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_PER_TARGET=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --merge) MERGE=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
case "$SECONDS_PER_TARGET" in ''|*[!0-9]*) echo "fuzz.sh: --seconds needs a number" >&2; exit 2 ;; esac
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
if [ ${#TARGETS[@]} -eq 0 ]; then
  for d in "$REPO"/fuzz/corpus/*/; do TARGETS+=("$(basename "$d")"); done
fi
for t in "${TARGETS[@]}"; do
  if [ ! -f "$REPO/fuzz/${t}_fuzz.cc" ]; then
    echo "fuzz.sh: no target '$t' (fuzz/${t}_fuzz.cc)" >&2
    exit 2
  fi
done

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF \
    -DTESSERA_WERROR=ON >"$BUILD/configure.log"
fi
nice ninja -C "$BUILD" -j "${JOBS:-2}" "${TARGETS[@]/#/fuzz_}"

# One target: fuzz it, print its report line (and, on a crash, how to reproduce it) into
# $work/report, its exec count into $work/execs, and 1 into $work/crashed if it crashed.
fuzz_target() {
  local t=$1
  local work="$BUILD/fuzz-run/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "$REPO/fuzz/corpus/$t" ]; then cp -r "$REPO/fuzz/corpus/$t/." "$work/corpus/"; fi
  local dict=()
  if [ -f "$REPO/fuzz/$t.dict" ]; then dict=(-dict="$REPO/fuzz/$t.dict"); fi
  local log="$work/fuzz.log" start rc elapsed execs last cov ft artifact crash
  start=$(date +%s)
  set +e
  TMPDIR="$work" nice "$BUILD/fuzz/fuzz_$t" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
  artifact=$(ls -t "$work/artifacts/" 2>/dev/null | head -1 || true)
  crash=0
  if [ "$rc" -ne 0 ] || [ -n "$artifact" ]; then crash=1; fi
  echo "${execs:-0}" >"$work/execs"
  echo "$crash" >"$work/crashed"
  {
    echo "fuzz $t: ${execs:-0} execs, cov ${cov:-0}, ft ${ft:-0}, $elapsed s, crashes $crash"
    if [ "$crash" -eq 1 ]; then
      grep -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|SUMMARY' "$log" \
        | head -5 | sed 's/^/  /' || true
      if [ -n "$artifact" ]; then
        echo "  artifact: $work/artifacts/$artifact"
        echo "  reproduce: $BUILD/fuzz/fuzz_$t $work/artifacts/$artifact"
      fi
      echo "  log: $log"
    fi
    if [ "$MERGE" -eq 1 ] && [ "$crash" -eq 0 ]; then
      mkdir -p "$REPO/fuzz/corpus/$t"
      # Edges only (no hit-count buckets or value profiles) decide what is kept, so the corpus
      # in the repo stays a few hundred small files per target.
      TMPDIR="$work" nice "$BUILD/fuzz/fuzz_$t" -merge=1 -use_counters=0 -use_value_profile=0 \
        -timeout=10 -rss_limit_mb=2048 \
        "$REPO/fuzz/corpus/$t" "$work/corpus" >"$work/merge.log" 2>&1
      echo "  merged: $(ls "$REPO/fuzz/corpus/$t" | wc -l) files in fuzz/corpus/$t"
    fi
  } >"$work/report"
}

# JOBS targets at a time; the reports are printed in target order once all are done.
jobs_max=${JOBS:-$(nproc)}
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_target "$t" &
  running=$((running + 1))
done
wait
crashed=0
total_execs=0
for t in "${TARGETS[@]}"; do
  work="$BUILD/fuzz-run/$t"
  if [ ! -f "$work/report" ]; then
    echo "fuzz $t: no report (the run was interrupted)"
    crashed=1
    continue
  fi
  cat "$work/report"
  if [ "$(cat "$work/crashed")" -eq 1 ]; then crashed=1; fi
  total_execs=$(( total_execs + $(cat "$work/execs") ))
done
if [ "$crashed" -eq 1 ]; then
  echo "fuzz: ${#TARGETS[@]} targets, $total_execs execs, CRASHES (see above)"
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, $total_execs execs, no crashes"
