// Every CPU kernel on every instruction-set family this machine has, against the scalar
// reference (kernels_scalar.cc), over random shapes including odd sizes and tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "base/half.h"

namespace tessera {
namespace {

std::vector<float> RandomVector(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A packed matrix and `tokens` rows of random activations in [-2, 2] for it, each row
// zero padded to the matrix's padded_cols.
struct PackedCase {
  PackedMatrix w;
  std::vector<float> x;  // [tokens][w.padded_cols]
};
PackedCase MakePackedCase(std::mt19937& rng, const std::vector<float>& w, int64_t rows,
                          int64_t cols, int64_t tokens, WeightFormat f) {
  PackedCase c;
  auto packed = PackMatrix(w, rows, cols, f);
  EXPECT_TRUE(packed);
  if (packed) c.w = std::move(*packed);
  const int64_t stride = c.w.padded_cols;
  c.x.assign(static_cast<size_t>(tokens * stride), 0.0f);
  for (int64_t m = 0; m < tokens; ++m) {
    auto row = RandomVector(rng, static_cast<size_t>(cols), 2.0f);
    std::copy(row.begin(), row.end(), c.x.begin() + m * stride);
  }
  return c;
}

class IsaTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (!CpuSupports(GetParam())) GTEST_SKIP() << "this CPU lacks " << CpuIsaName(GetParam());
    k_ = KernelsFor(GetParam());
    ASSERT_NE(k_, nullptr);
  }
  const KernelTable& ref() const { return ScalarKernels(); }
  const KernelTable* k_ = nullptr;
};

std::string IsaName(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(CpuIsaName(info.param));
}

struct MatmulShape {
  int64_t rows, cols, tokens;
};

// Shapes with full panels, row tails (N % 16), column padding (K % 32) and token counts that
// hit every remainder of the GEMM row tiles.
const std::vector<MatmulShape> kShapes = {
    {1, 1, 1},    {16, 32, 1},  {17, 33, 1}, {64, 64, 1},  {96, 80, 1},  {200, 136, 1},
    {48, 96, 2},  {33, 70, 3},  {64, 64, 5}, {80, 160, 6}, {35, 100, 7}, {130, 64, 13},
    {16, 288, 4}, {576, 96, 9}, {7, 5, 11},  {250, 31, 1}, {64, 512, 8},
};

// Runs `fn` over the panels in two uneven ranges (as two threads would) and returns y.
std::vector<float> RunMatmul(MatmulFn fn, const PackedMatrix& w, const ActivationBlock& acts,
                             bool accumulate, const std::vector<float>& bias,
                             const std::vector<float>& y0) {
  std::vector<float> y = y0;
  MatmulArgs a{&w, &acts, y.data(), w.rows, accumulate, bias.empty() ? nullptr : bias.data()};
  int64_t split = w.panels() / 3;
  fn(a, 0, split);
  fn(a, split, w.panels());
  return y;
}

void CheckMatmul(const KernelTable& k, WeightFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const MatmulShape& s : kShapes) {
    SCOPED_TRACE("N=" + std::to_string(s.rows) + " K=" + std::to_string(s.cols) +
                 " M=" + std::to_string(s.tokens));
    std::vector<float> w = RandomVector(rng, static_cast<size_t>(s.rows * s.cols), 0.5f);
    auto packed = PackMatrix(w, s.rows, s.cols, format);
    ASSERT_TRUE(packed) << packed.status().message();
    const int64_t stride = packed->padded_cols;
    std::vector<float> x(static_cast<size_t>(s.tokens * stride), 0.0f);
    for (int64_t m = 0; m < s.tokens; ++m) {
      auto row = RandomVector(rng, static_cast<size_t>(s.cols), 2.0f);
      std::copy(row.begin(), row.end(), x.begin() + m * stride);
    }
    // Both sides read activations prepared by the kernel under test (quantization itself is
    // compared to the scalar version in its own test).
    ActivationBlock acts;
    acts.Reserve(s.tokens, stride);
    PrepareActivations(k, x.data(), s.tokens, stride, format, &acts);
    for (int64_t m = 0; m < s.tokens; ++m) {
      k.to_bf16(&x[static_cast<size_t>(m * stride)], stride, acts.bf16.data() + m * stride);
    }
    std::vector<float> bias = RandomVector(rng, static_cast<size_t>(s.rows));
    std::vector<float> y0 = RandomVector(rng, static_cast<size_t>(s.tokens * s.rows));
    for (bool accumulate : {false, true}) {
      std::vector<float> no_bias;
      const std::vector<float>& b = accumulate ? bias : no_bias;
      auto want = RunMatmul(ScalarKernels().Matmul(format), *packed, acts, accumulate, b, y0);
      auto got = RunMatmul(k.Matmul(format), *packed, acts, accumulate, b, y0);
      const bool dot = format == WeightFormat::kBF16 && k.matmul_bf16_dot != nullptr;
      auto with_bf16_acts =
          dot ? RunMatmul(k.matmul_bf16_dot, *packed, acts, accumulate, b, y0) : want;
      // Error budget per output, relative to sum |w x|: fp32 accumulation order differs
      // (2e-5); the vdpbf16ps variant rounds activations to bf16 (2^-9 relative each).
      const double rel = 2e-5;
      for (int64_t m = 0; m < s.tokens; ++m) {
        for (int64_t n = 0; n < s.rows; ++n) {
          double mag = 1e-6;
          for (int64_t c = 0; c < s.cols; ++c) {
            mag +=
                std::fabs(DequantizedValue(*packed, n, c) * x[static_cast<size_t>(m * stride + c)]);
          }
          size_t i = static_cast<size_t>(m * s.rows + n);
          ASSERT_NEAR(got[i], want[i], rel * mag + 1e-5) << "m=" << m << " n=" << n;
          if (dot) {
            ASSERT_NEAR(with_bf16_acts[i], want[i], 8e-3 * mag + 1e-5)
                << "dot m=" << m << " n=" << n;
          }
        }
      }
    }
  }
}

TEST_P(IsaTest, MatmulF32MatchesScalar) {
  CheckMatmul(*k_, WeightFormat::kF32, 1);
}
TEST_P(IsaTest, MatmulBf16MatchesScalar) {
  CheckMatmul(*k_, WeightFormat::kBF16, 2);
}
TEST_P(IsaTest, MatmulInt8MatchesScalar) {
  CheckMatmul(*k_, WeightFormat::kInt8, 3);
}
TEST_P(IsaTest, MatmulInt4MatchesScalar) {
  CheckMatmul(*k_, WeightFormat::kInt4, 4);
}

