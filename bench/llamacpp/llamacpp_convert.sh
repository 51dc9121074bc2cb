#!/bin/bash
# A GGUF file written by llama.cpp's own converter (convert_hf_to_gguf.py) from a Hugging Face
# checkpoint, and tessera's logits on it against tessera's logits on the checkpoint itself.
#   bench/llamacpp/llamacpp_convert.sh LLAMA_SRC TESSERA_BUILD HF_DIR f32|f16|bf16 OUT.gguf
#                                      [REFERENCE_PREFIX]
# REFERENCE_PREFIX (e.g. ../shared/tokenizers/reference/Qwen3-4B): the file's own tokenizer and
# chat template (`tessera tokenize`/`render-chat --model OUT.gguf`) against Hugging Face's
# reference vectors PREFIX.encode.json and PREFIX.chat.json.
# LLAMA_SRC: a llama.cpp source tree (its gguf-py is used in place). Runs Debian's python3 with
# python3-torch, python3-numpy, python3-yaml and python3-sentencepiece; `transformers` is the
# stand-in in converter_shim/ (see its docstring: config.json and tokenizer.json read as they
# are, encode/decode by `tessera tokenize`, checked by the converter's pre-tokenizer hash).
# --no-lazy (the same output, computed before writing) lets the stand-in's float16 exp (see
# converter_shim/sitecustomize.py) reach the converter's tensors.
# The outtype should be the checkpoint's own dtype, so both files hold the same values; then
# the two runs must agree within 1e-4 of the largest logit (issue #46). Quantized types come
# from this file with llama-quantize; bench/llamacpp/gguf_accuracy.sh compares them.
set -euo pipefail
LLAMA=$1 BUILD=$2 HF=$3 OUTTYPE=$4 OUT=$5 REFERENCE=${6:-}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
for module in torch numpy yaml sentencepiece tqdm; do
  "$PY" -c "import $module" 2>/dev/null || {
    echo "llamacpp_convert: $PY lacks '$module' (apt install python3-torch python3-numpy" \
      "python3-yaml python3-sentencepiece python3-tqdm)" >&2
    exit 1
  }
done
TESSERA_BIN=$BUILD/apps/tessera PYTHONPATH="$HERE/converter_shim:$LLAMA/gguf-py" \
  "$PY" "$LLAMA/convert_hf_to_gguf.py" "$HF" --outtype "$OUTTYPE" --no-lazy --outfile "$OUT" \
  2> "$OUT.log" ||
  { tail -20 "$OUT.log" >&2; exit 1; }
grep -E "gguf: loading model|pre-tokenizer|Model successfully exported" "$OUT.log" || true
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ids=$(awk 'BEGIN { s = 12345; for (i = 0; i < 64; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 3 + s % 997 } }')
for format in f32 auto; do
  # shellcheck disable=SC2086
  "$BUILD/bench/gguf_logits_compare" "$HF" "$WORK/hf.f32" "$format" --save "$WORK/hf.f32" \
    -- $ids > /dev/null
  echo "tessera on the converter's file against tessera on the checkpoint ($format):"
  # shellcheck disable=SC2086
  "$BUILD/bench/gguf_logits_compare" "$OUT" "$WORK/hf.f32" "$format" -- $ids
done
if [[ -n $REFERENCE ]]; then
  echo "the file's tokenizer and chat template against $REFERENCE.{encode,chat}.json:"
  "$PY" - "$BUILD/apps/tessera" "$OUT" "$REFERENCE" <<'PYEOF'
import json, subprocess, sys
tessera, gguf, ref = sys.argv[1:4]
def run(args, lines):
    out = subprocess.run([tessera, *args, "--model", gguf], input="".join(lines),
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.split("\n") if l]
cases = json.load(open(ref + ".encode.json"))
ids = run(["tokenize"], [json.dumps(c["text"]) + "\n" for c in cases])
same = sum(a == c["ids"] for a, c in zip(ids, cases))
text = run(["detokenize"], [json.dumps(c["ids"]) + "\n" for c in cases])
back = sum(a == c["decoded"] for a, c in zip(text, cases))
print(f"  encode: {same}/{len(cases)} equal, decode: {back}/{len(cases)} equal")
try:
    chats = json.load(open(ref + ".chat.json"))
except FileNotFoundError:
    chats = []
if chats:
    keys = ("messages", "add_generation_prompt", "kwargs")
    got = run(["render-chat"], [json.dumps({k: c[k] for k in keys}) + "\n" for c in chats])
    same = sum(g.get("rendered") == c.get("rendered") if c.get("rendered") is not None
               else "error" in g for g, c in zip(got, chats))
    print(f"  chat template: {same}/{len(chats)} equal")
PYEOF
fi
