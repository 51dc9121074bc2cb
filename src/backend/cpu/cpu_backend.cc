#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_deltanet.h"
#include "backend/cpu/cpu_weights.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_deltanet.h"
#include "backend/cpu/kv_store.h"
#include "backend/kv_block_table.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "model/kv_cache.h"
#include "model/recurrent_state.h"
#include "model/rope.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

// Prompt tokens processed together: each packed weight is read from memory once per block.
constexpr int64_t kMaxBlockRows = 128;
// Recurrent snapshots kept per slot (see RecurrentState).
constexpr int kStateSnapshots = 2;

class CpuBackend final : public Backend {
 private:
  // A prompt block's sequences: each runs rows [r0, r0 + rows) at positions pos.. of slot.
  struct PromptSegment {
    int slot = 0;
    int64_t pos = 0;
    int64_t rows = 0;
    int64_t r0 = 0;
  };

 public:
  CpuBackend(const BackendOptions& options, const KernelTable* kernels)
      : options_(options),
        k_(*kernels),
        pool_(options.threads > 0
                  ? options.threads
                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

  std::string name() const override {
    return "cpu-" + std::string(CpuIsaName(k_.isa)) + "-" + std::string(WeightFormatName(format_)) +
           (options_.bf16_activations ? "-bf16acts" : "");
  }

  Status LoadLayers(const Checkpoint& ckpt, LayerRange range, const KvCacheConfig& kv) override {
    TS_RETURN_IF_ERROR(SetModel(ckpt));
    if (range.begin < 0 || range.end > spec_.layers || range.begin >= range.end) {
      return InvalidArgument("layer range [" + std::to_string(range.begin) + ", " +
                             std::to_string(range.end) + ") is not inside the model's " +
                             std::to_string(spec_.layers) + " layers");
    }
    if (kv.max_seq <= 0 || kv.max_slots <= 0) return InvalidArgument("cpu backend: empty KV cache");
    if (spec_.kv_heads <= 0 || spec_.heads % spec_.kv_heads != 0 || spec_.head_dim % 2 != 0) {
      return Unsupported("cpu backend: heads must be a multiple of kv_heads and head_dim even");
    }
    range_ = range;
    TS_ASSIGN_OR_RETURN(format_, ResolveCpuWeightFormat(ckpt, options_.weights));
    TS_RETURN_IF_ERROR(CheckBf16Activations());
    // Layers are independent: each pool thread packs (widens, quantizes) its own share.
    layers_.clear();
    layers_.resize(static_cast<size_t>(range.size()));
    std::vector<Status> loaded(static_cast<size_t>(range.size()));
    pool_.ParallelFor(range.size(), [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        auto layer = LoadCpuLayerWeights(ckpt, range.begin + i, format_);
        if (layer) {
          layers_[static_cast<size_t>(i)] = std::move(*layer);
        } else {
          loaded[static_cast<size_t>(i)] = layer.status();
        }
      }
    });
    for (const Status& st : loaded) TS_RETURN_IF_ERROR(st);
    // Attention layers index the KV cache, DeltaNet layers the recurrent state.
    // Sliding layers index a ring of their own (see PositionAndCacheRow).
    int64_t attention_layers = 0, sliding_layers = 0, recurrent_layers = 0, window = 0;
    cache_index_.clear();
    for (const CpuLayerWeights& L : layers_) {
      if (L.spec.kind == LayerKind::kSlidingAttention) {
        if (window != 0 && L.spec.window != window) {
          return Unsupported("cpu backend: sliding layers of different windows");
        }
        window = L.spec.window;
      }
      cache_index_.push_back(L.spec.kind == LayerKind::kAttention          ? attention_layers++
                             : L.spec.kind == LayerKind::kSlidingAttention ? sliding_layers++
                                                                           : recurrent_layers++);
    }
    slots_ = kv.max_slots;
    slot_seen_.assign(static_cast<size_t>(slots_), 0);
    attention_layers_ = attention_layers;
    ring_cap_ = 0;
    if (sliding_layers > 0) {
      // A window of W positions and a block of up to kMaxBlockRows new ones fit in W + block
      // entries; each position is written twice (p % cap and p % cap + cap) so that every
      // window is one contiguous run for the attention kernel. A context that fits anyway
      // keeps the plain layout.
      const int64_t cap = window + kMaxBlockRows;
      if (2 * cap < kv.max_seq) ring_cap_ = cap;
      TS_RETURN_IF_ERROR(window_kv_.Allocate(
          kv_bf16(), KvStore::Layout::kInterleaved, kv.max_slots, sliding_layers,
          ring_cap_ > 0 ? 2 * ring_cap_ : kv.max_seq, spec_.kv_dim, spec_.head_dim));
    }
    keys_t_.Resize(0);
    keys_t16_.Resize(0);
    kv_tables_.Init(kv);
    if (kv.pool_blocks() > INT32_MAX) return InvalidArgument("cpu backend: too many KV blocks");
    if (attention_layers > 0) {
      // The block pool of the full-attention layers, one head-major store whose positions are
      // the pool's blocks end to end (PoolPosition): [layer][kv head][block][kKvBlockTokens]
      // [head_dim]. A sequence whose blocks were taken in order (a prompt's) reads each kv
      // head's keys and values as one run per layer.
      // With the blocked attention kernel the keys are kept only transposed (keys_t_, in the
      // same order: KeysTOffset), which is all that kernel reads: a third less pool memory than
      // keeping the row-major copy the per-head kernel needs besides.
      pool_blocks_ = kv.pool_blocks();
      const bool blocked = k_.attention_blocked != nullptr && spec_.head_dim <= 256;
      TS_RETURN_IF_ERROR(kv_.Allocate(kv_bf16(), KvStore::Layout::kHeadMajor, 1, attention_layers,
                                      pool_blocks_ * kKvBlockTokens, spec_.kv_dim, spec_.head_dim,
                                      /*with_keys=*/!blocked));
      if (blocked) {
        const size_t n = static_cast<size_t>(pool_blocks_ * attention_layers * spec_.kv_heads *
                                             kKvBlockTokens * spec_.head_dim);
        if (kv_bf16()) {
          keys_t16_.Resize(n);
        } else {
          keys_t_.Resize(n);
        }
        if (keys_t_.size() + keys_t16_.size() == 0)
          return ResourceExhausted("cpu backend: cannot allocate the key cache");
      }
    }
    if (recurrent_layers > 0) {
      const DeltaNetSpec& n = *spec_.deltanet;
      if (n.value_dim > kMaxDeltaNetValueDim || n.conv_kernel > 64) {
        return Unsupported("cpu backend: DeltaNet value heads over " +
                           std::to_string(kMaxDeltaNetValueDim) + " or a conv kernel over 64");
      }
      TS_RETURN_IF_ERROR(state_.Allocate(kv.max_slots, recurrent_layers,
                                         n.conv_state_floats() + n.matrix_state_floats(),
                                         kStateSnapshots, kv.kept_states));
    }
    ropes_.clear();
    for (const RopeSpec& r : spec_.ropes) ropes_.push_back(RopeTable::Build(r, kv.max_seq));
    max_seq_ = kv.max_seq;
    TS_RETURN_IF_ERROR(AllocateScratch());
    return Status::Ok();
  }

