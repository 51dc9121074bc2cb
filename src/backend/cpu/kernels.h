// The CPU kernel table: one set of function pointers per instruction-set family, chosen once
// (cpu_features.h) and called by the CPU backend. Every entry has a plain scalar version in
// kernels_scalar.cc, which is the reference the SIMD versions are tested against.
//
//   const KernelTable* k = KernelsFor(DetectCpuIsa());
//   MatmulArgs a{.w = &packed, .x = &acts, .y = out, .ldy = packed.rows};
//   k->Matmul(packed.format)(a, /*panel_begin=*/0, packed.panels());
//   k->rms_norm(x, weight, n, n_padded, eps, y);
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/packed_matrix.h"
#include "base/half.h"

namespace tessera {

// y[m][n] (+)= sum_k W[n][k] * x[m][k] (+ bias[n]) for the panels [panel_begin, panel_end),
// all rows m of the activation block. Decode rows (one row, or decode_rows: one row per
// sequence of a batched decode step) take the decode arithmetic, whatever their number, so a
// sequence's decode result does not depend on what else is in the batch; prompt rows take the
// prompt GEMM, which loads each weight group once for a tile of rows.
struct MatmulArgs {
  const PackedMatrix* w = nullptr;
  const ActivationBlock* x = nullptr;  // x->rows rows, prepared for w->format
  float* y = nullptr;                  // [x->rows][ldy]; columns [0, w->rows) are written
  int64_t ldy = 0;
  bool accumulate = false;      // y += W x (residual add) instead of y = W x
  const float* bias = nullptr;  // [w->rows] or null
  bool decode_rows = false;     // every row is a decode row (see above); implied by one row
  bool decode() const { return decode_rows || x->rows == 1; }
};
using MatmulFn = void (*)(const MatmulArgs& args, int64_t panel_begin, int64_t panel_end);

// Panels per chunk of a decode matmul's balanced dispatch (the cpu backend's, and the
// benchmarks that copy its dispatch): whole 4-panel tiles of about kDecodeChunkBytes (small
// enough that the threads end close together, large enough that claims cost nothing), or pairs
// when four would be over twice that; never a lone panel, which streams 18 % slower (one
// prefetch stream instead of several). Measurements: docs/backends.md. Batched decode steps use
// the same chunks: shrinking them by the row count measured more time claiming and waiting
// (smollm2-135m, 8 streams: 5.7-7.2 % of samples against 3.8-5.1 %; many_users.md).
inline constexpr size_t kDecodeChunkBytes = 96 << 10;
inline int64_t DecodeMatmulGrain(const PackedMatrix& w) {
  const size_t panel = w.bytes() / static_cast<size_t>(w.panels() > 1 ? w.panels() : 1);
  if (4 * panel > 2 * kDecodeChunkBytes) return 2;
  const int64_t tiles = static_cast<int64_t>(kDecodeChunkBytes / (4 * panel));
  return 4 * (tiles > 1 ? tiles : 1);
}

// Causal attention of `rows` consecutive query tokens over one slot's cached keys/values.
// Query row m sits at position start_pos + m and attends to positions 0..start_pos + m.
// Work is split into tasks (rows * heads); task order pairs early and late rows so that
// contiguous task ranges carry similar work.
struct AttentionArgs {
  const float* q = nullptr;  // [rows][q_stride], head h at h * head_dim (after RoPE)
  int64_t q_stride = 0;
  // Position t's keys / values start t * kv_stride in, kv head g's head_dim values of them
  // g * kv_head_stride further (0: head_dim, the heads side by side in one [kv_dim] row).
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t kv_stride = 0;
  int64_t kv_head_stride = 0;
  int64_t start_pos = 0;
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;    // 1 / sqrt(head_dim)
  float* out = nullptr;  // [rows][out_stride], head h at h * head_dim
  int64_t out_stride = 0;
  // For attention_blocked only: the keys again, transposed in blocks of 16 positions. Kv head
  // g's positions [16b, 16b + 16) sit at keys_t + g * keys_t_head_stride + b * head_dim * 16
  // as [head_dim][16]; positions not yet written may hold anything finite (they are masked).
  const float* keys_t = nullptr;
  int64_t keys_t_head_stride = 0;
  // A bf16 KV cache (BackendOptions::kv_cache): keys, values and keys_t are read from these
  // instead, in the same layouts, each value widened to fp32 (exactly) as it is loaded.
  bool kv_bf16 = false;
  const uint16_t* keys_bf16 = nullptr;
  const uint16_t* values_bf16 = nullptr;
  const uint16_t* keys_t_bf16 = nullptr;
  // A paged cache (the KV block pool, backend.h): position t lives in pool block
  // kv_blocks[t >> kv_block_shift], at row t & (2^kv_block_shift - 1) of it; keys, values and
  // keys_t point at block 0, whose successors are kv_block_stride (keys_t: keys_t_block_stride)
  // elements apart (keys_t_head_stride and kv_head_stride still step from one kv head to the
  // next, wherever the layout puts them). Null: the arrays are contiguous over positions.
  // Blocks hold a multiple of 32 positions, so the 16-position key tiles and the decode splits
  // never straddle two blocks.
  const int32_t* kv_blocks = nullptr;
  int kv_block_shift = 0;
  int64_t kv_block_stride = 0;
  int64_t keys_t_block_stride = 0;
};

// The KV arrays of `a` as element type KV (float, or uint16_t for bf16), for kernels written
// once for both; KvToFloat widens one element.
template <typename KV>
struct KvArrays;
template <>
struct KvArrays<float> {
  static const float* keys(const AttentionArgs& a) { return a.keys; }
  static const float* values(const AttentionArgs& a) { return a.values; }
  static const float* keys_t(const AttentionArgs& a) { return a.keys_t; }
};
template <>
struct KvArrays<uint16_t> {
  static const uint16_t* keys(const AttentionArgs& a) { return a.keys_bf16; }
  static const uint16_t* values(const AttentionArgs& a) { return a.values_bf16; }
  static const uint16_t* keys_t(const AttentionArgs& a) { return a.keys_t_bf16; }
};
// The rows of a (paged or contiguous) cache as element type KV, for kernels written once for
// every layout: a contiguous cache is one block that never ends.
template <typename KV>
class KvView {
 public:
  explicit KvView(const AttentionArgs& a)
      : keys_(KvArrays<KV>::keys(a)),
        values_(KvArrays<KV>::values(a)),
        keys_t_(KvArrays<KV>::keys_t(a)),
        blocks_(a.kv_blocks != nullptr ? a.kv_blocks : kOneBlock),
        shift_(a.kv_blocks != nullptr ? a.kv_block_shift : 62),
        mask_((int64_t{1} << shift_) - 1),
        block_stride_(a.kv_block_stride),
        kt_block_stride_(a.keys_t_block_stride),
        stride_(a.kv_stride),
        head_stride_(a.kv_head_stride != 0 ? a.kv_head_stride : a.head_dim),
        kt_head_stride_(a.keys_t_head_stride),
        head_dim_(a.head_dim) {}
  // Position t's keys / values of kv head g (head_dim values).
  const KV* Key(int64_t t, int64_t g) const { return keys_ + Row(t, stride_) + g * head_stride_; }
  const KV* Value(int64_t t, int64_t g) const {
    return values_ + Row(t, stride_) + g * head_stride_;
  }
  // Kv head g's transposed key tile [head_dim][16] of positions [t, t + 16), t % 16 == 0; the
  // next tile (t + 16) follows it directly when t % 32 == 0.
  // The first position of the block after the one holding position t (contiguous: never).
  int64_t BlockEnd(int64_t t) const { return (t | mask_) + 1; }
  int64_t stride() const { return stride_; }
  int64_t head_stride() const { return head_stride_; }
  const KV* KeysTile(int64_t g, int64_t t) const {
    return keys_t_ + static_cast<int64_t>(blocks_[t >> shift_]) * kt_block_stride_ +
           g * kt_head_stride_ + ((t & mask_) >> 4) * head_dim_ * 16;
  }

