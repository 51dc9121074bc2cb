// AVX2 attention kernels: the blocked kernel for prompt blocks and decode (a kv head's whole
// query group per task, reading the transposed key cache) and decode attention split over
// positions, over an fp32 or a bf16 cache, contiguous or paged (KvView). The task loops are the
// AVX-512 kernels' (kernels_attention_tasks.h); the arithmetic is sized for 16 ymm registers:
//   scores: a 16-position key tile row is two vectors; sub-tiles of up to 4 queries take one
//           tile per step (8 accumulators), of 1-2 queries two tiles (32 positions);
//   values: 32 dims x up to 2 queries per pass (8 accumulators; 3 queries, 12 accumulators,
//           spilled and measured 1.1x slower in prefill);
//   both walk the positions in chunks of kPositionChunk, every sub-tile over one chunk before
//   the next, so the keys and values a chunk's later sub-tiles read are still in L1/L2.
// bf16 keys and values are widened exactly by a shift (even elements) and a blend (odd ones):
// one op per 8 values; the accumulators hold even and odd elements apart and are interleaved
// once when stored. Compiled with the AVX2 / FMA flags and reached only through the kernel
// table once cpu_features.cc has checked the CPU.
#include "backend/cpu/kernels_avx2_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels_attention_tasks.h"
#include "backend/cpu/kernels_avx2_common.h"