// INT8 sums are exact integers in every family and take the same one float scaling
// (float(sum) * (x scale * row scale)), so without bias or accumulation every family's outputs
// have the scalar reference's bits: prompt rows (every remainder of the row tiles) and decode
// rows (lone and batched, every tile size up to past two tiles), short and long rows, extreme
// activations included (|q| = 127, the most a vpmaddubsw pair can hold).
TEST_P(IsaTest, MatmulInt8IsBitIdenticalToScalar) {
  std::mt19937 rng(47);
  const int64_t rows = 200;
  for (int64_t cols : {136, 1040}) {
    std::vector<float> w = RandomVector(rng, static_cast<size_t>(rows * cols), 0.5f);
    for (int64_t i = 0; i < rows * cols; i += 7) w[static_cast<size_t>(i)] = (i % 2 ? 0.5f : -0.5f);
    for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
      for (bool decode : {false, true}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(tokens) +
                     (decode ? " decode" : " prompt"));
        PackedCase c = MakePackedCase(rng, w, rows, cols, tokens, WeightFormat::kInt8);
        for (int64_t m = 0; m < tokens; ++m) c.x[static_cast<size_t>(m * c.w.padded_cols)] = -9.0f;
        auto run = [&](const KernelTable& k) {
          ActivationBlock acts;
          acts.Reserve(tokens, c.w.padded_cols);
          PrepareActivations(k, c.x.data(), tokens, c.w.padded_cols, WeightFormat::kInt8, &acts);
          std::vector<float> y(static_cast<size_t>(tokens * rows));
          MatmulArgs a{&c.w, &acts, y.data(), rows, false, nullptr, decode};
          k.matmul_int8(a, 0, c.w.panels());
          return y;
        };
        const std::vector<float> got = run(*k_), want = run(ScalarKernels());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
    }
  }
}

// A prompt row's outputs do not depend on how the rows were tiled or chunked: the same 37
// rows in one call and in calls of 13, 2 and 22 rows give identical bits in every format
// (chunked prefill relies on this). One-row calls are decode, which may sum differently.
TEST_P(IsaTest, PromptRowsAreIndependentOfChunking) {
  std::mt19937 rng(41);
  const int64_t rows = 200, cols = 136, tokens = 37;
  const std::vector<float> w = RandomVector(rng, static_cast<size_t>(rows * cols), 0.5f);
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    const PackedCase c = MakePackedCase(rng, w, rows, cols, tokens, f);
    const int64_t stride = c.w.padded_cols;
    auto run = [&](int64_t first, int64_t count, std::vector<float>* y) {
      ActivationBlock acts;
      acts.Reserve(count, stride);
      PrepareActivations(*k_, c.x.data() + first * stride, count, stride, f, &acts);
      MatmulArgs a{&c.w, &acts, y->data() + first * rows, rows, false, nullptr};
      k_->Matmul(f)(a, 0, c.w.panels());
    };
    std::vector<float> whole(static_cast<size_t>(tokens * rows)), chunked = whole;
    run(0, tokens, &whole);
    run(0, 13, &chunked);
    run(13, 2, &chunked);
    run(15, 22, &chunked);
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0)
        << WeightFormatName(f);
  }
}

// Decode rows of a batched step (MatmulArgs::decode_rows) each get the bits a lone decode row
// gets, in every format and for every row count up to past two 4-row tiles and an odd panel
// count (a batched sequence decodes exactly as it would alone), and stay near the scalar
// reference. Two input widths: INT8 tiles of over 4 rows prefetch differently for panels
// under and over 16 KiB (1040 inputs).
TEST_P(IsaTest, BatchedDecodeRowsMatchLoneDecodeRows) {
  std::mt19937 rng(43);
  const int64_t rows = 208;  // 13 panels
  for (int64_t cols : {136, 1040}) {
    const std::vector<float> w = RandomVector(rng, static_cast<size_t>(rows * cols), 0.5f);
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
      for (int64_t tokens : {2, 3, 4, 5, 8, 9}) {
        SCOPED_TRACE(std::string(WeightFormatName(f)) + " rows=" + std::to_string(tokens) +
                     " cols=" + std::to_string(cols));
        const PackedCase c = MakePackedCase(rng, w, rows, cols, tokens, f);
        const int64_t stride = c.w.padded_cols;
        auto run = [&](const KernelTable& k, int64_t first, int64_t count, bool decode,
                       std::vector<float>* y) {
          ActivationBlock acts;
          acts.Reserve(count, stride);
          PrepareActivations(k, c.x.data() + first * stride, count, stride, f, &acts);
          MatmulArgs a{&c.w, &acts, y->data() + first * rows, rows, false, nullptr, decode};
          const int64_t split = c.w.panels() / 2 + 1;  // two uneven ranges, as two threads
          k.Matmul(f)(a, 0, split);
          k.Matmul(f)(a, split, c.w.panels());
        };
        std::vector<float> batched(static_cast<size_t>(tokens * rows)), lone = batched,
                                                                        scalar = batched;
        run(*k_, 0, tokens, true, &batched);
        for (int64_t m = 0; m < tokens; ++m) run(*k_, m, 1, false, &lone);
        run(ScalarKernels(), 0, tokens, true, &scalar);
        EXPECT_EQ(std::memcmp(batched.data(), lone.data(), lone.size() * sizeof(float)), 0);
        for (size_t i = 0; i < scalar.size(); ++i)
          ASSERT_NEAR(batched[i], scalar[i], 2e-3 * (1 + std::fabs(scalar[i]))) << i;
        if (GetParam() == CpuIsa::kAvx512 && f != WeightFormat::kF32) {
          // The table holds one of the far prefetches (CpuDecodeFarPrefetch); the others must
          // give the same bits.
          for (DecodeFarPrefetch far :
               {DecodeFarPrefetch::kL2Fixed, DecodeFarPrefetch::kNonTemporalNextTile,
                DecodeFarPrefetch::kL2NextTile}) {
            KernelTable other = *k_;
            other.matmul_bf16 = Avx512Matmul(WeightFormat::kBF16, far);
            other.matmul_int4 = Avx512Matmul(WeightFormat::kInt4, far);
            other.matmul_int8 = Avx512Matmul(WeightFormat::kInt8, far);
            std::vector<float> hinted(batched.size());
            run(other, 0, tokens, true, &hinted);
            EXPECT_EQ(std::memcmp(hinted.data(), batched.data(), batched.size() * sizeof(float)), 0)
                << "far prefetch " << DecodeFarPrefetchName(far);
          }
        }
      }
    }
  }
}

