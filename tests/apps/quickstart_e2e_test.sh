#!/usr/bin/env bash
# The README's quick start, end to end, from a copy of the tree with no ../shared beside it
# (issue #44): the commands are read from README.md's "## Quick start" block, so the README and
# this test cannot drift apart. HOME, the XDG folders, TESSERA_MODELS and the Hugging Face
# cache point at empty folders; TESSERA_SHARED_DIR and TESSERA_API_KEY are unset.
#
#   quickstart_e2e_test.sh TESSERA SOURCE_DIR WORK_DIR JS_DIR
#
# Two steps are stood in for, each said below: `scripts/setup.sh --user` (building again from
# the copy costs ~10 min in CI, so the copy gets the binary this build made, at the path setup
# would put it, and runs the main job line of setup.sh itself), and `pull` (no hub here;
# without it, chat and serve use the built-in demo model, the README's stated alternative).
# Then: chat under tmux (a line typed, a reply read back, /exit), serve on a free loopback
# port, a completion over HTTP, and the page in headless Chromium (a screenshot in WORK_DIR).
set -euo pipefail
TESSERA=$1 SOURCE=$2 WORK=$3 JS=$4

fail() { echo "FAIL: $*" >&2; exit 1; }
SERVE_PID=""
TMUX_SOCKET="tessera-quickstart-$$"
cleanup() {
  if [[ -n "$SERVE_PID" ]]; then kill "$SERVE_PID" 2>/dev/null || true; fi
  tmux -L "$TMUX_SOCKET" kill-server 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$WORK"
mkdir -p "$WORK"/{home,config,data,cache,models,hf}
COPY=$WORK/tessera
mkdir -p "$COPY"
# The tracked files, as a clone has them.
git -C "$SOURCE" rev-parse --git-dir >/dev/null 2>&1 ||
  fail "$SOURCE is not a git checkout: this test copies its tracked files (git ls-files)"
git -C "$SOURCE" ls-files -z | tar -C "$SOURCE" --null -T - -cf - | tar -C "$COPY" -xf -
[[ -e "$COPY/../shared" ]] && fail "$COPY/../shared exists"
[[ -f "$COPY/models/stories260k/model.safetensors" ]] || fail "the demo model is not tracked"

export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data
export XDG_CACHE_HOME=$WORK/cache TESSERA_MODELS=$WORK/models HF_HOME=$WORK/hf
unset TESSERA_SHARED_DIR TESSERA_API_KEY TESSERA_READ_ONLY_DIRS HF_HUB_CACHE HF_TOKEN
export HF_ENDPOINT=http://127.0.0.1:9  # nothing reaches a hub from here

# The quick start: the first fenced block after "## Quick start", comments stripped.
mapfile -t COMMANDS < <(awk '/^## Quick start/ {on=1; next} on && /^```/ {if (inside) exit; inside=1; next}
  inside {sub(/[ \t]+#.*$/, ""); if ($0 != "") print}' "$COPY/README.md")
((${#COMMANDS[@]} >= 4 && ${#COMMANDS[@]} <= 5)) ||
  fail "the quick start has ${#COMMANDS[@]} commands (want 4-5): ${COMMANDS[*]}"
step() {  # the one quick-start command containing $1
  local found=() c
  for c in "${COMMANDS[@]}"; do [[ "$c" == *"$1"* ]] && found+=("$c"); done
  ((${#found[@]} == 1)) || fail "want one quick-start command with '$1', found ${#found[@]}"
  echo "${found[0]}"
}
SETUP=$(step "scripts/setup.sh")
PULL=$(step " pull ")
CHAT=$(step " chat")
SERVE=$(step " serve")
OPEN=$(step "http://")
echo "quick start: $SETUP | $PULL | $CHAT | $SERVE | $OPEN"
cd "$COPY"

# 1. setup: stood in for by this build's binary where setup puts it (and on PATH, should the
# README call it plain `tessera`), then setup's own main job line.
[[ "$SETUP" == "scripts/setup.sh --user" ]] || fail "the install step is '$SETUP'"
mkdir -p build/apps
cp "$TESSERA" build/apps/tessera
export PATH=$COPY/build/apps:$PATH
MAIN_JOB=$(grep -E '^"\$BUILD_DIR/apps/tessera" generate ' scripts/setup.sh) ||
  fail "no main job line in scripts/setup.sh"
BUILD_DIR=build
main_out=$(eval "$MAIN_JOB" 2>"$WORK/main_job.err") || fail "main job: $(cat "$WORK/main_job.err")"
[[ "$main_out" == "Once upon a time, there was a little girl"* ]] || fail "main job printed: $main_out"
echo "ok: setup's main job: ${main_out:0:60}..."

# 2. pull: skipped (no hub); nothing is installed, so chat and serve take the demo model.
[[ -z "$(ls -A "$WORK/models")" || "$(ls -A "$WORK/models")" == ".builtin" ]] || fail "store not empty"

# 3. chat under tmux: a line typed, the reply read back from the pane, /exit.
capture() { tmux -L "$TMUX_SOCKET" capture-pane -p -t qs -S -200; }
wait_pane() {  # wait_pane REGEX SECONDS
  local deadline=$((SECONDS + $2))
  local pane
  while ((SECONDS < deadline)); do
    pane=$(capture)
    grep -qE "$1" <<<"$pane" && return 0
    grep -qE '^chat exited with [1-9]' <<<"$pane" && break  # it failed: no need to wait
    sleep 0.1
  done
  capture >"$WORK/chat_pane.txt"
  fail "the chat pane never showed /$1/ (the pane: $WORK/chat_pane.txt)"
}
tmux -L "$TMUX_SOCKET" -f /dev/null new-session -d -s qs -x 160 -y 50 -c "$COPY" "bash --norc --noprofile"
tmux -L "$TMUX_SOCKET" send-keys -t qs "$CHAT; echo \"chat exited with \$?\"" Enter
wait_pane '^you> ?$' 20
tmux -L "$TMUX_SOCKET" send-keys -t qs "Once upon a time" Enter
wait_pane '^you> Once upon a time' 5
# The greedy continuation, then the next prompt (the first one now holds the typed line).
wait_pane '^, there was a little girl' 20
wait_pane '^you> ?$' 20
tmux -L "$TMUX_SOCKET" send-keys -t qs "/exit" Enter
wait_pane '^chat exited with 0$' 10
capture | grep -q "using the built-in demo model stories260k" || fail "chat did not say it uses the demo model"
echo "ok: chat under tmux"

# 4. serve, on a free loopback port (--port 0: the kernel picks it; the address is printed).
read -r -a SERVE_ARGV <<<"$SERVE"
"${SERVE_ARGV[@]}" --port 0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVE_PID=$!
deadline=$((SECONDS + 30))
BASE=""
while ((SECONDS < deadline)) && [[ -z "$BASE" ]]; do
  BASE=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$WORK/serve.out" | head -1 || true)
  kill -0 "$SERVE_PID" 2>/dev/null || fail "serve exited: $(cat "$WORK/serve.err")"
  [[ -n "$BASE" ]] || sleep 0.1
done
[[ -n "$BASE" ]] || fail "serve did not listen in 30 s: $(cat "$WORK/serve.err")"
grep -q "using the built-in demo model stories260k" "$WORK/serve.err" || fail "serve did not say it uses the demo model"
# The key: printed at start, or kept in the user's config folder.
KEY=$(cat "$WORK/serve.err" "$WORK/serve.out" | grep -oE 'tsk-[A-Za-z0-9_-]+' | head -1 || true)
[[ -n "$KEY" ]] || KEY=$(grep -rhoE 'tsk-[A-Za-z0-9_-]+' "$WORK/config" "$HOME" 2>/dev/null | head -1 || true)
[[ -n "$KEY" ]] || fail "no API key printed or stored: $(cat "$WORK/serve.err")"
while ((SECONDS < deadline)); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/ready")" == 200 ]] && break
  sleep 0.1
done
models=$(curl -sf "$BASE/v1/models" -H "Authorization: Bearer $KEY") || fail "/v1/models"
[[ "$models" == *'"id":"stories260k"'* ]] || fail "/v1/models: $models"
reply=$(curl -sf "$BASE/v1/completions" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"model":"stories260k","prompt":"Once upon a time","max_tokens":12}') || fail "/v1/completions"
[[ "$reply" == *'"text":", there was a little girl'* ]] || fail "/v1/completions: $reply"
# A completion model generates text: its KV pool gives every slot a whole context (a task
# model's pool would not).
grep -q "stories260k' KV pool: .*a whole context per slot" "$WORK/serve.err" ||
  fail "the completion model's KV pool is not a whole context per slot: $(grep 'KV pool' "$WORK/serve.err")"
echo "ok: serve and a completion"

# 5. the page: the README's URL on the port serve chose, in headless Chromium.
URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+[^ ]*' <<<"$OPEN") || fail "no URL in '$OPEN'"
URL=$(sed -E "s#http://127\.0\.0\.1:[0-9]+#$BASE#" <<<"$URL")
SHOT=$WORK/quickstart_page.png
(cd "$JS" && node "$JS/quickstart_page.mjs" "$URL" "$KEY" stories260k "$SHOT") || fail "the page"
[[ -s "$SHOT" && "$(head -c 8 "$SHOT" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
  fail "$SHOT is not a PNG"
echo "ok: the page lists stories260k ($SHOT, $(stat -c %s "$SHOT") bytes)"
rm -rf "$COPY"  # 18 MB; the logs and the screenshot stay
echo "quick start passed in ${SECONDS} s"
