#include "backend/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

const KernelTable* KernelsFor(CpuIsa isa) {
  if (!CpuSupports(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar:
      return &ScalarKernels();
    case CpuIsa::kAvx2:
      return &Avx2Kernels();
    case CpuIsa::kAvx2Vnni:
      return &Avx2VnniKernels();
    case CpuIsa::kAvx512:
      return &Avx512Kernels();
    case CpuIsa::kAvx512Amx:
      return &Avx512AmxKernels();
  }
  return nullptr;
}

namespace {

// u[i] = q[i] + 128 (the sign bit flipped), eight bytes per word: a byte loop between two
// pointers that may alias (int8_t / uint8_t) stays a byte loop, measured at about 3 % of a
// batched decode step.
void ToUnsignedBytes(const int8_t* q, int64_t n, uint8_t* u) {
  constexpr uint64_t kSignBits = 0x8080808080808080ull;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, q + i, sizeof(word));
    word ^= kSignBits;
    std::memcpy(u + i, &word, sizeof(word));
  }
  for (; i < n; ++i) u[i] = static_cast<uint8_t>(q[i]) ^ 0x80u;
}

// u[i] = |q[i]| (at most 127, as q is never -128). The arrays never overlap (restrict), so the
// loop vectorizes.
void ToAbsoluteBytes(const int8_t* __restrict q, int64_t n, uint8_t* __restrict u) {
  for (int64_t i = 0; i < n; ++i) u[i] = static_cast<uint8_t>(q[i] < 0 ? -q[i] : q[i]);
}

}  // namespace

void PrepareActivations(const KernelTable& k, const float* x, int64_t rows, int64_t stride,
                        WeightFormat format, ActivationBlock* acts, ThreadPool* pool,
                        RowPrologue prologue) {
  acts->rows = rows;
  acts->stride = stride;
  acts->f32 = x;
  const bool quantized = format == WeightFormat::kInt8 || format == WeightFormat::kInt4;
  if (!quantized && prologue.fn == nullptr) return;
  const int64_t blocks = stride / kInt4Block;
  auto prepare = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      if (prologue.fn != nullptr) prologue.fn(prologue.ctx, r);
      if (!quantized) continue;
      int8_t* q = acts->q8.data() + r * stride;
      k.quantize_row(x + r * stride, stride, q, acts->q_scale.data() + r,
                     acts->q_block_sum.data() + r * blocks);
      if (format != WeightFormat::kInt8) continue;
      if (k.int8_unsigned == Int8UnsignedActivations::kAbsolute) {
        ToAbsoluteBytes(q, stride, acts->q8u.data() + r * stride);
      } else {
        ToUnsignedBytes(q, stride, acts->q8u.data() + r * stride);
      }
    }
  };
  // A prompt block's rows (128 x up to 4864 values) are worth spreading; ParallelFor runs a
  // single decode row inline.
  if (pool != nullptr) {
    pool->ParallelFor(rows, prepare);
  } else {
    prepare(0, rows, 0);
  }
}

void MergeDecodeSplits(const AttentionArgs& a, int64_t splits, const float* partials) {
  const int64_t size = DecodeSplitPartialSize(a.head_dim);
  for (int64_t h = 0; h < a.heads; ++h) {
    const float* part = partials + h * splits * size;
    float most = -INFINITY;
    for (int64_t s = 0; s < splits; ++s) most = std::max(most, part[s * size]);
    float* out = a.out + h * a.head_dim;
    std::fill(out, out + a.head_dim, 0.0f);
    float sum = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      const float* p = part + s * size;
      if (p[0] == -INFINITY) continue;  // an empty split
      const float w = std::exp(p[0] - most);
      sum += w * p[1];
      for (int64_t i = 0; i < a.head_dim; ++i) out[i] += w * p[2 + i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < a.head_dim; ++i) out[i] *= inv;
  }
}

}  // namespace tessera
