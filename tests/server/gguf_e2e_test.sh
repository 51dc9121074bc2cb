#!/usr/bin/env bash
# GGUF models run in place (issue #46): the tiny Qwen2 test model (make_test_model --qwen)
# written as an F32 GGUF with its tokenizer as tokenizer.ggml.* metadata (make_gguf_model, as
# llama.cpp's converter writes one) generates exactly what the safetensors checkpoint does,
# greedy and seeded; the same file as the model blob of an Ollama store built here as Ollama
# lays it out (manifest, config, template/system/params layers) is listed by `tessera list`,
# run by `tessera generate NAME` and `tessera chat`, and served by `tessera serve --model NAME`
# (/v1/chat/completions, and without --model among the installed models); in LM Studio's
# folder it runs by publisher/repo, and `tessera serve` lists it (/v1/models, /api/tags) and
# answers a chat by that name; a blob with one byte changed is refused with one line.
#   gguf_e2e_test.sh TESSERA MAKE_GGUF_MODEL WORK QWEN_TEST_MODEL_DIR
set -u
TESSERA=$1 MAKE_GGUF=$2 WORK=$3 QWEN=$4
rm -rf "$WORK" && mkdir -p "$WORK"
. "$(dirname "$0")/server_lib.sh"
# Only the store built here: no tessera store, Hugging Face cache or LM Studio folder.
export HOME=$WORK/home TESSERA_MODELS=$WORK/tessera-models HF_HOME=$WORK/hf
export OLLAMA_MODELS=$WORK/ollama
unset HF_HUB_CACHE TESSERA_API_KEY
mkdir -p "$HOME"

GGUF=$WORK/qwen-tiny-f32.gguf
"$MAKE_GGUF" "$QWEN" "$GGUF" qwen2 || { echo "FAIL: make_gguf_model" >&2; exit 1; }

# generate: ids of the prompt, the greedy continuation and a seeded sample, from both files.
gen() {  # gen MODEL OUT [flags...]
  local model=$1 out=$2; shift 2
  "$TESSERA" generate --model "$model" --prompt "Once upon a time, there was a little robot" \
    --max-tokens 16 --dtype f32 --context 256 --json "$@" > "$out" 2> "$out.err"
}
ids() { json_get "$1" "[d.prompt_ids, d.generated_ids]"; }
gen "$QWEN" "$WORK/st_greedy.json" --temperature 0 || fail "generate (safetensors): $(tail -1 "$WORK/st_greedy.json.err")"
gen "$GGUF" "$WORK/gguf_greedy.json" --temperature 0 || fail "generate (GGUF): $(tail -1 "$WORK/gguf_greedy.json.err")"
check "greedy ids from the GGUF equal the safetensors checkpoint's" \
  "$(ids "$WORK/st_greedy.json")" "$(ids "$WORK/gguf_greedy.json")"
gen "$QWEN" "$WORK/st_seeded.json" --temperature 1 --seed 7
gen "$GGUF" "$WORK/gguf_seeded.json" --temperature 1 --seed 7
check "seeded samples from the GGUF equal the safetensors checkpoint's" \
  "$(ids "$WORK/st_seeded.json")" "$(ids "$WORK/gguf_seeded.json")"

# An Ollama store as Ollama writes it: blobs/sha256-<hex>, manifests/<host>/<ns>/<model>/<tag>.
blob() {  # blob MEDIA_TYPE FILE -> prints the layer descriptor
  local hex size
  hex=$(sha256sum "$2" | cut -d' ' -f1)
  size=$(stat -c %s "$2")
  mkdir -p "$OLLAMA_MODELS/blobs"
  cp "$2" "$OLLAMA_MODELS/blobs/sha256-$hex"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$1" "$hex" "$size"
}
printf '{"model_format":"gguf","model_family":"qwen2","model_families":["qwen2"],"model_type":"5M","file_type":"F32","architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}\n' > "$WORK/config.json"
printf '{{ .Prompt }}' > "$WORK/template"
printf 'You are a tiny test model.' > "$WORK/system"
printf '{"stop":["<|im_start|>","<|im_end|>"],"temperature":0,"num_predict":6}\n' > "$WORK/params"
write_store() {  # write_store MODEL_FILE
  local layers
  layers="$(blob application/vnd.ollama.image.model "$1"),$(blob application/vnd.ollama.image.template "$WORK/template"),$(blob application/vnd.ollama.image.system "$WORK/system"),$(blob application/vnd.ollama.image.params "$WORK/params")"
  mkdir -p "$OLLAMA_MODELS/manifests/registry.ollama.ai/library/qwen-tiny"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":%s,"layers":[%s]}\n' \
    "$(blob application/vnd.docker.container.image.v1+json "$WORK/config.json")" "$layers" \
    > "$OLLAMA_MODELS/manifests/registry.ollama.ai/library/qwen-tiny/latest"
}
write_store "$GGUF"

