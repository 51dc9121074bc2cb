#!/usr/bin/env bash
# End-to-end tests of `tessera serve` with curl and raw sockets: auth, validation, limits,
# CORS, queueing, rate limiting, health/readiness, worker crash and deadline recovery, and
# greedy equality with `tessera generate`.
#   curl_e2e_test.sh TESSERA WORK TINY_MODEL SLOW_MODEL STORIES_MODEL
TESSERA=$1 WORK=$2 TINY=$3 SLOW=$4 STORIES=$5
# Absolute model paths: some are symlinked from inside $WORK, where a relative target dangles.
WORK=$(realpath -m "$WORK") TINY=$(realpath -m "$TINY") SLOW=$(realpath -m "$SLOW")
STORIES=$(realpath -m "$STORIES")
mkdir -p "$WORK"
. "$(dirname "$0")/server_lib.sh"
trap 'kill $(jobs -p) 2> /dev/null' EXIT

CHAT='{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}'
post() {  # post PATH BODY [curl args...] -> writes $WORK/body, echoes the status
  local path=$1 body=$2; shift 2
  curl -s -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@" --data-binary "$body" "$BASE$path"
}

# ---------------------------------------------------------------- auth, validation, limits
export TESSERA_API_KEY=test-key-123
# One slot and two places in the queue, so the queue checks below are exact.
start_server main --model "tiny=$TINY" --model "stories=$STORIES" --model "slow=$SLOW" \
  --max-loaded-models 2 --rate-limit 1000 --parallel 1 --max-queued 2 --log-format json
check "/health is 200 as soon as the port is open" 200 "$(status_of "$BASE/health")"
wait_ready 60
AUTH=(-H "Authorization: Bearer $TESSERA_API_KEY")

check "no key -> 401" 401 "$(post /v1/chat/completions "$CHAT")"
check "401 error type" invalid_request_error "$(json_get "$WORK/body" d.error.type)"
check "wrong key -> 401" 401 "$(post /v1/chat/completions "$CHAT" -H 'Authorization: Bearer nope')"
check "right key -> 200" 200 "$(post /v1/chat/completions "$CHAT" "${AUTH[@]}")"
check "/v1/models lists every model" '["tiny","stories","slow"]' "$(curl -s "${AUTH[@]}" "$BASE/v1/models" > "$WORK/models"; json_get "$WORK/models" 'd.data.map(m=>m.id)')"
check "usage present" 8 "$(json_get "$WORK/body" d.usage.completion_tokens)"
check "x_tessera_stats.sampling.mode" greedy "$(json_get "$WORK/body" d.x_tessera_stats.sampling.mode)"
check "x_tessera_stats has ttft" number "$(json_get "$WORK/body" 'typeof d.x_tessera_stats.ttft_ms')"
tiny_chat=$(json_get "$WORK/body" d.choices[0].message.content)

# Every JSON answer carries usage and x_tessera_stats, errors beside the OpenAI error object.
curl -s "$BASE/health" > "$WORK/health.json"
curl -s "$BASE/ready" > "$WORK/ready.json"
check "/health x_tessera_stats" "ready,0,0,number" "$(json_get "$WORK/health.json" \
  '[d.x_tessera_stats.worker_state, d.x_tessera_stats.worker_restarts, d.usage.total_tokens, typeof d.x_tessera_stats.uptime_s].join()')"
check "/ready x_tessera_stats: queue, worker, uptime" "0,0,ready,0,true" "$(json_get "$WORK/ready.json" \
  '[d.x_tessera_stats.active, d.x_tessera_stats.queued, d.x_tessera_stats.worker_state, d.x_tessera_stats.worker_restarts, d.x_tessera_stats.uptime_s > 0].join()')"
check "/v1/models x_tessera_stats and usage" "number,0" "$(json_get "$WORK/models" \
  '[typeof d.x_tessera_stats.queue_wait_ms, d.usage.prompt_tokens].join()')"
post /v1/chat/completions '{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}' "${AUTH[@]}" > /dev/null
check "a 404 keeps the OpenAI error shape and adds x_tessera_stats" "model_not_found,number,ready" "$(json_get "$WORK/body" \
  '[d.error.code, typeof d.x_tessera_stats.queue_wait_ms, d.x_tessera_stats.worker_state].join()')"
post /v1/chat/completions "$CHAT" > /dev/null
check "a 401 carries x_tessera_stats too" "invalid_api_key,object" "$(json_get "$WORK/body" '[d.error.code, typeof d.x_tessera_stats].join()')"
curl -s "${AUTH[@]}" "$BASE/no/such/endpoint" > "$WORK/body"
check "an unknown endpoint's 404 carries x_tessera_stats" "not_found,object" "$(json_get "$WORK/body" '[d.error.code, typeof d.x_tessera_stats].join()')"