  Status LoadHead(const Checkpoint& ckpt) override {
    TS_RETURN_IF_ERROR(SetModel(ckpt));
    TS_ASSIGN_OR_RETURN(head_format_, ResolveCpuWeightFormat(ckpt, options_.weights));
    if (layers_.empty()) format_ = head_format_;
    TS_RETURN_IF_ERROR(CheckBf16Activations());
    TS_RETURN_IF_ERROR(WidenToF32(ckpt.tensors.final_norm, &final_norm_));
    // The head is one large matrix: its panels are packed on the pool.
    TS_ASSIGN_OR_RETURN(lm_head_, LoadCpuHeadMatrix(ckpt, head_format_, &pool_));
    TS_RETURN_IF_ERROR(AllocateScratch());
    return Status::Ok();
  }

  Status ForwardLayers(const ForwardBatch& batch, std::span<float> hidden) override {
    if (layers_.empty()) return Internal("cpu backend: no layers loaded");
    if (hidden.size() != static_cast<size_t>(batch.total_tokens() * spec_.hidden)) {
      return Internal("cpu backend: hidden buffer does not match the batch");
    }
    TS_RETURN_IF_ERROR(CheckBatch(batch));
    for (const SequenceChunk& c : batch.chunks)
      TS_RETURN_IF_ERROR(state_.Prepare(c.slot, c.start_pos));
    // The one-token chunks lead the batch (CheckBatch): their rows go through each layer
    // together, so every weight streams once for all of them (one small GEMM per matrix).
    size_t first_prompt = 0;
    while (first_prompt < batch.chunks.size() && batch.chunks[first_prompt].n_tokens == 1)
      ++first_prompt;
    float* rows = hidden.data();
    for (size_t c0 = 0; c0 < first_prompt; c0 += kMaxBlockRows) {
      const size_t n = std::min<size_t>(kMaxBlockRows, first_prompt - c0);
      for (size_t r = 0; r < n; ++r) {
        row_slot_[r] = batch.chunks[c0 + r].slot;
        row_pos_[r] = batch.chunks[c0 + r].start_pos;
        row_blocks_[r] = chunk_blocks_[c0 + r];
      }
      RunBlock(static_cast<int64_t>(n), /*decode=*/true, rows);
      rows += static_cast<int64_t>(n) * spec_.hidden;
    }
    for (size_t ci = first_prompt; ci < batch.chunks.size();) {
      const SequenceChunk& c = batch.chunks[ci];
      if (c.n_tokens > kMaxBlockRows) {
        // Blocks in order: a block's keys are cached before the next block attends to them.
        // No lone last row (NextPromptRows): whether the last row of a prompt were alone would
        // depend on where its chunk started (a prefix-cache hit).
        for (int64_t done = 0; done < c.n_tokens;) {
          const int64_t n = NextPromptRows(c.n_tokens - done, kMaxBlockRows);
          segments_.assign(1, {c.slot, c.start_pos + done, n, 0});
          FillSegmentRows(ci, segments_[0]);
          RunBlock(n, /*decode=*/false, rows + done * spec_.hidden);
          done += n;
        }
        rows += c.n_tokens * spec_.hidden;
        ++ci;
        continue;
      }
      // Short prompts of several sequences share one block: every weight streams once for all
      // of them, while each keeps its own positions, so its rows see exactly what they would
      // alone (a row's arithmetic does not depend on the other rows of its block).
      segments_.clear();
      int64_t n = 0;
      for (; ci < batch.chunks.size() && n + batch.chunks[ci].n_tokens <= kMaxBlockRows; ++ci) {
        const SequenceChunk& p = batch.chunks[ci];
        segments_.push_back({p.slot, p.start_pos, p.n_tokens, n});
        FillSegmentRows(ci, segments_.back());
        n += p.n_tokens;
      }
      RunBlock(n, /*decode=*/false, rows);
      rows += n * spec_.hidden;
    }
    for (const SequenceChunk& c : batch.chunks) {
      state_.Finish(c.slot, c.start_pos + c.n_tokens, c.n_tokens > 1);  // snapshot a prompt chunk
    }
    return Status::Ok();
  }

  Status ComputeLogits(std::span<const float> hidden, int64_t n_rows, std::span<float> logits,
                       LogitRows kind) override {
    if (lm_head_.rows == 0) return Internal("cpu backend: LM head not loaded");
    if (n_rows < 0 || hidden.size() != static_cast<size_t>(n_rows * spec_.hidden) ||
        logits.size() != static_cast<size_t>(n_rows * spec_.vocab)) {
      return Internal("cpu backend: logits buffers do not match n_rows");
    }
    for (int64_t done = 0; done < n_rows;) {
      int64_t n = std::min(kMaxBlockRows, n_rows - done);
      NormRows(hidden.data() + done * spec_.hidden, final_norm_, n);
      Matmul(lm_head_, xn_.data(), n, hidden_stride_, logits.data() + done * spec_.vocab,
             spec_.vocab, false, nullptr, kind == LogitRows::kOnePerSequence);
      done += n;
    }
    return Status::Ok();
  }

  Status FinalNorm(std::span<const float> hidden, int64_t n_rows, std::span<float> out) override {
    if (lm_head_.rows == 0) return Internal("cpu backend: LM head not loaded");
    if (n_rows < 0 || hidden.size() != static_cast<size_t>(n_rows * spec_.hidden) ||
        out.size() != hidden.size()) {
      return Internal("cpu backend: final-norm buffers do not match n_rows");
    }
    const size_t width = static_cast<size_t>(spec_.hidden);
    for (int64_t done = 0; done < n_rows;) {
      const int64_t n = std::min(kMaxBlockRows, n_rows - done);
      NormRows(hidden.data() + done * spec_.hidden, final_norm_, n);
      for (int64_t r = 0; r < n; ++r) {
        std::copy_n(xn_.data() + r * hidden_stride_, width,
                    out.data() + static_cast<size_t>(done + r) * width);
      }
      done += n;
    }
    return Status::Ok();
  }

