#!/usr/bin/env bash
# HTTP front-end throughput: requests/s and latency of `tessera serve` for GET /health and for
# short non-streamed completions at 1, 16 and 64 concurrent keep-alive clients, measured with
# wrk (Debian's, installed by scripts/setup.sh). Give two binaries to compare them side by
# side: every (endpoint, concurrency) cell runs each binary in turn, ROUNDS times, alternating
# the order, so the machine's drift between minutes falls on both alike.
#
#   bench/http_load.sh MODEL_DIR TESSERA [OTHER_TESSERA] [--seconds S] [--rounds R]
#
# The server runs with --placement reference --no-auth --rate-limit 0 and --max-queued 64, so
# that every completion is queued and served (the default queue of 2 would answer most
# concurrent ones 429 at once, which measures refusals, not the path). Completions ask for
# 4 tokens of MODEL_DIR (stories260k is the intended one). Prints one Markdown table row per
# cell: binary, endpoint, clients, requests/s (median of the rounds), p50 and p99 latency.
set -euo pipefail
MODEL=$1; shift
BINS=("$1"); shift
if [[ $# -gt 0 && $1 != --* ]]; then BINS+=("$1"); shift; fi
SECONDS_PER=5 ROUNDS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) SECONDS_PER=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v wrk > /dev/null || { echo "wrk is missing: run scripts/setup.sh (or apt-get install wrk)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null; rm -rf "$WORK"' EXIT
cat > "$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"m","prompt":"Once upon a time","max_tokens":4}'
LUA
# wrk's summary: the latency distribution lines and Requests/sec.
report='done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end'
echo "$report" >> "$WORK/post.lua"
echo "$report" > "$WORK/get.lua"

run_cell() {  # run_cell BINARY ENDPOINT CLIENTS -> "req/s p50 p99 non2xx sockerr"
  local bin=$1 endpoint=$2 clients=$3
  "$bin" serve --port 0 --placement reference --no-auth --rate-limit 0 --max-queued 64 \
    --model "m=$MODEL" > "$WORK/out" 2> /dev/null &
  local pid=$! port="" deadline=$((SECONDS + 30))
  while [[ -z $port && $SECONDS -lt $deadline ]]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/out"); sleep 0.05
  done
  while [[ $SECONDS -lt $deadline ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ready") != 200 ]]; do sleep 0.05; done
  local script=$WORK/get.lua path=/health
  if [[ $endpoint == completion ]]; then script=$WORK/post.lua; path=/v1/completions; fi
  wrk -t "$((clients < 2 ? 1 : 2))" -c "$clients" -d "${SECONDS_PER}s" --timeout 10s -s "$script" \
    "http://127.0.0.1:$port$path" | sed -n 's/^RESULT //p'
  kill -TERM "$pid"; wait "$pid" 2> /dev/null || true
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| binary | endpoint | clients | req/s (median of $ROUNDS) | all rounds | p50 ms | p99 ms | non-2xx | socket errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for endpoint in health completion; do
  for clients in 1 16 64; do
    declare -A results=()
    for ((r = 0; r < ROUNDS; r++)); do
      order=("${!BINS[@]}")
      if ((r % 2 == 1)); then order=($(printf '%s\n' "${order[@]}" | tac)); fi
      for i in "${order[@]}"; do
        results[$i]+="$(run_cell "${BINS[$i]}" "$endpoint" "$clients")"$'\n'
      done
    done
    for i in "${!BINS[@]}"; do
      rows=$(printf '%s' "${results[$i]}" | sed '/^$/d')
      med=$(echo "$rows" | awk '{print $1}' | median)
      all=$(echo "$rows" | awk '{print $1}' | paste -sd' ')
      p50=$(echo "$rows" | awk '{print $2}' | median)
      p99=$(echo "$rows" | awk '{print $3}' | median)
      non2xx=$(echo "$rows" | awk '{s+=$4} END {print s}')
      errs=$(echo "$rows" | awk '{s+=$5} END {print s}')
      echo "| ${BINS[$i]} | $endpoint | $clients | $med | $all | $p50 | $p99 | $non2xx | $errs |"
    done
    unset results
  done
done
