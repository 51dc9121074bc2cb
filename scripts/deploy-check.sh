#!/usr/bin/env bash
# Runs the scale-out recipe's proxy config (deploy/compose/nginx.conf) with a local nginx in
# front of two local tessera replicas, and checks what docs/deploy.md promises of it: auth
# passes through, /metrics is not exposed, requests reach both replicas, SSE is streamed
# unbuffered, and a dead replica's share goes to the other.
#   scripts/deploy-check.sh [BUILD_DIR]    (needs nginx: apt-get install nginx; not a test dep)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shared=${TESSERA_SHARED_DIR:-$root/../shared}
NGINX=${NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || { echo "deploy-check: needs nginx ($NGINX): apt-get install nginx" >&2; exit 2; }
work=$build/deploy-check
rm -rf "$work" && mkdir -p "$work"
"$build/tests/server/make_test_model" "$work/slow" --slow > /dev/null
export TESSERA_API_KEY=deploy-check-key
AUTH=(-H "Authorization: Bearer $TESSERA_API_KEY")
FAILURES=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

start_replica() {  # start_replica N -> sets PORT_N
  local n=$1
  "$build/apps/tessera" serve --port 0 --rate-limit 0 --log-format json \
    --model "stories=$shared/models/stories260k" --model "slow=$work/slow" \
    > "$work/replica$n.out" 2> "$work/replica$n.err" &
  pids+=($!)
  eval "PID_$n=$!"
  local port="" deadline=$((SECONDS + 30))
  while [ -z "$port" ] && [ $SECONDS -lt $deadline ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/replica$n.out")
    [ -z "$port" ] && sleep 0.05
  done
  [ -n "$port" ] || { echo "replica $n did not start" >&2; cat "$work/replica$n.err" >&2; exit 1; }
  eval "PORT_$n=$port"
  deadline=$((SECONDS + 60))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ready")" = 200 ]; do
    [ $SECONDS -lt $deadline ] || { echo "replica $n not ready" >&2; exit 1; }
    sleep 0.05
  done
}
start_replica 1
start_replica 2

# The compose file's nginx.conf with the upstream pointed at the two replicas and the listener
# on a free loopback port; everything else as shipped.
proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -e "s|server tessera:8000 \(.*\);|server 127.0.0.1:$PORT_1 \1;\n    server 127.0.0.1:$PORT_2 \1;|" \
    -e "s|listen 8080;|listen 127.0.0.1:$proxy_port;|" \
    -e "s|/tmp/|$work/|g" \
    -e "s|access_log /dev/stdout;|access_log $work/nginx.access;|" \
    -e "s|error_log /dev/stderr warn;|error_log $work/nginx.error warn;|" \
    "$root/deploy/compose/nginx.conf" > "$work/nginx.conf"
grep -q "127.0.0.1:$PORT_2" "$work/nginx.conf" || { echo "could not rewrite the upstream" >&2; exit 1; }
"$NGINX" -t -p "$work" -c "$work/nginx.conf" -g 'daemon off;' 2> "$work/nginx-t.txt" &&
  pass "nginx -t accepts deploy/compose/nginx.conf ($("$NGINX" -v 2>&1))" || { fail "nginx -t"; cat "$work/nginx-t.txt"; exit 1; }
"$NGINX" -p "$work" -c "$work/nginx.conf" -g 'daemon off;' 2>> "$work/nginx.error" &
pids+=($!)
P=http://127.0.0.1:$proxy_port
deadline=$((SECONDS + 10))
until curl -s -o /dev/null "$P/health"; do [ $SECONDS -lt $deadline ] || { fail "nginx did not listen"; exit 1; }; sleep 0.05; done

code() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }
[ "$(code "$P/health")" = 200 ] && pass "/health through the proxy" || fail "/health"
[ "$(code "$P/v1/models")" = 401 ] && pass "no key -> 401 through the proxy" || fail "401 expected"
[ "$(code "${AUTH[@]}" "$P/v1/models")" = 200 ] && pass "key passes through: /v1/models 200" || fail "/v1/models with key"
[ "$(code "${AUTH[@]}" "$P/metrics")" = 404 ] && pass "/metrics not exposed by the proxy (404)" || fail "/metrics exposed"

BODY='{"model":"stories","prompt":"Once upon a time","max_tokens":20}'
ref=$(curl -s "${AUTH[@]}" -H 'Content-Type: application/json' -d "$BODY" "http://127.0.0.1:$PORT_1/v1/completions" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
before1=$(grep -c '"path":"/v1/completions"' "$work/replica1.err" || true)
before2=$(grep -c '"path":"/v1/completions"' "$work/replica2.err" || true)
same=0
for i in $(seq 1 10); do
  got=$(curl -s "${AUTH[@]}" -H 'Content-Type: application/json' -d "$BODY" "$P/v1/completions" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
  [ "$got" = "$ref" ] && same=$((same + 1))
done
n1=$(( $(grep -c '"path":"/v1/completions"' "$work/replica1.err") - before1 ))
n2=$(( $(grep -c '"path":"/v1/completions"' "$work/replica2.err") - before2 ))
[ $same = 10 ] && pass "10 completions through the proxy equal the replica's own greedy answer" || fail "$same/10 answers equal"
[ $n1 -gt 0 ] && [ $n2 -gt 0 ] && pass "spread over both replicas ($n1 + $n2)" || fail "not spread: $n1 + $n2"

# SSE through the proxy: events arrive as they are generated, as they do straight from a
# replica, not in batches (a buffering proxy hands them over a few KiB at a time). An arrival
# is a group of events less than 0.3 ms apart.
sse_arrivals() {  # sse_arrivals BASE -> "EVENTS ARRIVALS DONE"
  curl -s -N "${AUTH[@]}" -H 'Content-Type: application/json' \
    -d '{"model":"slow","prompt":"Hi","max_tokens":400,"stream":true}' "$1/v1/completions" |
    python3 -c '
import sys, time
times = []; done = 0
for line in sys.stdin:
    if line.startswith("data: "):
        times.append(time.monotonic())
        if line.strip() == "data: [DONE]": done = 1
print(len(times), 1 + sum(1 for a, b in zip(times, times[1:]) if b - a > 0.0003), done)'
}
read -r d_events d_arrivals d_done <<< "$(sse_arrivals "http://127.0.0.1:$PORT_2")"
read -r events arrivals done <<< "$(sse_arrivals "$P")"
if [ "$done" = 1 ] && [ "$events" = "$d_events" ] && [ "$d_arrivals" -gt 20 ] &&
  [ $((arrivals * 2)) -ge "$d_arrivals" ]; then
  pass "SSE streamed through the proxy: $events events in $arrivals arrivals (straight from a replica: $d_arrivals)"
else
  fail "SSE through the proxy: $events events in $arrivals arrivals, [DONE]=$done (straight: $d_events in $d_arrivals)"
fi

# One replica dies: every request still succeeds on the other.
kill -9 "$PID_1"
wait "$PID_1" 2> /dev/null || true
ok=0
for i in $(seq 1 10); do
  [ "$(code "${AUTH[@]}" -H 'Content-Type: application/json' -d "$BODY" "$P/v1/completions")" = 200 ] && ok=$((ok + 1))
done
[ $ok = 10 ] && pass "replica 1 killed: 10/10 requests answered by replica 2" || fail "after a replica died: $ok/10"
echo "deploy-check: $FAILURES failed"
exit $((FAILURES > 0))
