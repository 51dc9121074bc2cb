// llama.cpp (node-llama-cpp's prebuilt CPU build, which loads the best of the per-CPU variants
// left in its binaries folder; side_by_side.sh --cpu-isa avx2 leaves only "haswell") on a GGUF: prefill of N token ids in one batch, then G greedy
// decode steps, 2 threads, CPU only. Prints "prefill <tok/s> decode <tok/s>".
//   node bench.mjs MODEL.gguf 512 64
import { getLlama } from "node-llama-cpp";
const [path, n = "512", g = "64"] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, build: "never", maxThreads: 2, logLevel: "error" });
const model = await llama.loadModel({ modelPath: path });
const ctx = await model.createContext({ contextSize: 1024, batchSize: 512, threads: 2 });
const seq = ctx.getSequence();
const ids = Array.from({ length: Number(n) }, (_, i) => 3 + ((i * 7919) % 4000));
let t0 = performance.now();
await seq.evaluateWithoutGeneratingNewTokens(ids);
const prefill = Number(n) / ((performance.now() - t0) / 1000);
t0 = performance.now();
let count = 0;
for await (const token of seq.evaluate([ids[0]], { temperature: 0 })) {
  if (++count >= Number(g)) break;
}
const decode = count / ((performance.now() - t0) / 1000);
console.log(`prefill ${prefill.toFixed(1)} decode ${decode.toFixed(1)}`);
process.exit(0);
