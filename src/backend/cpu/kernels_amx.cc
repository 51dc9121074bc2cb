// The AVX-512 kernel table with INT8 prompt matmuls on AMX tiles (Intel Sapphire Rapids and
// later): TDPBUSD multiplies a tile of up to 16 activation rows by 64 inputs of 16
// outputs in one instruction, about eight times the multiply-adds per cycle of VPDPBUSD on
// 512-bit registers. The packed INT8 layout ([panel][K/4][16][4], packed_matrix.h) is already
// the B-tile layout (16 rows of 64 bytes per 64 inputs), so tiles load straight from the
// panels, and the activations' unsigned bytes (q + 128, ActivationBlock::q8u) are the A tile.
//
// The arithmetic is the AVX-512 kernel's: exact int32 sums of u8 x s8 products started from
// the row offsets, then one fp32 scaling per output. So every output has the same bits as on
// the AVX-512 table, whatever the row count. Inputs past the last multiple of 64 (matrices
// whose padded width is 32 mod 64) are added with VPDPBUSD after the tiles.
//
// Decode rows (one stream's GEMV, and the rows of a batched decode step) stay on the AVX-512
// kernel. Measured on a 2-vCPU Xeon with AMX (bench/results/many_users.md, session 22): from
// cache an 8-row tile computes 2.6-3.1x faster on AMX (765-906 against 295 GMAC/s, 576 x
// 1536), but in the model, with the weights streaming from L3, 8 smollm2-135m streams decoded
// 1161-1290 tok/s on AMX tiles against 1499-1590 on AVX-512 (perf: the time sits on the
// TDPBUSD after each tile load); with prefetches into L2 and L1 ahead of the tile loads, at
// best as fast (1495 against 1499), never faster. Prompts run twice as fast (qwen2.5-0.5b
// INT8, 512 tokens: 2251-2357 against 1126-1153 tok/s).
//
//   const KernelTable& k = Avx512AmxKernels();  // when CpuSupports(CpuIsa::kAvx512Amx)
//   k.matmul_int8(args, panel_begin, panel_end);
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, as in kernels_avx512.cc
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_avx512_common.h"

