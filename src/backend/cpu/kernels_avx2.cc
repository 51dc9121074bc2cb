// AVX2 + FMA + F16C kernels: the fallback for CPUs without AVX-512 (and forced with
// --cpu-isa avx2 for testing). A 16-row panel is two 8-lane registers. Per format:
//   F32 / BF16  fp32 FMA (BF16 widened by shift / mask; AVX2 has no bf16 dot product).
//   INT8  vpmaddubsw with the sign trick: |x| (unsigned) times w carrying x's sign, summed
//         in pairs to int16 (at most 2 * 127 * 127, no saturation), then vpmaddwd by 1.
//   INT4  nibbles (unsigned q + 8) times signed activations with vpmaddubsw (at most
//         2 * 15 * 127), vpmaddwd by 1; the block accumulator starts at -8 * block sum.
// Decode tiles (one row, which stream each panel once) prefetch 2 KiB ahead in the panel:
// per decode step on qwen2.5-0.5b (--cpu-isa avx2, 2 threads, alternating layer by
// layer in one process) BF16 1.27x, INT8 1.27x and INT4 1.32x faster than without. A
// prefetch past the end of the array is harmless (a hint, never a fault).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/kernels_avx2_attention.h"
#include "backend/cpu/kernels_avx2_common.h"
#include "backend/cpu/kernels_deltanet.h"

namespace tessera {
namespace {

using avx2::Exp;
using avx2::Load32;
using avx2::MatmulDriver;
using avx2::StorePanel;

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows m0.. of one panel of fp32 weights w ([kp][16]: an F32 matrix's own panel, or a BF16
// panel widened once for every prompt row), acc += w[k] x[k] in input order, so the sums do
// not depend on the tile size. 6 rows: 12 accumulators, 2 weight halves, 1 broadcast.
template <int MR>
void F32PanelTile(const MatmulArgs& a, const float* w, int64_t p, int64_t m0) {
  const int64_t kp = a.w->padded_cols;
  const float* x[MR];
  for (int j = 0; j < MR; ++j) x[j] = a.x->f32 + (m0 + j) * a.x->stride;
  __m256 lo[MR], hi[MR];
  for (int j = 0; j < MR; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kp; ++k) {
    __m256 w0 = _mm256_loadu_ps(w + k * 16), w1 = _mm256_loadu_ps(w + k * 16 + 8);
    for (int j = 0; j < MR; ++j) {
      __m256 xb = _mm256_set1_ps(x[j][k]);
      lo[j] = _mm256_fmadd_ps(w0, xb, lo[j]);
      hi[j] = _mm256_fmadd_ps(w1, xb, hi[j]);
    }
  }
  for (int j = 0; j < MR; ++j) StorePanel(a, m0 + j, p, lo[j], hi[j]);
}

struct F32Kernel {
  static constexpr int kMR = 6;
  static constexpr int kDecodeMR = 4;
  template <int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p, int64_t m0) {
    const int64_t kp = a.w->padded_cols;
    F32PanelTile<MR>(a, reinterpret_cast<const float*>(a.w->data.data()) + p * kp * 16, p, m0);
  }
};

// BF16 decode rows (prompt rows: MatmulBf16 below): weights widened by shift / mask inside the
// tile, even and odd inputs in separate accumulators (two independent FMA chains per half panel
// and row). A lone row runs both halves in one pass (its weights stream from memory once, each
// 64-byte line holding both halves of a step); several rows run one pass per half panel, so 4
// rows (8 accumulators, 2 widened vectors, 2 broadcasts) fit the 16 registers. Each lane sees
// the same FMAs in the same order either way, so batched rows get a lone row's bits.
struct Bf16DecodeKernel {
  static constexpr int kDecodeMR = 4;
  template <int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p, int64_t m0) {
    static_assert(kDecode, "prompt rows take the widened-panel tiles");
    const int64_t kp = a.w->padded_cols;
    const uint16_t* w = reinterpret_cast<const uint16_t*>(a.w->data.data()) + p * kp * 16;
    const float* x[MR];
    for (int j = 0; j < MR; ++j) x[j] = a.x->f32 + (m0 + j) * a.x->stride;
    const __m256i high_mask = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
    constexpr int kHalvesPerPass = MR == 1 ? 2 : 1;
    __m256 sums[2][MR];  // [half panel][row]
    for (int pass = 0; pass < 2 / kHalvesPerPass; ++pass) {
      __m256 even_acc[kHalvesPerPass][MR], odd_acc[kHalvesPerPass][MR];
      for (int h = 0; h < kHalvesPerPass; ++h)
        for (int j = 0; j < MR; ++j) even_acc[h][j] = odd_acc[h][j] = _mm256_setzero_ps();
      for (int64_t k = 0; k < kp; k += 2) {
        if (pass == 0) PrefetchAhead(w, (k + 64) * 16 * int64_t{sizeof(*w)});
        __m256 even[kHalvesPerPass], odd[kHalvesPerPass];
        for (int h = 0; h < kHalvesPerPass; ++h) {
          // inputs k (even) and k + 1 (odd) of rows 0-7 (first 16 values) or 8-15 (next 16)
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16 + 16 * (pass + h)));
          even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
          odd[h] = _mm256_castsi256_ps(_mm256_and_si256(v, high_mask));
        }
        for (int j = 0; j < MR; ++j) {
          __m256 x0 = _mm256_set1_ps(x[j][k]), x1 = _mm256_set1_ps(x[j][k + 1]);
          for (int h = 0; h < kHalvesPerPass; ++h) {
            even_acc[h][j] = _mm256_fmadd_ps(even[h], x0, even_acc[h][j]);
            odd_acc[h][j] = _mm256_fmadd_ps(odd[h], x1, odd_acc[h][j]);
          }
        }
      }
      for (int h = 0; h < kHalvesPerPass; ++h)
        for (int j = 0; j < MR; ++j)
          sums[pass + h][j] = _mm256_add_ps(even_acc[h][j], odd_acc[h][j]);
    }
    for (int j = 0; j < MR; ++j) StorePanel(a, m0 + j, p, sums[0][j], sums[1][j]);
  }
};