 private:
  int64_t Row(int64_t t, int64_t stride) const {
    return static_cast<int64_t>(blocks_[t >> shift_]) * block_stride_ + (t & mask_) * stride;
  }
  static constexpr int32_t kOneBlock[1] = {0};
  const KV* keys_;
  const KV* values_;
  const KV* keys_t_;
  const int32_t* blocks_;
  int shift_;
  int64_t mask_, block_stride_, kt_block_stride_, stride_, head_stride_, kt_head_stride_, head_dim_;
};

inline float KvToFloat(float v) {
  return v;
}
inline float KvToFloat(uint16_t v) {
  return Bf16ToFloat(v);
}
// `scores` is scratch for one task: [start_pos + rows] floats.
using AttentionFn = void (*)(const AttentionArgs& args, int64_t task_begin, int64_t task_end,
                             float* scores);

// Blocked attention (prefill): one task is one kv head and a block of up to
// kAttentionBlockRows query rows, with all the query heads that share that kv head, so every
// key and value loaded feeds many queries. Its scratch is kBlockedAttentionQueries *
// BlockedAttentionScoreStride(positions) floats per task.
constexpr int64_t kAttentionBlockRows = 16;
constexpr int64_t kBlockedAttentionQueries = 8;
inline int64_t BlockedAttentionTasks(const AttentionArgs& a) {
  return a.kv_heads * ((a.rows + kAttentionBlockRows - 1) / kAttentionBlockRows);
}
inline int64_t BlockedAttentionScoreStride(int64_t positions) {
  return (positions + 31) / 32 * 32;
}

// Decode attention (one query row) split over positions, so that a model with few kv heads
// still spreads a step's attention over every thread: task = (kv head g, split s), g =
// task % kv_heads, covering positions [s * span, min((s + 1) * span, count)) with span =
// DecodeSplitSpan(count, splits). Each task writes, for every query head h of its group, a
// partial [max score, softmax sum relative to that max, unnormalized output (head_dim)] at
// partials + (h * splits + s) * DecodeSplitPartialSize(head_dim); MergeDecodeSplits combines
// them into a.out. Scratch per task as for attention_blocked.
using AttentionSplitFn = void (*)(const AttentionArgs& args, int64_t splits, int64_t task_begin,
                                  int64_t task_end, float* scores, float* partials);
inline int64_t DecodeSplitSpan(int64_t count, int64_t splits) {
  return ((count + splits - 1) / splits + 31) / 32 * 32;
}
inline int64_t DecodeSplitPartialSize(int64_t head_dim) {
  return 2 + head_dim;
}
// out_h = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s with M = max_s m_s, for every head
// (empty splits, whose max is -inf, drop out). Scalar: heads x splits x head_dim work per step.
void MergeDecodeSplits(const AttentionArgs& a, int64_t splits, const float* partials);

// Maps a task index to (row, head) so that consecutive tasks alternate early and late rows.
inline void AttentionTask(const AttentionArgs& a, int64_t task, int64_t* row, int64_t* head) {
  int64_t pair = task / a.heads;
  *head = task % a.heads;
  *row = (pair % 2 == 0) ? pair / 2 : a.rows - 1 - pair / 2;
}

// Asks for the cache line `ahead` bytes past p (for reading, into L1). The address is formed
// as an integer because it may lie past the end of the array: a prefetch never faults, but
// pointer arithmetic past the end would be undefined behaviour.
inline void PrefetchAhead(const void* p, int64_t ahead) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead)),
      0, 3);
}
// The same, into L2 only (prefetcht1): for streams read far ahead of their use.
inline void PrefetchAheadToL2(const void* p, int64_t ahead) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead)),
      0, 2);
}
// The same, non-temporal (prefetchnta): on AMD the line is not installed in L2 or L3 when it
// leaves L1 (Int8KernelT in kernels_avx512.cc).
inline void PrefetchAheadNonTemporal(const void* p, int64_t ahead) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead)),
      0, 0);
}

