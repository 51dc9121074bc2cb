// The vdpbf16ps matmul of the AVX-512 tables (KernelTable::matmul_bf16_dot): BF16 weights
// times prompt rows rounded to bf16 (BackendOptions::bf16_activations, --bf16-activations).
// The one unit built with -mavx512bf16 on top of the AVX-512 flags, so that kernels_avx512.cc
// and kernels_avx512_attention.cc run on AVX-512 CPUs without AVX512_BF16 (Intel Ice Lake,
// Tiger Lake, Rocket Lake, Cascade Lake); the tables hold it only where cpu_features.cc found
// AVX512_BF16 (CpuTraits::avx512_bf16).
//
//   if (ProbedCpuTraits().avx512_bf16) t.matmul_bf16_dot = Avx512Bf16DotMatmul();
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, as in kernels_avx512.cc
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_avx512_common.h"
#include "backend/cpu/kernels_avx512_matmul.h"

namespace tessera {
namespace {

using avx512::BroadcastGroup;
using avx512::MatmulDriver;
using avx512::NextPanels;
using avx512::StorePanel;

// BF16 x BF16 -> FP32 with vdpbf16ps; the caller rounded the activations into x->bf16.
struct Bf16DotKernel {
  static constexpr int kMR = 6;
  static constexpr int kDecodeMR = 6;        // rows per tile of a batched decode step
  static constexpr int kDecodeQuadRows = 0;  // (only INT8 has registers to spare)
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t kp = a.w->padded_cols;
    const auto* base = reinterpret_cast<const uint16_t*>(a.w->data.data());
    const uint16_t* w[NP];
    for (int i = 0; i < NP; ++i) w[i] = base + (p0 + i) * kp * 16;
    const uint16_t* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->bf16.data() + (m0 + j) * a.x->stride;
    __m512 acc[NP][MR];
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; k += 2) {
      if constexpr (!kDecode) next->Step();
      __m512bh wv[NP];
      for (int i = 0; i < NP; ++i) wv[i] = (__m512bh)_mm512_loadu_si512(w[i] + k * 16);
      for (int j = 0; j < MR; ++j) {
        __m512bh xb = (__m512bh)BroadcastGroup(x[j] + k);
        for (int i = 0; i < NP; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv[i], xb);
      }
    }
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) StorePanel(a, m0 + j, p0 + i, acc[i][j]);
  }
};

void MatmulBf16Dot(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Bf16DotKernel>(a, pb, pe);
}

}  // namespace

MatmulFn Avx512Bf16DotMatmul() {
  return MatmulBf16Dot;
}

}  // namespace tessera
