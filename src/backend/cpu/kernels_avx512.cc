// AVX-512 kernels (F, BW, VL, DQ, BF16, VNNI + FMA; this file alone is compiled with those
// flags and only reached when cpu_features.cc found them all).
//
// Matmuls keep 16 outputs per register (one panel) and broadcast activation groups, so no
// horizontal sums are needed. Tiles are NP panels x MR rows: decode (one row) uses several
// panels to overlap independent accumulation chains; prefill uses 2 panels x 4-12 rows, so
// each weight load feeds 4-12 rows. Per format:
//   F32   fp32 FMA.
//   BF16  weights widened to fp32 (shift / mask) and fp32 FMA, exact products. The
//         vdpbf16ps variant (bf16-rounded activations) exists for comparison only: it
//         measured slower here (see kernels.h).
//   INT8  vpdpbusd with activations as unsigned (q + 128, by xor 0x80) against signed
//         weights; the accumulator starts at -128 * row sum, which cancels the offset.
//   INT4  nibbles unpacked to unsigned q + 8 with and/shift; vpdpbusd against signed
//         activations; the accumulator of each 32-input block starts at -8 * (sum of the
//         block's activations), then the block's int result is scaled by its bf16 scale.
// Decode tiles (one row) prefetch each panel 2 KiB ahead of its loads: with only the hardware
// prefetchers one core sustained less DRAM bandwidth; measured here, qwen2.5-0.5b decode went
// from 23.5 to 28 tok/s in BF16 and 75 to 81 in INT4 (2 threads, tessera bench, interleaved).
// A prefetch past the end of the array is harmless (a hint, never a fault).
// GCC 12's AVX-512 headers build "undefined" vectors by self-initialisation, which trips
// -Wuninitialized inside the intrinsics themselves (GCC bug 105593); silenced for this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"

namespace tessera {
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

// Prompt tiles pull the next panel group toward L2 while they compute on the current one, a
// line per weight-load step, so that the group's first row tile does not wait on DRAM: by the
// time the current group's NP-th row tile ends, the next group has been requested. Measured
// on one thread, 128 rows through BF16 576x1536 and 576x3072 matrices streaming from memory:
// 126-133 -> 140-143 GFLOP/s, the rate of a cache-resident matrix; in the model (prompt layers
// at 512 tokens, 2 threads, alternating layer by layer) 1.02x / 1.03x BF16, 1.02x / 1.05x INT8,
// 1.01x / 1.03x INT4 faster on smollm2-135m / qwen2.5-0.5b.
struct NextPanels {
  const char* next = nullptr;
  const char* end = nullptr;
  void Step() {
    if (next < end) {
      _mm_prefetch(next, _MM_HINT_T1);
      next += 64;
    }
  }
};

// ---- tile kernels: Tile<NP, MR, kDecode>(args, first panel, first row, next panels) ----
// Prompt tiles are kPromptPanels panels x K::kMR rows.
constexpr int kPromptPanels = 2;
// kDecode marks the one-row GEMV of a decode step (x->rows == 1), which streams each panel
// once; prompt rows never take it, whatever their tile size, so a prompt row's arithmetic does
// not depend on how the rows were tiled or chunked.

struct F32Kernel {
  static constexpr int kMR = 6;
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t kp = a.w->padded_cols;
    const float* w[NP];
    for (int i = 0; i < NP; ++i)
      w[i] = reinterpret_cast<const float*>(a.w->data.data()) + (p0 + i) * kp * 16;
    const float* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->f32 + (m0 + j) * a.x->stride;
    __m512 acc[NP][MR];
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; ++k) {
      if constexpr (!kDecode) next->Step();
      __m512 wv[NP];
      for (int i = 0; i < NP; ++i) wv[i] = _mm512_loadu_ps(w[i] + k * 16);
      for (int j = 0; j < MR; ++j) {
        __m512 xb = _mm512_set1_ps(x[j][k]);
        for (int i = 0; i < NP; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xb, acc[i][j]);
      }
    }
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) StorePanel(a, m0 + j, p0 + i, acc[i][j]);
  }
};

