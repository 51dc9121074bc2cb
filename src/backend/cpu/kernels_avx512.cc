// AVX-512 kernels (F, BW, VL, DQ, VNNI + FMA; this file and the attention kernels in
// kernels_avx512_attention.cc alone are compiled with those flags, and only reached when
// cpu_features.cc found them all). No BF16 instruction here: the vdpbf16ps matmul is in
// kernels_avx512bf16.cc, the one unit built with -mavx512bf16.
//
// Matmuls keep 16 outputs per register (one panel) and broadcast activation groups, so no
// horizontal sums are needed. Tiles are NP panels x MR rows: decode (one row) uses several
// panels to overlap independent accumulation chains; prefill uses 2 panels x 4-12 rows, so
// each weight load feeds 4-12 rows. Per format:
//   F32   fp32 FMA.
//   BF16  weights widened to fp32 (shift / mask) and fp32 FMA, exact products. The
//         vdpbf16ps variant (bf16-rounded activations, --bf16-activations) is in
//         kernels_avx512bf16.cc.
//   INT8  vpdpbusd with activations as unsigned (q + 128, by xor 0x80) against signed
//         weights; the accumulator starts at -128 * row sum, which cancels the offset.
//   INT4  nibbles unpacked to unsigned q + 8 with and/shift; vpdpbusd against signed
//         activations; the accumulator of each 32-input block starts at -8 * (sum of the
//         block's activations), then the block's int result is scaled by its bf16 scale.
// Decode tiles (one row) prefetch each panel 2 KiB ahead of its loads: with only the hardware
// prefetchers one core sustained less DRAM bandwidth; measured here, qwen2.5-0.5b decode went
// from 23.5 to 28 tok/s in BF16 and 75 to 81 in INT4 (2 threads, tessera bench, interleaved).
// A line prefetched past the end of the array is harmless (see PrefetchAhead in kernels.h).
// GCC 12's AVX-512 headers build "undefined" vectors by self-initialisation, which trips
// -Wuninitialized inside the intrinsics themselves (GCC bug 105593); silenced for this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning group (and -Werror would refuse the name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_avx512_common.h"
#include "backend/cpu/kernels_avx512_matmul.h"
#include "backend/cpu/kernels_deltanet.h"

