#!/usr/bin/env bash
# Gate "kill9": a streaming completion runs on the slow test model (make_test_model --slow);
# once tokens flow, the worker (the server's child) gets SIGKILL. The stream must end within
# 10 s without [DONE] (an SSE error event, or a terminated stream), the HTTP process must stay
# up, /ready must be 200 again within 15 s, tessera_worker_restarts_total must move by exactly
# 1, the worker must be a new process, and the next greedy request must answer exactly as
# before the kill. Short: once; full: three times.
#   GATE_MODE=short ... bash scripts/gates/kill9.sh   (run by scripts/release-gates.sh)
. "$(dirname "$0")/lib.sh"

rounds=1
[ "$GATE_MODE" = full ] && rounds=3
end_bound_ms=10000 ready_bound_ms=15000
slow=$(test_model slow --slow)

start_server kill9 --model "slow=$slow" --no-auth --rate-limit 0 --metrics-public
wait_ready 60 || gate_end
cat > "$WORK/spec.json" << EOF
{"base": "$BASE", "clients": 1, "requests": 1, "deadline_s": 60,
 "kinds": [{"name": "slow-greedy", "path": "/v1/completions",
            "body": {"model": "slow", "prompt": "Once upon a time", "max_tokens": 8}}]}
EOF
node "$CLIENT" refs "$WORK/spec.json" > "$WORK/refs.json" || { fail "reference answer"; gate_end; }
sed -i "s/\"kinds\"/\"refs\": $(sed 's/[&/\]/\\&/g' "$WORK/refs.json"), \"kinds\"/" "$WORK/spec.json"

for ((round = 1; round <= rounds; round++)); do
  restarts0=$(metric tessera_worker_restarts_total)
  stream=$WORK/stream-$round.txt
  curl -sN --max-time 120 -H 'Content-Type: application/json' \
    -d '{"model":"slow","prompt":"Once upon a time","max_tokens":3000,"stream":true}' \
    "$BASE/v1/completions" > "$stream" &
  client=$!
  # Mid-stream: wait (bounded) until at least three chunks with text arrived.
  deadline=$((SECONDS + 30))
  while [ "$(grep -c '"text"' "$stream" || true)" -lt 3 ] && [ $SECONDS -lt $deadline ]; do sleep 0.02; done
  chunks_before=$(grep -c '"text"' "$stream" || true)
  old_wpid=$(wpid_now)
  if [ "$chunks_before" -lt 3 ] || [ -z "$old_wpid" ]; then
    fail "round $round: the stream did not start ($chunks_before chunks, worker '$old_wpid')"
    kill "$client" 2> /dev/null || true; wait "$client" 2> /dev/null || true
    break
  fi
  kill -KILL "$old_wpid"
  t_kill=$(now_ms)
  # The client's stream must end by itself (no hang).
  deadline=$((SECONDS + end_bound_ms / 1000))
  while kill -0 "$client" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.02; done
  end_ms=$(($(now_ms) - t_kill))
  if kill -0 "$client" 2> /dev/null; then
    fail "round $round: the stream still open $end_ms ms after the kill"
    kill "$client" 2> /dev/null || true
  fi
  curl_status=0
  wait "$client" || curl_status=$?
  # Readiness comes back once the new worker has loaded and warmed the model.
  ready_ms=-1
  deadline=$((SECONDS + ready_bound_ms / 1000 + 1))
  while [ $SECONDS -lt $deadline ]; do
    if [ "$(status_of "$BASE/ready")" = 200 ]; then ready_ms=$(($(now_ms) - t_kill)); break; fi
    sleep 0.02
  done
  error_event=no done_marker=no
  grep -q '^data: {"error"' "$stream" && error_event=yes
  grep -q '^data: \[DONE\]' "$stream" && done_marker=yes
  new_wpid=$(wpid_now)
  restarts1=$(metric tessera_worker_restarts_total)
  node "$CLIENT" run "$WORK/spec.json" > "$WORK/after-$round.json"
  figure "round $round" "$chunks_before chunks before the kill; stream ended after $end_ms ms (curl exit $curl_status, SSE error event $error_event, [DONE] $done_marker); /ready 200 after $ready_ms ms; restarts $restarts0 -> $restarts1; worker $old_wpid -> $new_wpid"

  [ "$error_event" = yes ] || [ "$curl_status" -ne 0 ] || fail "round $round: the stream ended without an error event or a terminated transfer"
  check "round $round: no [DONE] after the kill" no "$done_marker"
  [ "$end_ms" -le "$end_bound_ms" ] || fail "round $round: stream ended after $end_ms ms (bound $end_bound_ms)"
  kill -0 "$SERVER_PID" 2> /dev/null || { fail "round $round: the HTTP process died"; break; }
  check "round $round: /health" 200 "$(status_of "$BASE/health")"
  [ "$ready_ms" -ge 0 ] && [ "$ready_ms" -le "$ready_bound_ms" ] || fail "round $round: /ready not 200 within $ready_bound_ms ms ($ready_ms)"
  check "round $round: worker restarts moved by 1" $((restarts0 + 1)) "$restarts1"
  [ -n "$new_wpid" ] && [ "$new_wpid" != "$old_wpid" ] || fail "round $round: no new worker ($old_wpid -> '$new_wpid')"
  check "round $round: the next greedy answer equals the one before the kill" 1 "$(json_get "$WORK/after-$round.json" d.ok)"
done
gate_end