// BF16 weights widened to fp32: each 32-bit lane holds (w[k], w[k+1]) of one row.
struct Bf16WidenedKernel {
  // One accumulator per (panel, row) takes both halves of each bf16 pair, which frees
  // registers for 12 rows per tile: 2 panels x 12 rows, 24 accumulators, each widened weight
  // vector feeds 12 FMAs (4 widening ops per 48 FMAs; 3 panels x 8 rows needs 6). Measured
  // against 3 x 8 with the next-panel prefetch, alternating layer by layer in the model
  // (2 threads, 512 prompt tokens): 1.004-1.015x. Before that prefetch it measured 1-2.5 %
  // slower, hence 3 x 8 until then.
  static constexpr int kMR = 12;
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t kp = a.w->padded_cols;
    const auto* base = reinterpret_cast<const uint16_t*>(a.w->data.data());
    const uint16_t* w[NP];
    for (int i = 0; i < NP; ++i) w[i] = base + (p0 + i) * kp * 16;
    const float* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->f32 + (m0 + j) * a.x->stride;
    const __m512i high_mask = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
    // Decode: separate even/odd accumulators keep enough independent FMA chains.
    constexpr int kSets = kDecode ? 2 : 1;
    __m512 acc[kSets][NP][MR];
    for (int s = 0; s < kSets; ++s)
      for (int i = 0; i < NP; ++i)
        for (int j = 0; j < MR; ++j) acc[s][i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; k += 2) {
      if constexpr (!kDecode) next->Step();
      __m512 even[NP], odd[NP];
      for (int i = 0; i < NP; ++i) {
        // Decode streams each panel once: ask for the line 2 KiB ahead.
        if constexpr (kDecode)
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (k + 64) * 16), _MM_HINT_T0);
        __m512i v = _mm512_loadu_si512(w[i] + k * 16);
        even[i] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        odd[i] = _mm512_castsi512_ps(_mm512_and_si512(v, high_mask));
      }
      for (int j = 0; j < MR; ++j) {
        __m512 x0 = _mm512_set1_ps(x[j][k]), x1 = _mm512_set1_ps(x[j][k + 1]);
        for (int i = 0; i < NP; ++i) {
          acc[0][i][j] = _mm512_fmadd_ps(even[i], x0, acc[0][i][j]);
          acc[kSets - 1][i][j] = _mm512_fmadd_ps(odd[i], x1, acc[kSets - 1][i][j]);
        }
      }
    }
    for (int i = 0; i < NP; ++i) {
      for (int j = 0; j < MR; ++j) {
        __m512 sum = acc[0][i][j];
        if constexpr (kSets == 2) sum = _mm512_add_ps(sum, acc[1][i][j]);
        StorePanel(a, m0 + j, p0 + i, sum);
      }
    }
  }
};

// BF16 x BF16 -> FP32 with vdpbf16ps; the caller rounded the activations into x->bf16.
struct Bf16DotKernel {
  static constexpr int kMR = 6;
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

struct Int8Kernel {
  static constexpr int kMR = 6;
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t kp = a.w->padded_cols;
    const auto* base = reinterpret_cast<const int8_t*>(a.w->data.data());
    const int8_t* w[NP];
    for (int i = 0; i < NP; ++i) w[i] = base + (p0 + i) * kp * 16;
    const int8_t* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->q8.data() + (m0 + j) * a.x->stride;
    const __m512i to_unsigned = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
    __m512i acc[NP][MR];
    for (int i = 0; i < NP; ++i) {
      __m512i offset = _mm512_loadu_si512(a.w->row_offset.data() + (p0 + i) * 16);
      for (int j = 0; j < MR; ++j) acc[i][j] = offset;
    }
    for (int64_t k = 0; k < kp; k += 4) {
      if constexpr (!kDecode) next->Step();
      __m512i wv[NP];
      for (int i = 0; i < NP; ++i) {
        if constexpr (kDecode)
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (k + 128) * 16), _MM_HINT_T0);
        wv[i] = _mm512_loadu_si512(w[i] + k * 16);
      }
      for (int j = 0; j < MR; ++j) {
        __m512i xb = _mm512_xor_si512(BroadcastGroup(x[j] + k), to_unsigned);
        for (int i = 0; i < NP; ++i) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], xb, wv[i]);
      }
    }
    for (int i = 0; i < NP; ++i) {
      __m512 row_scale = _mm512_loadu_ps(a.w->row_scale.data() + (p0 + i) * 16);
      for (int j = 0; j < MR; ++j) {
        __m512 scale =
            _mm512_mul_ps(_mm512_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]), row_scale);
        StorePanel(a, m0 + j, p0 + i, _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][j]), scale));
      }
    }
  }
};

