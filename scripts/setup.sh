#!/usr/bin/env bash
# tessera's first command: install every system dependency (Debian 12, apt, idempotent),
# build, and run the main job (greedy generation on the built-in demo model stories260k, which
# the binary carries: no download, no ../shared). Safe to run again; apt is skipped when
# everything is present.
#
#   scripts/setup.sh            # install + build + run the main job
#   scripts/setup.sh --user     # a user's install: only what building and running `tessera`
#                               # needs (no test stack), build without the tests, run the main job
#   scripts/setup.sh --no-run   # install + build only
#   scripts/setup.sh --deps-only # install only
#   scripts/setup.sh --build-deps-only # install only what building `tessera` needs (the
#                                      # container image's build stage)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-}
case "$MODE" in
  "" | --user | --no-run | --deps-only | --build-deps-only) ;;
  *)
    echo "setup: unknown option '$MODE' (use --user, --no-run, --deps-only or --build-deps-only)" >&2
    exit 2
    ;;
esac

# Pinned to the Debian 12 (bookworm) upstream versions; the glob admits Debian's own
# security and point revisions of that same upstream version.
PACKAGES=(
  "g++=4:12.2*"
  "cmake=3.25.1*"
  "ninja-build=1.11.1*"
  "pkg-config=1.8.1*"
  "nlohmann-json3-dev=3.11.2*"
  "libpcre2-dev=10.42*"
  "libutf8proc-dev=2.8.0*"
  "libboost1.81-dev=1.81.0*"
  "libssl-dev=3.0.*"
  "libcurl4-openssl-dev=7.88.1*"
)
# What configuring the test tree needs (and the formatter): everything but --user.
DEV_PACKAGES=(
  "clang-format=1:14.0*"
  "libgtest-dev=1.12.1*"
  "libgmock-dev=1.12.1*"
  "libbenchmark-dev=1.7.1*"
  "libcpp-httplib-dev=0.11.4*"
)
if [[ "$MODE" != "--user" ]]; then PACKAGES+=("${DEV_PACKAGES[@]}"); fi
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
  # The quick start's test (quickstart_e2e): chat under a terminal multiplexer, and the
  # tracked files copied with git.
  "tmux=3.3a*"
  "git=1:2.39*"
  # libFuzzer (its runtime is in libclang-rt-14-dev) for scripts/fuzz.sh and the fuzz gate.
  "clang-14=1:14.0.6*"
  "libclang-rt-14-dev=1:14.0.6*"
)
if [[ "$MODE" != "--build-deps-only" && "$MODE" != "--user" ]]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi

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
if [[ "$MODE" != "--build-deps-only" && "$MODE" != "--user" ]] &&
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

if [[ "$MODE" == "--deps-only" || "$MODE" == "--build-deps-only" ]]; then exit 0; fi

BUILD_DIR=${TESSERA_BUILD_DIR:-build}
# --user has no test libraries (GoogleTest) to configure the test tree with.
TESTS=ON
if [[ "$MODE" == "--user" ]]; then TESTS=OFF; fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=$TESTS
cmake --build "$BUILD_DIR" --target tessera

if [[ "$MODE" == "--no-run" ]]; then exit 0; fi

echo "setup: running the main job (greedy generation on the built-in demo model stories260k)"
# main job (tests/quickstart runs this line from the script's text)
"$BUILD_DIR/apps/tessera" generate --model stories260k --prompt "Once upon a time" --max-tokens 60 --echo
echo "setup: built $BUILD_DIR/apps/tessera; the quick start in README.md says what to run next"
