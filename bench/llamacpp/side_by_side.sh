#!/usr/bin/env bash
# tessera and llama.cpp side by side on synthetic checkpoints, alternating, 2 threads:
# prefill@512 and decode (64 tokens) in BF16 / Q8_0 / Q4_0 (llama.cpp) against BF16 / INT8 /
# INT4 (tessera).
#
#   bench/llamacpp/side_by_side.sh [--cpu-isa avx2] [--rounds N] [--formats "bf16 int8 int4"]
#                                  TESSERA SYNTH_DIR...
#
# --cpu-isa avx2 pins both to their AVX2 kernels: tessera with `--cpu-isa avx2`, llama.cpp with
# only its "haswell" CPU variant (AVX2, FMA, F16C; no AVX-512, no VNNI) left in a copy of its
# binaries folder, so its loader cannot pick a better one. Without it each takes the best its
# CPU runs. Prints one line per run: "MODEL FORMAT ENGINE prefill P decode D".
#
# llama.cpp comes from the npm registry: node-llama-cpp and its prebuilt linux-x64 CPU binaries
# (installed here on first use; versions locked in package-lock.json). It is a measuring aid, not a
# tessera dependency, and no CI job runs it. GGUF files are written next to each SYNTH_DIR.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ISA="" ROUNDS=2 FORMATS="bf16 int8 int4"
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpu-isa) ISA=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --formats) FORMATS=$2; shift 2 ;;
    *) break ;;
  esac
done
BIN=$1; shift
# `npm ci`: exactly the lock. node-llama-cpp 3.22.1 declares optional platform packages that were
# never published at 3.22.1 (mac, win, linux-riscv64); npm install leaves them out of the lock
# and npm ci (11.x) then calls that lock out of sync, so the lock keeps a placeholder entry for
# each, with its os/cpu, which npm skips on linux-x64.
[[ -d $HERE/node_modules/node-llama-cpp ]] || (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund > /dev/null)
RUNNER=$HERE
case $ISA in
  "") ;;
  avx2)
    # A hard-linked copy of the packages whose linux-x64 folder keeps one CPU variant; bench.mjs
    # is copied beside it so that its imports resolve there.
    RUNNER=$HERE/.avx2-only
    if [[ ! -f $RUNNER/bench.mjs ]]; then
      rm -rf "$RUNNER" && mkdir -p "$RUNNER/node_modules"
      for d in "$HERE"/node_modules/* "$HERE"/node_modules/.[!.]*; do cp -al "$d" "$RUNNER/node_modules/"; done
      find "$RUNNER/node_modules/@node-llama-cpp/linux-x64" -name 'libggml-cpu-*.so' \
        ! -name 'libggml-cpu-haswell.so' -delete
      cp "$HERE/bench.mjs" "$RUNNER/bench.mjs"
    fi
    ;;
  *) echo "--cpu-isa: only avx2 has a llama.cpp counterpart here" >&2; exit 2 ;;
esac
declare -A GGUF=([bf16]=bf16 [int8]=q8_0 [int4]=q4_0)
tessera() {
  "$BIN" bench --model "$1" --dtype "$2" --threads 2 --prompt-tokens 512 --gen-tokens 64 \
    --repeat 1 ${ISA:+--cpu-isa $ISA} --json | python3 -c 'import json, sys
r = json.load(sys.stdin)
print("prefill %.1f decode %.1f" % (r["prefill_tok_s"]["512"], r["decode_tok_s"]))'
}
for model in "$@"; do
  for fmt in $FORMATS; do
    g=$model.${GGUF[$fmt]}.gguf
    [[ -f $g ]] || node "$HERE/gguf_from_hf.mjs" "$model" "$g" "${GGUF[$fmt]}" > /dev/null
  done
done
for round in $(seq 1 "$ROUNDS"); do
  for model in "$@"; do
    for fmt in $FORMATS; do
      name=$(basename "$model")
      echo "$name $fmt llama.cpp $(node "$RUNNER/bench.mjs" "$model.${GGUF[$fmt]}.gguf" 512 64 2>&1 | tail -1)"
      echo "$name $fmt tessera $(tessera "$model" "$fmt")"
    done
  done
done