struct Int4Kernel {
  static constexpr int kMR = 4;
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t blocks = a.w->padded_cols / kInt4Block;
    const uint8_t* w[NP];
    const uint16_t* scales[NP];
    for (int i = 0; i < NP; ++i) {
      w[i] = a.w->data.data() + (p0 + i) * blocks * 256;
      scales[i] = a.w->block_scale.data() + (p0 + i) * blocks * 16;
    }
    const int8_t* x[MR];
    const int32_t* xsum[MR];
    for (int j = 0; j < MR; ++j) {
      x[j] = a.x->q8.data() + (m0 + j) * a.x->stride;
      xsum[j] = a.x->q_block_sum.data() + (m0 + j) * blocks;
    }
    const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
    __m512 acc[NP][MR];
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      if constexpr (kDecode) {
        // Decode streams each panel once: ask for the bytes 8 blocks (2 KiB) ahead, and for the
        // panel's scales (a line holds two blocks' worth) 16 blocks ahead. The scale prefetch
        // measured 1.02-1.03x per decode layer and LM head on qwen2.5-0.5b (0.98-0.99x on
        // smollm2-135m, whose INT4 weights mostly stay in L3), alternating in one process.
        for (int i = 0; i < NP; ++i) {
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (b + 8) * 256), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (b + 8) * 256 + 64), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (b + 8) * 256 + 128), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(w[i] + (b + 8) * 256 + 192), _MM_HINT_T0);
          if (b % 2 == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(scales[i] + (b + 16) * 16), _MM_HINT_T0);
          }
        }
      }
      __m512i block_acc[NP][MR];
      for (int j = 0; j < MR; ++j) {
        __m512i start = _mm512_set1_epi32(-8 * xsum[j][b]);
        for (int i = 0; i < NP; ++i) block_acc[i][j] = start;
      }
      // Decode keeps each high nibble in place (16 x its value) in an accumulator of its own,
      // shifted down once per block: one op per 64 bytes fewer than shift-and-mask, and the
      // same integers. Measured 1.00-1.035x per decode layer and LM head (alternating in one
      // process); prompt tiles have no registers to spare for the second set.
      __m512i hi_acc[NP][MR];
      if constexpr (kDecode) {
        for (int i = 0; i < NP; ++i)
          for (int j = 0; j < MR; ++j) hi_acc[i][j] = _mm512_setzero_si512();
      }
      for (int q = 0; q < 4; ++q) {
        if constexpr (!kDecode) next->Step();
        __m512i lo[NP], hi[NP];
        for (int i = 0; i < NP; ++i) {
          __m512i v = _mm512_loadu_si512(w[i] + (b * 4 + q) * 64);
          lo[i] = _mm512_and_si512(v, low_nibbles);
          hi[i] = kDecode ? _mm512_andnot_si512(low_nibbles, v)
                          : _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibbles);
        }
        for (int j = 0; j < MR; ++j) {
          const int8_t* xq = x[j] + b * kInt4Block + q * 8;
          __m512i x_lo = BroadcastGroup(xq);
          __m512i x_hi = BroadcastGroup(xq + 4);
          for (int i = 0; i < NP; ++i) {
            block_acc[i][j] = _mm512_dpbusd_epi32(block_acc[i][j], lo[i], x_lo);
            if constexpr (kDecode) {
              hi_acc[i][j] = _mm512_dpbusd_epi32(hi_acc[i][j], hi[i], x_hi);
            } else {
              block_acc[i][j] = _mm512_dpbusd_epi32(block_acc[i][j], hi[i], x_hi);
            }
          }
        }
      }
      if constexpr (kDecode) {
        // hi_acc is exactly 16 x the high nibbles' sum (at most 16 x 15 x 127 x 16 per lane).
        for (int i = 0; i < NP; ++i)
          for (int j = 0; j < MR; ++j)
            block_acc[i][j] = _mm512_add_epi32(block_acc[i][j], _mm512_srai_epi32(hi_acc[i][j], 4));
      }
      for (int i = 0; i < NP; ++i) {
        __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales[i] + b * 16));
        __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
        for (int j = 0; j < MR; ++j) {
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_acc[i][j]), scale, acc[i][j]);
        }
      }
    }
    for (int i = 0; i < NP; ++i)
      for (int j = 0; j < MR; ++j) {
        __m512 sx = _mm512_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]);
        StorePanel(a, m0 + j, p0 + i, _mm512_mul_ps(acc[i][j], sx));
      }
  }
};