  int64_t ResumablePosition(int slot, int64_t wanted) const override {
    return state_.Resumable(slot, wanted);
  }

  Status CopySlotState(int from, int to, int64_t positions, int64_t source_positions) override {
    if (from < 0 || from >= slots_ || to < 0 || to >= slots_ || from == to || positions < 0 ||
        positions > source_positions || source_positions > max_seq_) {
      return InvalidArgument("cpu backend: bad sequence copy");
    }
    // A sliding ring holds the source's last window + 128 positions: it still holds the
    // window before `positions` only when the source is at most 128 past it.
    if (ring_cap_ > 0 && source_positions - positions > kMaxBlockRows) {
      return Unsupported("cpu backend: the sliding window has moved past the prefix");
    }
    TS_RETURN_IF_ERROR(state_.CopyTo(from, to, positions));
    if (window_kv_.slots() > 0) {
      if (ring_cap_ > 0) {
        window_kv_.CopyPositions(from, to, 0, 2 * ring_cap_);  // the whole ring
      } else {
        window_kv_.CopyPositions(from, to, 0, positions);
      }
    }
    return Status::Ok();
  }

  Status KeepSlotState(int slot, int64_t positions, int entry) override {
    return state_.Keep(slot, positions, entry);
  }
  Status RestoreSlotState(int entry, int slot, int64_t positions) override {
    return state_.Restore(entry, slot, positions);
  }

  Status CopyKvBlock(int32_t from, int32_t to, int64_t positions) override {
    TS_RETURN_IF_ERROR(kv_tables_.CheckBlockCopy(from, to, positions));
    if (kv_.slots() == 0 || from == to || positions == 0) return Status::Ok();
    kv_.CopyPositions(0, PoolPosition(from, 0), 0, PoolPosition(to, 0), positions);
    if (UseBlockedAttention()) {
      // Whole tiles of 16 transposed positions (those past `positions` are finite leftovers,
      // masked by the kernel).
      const int64_t elements = RoundUp(positions, 16) * spec_.head_dim;
      for (int64_t l = 0; l < attention_layers_; ++l) {
        for (int64_t g = 0; g < spec_.kv_heads; ++g) {
          const size_t a = KeysTOffset(from, l, g);
          const size_t b = KeysTOffset(to, l, g);
          if (kv_bf16()) {
            std::copy_n(keys_t16_.data() + a, elements, keys_t16_.data() + b);
          } else {
            std::copy_n(keys_t_.data() + a, elements, keys_t_.data() + b);
          }
        }
      }
    }
    return Status::Ok();
  }

  // A packed head's rows, dequantized (packed_matrix.h): a tied embedding stored only once.
  bool CanEmbedFromHead() const override { return lm_head_.rows > 0; }
  Status EmbedFromHead(std::span<const int32_t> tokens, std::span<float> hidden) override {
    return DequantizeRows(lm_head_, tokens, hidden);
  }

  size_t resident_weight_bytes() const override {
    size_t n = lm_head_.bytes() + final_norm_.size() * 4;
    for (const CpuLayerWeights& L : layers_) {
      n += L.qkv.bytes() + L.o_proj.bytes() + L.gate_up.bytes() + L.down_proj.bytes();
      for (const auto* v :
           {&L.input_norm, &L.qkv_bias, &L.o_bias, &L.q_norm, &L.k_norm, &L.attn_out_norm,
            &L.conv1d, &L.dt_bias, &L.a_log, &L.delta_norm, &L.post_attn_norm, &L.mlp_out_norm}) {
        n += v->size() * 4;
      }
    }
    return n;
  }

 private:
  Status SetModel(const Checkpoint& ckpt) {
    if (options_.cpu_isa && *options_.cpu_isa != k_.isa) {
      return Unsupported(CpuIsaUnavailableMessage(*options_.cpu_isa));
    }
    spec_ = ckpt.tensors.spec;
    eps_ = static_cast<float>(spec_.eps);
    hidden_stride_ = RoundUp(spec_.hidden, kColAlign);
    q_stride_ = RoundUp(
        spec_.deltanet ? std::max(spec_.q_dim, spec_.deltanet->v_width()) : spec_.q_dim, kColAlign);
    qkv_width_ = spec_.q_proj_rows() + 2 * spec_.kv_dim;
    if (spec_.deltanet) {
      const DeltaNetSpec& n = *spec_.deltanet;
      qkv_width_ = std::max(qkv_width_, n.conv_width() + n.v_width() + 2 * n.value_heads);
      ones_.assign(static_cast<size_t>(n.conv_width()), 1.0f);
    }
    inter_stride_ = RoundUp(spec_.intermediate, kColAlign);
    return Status::Ok();
  }

  // BackendOptions::bf16_activations is decided at load: it needs BF16 weights and the
  // vdpbf16ps kernel, and is refused otherwise (no silent fallback to the exact path).
  Status CheckBf16Activations() const {
    if (!options_.bf16_activations) return Status::Ok();
    if (format_ != WeightFormat::kBF16) {
      return InvalidArgument("bf16 activations apply to bf16 weights, not " +
                             std::string(WeightFormatName(format_)));
    }
    if (k_.matmul_bf16_dot == nullptr) {
      // Two causes, two remedies: the CPU lacks the instruction, or --cpu-isa chose kernels
      // without the matmul on a CPU that has it.
      const std::string missing =
          ProbedCpuTraits().avx512_bf16
              ? "the cpu backend runs " + std::string(CpuIsaName(k_.isa)) +
                    " kernels here, which have none (use --cpu-isa avx512 or leave it out)"
              : "this CPU lacks AVX512_BF16 (it runs " + SupportedCpuIsaNames() +
                    "); run without --bf16-activations";
      return Unsupported(
          "bf16 activations need the AVX-512 vdpbf16ps matmul (CPU feature "
          "AVX512_BF16); " +
          missing);
    }
    return Status::Ok();
  }

