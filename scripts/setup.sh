#!/usr/bin/env bash
# tessera's first command: install every system dependency (Debian 12, apt, idempotent),
# build, and run the main job. Safe to run again; apt is skipped when everything is present.
#
#   scripts/setup.sh            # install + build + run the main job
#   scripts/setup.sh --no-run   # install + build only
#   scripts/setup.sh --deps-only # install only
#   scripts/setup.sh --build-deps-only # install only what building `tessera` needs (the
#                                      # container image's build stage)
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned to the Debian 12 (bookworm) upstream versions; the glob admits Debian's own
# security and point revisions of that same upstream version.
PACKAGES=(
  "g++=4:12.2*"
  "cmake=3.25.1*"
  "ninja-build=1.11.1*"
  "pkg-config=1.8.1*"
  "clang-format=1:14.0*"
  "nlohmann-json3-dev=3.11.2*"
  "libpcre2-dev=10.42*"
  "libutf8proc-dev=2.8.0*"
  "libgtest-dev=1.12.1*"
  "libgmock-dev=1.12.1*"
  "libbenchmark-dev=1.7.1*"
  "libcpp-httplib-dev=0.11.4*"
  "libboost1.81-dev=1.81.0*"
  "libssl-dev=3.0.*"
  "libcurl4-openssl-dev=7.88.1*"
)
# What only the tests, release gates and fuzzing need.
TEST_PACKAGES=(
  "curl=7.88.1*"
  "wrk=4.1.0*"
  "openssl=3.0.*"
  # The official Prometheus client's text-format parser, for the /metrics test.
  "python3-prometheus-client=0.16.0*"
  # XRT 2.13 (pulls libxrt1): compiles and noop-tests the legacy XRT host path (docs/npu.md);
  # it cannot drive an NPU. Real NPU machines need a modern XRT (>= 2.17) from AMD instead.
  "libxrt-dev=202210.2.13.466*"
  # Headless browser for the web page's test (server_ui_browser_e2e, driven by playwright-core
  # from tests/server/js). Debian 12 ships only the current security build of chromium and
  # drops the previous one from the mirror at each release, so an exact version cannot be
  # installed for long: the glob admits any 1xx build (tested with 156.0.8078.114-1~deb12u1).
  "chromium=1*"
  # libFuzzer (its runtime is in libclang-rt-14-dev) for scripts/fuzz.sh and the fuzz gate.
  "clang-14=1:14.0.6*"
  "libclang-rt-14-dev=1:14.0.6*"
)
if [[ "${1:-}" != "--build-deps-only" ]]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi

missing=()
for spec in "${PACKAGES[@]}"; do
  name=${spec%%=*}
  want=${spec#*=}
  have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
  # shellcheck disable=SC2053
  if [[ "$have" != "install ok installed "* || "${have##* }" != $want ]]; then
    missing+=("$spec")
  fi
done

# Node.js + npm run the end-to-end tests with the official openai client. Any Node >= 18 is
# fine (a newer one installed by other means is kept); otherwise Debian's 18.x is installed.
node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || true)
if [[ "${1:-}" != "--build-deps-only" ]] &&
  { [[ -z "$node_major" || "$node_major" -lt 18 ]] || ! command -v npm >/dev/null 2>&1; }; then
  missing+=("nodejs=18.*" "npm=9.*")
fi

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all system packages present"
fi

if [[ "${1:-}" == "--deps-only" || "${1:-}" == "--build-deps-only" ]]; then exit 0; fi

BUILD_DIR=${TESSERA_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" --target tessera

if [[ "${1:-}" == "--no-run" ]]; then exit 0; fi

SHARED=${TESSERA_SHARED_DIR:-../shared}
echo "setup: running the main job (greedy generation on stories260k)"
"$BUILD_DIR/apps/tessera" generate --model "$SHARED/models/stories260k" \
  --prompt "Once upon a time" --max-tokens 60 --echo