// Rows m0.. of panels [p0, p0 + NP): full MR tiles, then one tile of the remaining rows.
template <class K, int NP, int MR>
void TileRemainder(const MatmulArgs& a, int64_t p0, int64_t m0, int64_t left, NextPanels* next) {
  if constexpr (MR > 0) {
    if (left == MR) {
      K::template Tile<NP, MR, false>(a, p0, m0, next);
    } else {
      TileRemainder<K, NP, MR - 1>(a, p0, m0, left, next);
    }
  }
}

// Every row through panels [p0, p0 + NP), prefetching panels [p0 + NP, p0 + 2 NP) meanwhile.
template <class K, int NP>
void PanelGroupAllRows(const MatmulArgs& a, int64_t p0) {
  const int64_t rows = a.x->rows;
  const int64_t panels = a.w->panels();
  const size_t panel_bytes = a.w->data.size() / static_cast<size_t>(panels);
  const char* data = reinterpret_cast<const char*>(a.w->data.data());
  NextPanels next{data + static_cast<size_t>(std::min(p0 + NP, panels)) * panel_bytes,
                  data + static_cast<size_t>(std::min(p0 + 2 * NP, panels)) * panel_bytes};
  int64_t m = 0;
  for (; m + K::kMR <= rows; m += K::kMR) K::template Tile<NP, K::kMR, false>(a, p0, m, &next);
  if (m < rows) TileRemainder<K, NP, K::kMR - 1>(a, p0, m, rows - m, &next);
}

// Decode uses 4 panels at a time (independent chains, shared broadcasts), then a pair; prefill
// kPromptPanels (the tile width every kernel's registers were sized for), then singles.
template <class K>
void MatmulDriver(const MatmulArgs& a, int64_t pb, int64_t pe) {
  int64_t p = pb;
  if (a.x->rows == 1) {
    for (; p + 4 <= pe; p += 4) K::template Tile<4, 1, true>(a, p, 0, nullptr);
    if (p + 2 <= pe) {
      K::template Tile<2, 1, true>(a, p, 0, nullptr);
      p += 2;
    }
    for (; p < pe; ++p) K::template Tile<1, 1, true>(a, p, 0, nullptr);
    return;
  }
  for (; p + kPromptPanels <= pe; p += kPromptPanels) PanelGroupAllRows<K, kPromptPanels>(a, p);
  for (; p < pe; ++p) PanelGroupAllRows<K, 1>(a, p);
}

void MatmulF32(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<F32Kernel>(a, pb, pe);
}
void MatmulBf16(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Bf16WidenedKernel>(a, pb, pe);
}
void MatmulBf16Dot(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Bf16DotKernel>(a, pb, pe);
}
void MatmulInt8(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int8Kernel>(a, pb, pe);
}
void MatmulInt4(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int4Kernel>(a, pb, pe);
}

// ---- activations ----

void ToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)v);
  }
  for (; i < n; ++i) {
    __m256bh v = _mm512_cvtneps_pbh(_mm512_set1_ps(x[i]));
    out[i] = static_cast<uint16_t>(_mm256_extract_epi16((__m256i)v, 0));
  }
}

float AbsMax(const float* x, int64_t n) {
  __m512 m = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  if (i < n) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(TailMask(n - i), x + i)));
  return _mm512_reduce_max_ps(m);
}

void QuantizeRow(const float* x, int64_t n, int8_t* q, float* scale, int32_t* block_sums) {
  const float absmax = AbsMax(x, n);
  const float inv = absmax > 0.0f ? 127.0f / absmax : 0.0f;
  *scale = absmax > 0.0f ? absmax / 127.0f : 1.0f;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < n / kInt4Block; ++b) {
    __m512i sum = _mm512_setzero_si512();
    for (int64_t h = 0; h < 2; ++h) {
      int64_t i = b * kInt4Block + h * 16;
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
      v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
      sum = _mm512_add_epi32(sum, v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(v));
    }
    block_sums[b] = _mm512_reduce_add_epi32(sum);
  }
}

// ---- elementwise ----

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

void RmsNorm(const float* x, const float* w, int64_t n, int64_t n_padded, float eps, float* y) {
  __m512 ss = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    ss = _mm512_fmadd_ps(v, v, ss);
  }
  if (i < n) {
    __m512 v = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    ss = _mm512_fmadd_ps(v, v, ss);
  }
  double mean = static_cast<double>(_mm512_reduce_add_ps(ss)) / static_cast<double>(n);
  __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(mean + eps)));
  for (i = 0; i < n; i += 16) {
    __mmask16 m = TailMask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
  }
  for (i = n; i < n_padded; ++i) y[i] = 0.0f;
}

