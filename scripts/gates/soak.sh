#!/usr/bin/env bash
# Gate "soak": 1,000 completions (full; short 100) from two concurrent clients over five
# kinds of request (greedy and seeded-sampled completions, greedy and seeded chat, a stream)
# on two resident models, every answer identical to its kind's reference. The resident memory
# (VmRSS) of the HTTP process and of the worker is read after a warm-up and at the end, and
# sampled every 100 ms in between; the peak is VmHWM, reset after the warm-up. Bound on the
# growth, each process: 8 MiB short, 16 MiB full (docs/server.md, "Release gates", says why).
#   GATE_MODE=short ... bash scripts/gates/soak.sh   (run by scripts/release-gates.sh)
. "$(dirname "$0")/lib.sh"

completions=100 bound_kb=8192 deadline_s=300
[ "$GATE_MODE" = full ] && completions=1000 bound_kb=16384 deadline_s=1200
tiny=$(test_model tiny)
stories=$(stories_model)

start_server soak --model "stories=$stories" --model "tiny=$tiny" --no-auth --rate-limit 0 \
  --metrics-public --max-loaded-models 2
wait_ready 60 || gate_end

write_spec() {  # write_spec FILE REQUESTS
  cat > "$1" << EOF
{"base": "$BASE", "clients": 2, "requests": $2, "deadline_s": $deadline_s,
 "kinds": [
  {"name": "stories-greedy", "path": "/v1/completions",
   "body": {"model": "stories", "prompt": "Once upon a time", "max_tokens": 24}},
  {"name": "stories-sampled", "path": "/v1/completions",
   "body": {"model": "stories", "prompt": "The cat", "max_tokens": 24, "temperature": 0.8, "seed": 5}},
  {"name": "tiny-chat", "path": "/v1/chat/completions",
   "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12}},
  {"name": "stories-stream", "path": "/v1/completions",
   "body": {"model": "stories", "prompt": "One day", "max_tokens": 24, "stream": true}},
  {"name": "tiny-chat-sampled", "path": "/v1/chat/completions",
   "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 12,
            "temperature": 1.0, "top_p": 0.9, "seed": 11}}
 ],
 "refs": $(cat "$WORK/refs.json" 2> /dev/null || echo null)}
EOF
}
write_spec "$WORK/spec.json" 0
node "$CLIENT" refs "$WORK/spec.json" > "$WORK/refs.json" || { fail "reference answers"; gate_end; }
# Warm-up: both models loaded, every kind run twice, before the first reading.
write_spec "$WORK/warmup.json" 10
node "$CLIENT" run "$WORK/warmup.json" > "$WORK/warmup-result.json"
check "warm-up answers equal to their reference" 10 "$(json_get "$WORK/warmup-result.json" d.ok)"

wpid=$(wpid_now)
restarts0=$(metric tessera_worker_restarts_total)
reset_hwm "$SERVER_PID" && reset_hwm "$wpid" && hwm=yes || hwm=no
server_start=$(rss_kb "$SERVER_PID") worker_start=$(rss_kb "$wpid")
server_peak=$server_start worker_peak=$worker_start
write_spec "$WORK/spec.json" "$completions"
node "$CLIENT" run "$WORK/spec.json" > "$WORK/result.json" &
client=$!
# Sample while the client runs (it stops itself at its own deadline).
while kill -0 "$client" 2> /dev/null; do
  s=$(rss_kb "$SERVER_PID") w=$(rss_kb "$wpid")
  [ "$s" -gt "$server_peak" ] && server_peak=$s
  [ "$w" -gt "$worker_peak" ] && worker_peak=$w
  sleep 0.1
done
wait "$client" || fail "the client failed"
server_end=$(rss_kb "$SERVER_PID") worker_end=$(rss_kb "$wpid")
if [ "$hwm" = yes ]; then
  s=$(hwm_kb "$SERVER_PID") w=$(hwm_kb "$wpid")
  [ "$s" -gt "$server_peak" ] && server_peak=$s
  [ "$w" -gt "$worker_peak" ] && worker_peak=$w
fi
r() { json_get "$WORK/result.json" "$1"; }
server_growth=$((server_end - server_start)) worker_growth=$((worker_end - worker_start))
figure "completions" "$(r d.requests) in $(r d.seconds) s, by status $(r d.status), identical to reference $(r d.ok)"
figure "HTTP process RSS kB start/end/peak" "$server_start / $server_end / $server_peak (growth $server_growth)"
figure "worker RSS kB start/end/peak" "$worker_start / $worker_end / $worker_peak (growth $worker_growth)"
figure "bound on growth, each process" "$bound_kb kB (peak: VmHWM reset after warm-up: $hwm)"

check "completions answered" "$completions" "$(r d.requests)"
check "answers identical to their reference" "$completions" "$(r d.ok)"
check "other failures" '[]' "$(r d.bad)"
check "worker restarts" "$restarts0" "$(metric tessera_worker_restarts_total)"
check "the same worker process" "$wpid" "$(wpid_now)"
[ "$server_growth" -lt "$bound_kb" ] || fail "HTTP process RSS grew $server_growth kB (bound $bound_kb)"
[ "$worker_growth" -lt "$bound_kb" ] || fail "worker RSS grew $worker_growth kB (bound $bound_kb)"
gate_end