namespace tessera::avx2 {
namespace {

using attention_tasks::PrefetchDecodeStart;
using attention_tasks::PrefetchDecodeStep;

// Positions every sub-tile of queries covers before the next chunk (a multiple of 32): 128
// positions of a 32-dim value slice are 16 KiB of fp32, of 64-dim key tiles 32 KiB.
constexpr int64_t kPositionChunk = 128;
// The widest head slice one pass of WeightValues keeps in its local accumulators.
constexpr int64_t kMaxSliceDims = 256;

// 16 consecutive KV values as two fp32 vectors, in the order StorePair16 undoes: fp32 values
// 0-7 and 8-15; bf16 the even values and the odd ones (a 32-bit lane holds an even value in
// its low half and the next one in its high half).
struct Pair {
  __m256 a, b;
};
inline Pair LoadPair16(const float* p) {
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
inline Pair LoadPair16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // The odd values by zeroing the even 16-bit words (vpblendw: port 5 on Intel, leaving the
  // FMA ports to the FMAs; zero needs no register kept live, a mask constant did).
  return {_mm256_castsi256_ps(_mm256_slli_epi32(bits, 16)),
          _mm256_castsi256_ps(_mm256_blend_epi16(bits, _mm256_setzero_si256(), 0x55))};
}
// The first n (< 16) values, zeros after them: through a zero-padded copy (odd head sizes only).
template <typename KV>
inline Pair LoadPartial16(const KV* p, int64_t n) {
  KV padded[16] = {};
  std::memcpy(padded, p, static_cast<size_t>(n) * sizeof(KV));
  return LoadPair16(padded);
}
// Stores two vectors accumulated in LoadPair16<KV>'s order as 16 consecutive floats.
template <typename KV>
inline void StorePair16(__m256 a, __m256 b, float* out) {
  if constexpr (std::is_same_v<KV, float>) {
    _mm256_storeu_ps(out, a);
    _mm256_storeu_ps(out + 8, b);
  } else {
    // Per 128-bit lane [e0 o0 e1 o1] and [e2 o2 e3 o3]: the halves of elements 0-7 and 8-15.
    const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
    _mm256_storeu_ps(out, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

// scores[j][t .. t + 16 NT) = scale * q_j . k for NT key tiles (the second right after the
// first: t % 32 == 0) and NQ queries, 2 NT NQ accumulators.
template <int NT, int NQ, typename KV>
void ScoreStep(const KV* kt, int64_t head_dim, const float* const* q, float scale, float* scores,
               int64_t stride, int64_t t) {
  __m256 acc[NT][NQ][2];
  for (int i = 0; i < NT; ++i)
    for (int j = 0; j < NQ; ++j) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    Pair k[NT];
    for (int i = 0; i < NT; ++i) k[i] = LoadPair16(kt + (i * head_dim + d) * 16);
    for (int j = 0; j < NQ; ++j) {
      const __m256 b = _mm256_set1_ps(q[j][d]);
      for (int i = 0; i < NT; ++i) {
        acc[i][j][0] = _mm256_fmadd_ps(k[i].a, b, acc[i][j][0]);
        acc[i][j][1] = _mm256_fmadd_ps(k[i].b, b, acc[i][j][1]);
      }
    }
  }
  const __m256 vs = _mm256_set1_ps(scale);
  for (int j = 0; j < NQ; ++j) {
    for (int i = 0; i < NT; ++i) {
      StorePair16<KV>(_mm256_mul_ps(acc[i][j][0], vs), _mm256_mul_ps(acc[i][j][1], vs),
                      scores + j * stride + t + 16 * i);
    }
  }
}

// Scores of NQ queries over positions [begin, end) of [0, count) (begin % 32 == 0), kv head g
// from t0. `prefetch`: a decode task's first sub-tile asks for what comes next.
template <int NQ, typename KV>
void ScoreQueries(const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                  const float* const* q, float scale, float* scores, int64_t stride, int64_t begin,
                  int64_t end, int64_t count, bool prefetch) {
  constexpr int kTilesPerStep = NQ <= 2 ? 2 : 1;
  for (int64_t t = begin; t < end; t += 32) {
    if (prefetch) PrefetchDecodeStep(kv, g, t0, head_dim, t, count);
    if (kTilesPerStep == 2 && t + 16 < end) {
      ScoreStep<2, NQ>(kv.KeysTile(g, t0 + t), head_dim, q, scale, scores, stride, t);
      continue;
    }
    ScoreStep<1, NQ>(kv.KeysTile(g, t0 + t), head_dim, q, scale, scores, stride, t);
    if (t + 16 < end) {
      ScoreStep<1, NQ>(kv.KeysTile(g, t0 + t + 16), head_dim, q, scale, scores, stride, t + 16);
    }
  }
}

template <int NQ, typename KV>
void ScoreQueriesUpTo(int nq, const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                      const float* const* q, float scale, float* scores, int64_t stride,
                      int64_t begin, int64_t end, int64_t count, bool prefetch) {
  if constexpr (NQ > 0) {
    if (nq == NQ) {
      return ScoreQueries<NQ>(kv, g, t0, head_dim, q, scale, scores, stride, begin, end, count,
                              prefetch);
    }
    ScoreQueriesUpTo<NQ - 1>(nq, kv, g, t0, head_dim, q, scale, scores, stride, begin, end, count,
                             prefetch);
  }
}

// Splits nq queries into sub-tiles of equal size (8: 4 + 4, 7: 4 + 3) of at most `cap`.
inline int SubTile(int nq, int cap) {
  const int parts = (nq + cap - 1) / cap;
  return (nq + parts - 1) / parts;
}

// acc_j[0, 16 CH) += sum over u in [begin, end) of p_j[u] * v[(u - begin) * row_stride ..], for
// NV queries, rows of one block (row_stride apart); acc_j in LoadPair16's order. kMasked: the
// last 16-value chunk holds only dims - 16 (CH - 1) values. One plain loop: with the block loop
// around it in the same function GCC 12 stored every accumulator to the stack on every row.
template <int CH, int NV, bool kMasked, typename KV>
void WeightRows(const KV* v, int64_t row_stride, int64_t dims, const float* p, int64_t stride,
                int64_t begin, int64_t end, float* const* acc_mem) {
  __m256 acc[NV][CH][2];
  for (int j = 0; j < NV; ++j) {
    for (int c = 0; c < CH; ++c) {
      acc[j][c][0] = _mm256_loadu_ps(acc_mem[j] + c * 16);
      acc[j][c][1] = _mm256_loadu_ps(acc_mem[j] + c * 16 + 8);
    }
  }
  for (int64_t t = begin; t < end; ++t, v += row_stride) {
    for (int c = 0; c < CH; ++c) {
      Pair x;
      if constexpr (kMasked) {
        x = c == CH - 1 ? LoadPartial16(v + c * 16, dims - c * 16) : LoadPair16(v + c * 16);
      } else {
        x = LoadPair16(v + c * 16);
      }
      for (int j = 0; j < NV; ++j) {
        const __m256 w = _mm256_set1_ps(p[j * stride + t]);
        acc[j][c][0] = _mm256_fmadd_ps(w, x.a, acc[j][c][0]);
        acc[j][c][1] = _mm256_fmadd_ps(w, x.b, acc[j][c][1]);
      }
    }
  }
  for (int j = 0; j < NV; ++j) {
    for (int c = 0; c < CH; ++c) {
      _mm256_storeu_ps(acc_mem[j] + c * 16, acc[j][c][0]);
      _mm256_storeu_ps(acc_mem[j] + c * 16 + 8, acc[j][c][1]);
    }
  }
}

// WeightRows over positions [begin, end) from t0, value elements from `off`, block by block.
template <int CH, int NV, bool kMasked, typename KV>
void WeightValueRange(const KvView<KV>& kv, int64_t t0, int64_t off, int64_t dims, const float* p,
                      int64_t stride, int64_t begin, int64_t end, float* const* acc_mem) {
  for (int64_t t = begin; t < end;) {
    const int64_t stop = std::min(end, kv.BlockEnd(t0 + t) - t0);
    WeightRows<CH, NV, kMasked>(kv.Value(t0 + t, 0) + off, kv.stride(), dims, p, stride, t, stop,
                                acc_mem);
    t = stop;
  }
}

// WeightValueRange for a slice of `dims` (1-32) values and nv (1-2) queries.
template <int NV, typename KV>
void WeightSliceUpTo(int nv, const KvView<KV>& kv, int64_t t0, int64_t off, int64_t dims,
                     const float* p, int64_t stride, int64_t begin, int64_t end,
                     float* const* acc_mem) {
  if constexpr (NV > 0) {
    if (nv != NV) {
      return WeightSliceUpTo<NV - 1>(nv, kv, t0, off, dims, p, stride, begin, end, acc_mem);
    }
    if (dims == 32)
      return WeightValueRange<2, NV, false>(kv, t0, off, dims, p, stride, begin, end, acc_mem);
    if (dims == 16)
      return WeightValueRange<1, NV, false>(kv, t0, off, dims, p, stride, begin, end, acc_mem);
    if (dims > 16)
      return WeightValueRange<2, NV, true>(kv, t0, off, dims, p, stride, begin, end, acc_mem);
    WeightValueRange<1, NV, true>(kv, t0, off, dims, p, stride, begin, end, acc_mem);
  }
}

// The arithmetic of the shared task loops (kernels_attention_tasks.h).
struct Ops {
  template <typename KV>
  static void Score(int nq, const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                    const float* const* q, float scale, float* scores, int64_t stride,
                    int64_t count, bool decode) {
    if (decode) PrefetchDecodeStart(kv, g, t0, head_dim, count);
    const int sub = SubTile(nq, nq <= 2 ? 2 : 4);
    for (int64_t begin = 0; begin < count; begin += kPositionChunk) {
      const int64_t end = std::min(count, begin + kPositionChunk);
      for (int j0 = 0; j0 < nq; j0 += sub) {
        ScoreQueriesUpTo<4>(std::min(sub, nq - j0), kv, g, t0, head_dim, q + j0, scale,
                            scores + j0 * stride, stride, begin, end, count,
                            /*prefetch=*/decode && j0 == 0);
      }
    }
  }

  static float SoftmaxRow(float* s, int64_t count, int64_t padded, float* max_out) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t t = 0;
    for (; t + 8 <= count; t += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + t));
    float most = HorizontalMax(vmax);
    for (; t < count; ++t) most = std::max(most, s[t]);
    if (max_out != nullptr) *max_out = most;
    const __m256 m = _mm256_set1_ps(most);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 sum = _mm256_setzero_ps();
    for (t = 0; t < padded; t += 8) {
      const __m256 live = _mm256_castsi256_ps(
          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(count - t)), lane));
      const __m256 e = _mm256_and_ps(live, Exp(_mm256_sub_ps(_mm256_loadu_ps(s + t), m)));
      sum = _mm256_add_ps(sum, e);
      _mm256_storeu_ps(s + t, e);
    }
    return HorizontalSum(sum);
  }