void Rope(float* x, int64_t heads, int64_t head_dim, const float* cs, const float* sn) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; i += 16) {
      __mmask16 m = TailMask(half - i);
      __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + half + i);
      __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
      _mm512_mask_storeu_ps(v + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
      _mm512_mask_storeu_ps(v + half + i, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
    }
  }
}

void Swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = TailMask(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 silu = _mm512_div_ps(
        g, _mm512_add_ps(_mm512_set1_ps(1.0f), Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// Head vectors up to 256 values stay in registers across the positions.
constexpr int kMaxHeadChunks = 16;

// r[i] = sum of the 16 lanes of v[i], for 16 vectors at once.
inline __m512 SumEach16(const __m512* v) {
  __m512 u[4];
  for (int g = 0; g < 4; ++g) {
    const __m512* a = v + 4 * g;
    // Per 128-bit lane: pairwise sums of a0/a1 and a2/a3 interleaved ...
    __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
    __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
    // ... then each lane holds [a0, a1, a2, a3] summed over that lane.
    u[g] = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Add the four 128-bit lanes: lane k of the result gathers vectors 4k..4k+3.
  __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(3, 1, 3, 1)));
}

void Attention(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t chunks = (a.head_dim + 15) / 16;
  if (chunks > kMaxHeadChunks) return ScalarKernels().attention(a, tb, te, scores);
  for (int64_t task = tb; task < te; ++task) {
    int64_t m = 0, h = 0;
    AttentionTask(a, task, &m, &h);
    const float* q = a.q + m * a.q_stride + h * a.head_dim;
    const int64_t kv_off = (h / group) * a.head_dim;
    const int64_t count = a.start_pos + m + 1;
    __m512 qv[kMaxHeadChunks];
    for (int64_t c = 0; c < chunks; ++c)
      qv[c] = _mm512_maskz_loadu_ps(TailMask(a.head_dim - c * 16), q + c * 16);
    const __m512 scale = _mm512_set1_ps(a.scale);
    float max_score = -INFINITY;
    // Sixteen positions at a time: sixteen dot-product vectors reduced together by one
    // transpose-add tree, instead of a horizontal sum per position.
    int64_t t = 0;
    for (; t + 16 <= count; t += 16) {
      __m512 acc[16];
      for (int i = 0; i < 16; ++i) {
        const float* k = a.keys + (t + i) * a.kv_stride + kv_off;
        acc[i] = _mm512_setzero_ps();
        for (int64_t c = 0; c < chunks; ++c) {
          acc[i] = _mm512_fmadd_ps(
              qv[c], _mm512_maskz_loadu_ps(TailMask(a.head_dim - c * 16), k + c * 16), acc[i]);
        }
      }
      __m512 s16 = _mm512_mul_ps(SumEach16(acc), scale);
      _mm512_storeu_ps(scores + t, s16);
      max_score = std::max(max_score, _mm512_reduce_max_ps(s16));
    }
    for (; t < count; ++t) {
      const float* k = a.keys + t * a.kv_stride + kv_off;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t c = 0; c < chunks; ++c) {
        acc = _mm512_fmadd_ps(
            qv[c], _mm512_maskz_loadu_ps(TailMask(a.head_dim - c * 16), k + c * 16), acc);
      }
      float s = _mm512_reduce_add_ps(_mm512_mul_ps(acc, scale));
      scores[t] = s;
      max_score = std::max(max_score, s);
    }
    const __m512 vmax = _mm512_set1_ps(max_score);
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t t = 0; t < count; t += 16) {
      __mmask16 mk = TailMask(count - t);
      __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, scores + t), vmax));
      e = _mm512_maskz_mov_ps(mk, e);
      vsum = _mm512_add_ps(vsum, e);
      _mm512_mask_storeu_ps(scores + t, mk, e);
    }
    __m512 out[kMaxHeadChunks];
    for (int64_t c = 0; c < chunks; ++c) out[c] = _mm512_setzero_ps();
    for (int64_t t = 0; t < count; ++t) {
      const float* v = a.values + t * a.kv_stride + kv_off;
      __m512 p = _mm512_set1_ps(scores[t]);
      for (int64_t c = 0; c < chunks; ++c) {
        out[c] = _mm512_fmadd_ps(
            p, _mm512_maskz_loadu_ps(TailMask(a.head_dim - c * 16), v + c * 16), out[c]);
      }
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    float* o = a.out + m * a.out_stride + h * a.head_dim;
    for (int64_t c = 0; c < chunks; ++c) {
      _mm512_mask_storeu_ps(o + c * 16, TailMask(a.head_dim - c * 16), _mm512_mul_ps(out[c], inv));
    }
  }
}

