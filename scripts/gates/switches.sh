#!/usr/bin/env bash
# Gate "switches": model switches under load. Two models (tiny from make_test_model and
# stories260k) behind --max-loaded-models 1; four concurrent clients keep asking for
# alternating models (completions, chat, a stream) until the worker has logged N model loads
# (full 100, short 10), each one an unload of the other model. Every greedy answer must equal
# that model's reference (fetched before the load starts); the only refusals allowed are
# 429/503 carrying Retry-After; the worker must not restart, and neither process's RSS may
# grow by more than the soak gate's bound (8 MiB short, 16 MiB full): a leaked model per switch
# (stories260k is ~2 MiB of weights and KV pool) would pass it within a few dozen switches.
#   GATE_MODE=short ... bash scripts/gates/switches.sh   (run by scripts/release-gates.sh)
. "$(dirname "$0")/lib.sh"

target=10 deadline_s=120 bound_kb=8192
[ "$GATE_MODE" = full ] && target=100 deadline_s=600 bound_kb=16384
tiny=$(test_model tiny)
stories=$(stories_model)

start_server switches --model "tiny=$tiny" --model "stories=$stories" --no-auth --rate-limit 0 \
  --metrics-public --max-loaded-models 1
wait_ready 60 || gate_end

cat > "$WORK/spec.json" << EOF
{"base": "$BASE", "clients": 4, "loads_log": "$LOG_ERR", "loads_target": $target,
 "deadline_s": $deadline_s,
 "kinds": [
  {"name": "tiny-chat", "path": "/v1/chat/completions",
   "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12}},
  {"name": "stories-completion", "path": "/v1/completions",
   "body": {"model": "stories", "prompt": "Once upon a time", "max_tokens": 24}},
  {"name": "tiny-completion", "path": "/v1/completions",
   "body": {"model": "tiny", "prompt": "The cat sat", "max_tokens": 12}},
  {"name": "stories-stream", "path": "/v1/completions",
   "body": {"model": "stories", "prompt": "The little dog", "max_tokens": 24, "stream": true}}
 ]}
EOF
node "$CLIENT" refs "$WORK/spec.json" > "$WORK/refs.json" || { fail "reference answers"; gate_end; }
node -e '
  const fs = require("fs"); const s = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  s.refs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  fs.writeFileSync(process.argv[1], JSON.stringify(s));' "$WORK/spec.json" "$WORK/refs.json"
wpid=$(wpid_now)
restarts0=$(metric tessera_worker_restarts_total)
# After the references both models have been loaded once: the RSS baseline.
server_start=$(rss_kb "$SERVER_PID") worker_start=$(rss_kb "$wpid")

node "$CLIENT" run "$WORK/spec.json" > "$WORK/result.json"
server_end=$(rss_kb "$SERVER_PID") worker_end=$(rss_kb "$(wpid_now)")
r() { json_get "$WORK/result.json" "$1"; }
switches=$(r 'd.loads_end - d.loads_start')
restarts1=$(metric tessera_worker_restarts_total)
figure "model switches (worker 'loaded and warmed' log lines)" "$switches (target $target)"
figure "requests" "$(r d.requests) in $(r d.seconds) s, by status $(r d.status)"
figure "answers equal to their reference" "$(r d.ok), mismatches $(r d.mismatches)"
figure "answers that waited for a model load (model_load_ms > 0)" "$(r d.load_waits)"
figure "refusals with Retry-After" "$(r d.refused_with_retry_after)"
figure "RSS kB start/end, HTTP process / worker" "$server_start / $server_end, $worker_start / $worker_end (bound on growth $bound_kb)"

[ "$switches" -ge "$target" ] || fail "only $switches model switches (target $target)"
check "the client did not run into its deadline" false "$(r d.deadline_hit)"
check "mismatched answers" 0 "$(r d.mismatches)"
check "other failures (5xx without Retry-After, 4xx, broken streams)" '[]' "$(r d.bad)"
check "worker restarts" "$restarts0" "$restarts1"
check "the same worker process" "$wpid" "$(wpid_now)"
# The status counts may hold only 200, and 429/503 (each counted above with Retry-After).
others=$(r 'Object.keys(d.status).filter(k => !["200", "429", "503"].includes(k)).join(",")')
check "statuses other than 200/429/503" "" "$others"
[ $((server_end - server_start)) -lt "$bound_kb" ] || fail "HTTP process RSS grew $((server_end - server_start)) kB"
[ $((worker_end - worker_start)) -lt "$bound_kb" ] || fail "worker RSS grew $((worker_end - worker_start)) kB"
gate_end
