#!/bin/bash
# tessera bench beside llama-bench on the same GGUF files, 2 threads, alternating per file:
#   bench/llamacpp/gguf_side_by_side.sh LLAMA_SRC TESSERA_BUILD [--cpu-isa ISA] FILE.gguf...
# LLAMA_SRC: a llama.cpp checkout built with cmake into LLAMA_SRC/build. One line per file:
#   FILE llama(pp512 tg64): P D tessera(pp512 tg64): P D
set -euo pipefail
LLAMA=$1 BUILD=$2
shift 2
isa=()
if [[ ${1:-} == --cpu-isa ]]; then isa=(--cpu-isa "$2"); shift 2; fi
export LD_LIBRARY_PATH=$LLAMA/build/bin
for file in "$@"; do
  l=$("$LLAMA/build/bin/llama-bench" -m "$file" -t 2 -p 512 -n 64 -r 1 -o csv 2> /dev/null |
    tail -2 | awk -F, '{ printf "%s ", $(NF-1) }' | tr -d '"')
  t=$("$BUILD/apps/tessera" bench --model "$file" --threads 2 --prompt-tokens 512 --gen-tokens 64 \
    --repeat 1 "${isa[@]}" 2>&1 | awk '/^prefill@|^decode/ { printf "%s ", $2 }')
  echo "$(basename "$file") llama(pp512 tg64): $l tessera(pp512 tg64): $t"
done
