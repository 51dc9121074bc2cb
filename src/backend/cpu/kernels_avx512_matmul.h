// The AVX-512 matmul driver: how a matmul's panels and rows are cut into register tiles, shared
// by the files that define tile kernels (kernels_avx512.cc: F32, BF16, INT8, INT4;
// kernels_avx512bf16.cc: the vdpbf16ps kernel, built with -mavx512bf16 on top). Included only
// by files built with the AVX-512 flags; like kernels_avx512_common.h, everything here has
// internal linkage (an unnamed namespace), so each of those units keeps its own copy.
//
// A tile kernel K is a struct with
//   static constexpr int kMR;              // rows per prompt tile
//   static constexpr int kDecodeMR;        // rows per tile of a batched decode step
//   static constexpr int kDecodeQuadRows;  // up to this many decode rows, 4-panel tiles (0: none)
//   template <int NP, int MR, bool kDecode>
//   static void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, NextPanels* next);
// and the matmul of its format is
//   void Matmul(const MatmulArgs& a, int64_t pb, int64_t pe) { avx512::MatmulDriver<K>(a, pb, pe);
//   }
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernels.h"

namespace tessera::avx512 {
namespace {

// Prompt tiles pull the next panel group toward L2 while they compute on the current one, a
// line per weight-load step, so that the group's first row tile does not wait on DRAM: by the
// time the current group's NP-th row tile ends, the next group has been requested (a matrix
// streaming from memory then runs at its cache-resident rate; see docs/backends.md). A thief
// walking another thread's share backwards prefetches a group already done: a few chunks per
// matmul, not worth knowing the direction here.
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

// Prompt tiles are kPromptPanels panels x K::kMR rows.
constexpr int kPromptPanels = 2;
// kDecode marks the one-row GEMV of a decode step (x->rows == 1), which streams each panel
// once; prompt rows never take it, whatever their tile size, so a prompt row's arithmetic does
// not depend on how the rows were tiled or chunked.

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
// Decode rows of several sequences: pairs of panels, each streamed from memory once and
// then read again from cache by every further tile of up to K::kDecodeMR rows (as many as the
// registers hold); the decode arithmetic per (panel, row) is the same as for a lone row.
template <class K, int NP, int MR>
void DecodeRowTiles(const MatmulArgs& a, int64_t p0, int64_t m0, int64_t left) {
  if constexpr (MR > 0) {
    if (left >= MR) {
      K::template Tile<NP, MR, true>(a, p0, m0, nullptr);
      if (left > MR) DecodeRowTiles<K, NP, MR>(a, p0, m0 + MR, left - MR);
    } else {
      DecodeRowTiles<K, NP, MR - 1>(a, p0, m0, left);
    }
  }
}

template <class K>
void MatmulDriver(const MatmulArgs& a, int64_t pb, int64_t pe) {
  int64_t p = pb;
  if (a.x->rows > 1 && a.decode_rows) {
    if constexpr (K::kDecodeQuadRows > 0) {
      // Few rows: four panels per tile as for a lone row (four prefetch streams, not two).
      if (a.x->rows <= K::kDecodeQuadRows) {
        for (; p + 4 <= pe; p += 4) DecodeRowTiles<K, 4, K::kDecodeQuadRows>(a, p, 0, a.x->rows);
      }
    }
    for (; p + 2 <= pe; p += 2) DecodeRowTiles<K, 2, K::kDecodeMR>(a, p, 0, a.x->rows);
    for (; p < pe; ++p) DecodeRowTiles<K, 1, K::kDecodeMR>(a, p, 0, a.x->rows);
    return;
  }
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
}  // namespace
}  // namespace tessera::avx512