  template <typename KV>
  static void WeightValues(int nq, const KvView<KV>& kv, int64_t t0, int64_t off, int64_t head_dim,
                           const float* p, int64_t stride, int64_t count, const float* sums,
                           float* const* out) {
    constexpr int kTile = static_cast<int>(kBlockedAttentionQueries);
    alignas(32) float acc[kTile][kMaxSliceDims];
    const int sub = SubTile(nq, 2);
    for (int64_t d0 = 0; d0 < head_dim; d0 += kMaxSliceDims) {
      const int64_t width = std::min(kMaxSliceDims, head_dim - d0);
      const int64_t padded = (width + 15) / 16 * 16;
      for (int j = 0; j < nq; ++j) std::fill(acc[j], acc[j] + padded, 0.0f);
      for (int64_t begin = 0; begin < count; begin += kPositionChunk) {
        const int64_t end = std::min(count, begin + kPositionChunk);
        for (int64_t s0 = 0; s0 < width; s0 += 32) {
          for (int j0 = 0; j0 < nq; j0 += sub) {
            float* acc_mem[2];
            const int nv = std::min(sub, nq - j0);
            for (int j = 0; j < nv; ++j) acc_mem[j] = acc[j0 + j] + s0;
            WeightSliceUpTo<2>(nv, kv, t0, off + d0 + s0, std::min<int64_t>(32, width - s0),
                               p + j0 * stride, stride, begin, end, acc_mem);
          }
        }
      }
      for (int j = 0; j < nq; ++j) {
        const __m256 inv = _mm256_set1_ps(1.0f / sums[j]);
        for (int64_t c = 0; c < width; c += 16) {
          const __m256 a = _mm256_mul_ps(_mm256_load_ps(acc[j] + c), inv);
          const __m256 b = _mm256_mul_ps(_mm256_load_ps(acc[j] + c + 8), inv);
          if (c + 16 <= width) {
            StorePair16<KV>(a, b, out[j] + d0 + c);
          } else {
            float tail[16];
            StorePair16<KV>(a, b, tail);
            std::copy(tail, tail + (width - c), out[j] + d0 + c);
          }
        }
      }
    }
  }
};

}  // namespace

void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  attention_tasks::BlockedAnyKv<Ops>(a, tb, te, scores);
}
void AttentionDecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te,
                          float* scores, float* partials) {
  attention_tasks::DecodeSplitAnyKv<Ops>(a, splits, tb, te, scores, partials);
}

}  // namespace tessera::avx2
