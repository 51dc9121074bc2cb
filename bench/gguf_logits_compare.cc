// Teacher-forced logits of a GGUF file, tessera's against llama.cpp's: runs the token ids
// through tessera (cpu backend, the weight format asked) and compares every position's logits
// with the [n, vocab] float32 file bench/llamacpp/llama_logits.c wrote for the same ids.
// Prints the top-1 agreement, the largest and mean absolute logit error, and the largest
// error relative to the position's largest |logit|. --save writes tessera's logits in the same
// [n, vocab] float32 layout, so one format's run (f32: the exact product of the file's
// dequantized weights) can be the reference of the others.
//   llama_logits FILE.gguf llama.f32 ID...
//   gguf_logits_compare FILE.gguf REF.f32 auto|f32|bf16|int8|int4 [avx2|avx512|...]
//                       [--save OURS.f32] -- ID...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "model/checkpoint.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "gguf_logits_compare: %s\n", message.c_str());
  return 1;
}

size_t ArgMax(const float* row, size_t n) {
  return static_cast<size_t>(std::max_element(row, row + n) - row);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: gguf_logits_compare FILE.gguf LLAMA.f32 FORMAT [CPU_ISA] -- ID...\n");
    return 2;
  }
  const std::string gguf = argv[1], llama_file = argv[2];
  auto format = ParseWeightFormat(argv[3]);
  if (!format) return Fail(format.status().message());
  BackendOptions backend;
  backend.weights = *format;
  backend.threads = 2;
  int at = 4;
  std::string save_path;
  for (; at < argc && std::string(argv[at]) != "--"; ++at) {
    if (std::string(argv[at]) == "--save") {
      if (++at >= argc) return Fail("--save needs a file name");
      save_path = argv[at];
      continue;
    }
    auto isa = ParseCpuIsa(argv[at]);
    if (!isa) return Fail(isa.status().message());
    backend.cpu_isa = *isa;
  }
  if (at >= argc) return Fail("expected -- before the ids");
  std::vector<int32_t> ids;
  for (int i = at + 1; i < argc; ++i) ids.push_back(static_cast<int32_t>(std::atoi(argv[i])));
  if (ids.empty()) return Fail("no token ids");

  auto ckpt = OpenCheckpoint(gguf);
  if (!ckpt) return Fail(ckpt.status().message());
  auto resolved = ResolveWeightFormat(**ckpt, *format);
  if (!resolved) return Fail(resolved.status().message());
  backend.kv_cache = DefaultKvCache(*resolved);
  auto placement = ParsePlacement("cpu", (*ckpt)->config.num_layers);
  if (!placement) return Fail(placement.status().message());
  ModelExecutor::Options options;
  options.max_seq = static_cast<int64_t>(ids.size()) + 8;
  options.backend = backend;
  auto exec = ModelExecutor::Load(*ckpt, *placement, options);
  if (!exec) return Fail(exec.status().message());
  const size_t vocab = static_cast<size_t>((*ckpt)->config.vocab_size);
  const size_t n = ids.size();
  std::vector<float> last(vocab), ours(n * vocab);
  if (Status s = (*exec)->Forward(0, 0, ids, last, ours); !s.ok()) return Fail(s.message());

  if (!save_path.empty()) {
    std::FILE* out = std::fopen(save_path.c_str(), "wb");
    const bool saved = out != nullptr && std::fwrite(ours.data(), sizeof(float), ours.size(),
                                                     out) == ours.size();
    if (out != nullptr && std::fclose(out) != 0) return Fail("cannot write " + save_path);
    if (!saved) return Fail("cannot write " + save_path);
  }

  std::vector<float> theirs(n * vocab);
  std::FILE* f = std::fopen(llama_file.c_str(), "rb");
  if (f == nullptr) return Fail("cannot read " + llama_file);
  const size_t got = std::fread(theirs.data(), sizeof(float), theirs.size(), f);
  std::fclose(f);
  if (got != theirs.size()) {
    return Fail(llama_file + " holds " + std::to_string(got) + " floats, expected " +
                std::to_string(theirs.size()) + " (positions x vocab)");
  }
  size_t agree = 0;
  double max_abs = 0, sum_abs = 0, max_rel = 0;
  for (size_t p = 0; p < n; ++p) {
    const float* a = &ours[p * vocab];
    const float* b = &theirs[p * vocab];
    agree += ArgMax(a, vocab) == ArgMax(b, vocab);
    double row_max = 0, row_err = 0;
    for (size_t v = 0; v < vocab; ++v) {
      const double e = std::fabs(static_cast<double>(a[v]) - b[v]);
      row_err = std::max(row_err, e);
      sum_abs += e;
      row_max = std::max(row_max, std::fabs(static_cast<double>(b[v])));
    }
    max_abs = std::max(max_abs, row_err);
    if (row_max > 0) max_rel = std::max(max_rel, row_err / row_max);
  }
  std::printf(
      "%s weights=%s positions=%zu top1_agreement=%zu/%zu max_abs_err=%.4g mean_abs_err=%.4g "
      "max_err_rel_to_max_logit=%.4g\n",
      gguf.c_str(), std::string(WeightFormatName(*resolved)).c_str(), n, agree, n, max_abs,
      sum_abs / static_cast<double>(n * vocab), max_rel);
  return 0;
}
