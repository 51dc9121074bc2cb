#!/usr/bin/env bash
# Feedback on long operations (issue #44, item 6):
#  - `tessera convert` under tmux (stderr a terminal) redraws one line, whose final state stays;
#    through a pipe it prints plain lines, with no \r and no escape sequence;
#  - `tessera generate` of a checkpoint given by path announces its first-use package with its
#    size and shows the load's phases with their times;
#  - the server's worker logs each model load (begin, phases, the end with its time) as text or
#    JSON (--log-format), and the request that had a model loaded gets
#    x_tessera_stats.model_load_ms while the next one to the same model does not.
#   progress_e2e_test.sh TESSERA WORK TINY_MODEL STORIES_MODEL EMBED_MODEL
TESSERA=$1 WORK=$2 TINY=$3 STORIES=$4 EMBED=$5
WORK=$(realpath -m "$WORK") TINY=$(realpath -m "$TINY") STORIES=$(realpath -m "$STORIES")
EMBED=$(realpath -m "$EMBED")
rm -rf "$WORK" && mkdir -p "$WORK"
. "$(dirname "$0")/server_lib.sh"
SESSION=tessera-progress-$$
trap 'kill $(jobs -p) 2> /dev/null; tmux kill-session -t "$SESSION" 2> /dev/null' EXIT

has_control_characters() { LC_ALL=C grep -q $'[\r\x1b]' "$1"; }

# ------------------------------------------------------------------- convert through a pipe
"$TESSERA" convert "$STORIES" "$WORK/piped.pkg" --dtype int8 2>&1 | cat > "$WORK/convert-pipe.txt"
check "convert in a pipe succeeds" 0 "${PIPESTATUS[0]}"
if has_control_characters "$WORK/convert-pipe.txt"; then
  fail "convert in a pipe wrote \\r or an escape: $(od -c "$WORK/convert-pipe.txt" | head -5)"
else
  pass "convert in a pipe: no \\r, no escape sequence"
fi
grep -q '^hashing the source: 0% (0 B / ' "$WORK/convert-pipe.txt" && pass "hashing: start line" ||
  fail "no hashing start line: $(cat "$WORK/convert-pipe.txt")"
grep -q '^packing tensors: done, .* in [0-9.]* s (.*/s)$' "$WORK/convert-pipe.txt" &&
  pass "packing: end line with its time" || fail "no packing end line: $(cat "$WORK/convert-pipe.txt")"

# ------------------------------------------------------------------ convert under a terminal
if command -v tmux > /dev/null; then
  tmux new-session -d -s "$SESSION" -x 120 -y 20 \
    "'$TESSERA' convert '$STORIES' '$WORK/tty.pkg' --dtype int8; echo EXIT=\$?; sleep 60"
  deadline=$((SECONDS + 30))
  while [ $SECONDS -lt $deadline ] && ! tmux capture-pane -p -t "$SESSION" | grep -q 'EXIT='; do
    sleep 0.05
  done
  tmux capture-pane -p -t "$SESSION" > "$WORK/convert-tty.txt"
  tmux kill-session -t "$SESSION"
  grep -q 'EXIT=0' "$WORK/convert-tty.txt" && pass "convert under tmux succeeds" ||
    fail "convert under tmux: $(cat "$WORK/convert-tty.txt")"
  # The bar's rows end on their final state: the 0% start was redrawn over, not kept as a line.
  grep -q '^packing tensors: done, .* in [0-9.]* s' "$WORK/convert-tty.txt" &&
    pass "terminal: the final line stays" || fail "terminal: no final line: $(cat "$WORK/convert-tty.txt")"
  check "terminal: one row for hashing (redrawn in place)" 1 "$(grep -c '^hashing the source' "$WORK/convert-tty.txt")"
  check "terminal: one row for packing (redrawn in place)" 1 "$(grep -c '^packing tensors' "$WORK/convert-tty.txt")"
else
  fail "tmux is not installed (scripts/setup.sh installs it)"
fi

