// Backend: something that runs whole decoder layers with its weights and KV cache resident.
// A model is split over backends by a placement table decided once at load (see
// engine/model_executor.h): each backend owns a contiguous range of layers, one of them also
// owns the final norm + LM head, and the hidden state crosses between backends once per
// forward call. Work handed to a backend is coarse (all its layers for a batch of tokens), the
// shape an NPU needs: no per-op round trips.
//
//   std::unique_ptr<Backend> b = MakeReferenceBackend();
//   TS_RETURN_IF_ERROR(b->LoadLayers(*ckpt, {0, 30}, {.max_slots = 1, .max_seq = 2048}));
//   TS_RETURN_IF_ERROR(b->LoadHead(*ckpt));
//   ForwardBatch batch{{{.slot = 0, .start_pos = 0, .n_tokens = 5}}};
//   TS_RETURN_IF_ERROR(b->ForwardLayers(batch, hidden));   // hidden: [5, hidden_size]
//   TS_RETURN_IF_ERROR(b->ComputeLogits(last_row, 1, logits, LogitRows::kOnePerSequence));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "model/checkpoint.h"

namespace tessera {

struct LayerRange {
  int64_t begin = 0;  // first layer owned
  int64_t end = 0;    // one past the last
  int64_t size() const { return end - begin; }
};

class XdnaDevice;  // backend/xdna/device.h
// Makes an XDNA device; called once per process, when the first xdna layers load.
using XdnaDeviceMaker = std::function<Expected<std::unique_ptr<XdnaDevice>>()>;

// The xdna backend's device and the queue that gives models their turns on it. The device is
// one per process (the first backend to open it chooses it; a later backend asking for another
// is refused).
struct NpuOptions {
  // --npu-device: "" or "xrt" (the XRT device), "fake:xdna1" or "fake:xdna2" (the fake
  // device: CPU reference kernels, no NPU executes anything); the name the device is known by.
  std::string device{};
  // What makes it: set with `device` by backend/xdna/fake/npu_device_flag.h's ResolveNpuDevice
  // in the programs that offer the flag, or by a test. Unset: the XRT device.
  XdnaDeviceMaker make_device{};
  int queue = 64;                    // --npu-queue: passes that may wait for their turn
  int64_t queue_timeout_ms = 30000;  // --npu-queue-timeout-ms: the longest wait for a turn
};

// Choices made once when a backend is created.
enum class WeightFormat { kAuto, kF32, kBF16, kInt8, kInt4 };
// The cpu backend's kernel families, in order of preference (backend/cpu/cpu_features.h says
// what each needs of the CPU).
enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx2Vnni = 2, kAvx512 = 3, kAvx512Amx = 4 };
// How a backend stores its KV cache: fp32 (exact) or bf16 (half the memory and the bytes
// attention reads; each key and value rounded to nearest-even once, when written).
enum class KvCacheType { kF32, kBF16 };
struct BackendOptions {
  WeightFormat weights = WeightFormat::kAuto;  // kAuto: the backend's natural format
  int threads = 0;                             // 0: the backend decides
  // BF16 weights only: prompt rows are rounded to bf16 and multiplied with bf16 dot products
  // (AVX-512 BF16), as llama.cpp does; faster, less exact than the default (activations kept
  // in fp32, weights widened). Decode rows stay exact. Refused where the CPU lacks the kernel.
  bool bf16_activations = false;
  // The cpu backend's KV cache; the reference backend is always fp32. Exact by default; the
  // commands follow the weights (DefaultKvCache) unless --kv-cache says otherwise.
  KvCacheType kv_cache = KvCacheType::kF32;
  // The cpu backend's kernel family (--cpu-isa); unset: the best this CPU runs. A family the
  // CPU lacks is refused at load, naming the ones it has.
  std::optional<CpuIsa> cpu_isa{};
  NpuOptions npu{};
};

