// Pieces shared by the 256-bit kernel files (kernels_avx2.cc, kernels_avx2vnni.cc,
// kernels_avx2_attention.cc): Exp, activation-group loads, the panel store, the tile driver and
// the INT4 tile (whose inner dot product each family supplies). Included only by files built with
// AVX2 enabled. Everything here has internal linkage (an unnamed namespace), so each file keeps its
// own copy compiled with its own flags: with external inline definitions the linker could keep the
// AVX-VNNI file's copy and run it on a CPU without AVX-VNNI.
//
//   struct MyKernel { static constexpr int kMR = 4;
//                     template <int MR, bool kDecode> static void Tile(const MatmulArgs&,
//                                                                     int64_t p, int64_t m0); };
//   void MatmulMine(const MatmulArgs& a, int64_t pb, int64_t pe) {
//     avx2::MatmulDriver<MyKernel>(a, pb, pe);
//   }
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels.h"

namespace tessera::avx2 {
namespace {

// exp(x): 2^n * p(r) with a degree-6 polynomial, 2^n built in the exponent bits.
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Writes one panel (two halves of 8) for row m with bias / accumulation; rows past the
// matrix's end are dropped.
inline void StorePanel(const MatmulArgs& a, int64_t m, int64_t panel, __m256 lo, __m256 hi) {
  alignas(32) float v[16];
  _mm256_store_ps(v, lo);
  _mm256_store_ps(v + 8, hi);
  const int64_t n0 = panel * kPanelRows;
  const int64_t valid = std::min<int64_t>(16, a.w->rows - n0);
  float* y = a.y + m * a.ldy + n0;
  for (int64_t r = 0; r < valid; ++r) {
    float out = v[r];
    if (a.bias) out += a.bias[n0 + r];
    y[r] = a.accumulate ? y[r] + out : out;
  }
}

template <class K, int MR>
void TileRemainder(const MatmulArgs& a, int64_t p, int64_t m0, int64_t left) {
  if constexpr (MR > 0) {
    if (left == MR) {
      K::template Tile<MR, false>(a, p, m0);
    } else {
      TileRemainder<K, MR - 1>(a, p, m0, left);
    }
  }
}

// Decode rows of a step, from m0 on: tiles of MR rows, then one of the rows left. Every tile
// streams the panel once for all its rows; the arithmetic per (panel, row) is the same in every
// tile size, so a sequence decodes to the same bits whatever else is in its batch.
template <class K, int MR>
void DecodeRowTiles(const MatmulArgs& a, int64_t p, int64_t m0, int64_t left) {
  if constexpr (MR > 0) {
    for (; left >= MR; left -= MR, m0 += MR) K::template Tile<MR, true>(a, p, m0);
    if (left > 0) DecodeRowTiles<K, MR - 1>(a, p, m0, left);
  }
}

// Decode rows take the kDecode tiles; prompt rows never do, whatever their tile size,
// so a prompt row's arithmetic does not depend on how the rows were tiled or chunked.
template <class K>
void MatmulDriver(const MatmulArgs& a, int64_t pb, int64_t pe) {
  const int64_t rows = a.x->rows;
  if (a.decode()) {
    for (int64_t p = pb; p < pe; ++p) DecodeRowTiles<K, K::kDecodeMR>(a, p, 0, rows);
    return;
  }
  for (int64_t p = pb; p < pe; ++p) {
    int64_t m = 0;
    for (; m + K::kMR <= rows; m += K::kMR) K::template Tile<K::kMR, false>(a, p, m);
    if (m < rows) TileRemainder<K, K::kMR - 1>(a, p, m, rows - m);
  }
}

// INT4 tiles for both 256-bit families. Dot sums one 32-input block for one row: acc =
// Dot::Begin(start) with start = -8 * (sum of the block's activations) in every lane, then per
// 8-input group Dot::Accumulate(acc, lo, hi, x_lo, x_hi) adds, per 32-bit lane (one weight
// row), the 4-input dot products of the low nibbles (inputs 8j + e) with x_lo and of the high
// nibbles (8j + 4 + e) with x_hi, and Dot::Finish(acc, start) gives the block's int32 sums,
// which then take the block's bf16 scale. kDecodeRows: rows per tile of a decode step.
template <class Dot, int kRows, int kDecodeRows>
struct Int4Kernel {
  static constexpr int kMR = kRows;
  static constexpr int kDecodeMR = kDecodeRows;
  template <int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p, int64_t m0) {
    const int64_t blocks = a.w->padded_cols / kInt4Block;
    const uint8_t* w = a.w->data.data() + p * blocks * 256;
    const uint16_t* scales = a.w->block_scale.data() + p * blocks * 16;
    const int8_t* x[MR];
    const int32_t* xsum[MR];
    for (int j = 0; j < MR; ++j) {
      x[j] = a.x->q8.data() + (m0 + j) * a.x->stride;
      xsum[j] = a.x->q_block_sum.data() + (m0 + j) * blocks;
    }
    const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
    __m256 acc_lo[MR], acc_hi[MR];
    for (int j = 0; j < MR; ++j) acc_lo[j] = acc_hi[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      if constexpr (kDecode) {
        for (int c = 0; c < 4; ++c) PrefetchAhead(w, (b + 8) * 256 + 64 * c);
      }
      __m256i blo[MR], bhi[MR];
      for (int j = 0; j < MR; ++j) {
        blo[j] = Dot::Begin(_mm256_set1_epi32(-8 * xsum[j][b]));
        bhi[j] = blo[j];
      }
      for (int q = 0; q < 4; ++q) {
        const uint8_t* src = w + (b * 4 + q) * 64;
        __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
        __m256i n0 = _mm256_and_si256(v0, low_nibbles);
        __m256i n1 = _mm256_and_si256(v1, low_nibbles);
        __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low_nibbles);
        __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low_nibbles);
        for (int j = 0; j < MR; ++j) {
          const int8_t* xq = x[j] + b * kInt4Block + q * 8;
          __m256i xl = _mm256_set1_epi32(Load32(xq)), xh = _mm256_set1_epi32(Load32(xq + 4));
          blo[j] = Dot::Accumulate(blo[j], n0, h0, xl, xh);
          bhi[j] = Dot::Accumulate(bhi[j], n1, h1, xl, xh);
        }
      }
      __m256i bits =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + b * 16)));
      __m256i bits_hi = _mm256_cvtepu16_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + b * 16 + 8)));
      __m256 sc0 = _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
      __m256 sc1 = _mm256_castsi256_ps(_mm256_slli_epi32(bits_hi, 16));
      for (int j = 0; j < MR; ++j) {
        const __m256i start = _mm256_set1_epi32(-8 * xsum[j][b]);
        acc_lo[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot::Finish(blo[j], start)), sc0, acc_lo[j]);
        acc_hi[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot::Finish(bhi[j], start)), sc1, acc_hi[j]);
      }
    }
    for (int j = 0; j < MR; ++j) {
      __m256 sx = _mm256_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]);
      StorePanel(a, m0 + j, p, _mm256_mul_ps(acc_lo[j], sx), _mm256_mul_ps(acc_hi[j], sx));
    }
  }
};

}  // namespace
}  // namespace tessera::avx2