namespace tessera {
namespace {

using avx512::BroadcastGroup;
using avx512::StorePanel;

constexpr int kTileRows = 16;    // activation rows per A tile (the architectural maximum)
constexpr int kTileInputs = 64;  // inputs per tile step (64 bytes per tile row)
constexpr int kGroupPanels = 4;  // C tiles 0-3: one per panel of a group

// Tile registers: C (int32 accumulators) 0-3, A (activations) 4, B (weights) 5-7.
constexpr int kATile = 4;

// The 64-byte LDTILECFG operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Loading a configuration zeroes every tile and costs more than a small tile step, so each
// thread keeps the one it loaded last (the configuration depends only on the row count) and
// never releases it: no other code in the process uses AMX.
thread_local int configured_rows = 0;

void ConfigureTiles(int rows) {
  if (configured_rows == rows) return;
  TileConfig c;
  for (int t = 0; t < kGroupPanels; ++t) {
    c.rows[t] = static_cast<uint8_t>(rows);
    c.bytes_per_row[t] = 64;  // 16 int32 outputs
  }
  c.rows[kATile] = static_cast<uint8_t>(rows);
  c.bytes_per_row[kATile] = kTileInputs;
  for (int t = 5; t < 8; ++t) {
    c.rows[t] = kTileInputs / 4;  // 16 groups of 4 inputs
    c.bytes_per_row[t] = 64;      // 16 outputs x 4 bytes
  }
  _tile_loadconfig(&c);
  configured_rows = rows;
}

// Loads panel I's B tile for inputs [k, k + 64) and adds A x B into C tile I. The tile
// intrinsics paste their register numbers into the instruction text, so each takes a literal;
// B registers rotate (5, 6, 7, 5) so a load need not wait for the previous product to finish
// reading its register.
template <int I>
inline void PanelStep(const int8_t* w, int64_t k) {
  if constexpr (I == 0) {
    _tile_loadd(5, w + k * 16, 64);
    _tile_dpbusd(0, 4, 5);
  } else if constexpr (I == 1) {
    _tile_loadd(6, w + k * 16, 64);
    _tile_dpbusd(1, 4, 6);
  } else if constexpr (I == 2) {
    _tile_loadd(7, w + k * 16, 64);
    _tile_dpbusd(2, 4, 7);
  } else {
    _tile_loadd(5, w + k * 16, 64);
    _tile_dpbusd(3, 4, 5);
  }
}

// Rows [m0, m0 + rows) of panels [p0, p0 + NP), rows <= 16: the tile steps over the first
// k64 inputs, then the rest on VPDPBUSD, then the AVX-512 kernel's scaling and store.
template <int NP>
void Tile(const MatmulArgs& a, int64_t p0, int64_t m0, int rows) {
  const int64_t kp = a.w->padded_cols;
  const int64_t k64 = kp / kTileInputs * kTileInputs;
  const auto* base = reinterpret_cast<const int8_t*>(a.w->data.data());
  const int8_t* w[NP];
  for (int i = 0; i < NP; ++i) w[i] = base + (p0 + i) * kp * 16;
  const uint8_t* x = a.x->q8u.data() + m0 * a.x->stride;
  ConfigureTiles(rows);
  _tile_zero(0);
  if constexpr (NP > 1) _tile_zero(1);
  if constexpr (NP > 2) _tile_zero(2);
  if constexpr (NP > 3) _tile_zero(3);
  for (int64_t k = 0; k < k64; k += kTileInputs) {
    _tile_loadd(4, x + k, a.x->stride);  // kATile
    PanelStep<0>(w[0], k);
    if constexpr (NP > 1) PanelStep<1>(w[1], k);
    if constexpr (NP > 2) PanelStep<2>(w[2], k);
    if constexpr (NP > 3) PanelStep<3>(w[3], k);
  }
  alignas(64) int32_t sums[kGroupPanels][kTileRows][16];
  _tile_stored(0, sums[0], 64);
  if constexpr (NP > 1) _tile_stored(1, sums[1], 64);
  if constexpr (NP > 2) _tile_stored(2, sums[2], 64);
  if constexpr (NP > 3) _tile_stored(3, sums[3], 64);
  for (int i = 0; i < NP; ++i) {
    const __m512i offset = _mm512_loadu_si512(a.w->row_offset.data() + (p0 + i) * 16);
    const __m512 row_scale = _mm512_loadu_ps(a.w->row_scale.data() + (p0 + i) * 16);
    for (int j = 0; j < rows; ++j) {
      __m512i acc = _mm512_add_epi32(_mm512_load_si512(sums[i][j]), offset);
      const uint8_t* xj = x + j * a.x->stride;
      for (int64_t k = k64; k < kp; k += 4) {
        acc = _mm512_dpbusd_epi32(acc, BroadcastGroup(xj + k), _mm512_loadu_si512(w[i] + k * 16));
      }
      const __m512 scale =
          _mm512_mul_ps(_mm512_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]), row_scale);
      StorePanel(a, m0 + j, p0 + i, _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale));
    }
  }
}

// Every row through panels [p0, p0 + NP): blocks of 16 rows, then the rest.
template <int NP>
void PanelGroup(const MatmulArgs& a, int64_t p0) {
  const int64_t rows = a.x->rows;
  for (int64_t m = 0; m < rows; m += kTileRows) {
    Tile<NP>(a, p0, m, static_cast<int>(std::min<int64_t>(kTileRows, rows - m)));
  }
}

void MatmulInt8Amx(const MatmulArgs& a, int64_t pb, int64_t pe) {
  if (a.decode()) {
    Avx512Kernels().matmul_int8(a, pb, pe);  // decode rows: the AVX-512 table's kernel
    return;
  }
  int64_t p = pb;
  for (; p + 4 <= pe; p += 4) PanelGroup<4>(a, p);
  switch (pe - p) {
    case 3:
      PanelGroup<3>(a, p);
      break;
    case 2:
      PanelGroup<2>(a, p);
      break;
    case 1:
      PanelGroup<1>(a, p);
      break;
    default:
      break;
  }
}

}  // namespace

const KernelTable& Avx512AmxKernels() {
  static const KernelTable table = [] {
    KernelTable t = Avx512Kernels();
    t.isa = CpuIsa::kAvx512Amx;
    t.matmul_int8 = MatmulInt8Amx;
    t.prompt_panels = kGroupPanels;  // prompt chunks of whole 4-panel groups
    return t;
  }();
  return table;
}

}  // namespace tessera