// The AMX INT8 matmul sums the same int32 products as the AVX-512 one and scales them the same
// way, so every output has the same bits: prompt and batched decode rows, 1 to 33 rows (two
// 16-row tiles and a remainder), widths that are multiples of 64 and 32 past one (the
// VPDPBUSD tail), panel ranges cut unevenly, with a bias and accumulating.
TEST(AmxKernels, Int8MatmulIsBitIdenticalToAvx512) {
  if (!CpuSupports(CpuIsa::kAvx512Amx)) GTEST_SKIP() << "this CPU lacks AMX-INT8";
  const KernelTable& amx = Avx512AmxKernels();
  const KernelTable& avx = Avx512Kernels();
  ASSERT_NE(amx.matmul_int8, avx.matmul_int8);
  std::mt19937 rng(47);
  const int64_t rows = 16 * 11 - 5;  // 11 panels, the last one partly padding
  for (int64_t cols : {32, 64, 96, 576, 1000}) {
    const std::vector<float> w = RandomVector(rng, static_cast<size_t>(rows * cols), 0.5f);
    const std::vector<float> bias = RandomVector(rng, static_cast<size_t>(rows), 1.0f);
    for (int64_t tokens : {1, 2, 3, 7, 8, 9, 16, 17, 33}) {
      for (bool decode : {false, true}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(tokens) +
                     (decode ? " decode" : " prompt"));
        const PackedCase c = MakePackedCase(rng, w, rows, cols, tokens, WeightFormat::kInt8);
        ActivationBlock acts;
        acts.Reserve(tokens, c.w.padded_cols);
        PrepareActivations(avx, c.x.data(), tokens, c.w.padded_cols, WeightFormat::kInt8, &acts);
        const std::vector<float> start = RandomVector(rng, static_cast<size_t>(tokens * rows));
        auto run = [&](const KernelTable& k, std::vector<int64_t> cuts, bool accumulate) {
          std::vector<float> y = start;
          MatmulArgs a{&c.w, &acts, y.data(), rows, accumulate, bias.data(), decode};
          for (size_t i = 0; i + 1 < cuts.size(); ++i) k.matmul_int8(a, cuts[i], cuts[i + 1]);
          return y;
        };
        for (bool accumulate : {false, true}) {
          const std::vector<float> want = run(avx, {0, 11}, accumulate);
          for (const std::vector<int64_t>& cuts :
               {std::vector<int64_t>{0, 11}, {0, 3, 5, 6, 10, 11}, {0, 1, 2, 7, 11}}) {
            const std::vector<float> got = run(amx, cuts, accumulate);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << "accumulate " << accumulate << " cuts " << cuts.size();
          }
        }
      }
    }
  }
}

// Balanced dispatches hand out panel ranges that change from call to call: every panel's
// outputs must be the same bits whichever range (and so whichever tile width) covered it.
TEST_P(IsaTest, PanelOutputsAreIndependentOfPanelRanges) {
  std::mt19937 rng(43);
  // 23 panels: decode tiles of 4, 2 and 1 panels and prompt tiles of 2 and 1 all occur on
  // AVX-512 (the scalar and 256-bit kernels tile one panel at a time, so there it can only
  // catch a kernel whose panels depend on each other).
  const int64_t rows = 16 * 23, cols = 200;
  const std::vector<float> w = RandomVector(rng, static_cast<size_t>(rows * cols), 0.5f);
  for (int64_t tokens : {1, 5}) {
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
      const PackedCase c = MakePackedCase(rng, w, rows, cols, tokens, f);
      ActivationBlock acts;
      acts.Reserve(tokens, c.w.padded_cols);
      PrepareActivations(*k_, c.x.data(), tokens, c.w.padded_cols, f, &acts);
      auto run = [&](const std::vector<int64_t>& cuts, std::vector<float>* y) {
        MatmulArgs a{&c.w, &acts, y->data(), rows, false, nullptr};
        for (size_t i = 0; i + 1 < cuts.size(); ++i) k_->Matmul(f)(a, cuts[i], cuts[i + 1]);
      };
      std::vector<float> whole(static_cast<size_t>(tokens * rows)), split = whole, singles = whole;
      run({0, 23}, &whole);
      run({0, 3, 5, 6, 13, 23}, &split);
      std::vector<int64_t> each;
      for (int64_t p = 0; p <= 23; ++p) each.push_back(p);
      run(each, &singles);
      EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0)
          << WeightFormatName(f) << " tokens " << tokens;
      EXPECT_EQ(std::memcmp(whole.data(), singles.data(), whole.size() * sizeof(float)), 0)
          << WeightFormatName(f) << " tokens " << tokens;
    }
  }
}

TEST_P(IsaTest, QuantizeRowIsBitIdenticalToScalar) {
  std::mt19937 rng(5);
  for (int64_t n : {32, 64, 96, 576, 1536}) {
    for (float scale : {0.0f, 1e-3f, 1.0f, 300.0f}) {
      std::vector<float> x = RandomVector(rng, static_cast<size_t>(n), scale);
      if (n > 64) x[7] = scale * 1.5f;  // a lone outlier
      std::vector<int8_t> q1(static_cast<size_t>(n)), q2(static_cast<size_t>(n));
      std::vector<int32_t> s1(static_cast<size_t>(n / 32)), s2(static_cast<size_t>(n / 32));
      float sc1 = 0, sc2 = 0;
      ref().quantize_row(x.data(), n, q1.data(), &sc1, s1.data());
      k_->quantize_row(x.data(), n, q2.data(), &sc2, s2.data());
      EXPECT_EQ(q1, q2);
      EXPECT_EQ(s1, s2);
      EXPECT_EQ(sc1, sc2);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(q1[static_cast<size_t>(i)] * sc1, x[static_cast<size_t>(i)],
                    sc1 * 0.5001f + 1e-30f);
      }
    }
  }
}

TEST_P(IsaTest, ToBf16IsBitIdenticalToScalar) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 7, 16, 33, 100}) {
    std::vector<float> x = RandomVector(rng, static_cast<size_t>(n), 10.0f);
    x[0] = 1.00390625f;  // exactly halfway between two bf16 values: ties to even
    // Subnormals keep their bits (not flushed to zero), NaN stays a quiet NaN, infinities and
    // values that round up to infinity.
    const float specials[] = {1e-40f, -3e-39f, std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::infinity(), 3.4e38f};
    for (size_t i = 1; i < x.size() && i <= std::size(specials); ++i) x[i] = specials[i - 1];
    std::vector<uint16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ref().to_bf16(x.data(), n, a.data());
    k_->to_bf16(x.data(), n, b.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(a[0], FloatToBf16(1.00390625f));
  }
}

