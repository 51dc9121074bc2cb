// The task loops of the blocked (prefill) and decode-split attention kernels, written once for
// every SIMD family (kernels_avx512_attention.cc, kernels_avx2_attention.cc): which kv head,
// rows and positions a task covers, and which queries go together into a tile. The arithmetic
// comes from the family's Ops:
//
//   struct Ops {
//     // scores[j * stride + u] = scale * q[j] . key(t0 + u), u in [0, count), for nq <= 8
//     // queries of kv head g; `decode`: one query row reading a cold cache (prefetch).
//     template <typename KV> static void Score(int nq, const KvView<KV>& kv, int64_t g,
//         int64_t t0, int64_t head_dim, const float* const* q, float scale, float* scores,
//         int64_t stride, int64_t count, bool decode);
//     // Softmax numerators of s[0, count), zeros on [count, padded); returns their sum and
//     // (max_out) the max they are relative to.
//     static float SoftmaxRow(float* s, int64_t count, int64_t padded, float* max_out);
//     // out[j][i] = sum_u p[j * stride + u] value(t0 + u)[off + i] / sums[j].
//     template <typename KV> static void WeightValues(int nq, const KvView<KV>& kv, int64_t t0,
//         int64_t off, int64_t head_dim, const float* p, int64_t stride, int64_t count,
//         const float* sums, float* const* out);
//   };
//   void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
//     attention_tasks::BlockedAnyKv<Ops>(a, tb, te, scores);
//   }
//
// Included only by the ISA-specific files; everything here has internal linkage (an unnamed
// namespace), so each file keeps its own copy built with its own flags (isa_symbols_test.sh).
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernels.h"

namespace tessera::attention_tasks {
namespace {

// Asks for every cache line of [p, p + bytes) (into L1).
inline void PrefetchSpan(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// Decode reads a kv head's cached keys and values once, cold: the weights streamed since the
// previous step have pushed them out of every cache. Each score step (about a thousand
// instructions per 32 positions) would otherwise leave the out-of-order window only a line or
// so ahead of its loads, so this asks for the next step's key tiles and this step's value rows
// (read after the softmax) before it: kv head g, score positions [t, t + 32) of [0, count).
// Measured per decode step, alternating with and without inside one process (INT8, bf16
// cache, 32-96 positions): the attention phase of smollm2-135m 2-18 % shorter at 1, 4 and 8
// rows, of qwen2.5-0.5b 3-15 % (bench/results/many_users.md, session 21; AVX-512).
template <typename KV>
void PrefetchDecodeStep(const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim, int64_t t,
                        int64_t count) {
  const int64_t tile_bytes = head_dim * 16 * static_cast<int64_t>(sizeof(KV));
  for (int64_t u = t + 32; u < t + 64 && u < count; u += 16) {
    PrefetchSpan(kv.KeysTile(g, t0 + u), tile_bytes);
  }
  const int64_t row_bytes = head_dim * static_cast<int64_t>(sizeof(KV));
  for (int64_t u = t; u < t + 32 && u < count; ++u) {
    PrefetchSpan(kv.Value(t0 + u, g), row_bytes);
  }
}
// The first two key tiles of a decode task, before its first PrefetchDecodeStep.
template <typename KV>
void PrefetchDecodeStart(const KvView<KV>& kv, int64_t g, int64_t t0, int64_t head_dim,
                         int64_t count) {
  const int64_t tile_bytes = head_dim * 16 * static_cast<int64_t>(sizeof(KV));
  for (int64_t u = 0; u < 32 && u < count; u += 16)
    PrefetchSpan(kv.KeysTile(g, t0 + u), tile_bytes);
}

// A task takes one kv head and up to 16 query rows, i.e. rows x group queries, in tiles of 8
// queries (ordered by row, so a tile's last query sees the most keys): scores, softmax per
// query over its own causal range (later lanes zero), values weighted by them.
template <class Ops, typename KV>
void Blocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t blocks = (a.rows + kAttentionBlockRows - 1) / kAttentionBlockRows;
  const int64_t stride = BlockedAttentionScoreStride(a.start_pos + a.rows);
  constexpr int kTile = static_cast<int>(kBlockedAttentionQueries);
  const KvView<KV> kv(a);
  for (int64_t task = tb; task < te; ++task) {
    const int64_t g = task % a.kv_heads, pair = task / a.kv_heads;
    const int64_t block = pair % 2 == 0 ? pair / 2 : blocks - 1 - pair / 2;
    const int64_t r0 = block * kAttentionBlockRows;
    const int64_t queries = std::min(kAttentionBlockRows, a.rows - r0) * group;
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
      Ops::Score(nq, kv, g, 0, a.head_dim, q, a.scale, scores, stride, most,
                 /*decode=*/a.rows == 1);
      float sums[kTile];
      const int64_t padded = (most + 15) / 16 * 16;
      for (int j = 0; j < nq; ++j) {
        sums[j] = Ops::SoftmaxRow(scores + j * stride, count[j], padded, nullptr);
      }
      Ops::WeightValues(nq, kv, 0, g * kv.head_stride(), a.head_dim, scores, stride, most, sums,
                        out);
    }
  }
}

// One query row, positions split (see AttentionSplitFn). Same steps as Blocked on the split's
// positions, with the values left unnormalized (sums of 1) for the merge.
template <class Ops, typename KV>
void DecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te, float* scores,
                 float* partials) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t count = a.start_pos + 1;
  const int64_t span = DecodeSplitSpan(count, splits);
  const int64_t stride = BlockedAttentionScoreStride(span);
  const int64_t size = DecodeSplitPartialSize(a.head_dim);
  constexpr int kTile = static_cast<int>(kBlockedAttentionQueries);
  const float ones[kTile] = {1, 1, 1, 1, 1, 1, 1, 1};
  const KvView<KV> kv(a);
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
      Ops::Score(nq, kv, g, t0, a.head_dim, q, a.scale, scores, stride, n, /*decode=*/true);
      const int64_t padded = (n + 15) / 16 * 16;
      float* values_out[kTile];
      for (int j = 0; j < nq; ++j) {
        out[j][1] = Ops::SoftmaxRow(scores + j * stride, n, padded, &out[j][0]);
        values_out[j] = out[j] + 2;
      }
      Ops::WeightValues(nq, kv, t0, g * kv.head_stride(), a.head_dim, scores, stride, n, ones,
                        values_out);
    }
  }
}

// The kernel-table entry points (AttentionFn, AttentionSplitFn) over either cache precision.
template <class Ops>
void BlockedAnyKv(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  if (a.kv_bf16) return Blocked<Ops, uint16_t>(a, tb, te, scores);
  Blocked<Ops, float>(a, tb, te, scores);
}
template <class Ops>
void DecodeSplitAnyKv(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te, float* scores,
                      float* partials) {
  if (a.kv_bf16) return DecodeSplit<Ops, uint16_t>(a, splits, tb, te, scores, partials);
  DecodeSplit<Ops, float>(a, splits, tb, te, scores, partials);
}

}  // namespace
}  // namespace tessera::attention_tasks