// ---- blocked attention (prefill) ----
// A task takes one kv head and up to 16 query rows, i.e. rows x group queries, in tiles of 8
// queries (ordered by row, so a tile's last query sees the most keys):
//   scores: 2 transposed key blocks (32 positions) x NQ queries per step, each key vector
//           loaded once for NQ broadcast-FMAs, as in the matmul tiles;
//   softmax per query over its own causal range (later lanes masked to zero);
//   values: each value vector loaded once per sub-tile of NV queries.

// scores[j][t..t + 16 * NP) = scale * q_j . k_t for positions t.. (one or two key blocks).
template <int NP, int NQ>
void ScoreStep(const float* kt, int64_t head_dim, const float* const* q, float scale, float* scores,
               int64_t stride, int64_t t) {
  __m512 acc[NP][NQ];
  for (int i = 0; i < NP; ++i)
    for (int j = 0; j < NQ; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    __m512 kv[NP];
    for (int i = 0; i < NP; ++i) kv[i] = _mm512_loadu_ps(kt + (i * head_dim + d) * 16);
    for (int j = 0; j < NQ; ++j) {
      __m512 b = _mm512_set1_ps(q[j][d]);
      for (int i = 0; i < NP; ++i) acc[i][j] = _mm512_fmadd_ps(kv[i], b, acc[i][j]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int j = 0; j < NQ; ++j)
    for (int i = 0; i < NP; ++i)
      _mm512_storeu_ps(scores + j * stride + t + 16 * i, _mm512_mul_ps(acc[i][j], vs));
}

template <int NQ>
void ScoreQueries(const float* kt, int64_t head_dim, const float* const* q, float scale,
                  float* scores, int64_t stride, int64_t count) {
  int64_t t = 0;
  for (; t + 16 < count; t += 32) {
    ScoreStep<2, NQ>(kt + (t / 16) * head_dim * 16, head_dim, q, scale, scores, stride, t);
  }
  if (t < count)
    ScoreStep<1, NQ>(kt + (t / 16) * head_dim * 16, head_dim, q, scale, scores, stride, t);
}

// Softmax numerators of one query over [0, count), zero on [count, padded); returns the sum
// (and the max they are relative to, when asked).
float SoftmaxRow(float* s, int64_t count, int64_t padded, float* max_out = nullptr) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t t = 0; t < count; t += 16) {
    vmax = _mm512_max_ps(
        vmax, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), TailMask(count - t), s + t));
  }
  const float most = _mm512_reduce_max_ps(vmax);
  if (max_out != nullptr) *max_out = most;
  const __m512 m = _mm512_set1_ps(most);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t t = 0; t < padded; t += 16) {
    __mmask16 live = t < count ? TailMask(count - t) : static_cast<__mmask16>(0);
    __m512 e = _mm512_maskz_mov_ps(live, Exp(_mm512_sub_ps(_mm512_loadu_ps(s + t), m)));
    sum = _mm512_add_ps(sum, e);
    _mm512_storeu_ps(s + t, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// out_j = (sum_t p_j[t] v_t) / sums[j] for NV queries; CH chunks of 16 values per head.
// kMasked handles a head_dim that is not a multiple of 16. Unmasked is its own instantiation
// because with masked loads GCC 12 keeps every accumulator in memory too, one store per FMA,
// which made this loop 2.3x slower than the score loop of the same FLOPs.
template <int CH, int NV, bool kMasked>
void WeightValues(const float* values, int64_t kv_stride, int64_t head_dim, const float* p,
                  int64_t stride, int64_t count, const float* sums, float* const* out) {
  __m512 acc[NV][CH];
  for (int j = 0; j < NV; ++j)
    for (int c = 0; c < CH; ++c) acc[j][c] = _mm512_setzero_ps();
  for (int64_t t = 0; t < count; ++t) {
    const float* v = values + t * kv_stride;
    __m512 vc[CH];
    for (int c = 0; c < CH; ++c) {
      vc[c] = kMasked ? _mm512_maskz_loadu_ps(TailMask(head_dim - c * 16), v + c * 16)
                      : _mm512_loadu_ps(v + c * 16);
    }
    for (int j = 0; j < NV; ++j) {
      const __m512 w = _mm512_set1_ps(p[j * stride + t]);
      for (int c = 0; c < CH; ++c) acc[j][c] = _mm512_fmadd_ps(w, vc[c], acc[j][c]);
    }
  }
  for (int j = 0; j < NV; ++j) {
    const __m512 inv = _mm512_set1_ps(1.0f / sums[j]);
    for (int c = 0; c < CH; ++c) {
      _mm512_mask_storeu_ps(out[j] + c * 16, TailMask(head_dim - c * 16),
                            _mm512_mul_ps(acc[j][c], inv));
    }
  }
}

template <int CH, int NV>
void WeightValuesUpTo(int nv, const float* values, int64_t kv_stride, int64_t head_dim,
                      const float* p, int64_t stride, int64_t count, const float* sums,
                      float* const* out) {
  if constexpr (NV > 0) {
    if (nv == NV) {
      if (head_dim == CH * 16) {
        return WeightValues<CH, NV, false>(values, kv_stride, head_dim, p, stride, count, sums,
                                           out);
      }
      return WeightValues<CH, NV, true>(values, kv_stride, head_dim, p, stride, count, sums, out);
    }
    WeightValuesUpTo<CH, NV - 1>(nv, values, kv_stride, head_dim, p, stride, count, sums, out);
  }
}

// out_j for nq queries (scores of query j at p + j * stride), in sub-tiles whose
// accumulators stay in registers: 6 queries x 4 chunks (head_dim <= 64) or 3 x 8.
void WeightValuesTiled(int nq, const float* values, int64_t kv_stride, int64_t head_dim,
                       const float* p, int64_t stride, int64_t count, const float* sums,
                       float* const* out) {
  // Sub-tiles of equal size (8 queries: 4 + 4, not 6 + 2): measured 1.01x per prompt layer.
  const int nv_cap = head_dim <= 64 ? 6 : 3;
  const int parts = (nq + nv_cap - 1) / nv_cap;
  const int nv_max = (nq + parts - 1) / parts;
  for (int j0 = 0; j0 < nq; j0 += nv_max) {
    const int nv = std::min(nv_max, nq - j0);
    if (head_dim <= 64) {
      WeightValuesUpTo<4, 6>(nv, values, kv_stride, head_dim, p + j0 * stride, stride, count,
                             sums + j0, out + j0);
    } else {
      WeightValuesUpTo<8, 3>(nv, values, kv_stride, head_dim, p + j0 * stride, stride, count,
                             sums + j0, out + j0);
    }
  }
}

template <int NQ>
void ScoreQueriesUpTo(int nq, const float* kt, int64_t head_dim, const float* const* q, float scale,
                      float* scores, int64_t stride, int64_t count) {
  if constexpr (NQ > 0) {
    if (nq == NQ) return ScoreQueries<NQ>(kt, head_dim, q, scale, scores, stride, count);
    ScoreQueriesUpTo<NQ - 1>(nq, kt, head_dim, q, scale, scores, stride, count);
  }
}

void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t blocks = (a.rows + kAttentionBlockRows - 1) / kAttentionBlockRows;
  const int64_t stride = BlockedAttentionScoreStride(a.start_pos + a.rows);
  constexpr int kTile = static_cast<int>(kBlockedAttentionQueries);
  for (int64_t task = tb; task < te; ++task) {
    const int64_t g = task % a.kv_heads, pair = task / a.kv_heads;
    const int64_t block = pair % 2 == 0 ? pair / 2 : blocks - 1 - pair / 2;
    const int64_t r0 = block * kAttentionBlockRows;
    const int64_t queries = std::min(kAttentionBlockRows, a.rows - r0) * group;
    const float* kt = a.keys_t + g * a.keys_t_head_stride;
    const float* values = a.values + g * a.head_dim;
    for (int64_t q0 = 0; q0 < queries; q0 += kTile) {
      const int nq = static_cast<int>(std::min<int64_t>(kTile, queries - q0));
      const float* q[kTile];
      float* out[kTile];
      int64_t count[kTile];
      for (int j = 0; j < nq; ++j) {
        const int64_t row = r0 + (q0 + j) / group, head = g * group + (q0 + j) % group;
        q[j] = a.q + row * a.q_stride + head * a.head_dim;
        out[j] = a.out + row * a.out_stride + head * a.head_dim;
        count[j] = a.start_pos + row + 1;
      }
      const int64_t most = count[nq - 1];
      ScoreQueriesUpTo<kTile>(nq, kt, a.head_dim, q, a.scale, scores, stride, most);
      float sums[kTile];
      const int64_t padded = (most + 15) / 16 * 16;
      for (int j = 0; j < nq; ++j) sums[j] = SoftmaxRow(scores + j * stride, count[j], padded);
      WeightValuesTiled(nq, values, a.kv_stride, a.head_dim, scores, stride, most, sums, out);
    }
  }
}

// One query row, positions split (see AttentionSplitFn). Same steps as AttentionBlocked on
// the split's positions, with the values left unnormalized (sums of 1) for the merge.
void AttentionDecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te,
                          float* scores, float* partials) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t count = a.start_pos + 1;
  const int64_t span = DecodeSplitSpan(count, splits);
  const int64_t stride = BlockedAttentionScoreStride(span);
  const int64_t size = DecodeSplitPartialSize(a.head_dim);
  constexpr int kTile = static_cast<int>(kBlockedAttentionQueries);
  const float ones[kTile] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (int64_t task = tb; task < te; ++task) {
    const int64_t g = task % a.kv_heads, split = task / a.kv_heads;
    const int64_t t0 = split * span, n = std::min(count, t0 + span) - t0;
    for (int64_t q0 = 0; q0 < group; q0 += kTile) {
      const int nq = static_cast<int>(std::min<int64_t>(kTile, group - q0));
      const float* q[kTile];
      float* out[kTile];
      for (int j = 0; j < nq; ++j) {
        const int64_t head = g * group + q0 + j;
        q[j] = a.q + head * a.head_dim;
        out[j] = partials + (head * splits + split) * size;
      }
      if (n <= 0) {  // past the last position: an empty split
        for (int j = 0; j < nq; ++j) out[j][0] = -INFINITY;
        continue;
      }
      const float* kt = a.keys_t + g * a.keys_t_head_stride + (t0 / 16) * a.head_dim * 16;
      ScoreQueriesUpTo<kTile>(nq, kt, a.head_dim, q, a.scale, scores, stride, n);
      const int64_t padded = (n + 15) / 16 * 16;
      float* values_out[kTile];
      for (int j = 0; j < nq; ++j) {
        out[j][1] = SoftmaxRow(scores + j * stride, n, padded, &out[j][0]);
        values_out[j] = out[j] + 2;
      }
      const float* values = a.values + t0 * a.kv_stride + g * a.head_dim;
      WeightValuesTiled(nq, values, a.kv_stride, a.head_dim, scores, stride, n, ones, values_out);
    }
  }
}