TEST_P(IsaTest, RmsNormMatchesScalar) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 8, 12, 15, 64, 100, 576}) {
    int64_t padded = (n + 31) / 32 * 32;
    std::vector<float> x = RandomVector(rng, static_cast<size_t>(n), 3.0f);
    std::vector<float> w = RandomVector(rng, static_cast<size_t>(n));
    std::vector<float> a(static_cast<size_t>(padded), 9.0f), b(static_cast<size_t>(padded), 9.0f);
    ref().rms_norm(x.data(), w.data(), n, padded, 1e-6f, a.data());
    k_->rms_norm(x.data(), w.data(), n, padded, 1e-6f, b.data());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(a[i]))) << n << " " << i;
    // In place, as the backend does for per-head q/k norms.
    std::vector<float> c = x;
    k_->rms_norm(c.data(), w.data(), n, n, 1e-6f, c.data());
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(c[static_cast<size_t>(i)], a[static_cast<size_t>(i)],
                  1e-5f * (1 + std::fabs(a[static_cast<size_t>(i)])));
  }
}

TEST_P(IsaTest, RopeMatchesScalar) {
  std::mt19937 rng(8);
  for (int64_t head_dim : {2, 8, 12, 40, 64, 128, 256}) {
    // Whole heads, and partial rotary (the first quarter, as Qwen3.5 rotates; pass-through
    // dims must come out untouched).
    for (int64_t rotary : {head_dim, std::max<int64_t>(2, head_dim / 4 / 2 * 2)}) {
      for (int64_t heads : {1, 3}) {
        std::vector<float> x = RandomVector(rng, static_cast<size_t>(heads * head_dim));
        std::vector<float> cs = RandomVector(rng, static_cast<size_t>(rotary / 2));
        std::vector<float> sn = RandomVector(rng, static_cast<size_t>(rotary / 2));
        std::vector<float> a = x, b = x;
        ref().rope(a.data(), heads, head_dim, rotary, cs.data(), sn.data());
        k_->rope(b.data(), heads, head_dim, rotary, cs.data(), sn.data());
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_NEAR(a[i], b[i], 1e-6f) << head_dim << " " << i;
          if (static_cast<int64_t>(i) % head_dim >= rotary) {
            EXPECT_EQ(b[i], x[i]);
          }
        }
        if (rotary < head_dim) {
          EXPECT_NE(a, x);
        }
      }
    }
  }
}

TEST_P(IsaTest, GegluMatchesScalarAndTheTanhFormula) {
  std::mt19937 rng(19);
  for (int64_t n : {1, 7, 8, 17, 80, 1536}) {
    std::vector<float> g = RandomVector(rng, static_cast<size_t>(n), 8.0f);
    std::vector<float> u = RandomVector(rng, static_cast<size_t>(n), 2.0f);
    g[0] = -40.0f;
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ref().geglu(g.data(), u.data(), n, a.data());
    k_->geglu(g.data(), u.data(), n, b.data());
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = static_cast<size_t>(i);
      const double x = g[j];
      const double tanh_form =
          0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[j];
      EXPECT_NEAR(a[j], tanh_form, 1e-5 * (1 + std::fabs(tanh_form))) << n << " " << i;
      EXPECT_NEAR(a[j], b[j], 4e-6f * (1 + std::fabs(a[j]))) << n << " " << i;
    }
  }
}

TEST_P(IsaTest, DeltaNetStepMatchesScalar) {
  std::mt19937 rng(23);
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{4, 8}, {16, 24}, {128, 128}, {32, 72}}) {
    std::vector<float> state = RandomVector(rng, static_cast<size_t>(dk * dv), 0.5f);
    std::vector<float> other = state, whole = state;
    std::vector<float> out_a(static_cast<size_t>(dv)), out_b(static_cast<size_t>(dv));
    std::vector<float> out_whole(static_cast<size_t>(dv));
    for (int step = 0; step < 5; ++step) {
      std::vector<float> q = RandomVector(rng, static_cast<size_t>(dk), 0.3f);
      std::vector<float> k = RandomVector(rng, static_cast<size_t>(dk), 0.3f);
      std::vector<float> v = RandomVector(rng, static_cast<size_t>(dv));
      const float beta = 0.3f + 0.1f * static_cast<float>(step), decay = 0.9f;
      ref().deltanet_step(state.data(), dv, q.data(), k.data(), v.data(), beta, decay, dk, dv,
                          out_a.data());
      // The SIMD one a column block at a time (blocks of 32 as the cpu backend runs it, and a
      // ragged rest): columns are independent.
      for (int64_t j0 = 0; j0 < dv; j0 += 32) {
        const int64_t w = std::min<int64_t>(32, dv - j0);
        k_->deltanet_step(other.data() + j0, dv, q.data(), k.data(), v.data() + j0, beta, decay, dk,
                          w, out_b.data() + j0);
      }
      // All columns in one call (decode rows hand it a whole head: 128 takes its own unrolled
      // path): the same bits as in blocks of 32.
      k_->deltanet_step(whole.data(), dv, q.data(), k.data(), v.data(), beta, decay, dk, dv,
                        out_whole.data());
      EXPECT_EQ(out_whole, out_b) << dk << " x " << dv;
      EXPECT_EQ(whole, other) << dk << " x " << dv;
      for (size_t j = 0; j < out_a.size(); ++j) {
        EXPECT_NEAR(out_a[j], out_b[j], 1e-5f * (1 + std::fabs(out_a[j]))) << dk << " " << j;
      }
      for (size_t i = 0; i < state.size(); ++i) {
        EXPECT_NEAR(state[i], other[i], 1e-5f * (1 + std::fabs(state[i]))) << dk << " " << i;
      }
    }
  }
}

TEST_P(IsaTest, SwigluMatchesScalar) {
  std::mt19937 rng(9);
  for (int64_t n : {1, 7, 8, 17, 80, 1536}) {
    std::vector<float> g = RandomVector(rng, static_cast<size_t>(n), 12.0f);
    std::vector<float> u = RandomVector(rng, static_cast<size_t>(n), 2.0f);
    g[0] = -95.0f;  // exp overflow territory for -g
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ref().swiglu(g.data(), u.data(), n, a.data());
    k_->swiglu(g.data(), u.data(), n, b.data());
    for (int64_t i = 0; i < n; ++i) {
      size_t j = static_cast<size_t>(i);
      EXPECT_NEAR(a[j], b[j], 2e-6f * (1 + std::fabs(a[j]))) << n << " " << i;
    }
  }
}

// Where the kernels under test find the cache (the scalar reference always reads it
// interleaved, each position's kv heads side by side in one row):
//   kInterleaved: [positions][kv_heads * head_dim] (the sliding-window rings);
//   kHeadMajor:   [kv_heads][positions][head_dim] (AttentionArgs::kv_head_stride);
//   kPaged:       the CPU backend's KV block pool, [kv_heads][pool blocks][32][head_dim], the
//                 sequence's 32-position blocks scattered over it through a block table
//                 (AttentionArgs::kv_blocks), unused pool rows holding finite junk.
// The transposed keys of the blocked kernels follow the same layout (contiguous tiles for the
// first two). A kernel that took kv head g at g * head_dim, or position t at t * kv_stride
// past the first block, reads other positions' values.
enum class CacheLayout { kInterleaved, kHeadMajor, kPaged };

