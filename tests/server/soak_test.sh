#!/usr/bin/env bash
# Soak: sequential completions with model switches under --max-loaded-models 1, checking
# that every greedy answer stays identical, the worker never restarts, and the resident
# memory of the HTTP process and of the worker grows less than a bound.
#   soak_test.sh TESSERA WORK TINY_MODEL STORIES_MODEL COMPLETIONS SWITCHES MAX_GROWTH_KB
TESSERA=$1 WORK=$2 TINY=$3 STORIES=$4 COMPLETIONS=$5 SWITCHES=$6 MAX_GROWTH_KB=$7
mkdir -p "$WORK"
. "$(dirname "$0")/server_lib.sh"

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
completion() {  # completion MODEL_BODY -> text of the first choice
  curl -s -H 'Content-Type: application/json' -d "$1" "$BASE/v1/completions" > "$WORK/soak.json"
  json_get "$WORK/soak.json" 'd.choices ? d.choices[0].text : "ERROR " + JSON.stringify(d)'
}
chat() {
  curl -s -H 'Content-Type: application/json' -d "$1" "$BASE/v1/chat/completions" > "$WORK/soak.json"
  json_get "$WORK/soak.json" 'd.choices ? d.choices[0].message.content : "ERROR " + JSON.stringify(d)'
}

start_server soak --model "stories=$STORIES" --model "tiny=$TINY" --no-auth --rate-limit 0 --max-loaded-models 1
wait_ready 60
GREEDY='{"model":"stories","prompt":"Once upon a time","max_tokens":24}'
SAMPLED='{"model":"stories","prompt":"The cat","max_tokens":24,"temperature":0.8,"seed":5}'
TINY_CHAT='{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":8}'
ref_greedy=$(completion "$GREEDY")
ref_sampled=$(completion "$SAMPLED")
ref_tiny=$(chat "$TINY_CHAT")
completion "$GREEDY" > /dev/null  # back on stories: both models have been loaded once
wpid=$(worker_pid)
server_start_kb=$(rss_kb "$SERVER_PID")
worker_start_kb=$(rss_kb "$wpid")
every=$((COMPLETIONS / (SWITCHES / 2 > 0 ? SWITCHES / 2 : 1)))
switches=0 mismatches=0 t0=$SECONDS
for ((i = 1; i <= COMPLETIONS; i++)); do
  if ((i % 2)); then got=$(completion "$GREEDY"); want=$ref_greedy; else got=$(completion "$SAMPLED"); want=$ref_sampled; fi
  [ "$got" = "$want" ] || { mismatches=$((mismatches + 1)); echo "mismatch at $i: $got" >&2; }
  if ((i % every == 0 && switches < SWITCHES)); then
    # stories -> tiny -> stories: two switches, each an unload, a load and a prewarm
    [ "$(chat "$TINY_CHAT")" = "$ref_tiny" ] || mismatches=$((mismatches + 1))
    switches=$((switches + 2))
  fi
done
elapsed=$((SECONDS - t0))
server_end_kb=$(rss_kb "$SERVER_PID")
worker_end_kb=$(rss_kb "$wpid")
check "the worker never restarted" "$wpid" "$(worker_pid)"
check "every answer identical to the first" 0 "$mismatches"
check "model switches done" "$SWITCHES" "$switches"
server_growth=$((server_end_kb - server_start_kb))
worker_growth=$((worker_end_kb - worker_start_kb))
echo "soak: $COMPLETIONS completions, $switches switches in ${elapsed} s;" \
     "server RSS ${server_start_kb} -> ${server_end_kb} kB (${server_growth}), worker RSS ${worker_start_kb} -> ${worker_end_kb} kB (${worker_growth})"
[ "$server_growth" -lt "$MAX_GROWTH_KB" ] && pass "server RSS growth < $MAX_GROWTH_KB kB" || fail "server RSS grew ${server_growth} kB"
[ "$worker_growth" -lt "$MAX_GROWTH_KB" ] && pass "worker RSS growth < $MAX_GROWTH_KB kB" || fail "worker RSS grew ${worker_growth} kB"
stop_server
echo "failures: $FAILURES"
[ "$FAILURES" -eq 0 ]