std::string_view WeightFormatName(WeightFormat format);  // "auto", "f32", "bf16", "int8", "int4"
// The inverse of WeightFormatName; an unknown name is an error listing the valid ones.
Expected<WeightFormat> ParseWeightFormat(std::string_view name);
// The concrete format a run of `ckpt` asked for `requested` gets: kAuto is BF16 for BF16/F16
// checkpoints, F32 for F32 ones, and a package's own format for a package. A package asked
// for another format is an error that says how to get one.
Expected<WeightFormat> ResolveWeightFormat(const Checkpoint& ckpt, WeightFormat requested);
// The KV cache that keeps a run as exact as its weights: F32 weights keep an fp32 cache (the
// reference's tokens), BF16, INT8 and INT4 weights a bf16 one (half the memory; its rounding
// is far below theirs).
KvCacheType DefaultKvCache(WeightFormat resolved);
const char* KvCacheTypeName(KvCacheType type);  // "f32" or "bf16"
std::string_view CpuIsaName(CpuIsa isa);  // "scalar", "avx2", "avx2vnni", "avx512", "avx512amx"
// The inverse of CpuIsaName; an unknown name is an error listing the valid ones.
Expected<CpuIsa> ParseCpuIsa(std::string_view name);

// Runtime packages (catalog/package.h) hold their matrices packed as the cpu backend reads
// them. The catalog writes the tensor file through these, never through backend internals.
inline constexpr uint64_t kPackedTensorAlignment = 64;  // every tensor's offset in the file
std::string_view PackedWeightLayout();                  // the manifest's packed_layout
struct PackedTensorFile {
  uint64_t bytes = 0;
  std::string sha256;  // lowercase hex of the whole file
};
// Packs `source` (a checkpoint, not a package) as `format` layer by layer and writes the
// tensor file at `path` while hashing it; `metadata` goes into the header's __metadata__.
// `progress` gets the bytes written (phase "packing tensors").
Expected<PackedTensorFile> WritePackedTensorFile(
    const Checkpoint& source, WeightFormat format, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    const ProgressCallback& progress = {});

// How many of `remaining` prompt rows to run next, at most `most`: one fewer where that would
// leave a single row. A row run alone takes the decode arithmetic (a one-row matmul, split
// attention), which may sum differently from the same row among others; so a prompt row never
// runs alone unless the whole prompt is one token, and chunking changes no result.
inline constexpr int64_t NextPromptRows(int64_t remaining, int64_t most) {
  const int64_t n = remaining < most ? remaining : most;
  return remaining - n == 1 && n > 2 ? n - 1 : n;
}

// The KV cache is a pool of blocks of kKvBlockTokens positions shared by every slot: a
// sequence's positions live in the blocks its block table lists (SequenceChunk::blocks), so
// memory follows what sequences hold, not slots x context, and sequences with a common prefix
// read the same blocks (engine/kv_block_pool.h). A chunk without a table uses its slot's own
// blocks [slot * KvBlocksFor(max_seq), ...) (the identity layout, for callers that drive one
// sequence per slot themselves; it needs a pool of max_slots x KvBlocksFor(max_seq) blocks).
// Per-slot state outside the pool: recurrent state and sliding-window rings.
inline constexpr int kKvBlockShift = 5;
inline constexpr int64_t kKvBlockTokens = int64_t{1} << kKvBlockShift;  // a multiple of 32
inline constexpr int64_t KvBlocksFor(int64_t positions) {
  return (positions + kKvBlockTokens - 1) / kKvBlockTokens;
}

struct KvCacheConfig {
  int max_slots = 1;    // concurrent sequences
  int64_t max_seq = 0;  // positions per sequence
  int64_t blocks = 0;   // pool blocks; 0: max_slots x KvBlocksFor(max_seq)
  int kept_states = 0;  // recurrent states kept apart from the slots (Backend::KeepSlotState)
  int64_t pool_blocks() const {
    return blocks > 0 ? blocks : static_cast<int64_t>(max_slots) * KvBlocksFor(max_seq);
  }
};

// Consecutive positions of one sequence; a batch concatenates chunks of several sequences, at
// most one per slot, the one-token chunks (decode steps) first: a backend runs those rows
// through each weight together and gives each the arithmetic of a lone decode row, so a
// sequence's result does not depend on the rest of the batch.
struct SequenceChunk {
  int slot = 0;
  int64_t start_pos = 0;
  int64_t n_tokens = 0;
  // Pool blocks of positions [0, start_pos + n_tokens), in order; empty: the identity layout.
  std::span<const int32_t> blocks;
};
struct ForwardBatch {
  std::vector<SequenceChunk> chunks;
  int64_t total_tokens() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.n_tokens;
    return n;
  }
};

enum class LogitRows { kPositions, kOnePerSequence };

class Backend {
 public:
  virtual ~Backend() = default;

  // e.g. "reference", "cpu-avx512", "xdna"; used in the placement log.
  virtual std::string name() const = 0;

