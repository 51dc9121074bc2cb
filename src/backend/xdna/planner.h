// XDNA planner: maps a span of a model's decoder layers onto NPU programs under the hard
// limits of a generation (core data memory, mem tile, columns, DMA channels, buffer
// descriptors, hardware contexts, xclbins, the driver's command timeout; FACTS.md 3.2, 3.3,
// 4, 5, 7.1 item 3), or refuses and names the limit. A plan is plain data: the programs
// (one instruction sequence of one core program for one shape, with its tiling), per layer the
// ordered ops, the submissions (which layers share one command chain), and the bytes the NPU
// buffers need. CheckPlan re-verifies every limit from the plan's own numbers, written apart
// from the search. Estimates only: nothing here has run on an NPU.
//
//   PlanOptions o;
//   o.weights = NpuWeightFormat::kInt8;
//   o.max_context = 4096;
//   const NpuTarget& t = NpuTargetFor(XdnaGeneration::kXdna2);
//   PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, t, {.first = 0, .count = spec.layers}, o);
//   if (!plan) return plan.status();   // plan.refusal().limit == PlanLimit::kCoreMemory, ...
//   if (auto refusal = CheckPlan(*plan, t)) return refusal->status;
//   for (const PlanSubmission& s : plan->submissions)          // one command chain each
//     for (int64_t l = s.first_layer; l < s.first_layer + s.layer_count; ++l)
//       for (const PlannedOp& op : plan->layer(l).ops)
//         plan->programs[op.decode_programs[0]].tiling.columns ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "base/status.h"
#include "model/model_spec.h"

namespace tessera {

// How matrices are stored for the NPU. Tiles carry their scales: int8 one fp32 scale per row
// and K chunk; int4 (q4_1-like) a bf16 scale and a bf16 minimum per 32 weights of a row.
enum class NpuWeightFormat { kBf16, kInt8, kInt4 };
std::string_view NpuWeightFormatName(NpuWeightFormat format);  // "bf16", "int8", "int4"

// The limit a refusal (or a failed CheckPlan) names.
enum class PlanLimit {
  kCoreMemory,         // a core tile's 64 KiB data memory
  kMemTileMemory,      // a memory tile's 512 KiB
  kColumns,            // columns a program (hardware context) may span
  kDmaChannels,        // core 2/2, mem tile 6/6, shim 2/2 per column
  kBufferDescriptors,  // core 16, mem tile 48
  kHwContexts,         // hardware contexts the driver allows, minus those in use
  kXclbins,            // xclbins one process may register, minus those in use
  kCommandTimeout,     // one layer's estimated time exceeds the per-submission budget
  kContextBucket,      // max_context past the largest bucket, or malformed buckets
  kShape,              // a model dimension the kernels or the 4-byte DMA granule cannot take
  kOptions,            // the request itself is malformed (layer span, bandwidth, ...)
  kInconsistent,       // CheckPlan only: the plan's recorded numbers disagree with each other
};
std::string_view PlanLimitName(PlanLimit limit);  // "core data memory", "mem tile memory", ...

// A refusal of the planner or of CheckPlan: the limit, typed, for programs and tests; the
// Status for people, whose message is PlanLimitName(limit) + ": " + the numbers.
struct PlanRefusal {
  PlanLimit limit = PlanLimit::kInconsistent;
  Status status;
  // The same refusal with `context` before its numbers ("core data memory: layer 3: ...").
  PlanRefusal Within(const std::string& context) const;
};
// The refusal of `limit`: ResourceExhausted for hardware limits, Unsupported for shapes,
// InvalidArgument for options and context buckets, Corrupt for an inconsistent plan.
PlanRefusal RefusePlan(PlanLimit limit, const std::string& detail);

// A value, or the refusal that says why there is none: Expected<T> with the limit kept.
template <typename T>
class [[nodiscard]] PlanResult : public Expected<T> {
 public:
  PlanResult(T value) : Expected<T>(std::move(value)) {}
  PlanResult(PlanRefusal refusal) : Expected<T>(refusal.status), limit_(refusal.limit) {}
  PlanRefusal refusal() const { return {limit_, this->status()}; }  // only without a value