for field in '"temperature":2.5' '"temperature":-1' '"top_p":0' '"top_p":1.5' '"top_k":-3' '"min_p":2' \
             '"repetition_penalty":0' '"presence_penalty":2.5' '"frequency_penalty":-3' '"seed":-1' \
             '"top_logprobs":21,"logprobs":true' '"n":17' '"n":0' '"max_tokens":0' '"stop":["a","b","c","d","e"]' \
             '"user":"u"' '"logit_bias":{"x":1}' '"logit_bias":{"5":101}' '"response_format":{"type":"xml"}' \
             '"tool_choice":"required"' '"parallel_tool_calls":false'; do
  name=$(echo "$field" | sed 's/^"\([a-z_]*\)".*/\1/')
  body="{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],$field}"
  check "400 for $field" 400 "$(post /v1/chat/completions "$body" "${AUTH[@]}")"
  check "400 for $field names the field" "$name" "$(json_get "$WORK/body" d.error.param)"
done
check "400 type" invalid_request_error "$(json_get "$WORK/body" d.error.type)"

check "unknown model -> 404" 404 "$(post /v1/chat/completions '{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}' "${AUTH[@]}")"
check "404 code" model_not_found "$(json_get "$WORK/body" d.error.code)"

head -c 1200000 /dev/zero | tr '\0' 'a' > "$WORK/big"
code=$(curl -s -o "$WORK/body" -w '%{http_code}' "${AUTH[@]}" -H 'Content-Type: application/json' --data-binary "@$WORK/big" "$BASE/v1/completions")
check "1.2 MB body -> 413" 413 "$code"
check "413 in OpenAI error shape" body_too_large "$(json_get "$WORK/body" d.error.code)"

long=$(printf 'word %.0s' $(seq 1 600))
check "prompt over the context -> 400" 400 "$(post /v1/completions "{\"model\":\"tiny\",\"prompt\":\"$long\"}" "${AUTH[@]}")"
check "over-long prompt code" context_length_exceeded "$(json_get "$WORK/body" d.error.code)"
check "over-long prompt says so" true "$(json_get "$WORK/body" 'd.error.message.includes("context")')"

deep=$(printf '[%.0s' $(seq 1 100))$(printf ']%.0s' $(seq 1 100))
check "JSON nested 100 deep -> 400" 400 "$(post /v1/chat/completions "{\"messages\":$deep}" "${AUTH[@]}")"
check "malformed JSON -> 400" 400 "$(post /v1/chat/completions '{"messages": [' "${AUTH[@]}")"

check "tokenize" 200 "$(post /tokenize '{"model":"stories","prompt":"Once upon a time"}' "${AUTH[@]}")"
ids=$(json_get "$WORK/body" d.tokens)
check "tokenize usage counts the ids" "$(json_get "$WORK/body" d.tokens.length)" "$(json_get "$WORK/body" d.usage.prompt_tokens)"
check "tokenize carries x_tessera_stats" number "$(json_get "$WORK/body" 'typeof d.x_tessera_stats.queue_wait_ms')"
check "detokenize" 200 "$(post /detokenize "{\"model\":\"stories\",\"tokens\":$ids}" "${AUTH[@]}")"
check "detokenize round trip" true "$(json_get "$WORK/body" 'd.prompt.includes("Once upon a time")')"