  // Scratch for one block of rows, sized for whatever has been loaded so far.
  Status AllocateScratch() {
    const size_t b = static_cast<size_t>(kMaxBlockRows);
    const int64_t widest = std::max({hidden_stride_, q_stride_, inter_stride_});
    xn_.Resize(b * static_cast<size_t>(hidden_stride_));
    qkv_.Resize(b * static_cast<size_t>(qkv_width_));
    attn_.Resize(b * static_cast<size_t>(q_stride_));
    gates_.Resize(b * static_cast<size_t>(spec_.output_gate ? spec_.q_dim : 1));
    branch_.Resize(b * static_cast<size_t>(spec_.hidden));
    conv_.Resize(b * static_cast<size_t>(spec_.deltanet ? spec_.deltanet->conv_width() : 1));
    gate_up_.Resize(b * static_cast<size_t>(2 * spec_.intermediate));
    act_.Resize(b * static_cast<size_t>(inter_stride_));
    acts_.Reserve(kMaxBlockRows, widest);
    scores_per_thread_ =
        k_.attention_blocked
            ? kBlockedAttentionQueries * BlockedAttentionScoreStride(std::max<int64_t>(max_seq_, 1))
            : std::max<int64_t>(max_seq_, 1);
    scores_.Resize(static_cast<size_t>(pool_.size() * scores_per_thread_));
    // One region per decode row of a block (AttendDecodeRows).
    split_partials_.Resize(
        static_cast<size_t>(std::min<int64_t>(std::max(slots_, 1), kMaxBlockRows)) *
        SplitPartialFloatsPerRow());
    if (!xn_.data() || !qkv_.data() || !attn_.data() || !gate_up_.data() || !act_.data() ||
        !gates_.data() || !branch_.data() || !conv_.data() || !acts_.bf16.data() ||
        !acts_.q8.data() || !acts_.q8u.data() || !scores_.data() ||
        (spec_.heads > 0 && !split_partials_.data())) {
      return ResourceExhausted("cpu backend: out of memory for the forward-pass buffers");
    }
    return Status::Ok();
  }

  // Decode attention is split over positions when the kv heads alone would leave threads idle
  // or unevenly loaded (kv_heads not a multiple of the threads): enough (kv head, split) tasks
  // for every thread twice, each split at least kMinDecodeSplitPositions long; 1: no split.
  // Measured per decode step (bf16, 2 threads, alternating in one process): smollm2-135m
  // (3 kv heads) 1.08x faster at 1024 and 3000 positions; qwen2.5-0.5b (2 kv heads, even
  // without splitting) 0.98-1.0x if split anyway, hence the multiple-of-threads rule.
  static constexpr int64_t kMinDecodeSplitPositions = 256;
  int64_t MaxDecodeSplits() const {
    return spec_.kv_heads > 0 ? (2 * pool_.size() + spec_.kv_heads - 1) / spec_.kv_heads : 1;
  }
  int64_t DecodeSplits(int64_t positions) const {
    if (k_.attention_decode_split == nullptr || spec_.kv_heads % pool_.size() == 0) return 1;
    return std::clamp<int64_t>(positions / kMinDecodeSplitPositions, 1, MaxDecodeSplits());
  }

  // The blocked kernel wherever there is one, decode included: it reads each cached key and
  // value once for every query head of its group, where the per-head kernel reads them once
  // per head. Measured per decode step (bf16, 2 threads, alternating kernels token by token in
  // one process): smollm2-135m 1.04x faster at 32-160 positions, 1.32x at 1024, 1.77x at 3000;
  // qwen2.5-0.5b 1.01x, 1.10x, 1.44x.
  bool UseBlockedAttention() const {
    return k_.attention_blocked != nullptr && keys_t_.size() + keys_t16_.size() > 0;
  }
  bool kv_bf16() const { return options_.kv_cache == KvCacheType::kBF16; }

  // Row `row` of pool block `block` as a position of the pool's store (kv_, slot 0).
  static int64_t PoolPosition(int32_t block, int64_t row) {
    return static_cast<int64_t>(block) * kKvBlockTokens + row;
  }
  // Where a pool block's transposed keys of one layer and kv head start (AttentionArgs::keys_t):
  // [layer][kv head][block][kKvBlockTokens / 16][head_dim][16].
  size_t KeysTOffset(int32_t block, int64_t layer, int64_t g) const {
    return static_cast<size_t>(((layer * spec_.kv_heads + g) * pool_blocks_ + block) *
                               kKvBlockTokens * spec_.head_dim);
  }
  // Points `att` at slot/layer's cache of `store` from position `first`, in its precision and
  // layout.
  void PointAtCache(AttentionArgs& att, KvStore& store, int slot, int64_t layer, int64_t first) {
    att.kv_bf16 = store.bf16;
    att.kv_stride = store.position_stride();
    att.kv_head_stride = store.head_stride();
    const int64_t at = store.At(first, 0);
    // A store without row-major keys (the pool under the blocked kernel) leaves them null.
    const bool keys = store.has_keys();
    if (store.bf16) {
      att.keys_bf16 = keys ? store.Keys<uint16_t>(slot, layer) + at : nullptr;
      att.values_bf16 = store.Values<uint16_t>(slot, layer) + at;
    } else {
      att.keys = keys ? store.Keys<float>(slot, layer) + at : nullptr;
      att.values = store.Values<float>(slot, layer) + at;
    }
  }
  // Points `att` at layer's blocks of the pool (kv_), through the row's block table.
  void PointAtPool(AttentionArgs& att, int64_t layer, const int32_t* blocks) {
    PointAtCache(att, kv_, 0, layer, 0);
    att.kv_blocks = blocks;
    att.kv_block_shift = kKvBlockShift;
    att.kv_block_stride = kKvBlockTokens * kv_.position_stride();
    if (!UseBlockedAttention()) return;
    att.keys_t_head_stride = static_cast<int64_t>(KeysTOffset(0, 0, 1));
    att.keys_t_block_stride = static_cast<int64_t>(KeysTOffset(1, 0, 0));
    if (kv_bf16()) {
      att.keys_t_bf16 = keys_t16_.data() + KeysTOffset(0, layer, 0);
    } else {
      att.keys_t = keys_t_.data() + KeysTOffset(0, layer, 0);
    }
  }

  // Matmuls are balanced dispatches (see ThreadPool::ParallelForBalanced): two threads given
  // equal static shares routinely finished 10-20 % apart. Prompt chunks are one tile's panels,
  // decode chunks DecodeMatmulGrain's (kernels.h).