// What the INT8 matmul reads as ActivationBlock::q8u: q + 128 (the unsigned operand of
// vpdpbusd, whose accumulators start at -128 * the row sum) or |q| (vpmaddubsw's unsigned
// operand, with q's sign moved onto the weights).
enum class Int8UnsignedActivations { kPlus128, kAbsolute };

struct KernelTable {
  CpuIsa isa = CpuIsa::kScalar;
  Int8UnsignedActivations int8_unsigned = Int8UnsignedActivations::kPlus128;
  MatmulFn matmul_f32 = nullptr;
  MatmulFn matmul_bf16 = nullptr;
  // matmul_bf16 widens bf16 weights to fp32 and multiplies fp32 activations (exact
  // products) for every row count. matmul_bf16_dot is the AVX-512 alternative for prefill:
  // activations rounded to bf16 (x->bf16, filled by the caller with to_bf16) and vdpbf16ps.
  // Less exact, and on a Xeon of earlier sessions slower (43.7 vs 68.7 GFLOP/s, 576x1536,
  // 128 rows, one thread), so the backend uses it only when asked (bf16_activations). Null
  // unless the CPU has AVX512_BF16 (CpuTraits::avx512_bf16), on every family.
  MatmulFn matmul_bf16_dot = nullptr;
  MatmulFn matmul_int8 = nullptr;
  MatmulFn matmul_int4 = nullptr;
  AttentionFn attention = nullptr;
  // Same result as `attention` (within fp32 rounding) over BlockedAttentionTasks tasks, reading
  // keys_t; the AVX2 and AVX-512 families (null on scalar), for head_dim <= 256.
  AttentionFn attention_blocked = nullptr;
  // Decode attention split over positions (see AttentionSplitFn); with attention_blocked.
  AttentionSplitFn attention_decode_split = nullptr;
  // Activation preparation. n is a multiple of 32; q/bf16 outputs hold n values.
  void (*to_bf16)(const float* x, int64_t n, uint16_t* out) = nullptr;  // round to nearest even
  // scale = max|x| / 127 (1 when x is all zero), q = nearbyint(x * 127 / max|x|),
  // block_sums[b] = sum of q over inputs [32b, 32b + 32).
  void (*quantize_row)(const float* x, int64_t n, int8_t* q, float* scale,
                       int32_t* block_sums) = nullptr;
  // Weight quantization at load (any n): q[i] = clamp(round-half-away(x[i] / d), lo, hi)
  // with NaN -> 0, for d != 0 and -127 <= lo <= hi <= 127. Identical on every ISA and to
  // std::round per element (the reference packer's definition).
  void (*quantize_weights)(const float* x, int64_t n, float d, float lo, float hi,
                           int8_t* q) = nullptr;
  // y = x / sqrt(mean(x^2) + eps) * w over n values; y[n..n_padded) = 0. y may equal x.
  void (*rms_norm)(const float* x, const float* w, int64_t n, int64_t n_padded, float eps,
                   float* y) = nullptr;
  // rotate_half RoPE in place on the first rotary_dim (even) values of `heads` head vectors
  // head_stride apart; cos/sin hold rotary_dim / 2 values for this position.
  void (*rope)(float* x, int64_t heads, int64_t head_stride, int64_t rotary_dim, const float* cos,
               const float* sin) = nullptr;
  // out[i] = silu(gate[i]) * up[i]; out may equal gate.
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  // out[i] = gelu_tanh(gate[i]) * up[i] (GELU, tanh approximation); out may equal gate.
  void (*geglu)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  // One token of Gated DeltaNet for one value head, or a block of its value columns
  // (kernels_deltanet.h): state [dk][dv] (rows ld apart) <- decay * state + k (beta (v -
  // (decay * state)^T k))^T; out[dv] = state^T q. dv <= kMaxDeltaNetValueDim.
  void (*deltanet_step)(float* state, int64_t ld, const float* q, const float* k, const float* v,
                        float beta, float decay, int64_t dk, int64_t dv, float* out) = nullptr;