// A cache of `positions` positions laid out as `layout`, filled from the interleaved `from`.
template <typename T>
struct LaidOutCache {
  std::vector<T> keys, values, keys_t;
};
struct CachePlan {
  CacheLayout layout = CacheLayout::kInterleaved;
  int64_t kv_heads = 0, head_dim = 0, positions = 0;
  int64_t pool_blocks = 0;
  std::vector<int32_t> block_table = {};
  int64_t tiles() const { return (positions + 15) / 16; }
  int64_t row_elements() const {
    return layout == CacheLayout::kPaged ? kv_heads * pool_blocks * 32 * head_dim
                                         : positions * kv_heads * head_dim;
  }
  int64_t keys_t_elements() const {
    return layout == CacheLayout::kPaged ? row_elements() : kv_heads * tiles() * head_dim * 16;
  }
  int64_t Row(int64_t t, int64_t g) const {
    switch (layout) {
      case CacheLayout::kInterleaved:
        return (t * kv_heads + g) * head_dim;
      case CacheLayout::kHeadMajor:
        return (g * positions + t) * head_dim;
      case CacheLayout::kPaged:
        return ((g * pool_blocks + block_table[static_cast<size_t>(t / 32)]) * 32 + t % 32) *
               head_dim;
    }
    return 0;
  }
  int64_t KeyT(int64_t t, int64_t g, int64_t i) const {
    if (layout == CacheLayout::kPaged) {
      return (g * pool_blocks + block_table[static_cast<size_t>(t / 32)]) * 32 * head_dim +
             (t % 32) / 16 * head_dim * 16 + i * 16 + t % 16;
    }
    return ((g * tiles() + t / 16) * head_dim + i) * 16 + t % 16;
  }
  template <typename T>
  LaidOutCache<T> Lay(const std::vector<T>& keys, const std::vector<T>& values, T junk) const {
    LaidOutCache<T> c;
    c.keys.assign(static_cast<size_t>(row_elements()), junk);
    c.values.assign(static_cast<size_t>(row_elements()), junk);
    c.keys_t.assign(static_cast<size_t>(keys_t_elements()), junk);
    for (int64_t g = 0; g < kv_heads; ++g) {
      for (int64_t t = 0; t < positions; ++t) {
        for (int64_t i = 0; i < head_dim; ++i) {
          const size_t from = static_cast<size_t>((t * kv_heads + g) * head_dim + i);
          c.keys[static_cast<size_t>(Row(t, g) + i)] = keys[from];
          c.values[static_cast<size_t>(Row(t, g) + i)] = values[from];
          c.keys_t[static_cast<size_t>(KeyT(t, g, i))] = keys[from];
        }
      }
    }
    return c;
  }
  // Points a at the cache's arrays (of either precision) and strides.
  void Point(AttentionArgs& a) const {
    a.kv_stride = layout == CacheLayout::kInterleaved ? kv_heads * head_dim : head_dim;
    a.kv_head_stride = layout == CacheLayout::kInterleaved ? 0
                       : layout == CacheLayout::kHeadMajor ? positions * head_dim
                                                           : pool_blocks * 32 * head_dim;
    a.keys_t_head_stride =
        layout == CacheLayout::kPaged ? pool_blocks * 32 * head_dim : tiles() * head_dim * 16;
    if (layout == CacheLayout::kPaged) {
      a.kv_blocks = block_table.data();
      a.kv_block_shift = 5;
      a.kv_block_stride = 32 * head_dim;
      a.keys_t_block_stride = 32 * head_dim;
    }
  }
};