  // y[rows][ldy] (+)= W x for x [rows][x_stride], split over the pool by panels.
  // `decode`: the rows are decode rows of different sequences (MatmulArgs::decode_rows).
  // `prologue` writes each row of x first, in the dispatch that quantizes it.
  void Matmul(const PackedMatrix& w, const float* x, int64_t rows, int64_t x_stride, float* y,
              int64_t ldy, bool accumulate, const float* bias, bool decode,
              RowPrologue prologue = {}) {
    PrepareActivations(k_, x, rows, x_stride, w.format, &acts_, &pool_, prologue);
    MatmulArgs args{&w, &acts_, y, ldy, accumulate, bias, decode};
    MatmulFn fn = k_.Matmul(w.format);
    if (options_.bf16_activations && !args.decode() && w.format == WeightFormat::kBF16) {
      // Prompt rows rounded to bf16 for vdpbf16ps (BackendOptions::bf16_activations).
      ForRows(rows, [&](int64_t r) {
        k_.to_bf16(x + r * x_stride, x_stride, acts_.bf16.data() + r * x_stride);
      });
      fn = k_.matmul_bf16_dot;
    }
    auto run = [&](int64_t begin, int64_t end, int) { fn(args, begin, end); };
    pool_.ParallelForBalanced(w.panels(), args.decode() ? DecodeMatmulGrain(w) : k_.prompt_panels,
                              run);
  }