  // Panels the matmul kernels tile together for prompt rows: a balanced dispatch hands out
  // chunks of this many panels, so no chunk ends in a narrower tile.
  int64_t prompt_panels = 1;

  MatmulFn Matmul(WeightFormat f) const {
    switch (f) {
      case WeightFormat::kBF16:
        return matmul_bf16;
      case WeightFormat::kInt8:
        return matmul_int8;
      case WeightFormat::kInt4:
        return matmul_int4;
      default:
        return matmul_f32;
    }
  }
};

// The table for a family, or null if this build or this CPU cannot run it.
const KernelTable* KernelsFor(CpuIsa isa);

// Work that writes row r of x just before it is quantized: fn(ctx, r). Run in the same
// dispatch as the quantization (a norm or an activation feeding a matmul), it saves one pool
// dispatch per matmul.
struct RowPrologue {
  void (*fn)(void* ctx, int64_t row) = nullptr;
  void* ctx = nullptr;
};

// Fills the activation block for `format` from rows of x ([rows][stride], zero padded):
// int8 quantization for INT8/INT4, nothing more for F32/BF16. The block keeps
// a pointer to x, which must outlive the matmuls that read it. Rows are prepared on `pool`
// when one is given (it must not be running a job already), each after `prologue` wrote it.
void PrepareActivations(const KernelTable& k, const float* x, int64_t rows, int64_t stride,
                        WeightFormat format, ActivationBlock* acts, ThreadPool* pool = nullptr,
                        RowPrologue prologue = {});

// Per-family tables (defined in kernels_<family>.cc).
const KernelTable& ScalarKernels();
const KernelTable& Avx2Kernels();
const KernelTable& Avx2VnniKernels();  // Avx2Kernels with AVX-VNNI INT8 / INT4 matmuls
const KernelTable& Avx512Kernels();
// Avx512Kernels with INT8 prompt matmuls on AMX tiles (kernels_amx.cc).
const KernelTable& Avx512AmxKernels();
// The AVX-512 vdpbf16ps matmul (kernels_avx512bf16.cc): call it only where the CPU has
// AVX512_BF16; the AVX-512 tables hold it as matmul_bf16_dot exactly then.
MatmulFn Avx512Bf16DotMatmul();
// The AVX-512 matmul of `format` (BF16, INT4, INT8; F32 has one) with the far prefetch of
// decode tiles that `far` gives it; the table holds CpuDecodeFarPrefetch()'s, tests compare
// all of them.
MatmulFn Avx512Matmul(WeightFormat format, DecodeFarPrefetch far);

}  // namespace tessera