// Every attention kernel against the scalar one over an fp32 cache, and (kv_bf16) over a bf16
// cache: keys and values rounded to bf16 first, so the fp32 scalar result on the rounded values
// is what the widening kernels must give. The blocked and decode-split kernels are checked
// wherever the table has them (the AVX2 and AVX-512 families).
void CheckAttention(const KernelTable& k, bool bf16,
                    CacheLayout layout = CacheLayout::kInterleaved) {
  std::mt19937 rng(10);
  struct Case {
    int64_t heads, kv_heads, head_dim, start_pos, rows;
  };
  for (Case c : std::vector<Case>{{1, 1, 8, 0, 1},
                                  {8, 2, 12, 0, 5},
                                  {4, 4, 64, 37, 1},
                                  {9, 3, 64, 0, 17},
                                  {2, 1, 128, 100, 3},
                                  {4, 2, 20, 5, 9},
                                  {16, 8, 128, 0, 2},
                                  {3, 1, 6, 40, 33},
                                  {14, 2, 64, 0, 70},
                                  {9, 3, 64, 21, 40},
                                  {16, 8, 128, 3, 19},
                                  {10, 2, 80, 130, 35},
                                  // decode steps (one row) of grouped heads at longer contexts
                                  {9, 3, 64, 300, 1},
                                  {14, 2, 64, 1000, 1},
                                  {16, 8, 128, 77, 1},
                                  {12, 2, 128, 700, 1},
                                  {4, 2, 40, 290, 1},
                                  // Qwen3.5 / Gemma 3 heads of 256 (and a ragged 200)
                                  {8, 2, 256, 0, 21},
                                  {4, 1, 256, 40, 9},
                                  {8, 2, 256, 600, 1},
                                  {6, 3, 200, 17, 18}}) {
    SCOPED_TRACE("heads=" + std::to_string(c.heads) + " hd=" + std::to_string(c.head_dim) +
                 " start=" + std::to_string(c.start_pos) + " rows=" + std::to_string(c.rows));
    const int64_t kv_stride = c.kv_heads * c.head_dim, positions = c.start_pos + c.rows;
    const int64_t q_stride = c.heads * c.head_dim + 3;  // a stride wider than the heads
    auto q = RandomVector(rng, static_cast<size_t>(c.rows * q_stride), 2.0f);
    auto keys = RandomVector(rng, static_cast<size_t>(positions * kv_stride), 2.0f);
    auto values = RandomVector(rng, static_cast<size_t>(positions * kv_stride));
    std::vector<uint16_t> keys16(keys.size()), values16(values.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      keys16[i] = FloatToBf16(keys[i]);
      values16[i] = FloatToBf16(values[i]);
      if (bf16) {
        keys[i] = Bf16ToFloat(keys16[i]);
        values[i] = Bf16ToFloat(values16[i]);
      }
    }
    AttentionArgs a;
    a.q = q.data();
    a.q_stride = q_stride;
    a.keys = keys.data();
    a.values = values.data();
    a.kv_stride = kv_stride;
    a.start_pos = c.start_pos;
    a.rows = c.rows;
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.head_dim = c.head_dim;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    a.out_stride = c.heads * c.head_dim;
    std::vector<float> want(static_cast<size_t>(c.rows * a.out_stride)), got = want;
    std::vector<float> scores(static_cast<size_t>(positions));
    a.out = want.data();
    ScalarKernels().attention(a, 0, c.rows * c.heads, scores.data());  // fp32, interleaved

    CachePlan plan{
        .layout = layout, .kv_heads = c.kv_heads, .head_dim = c.head_dim, .positions = positions};
    if (layout == CacheLayout::kPaged) {
      // The sequence's blocks taken out of order from a pool with spare blocks.
      const int64_t blocks = (positions + 31) / 32;
      plan.pool_blocks = blocks + 3;
      std::vector<int32_t> pool(static_cast<size_t>(plan.pool_blocks));
      for (size_t b = 0; b < pool.size(); ++b) pool[b] = static_cast<int32_t>(b);
      std::shuffle(pool.begin(), pool.end(), rng);
      plan.block_table.assign(pool.begin(), pool.begin() + blocks);
    }
    // Large finite junk where nothing was written (padding positions, unused pool rows): causal
    // masking must keep it out.
    const LaidOutCache<float> f32 = plan.Lay(keys, values, 1e4f);
    const LaidOutCache<uint16_t> b16 = plan.Lay(keys16, values16, FloatToBf16(1e4f));
    plan.Point(a);
    if (bf16) {
      a.kv_bf16 = true;
      a.keys_bf16 = b16.keys.data();
      a.values_bf16 = b16.values.data();
      a.keys_t_bf16 = b16.keys_t.data();
      a.keys = a.values = nullptr;  // the kernels must not read the fp32 arrays
    } else {
      a.keys = f32.keys.data();
      a.values = f32.values.data();
      a.keys_t = f32.keys_t.data();
    }
    a.out = got.data();
    const int64_t tasks = c.rows * c.heads;
    k.attention(a, 0, tasks / 2, scores.data());
    k.attention(a, tasks / 2, tasks, scores.data());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5f) << i;

    // The blocked kernel, where there is one, over the transposed keys.
    if (k.attention_blocked == nullptr || c.head_dim > 256) continue;
    std::vector<float> blocked(want.size(), -1.0f);
    std::vector<float> block_scores(
        static_cast<size_t>(kBlockedAttentionQueries * BlockedAttentionScoreStride(positions)));
    a.out = blocked.data();
    const int64_t blocked_tasks = BlockedAttentionTasks(a);
    k.attention_blocked(a, 0, blocked_tasks / 2, block_scores.data());
    k.attention_blocked(a, blocked_tasks / 2, blocked_tasks, block_scores.data());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(blocked[i], want[i], 2e-5f) << i;

    // Decode rows also split over positions (1 to 5 splits; short contexts leave later
    // splits empty), then merged.
    if (c.rows != 1 || k.attention_decode_split == nullptr) continue;
    for (int64_t splits = 1; splits <= 5; ++splits) {
      SCOPED_TRACE("splits=" + std::to_string(splits));
      std::vector<float> partials(
          static_cast<size_t>(c.heads * splits * DecodeSplitPartialSize(c.head_dim)), 7.0f);
      std::vector<float> merged(want.size(), -1.0f);
      a.out = merged.data();
      const int64_t split_tasks = c.kv_heads * splits;
      k.attention_decode_split(a, splits, 0, split_tasks / 2, block_scores.data(), partials.data());
      k.attention_decode_split(a, splits, split_tasks / 2, split_tasks, block_scores.data(),
                               partials.data());
      MergeDecodeSplits(a, splits, partials.data());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(merged[i], want[i], 2e-5f) << i;
    }
  }
}

TEST_P(IsaTest, AttentionMatchesScalar) {
  CheckAttention(*k_, /*bf16=*/false);
}
TEST_P(IsaTest, AttentionOverABf16CacheMatchesScalar) {
  CheckAttention(*k_, /*bf16=*/true);
}
TEST_P(IsaTest, AttentionOverAHeadMajorCacheMatchesScalar) {
  CheckAttention(*k_, /*bf16=*/false, CacheLayout::kHeadMajor);
  CheckAttention(*k_, /*bf16=*/true, CacheLayout::kHeadMajor);
}
TEST_P(IsaTest, AttentionOverAPagedCacheMatchesScalar) {
  CheckAttention(*k_, /*bf16=*/false, CacheLayout::kPaged);
  CheckAttention(*k_, /*bf16=*/true, CacheLayout::kPaged);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, IsaTest,
                         ::testing::Values(CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni,
                                           CpuIsa::kAvx512, CpuIsa::kAvx512Amx),
                         IsaName);

// Weight quantization at load: every value, including exact ties (k + 0.5), values that
// clamp, NaN and infinities, equals the scalar definition; lengths hit every tail.
TEST_P(IsaTest, QuantizeWeightsMatchesScalar) {
  std::mt19937 rng(31);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 100, 257}) {
    for (auto [lo, hi] : {std::pair{-127.0f, 127.0f}, std::pair{-8.0f, 7.0f}}) {
      for (float d : {1.0f, 0.37f, -0.2f, 1e-3f}) {
        std::vector<float> x = RandomVector(rng, static_cast<size_t>(n), 150.0f * std::fabs(d));
        for (int64_t i = 0; i < n; i += 3)
          x[static_cast<size_t>(i)] = (static_cast<float>(i % 19) - 9.5f) * d;
        if (n > 4) {
          x[1] = std::nanf("");
          x[2] = std::numeric_limits<float>::infinity();
          x[4] = -std::numeric_limits<float>::infinity();
        }
        std::vector<int8_t> got(static_cast<size_t>(n) + 1, 42),
            want(static_cast<size_t>(n) + 1, 42);
        k_->quantize_weights(x.data(), n, d, lo, hi, got.data());
        ref().quantize_weights(x.data(), n, d, lo, hi, want.data());
        EXPECT_EQ(got, want) << "n=" << n << " d=" << d << " hi=" << hi;  // incl. the guard byte
      }
    }
  }
}

// ---- packing and quantization (ISA independent) ----

