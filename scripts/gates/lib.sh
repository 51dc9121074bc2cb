# shellcheck shell=bash
# Shared by the release gates (scripts/gates/*.sh), sourced after the environment that
# scripts/release-gates.sh exports: TESSERA, MAKE_TEST_MODEL, GATE_WORK (this gate's scratch
# directory), GATE_MODE (short|full), SHARED (the shared tree), FIGURES (a file the gate
# appends its "name: value" lines to, copied into summary.md).
#   . "$(dirname "$0")/lib.sh"; start_server NAME flags...; figure "switches" 100; gate_end
set -euo pipefail
GATES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$GATES_DIR/../.." && pwd)
WORK=$GATE_WORK
mkdir -p "$WORK"
# start_server, wait_ready, stop_server, worker_pid, fail/pass/check, now_ms (FAILURES counts).
. "$ROOT/tests/server/server_lib.sh"
set -euo pipefail  # server_lib.sh sets only -u
CLIENT="$GATES_DIR/client.mjs"
SERVER_PID=""

# Every server a gate starts is stopped when the gate ends, however it ends.
cleanup_server() {
  local job
  for job in $(jobs -p); do
    [ "$job" = "${SERVER_PID:-}" ] || kill "$job" 2> /dev/null || true
  done
  if [ -n "${SERVER_PID:-}" ] && kill -0 "$SERVER_PID" 2> /dev/null; then
    kill -KILL "$SERVER_PID" 2> /dev/null || true
    wait "$SERVER_PID" 2> /dev/null || true
  fi
}
trap cleanup_server EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap runs when the gate is stopped

figure() { echo "$1: $2" | tee -a "$FIGURES"; }

# A model made by make_test_model once per run (under the run's directory, shared by gates).
test_model() {  # test_model NAME [--slow]  -> prints its directory
  local dir=$MODELS_DIR/$1
  if [ ! -f "$dir/config.json" ]; then
    "$MAKE_TEST_MODEL" "$dir" "${@:2}" > /dev/null
  fi
  echo "$dir"
}

stories_model() {
  local dir=$SHARED/models/stories260k
  [ -f "$dir/config.json" ] || { echo "stories260k missing at $dir (set TESSERA_SHARED_DIR)" >&2; exit 1; }
  echo "$dir"
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
# Resets the process's peak RSS (VmHWM) so a later hwm_kb is the peak since now.
reset_hwm() { echo 5 > "/proc/$1/clear_refs"; }

# metric NAME: the value of an unlabelled sample in /metrics (the gates serve --metrics-public).
metric() { curl -s --max-time 5 "$BASE/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

# loads_logged: how many times the worker logged a model load (each switch is one load).
loads_logged() { grep -c "^tessera worker: model '.*' loaded and warmed" "$LOG_ERR" || true; }

wpid_now() { worker_pid || true; }

# gate_end: the gate's verdict from the failures counted by fail().
gate_end() {
  stop_server || true
  if [ "$FAILURES" -eq 0 ]; then exit 0; fi
  echo "$FAILURES check(s) failed" >&2
  exit 1
}
