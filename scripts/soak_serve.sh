#!/usr/bin/env bash
# The long server soak: the soak and switches release gates in full mode (1,000 completions
# from two clients with RSS bounds, 100 model switches under load), on BUILD_DIR's binaries.
#   scripts/soak_serve.sh [BUILD_DIR]      (default: build; needs tessera and make_test_model)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$root/scripts/release-gates.sh" --full --only soak,switches --build "${1:-$root/build}"