  // Makes layers [range) resident in the backend's own format and allocates their KV cache.
  virtual Status LoadLayers(const Checkpoint& ckpt, LayerRange range, const KvCacheConfig& kv) = 0;
  // Makes the final RMSNorm and LM head resident.
  virtual Status LoadHead(const Checkpoint& ckpt) = 0;

  // Runs every chunk's tokens through the resident layers, in place on `hidden`
  // ([total_tokens, hidden_size], rows in chunk order), writing their keys/values to the KV
  // cache at their positions. Attention is causal over each slot's cached positions.
  virtual Status ForwardLayers(const ForwardBatch& batch, std::span<float> hidden) = 0;

  // Final norm + LM head: hidden [n_rows, hidden_size] -> logits [n_rows, vocab_size].
  // kOnePerSequence rows are the last rows of different sequences (a batched step), computed
  // as a lone row would be; kPositions rows are positions of one sequence (scoring).
  virtual Status ComputeLogits(std::span<const float> hidden, int64_t n_rows,
                               std::span<float> logits, LogitRows kind) = 0;
  // The final norm alone, on the backend that owns the head: hidden [n_rows, hidden_size] ->
  // out [n_rows, hidden_size], each row exactly as ComputeLogits normalises it (pooled
  // embeddings and score heads read the normed last hidden state).
  virtual Status FinalNorm(std::span<const float> hidden, int64_t n_rows, std::span<float> out) = 0;

  // The largest position <= wanted from which `slot`'s sequence can continue without running
  // earlier tokens again. A KV cache rewinds to any position; a recurrent state only resumes
  // from its live position or a snapshot (model/recurrent_state.h).
  virtual int64_t ResumablePosition(int slot, int64_t wanted) const {
    (void)slot;
    return wanted;
  }

  // Makes `to_slot`'s per-slot state (recurrent state, sliding-window rings: what the block
  // pool does not hold) that of `from_slot` after its first `positions` positions (of the
  // `source_positions` it has run), so a sequence sharing that prefix (another choice of the
  // same request, another request with the same system prompt) continues from there.
  // Unsupported where the state cannot be rebuilt at `positions` (a ring or recurrent state
  // that has moved past it); the caller then runs the prefix. Nothing to do for a model with
  // no per-slot state.
  virtual Status CopySlotState(int from_slot, int to_slot, int64_t positions,
                               int64_t source_positions) {
    (void)from_slot, (void)to_slot, (void)positions, (void)source_positions;
    return Unsupported(name() + " cannot copy a sequence's state");
  }
  // Recurrent state kept apart from the slots, so that a prefix cached in the block pool can
  // be resumed on any slot by a model with recurrent layers: KeepSlotState copies `slot`'s
  // state after `positions` tokens (live, or a snapshot at exactly that position) into kept
  // entry `entry` (< KvCacheConfig::kept_states); RestoreSlotState makes an entry a slot's
  // live state, at `positions` (the caller's record). No-ops for a backend without
  // recurrent layers.
  virtual Status KeepSlotState(int slot, int64_t positions, int entry) {
    (void)slot, (void)positions, (void)entry;
    return Unsupported(name() + " cannot keep a sequence's state");
  }
  virtual Status RestoreSlotState(int entry, int slot, int64_t positions) {
    (void)slot, (void)positions, (void)entry;
    return Unsupported(name() + " cannot restore a sequence's state");
  }
  // Copies the first `positions` positions of pool block `from` into pool block `to` (every
  // layer): a shared block about to be written (copy on write).
  virtual Status CopyKvBlock(int32_t from, int32_t to, int64_t positions) = 0;

  // Token embeddings read from the resident LM head: hidden [tokens.size(), hidden_size]
  // receives row `id` of the head's matrix for each id (ids inside the vocabulary). For models
  // whose embedding is tied to the head and stored once, as the head (a package of a tied
  // model holds no separate embedding). The executor decides once at load where embeddings
  // come from and refuses such a model when its head's backend cannot do this.
  virtual bool CanEmbedFromHead() const { return false; }
  virtual Status EmbedFromHead(std::span<const int32_t> /*tokens*/, std::span<float> /*hidden*/) {
    return Unsupported(name() + " cannot read token embeddings from its LM head");
  }

  // Bytes of weights resident (for the placement log and bandwidth figures).
  virtual size_t resident_weight_bytes() const = 0;
};

}  // namespace tessera
