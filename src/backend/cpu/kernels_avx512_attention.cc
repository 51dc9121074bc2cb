// AVX-512 attention kernels: per-head attention over the KV cache, the blocked kernel for
// prompt blocks and decode (a kv head's whole query group per task, reading the transposed
// key cache), and decode attention split over positions; each over an fp32 or a bf16 cache
// (KvArrays, LoadKv: bf16 values widened exactly as they are loaded). Compiled with the AVX-512
// flags and reached only through the kernel table (kernels_avx512.cc) once cpu_features.cc has
// checked the CPU. GCC 12's AVX-512 headers build "undefined" vectors by self-initialisation, which
// trips -Wuninitialized inside the intrinsics themselves (GCC bug 105593); silenced for this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning group (and -Werror would refuse the name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_attention_tasks.h"
#include "backend/cpu/kernels_avx512_common.h"

namespace tessera::avx512 {
namespace {

using attention_tasks::PrefetchDecodeStart;
using attention_tasks::PrefetchDecodeStep;

// Head vectors up to 256 values stay in registers across the positions.
constexpr int kMaxHeadChunks = 16;

// 16 KV values as fp32: fp32 as they are, bf16 widened exactly (the bits moved up 16).
inline __m512 LoadKv(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 LoadKv(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 LoadKvMasked(__mmask16 m, const float* p) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline __m512 LoadKvMasked(__mmask16 m, const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

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

template <typename KV>
void PerHead(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const KvView<KV> kv(a);
  const int64_t group = a.heads / a.kv_heads;
  const int64_t chunks = (a.head_dim + 15) / 16;
  if (chunks > kMaxHeadChunks) return ScalarKernels().attention(a, tb, te, scores);
  for (int64_t task = tb; task < te; ++task) {
    int64_t m = 0, h = 0;
    AttentionTask(a, task, &m, &h);
    const float* q = a.q + m * a.q_stride + h * a.head_dim;
    const int64_t g = h / group;  // the kv head
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
        const KV* k = kv.Key(t + i, g);
        acc[i] = _mm512_setzero_ps();
        for (int64_t c = 0; c < chunks; ++c) {
          acc[i] = _mm512_fmadd_ps(qv[c], LoadKvMasked(TailMask(a.head_dim - c * 16), k + c * 16),
                                   acc[i]);
        }
      }
      __m512 s16 = _mm512_mul_ps(SumEach16(acc), scale);
      _mm512_storeu_ps(scores + t, s16);
      max_score = std::max(max_score, _mm512_reduce_max_ps(s16));
    }
    for (; t < count; ++t) {
      const KV* k = kv.Key(t, g);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t c = 0; c < chunks; ++c) {
        acc = _mm512_fmadd_ps(qv[c], LoadKvMasked(TailMask(a.head_dim - c * 16), k + c * 16), acc);
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
      const KV* v = kv.Value(t, g);
      __m512 p = _mm512_set1_ps(scores[t]);
      for (int64_t c = 0; c < chunks; ++c) {
        out[c] =
            _mm512_fmadd_ps(p, LoadKvMasked(TailMask(a.head_dim - c * 16), v + c * 16), out[c]);
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
template <int NP, int NQ, typename KV>
void ScoreStep(const KV* kt, int64_t head_dim, const float* const* q, float scale, float* scores,
               int64_t stride, int64_t t) {
  __m512 acc[NP][NQ];
  for (int i = 0; i < NP; ++i)
    for (int j = 0; j < NQ; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    __m512 kv[NP];
    for (int i = 0; i < NP; ++i) kv[i] = LoadKv(kt + (i * head_dim + d) * 16);
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

// Positions [t0, t0 + count) of kv head g (t0 % 32 == 0), scores[j][0..count). `decode`: one
// query row reading a cold cache (PrefetchDecodeStep); prompt blocks read keys just written.
template <int NQ, typename KV>
void ScoreQueries(const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                  const float* const* q, float scale, float* scores, int64_t stride, int64_t count,
                  bool decode) {
  if (decode) PrefetchDecodeStart(kv, g, t0, head_dim, count);
  int64_t t = 0;
  for (; t + 16 < count; t += 32) {
    if (decode) PrefetchDecodeStep(kv, g, t0, head_dim, t, count);
    ScoreStep<2, NQ>(kv.KeysTile(g, t0 + t), head_dim, q, scale, scores, stride, t);
  }
  if (t < count) {
    if (decode) PrefetchDecodeStep(kv, g, t0, head_dim, t, count);
    ScoreStep<1, NQ>(kv.KeysTile(g, t0 + t), head_dim, q, scale, scores, stride, t);
  }
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

// WeightValues (below) over a bf16 cache with head_dim a multiple of 32: value rows are
// widened 32 values at a time. A 32-bit lane holds an even value in its low half and the next
// odd one in its high half, so a shift and a mask give both as fp32 (two ops for 32 values,
// where widening 16 at a time takes a shuffle and a shift for each 16). The accumulators hold
// even and odd elements apart and are interleaved once at the end; every element sums the
// same products in the same order.
template <int CH, int NV>
void WeightValuesBf16Pairs(const KvView<uint16_t>& kv, int64_t t0, int64_t off, const float* p,
                           int64_t stride, int64_t count, const float* sums, float* const* out) {
  static_assert(CH % 2 == 0);
  __m512 even[NV][CH / 2], odd[NV][CH / 2];
  for (int j = 0; j < NV; ++j)
    for (int c = 0; c < CH / 2; ++c) even[j][c] = odd[j][c] = _mm512_setzero_ps();
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  for (int64_t t = 0; t < count;) {
    const int64_t end = std::min(count, kv.BlockEnd(t0 + t) - t0);
    const uint16_t* v = kv.Value(t0 + t, 0) + off;
    for (; t < end; ++t, v += kv.stride()) {
      __m512 ve[CH / 2], vo[CH / 2];
      for (int c = 0; c < CH / 2; ++c) {
        const __m512i bits = _mm512_loadu_si512(v + c * 32);
        ve[c] = _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
        vo[c] = _mm512_castsi512_ps(_mm512_and_si512(bits, high));
      }
      for (int j = 0; j < NV; ++j) {
        const __m512 w = _mm512_set1_ps(p[j * stride + t]);
        for (int c = 0; c < CH / 2; ++c) {
          even[j][c] = _mm512_fmadd_ps(w, ve[c], even[j][c]);
          odd[j][c] = _mm512_fmadd_ps(w, vo[c], odd[j][c]);
        }
      }
    }
  }
  // Element 2i of a 32-value chunk is even[i], element 2i + 1 is odd[i].
  const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i second =
      _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (int j = 0; j < NV; ++j) {
    const __m512 inv = _mm512_set1_ps(1.0f / sums[j]);
    for (int c = 0; c < CH / 2; ++c) {
      _mm512_storeu_ps(out[j] + c * 32,
                       _mm512_mul_ps(_mm512_permutex2var_ps(even[j][c], first, odd[j][c]), inv));
      _mm512_storeu_ps(out[j] + c * 32 + 16,
                       _mm512_mul_ps(_mm512_permutex2var_ps(even[j][c], second, odd[j][c]), inv));
    }
  }
}

// The general case of WeightValues: each chunk of 16 values widened as it is loaded.
template <int CH, int NV, bool kMasked, typename KV>
void WeightValuesWidened(const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim,
                         const float* p, int64_t stride, int64_t count, const float* sums,
                         float* const* out) {
  __m512 acc[NV][CH];
  for (int j = 0; j < NV; ++j)
    for (int c = 0; c < CH; ++c) acc[j][c] = _mm512_setzero_ps();
  // Block by block: the rows of one block are kv.stride() apart.
  for (int64_t t = 0; t < count;) {
    const int64_t end = std::min(count, kv.BlockEnd(t0 + t) - t0);
    const KV* v = kv.Value(t0 + t, 0) + off;
    for (; t < end; ++t, v += kv.stride()) {
      __m512 vc[CH];
      for (int c = 0; c < CH; ++c) {
        vc[c] =
            kMasked ? LoadKvMasked(TailMask(head_dim - c * 16), v + c * 16) : LoadKv(v + c * 16);
      }
      for (int j = 0; j < NV; ++j) {
        const __m512 w = _mm512_set1_ps(p[j * stride + t]);
        for (int c = 0; c < CH; ++c) acc[j][c] = _mm512_fmadd_ps(w, vc[c], acc[j][c]);
      }
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

// out_j = (sum_t p_j[t] v_t) / sums[j] for NV queries; CH chunks of 16 values per head.
// kMasked handles a head_dim that is not a multiple of 16. Unmasked is its own instantiation
// because with masked loads GCC 12 keeps every accumulator in memory too, one store per FMA,
// which made this loop 2.3x slower than the score loop of the same FLOPs.
// Values of positions [t0, t0 + count), from element `off` of each (kv head 0's start).
template <int CH, int NV, bool kMasked, typename KV>
void WeightValues(const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim, const float* p,
                  int64_t stride, int64_t count, const float* sums, float* const* out) {
  if constexpr (std::is_same_v<KV, uint16_t> && !kMasked && CH % 2 == 0) {
    WeightValuesBf16Pairs<CH, NV>(kv, t0, off, p, stride, count, sums, out);
  } else {
    WeightValuesWidened<CH, NV, kMasked>(kv, t0, off, head_dim, p, stride, count, sums, out);
  }
}

template <int CH, int NV, typename KV>
void WeightValuesUpTo(int nv, const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim,
                      const float* p, int64_t stride, int64_t count, const float* sums,
                      float* const* out) {
  if constexpr (NV > 0) {
    if (nv == NV) {
      if (head_dim == CH * 16) {
        return WeightValues<CH, NV, false>(kv, t0, off, head_dim, p, stride, count, sums, out);
      }
      return WeightValues<CH, NV, true>(kv, t0, off, head_dim, p, stride, count, sums, out);
    }
    WeightValuesUpTo<CH, NV - 1>(nv, kv, t0, off, head_dim, p, stride, count, sums, out);
  }
}

// out_j for nq queries (scores of query j at p + j * stride), in sub-tiles whose
// accumulators stay in registers: 6 queries x 4 chunks (head_dim <= 64) or 3 x 8.
template <typename KV>
void WeightValuesTiledUpTo128(int nq, const KvView<KV>& kv, int64_t t0, int64_t off,
                              int64_t head_dim, const float* p, int64_t stride, int64_t count,
                              const float* sums, float* const* out) {
  // Sub-tiles of equal size (8 queries: 4 + 4, not 6 + 2): measured 1.01x per prompt layer.
  const int nv_cap = head_dim <= 64 ? 6 : 3;
  const int parts = (nq + nv_cap - 1) / nv_cap;
  const int nv_max = (nq + parts - 1) / parts;
  for (int j0 = 0; j0 < nq; j0 += nv_max) {
    const int nv = std::min(nv_max, nq - j0);
    if (head_dim <= 64) {
      WeightValuesUpTo<4, 6>(nv, kv, t0, off, head_dim, p + j0 * stride, stride, count, sums + j0,
                             out + j0);
    } else {
      WeightValuesUpTo<8, 3>(nv, kv, t0, off, head_dim, p + j0 * stride, stride, count, sums + j0,
                             out + j0);
    }
  }
}

// Heads over 128 dims (Qwen3.5's and Gemma 3's 256) are weighted 128 dims at a time: the
// value accumulators of a wider head would not fit in the registers.
template <typename KV>
void WeightValuesTiled(int nq, const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim,
                       const float* p, int64_t stride, int64_t count, const float* sums,
                       float* const* out) {
  if (head_dim <= 128) {
    return WeightValuesTiledUpTo128(nq, kv, t0, off, head_dim, p, stride, count, sums, out);
  }
  float* part[kBlockedAttentionQueries];
  for (int64_t d0 = 0; d0 < head_dim; d0 += 128) {
    for (int j = 0; j < nq; ++j) part[j] = out[j] + d0;
    WeightValuesTiledUpTo128(nq, kv, t0, off + d0, std::min<int64_t>(128, head_dim - d0), p, stride,
                             count, sums, part);
  }
}

template <int NQ, typename KV>
void ScoreQueriesUpTo(int nq, const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                      const float* const* q, float scale, float* scores, int64_t stride,
                      int64_t count, bool decode) {
  if constexpr (NQ > 0) {
    if (nq == NQ) {
      return ScoreQueries<NQ>(kv, g, t0, head_dim, q, scale, scores, stride, count, decode);
    }
    ScoreQueriesUpTo<NQ - 1>(nq, kv, g, t0, head_dim, q, scale, scores, stride, count, decode);
  }
}

// The arithmetic of the shared task loops (kernels_attention_tasks.h).
struct Ops {
  template <typename KV>
  static void Score(int nq, const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                    const float* const* q, float scale, float* scores, int64_t stride,
                    int64_t count, bool decode) {
    ScoreQueriesUpTo<static_cast<int>(kBlockedAttentionQueries)>(nq, kv, g, t0, head_dim, q, scale,
                                                                 scores, stride, count, decode);
  }
  static float SoftmaxRow(float* s, int64_t count, int64_t padded, float* max_out) {
    return avx512::SoftmaxRow(s, count, padded, max_out);
  }
  template <typename KV>
  static void WeightValues(int nq, const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim,
                           const float* p, int64_t stride, int64_t count, const float* sums,
                           float* const* out) {
    WeightValuesTiled(nq, kv, t0, off, head_dim, p, stride, count, sums, out);
  }
};

}  // namespace

void Attention(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  if (a.kv_bf16) return PerHead<uint16_t>(a, tb, te, scores);
  PerHead<float>(a, tb, te, scores);
}
void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  attention_tasks::BlockedAnyKv<Ops>(a, tb, te, scores);
}
void AttentionDecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te,
                          float* scores, float* partials) {
  attention_tasks::DecodeSplitAnyKv<Ops>(a, splits, tb, te, scores, partials);
}

}  // namespace tessera::avx512