 private:
  PlanLimit limit_ = PlanLimit::kInconsistent;
};

// Layers [first, first + count) run on the NPU; the rest, and always the LM head, on the CPU.
struct NpuLayerSpan {
  int64_t first = 0;
  int64_t count = 0;
};

struct PlanOptions {
  NpuWeightFormat weights = NpuWeightFormat::kBf16;
  // KV lengths programs are built for, strictly increasing. Buckets past the first one that
  // holds max_context are not built.
  std::vector<int64_t> context_buckets = {512, 1024, 2048, 4096};
  int64_t max_context = 4096;
  int64_t max_batch_rows = 1;  // prompt rows per pass; > 1 also plans prefill programs
  int kv_slots = 1;            // sequences whose KV / recurrent state the NPU buffers hold
  // The driver's TDR (FACTS 4: OOT tdr_timeout_ms default 2000) and the share of it one
  // submission may use by estimate.
  double command_timeout_ms = 2000;
  double budget_fraction = 0.5;
  // Bytes per millisecond the NPU streams from DDR. FACTS 3.3: early microbenchmarks ~8-9
  // GB/s (mlir-aie PR #1126), 55-66 GB/s after AxCache=2 (PR #2559); the low one, since
  // nothing here is measured and the iGPU may compete (-15-20 %).
  double npu_bytes_per_ms = 8e6;
  // Host/firmware cost of one run in a chain. Assumed, not measured (FACTS has no figure).
  double per_run_overhead_ms = 0.1;
  // Prefill compute: bf16 MACs per core per cycle (NpuTarget) x clock x efficiency. FACTS 3.3:
  // npu1 hclk 800-1600 MHz, the lowest taken; whole-array bf16 GEMM reached ~50 % of peak
  // (mlir-aie #2735).
  double npu_clock_mhz = 800;
  double mac_efficiency = 0.5;
  // Runs one command chain may hold. FACTS 5: long runlists time out on some drivers (IRON
  // #43, #38) and nothing bounds a safe length, so chains stay short (IRON's are 5 runs); a
  // TIMEOUT then loses at most one chain. An assumption to revisit on hardware.
  int max_runs_per_submission = 128;
  int max_columns = 0;         // columns one program may span; 0: the whole array
  int hw_contexts_in_use = 0;  // held by other models on the same NPU
  int xclbins_in_use = 0;      // registered by this process for other models
};

enum class NpuOpKind {
  kRmsNorm,             // role: input_norm, post_attention_norm, pre_feedforward_norm, ...
  kMatmul,              // role: q_proj ... down_proj, in_proj_qkv/z/b/a, out_proj
  kQkNormRopeKvWrite,   // per-head q/k norm (when the spec has it), RoPE, K/V into the cache
  kAttention,           // softmax attention over the KV cache (full or sliding window)
  kOutputGate,          // attention output * sigmoid(gate) (qwen3_5)
  kResidualAdd,         // x += branch (MiniCPM's residual scale folded into the weights)
  kGatedActivation,     // act(gate) * up, act silu or gelu-tanh
  kDeltaNetConv,        // causal depthwise conv + SiLU, with its conv history
  kDeltaNetRecurrence,  // l2norm q/k, decay/beta gates, state update, o = S^T q
  kGatedRmsNorm,        // DeltaNet: per-head RMSNorm(o) * silu(z)
};
std::string_view NpuOpKindName(NpuOpKind kind);

enum class NpuPass { kDecode, kPrefill };

// Sizes of one program call. rows: the units spread over cores (matrix output rows, elements,
// channels, heads, normalised vectors); k: the reduced or normalised width.
struct NpuOpShape {
  int64_t rows = 0;
  int64_t k = 0;
  int64_t batch_rows = 1;  // tokens per call
  int64_t context = 0;     // attention: KV positions the program is built for
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};

// Channels and buffer descriptors one tile of a type uses. "in" is data flowing into the
// tile (for the shim: from DDR into the array).
struct NpuDmaUse {
  int in = 0, out = 0, buffer_descriptors = 0;
};

// How a program spreads over the array and what one core and one mem tile hold. Streams go
// shim -> mem tile -> core: split streams carry different data to each core (weights, KV
// blocks), broadcast streams the same data to every core of a column (the input vector).
//   L1  = 2 x (split + broadcast + output tiles) [double-buffered] + accumulator + scratch
//         + stack + heap
//   mem = mem_resident + 2 x (cores_per_column x (split + output tiles) + broadcast tile)
struct NpuTiling {
  int columns = 0;
  int cores_per_column = 0;
  int64_t passes = 0;               // times the array runs over its tiles for one call
  int64_t rows_per_core = 0;        // units of shape.rows one core handles per tile
  int64_t k_chunk = 0;              // matmul: K per tile; attention: KV positions per block
  int64_t batch_rows_per_tile = 1;  // tokens one tile covers
  int split_streams = 0, broadcast_streams = 0, output_streams = 0;
  int64_t split_tile_bytes = 0;  // matmul: the weight tile (with scales and bias)
  int64_t broadcast_tile_bytes = 0;
  int64_t output_tile_bytes = 0;
  int64_t accumulator_bytes = 0;
  int64_t scratch_bytes = 0;  // single-buffered working memory (scores, dequantised tile)
  int64_t stack_bytes = 0, heap_bytes = 0;
  int64_t l1_bytes = 0;  // one core's total, per the formula above
  int64_t mem_resident_bytes = 0;
  int64_t mem_tile_bytes = 0;
  NpuDmaUse core, mem_tile, shim;
};

// One NPU program: an instruction sequence of one xclbin's core program for one shape.
struct PlannedProgram {
  std::string name;    // "gemv.bf16.m2048.k6144", "attention.decode.h16kv2d128.ctx4096", ...
  std::string xclbin;  // the core program family: "gemv-bf16", "vector", "attention", ...
  NpuOpKind kind = NpuOpKind::kMatmul;
  NpuPass pass = NpuPass::kDecode;
  NpuOpShape shape;
  NpuTiling tiling;
  int64_t bytes_per_call = 0;  // DDR traffic of one call
  int64_t macs_per_call = 0;
};

struct PlannedOp {
  NpuOpKind kind = NpuOpKind::kMatmul;
  std::string role;  // "q_proj", "input_norm", "attention", ... (checkpoint-like names)
  NpuOpShape shape;  // decode shape at the largest bucket
  // Indices into XdnaPlan::programs. Attention: one per XdnaPlan::context_buckets entry;
  // otherwise one. prefill_programs is empty when max_batch_rows == 1.
  std::vector<int> decode_programs;
  std::vector<int> prefill_programs;
  int64_t weight_bytes = 0;  // this op's resident weights in their NPU layout
  double decode_ms = 0;      // one call at the largest bucket, overhead included
  double prefill_ms = 0;
};

struct LayerPlan {
  int64_t layer = 0;  // index in the model
  LayerKind kind = LayerKind::kAttention;
  std::vector<PlannedOp> ops;  // in execution order; one run each
  int64_t weight_bytes = 0;
  int64_t kv_bytes_per_position = 0;  // bf16 K and V
  int64_t kv_window = 0;              // sliding layers: positions kept; 0: every position
  int64_t state_bytes = 0;            // DeltaNet conv history + state matrices (fp32)
  double decode_ms = 0, prefill_ms = 0;
};

// One command chain: layers [first_layer, first_layer + layer_count).
struct PlanSubmission {
  int64_t first_layer = 0;
  int64_t layer_count = 0;
  int runs = 0;
  double decode_ms = 0, prefill_ms = 0;
  double estimated_ms = 0;  // max of the two: what must stay inside the budget
};

struct NpuXclbin {
  std::string name;
  int columns = 0;  // width of its hardware context's partition
};

struct XdnaPlan {
  XdnaGeneration generation = XdnaGeneration::kXdna1;
  NpuLayerSpan span;
  NpuWeightFormat weights = NpuWeightFormat::kBf16;
  std::vector<int64_t> context_buckets;  // the buckets built, increasing; last >= max_context
  int64_t max_context = 0;
  int64_t max_batch_rows = 1;
  int kv_slots = 1;
  // The time model, as used.
  double npu_bytes_per_ms = 0;
  double per_run_overhead_ms = 0;
  double macs_per_core_ms = 0;  // prefill compute rate of one core
  double command_timeout_ms = 0;
  double budget_ms = 0;  // command_timeout_ms x budget_fraction
  int max_runs_per_submission = 0;
  int max_columns = 0;  // the columns programs were allowed