# Stop strings on the real trained model: the stop never shows, streamed or not.
check "completion with stop" 200 "$(post /v1/completions '{"model":"stories","prompt":"Once upon a time","max_tokens":40}' "${AUTH[@]}")"
full=$(json_get "$WORK/body" d.choices[0].text)
check "completion without stop has 'Lily'" true "$(json_get "$WORK/body" 'd.choices[0].text.includes("Lily")')"
post /v1/completions '{"model":"stories","prompt":"Once upon a time","max_tokens":40,"stop":["Lily"]}' "${AUTH[@]}" > /dev/null
check "stop string cuts the text" "${full%%Lily*}" "$(json_get "$WORK/body" d.choices[0].text)"
check "finish_reason stop" stop "$(json_get "$WORK/body" d.choices[0].finish_reason)"
curl -sN "${AUTH[@]}" -H 'Content-Type: application/json' -d '{"model":"stories","prompt":"Once upon a time","max_tokens":40,"stop":["Lily"],"stream":true}' "$BASE/v1/completions" > "$WORK/sse"
streamed=$(node -e "
  const lines=require('fs').readFileSync('$WORK/sse','utf8').split('\n').filter(l=>l.startsWith('data: ')&&!l.includes('[DONE]'));
  process.stdout.write(lines.map(l=>JSON.parse(l.slice(6))).map(c=>c.choices.length?c.choices[0].text:'').join(''));")
check "streamed text with stop equals the non-streamed cut" "${full%%Lily*}" "$streamed"

# Greedy through the server equals `tessera generate` on the same prompt.
"$TESSERA" generate --placement reference --model "$STORIES" --prompt "Once upon a time" --max-tokens 40 --json > "$WORK/gen.json" 2> /dev/null
check "greedy completion equals tessera generate" "$(json_get "$WORK/gen.json" d.completion_text)" "$full"
printf '%s\n' '{"messages":[{"role":"user","content":"Hello"}],"add_generation_prompt":true}' |
  "$TESSERA" render-chat --model "$TINY" > "$WORK/rendered.json"
# (node builds the body: a shell variable would lose the template's trailing newline)
tokenize_body=$(node -e "const d=JSON.parse(require('fs').readFileSync('$WORK/rendered.json','utf8'));
  console.log(JSON.stringify({model:'tiny',prompt:d.rendered,add_special_tokens:false}))")
post /tokenize "$tokenize_body" "${AUTH[@]}" > /dev/null
chat_ids=$(json_get "$WORK/body" 'd.tokens.join(",")')
"$TESSERA" generate --placement reference --model "$TINY" --prompt-ids "$chat_ids" --max-tokens 8 --json > "$WORK/gen_chat.json" 2> /dev/null
post /v1/chat/completions "$CHAT" "${AUTH[@]}" > /dev/null
check "greedy chat equals tessera generate on the rendered prompt" \
  "$(json_get "$WORK/gen_chat.json" d.completion_text)" "$(json_get "$WORK/body" d.choices[0].message.content)"
check "chat prompt tokens equal the rendered prompt's" "$(json_get "$WORK/gen_chat.json" d.prompt_ids.length)" \
  "$(json_get "$WORK/body" d.usage.prompt_tokens)"

# ------------------------------------------- malformed, truncated and slow clients
# A healthy streamed request runs while the bad clients misbehave.
curl -sN "${AUTH[@]}" -H 'Content-Type: application/json' \
  -d '{"model":"slow","messages":[{"role":"user","content":"Hi"}],"max_tokens":60,"stream":true}' \
  "$BASE/v1/chat/completions" > "$WORK/healthy.sse" &
healthy=$!
exec 5<> "/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"prom' >&5
exec 5>&-   # truncated: the client hangs up mid-body
exec 6<> "/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 50\r\n\r\n{"pro' "$TESSERA_API_KEY" >&6
check "malformed JSON beside a healthy stream -> 400" 400 "$(post /v1/completions '{"prompt": "a",,}' "${AUTH[@]}")"
wait "$healthy"
check "healthy stream finished with [DONE]" 1 "$(grep -c '^data: \[DONE\]' "$WORK/healthy.sse")"
exec 6>&-

# ------------------------------------------------------------- queue full -> 429
long_req='{"model":"slow","messages":[{"role":"user","content":"Hi"}],"max_tokens":3000,"stream":true}'
pids=()
for i in 1 2 3; do
  curl -sN "${AUTH[@]}" -H 'Content-Type: application/json' -d "$long_req" "$BASE/v1/chat/completions" > "$WORK/long$i" &
  pids+=($!)
done
wait_load "1,2" 30
check "1 active + 2 queued" "1,2" "$(load_now)"
code=$(curl -s -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' "${AUTH[@]}" -H 'Content-Type: application/json' -d "$CHAT" "$BASE/v1/chat/completions")
check "4th concurrent request -> 429" 429 "$code"
check "429 has Retry-After" 1 "$(grep -ci '^retry-after: [0-9]' "$WORK/headers")"
kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null
# Client disconnects cancel generation: the queue drains well before 3000 tokens each.
wait_load "0,0" 30
check "disconnected clients are cancelled and the queue drains" "0,0" "$(load_now)"

# ------------------------------- non-streamed requests are cancelled when the client leaves
# 3000 tokens of the slow model take tens of seconds; a client that hangs up must free its
# slot (or its place in the queue) within a few, and the access log must say why.
long_plain='{"model":"slow","messages":[{"role":"user","content":"Hi"}],"max_tokens":3000}'
log_mark=$(wc -l < "$LOG_ERR")
curl -s "${AUTH[@]}" -H 'Content-Type: application/json' -d "$long_plain" "$BASE/v1/chat/completions" > /dev/null &
running=$!
wait_load "1,0" 30 || fail "the long non-streamed request did not start"
curl -s "${AUTH[@]}" -H 'Content-Type: application/json' -d "$long_plain" "$BASE/v1/chat/completions" > /dev/null &
queued=$!
wait_load "1,1" 30 || fail "the second non-streamed request was not queued"
kill "$queued"; wait "$queued" 2> /dev/null
wait_load "1,0" 5 && pass "a queued non-streamed client that hangs up leaves the queue" ||
  fail "the queue still holds a client that left: $(load_now)"
t0=$(now_ms)
kill "$running"; wait "$running" 2> /dev/null
wait_load "0,0" 10 && pass "a running non-streamed request is cancelled when its client hangs up ($(($(now_ms) - t0)) ms)" ||
  fail "the abandoned non-streamed request still runs: $(load_now)"
t0=$(now_ms)
check "the next request is served at once" 200 "$(post /v1/chat/completions "$CHAT" "${AUTH[@]}")"
echo "note: next request answered in $(($(now_ms) - t0)) ms"
check "the access log shows both as 499 client_disconnected" 2 \
  "$(tail -n "+$((log_mark + 1))" "$LOG_ERR" | grep '^{' | grep '"type":"access"' | grep '"path":"/v1/chat/completions"' | grep '"finish_reason":"client_disconnected"' | grep -c '"status":499')"

# A long prompt is cancelled during its prefill too (checked between 256-token chunks): the
# slot frees within a chunk's time, long before the whole prompt would have run.
long_prompt=$(printf 'the cat sat on a mat %.0s' $(seq 1 200))
post /tokenize "{\"model\":\"slow\",\"prompt\":\"$long_prompt\"}" "${AUTH[@]}" > /dev/null
prompt_count=$(json_get "$WORK/body" d.count)
[ "$prompt_count" -gt 1500 ] && [ "$prompt_count" -lt 4000 ] && pass "a long prompt of $prompt_count tokens" ||
  fail "the long prompt has $prompt_count tokens"
curl -s "${AUTH[@]}" -H 'Content-Type: application/json' \
  -d "{\"model\":\"slow\",\"prompt\":\"$long_prompt\",\"max_tokens\":1}" "$BASE/v1/completions" > /dev/null &
prefilling=$!
wait_load "1,0" 30 || fail "the long prompt did not start"
t0=$(now_ms)
kill "$prefilling"; wait "$prefilling" 2> /dev/null
wait_load "0,0" 10 && pass "a prompt is cancelled during its prefill ($(($(now_ms) - t0)) ms)" ||
  fail "the abandoned prefill still runs: $(load_now)"

# ------------------------------------- kill -9 of the worker mid-stream, then recovery
post /v1/completions '{"model":"stories","prompt":"Once upon a time","max_tokens":30}' "${AUTH[@]}" > /dev/null
fresh=$(json_get "$WORK/body" d.choices[0].text)
: > "$WORK/killed.sse"  # emptied here: the background job's own redirection may come later
curl -sN "${AUTH[@]}" -H 'Content-Type: application/json' -d "$long_req" "$BASE/v1/chat/completions" >> "$WORK/killed.sse" &
stream=$!
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ] && [ "$(grep -c '"content"' "$WORK/killed.sse")" -lt 3 ]; do sleep 0.05; done
wpid=$(worker_pid)
kill -9 "$wpid"
wait_status "$BASE/ready" 503 10 && pass "/ready is 503 while the worker restarts" || fail "/ready never went 503"
wait "$stream"
check "the stream ends with an error event" worker_crashed \
  "$(grep '^data: {"error"' "$WORK/killed.sse" | head -n 1 | sed 's/^data: //' > "$WORK/err.json"; json_get "$WORK/err.json" d.error.code)"
check "no [DONE] after the error" 0 "$(grep -c '\[DONE\]' "$WORK/killed.sse")"
wait_status "$BASE/ready" 200 60 && pass "/ready back to 200" || fail "/ready did not recover"
[ "$(worker_pid)" != "$wpid" ] && pass "a new worker process" || fail "worker pid unchanged"
curl -s "$BASE/ready" > "$WORK/ready.json"
check "/ready counts the worker restart" "1,ready" "$(json_get "$WORK/ready.json" '[d.x_tessera_stats.worker_restarts, d.x_tessera_stats.worker_state].join()')"
check "next request succeeds" 200 "$(post /v1/completions '{"model":"stories","prompt":"Once upon a time","max_tokens":30}' "${AUTH[@]}")"
check "and equals a fresh run" "$fresh" "$(json_get "$WORK/body" d.choices[0].text)"
n_json=$(grep -c '^{.*"type":"access"' "$LOG_ERR")
n_bad=$(grep '^{.*"type":"access"' "$LOG_ERR" | node -e 'let bad=0; for (const l of require("fs").readFileSync(0,"utf8").split("\n")) { if (!l) continue; try { const j=JSON.parse(l); if (typeof j.status!=="number"||typeof j.path!=="string") bad++; } catch { bad++; } } console.log(bad)')
[ "$n_json" -gt 10 ] && [ "$n_bad" = 0 ] && pass "--log-format json: $n_json access lines, each a JSON object" ||
  fail "json access log: $n_json lines, $n_bad unparsable"
stop_server
check "SIGTERM exits 0" 0 "$?"

# ------------------------------------------------- deadline, CORS, rate limit, no-auth
start_server deadline --model "slow=$SLOW" --request-timeout 2 --socket-timeout 2 --no-auth \
  --allow-origin http://good.example --rate-limit 1000
# The slow model takes a while to load and warm, so the first look usually finds it starting.
first_ready=$(status_of "$BASE/ready")
if [ "$first_ready" = 503 ]; then pass "/ready is 503 while the first worker warms up"; else
  echo "note: the worker was ready before the first /ready ($first_ready)"; fi
check "/health is 200 meanwhile" 200 "$(status_of "$BASE/health")"
wait_ready 60
# A client that stops mid-headers is disconnected after the socket timeout.
exec 7<> "/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len' >&7
t0=$SECONDS
timeout 20 cat <&7 > /dev/null
exec 7<&-
elapsed=$((SECONDS - t0))
[ $elapsed -le 10 ] && pass "silent client dropped after the socket timeout (${elapsed} s)" || fail "silent client kept ${elapsed} s"
wpid=$(worker_pid)
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4000}')
check "request past its deadline -> 504" 504 "$code"
check "504 code" timeout "$(json_get "$WORK/body" d.error.code)"
# The deadline cancels the job only: the worker stops it at its next step and lives on.
check "after the deadline a request succeeds" 200 "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}')"
check "the same worker process after the deadline" "$wpid" "$(worker_pid)"
curl -s "$BASE/ready" > "$WORK/ready.json"
check "/ready: no worker restart after the deadline" "0,ready" "$(json_get "$WORK/ready.json" '[d.x_tessera_stats.worker_restarts, d.x_tessera_stats.worker_state].join()')"
code=$(curl -s -D "$WORK/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://good.example' \
  -H 'Access-Control-Request-Method: POST' "$BASE/v1/chat/completions")
check "CORS preflight from an allowed origin" 204 "$code"
check "CORS allow-origin header" 1 "$(grep -ci '^access-control-allow-origin: http://good.example' "$WORK/h")"
code=$(curl -s -D "$WORK/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://evil.example' \
  -H 'Access-Control-Request-Method: POST' "$BASE/v1/chat/completions")
check "CORS preflight from another origin is denied" 403 "$code"
check "no allow-origin header for it" 0 "$(grep -ci '^access-control-allow-origin' "$WORK/h")"
# The default access log is one readable line per request, client-supplied bytes escaped.
curl -s -o /dev/null "$BASE/no%0Asuch%20path?x=1"
check "text access log: a readable line per request" 1 \
  "$(grep -c '^access [0-9T:-]*Z 127\.0\.0\.1 POST /v1/chat/completions 504 [0-9.]*ms model=slow prompt=[0-9]* completion=[0-9]* queue=[0-9.]*ms ttft=[0-9.]*ms finish=timeout id=' "$LOG_ERR")"
check "text access log: a request's path cannot split the line" 1 \
  "$(grep -c '^access .* GET /no%250Asuch%2520path 404 ' "$LOG_ERR")"
stop_server

# Default flags: no per-client limit when the server listens on loopback only (one user's
# machine: scripts, agents and benchmarks run unthrottled), 30 a minute when it listens on
# other addresses too.
start_server ratelimit-loopback --model "tiny=$TINY" --no-auth
wait_ready 60
codes=$(for i in $(seq 200); do status_of "$BASE/v1/models"; echo; done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
check "200 requests in a minute to a loopback server with default flags" "200:200 " "$codes"
check "the log says there is no per-client limit and why" 1 \
  "$(grep -c 'no per-client rate limit (listening on loopback addresses only' "$LOG_ERR")"
stop_server
start_server ratelimit-any --model "tiny=$TINY" --host 0.0.0.0
wait_ready 60
codes=$(for i in $(seq 40); do status_of "$BASE/v1/models" "${AUTH[@]}"; echo; done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
check "listening on 0.0.0.0 with default flags: 30 a minute, then 429" "200:30 429:10 " "$codes"
check "the log states the limit" 1 "$(grep -c 'at most 30 requests per minute per client' "$LOG_ERR")"
stop_server

start_server ratelimit --model "tiny=$TINY" --no-auth --rate-limit 5
wait_ready 60
for i in 1 2 3 4 5; do status_of "$BASE/v1/models" > /dev/null; done
code=$(curl -s -D "$WORK/h" -o "$WORK/body" -w '%{http_code}' "$BASE/v1/models")
check "6th request in a minute -> 429" 429 "$code"
check "rate limit Retry-After" 1 "$(grep -ci '^retry-after: [0-9]' "$WORK/h")"
check "rate limit code" rate_limit_exceeded "$(json_get "$WORK/body" d.error.code)"
stop_server

# ------------------------------------------------- graceful SIGTERM with a request in flight
start_server graceful --model "slow=$SLOW" --no-auth --rate-limit 1000
wait_ready 60
: > "$WORK/graceful.sse"
curl -sN -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":150,"stream":true}' \
  "$BASE/v1/chat/completions" >> "$WORK/graceful.sse" &
inflight=$!
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ] && [ "$(grep -c '"content"' "$WORK/graceful.sse")" -lt 2 ]; do sleep 0.05; done
kill -TERM "$SERVER_PID"
wait_status "$BASE/ready" 503 5 && pass "/ready is 503 while draining" || echo "note: drained before /ready was asked"
wait "$inflight"
check "the in-flight stream completes after SIGTERM" 1 "$(grep -c '^data: \[DONE\]' "$WORK/graceful.sse")"
check "with its full length" '"length"' "$(grep -o '"finish_reason":"length"' "$WORK/graceful.sse" | head -n 1 | sed 's/.*://')"
wait "$SERVER_PID"
check "server exits 0 after draining" 0 "$?"

# ------------------------------------------------------------------------------- TLS
if openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 1 \
     -subj /CN=127.0.0.1 > /dev/null 2>&1; then
  start_server tls --model "tiny=$TINY" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" --no-auth
  BASE=https://127.0.0.1:$PORT
  deadline=$((SECONDS + 60))
  while [ $SECONDS -lt $deadline ] && [ "$(status_of "$BASE/ready" -k)" != 200 ]; do sleep 0.05; done
  check "HTTPS chat" 200 "$(post /v1/chat/completions "$CHAT" -k)"
  check "plain HTTP to the TLS port fails" 000 "$(status_of "http://127.0.0.1:$PORT/health" --max-time 5)"
  stop_server
fi

# ------------------------------------------------- --models-dir: every installed model
mkdir -p "$WORK/installed"
ln -sfn "$TINY" "$WORK/installed/tiny"
ln -sfn "$STORIES" "$WORK/installed/stories"
mkdir -p "$WORK/installed/not-a-model"
start_server modelsdir --models-dir "$WORK/installed" --model stories --no-auth
wait_ready 60
curl -s "$BASE/v1/models" > "$WORK/models.json"
check "--models-dir lists the installed models, the named default first" '["stories","tiny"]' \
  "$(json_get "$WORK/models.json" 'd.data.map(m=>m.id)')"
check "a request without a model goes to the default" 200 "$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":40}')"
check "the default is the named one" "$full" "$(json_get "$WORK/body" d.choices[0].text)"
stop_server

# ------------------- with 2 running, a job waiting inside the worker is dropped on disconnect
# One slot, two admitted: the second job waits in the worker's scheduler queue. When that
# client leaves, the job must be dropped there, not run after the first.
start_server twoactive --model "slow=$SLOW" --no-auth --parallel 1 --max-active 2 --rate-limit 1000
wait_ready 60
long_slow='{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3000}'
curl -s -H 'Content-Type: application/json' -d "$long_slow" "$BASE/v1/chat/completions" > /dev/null &
first=$!
wait_load "1,0" 30 || fail "the first long request did not start"
curl -s -H 'Content-Type: application/json' -d "$long_slow" "$BASE/v1/chat/completions" > /dev/null &
second=$!
wait_load "2,0" 30 || fail "the second long request was not admitted"
kill "$second"; wait "$second" 2> /dev/null
wait_load "1,0" 5 && pass "the job waiting in the worker is released when its client leaves" ||
  fail "the waiting job still holds its slot: $(load_now)"
kill "$first"; wait "$first" 2> /dev/null
wait_load "0,0" 5 || fail "the running job was not cancelled: $(load_now)"
t0=$(now_ms)
check "a short request right after" 200 "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4}' --max-time 60)"
waited=$(($(now_ms) - t0))
[ "$waited" -lt 5000 ] && pass "it did not wait behind the dropped job (${waited} ms)" ||
  fail "the short request waited ${waited} ms: the dropped job ran anyway"
stop_server

# ------------------------------------- idle keep-alive connections cost no thread
# One event-loop thread serves every connection: idle ones do not delay a new request at all,
# and the server closes each after the keep-alive timeout (also one that never sent a byte),
# never after the socket timeout.
start_server threads --model "tiny=$TINY" --no-auth --http-threads 1 --keep-alive-timeout 1 \
  --socket-timeout 60 --rate-limit 1000
wait_ready 60
idle_fds=()
for i in 1 2 3 4 5 6; do
  exec {fd}<> "/dev/tcp/127.0.0.1/$PORT"
  idle_fds+=("$fd")
done
# Three of them finish a keep-alive request first, then idle; the others never send a byte.
for fd in "${idle_fds[@]:0:3}"; do printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' >&"$fd"; done
t0=$(now_ms)
check "a request beside 6 idle connections on 1 event-loop thread" 200 "$(status_of "$BASE/v1/models" --max-time 30)"
waited=$(($(now_ms) - t0))
[ "$waited" -lt 4000 ] && pass "it waited ${waited} ms (keep-alive timeout 1 s, socket timeout 60 s)" ||
  fail "a request waited ${waited} ms behind idle connections"
# The server has closed every idle connection by then (EOF, not a timeout, ends each read).
closed=0
for fd in "${idle_fds[@]}"; do
  if timeout 10 cat <&"$fd" > /dev/null; then closed=$((closed + 1)); fi
  exec {fd}<&-
done
check "the server closed the idle connections" 6 "$closed"
stop_server

# 60 idle connections from one client (below the per-client cap of 64, more than the old 16
# or 64 connection threads) do not delay a request at all, with a long keep-alive timeout.
start_server manythreads --model "tiny=$TINY" --no-auth --keep-alive-timeout 10 --rate-limit 1000
wait_ready 60
idle_fds=()
for i in $(seq 1 60); do
  exec {fd}<> "/dev/tcp/127.0.0.1/$PORT"
  idle_fds+=("$fd")
done
t0=$(now_ms)
check "a request beside 60 idle connections" 200 "$(status_of "$BASE/v1/models" --max-time 30)"
waited=$(($(now_ms) - t0))
[ "$waited" -lt 3000 ] && pass "answered in ${waited} ms (keep-alive timeout 10 s)" ||
  fail "a request waited ${waited} ms beside 60 idle connections"
for fd in "${idle_fds[@]}"; do exec {fd}<&-; done
stop_server

# ------------------------- --model NAME resolves through the model store like `generate`
# A synthetic model in $TESSERA_MODELS under a hub-style name, another in a Hugging Face
# cache layout, and an alias; the worker must load the directories the names resolved to.
mkdir -p "$WORK/store" "$WORK/hub/models--hub-org--hub-chat/snapshots" "$WORK/hub/models--hub-org--hub-chat/refs"
ln -sfn "$TINY" "$WORK/store/test-org--tiny-chat"
commit=0123456789abcdef0123456789abcdef01234567
ln -sfn "$TINY" "$WORK/hub/models--hub-org--hub-chat/snapshots/$commit"
echo "$commit" > "$WORK/hub/models--hub-org--hub-chat/refs/main"
ctest_models=${TESSERA_MODELS-}
export TESSERA_MODELS=$WORK/store HF_HUB_CACHE=$WORK/hub
start_server store --model test-org/tiny-chat --model hub-org/hub-chat --model alias=test-org/tiny-chat --no-auth
wait_ready 60
curl -s "$BASE/v1/models" > "$WORK/models.json"
check "store names are served as written" '["test-org/tiny-chat","hub-org/hub-chat","alias"]' \
  "$(json_get "$WORK/models.json" 'd.data.map(m=>m.id)')"
for name in test-org/tiny-chat hub-org/hub-chat alias; do
  check "chat with the model named $name" 200 \
    "$(post /v1/chat/completions "{\"model\":\"$name\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8}")"
  check "$name answers as the same checkpoint by path" "$tiny_chat" "$(json_get "$WORK/body" d.choices[0].message.content)"
done
worker_args=$(tr '\0' ' ' < "/proc/$(worker_pid)/cmdline")
case "$worker_args" in
  *"test-org/tiny-chat=$WORK/store/test-org--tiny-chat "*"hub-org/hub-chat=$WORK/hub/models--hub-org--hub-chat/snapshots/$commit "*)
    pass "the worker was given the resolved directories" ;;
  *) fail "worker arguments: $worker_args" ;;
esac
stop_server
# Without --model or --models-dir, every installed model that tessera can run is served;
# a hub-cache snapshot that is not a model tessera runs is skipped with a note (list names
# that snapshot other-org/not-a-model@COMMIT, as no refs/main points at it).
mkdir -p "$WORK/hub/models--other-org--not-a-model/snapshots/$commit"
echo '{"model_type": "bert"}' > "$WORK/hub/models--other-org--not-a-model/snapshots/$commit/config.json"
"$TESSERA" list --json > "$WORK/listed.json"
start_server installed --no-auth
wait_ready 60
curl -s "$BASE/v1/models" > "$WORK/models.json"
check "no --model: every installed model tessera runs is served" \
  "$(json_get "$WORK/listed.json" 'JSON.stringify(d.map(m=>m.name).filter(n=>!n.startsWith("other-org/not-a-model")))')" \
  "$(json_get "$WORK/models.json" 'JSON.stringify(d.data.map(m=>m.id))')"
check "an installed model answers by its listed name" 200 \
  "$(post /v1/chat/completions '{"model":"hub-org/hub-chat","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}')"
