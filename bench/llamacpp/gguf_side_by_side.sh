#!/bin/bash
# tessera bench beside llama-bench on the same GGUF files, 2 threads, alternating per file:
#   bench/llamacpp/gguf_side_by_side.sh LLAMA_SRC TESSERA_BUILD [--cpu-isa ISA] FILE.gguf...
# LLAMA_SRC: a llama.cpp checkout built with cmake into LLAMA_SRC/build. One line per file:
#   FILE llama(pp512 tg64@512): P D tessera(pp512 tg64@512): P D
# Decode is measured at the same depth on both sides: tessera bench decodes after its 512-token
# prompt, llama-bench's tg64 runs with -d 512 (512 positions already in its cache).
set -euo pipefail
LLAMA=$1 BUILD=$2
shift 2
isa=()
if [[ ${1:-} == --cpu-isa ]]; then isa=(--cpu-isa "$2"); shift 2; fi
export LD_LIBRARY_PATH=$LLAMA/build/bin
for file in "$@"; do
  l=$(for run in "-p 512 -n 0" "-p 0 -n 64 -d 512"; do
    # shellcheck disable=SC2086
    "$LLAMA/build/bin/llama-bench" -m "$file" -t 2 $run -r 1 -o csv 2> /dev/null |
      tail -1 | awk -F'"?,"?' '{ printf "%.1f ", $(NF-1) }'
  done)
  t=$("$BUILD/apps/tessera" bench --model "$file" --threads 2 --prompt-tokens 512 --gen-tokens 64 \
    --repeat 1 "${isa[@]}" 2>&1 | awk '/^prefill@|^decode/ { printf "%s ", $2 }')
  echo "$(basename "$file") llama(pp512 tg64@512): $l tessera(pp512 tg64@512): $t"
done
