// The fast panel packer (PackMatrixFrom: panel at a time, optionally on a pool, rows widened
// straight from a checkpoint) against the element-by-element reference (PackMatrixReference),
// byte for byte, in every format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_weights.h"
#include "backend/cpu/packed_matrix.h"
#include "base/thread_pool.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "model/tensor_convert.h"
#include "test_support.h"

namespace tessera {
namespace {

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8,
                                     WeightFormat::kInt4};

template <typename T>
bool SameBuffer(const PanelBuffer<T>& a, const PanelBuffer<T>& b) {
  return a.size() == b.size() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void ExpectSamePacking(const PackedMatrix& got, const PackedMatrix& want, const std::string& what) {
  EXPECT_EQ(got.rows, want.rows) << what;
  EXPECT_EQ(got.cols, want.cols) << what;
  EXPECT_TRUE(SameBuffer(got.data, want.data)) << what << ": panels differ";
  EXPECT_TRUE(SameBuffer(got.row_scale, want.row_scale)) << what << ": row scales differ";
  EXPECT_TRUE(SameBuffer(got.row_offset, want.row_offset)) << what << ": row offsets differ";
  EXPECT_TRUE(SameBuffer(got.block_scale, want.block_scale)) << what << ": block scales differ";
}

// Random values with exact rounding ties planted: for INT8 a row whose max is 127 has scale 1,
// so k + 0.5 lands exactly on a tie; zero rows and blocks exercise the zero-scale paths.
std::vector<float> TestMatrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.3f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& x : w) x = d(rng);
  for (int64_t r = 0; r < rows; r += 3) {
    float* row = w.data() + r * cols;
    row[0] = 127.0f;
    for (int64_t c = 1; c < cols; ++c)
      row[c] = static_cast<float>(static_cast<int>(c % 250) - 125) + 0.5f;
  }
  if (rows > 4) std::fill(w.begin() + 4 * cols, w.begin() + 5 * cols, 0.0f);
  return w;
}

struct Shape {
  int64_t rows, cols;
};
// Whole and partial panels, padded inputs, partial INT4 blocks.
constexpr Shape kShapes[] = {{1, 1}, {16, 32},  {17, 33},  {37, 45},   {40, 100},
                             {7, 5}, {130, 64}, {250, 31}, {33, 1000}, {64, 96}};

// fn(w, shape, format, what) for every shape of kShapes (w = its TestMatrix) in every format.
template <typename Fn>
void ForEachMatrix(Fn&& fn) {
  for (const Shape& s : kShapes) {
    const std::vector<float> w =
        TestMatrix(s.rows, s.cols, static_cast<uint32_t>(s.rows * 7 + s.cols));
    for (WeightFormat f : kFormats) {
      fn(w, s, f,
         std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " +
             std::string(WeightFormatName(f)));
    }
  }
}

TEST(PackMatrixFast, MatchesTheReferenceByteForByte) {
  ThreadPool pool(3);  // uneven panel splits
  ForEachMatrix([&](const std::vector<float>& w, Shape s, WeightFormat f, const std::string& what) {
    auto want = PackMatrixReference(w, s.rows, s.cols, f);
    ASSERT_TRUE(want) << what;
    auto serial = PackMatrix(w, s.rows, s.cols, f);
    ASSERT_TRUE(serial) << what;
    ExpectSamePacking(*serial, *want, what + " (serial)");
    auto pooled = PackMatrixFrom(
        [&](int64_t first, int64_t count, std::span<float> out) {
          EXPECT_EQ(out.size(), static_cast<size_t>(count * s.cols));
          std::memcpy(out.data(), w.data() + first * s.cols, out.size_bytes());
          return Status::Ok();
        },
        s.rows, s.cols, f, &pool);
    ASSERT_TRUE(pooled) << what;
    ExpectSamePacking(*pooled, *want, what + " (pool)");
  });
}

TEST(PackMatrixFast, NonFiniteWeightsPackAsTheReferenceDoes) {
  std::vector<float> w = TestMatrix(20, 70, 5);
  w[3] = std::numeric_limits<float>::quiet_NaN();
  w[70 + 9] = std::numeric_limits<float>::infinity();
  w[2 * 70 + 40] = -std::numeric_limits<float>::infinity();
  for (WeightFormat f : kFormats) {
    auto want = PackMatrixReference(w, 20, 70, f);
    auto got = PackMatrix(w, 20, 70, f);
    ASSERT_TRUE(want && got);
    ExpectSamePacking(*got, *want, std::string(WeightFormatName(f)));
  }
}

TEST(PackMatrixFast, ASourceErrorIsReturned) {
  ThreadPool pool(2);
  auto m = PackMatrixFrom(
      [](int64_t first, int64_t, std::span<float> out) {
        std::fill(out.begin(), out.end(), 0.0f);
        return first >= 48 ? Corrupt("row " + std::to_string(first) + " is unreadable")
                           : Status::Ok();
      },
      100, 64, WeightFormat::kInt8, &pool);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("unreadable"), std::string::npos) << m.status().message();
}

