#!/usr/bin/env bash
# Gate "overload": wrk (scripts/gates/overload.lua) POSTs completions over 60 connections,
# 10x the server's capacity (--max-active 2 + --max-queued 4 = 6), for 20 s (full 60 s).
# Only 200/429/503 may come back, every 429/503 with Retry-After; wrk must finish on time with
# zero timeouts (its socket error counters are reported); /health must answer within 1 s
# throughout and after; then a normal completion answers exactly as before the load.
#   GATE_MODE=short ... bash scripts/gates/overload.sh   (run by scripts/release-gates.sh)
. "$(dirname "$0")/lib.sh"

duration=20
[ "$GATE_MODE" = full ] && duration=60
max_active=2 max_queued=4 connections=60
stories=$(stories_model)

start_server overload --model "stories=$stories" --no-auth --rate-limit 0 --metrics-public \
  --max-active $max_active --max-queued $max_queued
wait_ready 60 || gate_end
body='{"model":"stories","prompt":"Once upon a time","max_tokens":32}'
cat > "$WORK/spec.json" << EOF
{"base": "$BASE", "clients": 1, "requests": 1, "deadline_s": 60,
 "kinds": [{"name": "stories", "path": "/v1/completions", "body": $body}]}
EOF
node "$CLIENT" refs "$WORK/spec.json" > "$WORK/refs.json" || { fail "reference answer"; gate_end; }
restarts0=$(metric tessera_worker_restarts_total)

# /health every 200 ms until told to stop (a bounded loop: it also ends at its own deadline).
probe_health() {  # probe_health LOG STOPFILE SECONDS
  local deadline=$((SECONDS + $3))
  while [ ! -e "$2" ] && [ $SECONDS -lt $deadline ]; do
    curl -s -o /dev/null --max-time 1 -w '%{http_code} %{time_total}\n' "$BASE/health" >> "$1" || true
    sleep 0.2
  done
}
rm -f "$WORK/stop" "$WORK/health-during.log" "$WORK/health-after.log"
probe_health "$WORK/health-during.log" "$WORK/stop" $((duration + 60)) &
prober=$!
t0=$(now_ms)
BODY=$body wrk -t2 -c$connections -d${duration}s --timeout 10s \
  -s "$GATES_DIR/overload.lua" "$BASE/v1/completions" > "$WORK/wrk.out" 2> "$WORK/wrk.err" &
wrk_pid=$!
# wrk must end by itself on time; waited for in a bounded loop (in this process group, so a
# stopped gate takes it down too).
deadline=$((SECONDS + duration + 30))
while kill -0 "$wrk_pid" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
wrk_ms=$(($(now_ms) - t0))
kill -0 "$wrk_pid" 2> /dev/null && { fail "wrk still running after $wrk_ms ms"; kill "$wrk_pid"; }
wrk_status=0
wait "$wrk_pid" || wrk_status=$?
touch "$WORK/stop"
wait "$prober" || true
# After the load: five probes, each within 1 s.
for _ in 1 2 3 4 5; do
  curl -s -o /dev/null --max-time 1 -w '%{http_code} %{time_total}\n' "$BASE/health" >> "$WORK/health-after.log" || true
done

check "wrk exit status" 0 "$wrk_status"
[ "$wrk_ms" -le $(((duration + 10) * 1000)) ] || fail "wrk took $wrk_ms ms for a ${duration} s run"
status_line() { awk -v c="$1" '$1 == "status" && $2 == c {print $3, $5}' "$WORK/wrk.out"; }
read -r ok_n _ <<< "$(status_line 200)" || true
read -r busy_n busy_ra <<< "$(status_line 429)" || true
read -r unavail_n unavail_ra <<< "$(status_line 503)" || true
ok_n=${ok_n:-0} busy_n=${busy_n:-0} busy_ra=${busy_ra:-0} unavail_n=${unavail_n:-0} unavail_ra=${unavail_ra:-0}
others=$(awk '$1 == "status" && $2 != 200 && $2 != 429 && $2 != 503 {printf "%s:%s ", $2, $3}' "$WORK/wrk.out")
read -r _ _ connect_e _ read_e _ write_e _ timeout_e _ status_e <<< "$(grep '^errors ' "$WORK/wrk.out" || echo)"
read -r _ _ total _ duration_us <<< "$(grep '^total ' "$WORK/wrk.out" || echo)"
total=${total:-0} duration_us=${duration_us:-1}
rps=$(awk -v n="$total" -v us="$duration_us" 'BEGIN {printf "%.1f", n / (us / 1e6)}')
ok_rps=$(awk -v n="$ok_n" -v us="$duration_us" 'BEGIN {printf "%.1f", n / (us / 1e6)}')
health_during=$(awk '{n++; if ($1 != 200) bad++; if ($2 > max) max = $2} END {printf "%d probes, %d not 200, max %.3f s", n, bad, max}' "$WORK/health-during.log")
health_after=$(awk '{n++; if ($1 != 200) bad++; if ($2 > max) max = $2} END {printf "%d probes, %d not 200, max %.3f s", n, bad, max}' "$WORK/health-after.log")

figure "load" "$connections connections, capacity $((max_active + max_queued)) (--max-active $max_active --max-queued $max_queued), ${duration} s; wrk ran $wrk_ms ms"
figure "answers" "$total ($rps req/s): 200 x $ok_n ($ok_rps/s), 429 x $busy_n (Retry-After $busy_ra), 503 x $unavail_n (Retry-After $unavail_ra)${others:+, other: $others}"
figure "wrk socket errors" "connect ${connect_e:-?}, read ${read_e:-?}, write ${write_e:-?}, timeout ${timeout_e:-?} (non-2xx counted by wrk: ${status_e:-?})"
figure "/health during load" "$health_during"
figure "/health after load" "$health_after"

check "statuses other than 200/429/503" "" "$others"
[ "$ok_n" -gt 0 ] || fail "no completion succeeded under load"
[ $((busy_n + unavail_n)) -gt 0 ] || fail "no refusal at 10x capacity: the load did not overload"
check "429s with Retry-After" "$busy_n" "$busy_ra"
check "503s with Retry-After" "$unavail_n" "$unavail_ra"
check "wrk timeouts" 0 "${timeout_e:-missing}"
check "/health probes during the load that failed or took > 1 s" 0 "$(awk '$1 != 200 || $2 > 1 {n++} END {print n + 0}' "$WORK/health-during.log")"
[ "$(wc -l < "$WORK/health-during.log")" -gt 0 ] || fail "no /health probe ran during the load"
check "/health probes after the load that failed or took > 1 s" 0 "$(awk '$1 != 200 || $2 > 1 {n++} END {print n + 0}' "$WORK/health-after.log")"
wait_load "0,0" 10 || fail "the queue did not drain after the load: $(load_now)"
sed -i "s/\"kinds\"/\"refs\": $(sed 's/[&/\]/\\&/g' "$WORK/refs.json"), \"kinds\"/" "$WORK/spec.json"
node "$CLIENT" run "$WORK/spec.json" > "$WORK/after.json"
check "a normal completion after the load equals the one before" 1 "$(json_get "$WORK/after.json" d.ok)"
check "worker restarts" "$restarts0" "$(metric tessera_worker_restarts_total)"
gate_end