TEST(PackMatrix, F32AndBf16RoundTripTheirValues) {
  std::mt19937 rng(11);
  auto w = RandomVector(rng, 37 * 45);
  auto f32 = PackMatrix(w, 37, 45, WeightFormat::kF32);
  auto bf16 = PackMatrix(w, 37, 45, WeightFormat::kBF16);
  ASSERT_TRUE(f32 && bf16);
  EXPECT_EQ(f32->padded_rows, 48);
  EXPECT_EQ(f32->padded_cols, 64);
  for (int64_t r = 0; r < 37; ++r) {
    for (int64_t c = 0; c < 45; ++c) {
      float v = w[static_cast<size_t>(r * 45 + c)];
      EXPECT_EQ(PackedValueF32(*f32, r, c), v);
      EXPECT_EQ(PackedValueF32(*bf16, r, c), Bf16ToFloat(FloatToBf16(v)));
    }
  }
}

TEST(PackMatrix, Int8IsPerRowSymmetricRoundHalfAwayFromZero) {
  // Row 0: max 127 -> scale 1, so the quantized values are the rounded inputs.
  std::vector<float> w = {127.0f, 2.5f, -2.5f, 0.49f, -126.5f, 3.5f, 0.0f, -127.0f};
  auto m = PackMatrix(w, 1, 8, WeightFormat::kInt8);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->row_scale[0], 1.0f);
  std::vector<int> want = {127, 3, -3, 0, -127, 4, 0, -127};
  int sum = 0;
  for (int64_t c = 0; c < 8; ++c) {
    EXPECT_EQ(PackedQuantValue(*m, 0, c), want[static_cast<size_t>(c)]) << c;
    sum += want[static_cast<size_t>(c)];
  }
  EXPECT_EQ(m->row_offset[0], -128 * sum);
}

TEST(PackMatrix, QuantizationErrorIsBoundedAndDeterministic) {
  std::mt19937 rng(12);
  const int64_t rows = 40, cols = 100;  // a partial last block of 4 columns
  auto w = RandomVector(rng, static_cast<size_t>(rows * cols));
  for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kInt4}) {
    auto a = PackMatrix(w, rows, cols, f);
    auto b = PackMatrix(w, rows, cols, f);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->data.size(), b->data.size());
    EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), a->data.size()), 0);
    double err_sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        float v = w[static_cast<size_t>(r * cols + c)];
        float step = f == WeightFormat::kInt8 ? a->row_scale[static_cast<size_t>(r)]
                                              : std::fabs(Int4BlockScale(*a, r, c / 32));
        float err = std::fabs(DequantizedValue(*a, r, c) - v);
        // Half a step, except INT4's one clamped side (q = +8 -> 7), a full step.
        EXPECT_LE(err, (f == WeightFormat::kInt8 ? 0.5f : 1.0f) * step * 1.01f + 1e-7f);
        err_sum += err;
        int q = PackedQuantValue(*a, r, c);
        EXPECT_GE(q, f == WeightFormat::kInt8 ? -127 : -8);
        EXPECT_LE(q, f == WeightFormat::kInt8 ? 127 : 7);
      }
    }
    EXPECT_LT(err_sum / (rows * cols), f == WeightFormat::kInt8 ? 0.003 : 0.05);
  }
}

TEST(PackMatrix, Int4LargestMagnitudeMapsToMinusEight) {
  std::vector<float> w(32, 0.11f);
  w[5] = -1.6f;  // d = -1.6 / -8 = 0.2
  w[6] = 1.58f;  // 7.9 -> 8 -> clamped to 7
  auto m = PackMatrix(w, 1, 32, WeightFormat::kInt4);
  ASSERT_TRUE(m);
  EXPECT_FLOAT_EQ(Int4BlockScale(*m, 0, 0), Bf16ToFloat(FloatToBf16(0.2f)));
  EXPECT_EQ(PackedQuantValue(*m, 0, 5), -8);
  EXPECT_EQ(PackedQuantValue(*m, 0, 6), 7);
  EXPECT_EQ(PackedQuantValue(*m, 0, 0), 1);  // 0.11 / 0.2 = 0.55 -> 1
}

TEST(PackMatrix, RejectsMismatchedShapesAndAuto) {
  std::vector<float> w(10);
  EXPECT_FALSE(PackMatrix(w, 3, 4, WeightFormat::kF32));
  EXPECT_FALSE(PackMatrix(w, 0, 10, WeightFormat::kF32));
  EXPECT_FALSE(PackMatrix(w, 2, 5, WeightFormat::kAuto));
}

TEST(CpuFeatures, FamiliesAreNamedAndAnUnknownNameIsAnError) {
  EXPECT_TRUE(CpuSupports(CpuIsa::kScalar));
  for (CpuIsa isa :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni, CpuIsa::kAvx512, CpuIsa::kAvx512Amx}) {
    auto parsed = ParseCpuIsa(CpuIsaName(isa));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, isa);
    // A family has a kernel table exactly when the machine runs it; every other family needs
    // AVX2.
    if (CpuSupports(isa)) {
      ASSERT_NE(KernelsFor(isa), nullptr);
      EXPECT_EQ(KernelsFor(isa)->isa, isa);
      EXPECT_NE(SupportedCpuIsaNames().find(CpuIsaName(isa)), std::string::npos);
      if (isa != CpuIsa::kScalar) {
        EXPECT_TRUE(CpuSupports(CpuIsa::kAvx2));
      }
    } else {
      EXPECT_EQ(KernelsFor(isa), nullptr);
    }
  }
  for (const char* bogus : {"sse9", "bogus", "", "AVX2"}) {
    auto parsed = ParseCpuIsa(bogus);
    ASSERT_FALSE(parsed) << bogus;
    EXPECT_NE(parsed.status().message().find("scalar, avx2, avx2vnni, avx512 or avx512amx"),
              std::string::npos)
        << parsed.status().message();
  }
  EXPECT_NE(KernelsFor(DetectCpuIsa()), nullptr);
}