// Stacked matrices (q | k | v) whose part boundaries fall inside a 16-row panel (qwen3 with
// head_dim 12: q 96 rows, k and v 24 each, so rows 112..127 mix k and v), widened from the
// checkpoint 16 rows at a time, equal the reference packing of the concatenated parts.
TEST(PackMatrixFast, StackedLayerMatricesMatchTheReference) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kQwen3;
  spec.hidden = 64;
  spec.intermediate = 80;
  spec.layers = 1;
  spec.heads = 8;
  spec.kv_heads = 2;
  spec.head_dim = 12;
  spec.dtype = DType::kBF16;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  const LayerTensors& src = (*ckpt)->tensors.layers[0];
  auto concat = [](std::initializer_list<TensorRef> parts) {
    std::vector<float> all, one;
    for (const TensorRef& t : parts) {
      EXPECT_TRUE(WidenToF32(t, &one).ok());
      all.insert(all.end(), one.begin(), one.end());
    }
    return all;
  };
  const std::vector<float> qkv = concat({src.q_proj, src.k_proj, src.v_proj});
  const std::vector<float> gate_up = concat({src.gate_proj, src.up_proj});
  ThreadPool pool(2);
  for (WeightFormat f : kFormats) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto layer = LoadCpuLayerWeights(**ckpt, 0, f, p);
      ASSERT_TRUE(layer) << layer.status().message();
      auto want_qkv = PackMatrixReference(qkv, 96 + 24 + 24, 64, f);
      auto want_gate_up = PackMatrixReference(gate_up, 160, 64, f);
      ASSERT_TRUE(want_qkv && want_gate_up);
      const std::string what = std::string(WeightFormatName(f)) + (p ? " pool" : " serial");
      ExpectSamePacking(layer->qkv, *want_qkv, "qkv " + what);
      ExpectSamePacking(layer->gate_up, *want_gate_up, "gate_up " + what);
    }
  }
}

// Reading one row back (token embeddings from a tied LM head): the strided fast path equals
// DequantizedValue element by element, bit for bit, in every format and at odd shapes (partial
// panels, partial INT4 blocks), and stands for the packed weights within the format's step.
TEST(DequantizeRow, MatchesTheReferenceBitForBitAndTheWeightsWithinTheirStep) {
  ForEachMatrix([&](const std::vector<float>& w, Shape s, WeightFormat f, const std::string& what) {
    auto m = PackMatrix(w, s.rows, s.cols, f);
    ASSERT_TRUE(m) << what;
    std::vector<float> fast(static_cast<size_t>(s.cols)), ref(fast.size());
    for (int64_t r = 0; r < s.rows; ++r) {
      std::fill(fast.begin(), fast.end(), -1.0f);
      ASSERT_TRUE(DequantizeRow(*m, r, fast).ok()) << what;
      ASSERT_TRUE(DequantizeRowReference(*m, r, ref).ok()) << what;
      ASSERT_EQ(std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(float)), 0)
          << what << " row " << r;
      // The step of the format around each weight: exact for F32; half a unit in the last
      // place for BF16; half the row scale for INT8; for INT4 one block scale (the largest
      // value of the sign opposite the block's extreme clamps at 7 instead of 8), taken
      // loosely from the row's largest magnitude, plus the bf16 rounding of the scale.
      float row_max = 0.0f;
      for (int64_t c = 0; c < s.cols; ++c)
        row_max = std::max(row_max, std::fabs(w[r * s.cols + c]));
      for (int64_t c = 0; c < s.cols; ++c) {
        const float want = w[static_cast<size_t>(r * s.cols + c)];
        const float got = fast[static_cast<size_t>(c)];
        float tolerance = 0.0f;
        if (f == WeightFormat::kBF16) tolerance = std::fabs(want) / 256.0f;
        if (f == WeightFormat::kInt8) tolerance = row_max / 127.0f * 0.5f + row_max * 1e-6f;
        if (f == WeightFormat::kInt4) tolerance = row_max / 8.0f * 1.01f;
        ASSERT_LE(std::fabs(got - want), tolerance) << what << " row " << r << " col " << c;
      }
    }
  });
}

TEST(DequantizeRow, ABadRowOrOutputSizeIsAnErrorNotARead) {
  const std::vector<float> w = TestMatrix(20, 40, 3);
  auto m = PackMatrix(w, 20, 40, WeightFormat::kInt4);
  ASSERT_TRUE(m);
  std::vector<float> out(40);
  for (int64_t row : {int64_t{-1}, int64_t{20}, int64_t{1} << 40}) {
    Status st = DequantizeRow(*m, row, out);
    EXPECT_EQ(st.code(), ErrorCode::kOutOfRange) << row;
    EXPECT_NE(st.message().find("outside the matrix's 20 rows"), std::string::npos) << st.message();
  }
  std::vector<float> short_out(39);
  EXPECT_FALSE(DequantizeRow(*m, 0, short_out).ok());
  EXPECT_FALSE(DequantizeRowReference(*m, 0, short_out).ok());
  EXPECT_FALSE(DequantizeRow(PackedMatrix{}, 0, out).ok());  // nothing packed
}

}  // namespace
}  // namespace tessera