"$TESSERA" list > "$WORK/list.out" 2> "$WORK/list.err" || fail "tessera list: $(cat "$WORK/list.err")"
grep -q "qwen-tiny:latest" "$WORK/list.out" && pass "tessera list shows qwen-tiny:latest" ||
  fail "tessera list does not show qwen-tiny:latest: $(cat "$WORK/list.out")"

# generate by name: the blob verified once, then the same ids as the file by path; the params
# layer's num_predict (6) applies when the request gives no --max-tokens.
"$TESSERA" generate --model qwen-tiny:latest --prompt "Once upon a time, there was a little robot" \
  --max-tokens 16 --dtype f32 --context 256 --temperature 0 --json > "$WORK/ollama_greedy.json" 2> "$WORK/ollama_greedy.err" ||
  fail "generate qwen-tiny:latest: $(tail -1 "$WORK/ollama_greedy.err")"
check "greedy ids through Ollama's store equal the file's" \
  "$(ids "$WORK/gguf_greedy.json")" "$(ids "$WORK/ollama_greedy.json")"
grep -q "verifying" "$WORK/ollama_greedy.err" && pass "the blob's sha256 is verified when opened" ||
  fail "no verification shown: $(cat "$WORK/ollama_greedy.err")"
"$TESSERA" generate --model qwen-tiny:latest --prompt "Once upon a time" --dtype f32 --context 256 \
  --json > "$WORK/ollama_default.json" 2> "$WORK/ollama_default.err"
check "the params layer's num_predict is the default length" 6 \
  "$(json_get "$WORK/ollama_default.json" "d.generated_ids.length")"

# LM Studio's folder as LM Studio writes it (<root>/<publisher>/<repo>/<file>.gguf, a real
# file): publisher/repo names its one GGUF file, run in place.
mkdir -p "$HOME/.lmstudio/models/tester/qwen-tiny-GGUF"
cp "$GGUF" "$HOME/.lmstudio/models/tester/qwen-tiny-GGUF/qwen-tiny-F32.gguf"
"$TESSERA" generate --model tester/qwen-tiny-GGUF --prompt "Once upon a time, there was a little robot" \
  --max-tokens 16 --dtype f32 --context 256 --temperature 0 --json > "$WORK/lms_greedy.json" 2> "$WORK/lms_greedy.err" ||
  fail "generate tester/qwen-tiny-GGUF: $(tail -1 "$WORK/lms_greedy.err")"
check "greedy ids through LM Studio's folder equal the file's" \
  "$(ids "$WORK/gguf_greedy.json")" "$(ids "$WORK/lms_greedy.json")"
# serve without --model serves LM Studio's model under the name `tessera list` gives it
# (publisher/repo/file.gguf): listed by /v1/models and /api/tags, and a chat by that name
# answers.
LMS_NAME=tester/qwen-tiny-GGUF/qwen-tiny-F32.gguf
start_server lmstudio --no-auth --context 256
if wait_ready 60; then
  curl -s -o "$WORK/lms_models.json" "$BASE/v1/models"
  check "/v1/models lists $LMS_NAME" true \
    "$(json_get "$WORK/lms_models.json" "d.data.some(m => m.id === '$LMS_NAME')")"
  curl -s -o "$WORK/lms_tags.json" "$BASE/api/tags"
  check "/api/tags lists $LMS_NAME as a gguf model" true \
    "$(json_get "$WORK/lms_tags.json" "d.models.some(m => m.name === '$LMS_NAME' && m.details.format === 'gguf')")"
  code=$(curl -s -o "$WORK/lms_chat.json" -w '%{http_code}' "$BASE/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"model":"'"$LMS_NAME"'","messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"temperature":0}')
  check "POST /v1/chat/completions on $LMS_NAME" 200 "$code"
  check "the chat is answered by $LMS_NAME" true \
    "$(json_get "$WORK/lms_chat.json" "d.model === '$LMS_NAME' && d.usage.completion_tokens >= 1 && d.choices[0].message.role === 'assistant'")"
