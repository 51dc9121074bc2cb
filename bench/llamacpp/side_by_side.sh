#!/usr/bin/env bash
# tessera and llama.cpp side by side on one synthetic checkpoint, alternating, 2 threads:
# prefill@512 and decode (64 tokens) in BF16 / Q8_0 / Q4_0 (llama.cpp) against BF16 (exact and
# with --bf16-activations) / INT8 / INT4 (tessera).
#
#   bench/llamacpp/side_by_side.sh TESSERA SYNTH_DIR [ROUNDS]
#
# llama.cpp comes from the npm registry: node-llama-cpp and its prebuilt linux-x64 CPU binaries
# (installed here on first use; versions locked in package-lock.json). It is a measuring aid, not a tessera
# dependency, and no CI job runs it. GGUF files are written next to SYNTH_DIR.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$1 MODEL=$2 ROUNDS=${3:-2}
# `npm ci`: exactly the lock. node-llama-cpp 3.22.1 declares optional platform packages that were
# never published at 3.22.1 (mac, win, linux-riscv64); npm install leaves them out of the lock
# and npm ci (11.x) then calls that lock out of sync, so the lock keeps a placeholder entry for
# each, with its os/cpu, which npm skips on linux-x64.
[[ -d $HERE/node_modules/node-llama-cpp ]] || (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund > /dev/null)
for fmt in bf16 q8_0 q4_0; do
  [[ -f $MODEL.$fmt.gguf ]] || node "$HERE/gguf_from_hf.mjs" "$MODEL" "$MODEL.$fmt.gguf" "$fmt" > /dev/null
done
tessera() {
  "$BIN" bench --model "$MODEL" --threads 2 --prompt-tokens 512 --gen-tokens 64 --repeat 1 \
    --json "$@" | python3 -c 'import json, sys
r = json.load(sys.stdin)
print("prefill %.1f decode %.1f" % (r["prefill_tok_s"]["512"], r["decode_tok_s"]))'
}
for round in $(seq 1 "$ROUNDS"); do
  for pair in "bf16 bf16" "q8_0 int8" "q4_0 int4"; do
    set -- $pair
    echo "llama.cpp $1: $(node "$HERE/bench.mjs" "$MODEL.$1.gguf" 512 64 2>&1 | tail -1)"
    echo "tessera $2: $(tessera --dtype "$2")"
    if [[ $2 == bf16 ]]; then echo "tessera bf16 --bf16-activations: $(tessera --dtype bf16 --bf16-activations)"; fi
  done
done