// Sixteen at a time as kernels_scalar.cc's QuantizeWeightsScalar; the tail is masked (its
// zero inputs are never stored).
void QuantizeWeights(const float* x, int64_t n, float d, float lo, float hi, int8_t* q) {
  const __m512 vd = _mm512_set1_ps(d), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 half = _mm512_set1_ps(0.5f), minus_half = _mm512_set1_ps(-0.5f);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(mask, x + i), vd);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
    v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_sub_ps(v, t);
    t = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ), t, one);
    t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(frac, minus_half, _CMP_LE_OQ), t, one);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, mask, _mm512_cvttps_epi32(t));
  }
}

}  // namespace

const KernelTable& Avx512Kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = CpuIsa::kAvx512;
    t.matmul_f32 = MatmulF32;
    t.matmul_bf16 = MatmulBf16;
    t.matmul_bf16_dot = MatmulBf16Dot;
    t.prompt_panels = kPromptPanels;
    t.matmul_int8 = MatmulInt8;
    t.matmul_int4 = MatmulInt4;
    t.attention = Attention;
    t.attention_blocked = AttentionBlocked;
    t.attention_decode_split = AttentionDecodeSplit;
    t.to_bf16 = ToBf16;
    t.quantize_row = QuantizeRow;
    t.quantize_weights = QuantizeWeights;
    t.rms_norm = RmsNorm;
    t.rope = Rope;
    t.swiglu = Swiglu;
    return t;
  }();
  return table;
}

}  // namespace tessera
