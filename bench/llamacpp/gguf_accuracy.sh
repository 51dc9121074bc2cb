#!/bin/bash
# Teacher-forced accuracy of tessera on GGUF files against llama.cpp's own logits for the same
# files: N pseudo-random token ids (fixed seed) go through llama.cpp (llama_logits.c, built here
# against a llama.cpp build) and through tessera (gguf_logits_compare) in each weight format.
# With --exact, each format (and llama.cpp itself) is also compared with tessera's f32 run: the
# exact product of the file's dequantized weights, so the two runtimes' own errors show apart.
#   bench/llamacpp/gguf_accuracy.sh LLAMA_SRC TESSERA_BUILD [--positions N] [--formats "auto int8"]
#                                   [--exact] FILE.gguf...
# LLAMA_SRC: a llama.cpp checkout built with cmake into LLAMA_SRC/build (libllama in build/bin).
set -euo pipefail
LLAMA=$1 BUILD=$2
shift 2
N=256 FORMATS="auto" EXACT=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --positions) N=$2; shift 2 ;;
    --formats) FORMATS=$2; shift 2 ;;
    --exact) EXACT=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 "$HERE/llama_logits.c" -I"$LLAMA/include" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" \
  -lllama -lggml -lggml-base -o "$WORK/llama_logits"
export LD_LIBRARY_PATH=$LLAMA/build/bin
for file in "$@"; do
  # Ids below 1000 exist in every vocabulary tessera reads; a fixed LCG keeps runs comparable.
  ids=$(awk -v n="$N" 'BEGIN { s = 12345; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 3 + s % 997 } }')
  # shellcheck disable=SC2086
  "$WORK/llama_logits" "$file" "$WORK/llama.f32" $ids 2> "$WORK/llama.err" ||
    { cat "$WORK/llama.err" >&2; exit 1; }
  echo "against llama.cpp's logits:"
  for format in $FORMATS; do
    # shellcheck disable=SC2086
    "$BUILD/bench/gguf_logits_compare" "$file" "$WORK/llama.f32" "$format" -- $ids
  done
  if [[ $EXACT == 1 ]]; then
    echo "llama.cpp's own error (tessera f32 = the exact product of the dequantized weights):"
    # shellcheck disable=SC2086
    "$BUILD/bench/gguf_logits_compare" "$file" "$WORK/llama.f32" f32 --save "$WORK/exact.f32" \
      -- $ids
    echo "against tessera f32:"
    for format in $FORMATS; do
      # shellcheck disable=SC2086
      "$BUILD/bench/gguf_logits_compare" "$file" "$WORK/exact.f32" "$format" -- $ids
    done
  fi
done