// The probed traits agree with what the kernel reports (Linux's /proc/cpuinfo: vendor_id and
// the flags avx_vnni and avx512_bf16), and the AVX-512 table holds the matmuls chosen from
// them: the far prefetch, and vdpbf16ps exactly where AVX512_BF16 is.
TEST(CpuFeatures, ProbedTraitsAgreeWithTheKernel) {
  std::ifstream info("/proc/cpuinfo");
  std::string line, vendor, flags;
  while (std::getline(info, line) && (vendor.empty() || flags.empty())) {
    const std::string value =
        line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1);
    if (line.rfind("vendor_id", 0) == 0) vendor = value.substr(value.find_first_not_of(" \t"));
    if (line.rfind("flags", 0) == 0) flags = value + " ";
  }
  if (vendor.empty() || flags.empty()) GTEST_SKIP() << "no vendor_id or flags in /proc/cpuinfo";
  const CpuTraits& t = ProbedCpuTraits();
  EXPECT_EQ(t.amd, vendor == "AuthenticAMD") << vendor;
  EXPECT_EQ(t.avx512, CpuSupports(CpuIsa::kAvx512));
  // The avx512 family is exactly these flags, AVX512_BF16 or not (Ice Lake, this KVM Xeon).
  bool avx512_set = true;
  for (const char* flag :
       {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}) {
    avx512_set = avx512_set && flags.find(" " + std::string(flag) + " ") != std::string::npos;
  }
  EXPECT_EQ(CpuSupports(CpuIsa::kAvx512), avx512_set) << flags;
  EXPECT_EQ(t.avx_vnni, flags.find(" avx_vnni ") != std::string::npos) << flags;
  EXPECT_EQ(t.avx512_bf16, t.avx512 && flags.find(" avx512_bf16 ") != std::string::npos) << flags;
  EXPECT_EQ(CpuDecodeFarPrefetch(), ChooseDecodeFarPrefetch(t));
  if (!t.amd) {
    EXPECT_EQ(CpuDecodeFarPrefetch(), DecodeFarPrefetch::kL2Fixed);
  }
  if (CpuSupports(CpuIsa::kAvx512)) {
    EXPECT_EQ(Avx512Kernels().matmul_int8,
              Avx512Matmul(WeightFormat::kInt8, CpuDecodeFarPrefetch()));
    EXPECT_EQ(Avx512Kernels().matmul_bf16,
              Avx512Matmul(WeightFormat::kBF16, CpuDecodeFarPrefetch()));
    EXPECT_EQ(Avx512Kernels().matmul_int4,
              Avx512Matmul(WeightFormat::kInt4, CpuDecodeFarPrefetch()));
    EXPECT_EQ(Avx512Kernels().matmul_bf16_dot != nullptr, t.avx512_bf16);
    EXPECT_NE(Avx512Matmul(WeightFormat::kBF16, DecodeFarPrefetch::kL2Fixed),
              Avx512Matmul(WeightFormat::kBF16, DecodeFarPrefetch::kL2NextTile));
    EXPECT_NE(Avx512Matmul(WeightFormat::kInt4, DecodeFarPrefetch::kL2Fixed),
              Avx512Matmul(WeightFormat::kInt4, DecodeFarPrefetch::kL2NextTile));
    EXPECT_NE(Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kL2Fixed),
              Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kNonTemporalNextTile));
    EXPECT_NE(Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kL2Fixed),
              Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kL2NextTile));
    EXPECT_NE(Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kNonTemporalNextTile),
              Avx512Matmul(WeightFormat::kInt8, DecodeFarPrefetch::kL2NextTile));
  }
  // The other families' tables never hold the vdpbf16ps matmul.
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni}) {
    if (const KernelTable* k = KernelsFor(isa)) {
      EXPECT_EQ(k->matmul_bf16_dot, nullptr);
    }
  }
}

// The far prefetch is a function of vendor and features, on each kind of CPU (Zen 3 shares
// Zen 4's CPUID family 19h but has no AVX-512; Zen 5 adds AVX-VNNI to Zen 4's set).
TEST(CpuFeatures, DecodeFarPrefetchFollowsVendorAndFeatures) {
  struct Case {
    const char* cpu;
    CpuTraits traits;
    DecodeFarPrefetch want;
  };
  const Case cases[] = {
      {"Zen 5",
       {.amd = true, .avx512 = true, .avx_vnni = true, .avx512_bf16 = true},
       DecodeFarPrefetch::kNonTemporalNextTile},
      {"Zen 4",
       {.amd = true, .avx512 = true, .avx_vnni = false, .avx512_bf16 = true},
       DecodeFarPrefetch::kL2NextTile},
      {"Zen 3",
       {.amd = true, .avx512 = false, .avx_vnni = false, .avx512_bf16 = false},
       DecodeFarPrefetch::kL2Fixed},
      {"Sapphire Rapids",
       {.amd = false, .avx512 = true, .avx_vnni = true, .avx512_bf16 = true},
       DecodeFarPrefetch::kL2Fixed},
      {"Ice Lake",
       {.amd = false, .avx512 = true, .avx_vnni = false, .avx512_bf16 = false},
       DecodeFarPrefetch::kL2Fixed},
      {"Alder Lake",
       {.amd = false, .avx512 = false, .avx_vnni = true, .avx512_bf16 = false},
       DecodeFarPrefetch::kL2Fixed},
      {"no x86 features", {}, DecodeFarPrefetch::kL2Fixed},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ChooseDecodeFarPrefetch(c.traits), c.want)
        << c.cpu << ": " << DecodeFarPrefetchName(ChooseDecodeFarPrefetch(c.traits));
  }
  // What the reports name for each family on this CPU.
  EXPECT_EQ(DecodePrefetchName(CpuIsa::kAvx512), DecodeFarPrefetchName(CpuDecodeFarPrefetch()));
  EXPECT_EQ(DecodePrefetchName(CpuIsa::kAvx512Amx), DecodeFarPrefetchName(CpuDecodeFarPrefetch()));
  EXPECT_EQ(DecodePrefetchName(CpuIsa::kAvx2), "near-only");
  EXPECT_EQ(DecodePrefetchName(CpuIsa::kAvx2Vnni), "near-only");
  EXPECT_EQ(DecodePrefetchName(CpuIsa::kScalar), "none");
  EXPECT_EQ(DecodeFarPrefetchName(DecodeFarPrefetch::kL2Fixed), "l2-16k");
  EXPECT_EQ(DecodeFarPrefetchName(DecodeFarPrefetch::kL2NextTile), "l2-next-tile");
  EXPECT_EQ(DecodeFarPrefetchName(DecodeFarPrefetch::kNonTemporalNextTile), "nta-next-tile");
}

// A family this CPU lacks is refused naming the missing features and the families it runs.
TEST(CpuFeatures, AnUnavailableFamilyNamesWhatIsMissing) {
  for (CpuIsa isa :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni, CpuIsa::kAvx512, CpuIsa::kAvx512Amx}) {
    const auto missing = MissingCpuFeatures(isa);
    EXPECT_EQ(missing.empty(), CpuSupports(isa)) << CpuIsaName(isa);
    if (CpuSupports(isa)) continue;
    const std::string message = CpuIsaUnavailableMessage(isa);
    EXPECT_EQ(message.rfind("--cpu-isa " + std::string(CpuIsaName(isa)) + ": this CPU lacks ", 0),
              0u)
        << message;
    for (std::string_view name : missing) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
    EXPECT_NE(message.find("this CPU runs " + SupportedCpuIsaNames()), std::string::npos)
        << message;
  }
  // AVX512_BF16 is no part of any family.
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx512Amx}) {
    for (std::string_view name : MissingCpuFeatures(isa)) EXPECT_NE(name, "avx512bf16");
  }
}

}  // namespace
}  // namespace tessera