// The activations come as |q| (ActivationBlock::q8u, filled so for this family: see
// Int8UnsignedActivations) beside q itself, so each step of a row in a multi-row tile costs two
// broadcasts (loads) and no vpabsb: vpmaddubsw(|x|, sign(w, x)) sums pairs of products exactly
// (at most 2 * 127 * 127 in int16), vpmaddwd by 1 widens them to int32. 8-row decode tiles from
// cache (cpu_kernel_bench --cpu-isa avx2 --batched-decode, one thread, alternating builds):
// 56.0 and 55.6 against 45.7 GMAC/s with vpabsb per row and the rows one by one.
struct Int8Kernel {
  // Tiles of several rows run each half panel (8 weight rows) as its own pass over the inputs:
  // one accumulator per row, so 8 rows (8 accumulators, 1 weight vector, 4 temporaries) fit the
  // 16 registers with none spilled (both halves at once kept 8 accumulators for 4 rows and
  // GCC 12 spilled 3 of them in the loop). A lone row keeps both halves in one pass: its
  // weights stream from memory once, each 64-byte line holding both halves of a step.
  static constexpr int kMR = 6;
  static constexpr int kDecodeMR = 8;
  template <int MR, bool kDecode>
  static void Tile(const MatmulArgs& a, int64_t p, int64_t m0) {
    const int64_t kp = a.w->padded_cols;
    const int8_t* w = reinterpret_cast<const int8_t*>(a.w->data.data()) + p * kp * 16;
    const int8_t* x[MR];
    const uint8_t* ax[MR];
    for (int j = 0; j < MR; ++j) {
      x[j] = a.x->q8.data() + (m0 + j) * a.x->stride;
      ax[j] = a.x->q8u.data() + (m0 + j) * a.x->stride;
    }
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i sums[2][MR];  // [half panel][row]
    if constexpr (MR == 1) {
      __m256i lo = _mm256_setzero_si256(), hi = lo;
      for (int64_t k = 0; k < kp; k += 4) {
        if constexpr (kDecode) PrefetchAhead(w, (k + 128) * 16 * int64_t{sizeof(*w)});
        __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16));
        __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16 + 32));
        __m256i xb = _mm256_set1_epi32(Load32(x[0] + k));
        __m256i axb = _mm256_abs_epi8(xb);  // one op instead of a second broadcast
        lo = _mm256_add_epi32(
            lo, _mm256_madd_epi16(_mm256_maddubs_epi16(axb, _mm256_sign_epi8(w0, xb)), ones));
        hi = _mm256_add_epi32(
            hi, _mm256_madd_epi16(_mm256_maddubs_epi16(axb, _mm256_sign_epi8(w1, xb)), ones));
      }
      sums[0][0] = lo;
      sums[1][0] = hi;
    } else {
      for (int h = 0; h < 2; ++h) {
        __m256i acc[MR];
        for (int j = 0; j < MR; ++j) acc[j] = _mm256_setzero_si256();
        const int8_t* wh = w + 32 * h;
        for (int64_t k = 0; k < kp; k += 4) {
          if constexpr (kDecode) {
            if (h == 0) {
              PrefetchAhead(w, (k + 128) * 16 * int64_t{sizeof(*w)});
              // The next panel's line at the same offset, into L2: the two passes compute for
              // long enough that the next tile's weights arrive meanwhile. INT8 aggregate
              // decode, tessera bench --concurrency 1,4,8, binaries alternating (Xeon, KVM,
              // bench/results/avx2.md): qwen2.5-0.5b 4 streams 1.13-1.21x, 8 streams 1.06x;
              // smollm2-135m 1.13x, 1.02x; qwen3.5-0.8b 1.25x, 1.11x.
              PrefetchAheadToL2(w, (k + kp) * 16 * int64_t{sizeof(*w)});
            }
          }
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wh + k * 16));
          for (int j = 0; j < MR; ++j) {
            const __m256i xb = _mm256_set1_epi32(Load32(x[j] + k));
            const __m256i axb = _mm256_set1_epi32(Load32(ax[j] + k));
            acc[j] = _mm256_add_epi32(
                acc[j],
                _mm256_madd_epi16(_mm256_maddubs_epi16(axb, _mm256_sign_epi8(wv, xb)), ones));
          }
        }
        for (int j = 0; j < MR; ++j) sums[h][j] = acc[j];
      }
    }
    const float* rs = a.w->row_scale.data() + p * 16;
    __m256 s0 = _mm256_loadu_ps(rs), s1 = _mm256_loadu_ps(rs + 8);
    for (int j = 0; j < MR; ++j) {
      __m256 sx = _mm256_set1_ps(a.x->q_scale[static_cast<size_t>(m0 + j)]);
      StorePanel(a, m0 + j, p, _mm256_mul_ps(_mm256_cvtepi32_ps(sums[0][j]), _mm256_mul_ps(sx, s0)),
                 _mm256_mul_ps(_mm256_cvtepi32_ps(sums[1][j]), _mm256_mul_ps(sx, s1)));
    }
  }
};

