#!/usr/bin/env bash
# The long server soak: 1,000 sequential completions and 100 model switches against
# `tessera serve`, reporting the RSS of the HTTP process and of the worker before and after.
#   scripts/soak_serve.sh [BUILD_DIR]      (default: build; needs tessera and make_test_model)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shared=${TESSERA_SHARED_DIR:-$root/../shared}
work=$build/tests/server/e2e/long_soak
mkdir -p "$work"
"$build/tests/server/make_test_model" "$work/tiny"
exec bash "$root/tests/server/soak_test.sh" "$build/apps/tessera" "$work" "$work/tiny" \
  "$shared/models/stories260k" 1000 100 32768