# ------------------------------------------- generate: first-use package and the load phases
mkdir -p "$WORK/mine" && cp -r "$STORIES" "$WORK/mine/stories"
"$TESSERA" generate --model "$WORK/mine/stories" --prompt "Once" --max-tokens 2 \
  > /dev/null 2> "$WORK/generate.err"
check "generate from a path succeeds" 0 $?
grep -q "^tessera: packaging $WORK/mine/stories ([0-9.]* [KMG]iB) for the cpu backend as .*; once, cached at $WORK/mine/stories.tessera-" \
  "$WORK/generate.err" && pass "the first-use package is announced with its size" ||
  fail "no announcement: $(cat "$WORK/generate.err")"
grep -q '^tessera: loading the packed weights: done in [0-9.]* s$' "$WORK/generate.err" &&
  pass "the load's phases are shown" || fail "no load phases: $(cat "$WORK/generate.err")"
has_control_characters "$WORK/generate.err" && fail "generate's stderr in a file holds \\r or an escape"

# ------------------------------------- the server: load logs and x_tessera_stats.model_load_ms
complete() {  # complete MODEL NAME: a completion, its body in $WORK/NAME.json; echoes the status
  curl -s -o "$WORK/$2.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"model\":\"$1\",\"prompt\":\"Once\",\"max_tokens\":2}" "$BASE/v1/completions"
}
start_server text --model "tiny=$TINY" --no-auth
wait_ready 60
grep -q "^tessera worker: model 'tiny' loading from $TINY$" "$LOG_ERR" && pass "text log: the load begins" ||
  fail "text log: no begin line: $(cat "$LOG_ERR")"
grep -q "^tessera worker: model 'tiny' loaded and warmed in [0-9]* ms" "$LOG_ERR" &&
  pass "text log: the load ends with its time" || fail "text log: no end line: $(cat "$LOG_ERR")"
grep -q "^tessera worker: model 'tiny' prewarm (one forward pass): done in" "$LOG_ERR" &&
  pass "text log: a phase with its time" || fail "text log: no phase line: $(cat "$LOG_ERR")"
stop_server

start_server json --model "tiny=$TINY" --model "stories=$STORIES" --model "embed=$EMBED" \
  --max-loaded-models 1 --no-auth --log-format json
wait_ready 60
check "tiny (loaded at start) -> 200" 200 "$(complete tiny tiny-first)"
check "a resident model: no model_load_ms" undefined "$(json_get "$WORK/tiny-first.json" 'typeof d.x_tessera_stats.model_load_ms')"
embed() {  # embed MODEL NAME: an embedding request, its body in $WORK/NAME.json; the status
  curl -s -o "$WORK/$2.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"model\":\"$1\",\"input\":\"Once\"}" "$BASE/v1/embeddings"
}
# loads_then_resident ASK MODEL: the request that had MODEL loaded carries model_load_ms > 0,
# the next one to it none.
loads_then_resident() {
  check "$2 (loaded now) -> 200" 200 "$($1 "$2" "$2-first")"
  check "$2: the request that loaded its model has model_load_ms > 0" true \
    "$(json_get "$WORK/$2-first.json" 'd.x_tessera_stats.model_load_ms > 0')"
  check "$2 again -> 200" 200 "$($1 "$2" "$2-second")"
  check "$2: the next request has no model_load_ms" undefined \
    "$(json_get "$WORK/$2-second.json" 'typeof d.x_tessera_stats.model_load_ms')"
}
loads_then_resident complete stories
loads_then_resident embed embed
grep '^{"type":"model_load"' "$LOG_ERR" > "$WORK/load-lines.json"
check "json log: the stories load's end, with load_ms" true "$(node -e "
  const lines = require('fs').readFileSync('$WORK/load-lines.json', 'utf8').trim().split('\n').map(JSON.parse);
  const end = lines.find(l => l.model === 'stories' && l.load_ms > 0 && /^loaded and warmed in/.test(l.message));
  const phases = lines.filter(l => l.model === 'stories' && /: done in/.test(l.message));
  console.log(Boolean(end) && phases.length >= 2)")"
stop_server

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo "all progress checks passed"
