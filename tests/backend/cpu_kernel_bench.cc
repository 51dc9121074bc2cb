// Measurement program for the CPU backend (built, not a test; timings are not assertions).
//
//   build-cpu/tests/backend/cpu_kernel_bench [--cpu-isa NAME] [--quick]
//
// --cpu-isa (first, before the other options) measures that kernel family instead of the best
// one this CPU runs.
//
// Reports: GEMV bandwidth for 576x1536 and 896x4864 (inputs x outputs) BF16/INT8/INT4
// matrices with 1 and 2 threads, both cache-resident (one matrix) and streaming from memory
// (enough copies to exceed the caches); GEMM throughput of the two BF16 prefill variants;
// decode and prefill tokens/s of a synthetic smollm2-135m-shaped checkpoint via
// ModelExecutor with placement "cpu".
//
//   build-cpu/tests/backend/cpu_kernel_bench --batched-decode [INPUTS OUTPUTS]
//
// Reports the decode tiles of a batched step (1, 2, 4 and 8 decode rows) on an INT8 matrix
// (576x1536 unless given): from cache (one thread: the tile's arithmetic rate) and streaming sets
// of copies of 64 MiB to 512 MiB (two threads, balanced dispatch as the backend runs them), the row
// counts alternating inside each pass so that they see the same machine. Where the set fits
// the L3 share the machine gives us, the one-row rate jumps (bench/results/many_users.md).
//
//   build-cpu/tests/backend/cpu_kernel_bench --decode-mix smollm2-135m|qwen3.5-0.8b
//
// Runs a model's decode matmuls in order, every layer's own INT8 weights then the LM head
// (the activations prepared before each, as the backend does), 1 row and 8 rows alternating
// pass by pass: mean time per pass and per matrix shape, and the 8-row/1-row ratio, i.e. how
// much of the 8-row arithmetic hides under the weights' streaming outside the model.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "base/thread_pool.h"
#include "engine/model_executor.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"

namespace tessera {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call of fn, best of a few repetitions of `iters` calls.
template <typename Fn>
double TimePerCall(int iters, Fn&& fn) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = Now();
    for (int i = 0; i < iters; ++i) fn(i);
    best = std::min(best, (Now() - t0) / iters);
  }
  return best;
}

void BenchGemv(const KernelTable& k, int64_t in, int64_t out, WeightFormat f, bool quick) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> w(static_cast<size_t>(in * out));
  for (float& v : w) v = d(rng);
  auto first = PackMatrix(w, out, in, f);
  if (!first) return;
  const size_t bytes = first->bytes();
  // Copies totalling > 256 MB so each call streams its matrix from memory.
  const size_t copies = quick ? 8 : std::max<size_t>(2, (256u << 20) / bytes);
  std::vector<PackedMatrix> mats;
  mats.push_back(std::move(*first));
  for (size_t i = 1; i < copies; ++i) mats.push_back(std::move(*PackMatrix(w, out, in, f)));
  std::vector<float> x(static_cast<size_t>(mats[0].padded_cols)), y(static_cast<size_t>(out));
  for (int64_t i = 0; i < in; ++i) x[static_cast<size_t>(i)] = d(rng);
  ActivationBlock acts;
  acts.Reserve(1, mats[0].padded_cols);
  PrepareActivations(k, x.data(), 1, mats[0].padded_cols, f, &acts);
  MatmulFn fn = k.Matmul(f);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    auto run = [&](const PackedMatrix& m) {
      MatmulArgs a{&m, &acts, y.data(), out, false, nullptr};
      pool.ParallelFor(m.panels(), [&](int64_t b, int64_t e, int) { fn(a, b, e); });
    };
    double hot = TimePerCall(200, [&](int) { run(mats[0]); });
    double cold =
        TimePerCall(static_cast<int>(copies), [&](int i) { run(mats[static_cast<size_t>(i)]); });
    std::printf(
        "gemv %4lldx%-5lld %-5s threads=%d  %6.2f MB  cache-resident %6.1f GB/s  streaming %6.1f "
        "GB/s (%.1f us)\n",
        static_cast<long long>(in), static_cast<long long>(out),
        std::string(WeightFormatName(f)).c_str(), threads, bytes / 1e6, bytes / hot / 1e9,
        bytes / cold / 1e9, cold * 1e6);
  }
}

