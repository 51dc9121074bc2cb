#!/usr/bin/env bash
# tessera's second command: build and run the whole test suite (CI runs exactly this).
#  1. release:   a Release build (g++, -Werror) and every test (ctest) but the corpus replays;
#  2. sanitizer: one clang tree with ASan+UBSan+libFuzzer building the malformed-input tests
#                and the fuzz targets at once; the malformed-input tests run under it;
#  3. gates:     the short release gates (switches, soak, overload, kill -9 on the Release
#                binary; fuzzing on the sanitizer tree, which replays every corpus first).
# Each stage's wall time is printed at the end ("stage NAME: N s").
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
bash scripts/setup.sh --deps-only
export TESSERA_SHARED_DIR=${TESSERA_SHARED_DIR:-$(cd .. && pwd)/shared}

stages=()
t_all=$SECONDS
stage_start() { t_stage=$SECONDS; echo "=== stage $1"; }
stage_end() { stages+=("stage $1: $((SECONDS - t_stage)) s"); }
report() {
  echo
  printf '%s\n' "${stages[@]}"
  echo "stages total: $((SECONDS - t_all)) s"
}
trap report EXIT

stage_start release-build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON -DTESSERA_BUILD_TESTS=ON
cmake --build build -j "$JOBS"
stage_end release-build

stage_start release-tests
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900 -LE corpus
stage_end release-tests

# -O1 with line tables: what the sanitizers need for useful reports, at half the compile time
# of -O2 -g.
stage_start sanitizer-build
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DTESSERA_WERROR=ON -DTESSERA_SANITIZE=ON -DTESSERA_FUZZ=ON
cmake --build build-sanitize -j "$JOBS" --target malformed_tests
stage_end sanitizer-build

stage_start sanitizer-tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j "$JOBS" -L malformed --timeout 900
stage_end sanitizer-tests

# Release gates, short mode (switches, soak, overload, kill -9, fuzz): docs/server.md.
stage_start gates
FUZZ_BUILD=$PWD/build-sanitize bash scripts/release-gates.sh --short --build build
stage_end gates