  // fn(r) for r in [0, n), split over the pool (a single row runs inline, as ParallelFor does
  // for one index). Rows must be independent. The decode rows of a batched step are split too:
  // running them all on the calling thread while the other threads waited measured slower
  // (smollm2-135m INT8, 8 streams; bench/results/many_users.md, session 13).
  template <typename Fn>
  void ForRows(int64_t n, Fn&& fn) {
    pool_.ParallelFor(n, [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) fn(r);
    });
  }

  // A RowPrologue calling fn(row); fn must outlive the dispatch it is given to.
  template <typename Fn>
  static RowPrologue PrologueOf(Fn& fn) {
    return {[](void* ctx, int64_t r) { (*static_cast<Fn*>(ctx))(r); }, &fn};
  }

  // xn_ row r = RMSNorm(x row r) * w.
  void NormRow(const float* x, const std::vector<float>& w, int64_t r) {
    k_.rms_norm(x + r * spec_.hidden, w.data(), spec_.hidden, hidden_stride_, eps_,
                xn_.data() + r * hidden_stride_);
  }
  void NormRows(const float* x, const std::vector<float>& w, int64_t n) {
    ForRows(n, [&](int64_t r) { NormRow(x, w, r); });
  }

  // Row r of the block (sequence row_slot_[r] at position row_pos_[r]) after the qkv matmul:
  // the output gate moved aside (q compacted to [q_dim]), q/k norms, RoPE on q and k, then k
  // and v into the KV cache (and k into the transposed key cache). `layer` is the layer's KV
  // cache index.
  void PositionAndCacheRow(const CpuLayerWeights& L, int64_t layer, int64_t r) {
    const int slot = row_slot_[static_cast<size_t>(r)];
    const int64_t p = row_pos_[static_cast<size_t>(r)];
    const ModelSpec& d = spec_;
    float* q = qkv_.data() + r * qkv_width_;
    float* k = q + d.q_proj_rows();
    const float* v = k + d.kv_dim;
    if (d.output_gate) {
      // Per head [query | gate]: gates first (a later query lands where an earlier gate was).
      float* gates = gates_.data() + r * d.q_dim;
      for (int64_t h = 0; h < d.heads; ++h) {
        std::copy_n(q + (2 * h + 1) * d.head_dim, d.head_dim, gates + h * d.head_dim);
      }
      for (int64_t h = 1; h < d.heads; ++h) {
        std::copy_n(q + 2 * h * d.head_dim, d.head_dim, q + h * d.head_dim);
      }
    }
    if (d.qk_norm) {
      for (int64_t h = 0; h < d.heads; ++h) {
        k_.rms_norm(q + h * d.head_dim, L.q_norm.data(), d.head_dim, d.head_dim, eps_,
                    q + h * d.head_dim);
      }
      for (int64_t h = 0; h < d.kv_heads; ++h) {
        k_.rms_norm(k + h * d.head_dim, L.k_norm.data(), d.head_dim, d.head_dim, eps_,
                    k + h * d.head_dim);
      }
    }
    const RopeTable& rope = ropes_[static_cast<size_t>(L.spec.rope)];
    const float* cs = rope.cos_at(p);
    const float* sn = rope.sin_at(p);
    k_.rope(q, d.heads, d.head_dim, 2 * rope.half(), cs, sn);
    k_.rope(k, d.kv_heads, d.head_dim, 2 * rope.half(), cs, sn);
    if (L.spec.window > 0) {
      const int64_t at = RingIndex(p);
      window_kv_.Write(slot, layer, at, k, v, k_.to_bf16);
      if (ring_cap_ > 0) window_kv_.Write(slot, layer, at + ring_cap_, k, v, k_.to_bf16);
      return;
    }
    const int32_t block = row_blocks_[static_cast<size_t>(r)][p >> kKvBlockShift];
    const int64_t row = p & (kKvBlockTokens - 1);
    kv_.Write(0, layer, PoolPosition(block, row), k, v, k_.to_bf16);
    if (!UseBlockedAttention()) return;
    // The transposed copy, the pool's only keys: element i of a head goes 16 apart, rounded
    // to bf16 as the kernel table rounds every cache write.
    const size_t in_block = static_cast<size_t>((row / 16) * d.head_dim * 16 + row % 16);
    for (int64_t g = 0; g < d.kv_heads; ++g) {
      const int64_t from = g * d.head_dim;
      const size_t kt = KeysTOffset(block, layer, g) + in_block;
      if (kv_bf16()) {
        uint16_t rounded[256];  // head_dim <= 256 wherever the blocked kernel runs
        k_.to_bf16(k + from, d.head_dim, rounded);
        uint16_t* dst = keys_t16_.data() + kt;
        for (int64_t i = 0; i < d.head_dim; ++i) dst[i * 16] = rounded[i];
      } else {
        float* dst = keys_t_.data() + kt;
        for (int64_t i = 0; i < d.head_dim; ++i) dst[i * 16] = k[from + i];
      }
    }
  }

  int64_t RingIndex(int64_t p) const { return ring_cap_ > 0 ? p % ring_cap_ : p; }

  // Attention of block rows [r0, r0 + n) at positions [pos, pos + n), before the cache is
  // pointed at: queries from qkv_, output into attn_.
  AttentionArgs RowsAttentionArgs(int64_t r0, int64_t pos, int64_t n) {
    const ModelSpec& d = spec_;
    AttentionArgs att;
    att.q = qkv_.data() + r0 * qkv_width_;
    att.q_stride = qkv_width_;
    att.start_pos = pos;
    att.rows = n;
    att.heads = d.heads;
    att.kv_heads = d.kv_heads;
    att.head_dim = d.head_dim;
    att.scale = static_cast<float>(d.attention_scale);
    att.out = attn_.data() + r0 * q_stride_;
    att.out_stride = q_stride_;
    return att;
  }

  // Causal attention of n consecutive positions [pos, pos + n) of `slot`, block rows
  // [r0, r0 + n), over the slot's cache into attn_.
  void Attend(const CpuLayerWeights& L, int64_t layer, int slot, int64_t pos, int64_t n,
              int64_t r0) {
    const ModelSpec& d = spec_;
    AttentionArgs att = RowsAttentionArgs(r0, pos, n);
    if (L.spec.window > 0) {
      // A sliding window: each row sees its own span of positions (one contiguous run of the
      // ring), so rows run one by one through the per-head kernel.
      pool_.ParallelFor(n * d.heads, [&](int64_t begin, int64_t end, int thread) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t r = t / d.heads, h = t % d.heads;
          const int64_t first = std::max<int64_t>(0, pos + r - L.spec.window + 1);
          AttentionArgs row = att;
          row.q = att.q + r * att.q_stride;
          PointAtCache(row, window_kv_, slot, layer, RingIndex(first));
          row.start_pos = pos + r - first;
          row.rows = 1;
          row.out = att.out + r * att.out_stride;
          k_.attention(row, h, h + 1, scores_.data() + thread * scores_per_thread_);
        }
      });
      return;
    }
    PointAtPool(att, layer, row_blocks_[static_cast<size_t>(r0)]);
    const int64_t splits = n == 1 && UseBlockedAttention() ? DecodeSplits(pos + 1) : 1;
    if (splits > 1) {
      pool_.ParallelFor(d.kv_heads * splits, [&](int64_t begin, int64_t end, int thread) {
        k_.attention_decode_split(att, splits, begin, end,
                                  scores_.data() + thread * scores_per_thread_,
                                  split_partials_.data());
      });
      MergeDecodeSplits(att, splits, split_partials_.data());
    } else if (UseBlockedAttention()) {
      // Balanced: prompt tasks differ in length (causal), and threads in speed (1.02x for
      // smollm2-135m prefill@512 layers, alternating in one process; qwen2.5-0.5b unchanged).
      pool_.ParallelForBalanced(
          BlockedAttentionTasks(att), 1, [&](int64_t begin, int64_t end, int thread) {
            k_.attention_blocked(att, begin, end, scores_.data() + thread * scores_per_thread_);
          });
    } else {
      pool_.ParallelFor(n * d.heads, [&](int64_t begin, int64_t end, int thread) {
        k_.attention(att, begin, end, scores_.data() + thread * scores_per_thread_);
      });
    }
  }

  // Decode rows of different sequences: every row's attention tasks go to the pool in one
  // balanced dispatch (8 rows of 3 kv heads are 24 tasks for 2 threads, where one row's 3 left
  // a thread idle), each row with the kernels, task split and merge it gets alone, so its
  // result does not change.
  enum class RowAttention : uint8_t { kSliding, kSplit, kBlocked, kPlain };
  void AttendDecodeRows(const CpuLayerWeights& L, int64_t layer, int64_t n) {
    const ModelSpec& d = spec_;
    int64_t total = 0;
    for (int64_t r = 0; r < n; ++r) {
      const int slot = row_slot_[static_cast<size_t>(r)];
      const int64_t pos = row_pos_[static_cast<size_t>(r)];
      AttentionArgs& att = row_att_[static_cast<size_t>(r)];
      att = RowsAttentionArgs(r, pos, 1);
      int64_t splits = 1, tasks = 0;
      RowAttention kind;
      if (L.spec.window > 0) {
        const int64_t first = std::max<int64_t>(0, pos - L.spec.window + 1);
        PointAtCache(att, window_kv_, slot, layer, RingIndex(first));
        att.start_pos = pos - first;
        kind = RowAttention::kSliding;
        tasks = d.heads;
      } else {
        PointAtPool(att, layer, row_blocks_[static_cast<size_t>(r)]);
        if (UseBlockedAttention()) splits = DecodeSplits(pos + 1);
        if (splits > 1) {
          kind = RowAttention::kSplit;
          tasks = d.kv_heads * splits;
        } else if (UseBlockedAttention()) {
          kind = RowAttention::kBlocked;
          tasks = BlockedAttentionTasks(att);
        } else {
          kind = RowAttention::kPlain;
          tasks = d.heads;
        }
      }
      row_kind_[static_cast<size_t>(r)] = kind;
      row_splits_[static_cast<size_t>(r)] = splits;
      row_first_task_[static_cast<size_t>(r)] = total;
      total += tasks;
    }
    row_first_task_[static_cast<size_t>(n)] = total;
    const size_t partial_floats = SplitPartialFloatsPerRow();
    pool_.ParallelForBalanced(total, 1, [&](int64_t begin, int64_t end, int thread) {
      float* scores = scores_.data() + thread * scores_per_thread_;
      int64_t r = 0;
      for (int64_t t = begin; t < end; ++t) {
        while (row_first_task_[static_cast<size_t>(r) + 1] <= t) ++r;
        const int64_t local = t - row_first_task_[static_cast<size_t>(r)];
        const AttentionArgs& att = row_att_[static_cast<size_t>(r)];
        switch (row_kind_[static_cast<size_t>(r)]) {
          case RowAttention::kSliding:
          case RowAttention::kPlain:
            k_.attention(att, local, local + 1, scores);
            break;
          case RowAttention::kSplit:
            k_.attention_decode_split(
                att, row_splits_[static_cast<size_t>(r)], local, local + 1, scores,
                split_partials_.data() + static_cast<size_t>(r) * partial_floats);
            break;
          case RowAttention::kBlocked:
            k_.attention_blocked(att, local, local + 1, scores);
            break;
        }
      }
    });
    for (int64_t r = 0; r < n; ++r) {
      if (row_kind_[static_cast<size_t>(r)] != RowAttention::kSplit) continue;
      MergeDecodeSplits(row_att_[static_cast<size_t>(r)], row_splits_[static_cast<size_t>(r)],
                        split_partials_.data() + static_cast<size_t>(r) * partial_floats);
    }
  }
  size_t SplitPartialFloatsPerRow() const {
    return static_cast<size_t>(spec_.heads * MaxDecodeSplits() *
                               DecodeSplitPartialSize(spec_.head_dim));
  }

  // x += branch(input) for a block of rows: the residual add happens inside the output matmul,
  // unless the family norms the branch's output first (gemma3's sandwich norms).
  // `prologue` writes each input row first (Matmul).
  void AddBranch(const PackedMatrix& w, const float* input, int64_t input_stride,
                 const std::vector<float>& out_norm, const std::vector<float>& bias, float* x,
                 RowPrologue prologue = {}) {
    const int64_t n = block_rows_;
    const float* b = bias.empty() ? nullptr : bias.data();
    if (out_norm.empty()) {
      Matmul(w, input, n, input_stride, x, spec_.hidden, true, b, block_decode_, prologue);
      return;
    }
    Matmul(w, input, n, input_stride, branch_.data(), spec_.hidden, false, b, block_decode_,
           prologue);
    ForRows(n, [&](int64_t r) {
      float* o = branch_.data() + r * spec_.hidden;
      k_.rms_norm(o, out_norm.data(), spec_.hidden, spec_.hidden, eps_, o);
      float* xr = x + r * spec_.hidden;
      for (int64_t i = 0; i < spec_.hidden; ++i) xr[i] += o[i];
    });
  }

  // The block's rows through an attention layer; x: [block_rows_][hidden]. A prompt block's
  // rows are consecutive positions of one sequence; decode rows attend one by one, each with
  // the same kernel calls as when decoded alone.
  void AttentionBlock(const CpuLayerWeights& L, int64_t layer, float* x) {
    const ModelSpec& d = spec_;
    const int64_t n = block_rows_;
    auto norm = [&](int64_t r) { NormRow(x, L.input_norm, r); };
    Matmul(L.qkv, xn_.data(), n, hidden_stride_, qkv_.data(), qkv_width_, false,
           L.qkv_bias.empty() ? nullptr : L.qkv_bias.data(), block_decode_, PrologueOf(norm));
    ForRows(n, [&](int64_t r) { PositionAndCacheRow(L, layer, r); });
    if (block_decode_) {
      AttendDecodeRows(L, layer, n);
    } else {
      for (const PromptSegment& g : segments_) Attend(L, layer, g.slot, g.pos, g.rows, g.r0);
    }
    auto gate = [&](int64_t r) {
      float* a = attn_.data() + r * q_stride_;
      const float* g = gates_.data() + r * d.q_dim;
      for (int64_t i = 0; i < d.q_dim; ++i) a[i] = a[i] / (1.0f + std::exp(-g[i]));
    };
    AddBranch(L.o_proj, attn_.data(), q_stride_, L.attn_out_norm, L.o_bias, x,
              d.output_gate ? PrologueOf(gate) : RowPrologue{});
  }

  // The block's rows through a Gated DeltaNet layer (cpu_deltanet.h); `layer` is its
  // recurrent state index. Decode rows run the recurrence one sequence at a time.
  void DeltaNetLayerBlock(const CpuLayerWeights& L, int64_t layer, float* x) {
    const int64_t n = block_rows_;
    auto norm = [&](int64_t r) { NormRow(x, L.input_norm, r); };
    Matmul(L.qkv, xn_.data(), n, hidden_stride_, qkv_.data(), qkv_width_, false, nullptr,
           block_decode_, PrologueOf(norm));
    const int64_t conv_width = spec_.deltanet->conv_width();
    auto block = [&](int64_t r0, int64_t rows) {
      DeltaNetBlock b;
      b.spec = &*spec_.deltanet;
      b.layer = &L;
      b.eps = eps_;
      b.proj = qkv_.data() + r0 * qkv_width_;
      b.proj_stride = qkv_width_;
      b.conv = conv_.data() + r0 * conv_width;
      b.rows = rows;
      b.state = state_.Live(row_slot_[static_cast<size_t>(r0)], layer);
      b.ones = ones_.data();
      b.out = attn_.data() + r0 * q_stride_;
      b.out_stride = q_stride_;
      return b;
    };
    if (block_decode_) {
      // Each decode row is its own sequence with its own state, all in one set of dispatches.
      for (int64_t r = 0; r < n; ++r) delta_rows_[static_cast<size_t>(r)] = block(r, 1);
      RunDeltaNetDecodeRows(
          k_, pool_, std::span<const DeltaNetBlock>(delta_rows_.data(), static_cast<size_t>(n)));
    } else {
      for (const PromptSegment& g : segments_) RunDeltaNetBlock(k_, pool_, block(g.r0, g.rows));
    }
    AddBranch(L.o_proj, attn_.data(), q_stride_, {}, {}, x);
  }

  // The gated MLP: x += down(act(gate(x)) * up(x)).
  void MlpBlock(const CpuLayerWeights& L, float* x) {
    const ModelSpec& d = spec_;
    const int64_t n = block_rows_;
    auto norm = [&](int64_t r) { NormRow(x, L.post_attn_norm, r); };
    Matmul(L.gate_up, xn_.data(), n, hidden_stride_, gate_up_.data(), 2 * d.intermediate, false,
           nullptr, block_decode_, PrologueOf(norm));
    const auto act = d.activation == Activation::kGeluTanh ? k_.geglu : k_.swiglu;
    auto activate = [&](int64_t r) {
      const float* g = gate_up_.data() + r * 2 * d.intermediate;
      act(g, g + d.intermediate, d.intermediate, act_.data() + r * inter_stride_);
    };
    AddBranch(L.down_proj, act_.data(), inter_stride_, L.mlp_out_norm, {}, x, PrologueOf(activate));
  }

  // The per-row slot, position and block table of a prompt segment of chunk `ci`.
  void FillSegmentRows(size_t ci, const PromptSegment& g) {
    for (int64_t r = 0; r < g.rows; ++r) {
      const size_t row = static_cast<size_t>(g.r0 + r);
      row_slot_[row] = g.slot;
      row_pos_[row] = g.pos + r;
      row_blocks_[row] = chunk_blocks_[ci];
    }
  }

  // n rows (row_slot_ / row_pos_ filled) through every resident layer; x: [n][hidden].
  void RunBlock(int64_t n, bool decode, float* x) {
    block_rows_ = n;
    block_decode_ = decode;
    for (int64_t l = 0; l < range_.size(); ++l) {
      const CpuLayerWeights& L = layers_[static_cast<size_t>(l)];
      const int64_t index = cache_index_[static_cast<size_t>(l)];
      if (L.spec.is_attention()) {
        AttentionBlock(L, index, x);
      } else {
        DeltaNetLayerBlock(L, index, x);
      }
      MlpBlock(L, x);
    }
  }

  // Slots and positions inside the cache; the one-token chunks first, one chunk per slot.
  Status CheckBatch(const ForwardBatch& batch) {
    std::fill(slot_seen_.begin(), slot_seen_.end(), 0);
    chunk_blocks_.resize(batch.chunks.size());
    bool prompt_seen = false;
    for (size_t ci = 0; ci < batch.chunks.size(); ++ci) {
      const SequenceChunk& c = batch.chunks[ci];
      if (c.slot < 0 || c.slot >= slots_) return OutOfRange("KV slot out of range");
      if (c.start_pos < 0 || c.n_tokens < 1 || c.start_pos + c.n_tokens > max_seq_) {
        return OutOfRange("position " + std::to_string(c.start_pos + c.n_tokens) +
                          " is past the KV cache capacity of " + std::to_string(max_seq_));
      }
      if (slot_seen_[static_cast<size_t>(c.slot)]++) {
        return InvalidArgument("a batch holds one chunk per slot");
      }
      if (c.n_tokens > 1) {
        prompt_seen = true;
      } else if (prompt_seen) {
        return InvalidArgument("a batch lists its one-token chunks first");
      }
      TS_ASSIGN_OR_RETURN(chunk_blocks_[ci], kv_tables_.For(c));
    }
    return Status::Ok();
  }

  BackendOptions options_;
  const KernelTable& k_;
  ThreadPool pool_;
  WeightFormat format_ = WeightFormat::kF32;
  WeightFormat head_format_ = WeightFormat::kF32;
  ModelSpec spec_;
  float eps_ = 1e-6f;
  int64_t hidden_stride_ = 0, q_stride_ = 0, inter_stride_ = 0;  // padded to 32
  int64_t max_seq_ = 0;
  int slots_ = 0;
  int64_t attention_layers_ = 0;  // full-attention layers (kv_)
  int64_t ring_cap_ = 0;          // sliding layers' ring entries (0: plain positions)
  int64_t qkv_width_ = 0;         // floats per row of the input projection's output
  LayerRange range_;
  std::vector<CpuLayerWeights> layers_;
  std::vector<int64_t> cache_index_;  // per layer: into kv_ (attention) or state_ (DeltaNet)
  KvStore kv_;                        // full-attention layers: the block pool
  KvBlockTables kv_tables_;
  KvStore window_kv_;              // sliding layers: [2 ring_cap_] or [max_seq] positions
  RecurrentState state_;           // DeltaNet layers
  std::vector<RopeTable> ropes_;   // one per spec_.ropes entry (model/rope.h)
  std::vector<float> ones_;        // [conv_width] for SiLU through the swiglu kernel
  std::vector<float> final_norm_;  // [hidden]
  PackedMatrix lm_head_;           // [vocab, hidden]
  // Block scratch, sized at load (kMaxBlockRows rows each).
  AlignedArray<float> xn_;       // [block][hidden_stride], normed input, zero padded
  AlignedArray<float> qkv_;      // [block][qkv_width_]
  AlignedArray<float> gates_;    // [block][q_dim], attention output gates
  AlignedArray<float> branch_;   // [block][hidden], a branch's output before its norm
  AlignedArray<float> conv_;     // [block][conv_width], DeltaNet q | k | v after the conv
  AlignedArray<float> attn_;     // [block][q_stride], zero padded
  AlignedArray<float> gate_up_;  // [block][2 intermediate]
  AlignedArray<float> act_;      // [block][inter_stride], zero padded
  AlignedArray<float> scores_;   // [threads][scores_per_thread_]
  // [heads][MaxDecodeSplits()][DecodeSplitPartialSize(head_dim)], see AttentionSplitFn.
  AlignedArray<float> split_partials_;
  int64_t scores_per_thread_ = 0;
  // [block][layer][kv_head][kKvBlockTokens / 16][head_dim][16]; empty when unused.
  AlignedArray<float> keys_t_;
  AlignedArray<uint16_t> keys_t16_;  // the same in bf16 (BackendOptions::kv_cache)
  int64_t pool_blocks_ = 0;          // blocks of the KV pool (kv_)
  ActivationBlock acts_;             // prepared copy of the current matmul input
  // The block being run: its rows' sequences and positions, and whether they are decode rows.
  std::vector<int> row_slot_ = std::vector<int>(kMaxBlockRows);
  std::vector<int64_t> row_pos_ = std::vector<int64_t>(kMaxBlockRows);
  std::vector<const int32_t*> row_blocks_ = std::vector<const int32_t*>(kMaxBlockRows);
  std::vector<const int32_t*> chunk_blocks_;  // per chunk of the batch: its block table
  int64_t block_rows_ = 0;
  bool block_decode_ = false;
  std::vector<PromptSegment> segments_;
  std::vector<int> slot_seen_;  // [slots], CheckBatch's scratch
  // AttendDecodeRows' per-row arguments, kernel, splits and first task (n + 1 entries).
  std::vector<AttentionArgs> row_att_ = std::vector<AttentionArgs>(kMaxBlockRows);
  std::vector<RowAttention> row_kind_ = std::vector<RowAttention>(kMaxBlockRows);
  std::vector<int64_t> row_splits_ = std::vector<int64_t>(kMaxBlockRows);
  std::vector<int64_t> row_first_task_ = std::vector<int64_t>(kMaxBlockRows + 1);
  std::vector<DeltaNetBlock> delta_rows_ = std::vector<DeltaNetBlock>(kMaxBlockRows);
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options, std::optional<CpuIsa> isa) {
  if (!isa) isa = options.cpu_isa;
  const KernelTable* k = isa ? KernelsFor(*isa) : nullptr;
  if (k == nullptr) k = KernelsFor(DetectCpuIsa());
  return std::make_unique<CpuBackend>(options, k);
}

}  // namespace tessera