grep -qF "skipping installed other-org/not-a-model" "$WORK/installed.err" &&
  pass "an installed checkpoint tessera cannot run is skipped with a note" ||
  fail "no skip note: $(cat "$WORK/installed.err")"
stop_server
refused() {  # refused DESCRIPTION EXPECTED_TEXT SPEC: serve must exit at once with that message
  local desc=$1 text=$2; shift 2
  timeout 20 "$TESSERA" serve --port 0 --no-auth --model "$@" > /dev/null 2> "$WORK/refused.err"
  local code=$?
  if [ "$code" -ne 0 ] && [ "$code" -ne 124 ] && grep -qF -- "$text" "$WORK/refused.err"; then
    pass "$desc: $(head -n 1 "$WORK/refused.err")"
  else
    fail "$desc (exit $code): $(cat "$WORK/refused.err")"
  fi
}
refused "--model ../x is refused at start" "../x is neither a checkpoint folder nor a GGUF file" ../x
refused "a name not installed says how to get it" "tessera pull test-org/missing" test-org/missing
refused "an invalid model name says what a name may be" "is not a model name" 'bad name!'
refused "an alias with a space is refused" "cannot be a served model name" 'my model=test-org/tiny-chat'
refused "a bare --tool-call-syntax beside two models asks which" "say which with MODEL=SYNTAX" \
  "a=$TINY" --model "b=$TINY" --tool-call-syntax hermes