void BenchBf16Gemm(const KernelTable& k, int64_t in, int64_t out, int64_t rows) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> w(static_cast<size_t>(in * out));
  for (float& v : w) v = d(rng);
  auto m = PackMatrix(w, out, in, WeightFormat::kBF16);
  std::vector<float> x(static_cast<size_t>(rows * m->padded_cols)),
      y(static_cast<size_t>(rows * out));
  for (float& v : x) v = d(rng);
  ActivationBlock acts;
  acts.Reserve(rows, m->padded_cols);
  PrepareActivations(k, x.data(), rows, m->padded_cols, WeightFormat::kBF16, &acts);
  for (int64_t r = 0; r < rows; ++r) {
    k.to_bf16(x.data() + r * m->padded_cols, m->padded_cols, acts.bf16.data() + r * m->padded_cols);
  }
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (auto [name, fn] : {std::pair{"vdpbf16ps (bf16 acts)", k.matmul_bf16_dot},
                            std::pair{"widened fp32 FMA", k.matmul_bf16}}) {
      if (fn == nullptr) continue;
      MatmulArgs a{&*m, &acts, y.data(), out, false, nullptr};
      double t = TimePerCall(5, [&](int) {
        pool.ParallelFor(m->panels(), [&](int64_t b, int64_t e, int) { fn(a, b, e); });
      });
      std::printf("gemm bf16 %lldx%lld rows=%lld threads=%d %-22s %7.1f GFLOP/s\n",
                  static_cast<long long>(in), static_cast<long long>(out),
                  static_cast<long long>(rows), threads, name, 2.0 * in * out * rows / t / 1e9);
    }
  }
}

// See the header comment (--batched-decode).
void BenchBatchedDecode(const KernelTable& k, int64_t kIn, int64_t kOut) {
  constexpr int kRows[] = {1, 2, 4, 8};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> w(static_cast<size_t>(kIn * kOut));
  for (float& v : w) v = d(rng);
  auto first = PackMatrix(w, kOut, kIn, WeightFormat::kInt8);
  if (!first) return;
  const int64_t cols = first->padded_cols;
  std::vector<float> x(static_cast<size_t>(8 * cols)), y(static_cast<size_t>(8 * kOut));
  for (float& v : x) v = d(rng);
  ActivationBlock acts[4];
  for (int i = 0; i < 4; ++i) {
    acts[i].Reserve(kRows[i], cols);
    PrepareActivations(k, x.data(), kRows[i], cols, WeightFormat::kInt8, &acts[i]);
  }
  const MatmulFn fn = k.Matmul(WeightFormat::kInt8);
  auto run = [&](const PackedMatrix& m, int i, ThreadPool* pool) {
    const MatmulArgs a{&m, &acts[i], y.data(), kOut, false, nullptr, /*decode_rows=*/true};
    if (pool == nullptr) return fn(a, 0, m.panels());
    pool->ParallelForBalanced(m.panels(), 8, [&](int64_t b, int64_t e, int) { fn(a, b, e); });
  };
  const double macs = static_cast<double>(kIn * kOut);
  for (int i = 0; i < 4; ++i) {
    const double t = TimePerCall(2000, [&](int) { run(*first, i, nullptr); });
    std::printf(
        "batched decode int8 %lldx%lld rows=%d threads=1 cache-resident %7.1f us  %6.1f "
        "GMAC/s\n",
        static_cast<long long>(kIn), static_cast<long long>(kOut), kRows[i], t * 1e6,
        macs * kRows[i] / t / 1e9);
  }
  ThreadPool pool(2);
  std::vector<PackedMatrix> mats;
  mats.push_back(std::move(*first));
  for (size_t mib : {64, 96, 128, 160, 512}) {
    const size_t copies = (mib << 20) / mats[0].bytes();
    while (mats.size() < copies)
      mats.push_back(std::move(*PackMatrix(w, kOut, kIn, WeightFormat::kInt8)));
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int pass = 0; pass < 5; ++pass) {
      for (int i = 0; i < 4; ++i) {
        const double t0 = Now();
        for (size_t c = 0; c < copies; ++c) run(mats[c], i, &pool);
        best[i] = std::min(best[i], (Now() - t0) / static_cast<double>(copies));
      }
    }
    std::printf("batched decode int8 %3zu MiB of copies, threads=2:", mib);
    for (int i = 0; i < 4; ++i) {
      std::printf("  rows=%d %5.1f us (%4.1f GB/s)", kRows[i], best[i] * 1e6,
                  static_cast<double>(mats[0].bytes()) / best[i] / 1e9);
    }
    std::printf("\n");
  }
}