// vpmaddubsw of the nibbles (unsigned q + 8) with the signed activations: each int16 lane
// sums two products (at most 2 * 15 * 127 = 3810), each step adds two such lanes and a block
// four steps, so the block's sums stay within 8 * 3810 = 30480 and need no widening until its
// end: one vpmaddwd by 1 per block instead of one per step.
struct MaddubsInt4Dot {
  static __m256i Begin(__m256i /*start*/) { return _mm256_setzero_si256(); }
  static __m256i Accumulate(__m256i acc, __m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi) {
    return _mm256_add_epi16(
        acc, _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi)));
  }
  static __m256i Finish(__m256i acc, __m256i start) {
    return _mm256_add_epi32(start, _mm256_madd_epi16(acc, _mm256_set1_epi16(1)));
  }
};
// 4 prompt rows per tile: more than the 16 registers hold (the float accumulators spill once per
// block), but each unpacked weight feeds one more row; measured 1.035-1.038x per prompt layer
// against 3 rows (2 rows: 0.93-0.96x, 6 rows: 0.99-1.01x), alternating in one process.
using Int4Kernel = avx2::Int4Kernel<MaddubsInt4Dot, 4, 4>;

void MatmulF32(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<F32Kernel>(a, pb, pe);
}
// The prompt tiles of one widened panel over rows [m0, m0 + left): F32Kernel's tile size,
// then one tile of the rows left.
template <int MR>
void WidenedPanelRows(const MatmulArgs& a, const float* w, int64_t p, int64_t m0, int64_t left) {
  if constexpr (MR > 0) {
    for (; left >= MR; left -= MR, m0 += MR) F32PanelTile<MR>(a, w, p, m0);
    if (left > 0) WidenedPanelRows<MR - 1>(a, w, p, m0, left);
  }
}

// BF16 panel p ([kp / 2][16 rows][2 inputs]) widened to fp32 [kp][16]: each value exactly.
void WidenBf16Panel(const MatmulArgs& a, int64_t p, float* out) {
  const int64_t kp = a.w->padded_cols;
  const uint16_t* w = reinterpret_cast<const uint16_t*>(a.w->data.data()) + p * kp * 16;
  const __m256i high_mask = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
  for (int64_t k = 0; k < kp; k += 2) {
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 16 + 16 * h));
      _mm256_storeu_ps(out + k * 16 + 8 * h, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      _mm256_storeu_ps(out + (k + 1) * 16 + 8 * h,
                       _mm256_castsi256_ps(_mm256_and_si256(v, high_mask)));
    }
  }
}