# ------------------------- a checkpoint given by path is converted on first use (cpu placement)
rm -rf "$WORK/mine" && mkdir -p "$WORK/mine" && cp -rL "$TINY" "$WORK/mine/tiny-ft"
for run in first second; do
  start_server "package-$run" --placement cpu --model "ft=$WORK/mine/tiny-ft" --no-auth
  wait_ready 60
  check "cpu chat from the package ($run run)" 200 \
    "$(post /v1/chat/completions '{"model":"ft","messages":[{"role":"user","content":"Hello"}],"max_tokens":8}')"
  check "the package answers as the checkpoint ($run run)" "$tiny_chat" "$(json_get "$WORK/body" d.choices[0].message.content)"
  stop_server
done
grep -qF "into the package $WORK/mine/tiny-ft.tessera-f32 (first use)" "$WORK/package-first.err" &&
  pass "the first start converted the checkpoint beside it" || fail "no conversion: $(cat "$WORK/package-first.err")"
grep -qF "using the package $WORK/mine/tiny-ft.tessera-f32" "$WORK/package-second.err" &&
  pass "the second start reused the package" || fail "not reused: $(cat "$WORK/package-second.err")"
# Back to the models directory ctest gave: packages of read-only sources (the shared data) go
# there, never to the user's home.
if [ -n "$ctest_models" ]; then export TESSERA_MODELS=$ctest_models; else unset TESSERA_MODELS; fi
unset HF_HUB_CACHE

