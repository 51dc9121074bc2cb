// AVX2 + AVX-VNNI kernels: the AVX2 family with INT8 / INT4 matmuls on the 256-bit vpdpbusd
// (one instruction per 4-input dot product per lane, where plain AVX2 needs vpmaddubsw,
// vpmaddwd and an add). For Intel client CPUs from Alder Lake on, which have AVX-VNNI but no
// AVX-512. This file alone is compiled with -mavxvnni and only reached when cpu_features.cc
// found it. Everything else in the table is the AVX2 family's.
//   INT8  as the AVX-512 kernel: activations fed unsigned (q + 128, by xor 0x80) against the
//         signed weights; the accumulator starts at -128 * row sum, which cancels the offset.
//   INT4  nibbles (unsigned q + 8) against signed activations; each block's accumulator
//         starts at -8 * (sum of the block's activations), then takes the bf16 block scale.
// Decode tiles prefetch 2 KiB ahead in each panel, as in the AVX2 file.
#include <immintrin.h>

#include "backend/cpu/kernels_avx2_common.h"

namespace tessera {
namespace {

using avx2::Load32;
using avx2::MatmulDriver;
using avx2::StorePanel;

struct Int8VnniKernel {
  static constexpr int kMR = 6;  // 12 accumulators, 2 weight halves, 1 broadcast
  static constexpr int kDecodeMR = 6;
  template <int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p, int64_t m0) {
    const int64_t kp = a.w->padded_cols;
    const int8_t* w = reinterpret_cast<const int8_t*>(a.w->data.data()) + p * kp * 16;
    const int8_t* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->q8.data() + (m0 + j) * a.x->stride;
    const __m256i to_unsigned = _mm256_set1_epi32(static_cast<int32_t>(0x80808080u));
    const int32_t* offset = a.w->row_offset.data() + p * 16;
    const __m256i off_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset));
    const __m256i off_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset + 8));
    __m256i lo[MR], hi[MR];
    for (int j = 0; j < MR; ++j) {
      lo[j] = off_lo;
      hi[j] = off_hi;
    }
    for (int64_t k = 0; k < kp; k += 4) {
      if constexpr (kDecode) PrefetchAhead(w, (k + 128) * 16 * int64_t{sizeof(*w)});
      // [k/4][16 rows][4]: rows 0-7 in the first 32 bytes, rows 8-15 in the next.
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16 + 32));
      for (int j = 0; j < MR; ++j) {
        const __m256i xb = _mm256_xor_si256(_mm256_set1_epi32(Load32(x[j] + k)), to_unsigned);
        lo[j] = _mm256_dpbusd_avx_epi32(lo[j], xb, w0);
        hi[j] = _mm256_dpbusd_avx_epi32(hi[j], xb, w1);
      }
    }
    const float* rs = a.w->row_scale.data() + p * 16;
    const __m256 s0 = _mm256_loadu_ps(rs), s1 = _mm256_loadu_ps(rs + 8);
    for (int j = 0; j < MR; ++j) {
      const __m256 sx = _mm256_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]);
      StorePanel(a, m0 + j, p, _mm256_mul_ps(_mm256_cvtepi32_ps(lo[j]), _mm256_mul_ps(sx, s0)),
                 _mm256_mul_ps(_mm256_cvtepi32_ps(hi[j]), _mm256_mul_ps(sx, s1)));
    }
  }
};

// Both nibble halves on vpdpbusd: unsigned q + 8 against the signed activations, summed in
// int32 from the block's start on.
struct VnniInt4Dot {
  static __m256i Begin(__m256i start) { return start; }
  static __m256i Accumulate(__m256i acc, __m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, lo, x_lo), hi, x_hi);
  }
  static __m256i Finish(__m256i acc, __m256i /*start*/) { return acc; }
};
// 8 block accumulators, 4 unpacked nibble vectors and 2 broadcasts stay in registers; the
// float accumulators are touched once per 32-input block.
using Int4VnniKernel = avx2::Int4Kernel<VnniInt4Dot, 4, 4>;

void MatmulInt8Vnni(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int8VnniKernel>(a, pb, pe);
}
void MatmulInt4Vnni(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int4VnniKernel>(a, pb, pe);
}

}  // namespace

const KernelTable& Avx2VnniKernels() {
  static const KernelTable table = [] {
    KernelTable t = Avx2Kernels();
    t.isa = CpuIsa::kAvx2Vnni;
    t.int8_unsigned = Int8UnsignedActivations::kPlus128;  // vpdpbusd's operand
    t.matmul_int8 = MatmulInt8Vnni;
    t.matmul_int4 = MatmulInt4Vnni;
    return t;
  }();
  return table;
}

}  // namespace tessera