// A thread's widened panel. Not a std::vector: a template instantiated in this unit would be
// emitted as a weak symbol the linker may share with units built without AVX2
// (isa_units_define_no_weak_functions).
struct WidenedPanelBuffer {
  float* data = nullptr;
  size_t floats = 0;
  WidenedPanelBuffer() = default;
  WidenedPanelBuffer(const WidenedPanelBuffer&) = delete;
  WidenedPanelBuffer& operator=(const WidenedPanelBuffer&) = delete;
  ~WidenedPanelBuffer() { std::free(data); }
  float* Reserve(size_t n) {
    if (n > floats) {
      std::free(data);
      // 64-byte aligned, the size rounded up to a multiple of the alignment (aligned_alloc).
      const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      data = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (data == nullptr) throw std::bad_alloc();  // as std::vector's growth would

      floats = n;
    }
    return data;
  }
};

// Prompt rows widen each panel once into fp32 (per thread, in L2: up to 4864 x 16 x 4 bytes)
// and run F32 tiles over it, instead of widening inside every 5-row tile: the same products in
// the same order (the bits of the in-tile widening, which Bf16DecodeKernel keeps for decode),
// 6 rows per tile and no widening ops among the FMAs.
void MatmulBf16(const MatmulArgs& a, int64_t pb, int64_t pe) {
  if (a.decode()) {
    for (int64_t p = pb; p < pe; ++p) {
      avx2::DecodeRowTiles<Bf16DecodeKernel, Bf16DecodeKernel::kDecodeMR>(a, p, 0, a.x->rows);
    }
    return;
  }
  thread_local WidenedPanelBuffer widened;  // grows to the widest panel once per thread
  float* panel = widened.Reserve(static_cast<size_t>(a.w->padded_cols) * 16);
  for (int64_t p = pb; p < pe; ++p) {
    WidenBf16Panel(a, p, panel);
    WidenedPanelRows<F32Kernel::kMR>(a, panel, p, 0, a.x->rows);
  }
}
void MatmulInt8(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int8Kernel>(a, pb, pe);
}
void MatmulInt4(const MatmulArgs& a, int64_t pb, int64_t pe) {
  MatmulDriver<Int4Kernel>(a, pb, pe);
}

void ToBf16(const float* x, int64_t n, uint16_t* out) {
  // Round to nearest even on the bit pattern, as FloatToBf16 does (NaN kept quiet).
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256i u = _mm256_castps_si256(v);
    __m256i rounded = _mm256_add_epi32(
        u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    __m256i nan_bits = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
    __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i r = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, nan_bits, is_nan), 16);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  if (i < n) ScalarKernels().to_bf16(x + i, n - i, out + i);
}

void QuantizeRow(const float* x, int64_t n, int8_t* q, float* scale, int32_t* block_sums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 mx = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float absmax = _mm_cvtss_f32(m4);
  const float inv = absmax > 0.0f ? 127.0f / absmax : 0.0f;
  *scale = absmax > 0.0f ? absmax / 127.0f : 1.0f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int64_t b = 0; b < n / kInt4Block; ++b) {
    __m256i sum = _mm256_setzero_si256();
    alignas(32) int32_t v[kInt4Block];
    for (int64_t h = 0; h < 4; ++h) {
      __m256i iv =
          _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + b * kInt4Block + h * 8), vinv));
      iv = _mm256_min_epi32(_mm256_max_epi32(iv, lo), hi);
      sum = _mm256_add_epi32(sum, iv);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v + h * 8), iv);
    }
    for (int64_t i = 0; i < kInt4Block; ++i) q[b * kInt4Block + i] = static_cast<int8_t>(v[i]);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s = _mm_hadd_epi32(s, s);
    s = _mm_hadd_epi32(s, s);
    block_sums[b] = _mm_cvtsi128_si32(s);
  }
}

void RmsNorm(const float* x, const float* w, int64_t n, int64_t n_padded, float eps, float* y) {
  __m256 ss = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    ss = _mm256_fmadd_ps(v, v, ss);
  }
  double total = HorizontalSum(ss);
  for (int64_t t = i; t < n; ++t) total += static_cast<double>(x[t]) * x[t];
  const float inv = static_cast<float>(1.0 / std::sqrt(total / static_cast<double>(n) + eps));
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = x[i] * inv * w[i];
  for (i = n; i < n_padded; ++i) y[i] = 0.0f;
}