# ------------------------- --tool-call-syntax reaches the worker and is named where it matters
# tiny's ChatML template renders no tools: the declared syntax is kept, logged as unusable at
# load, and the refusal of a request with tools names it and where it came from.
start_server toolsyntax --model "tiny=$TINY" --tool-call-syntax tiny=hermes --no-auth
wait_ready 60
check "tools on a template that renders none -> 400" 400 "$(post /v1/chat/completions \
  '{"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}')"
check "the refusal names the declared syntax" true \
  "$(json_get "$WORK/body" 'd.error.param === "tools" && d.error.message.includes("hermes (--tool-call-syntax)")')"
grep -qF "tool calls: hermes (--tool-call-syntax)" "$LOG_ERR" &&
  pass "the worker's load line shows the declared syntax" || fail "no declared syntax in the log: $(cat "$LOG_ERR")"
grep -qF "the chat template renders no tools" "$LOG_ERR" &&
  pass "the load log says the declaration cannot work" || fail "no mismatch line in the log: $(cat "$LOG_ERR")"
stop_server

# ------------------------- a default model that cannot load: no restart loop, a clear 503
start_server load-failed --model "$STORIES" --context 100000 --no-auth
if wait_status "$BASE/ready" 503 30 && [ "$(curl -s "$BASE/ready" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).status))')" = failed ]; then
  pass "/ready says failed when the default model cannot load"
else
  fail "/ready after a failed load: $(curl -s "$BASE/ready")"
fi
check "a request gets 503 while the model cannot load" 503 \
  "$(post /v1/completions '{"model":"stories260k","prompt":"Once","max_tokens":2}')"
check "the error names the failed load" model_load_failed "$(json_get "$WORK/body" d.error.code)"
grep -qF "more than the model's max_position_embeddings" "$LOG_ERR" &&
  pass "the log says why it could not load" || fail "no reason in the log: $(cat "$LOG_ERR")"
check "the worker was not restarted" 0 "$(curl -s "$BASE/health" > /dev/null; grep -c 'exited with status.*; restarting' "$LOG_ERR")"
stop_server

if "$TESSERA" serve --model "$TINY" --host 0.0.0.0 --no-auth > /dev/null 2> "$WORK/noauth.err"; then
  fail "--no-auth on a non-loopback bind was accepted"
else
  pass "--no-auth refused on 0.0.0.0"
fi

echo "failures: $FAILURES"
[ "$FAILURES" -eq 0 ]
