#!/usr/bin/env bash
# tessera's second command: build and run the whole test suite.
#  1. a Release build with -Werror and every test (ctest), then the short release gates;
#  2. an ASan+UBSan build running the malformed-input tests (ctest -L malformed).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
bash scripts/setup.sh --deps-only
export TESSERA_SHARED_DIR=${TESSERA_SHARED_DIR:-$(cd .. && pwd)/shared}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900
# Release gates, short mode (switches, soak, overload, kill -9, fuzz): docs/server.md.
bash scripts/release-gates.sh --short --build build

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON \
  -DTESSERA_SANITIZE=ON
cmake --build build-asan -j "$JOBS" --target malformed_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L malformed --timeout 900