// Matmul shapes (inputs, outputs) of one layer, the layer count and the LM head's shape.
struct DecodeMix {
  const char* name;
  std::vector<std::pair<int64_t, int64_t>> layer;
  int64_t layers;
  std::pair<int64_t, int64_t> head;
};

// See the header comment (--decode-mix). Chunked as the cpu backend chunks decode matmuls.
void BenchDecodeMix(const KernelTable& k, const DecodeMix& mix) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<PackedMatrix> mats;
  size_t bytes = 0;
  auto add = [&](int64_t in, int64_t out) {
    std::vector<float> w(static_cast<size_t>(in * out));
    for (float& v : w) v = d(rng);
    auto m = PackMatrix(w, out, in, WeightFormat::kInt8);
    if (!m) return false;
    bytes += m->bytes();
    mats.push_back(std::move(*m));
    return true;
  };
  for (int64_t l = 0; l < mix.layers; ++l)
    for (auto [in, out] : mix.layer)
      if (!add(in, out)) return;
  if (!add(mix.head.first, mix.head.second)) return;
  int64_t max_cols = 0, max_out = 0;
  for (const PackedMatrix& m : mats) {
    max_cols = std::max(max_cols, m.padded_cols);
    max_out = std::max(max_out, m.rows);
  }
  constexpr int kRows[2] = {1, 8};
  std::vector<float> x(static_cast<size_t>(8 * max_cols)), y(static_cast<size_t>(8 * max_out));
  for (float& v : x) v = d(rng);
  const MatmulFn fn = k.Matmul(WeightFormat::kInt8);
  ThreadPool pool(2);
  ActivationBlock acts;
  acts.Reserve(8, max_cols);
  const size_t shapes = mix.layer.size() + 1;  // the head last
  std::vector<double> per[2] = {std::vector<double>(shapes), std::vector<double>(shapes)};
  double total[2] = {0, 0};
  constexpr int kPasses = 30;
  for (int pass = 0; pass < kPasses; ++pass) {
    for (int i = 0; i < 2; ++i) {
      for (size_t mi = 0; mi < mats.size(); ++mi) {
        const PackedMatrix& m = mats[mi];
        const double t0 = Now();
        PrepareActivations(k, x.data(), kRows[i], m.padded_cols, WeightFormat::kInt8, &acts, &pool);
        const MatmulArgs a{&m, &acts, y.data(), m.rows, false, nullptr, kRows[i] > 1};
        pool.ParallelForBalanced(m.panels(), DecodeMatmulGrain(m),
                                 [&](int64_t b, int64_t e, int) { fn(a, b, e); });
        const double t = Now() - t0;
        per[i][mi + 1 == mats.size() ? shapes - 1 : mi % mix.layer.size()] += t;
        total[i] += t;
      }
    }
  }
  std::printf(
      "decode mix %s int8 (%zu MiB), threads=2, mean of %d passes: rows=1 %.0f us  rows=8 "
      "%.0f us  (8 rows / 1 row %.3f)\n",
      mix.name, bytes >> 20, kPasses, total[0] / kPasses * 1e6, total[1] / kPasses * 1e6,
      total[1] / total[0]);
  for (size_t j = 0; j < shapes; ++j) {
    const auto [in, out] = j + 1 == shapes ? mix.head : mix.layer[j];
    std::printf("  %5lldx%-6lld%s rows=1 %6.0f us  rows=8 %6.0f us  (%.3f)\n",
                static_cast<long long>(in), static_cast<long long>(out),
                j + 1 == shapes ? " head" : "     ", per[0][j] / kPasses * 1e6,
                per[1][j] / kPasses * 1e6, per[1][j] / per[0][j]);
  }
}

