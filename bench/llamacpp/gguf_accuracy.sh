#!/bin/bash
# Teacher-forced accuracy of tessera on GGUF files against llama.cpp's own logits for the same
# files: N pseudo-random token ids (fixed seed) go through llama.cpp (llama_logits.c, built here
# against a llama.cpp build) and through tessera (gguf_logits_compare) in each weight format.
# With --exact, each format (and llama.cpp itself) is also compared with tessera's f32 run: the
# exact product of the file's dequantized weights, so the two runtimes' own errors show apart.
#   bench/llamacpp/gguf_accuracy.sh LLAMA_SRC TESSERA_BUILD [--positions N] [--formats "auto int8"]
#                                   [--exact] FILE.gguf...
# LLAMA_SRC: a llama.cpp checkout built with cmake into LLAMA_SRC/build (libllama in build/bin).
# First, every tensor's dequantized values are compared with ggml's own (gguf_dequant_compare.cc,
# linked against TESSERA_BUILD's format library): "0 differ" for each type.
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
c++ -std=c++20 -O2 "$HERE/gguf_dequant_compare.cc" -I"$HERE/../../src" -I"$LLAMA/ggml/include" \
  "$BUILD/src/format/libtessera_format.a" "$BUILD/src/base/libtessera_base.a" \
  -L"$LLAMA/build/bin" -lggml-base -o "$WORK/gguf_dequant_compare"
export LD_LIBRARY_PATH=$LLAMA/build/bin
for file in "$@"; do
  # Ids below 1000 exist in every vocabulary tessera reads; a fixed LCG keeps runs comparable.
  ids=$(awk -v n="$N" 'BEGIN { s = 12345; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 3 + s % 997 } }')
  # shellcheck disable=SC2086
  "$WORK/llama_logits" "$file" "$WORK/llama.f32" $ids 2> "$WORK/llama.err" ||
    { cat "$WORK/llama.err" >&2; exit 1; }
  echo "dequantization against ggml's:"
  "$WORK/gguf_dequant_compare" "$file" || echo "(tessera's dequantization differs from ggml's)"
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
