// Pieces shared by the AVX-512 kernel files (kernels_avx512.cc: matmuls, activations,
// elementwise; kernels_avx512_attention.cc: attention; kernels_amx.cc: the AMX INT8 matmul).
// Included only by files built with the AVX-512 flags (see src/backend/CMakeLists.txt). The
// helpers have internal linkage (an unnamed namespace), so no other file can end up calling a
// copy compiled with these flags.
//
//   __mmask16 m = avx512::TailMask(n - i);              // lanes still inside [0, n)
//   __m512 e = avx512::Exp(_mm512_loadu_ps(scores + t));
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/kernels.h"

namespace tessera::avx512 {
namespace {

inline __mmask16 TailMask(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// Broadcasts the 32-bit group at p (a bf16 pair or an int8 quad) to every lane through the
// load port (vbroadcastss from memory) rather than a general register and port 5, which
// would otherwise limit the GEMM tiles.
inline __m512i BroadcastGroup(const void* p) {
  return _mm512_castps_si512(_mm512_broadcastss_ps(_mm_load_ss(static_cast<const float*>(p))));
}

// Writes one panel's 16 outputs for row m, with bias / residual accumulation and a tail mask.
inline void StorePanel(const MatmulArgs& a, int64_t m, int64_t panel, __m512 v) {
  const int64_t n0 = panel * kPanelRows;
  const __mmask16 mask = TailMask(a.w->rows - n0);
  float* y = a.y + m * a.ldy + n0;
  if (a.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, a.bias + n0));
  if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y));
  _mm512_mask_storeu_ps(y, mask, v);
}

// exp(x) for fp32 lanes: 2^n * p(r), r = x - n ln2 in [-ln2/2, ln2/2], degree-6 Taylor
// polynomial (relative error below 2e-7). Inputs are clamped to the finite range.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace

// Attention kernels of the AVX-512 table (kernels_avx512_attention.cc); see kernels.h for
// their contracts.
void Attention(const AttentionArgs& a, int64_t tb, int64_t te, float* scores);
void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores);
void AttentionDecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te,
                          float* scores, float* partials);

}  // namespace tessera::avx512
