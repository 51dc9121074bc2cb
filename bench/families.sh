#!/usr/bin/env bash
# Speed of the model families on synthetic weights at the real shapes (`tessera synth`):
# decode and prefill@512 tok/s and the weight bandwidth decode reaches, per weight format, with
# 2 threads (`tessera bench`). Every measurement of a model is followed by one of the reference
# model (qwen3-0.6b) in the same format, so each row carries a figure from the same minute of
# the machine; ratios are what to compare across runs, not absolute figures.
#
#   bench/families.sh TESSERA MODELS_DIR [--presets "a b ..."] [--dtypes "bf16 int8 int4"]
#                     [--gen 64] [--extra "--bf16-activations"]
#
# MODELS_DIR receives the synthetic checkpoints (several GB; reused when present). A preset
# written NAME@VOCAB is synthesized with --vocab VOCAB (e.g. qwen3.5-0.8b@151936, to compare
# with a runtime measured at Qwen3's vocabulary). Prints one Markdown table row per (preset,
# dtype): decode, prefill, GB/s, then the reference's decode, prefill and GB/s, and the ratio of
# the preset's GB/s to the reference's.
set -euo pipefail
BIN=$1 MODELS=$2; shift 2
PRESETS="qwen3.5-0.8b qwen3.5-0.8b@151936 qwen3.5-2b minicpm5-2b gemma3-1b llama3.2-1b qwen2.5-0.5b"
DTYPES="bf16 int8 int4" GEN=64 REFERENCE=qwen3-0.6b EXTRA=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --presets) PRESETS=$2; shift 2 ;;
    --dtypes) DTYPES=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;  # more `tessera bench` flags, for both models of a row
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$MODELS"
synth() {  # preset[@vocab] -> directory
  local name=${1%@*} vocab=0 dir="$MODELS/${1/@/-v}"
  [[ $1 == *@* ]] && vocab=${1#*@}
  if [[ ! -f $dir/config.json ]]; then
    "$BIN" synth --preset "$name" --vocab "$vocab" --out "$dir" > /dev/null
  fi
  echo "$dir"
}
# decode tok/s, prefill@512 tok/s, decode GB/s of one run
measure() {
  "$BIN" bench --model "$1" --dtype "$2" --threads 2 --prompt-tokens 512 --gen-tokens "$GEN" \
    --repeat 1 --json $EXTRA | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%.1f %.1f %.1f" % (r["decode_tok_s"], r["prefill_tok_s"]["512"], r["decode_gb_s"]))'
}
REF_DIR=$(synth "$REFERENCE")
echo "| model | dtype | decode tok/s | prefill@512 tok/s | decode GB/s | $REFERENCE decode | prefill | GB/s | GB/s ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for dtype in $DTYPES; do
  for preset in $PRESETS; do
    dir=$(synth "$preset")
    read -r d p g <<< "$(measure "$dir" "$dtype")"
    read -r rd rp rg <<< "$(measure "$REF_DIR" "$dtype")"
    ratio=$(python3 -c "print('%.2f' % ($g / $rg))")
    echo "| $preset | $dtype | $d | $p | $g | $rd | $rp | $rg | $ratio |"
  done
done