  std::vector<PlannedProgram> programs;
  std::vector<NpuXclbin> xclbins;  // one hardware context each
  int hw_contexts_in_use = 0, hw_contexts_used = 0;
  int xclbins_in_use = 0, xclbins_used = 0;

  std::vector<LayerPlan> layers;  // [span.count]; layers[j].layer == span.first + j
  std::vector<PlanSubmission> submissions;

  // What the NPU buffers need (memlock): weights, plus per slot the KV cache at each bucket
  // (kv_bytes[i] for context_buckets[i]) and the DeltaNet state.
  int64_t weight_bytes = 0;
  std::vector<int64_t> kv_bytes;
  int64_t state_bytes = 0;
  int64_t memlock_bytes = 0;  // weights + kv_slots x (kv_bytes.back() + state_bytes)
  double decode_ms = 0;       // one decode token through the span, largest bucket
  double prefill_ms = 0;      // one pass of max_batch_rows rows (0 when decode only)

  const LayerPlan& layer(int64_t model_layer) const { return layers[model_layer - span.first]; }
};

// Plans layers [span.first, span.first + span.count) of `spec` for `target`, or refuses
// (RefusePlan), naming the limit and giving the numbers.
PlanResult<XdnaPlan> PlanXdnaLayers(const ModelSpec& spec, const NpuTarget& target,
                                    NpuLayerSpan span, const PlanOptions& options);

// Re-verifies a plan against a target from the plan's own numbers: recomputes every L1 and
// mem tile total, DMA channel and descriptor count, coverage of each shape by its tiling,
// weight bytes of each matrix, op / layer / submission times, the KV and memlock totals, and
// checks each against the limits. Independent of the search; the tests' oracle. Nothing when
// the plan holds, else the refusal.
std::optional<PlanRefusal> CheckPlan(const XdnaPlan& plan, const NpuTarget& target);

// A few lines for the load log: programs, xclbins and contexts, submissions, bytes, estimated
// decode and prefill time.
std::string DescribePlan(const XdnaPlan& plan);

}  // namespace tessera