void Rope(float* x, int64_t heads, int64_t head_stride, int64_t rotary_dim, const float* cs,
          const float* sn) {
  const int64_t half = rotary_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
      __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
      __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
      _mm256_storeu_ps(v + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
      _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
    }
    for (; i < half; ++i) {
      float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

void Swiglu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  if (i < n) ScalarKernels().swiglu(gate + i, up + i, n - i, out + i);
}

void Geglu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c = _mm256_set1_ps(-1.5957691216057308f);  // -2 sqrt(2/pi)
  const __m256 c3 = _mm256_set1_ps(0.044715f);
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 u = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(c3, g), _mm256_mul_ps(g, g), g));
    __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(one, Exp(u)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  if (i < n) ScalarKernels().geglu(gate + i, up + i, n - i, out + i);
}

// Dot products and value sums use 8-wide chunks with a scalar tail for odd head sizes.
inline __m256 LoadKv8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 LoadKv8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <typename KV>
void AttentionKv(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const KvView<KV> kv(a);
  const int64_t group = a.heads / a.kv_heads;
  const int64_t full = a.head_dim / 8 * 8;
  for (int64_t task = tb; task < te; ++task) {
    int64_t m = 0, h = 0;
    AttentionTask(a, task, &m, &h);
    const float* q = a.q + m * a.q_stride + h * a.head_dim;
    const int64_t g = h / group;  // the kv head
    const int64_t count = a.start_pos + m + 1;
    float max_score = -INFINITY;
    for (int64_t t = 0; t < count; ++t) {
      const KV* k = kv.Key(t, g);
      __m256 acc = _mm256_setzero_ps();
      for (int64_t i = 0; i < full; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), LoadKv8(k + i), acc);
      float s = HorizontalSum(acc);
      for (int64_t i = full; i < a.head_dim; ++i) s += q[i] * KvToFloat(k[i]);
      s *= a.scale;
      scores[t] = s;
      max_score = std::max(max_score, s);
    }
    const __m256 vmax = _mm256_set1_ps(max_score);
    __m256 vsum = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 8 <= count; t += 8) {
      __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(scores + t), vmax));
      vsum = _mm256_add_ps(vsum, e);
      _mm256_storeu_ps(scores + t, e);
    }
    float sum = HorizontalSum(vsum);
    for (; t < count; ++t) {
      scores[t] = std::exp(scores[t] - max_score);
      sum += scores[t];
    }
    float* o = a.out + m * a.out_stride + h * a.head_dim;
    for (int64_t i = 0; i < a.head_dim; ++i) o[i] = 0.0f;
    for (int64_t s = 0; s < count; ++s) {
      const KV* v = kv.Value(s, g);
      __m256 p = _mm256_set1_ps(scores[s]);
      for (int64_t i = 0; i < full; i += 8) {
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(p, LoadKv8(v + i), _mm256_loadu_ps(o + i)));
      }
      for (int64_t i = full; i < a.head_dim; ++i) o[i] += scores[s] * KvToFloat(v[i]);
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < a.head_dim; ++i) o[i] *= inv;
  }
}

void Attention(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  if (a.kv_bf16) return AttentionKv<uint16_t>(a, tb, te, scores);
  AttentionKv<float>(a, tb, te, scores);
}

// Eight at a time, the same values as kernels_scalar.cc's definition (NaN -> 0, clamp, which
// does not change the rounded value, truncate, then the half-away correction, exact for
// |v| <= 127); the tail goes to the scalar definition itself.
void QuantizeWeights(const float* x, int64_t n, float d, float lo, float hi, int8_t* q) {
  const __m256 vd = _mm256_set1_ps(d), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256 half = _mm256_set1_ps(0.5f), minus_half = _mm256_set1_ps(-0.5f);
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vd);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0
    v = _mm256_min_ps(_mm256_max_ps(v, vlo), vhi);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_sub_ps(v, t);
    t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), one));
    t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, minus_half, _CMP_LE_OQ), one));
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_cvttps_epi32(t));
    for (int j = 0; j < 8; ++j) q[i + j] = static_cast<int8_t>(lanes[j]);
  }
  if (i < n) ScalarKernels().quantize_weights(x + i, n - i, d, lo, hi, q + i);
}

}  // namespace

const KernelTable& Avx2Kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = CpuIsa::kAvx2;
    t.int8_unsigned = Int8UnsignedActivations::kAbsolute;
    t.matmul_f32 = MatmulF32;
    t.matmul_bf16 = MatmulBf16;
    t.matmul_int8 = MatmulInt8;
    t.matmul_int4 = MatmulInt4;
    t.attention = Attention;
    t.attention_blocked = avx2::AttentionBlocked;
    t.attention_decode_split = avx2::AttentionDecodeSplit;
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