fi
stop_server
rm -rf "$HOME/.lmstudio"

# chat: the Jinja tokenizer.chat_template renders, the system layer is the default system.
"$TESSERA" chat --model qwen-tiny:latest --prompt "Hello" --context 256 > "$WORK/chat.out" 2> "$WORK/chat.err" &&
  pass "tessera chat qwen-tiny:latest answers" || fail "chat qwen-tiny:latest: $(tail -1 "$WORK/chat.err")"
# A GGUF without tokenizer.chat_template: chat refused in one line, completion still runs.
"$MAKE_GGUF" "$QWEN" "$WORK/no-template.gguf" qwen2 --no-chat-template
if "$TESSERA" chat --model "$WORK/no-template.gguf" --prompt "Hello" > /dev/null 2> "$WORK/notmpl.err"; then
  fail "chat ran a GGUF without a chat template"
else
  check "chat on a GGUF without a chat template: one line naming it" "1 yes" \
    "$(wc -l < "$WORK/notmpl.err") $(grep -q tokenizer.chat_template "$WORK/notmpl.err" && echo yes)"
fi
"$TESSERA" generate --model "$WORK/no-template.gguf" --prompt "Hello" --max-tokens 2 > /dev/null 2>&1 &&
  pass "generate runs a GGUF without a chat template" || fail "generate on a GGUF without a chat template"

# serve --model NAME: /v1/chat/completions answers with the model's defaults.
start_server ollama --no-auth --model qwen-tiny:latest --context 256
if wait_ready 60; then
  code=$(curl -s -o "$WORK/chat.json" -w '%{http_code}' "$BASE/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"model":"qwen-tiny:latest","messages":[{"role":"user","content":"Hello"}]}')
  check "POST /v1/chat/completions on qwen-tiny:latest" 200 "$code"
  check "the reply has the params layer's num_predict tokens at most" true \
    "$(json_get "$WORK/chat.json" "d.usage.completion_tokens <= 6 && d.choices[0].message.role === 'assistant'")"
  # The default system message reached the prompt: more prompt tokens than without it.
  curl -s -o "$WORK/chat_sys.json" "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"qwen-tiny:latest","messages":[{"role":"system","content":"S"},{"role":"user","content":"Hello"}]}'
  check "the system layer is the system message of a chat without one" true \
    "$(node -e "const a=require('$WORK/chat.json'),b=require('$WORK/chat_sys.json'); console.log(a.usage.prompt_tokens > b.usage.prompt_tokens)")"
fi
stop_server
# serve without --model: every installed model, the Ollama one included.
start_server installed --no-auth --context 256
if wait_ready 60; then
  curl -s -o "$WORK/models.json" "$BASE/v1/models"
  check "serve without --model serves qwen-tiny:latest" true \
    "$(json_get "$WORK/models.json" "d.data.some(m => m.id === 'qwen-tiny:latest')")"
fi
stop_server

# One byte of the model blob changed: refused, in one line, by generate and by serve.
cp "$GGUF" "$WORK/corrupt.gguf"
printf 'X' | dd of="$WORK/corrupt.gguf" bs=1 seek=$(( $(stat -c %s "$GGUF") - 3 )) conv=notrunc 2> /dev/null
hex=$(sha256sum "$GGUF" | cut -d' ' -f1)
cp "$WORK/corrupt.gguf" "$OLLAMA_MODELS/blobs/sha256-$hex"
if "$TESSERA" generate --model qwen-tiny:latest --prompt "x" --max-tokens 1 > /dev/null 2> "$WORK/corrupt.err"; then
  fail "a corrupted blob was run"
else
  last=$(grep -v "verifying" "$WORK/corrupt.err" | tail -n 1)
  case "$last" in
    *sha256*) pass "a corrupted blob is refused: $last" ;;
    *) fail "the refusal does not name the sha256: $(cat "$WORK/corrupt.err")" ;;
  esac
fi
if "$TESSERA" serve --no-auth --port 0 --model qwen-tiny:latest > /dev/null 2> "$WORK/corrupt_serve.err"; then
  fail "serve started on a corrupted blob"
else
  grep -q sha256 "$WORK/corrupt_serve.err" && pass "serve refuses a corrupted blob" ||
    fail "serve's refusal: $(cat "$WORK/corrupt_serve.err")"
fi

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo "all GGUF end-to-end checks passed"