namespace tessera {
namespace {

using avx512::BroadcastGroup;
using avx512::Exp;
using avx512::kPromptPanels;
using avx512::MatmulDriver;
using avx512::NextPanels;
using avx512::StorePanel;
using avx512::TailMask;

// acc += u8 x s8 dot products (vpdpbusd), written as an in-place asm statement: with the
// intrinsic, GCC 12 copies every loop-carried accumulator of a multi-row tile to a fresh
// register (and spills some) on each step, which made the 8-row decode tile front-end bound.
inline __m512i DotBytesInPlace(__m512i acc, __m512i u8, __m512i s8) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}

// ---- tile kernels: Tile<NP, MR, kDecode>(args, first panel, first row, next panels) ----
// (their contract, and the driver that cuts a matmul into them: kernels_avx512_matmul.h)

struct F32Kernel {
  static constexpr int kMR = 6;
  static constexpr int kDecodeMR = 6;        // rows per tile of a batched decode step
  static constexpr int kDecodeQuadRows = 0;  // (only INT8 has registers to spare)
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

// kFarNextTile (the BF16 and INT4 decode tiles on Zen 4, DecodeFarPrefetch::kL2NextTile): each
// weight load also asks for its counterpart in the next tile (NP panels on) into L2, as the
// INT8 kernel does there. On a Zen 4 EPYC, steps alternating in one process against the near
// prefetch alone: BF16 smollm2-135m 1.06-1.09x (1 row), 1.15-1.16x (4 rows), 1.14-1.15x
// (8 rows), qwen2.5-0.5b 1.04, 1.08, 1.16x; INT4 smollm2-135m 1.04-1.10, 1.27-1.36,
// 1.15-1.20x, qwen2.5-0.5b 1.14, 1.38, 1.22x (bench/results/many_users.md, session 27).
// Fixed 16 KiB ahead measured less (BF16 smollm2-135m 1.01, 1.05, 1.06x). Other CPUs keep the
// near prefetch alone, as measured there.

// BF16 weights widened to fp32: each 32-bit lane holds (w[k], w[k+1]) of one row.
template <bool kFarNextTile>
struct Bf16WidenedKernel {
  // One accumulator per (panel, row) takes both halves of each bf16 pair, which frees
  // registers for 12 rows per tile: 2 panels x 12 rows, 24 accumulators, each widened weight
  // vector feeds 12 FMAs (4 widening ops per 48 FMAs; 3 panels x 8 rows needs 6).
  static constexpr int kMR = 12;
  static constexpr int kDecodeMR = 4;        // rows per tile of a batched decode step
  static constexpr int kDecodeQuadRows = 0;  // (only INT8 has registers to spare)
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
        if constexpr (kDecode) {
          PrefetchAhead(w[i], (k + 64) * 16 * int64_t{sizeof(*w[i])});
          if constexpr (kFarNextTile) PrefetchAheadToL2(w[i], (k + NP * kp) * 16 * 2);
        }
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

// kFar: how decode tiles prefetch their weights far ahead (DecodeFarPrefetch, chosen per CPU).
// kNonTemporalNextTile: PREFETCHNTA instead of PREFETCHT1, on Zen 5, whose NTA lines are not
// installed in L2 or L3 on eviction, so weights streamed once per step stop evicting what the
// step reuses (the KV cache, activations) from the L3: smollm2-135m INT8, 8-row decode steps
// alternating with the T1 build inside one process on a Zen 5 EPYC, 2.2-5.9 % faster in four
// runs (A/A 0.99-1.01); 4-row and lone-row steps unchanged (bench/results/many_users.md,
// session 19). It also aims the far prefetch at the next tile: each load's counterpart NP
// panels on (the same offset in the tile the thread most likely runs next), wherever a tile's
// panels span at most kNextTileMaxBytes. A fixed 16 KiB lands on the tile's own second panel
// once panels reach 16 KiB (1024 inputs), hence the far prefetch was off for them; aimed at the
// next tile it pays there: qwen3.5-0.8b INT8 8-row steps 1.10, 1.10, 1.11, 1.15x faster in
// four runs, 0.99 in a fifth (the qkv, gate/up and LM-head matmuls, 1024 inputs);
// smollm2-135m 1.01, 1.02, 1.00, 1.04x; qwen2.5-0.5b 1.02, 1.01x (steps alternating inside
// one process; many_users.md, session 20). Tiles over 64 KiB (qwen3.5's 3584-input down
// projection) measured no better in isolation.
// kL2NextTile: the same next-tile aim with PREFETCHT1, in every decode tile (1 to 8 rows), on
// Zen 4, where the NTA hint starves the stream: on a Zen 4 EPYC (family 19h model 11h), steps
// alternating inside one process against kNonTemporalNextTile, smollm2-135m 1 row 1.23x, 4 rows
// 1.24x, 8 rows 1.31x faster; qwen2.5-0.5b 1.16, 1.20, 1.35x; qwen3.5-0.8b 1.17, 1.23, 1.31x.
// NTA only 8 KiB ahead measured no better there (0.997x at 8 rows), so it is not the next
// tile's lines crowding the 32 KiB L1; T1 16 or 32 KiB ahead measured the same as the next
// tile (0.98-1.02x) (many_users.md, session 27).
template <DecodeFarPrefetch kFar>
struct Int8KernelT {
  static constexpr int kMR = 6;
  static constexpr int kDecodeMR = 8;  // rows per tile of a batched decode step
  // Up to this many decode rows, tiles of 4 panels (16 accumulators, as 2 x 8).
  static constexpr int kDecodeQuadRows = 4;
  // Tiles of more decode rows than that compute about as long as their weights take to arrive
  // from L3. Where panels are shorter than 16 KiB (e.g. 576 or 896 inputs), each panel is
  // also prefetched into L2 16 KiB ahead, i.e. into the next tiles' panels: smollm2-135m INT8,
  // 8 streams, aggregate decode +14 % against the L1 prefetch alone (tessera bench, alternating
  // binaries; bench/results/many_users.md, session 15), and keeping the L1 one besides it:
  // 8-row steps 2.1-3.0 % faster on smollm2-135m, 1.0-1.5 % on qwen2.5-0.5b (steps
  // alternating in one process, session 17). In the T1 build longer panels keep the short
  // prefetch alone: qwen3.5-0.8b (1024 inputs) measured 9 % slower with that far one. Without
  // any prefetch the 8-row step took 25 % longer; 8 KiB ahead 13 % longer, 32 KiB as long as
  // 16 KiB.
  static constexpr int64_t kBatchedDecodePrefetchBytes = 16 << 10;
  static constexpr int64_t kNextTileMaxBytes = 64 << 10;
  template <int NP, int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next) {
    const int64_t kp = a.w->padded_cols;
    const auto* base = reinterpret_cast<const int8_t*>(a.w->data.data());
    const int8_t* w[NP];
    for (int i = 0; i < NP; ++i) w[i] = base + (p0 + i) * kp * 16;
    // The activations as unsigned bytes (q + 128, ActivationBlock::q8u); the row offsets the
    // accumulators start from take the 128 back out.
    const uint8_t* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->q8u.data() + (m0 + j) * a.x->stride;
    __m512i acc[NP][MR];
    for (int i = 0; i < NP; ++i) {
      __m512i offset = _mm512_loadu_si512(a.w->row_offset.data() + (p0 + i) * 16);
      for (int j = 0; j < MR; ++j) acc[i][j] = offset;
    }
    // The far prefetch of batched decode tiles: on or off, and how far (see above).
    const int64_t tile_bytes = NP * kp * 16;
    constexpr bool kNextTile = kFar != DecodeFarPrefetch::kL2Fixed;
    const bool far =
        (MR > kDecodeQuadRows || kFar == DecodeFarPrefetch::kL2NextTile) &&
        (kNextTile ? tile_bytes <= kNextTileMaxBytes : kp * 16 < kBatchedDecodePrefetchBytes);
    const int64_t far_bytes = kNextTile ? tile_bytes : kBatchedDecodePrefetchBytes;
    for (int64_t k = 0; k < kp; k += 4) {
      if constexpr (!kDecode) next->Step();
      __m512i wv[NP];
      for (int i = 0; i < NP; ++i) {
        if constexpr (kDecode) {
          if (far) {
            if constexpr (kFar == DecodeFarPrefetch::kNonTemporalNextTile) {
              PrefetchAheadNonTemporal(w[i], k * 16 + far_bytes);
            } else {
              PrefetchAheadToL2(w[i], k * 16 + far_bytes);
            }
          }
          PrefetchAhead(w[i], (k + 128) * 16);
        }
        wv[i] = _mm512_loadu_si512(w[i] + k * 16);
      }
      for (int j = 0; j < MR; ++j) {
        const __m512i xb = BroadcastGroup(x[j] + k);
        for (int i = 0; i < NP; ++i) {
          if constexpr (kDecode) {
            acc[i][j] = DotBytesInPlace(acc[i][j], xb, wv[i]);
          } else {
            acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], xb, wv[i]);
          }
        }
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

template <bool kFarNextTile>
struct Int4Kernel {
  static constexpr int kMR = 4;
  static constexpr int kDecodeMR = 4;        // rows per tile of a batched decode step
  static constexpr int kDecodeQuadRows = 0;  // (only INT8 has registers to spare)
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
          PrefetchAhead(w[i], (b + 8) * 256);
          PrefetchAhead(w[i], (b + 8) * 256 + 64);
          PrefetchAhead(w[i], (b + 8) * 256 + 128);
          PrefetchAhead(w[i], (b + 8) * 256 + 192);
          if constexpr (kFarNextTile) {
            for (int64_t o = 0; o < 256; o += 64) {
              PrefetchAheadToL2(w[i], (b + NP * blocks) * 256 + o);
            }
          }
          if (b % 2 == 0) {
            PrefetchAhead(scales[i], (b + 16) * 16 * int64_t{sizeof(*scales[i])});
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
          if constexpr (kDecode) {
            hi[i] = _mm512_andnot_si512(low_nibbles, v);
          } else {
            hi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibbles);
          }
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

void MatmulF32(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<F32Kernel>(a, pb, pe);
}
template <bool kFarNextTile>
void MatmulBf16(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Bf16WidenedKernel<kFarNextTile>>(a, pb, pe);
}
template <DecodeFarPrefetch kFar>
void MatmulInt8(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int8KernelT<kFar>>(a, pb, pe);
}
template <bool kFarNextTile>
void MatmulInt4(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int4Kernel<kFarNextTile>>(a, pb, pe);
}

// ---- activations ----

// Round to nearest even on the bit pattern, as FloatToBf16 does (NaN kept quiet). Not
// vcvtneps2bf16: it treats subnormal inputs as zero, and the KV cache written through this
// must hold the same bits on every ISA.
void ToBf16(const float* x, int64_t n, uint16_t* out) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_add_epi32(
        u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), u, quiet);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
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

void Rope(float* x, int64_t heads, int64_t head_stride, int64_t rotary_dim, const float* cs,
          const float* sn) {
  const int64_t half = rotary_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
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

void Geglu(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 c = _mm512_set1_ps(-1.5957691216057308f);  // -2 sqrt(2/pi)
  const __m512 c3 = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = TailMask(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 u = _mm512_mul_ps(c, _mm512_fmadd_ps(_mm512_mul_ps(c3, g), _mm512_mul_ps(g, g), g));
    __m512 gelu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), Exp(u)));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(gelu, _mm512_maskz_loadu_ps(m, up + i)));
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

MatmulFn Avx512Matmul(WeightFormat format, DecodeFarPrefetch far) {
  const bool next_tile = far == DecodeFarPrefetch::kL2NextTile;
  switch (format) {
    case WeightFormat::kBF16:
      return next_tile ? MatmulBf16<true> : MatmulBf16<false>;
    case WeightFormat::kInt4:
      return next_tile ? MatmulInt4<true> : MatmulInt4<false>;
    case WeightFormat::kInt8:
      switch (far) {
        case DecodeFarPrefetch::kNonTemporalNextTile:
          return MatmulInt8<DecodeFarPrefetch::kNonTemporalNextTile>;
        case DecodeFarPrefetch::kL2NextTile:
          return MatmulInt8<DecodeFarPrefetch::kL2NextTile>;
        case DecodeFarPrefetch::kL2Fixed:
          break;
      }
      return MatmulInt8<DecodeFarPrefetch::kL2Fixed>;
    case WeightFormat::kF32:
    case WeightFormat::kAuto:
      break;
  }
  return MatmulF32;
}

const KernelTable& Avx512Kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = CpuIsa::kAvx512;
    t.matmul_f32 = MatmulF32;
    t.matmul_bf16 = Avx512Matmul(WeightFormat::kBF16, CpuDecodeFarPrefetch());
    // vdpbf16ps (kernels_avx512bf16.cc) only where the CPU has AVX512_BF16.
    t.matmul_bf16_dot = ProbedCpuTraits().avx512_bf16 ? Avx512Bf16DotMatmul() : nullptr;
    t.prompt_panels = kPromptPanels;
    t.matmul_int8 = Avx512Matmul(WeightFormat::kInt8, CpuDecodeFarPrefetch());
    t.matmul_int4 = Avx512Matmul(WeightFormat::kInt4, CpuDecodeFarPrefetch());
    t.attention = avx512::Attention;
    t.attention_blocked = avx512::AttentionBlocked;
    t.attention_decode_split = avx512::AttentionDecodeSplit;
    t.to_bf16 = ToBf16;
    t.quantize_row = QuantizeRow;
    t.quantize_weights = QuantizeWeights;
    t.rms_norm = RmsNorm;
    t.rope = Rope;
    t.swiglu = Swiglu;
    t.geglu = Geglu;
    t.deltanet_step = DeltaNetStepPlain;
    return t;
  }();
  return table;
}

}  // namespace tessera