int BenchModel(bool quick) {
  std::string dir =
      (std::filesystem::temp_directory_path() / "tessera-bench-smollm2-135m").string();
  SyntheticModelSpec s;
  s.family = ModelFamily::kLlama;
  s.hidden = 576;
  s.intermediate = 1536;
  s.layers = 30;
  s.heads = 9;
  s.kv_heads = 3;
  s.head_dim = 64;
  s.vocab = 49152;
  s.tied = true;
  s.rope_theta = 100000.0;
  s.max_position = 2048;
  s.dtype = DType::kBF16;
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    Status st = WriteSyntheticCheckpoint(dir, s);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  auto ckpt = OpenCheckpoint(dir);
  if (!ckpt) {
    std::fprintf(stderr, "%s\n", ckpt.status().message().c_str());
    return 1;
  }
  auto placement = ParsePlacement("cpu", s.layers);
  const int decode_steps = quick ? 32 : 128;
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    for (int threads : {1, 2}) {
      ModelExecutor::Options o;
      o.max_seq = 1024;
      o.max_batch_tokens = 512;
      o.backend.weights = f;
      o.backend.threads = threads;
      auto exec = ModelExecutor::Load(*ckpt, *placement, o);
      if (!exec) {
        std::fprintf(stderr, "%s\n", exec.status().message().c_str());
        return 1;
      }
      std::vector<float> logits(static_cast<size_t>(s.vocab));
      std::vector<int32_t> prompt(512);
      for (size_t i = 0; i < prompt.size(); ++i)
        prompt[i] = static_cast<int32_t>((i * 7919) % s.vocab);
      // Prefill 512 tokens (last-token logits only, as generation does).
      double best_prefill = 1e30;
      for (int rep = 0; rep < (quick ? 1 : 2); ++rep) {
        double t0 = Now();
        if (!(*exec)->Forward(0, 0, prompt, logits).ok()) return 1;
        best_prefill = std::min(best_prefill, Now() - t0);
      }
      // Decode after a 16-token prompt: one token per call, each with its logits.
      if (!(*exec)->Forward(0, 0, std::span(prompt.data(), 16), logits).ok()) return 1;
      double t0 = Now();
      for (int i = 0; i < decode_steps; ++i) {
        int32_t tok = prompt[static_cast<size_t>(16 + i)];
        if (!(*exec)->Forward(0, 16 + i, std::span(&tok, 1), logits).ok()) return 1;
      }
      double decode = (Now() - t0) / decode_steps;
      std::printf(
          "model smollm2-135m-shape %-4s threads=%d  resident %.0f MB  decode %6.1f tok/s (%.2f "
          "ms, %.1f GB/s)  prefill@512 %7.1f tok/s\n",
          std::string(WeightFormatName(f)).c_str(), threads, (*exec)->resident_weight_bytes() / 1e6,
          1.0 / decode, decode * 1e3, (*exec)->resident_weight_bytes() / decode / 1e9,
          512.0 / best_prefill);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  // --cpu-isa NAME first: that family's kernels (the best this CPU runs otherwise).
  CpuIsa isa = DetectCpuIsa();
  if (argc > 2 && std::strcmp(argv[1], "--cpu-isa") == 0) {
    Expected<CpuIsa> named = ParseCpuIsa(argv[2]);
    if (!named || KernelsFor(*named) == nullptr) {
      std::fprintf(stderr, "--cpu-isa %s: this CPU runs %s\n", argv[2],
                   SupportedCpuIsaNames().c_str());
      return 2;
    }
    isa = *named;
    argc -= 2;
    argv += 2;
  }
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bool model_only = argc > 1 && std::strcmp(argv[1], "--model") == 0;
  const KernelTable* k = KernelsFor(isa);
  std::printf("isa %s\n", std::string(CpuIsaName(k->isa)).c_str());
  if (argc > 1 && std::strcmp(argv[1], "--batched-decode") == 0) {
    const int64_t in = argc > 3 ? std::atoll(argv[2]) : 576;
    const int64_t out = argc > 3 ? std::atoll(argv[3]) : 1536;
    if (in < 1 || out < 1 || in > 65536 || out > 65536) {
      std::fprintf(stderr, "--batched-decode [INPUTS OUTPUTS]: each 1..65536\n");
      return 2;
    }
    BenchBatchedDecode(*k, in, out);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--decode-mix") == 0) {
    const DecodeMix mixes[] = {
        {"smollm2-135m", {{576, 960}, {576, 576}, {576, 3072}, {1536, 576}}, 30, {576, 49152}},
        {"qwen3.5-0.8b",  // its DeltaNet layers' shapes (18 of 24)
         {{1024, 8224}, {2048, 1024}, {1024, 7168}, {3584, 1024}},
         24,
         {1024, 248320}}};
    for (const DecodeMix& m : mixes) {
      if (argc > 2 && std::strcmp(argv[2], m.name) == 0) {
        BenchDecodeMix(*k, m);
        return 0;
      }
    }
    std::fprintf(stderr, "--decode-mix smollm2-135m|qwen3.5-0.8b\n");
    return 2;
  }
  if (!model_only) {
    for (auto [in, out] : {std::pair<int64_t, int64_t>{576, 1536}, {896, 4864}}) {
      for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
        BenchGemv(*k, in, out, f, quick);
      }
    }
    BenchBf16Gemm(*k, 576, 1536, 128);
  }
  return BenchModel(quick);
}
