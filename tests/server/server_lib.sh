# Helpers for the server end-to-end tests: start `tessera serve` on a free loopback port,
# wait for it with deadlines, stop it. Sourced by the *_test.sh scripts.
#   start_server NAME [serve flags...]   sets PORT, SERVER_PID, BASE, LOG_OUT, LOG_ERR
#   wait_ready SECONDS                   polls /ready until 200 or fails
#   stop_server                          SIGTERM, then wait (bounded) for the exit

set -u
: "${TESSERA:?TESSERA must point at the tessera binary}"
: "${WORK:?WORK must be a scratch directory}"
FAILURES=0

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }
check() {  # check DESCRIPTION EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

start_server() {
  local name=$1; shift
  LOG_OUT=$WORK/$name.out
  LOG_ERR=$WORK/$name.err
  : > "$LOG_OUT"
  "$TESSERA" serve --port 0 --placement reference "$@" > "$LOG_OUT" 2> "$LOG_ERR" &
  SERVER_PID=$!
  PORT=""
  local deadline=$((SECONDS + 30))
  while [ -z "$PORT" ] && [ $SECONDS -lt $deadline ]; do
    # Any --host (127.0.0.1 by default, 0.0.0.0 too); clients use 127.0.0.1 either way.
    PORT=$(sed -n 's/.*listening on https\{0,1\}:\/\/[^ ]*:\([0-9]*\) (.*/\1/p' "$LOG_OUT")
    if ! kill -0 "$SERVER_PID" 2> /dev/null; then break; fi
    [ -z "$PORT" ] && sleep 0.05
  done
  if [ -z "$PORT" ]; then
    echo "server $name did not start:" >&2; cat "$LOG_ERR" >&2; exit 1
  fi
  BASE=http://127.0.0.1:$PORT
}

# status_of URL [curl args...]: the HTTP status code only.
status_of() { local url=$1; shift; curl -s -o /dev/null -w '%{http_code}' "$@" "$url"; }

wait_ready() {
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(status_of "$BASE/ready")" = 200 ] && return 0
    sleep 0.05
  done
  fail "server not ready within $1 s"; return 1
}

# wait_status URL CODE SECONDS: poll until URL answers CODE.
wait_status() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(status_of "$1")" = "$2" ] && return 0
    sleep 0.02
  done
  return 1
}

worker_pid() { pgrep -P "$SERVER_PID" | head -n 1; }

# load_now: "ACTIVE,QUEUED" from /ready (top-level keys "active" and "queued"; the nested
# stats object comes after them, so the first match of each is the top-level one).
load_now() {
  local body active
  body=$(curl -s "$BASE/ready")
  [[ $body =~ ^\{\"active\":([0-9]+), ]] || return 0
  active=${BASH_REMATCH[1]}
  [[ $body =~ \"queued\":([0-9]+), ]] && echo "$active,${BASH_REMATCH[1]}"
}

# wait_load "ACTIVE,QUEUED" SECONDS: poll /ready until it reports that load.
wait_load() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(load_now)" = "$1" ] && return 0
    sleep 0.02
  done
  return 1
}

# now_ms: a clock in milliseconds, for measuring how long something took.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

stop_server() {
  kill -TERM "$SERVER_PID" 2> /dev/null || return 0
  local deadline=$((SECONDS + 30))
  while kill -0 "$SERVER_PID" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
  if kill -0 "$SERVER_PID" 2> /dev/null; then
    fail "server did not exit on SIGTERM"; kill -KILL "$SERVER_PID"
  fi
  wait "$SERVER_PID" 2> /dev/null
}

# json_get FILE EXPR: a field of a JSON document via node (always present with the tests).
json_get() { node -e "const d=JSON.parse(require('fs').readFileSync('$1','utf8')); const v=($2); console.log(typeof v==='string'?v:JSON.stringify(v))"; }
