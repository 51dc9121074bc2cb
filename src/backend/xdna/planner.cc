#include "backend/xdna/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

namespace tessera {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kBf16 = 2;
// K of a matrix tile: a multiple of 32 weights (an int4 scale group; 64 bytes of bf16, one
// 512-bit vector load).
constexpr int64_t kKBlock = 32;
// Bounds that keep every product below int64 overflow; far past any model the NPU can hold.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxWidth = int64_t{1} << 22;
constexpr int64_t kMaxBatchRows = 4096;
constexpr int kMaxKvSlots = 256;
constexpr int64_t kMaxLayers = 4096;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t RoundUp(int64_t a, int64_t b) {
  return CeilDiv(a, b) * b;
}

std::string Num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}
std::string KiB(int64_t bytes) {
  return Num(static_cast<double>(bytes) / kKiB) + " KiB";
}
std::string Str(int64_t v) {
  return std::to_string(v);
}

// As TS_ASSIGN_OR_RETURN and TS_RETURN_IF_ERROR, for refusals: the limit goes up with them.
#define PLAN_ASSIGN_OR_REFUSE_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.has_value()) return tmp.refusal();      \
  lhs = std::move(tmp).value()
#define PLAN_ASSIGN_OR_REFUSE(lhs, expr) \
  PLAN_ASSIGN_OR_REFUSE_IMPL(TS_CONCAT(plan_result_, __LINE__), lhs, expr)
#define PLAN_REFUSE_IF(expr)                                \
  do {                                                      \
    if (auto plan_refusal_ = (expr)) return *plan_refusal_; \
  } while (0)

using Refusal = std::optional<PlanRefusal>;  // nothing: no limit was hit

// One tile to place: its per-core buffers and streams, and the units it must cover.
struct TileRequest {
  std::string label;   // "gemv tile for down_proj"
  std::string detail;  // "(64 rows per core, K chunk 512 of 6144)"
  int64_t rows = 0, batch = 1;
  int64_t rows_per_core = 1, k_chunk = 0, batch_rows_per_tile = 1;
  int split = 0, broadcast = 0, outputs = 1;
  int64_t split_tile = 0, broadcast_tile = 0, output_tile = 0;
  int64_t accumulator = 0, scratch = 0, mem_resident = 0;
};

void CountDma(NpuTiling& g) {
  const int in = g.split_streams + g.broadcast_streams, cpc = g.cores_per_column;
  g.core = {in, g.output_streams, 2 * (in + g.output_streams)};  // two BDs: double buffering
  g.mem_tile.in = in + g.output_streams * cpc;                   // outputs joined per core
  g.mem_tile.out = g.split_streams * cpc + g.broadcast_streams + g.output_streams;
  g.mem_tile.buffer_descriptors = 2 * (g.mem_tile.in + g.mem_tile.out);
  g.shim = {in, g.output_streams, 0};
}

int64_t MemTileBytes(const NpuTiling& g) {
  return g.mem_resident_bytes +
         2 * (g.cores_per_column * (g.split_tile_bytes + g.output_tile_bytes) +
              g.broadcast_tile_bytes);
}

// The first limit a tiling at its cores_per_column breaks (DMA, descriptors, mem tile).
std::optional<std::pair<PlanLimit, std::string>> ColumnFailure(const NpuTiling& g,
                                                               const NpuTarget& t) {
  auto over = [](const char* what, int used, int limit) {
    return std::string(what) + " " + std::to_string(used) + " of " + std::to_string(limit);
  };
  if (g.mem_tile.in > t.mem_tile_dma_in)
    return std::pair{PlanLimit::kDmaChannels,
                     over("mem tile in", g.mem_tile.in, t.mem_tile_dma_in)};
  if (g.mem_tile.out > t.mem_tile_dma_out)
    return std::pair{PlanLimit::kDmaChannels,
                     over("mem tile out", g.mem_tile.out, t.mem_tile_dma_out)};
  if (g.shim.in > t.shim_dma_in)
    return std::pair{PlanLimit::kDmaChannels, over("shim in", g.shim.in, t.shim_dma_in)};
  if (g.shim.out > t.shim_dma_out)
    return std::pair{PlanLimit::kDmaChannels, over("shim out", g.shim.out, t.shim_dma_out)};
  if (g.mem_tile.buffer_descriptors > t.mem_tile_buffer_descriptors)
    return std::pair{PlanLimit::kBufferDescriptors, over("mem tile", g.mem_tile.buffer_descriptors,
                                                         t.mem_tile_buffer_descriptors)};
  if (g.mem_tile_bytes > t.mem_tile_bytes)
    return std::pair{PlanLimit::kMemTileMemory,
                     "needs " + KiB(g.mem_tile_bytes) + " of " + KiB(t.mem_tile_bytes)};
  return std::nullopt;
}

// Places one tile: L1 first, then the most cores per column the channels, descriptors and
// mem tile allow, then columns and passes to cover rows x batch.
PlanResult<NpuTiling> FitTile(const TileRequest& r, const NpuTarget& t, int max_columns) {
  NpuTiling g;
  g.rows_per_core = r.rows_per_core;
  g.k_chunk = r.k_chunk;
  g.batch_rows_per_tile = r.batch_rows_per_tile;
  g.split_streams = r.split;
  g.broadcast_streams = r.broadcast;
  g.output_streams = r.outputs;
  g.split_tile_bytes = r.split_tile;
  g.broadcast_tile_bytes = r.broadcast_tile;
  g.output_tile_bytes = r.output_tile;
  g.accumulator_bytes = r.accumulator;
  g.scratch_bytes = r.scratch;
  g.stack_bytes = t.core_stack_bytes;
  g.heap_bytes = t.core_heap_bytes;
  g.mem_resident_bytes = r.mem_resident;
  for (int64_t b : {r.split_tile, r.broadcast_tile, r.output_tile, r.accumulator, r.scratch}) {
    if (b % t.dma_granule_bytes != 0) {
      return RefusePlan(PlanLimit::kShape,
                        r.label + ": a buffer of " + Str(b) + " bytes is not a multiple of the " +
                            Str(t.dma_granule_bytes) + "-byte DMA granule " + r.detail);
    }
  }
  const int64_t streamed = r.split_tile + r.broadcast_tile + r.output_tile;
  g.l1_bytes = 2 * streamed + r.accumulator + r.scratch + g.stack_bytes + g.heap_bytes;
  if (g.l1_bytes > t.core_data_bytes) {
    return RefusePlan(PlanLimit::kCoreMemory,
                      r.label + " needs " + KiB(g.l1_bytes) + " of " + KiB(t.core_data_bytes) +
                          " " + r.detail + ": " + KiB(2 * streamed) + " double-buffered tiles + " +
                          KiB(r.accumulator + r.scratch) + " accumulators/scratch + " +
                          KiB(g.stack_bytes + g.heap_bytes) + " stack and heap");
  }
  g.columns = 1;
  g.cores_per_column = 1;
  CountDma(g);
  if (g.core.in > t.core_dma_in || g.core.out > t.core_dma_out) {
    return RefusePlan(PlanLimit::kDmaChannels,
                      r.label + ": a core needs " + Str(g.core.in) + " in / " + Str(g.core.out) +
                          " out channels of " + Str(t.core_dma_in) + " / " + Str(t.core_dma_out));
  }
  if (g.core.buffer_descriptors > t.core_buffer_descriptors) {
    return RefusePlan(PlanLimit::kBufferDescriptors,
                      r.label + ": a core needs " + Str(g.core.buffer_descriptors) + " of " +
                          Str(t.core_buffer_descriptors) + " buffer descriptors");
  }
  const int64_t tiles = CeilDiv(r.rows, r.rows_per_core) * CeilDiv(r.batch, r.batch_rows_per_tile);
  std::optional<std::pair<PlanLimit, std::string>> failure;
  int cpc = t.core_rows;
  for (; cpc >= 1; --cpc) {
    g.cores_per_column = static_cast<int>(std::min<int64_t>(cpc, tiles));
    CountDma(g);
    g.mem_tile_bytes = MemTileBytes(g);
    failure = ColumnFailure(g, t);
    if (!failure) break;
  }
  if (failure) {
    return RefusePlan(failure->first,
                      r.label + " with one core per column: " + failure->second + " " + r.detail);
  }
  g.columns = static_cast<int>(
      std::clamp<int64_t>(CeilDiv(tiles, g.cores_per_column), 1, std::max(max_columns, 1)));
  g.passes = CeilDiv(tiles, int64_t{g.columns} * g.cores_per_column);
  return g;
}

// The weight tile of a matrix: rows_per_core rows x k_chunk, with scales and an fp32 bias.
int64_t WeightTileBytes(NpuWeightFormat f, int64_t rows, int64_t kc, bool bias) {
  int64_t b = 0;
  switch (f) {
    case NpuWeightFormat::kBf16:
      b = rows * kc * kBf16;
      break;
    case NpuWeightFormat::kInt8:
      b = rows * kc + rows * 4;
      break;
    case NpuWeightFormat::kInt4:
      b = rows * kc / 2 + rows * (kc / kKBlock) * 4;
      break;
  }
  return b + (bias ? rows * 4 : 0);
}

class Planner {
 public:
  Planner(const ModelSpec& spec, const NpuTarget& target, NpuLayerSpan span, const PlanOptions& o)
      : s_(spec), t_(target), span_(span), o_(o) {}

  PlanResult<XdnaPlan> Run();

 private:
  Refusal ValidateOptions();
  Refusal ValidateSpec();
  bool prefill() const { return o_.max_batch_rows > 1; }
  int64_t largest_bucket() const { return p_.context_buckets.back(); }
  double Ms(const PlannedProgram& p) const {
    const double stream = static_cast<double>(p.bytes_per_call) / p_.npu_bytes_per_ms;
    if (p.pass == NpuPass::kDecode) return stream + p_.per_run_overhead_ms;
    const double cores = static_cast<double>(p.tiling.columns) * p.tiling.cores_per_column;
    const double compute = static_cast<double>(p.macs_per_call) / (cores * p_.macs_per_core_ms);
    return std::max(stream, compute) + p_.per_run_overhead_ms;
  }
  int Add(PlannedProgram p) {
    auto it = index_.find(p.name);
    if (it != index_.end()) return it->second;
    const int i = static_cast<int>(p_.programs.size());
    index_[p.name] = i;
    p_.programs.push_back(std::move(p));
    return i;
  }
  PlannedProgram Program(std::string name, std::string xclbin, NpuOpKind kind, NpuPass pass,
                         NpuOpShape shape, NpuTiling tiling, int64_t bytes, int64_t macs) {
    return {std::move(name), std::move(xclbin), kind, pass, shape, tiling, bytes, macs};
  }
  // Completes an op from its programs: decode_ms at the largest bucket, prefill likewise.
  PlannedOp Op(NpuOpKind kind, std::string role, std::vector<int> decode,
               std::vector<int> prefill_programs, int64_t weight_bytes) {
    PlannedOp op;
    op.kind = kind;
    op.role = std::move(role);
    op.shape = p_.programs[decode.back()].shape;
    op.decode_programs = std::move(decode);
    op.prefill_programs = std::move(prefill_programs);
    op.weight_bytes = weight_bytes;
    for (int i : op.decode_programs) op.decode_ms = std::max(op.decode_ms, Ms(p_.programs[i]));
    for (int i : op.prefill_programs) op.prefill_ms = std::max(op.prefill_ms, Ms(p_.programs[i]));
    return op;
  }
  std::string Rows(int64_t b) const { return ".rows" + Str(b); }
  // The decode program, and with prefill the program for max_batch_rows rows.
  struct Passes {
    std::vector<int> decode, prefill;
  };
  template <typename Build>
  PlanResult<Passes> BothPasses(const Build& build) {
    Passes pp;
    PLAN_ASSIGN_OR_REFUSE(int dec, build(NpuPass::kDecode, int64_t{1}));
    pp.decode.push_back(dec);
    if (prefill()) {
      PLAN_ASSIGN_OR_REFUSE(int pre, build(NpuPass::kPrefill, o_.max_batch_rows));
      pp.prefill.push_back(pre);
    }
    return pp;
  }

  PlanResult<PlannedOp> Matmul(const std::string& role, int64_t m, int64_t k, bool bias);
  PlanResult<PlannedOp> Norm(NpuOpKind kind, const std::string& role, int64_t width,
                             int64_t vectors);
  PlanResult<PlannedOp> Elementwise(NpuOpKind kind, const std::string& role,
                                    const std::string& what, int64_t elements);
  PlanResult<PlannedOp> RopeKv(const LayerSpec& l);
  PlanResult<PlannedOp> Attention(const LayerSpec& l);
  PlanResult<PlannedOp> DeltaConv();
  PlanResult<PlannedOp> DeltaRecurrence();
  PlanResult<LayerPlan> Layer(int64_t index);
  Refusal Submissions();

  const ModelSpec& s_;
  const NpuTarget& t_;
  NpuLayerSpan span_;
  const PlanOptions& o_;
  XdnaPlan p_;
  int max_columns_ = 0;
  std::map<std::string, int> index_;
  std::map<std::string, PlannedOp> matmul_cache_;  // by shape: q/k/v and gate/up share
};

Refusal Planner::ValidateOptions() {
  if (t_.columns < 1 || t_.core_rows < 1 || t_.dma_granule_bytes < 1 || t_.core_data_bytes < 1) {
    return RefusePlan(PlanLimit::kColumns, "the target has " + Str(t_.columns) + " columns of " +
                                               Str(t_.core_rows) + " cores; nothing can be placed");
  }
  if (o_.max_columns < 0 || o_.max_columns > t_.columns) {
    return RefusePlan(PlanLimit::kColumns,
                      "programs may span " + Str(o_.max_columns) + " columns, " +
                          std::string(GenerationName(t_.generation)) + " has " + Str(t_.columns));
  }
  if (s_.layers < 1 || s_.layers > kMaxLayers || span_.first < 0 || span_.count < 1 ||
      span_.first > s_.layers - span_.count) {
    return RefusePlan(PlanLimit::kOptions, "layers " + Str(span_.first) + " + " + Str(span_.count) +
                                               " are not a non-empty span of the model's " +
                                               Str(s_.layers) + " layers");
  }
  const std::vector<int64_t>& b = o_.context_buckets;
  if (b.empty()) return RefusePlan(PlanLimit::kContextBucket, "no context buckets given");
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] < 1 || b[i] > kMaxWidth || (i > 0 && b[i] <= b[i - 1])) {
      return RefusePlan(PlanLimit::kContextBucket,
                        "context buckets must be increasing and within 1.." + Str(kMaxWidth) +
                            "; bucket " + Str(static_cast<int64_t>(i)) + " is " + Str(b[i]));
    }
  }
  if (o_.max_context < 1) return RefusePlan(PlanLimit::kOptions, "max_context must be positive");
  if (o_.max_context > b.back()) {
    return RefusePlan(PlanLimit::kContextBucket,
                      "max_context " + Str(o_.max_context) + " is longer than the largest bucket " +
                          Str(b.back()) + "; add a bucket of at least " + Str(o_.max_context));
  }
  auto bad = [](double v) { return !std::isfinite(v) || v <= 0; };
  if (o_.max_batch_rows < 1 || o_.max_batch_rows > kMaxBatchRows || o_.kv_slots < 1 ||
      o_.kv_slots > kMaxKvSlots || bad(o_.command_timeout_ms) || bad(o_.budget_fraction) ||
      o_.budget_fraction > 1 || bad(o_.npu_bytes_per_ms) || bad(o_.npu_clock_mhz) ||
      bad(o_.mac_efficiency) || o_.mac_efficiency > 1 || !std::isfinite(o_.per_run_overhead_ms) ||
      o_.per_run_overhead_ms < 0 || o_.max_runs_per_submission < 1 || o_.hw_contexts_in_use < 0 ||
      o_.xclbins_in_use < 0) {
    return RefusePlan(
        PlanLimit::kOptions,
        "options out of range: max_batch_rows 1.." + Str(kMaxBatchRows) + ", kv_slots 1.." +
            std::to_string(kMaxKvSlots) +
            ", positive timeout, bandwidth, clock, budget fraction and efficiency (<= "
            "1), overhead >= 0, max_runs_per_submission >= 1, in-use counts >= 0");
  }
  return std::nullopt;
}

Refusal Planner::ValidateSpec() {
  const std::pair<const char*, int64_t> dims[] = {{"hidden", s_.hidden},
                                                  {"intermediate", s_.intermediate},
                                                  {"heads", s_.heads},
                                                  {"kv_heads", s_.kv_heads},
                                                  {"head_dim", s_.head_dim}};
  for (const auto& [name, v] : dims) {
    if (v < 1 || v > kMaxDim) {
      return RefusePlan(PlanLimit::kShape,
                        std::string(name) + " " + Str(v) + " is outside 1.." + Str(kMaxDim));
    }
  }
  if (static_cast<int64_t>(s_.layer.size()) != s_.layers || s_.heads % s_.kv_heads != 0 ||
      s_.q_dim != s_.heads * s_.head_dim || s_.kv_dim != s_.kv_heads * s_.head_dim ||
      s_.q_dim > kMaxWidth || s_.ropes.empty()) {
    return RefusePlan(PlanLimit::kShape,
                      "the model spec is inconsistent (layer kinds, heads, q_dim, "
                      "kv_dim or RoPE); build it with BuildModelSpec");
  }
  // Activation rows are bf16: an odd width cannot be moved in 4-byte words.
  const std::pair<const char*, int64_t> rows[] = {
      {"hidden", s_.hidden}, {"intermediate", s_.intermediate}, {"head_dim", s_.head_dim}};
  for (const auto& [name, v] : rows) {
    if (v * kBf16 % t_.dma_granule_bytes != 0) {
      return RefusePlan(PlanLimit::kShape, std::string(name) + " " + Str(v) +
                                               " gives bf16 rows of " + Str(v * kBf16) +
                                               " bytes, not a multiple of the " +
                                               Str(t_.dma_granule_bytes) + "-byte DMA granule");
    }
  }
  for (int64_t i = span_.first; i < span_.first + span_.count; ++i) {
    const LayerSpec& l = s_.layer[static_cast<size_t>(i)];
    if (l.is_attention()) {
      if (l.rope < 0 || l.rope >= static_cast<int>(s_.ropes.size())) {
        return RefusePlan(PlanLimit::kShape, "layer " + Str(i) + " names a missing RoPE");
      }
      const int64_t rot = s_.ropes[static_cast<size_t>(l.rope)].rotary_dim;
      if (rot < 0 || rot > s_.head_dim || rot % 2 != 0) {
        return RefusePlan(PlanLimit::kShape, "rotary_dim " + Str(rot) + " of layer " + Str(i) +
                                                 " is not even and within head_dim");
      }
      if (l.kind == LayerKind::kSlidingAttention && l.window < 1) {
        return RefusePlan(PlanLimit::kShape, "sliding layer " + Str(i) + " has no window");
      }
      continue;
    }
    if (!s_.deltanet) {
      return RefusePlan(PlanLimit::kShape, "layer " + Str(i) +
                                               " is Gated DeltaNet but the spec "
                                               "has no DeltaNet sizes");
    }
    const DeltaNetSpec& n = *s_.deltanet;
    const int64_t d[] = {n.key_heads, n.value_heads, n.key_dim, n.value_dim, n.conv_kernel};
    for (int64_t v : d) {
      if (v < 1 || v > kMaxDim) {
        return RefusePlan(PlanLimit::kShape, "DeltaNet sizes must be within 1.." + Str(kMaxDim));
      }
    }
    if (n.value_heads % n.key_heads != 0 || n.conv_width() > kMaxWidth ||
        n.value_heads * n.key_dim > kMaxWidth || n.key_dim * n.value_dim > kMaxWidth) {
      return RefusePlan(PlanLimit::kShape, "DeltaNet heads " + Str(n.key_heads) + "/" +
                                               Str(n.value_heads) + " x " + Str(n.key_dim) + "/" +
                                               Str(n.value_dim) + " are not supported");
    }
    if (n.key_dim % 2 != 0 || n.value_dim % 2 != 0) {
      return RefusePlan(PlanLimit::kShape, "DeltaNet key/value dims " + Str(n.key_dim) + "/" +
                                               Str(n.value_dim) +
                                               " give bf16 rows that are not whole 4-byte words");
    }
  }
  return std::nullopt;
}

// Decode GEMV and (with prefill) GEMM over the same weight tile layout, so one copy of the
// weights serves both. Candidates from the largest tile down; the fastest estimate wins.
PlanResult<PlannedOp> Planner::Matmul(const std::string& role, int64_t m, int64_t k, bool bias) {
  const std::string fmt(NpuWeightFormatName(o_.weights));
  const std::string key = Str(m) + "x" + Str(k) + (bias ? "b" : "");
  if (auto it = matmul_cache_.find(key); it != matmul_cache_.end()) {
    PlannedOp op = it->second;
    op.role = role;
    return op;
  }
  if (k % kKBlock != 0) {
    return RefusePlan(PlanLimit::kShape, role + ": K " + Str(k) + " is not a multiple of " +
                                             Str(kKBlock) + " (the matrix kernels' K block)");
  }
  std::vector<std::pair<int64_t, int64_t>> cands;  // (rows per core, K chunk)
  for (int64_t r : {64, 32, 16, 8, 4}) {
    if (r > RoundUp(m, 4) && r != 4) continue;
    for (int64_t kc = std::min<int64_t>(k, 8192); kc >= kKBlock; kc -= kKBlock) {
      if (k % kc == 0) cands.emplace_back(r, kc);
    }
  }
  std::stable_sort(cands.begin(), cands.end(),
                   [](auto a, auto b) { return a.first * a.second > b.first * b.second; });
  const int64_t batch = o_.max_batch_rows;
  std::optional<PlannedProgram> best_dec, best_pre;
  double best_ms = 0;
  int64_t best_weight_bytes = 0;
  PlanRefusal last = RefusePlan(PlanLimit::kShape, role + ": no matmul tile candidate");
  for (const auto& [r, kc] : cands) {
    const int64_t wtile = WeightTileBytes(o_.weights, r, kc, bias);
    const std::string detail = "(" + role + " " + Str(m) + " x " + Str(k) + ", " + Str(r) +
                               " rows per core, K chunk " + Str(kc) + ", " + fmt + ")";
    TileRequest q{"gemv tile for " + role,
                  detail,
                  m,
                  1,
                  r,
                  kc,
                  1,
                  1,
                  1,
                  1,
                  wtile,
                  kc * kBf16,
                  r * kBf16,
                  r * 4,
                  0,
                  k * kBf16};
    PlanResult<NpuTiling> gemv = FitTile(q, t_, max_columns_);
    if (!gemv) {
      last = gemv.refusal();
      continue;
    }
    const int64_t weight_bytes = CeilDiv(m, r) * (k / kc) * wtile;
    PlannedProgram dec =
        Program("gemv." + fmt + ".m" + Str(m) + ".k" + Str(k) + (bias ? ".bias" : ""),
                "gemv-" + fmt, NpuOpKind::kMatmul, NpuPass::kDecode, {m, k, 1, 0, 0, 0, 0}, *gemv,
                weight_bytes + k * kBf16 * gemv->columns + m * kBf16, m * k);
    std::optional<PlannedProgram> pre;
    for (int64_t bm : {64, 32, 16, 8, 4}) {
      if (!prefill() || (bm > RoundUp(batch, 4) && bm != 4)) continue;
      const int64_t dequant = o_.weights == NpuWeightFormat::kBf16 ? 0 : r * kc * kBf16;
      TileRequest g{"gemm tile for " + role,
                    "(" + role + " " + Str(m) + " x " + Str(k) + ", " + Str(bm) + " x " + Str(r) +
                        " per core, K chunk " + Str(kc) + ", " + fmt + ")",
                    m,
                    batch,
                    r,
                    kc,
                    bm,
                    1,
                    1,
                    1,
                    wtile,
                    bm * kc * kBf16,
                    bm * r * kBf16,
                    bm * r * 4,
                    dequant,
                    bm * k * kBf16};
      PlanResult<NpuTiling> gemm = FitTile(g, t_, max_columns_);
      if (!gemm) {
        last = gemm.refusal();
        continue;
      }
      pre = Program(
          "gemm." + fmt + ".m" + Str(m) + ".k" + Str(k) + Rows(batch) + (bias ? ".bias" : ""),
          "gemm-" + fmt, NpuOpKind::kMatmul, NpuPass::kPrefill, {m, k, batch, 0, 0, 0, 0}, *gemm,
          weight_bytes * CeilDiv(batch, bm) + batch * k * kBf16 * gemm->columns + batch * m * kBf16,
          batch * CeilDiv(m, r) * r * k);
      break;
    }
    if (prefill() && !pre) continue;
    const double ms = Ms(dec) + (pre ? Ms(*pre) : 0.0);
    if (best_dec && best_ms <= ms) continue;  // ties keep the larger tile
    best_dec = std::move(dec);
    best_pre = std::move(pre);
    best_ms = ms;
    best_weight_bytes = weight_bytes;
  }
  if (!best_dec) return last;
  std::vector<int> pre;
  if (best_pre) pre.push_back(Add(std::move(*best_pre)));
  PlannedOp op = Op(NpuOpKind::kMatmul, role, {Add(std::move(*best_dec))}, pre, best_weight_bytes);
  matmul_cache_[key] = op;
  return op;
}

// The first request that fits, or the refusal of the last (smallest) one.
PlanResult<std::pair<size_t, NpuTiling>> FirstFit(const std::vector<TileRequest>& cands,
                                                  const NpuTarget& t, int max_columns) {
  PlanRefusal last = RefusePlan(PlanLimit::kShape, "no tile candidate");
  for (size_t i = 0; i < cands.size(); ++i) {
    PlanResult<NpuTiling> g = FitTile(cands[i], t, max_columns);
    if (g) return std::pair{i, *g};
    last = g.refusal();
  }
  return last;
}

PlanResult<PlannedOp> Planner::Norm(NpuOpKind kind, const std::string& role, int64_t width,
                                    int64_t vectors) {
  const bool gated = kind == NpuOpKind::kGatedRmsNorm;
  // Gated: each head's o and z rows travel interleaved in one stream (a core has two input
  // channels, and the other carries the gamma).
  const int64_t rows_in = gated ? 2 : 1;
  auto build = [&](NpuPass pass, int64_t batch) -> PlanResult<int> {
    const TileRequest r{.label = std::string(NpuOpKindName(kind)) + " tile for " + role,
                        .detail = "(one row of " + Str(width) + " in L1)",
                        .rows = vectors,
                        .batch = batch,
                        .k_chunk = width,
                        .split = 1,
                        .broadcast = 1,
                        .split_tile = rows_in * width * kBf16,
                        .broadcast_tile = width * kBf16,  // gamma
                        .output_tile = width * kBf16,
                        .accumulator = 8};
    PLAN_ASSIGN_OR_REFUSE(NpuTiling g, FitTile(r, t_, max_columns_));
    return Add(Program(std::string(gated ? "gated_rmsnorm" : "rmsnorm") + ".w" + Str(width) + ".v" +
                           Str(vectors) + Rows(batch),
                       "vector", kind, pass, {vectors, width, batch, 0, 0, 0, 0}, g,
                       vectors * batch * width * kBf16 * (rows_in + 1) + width * kBf16,
                       vectors * batch * width * 2));
  };
  PLAN_ASSIGN_OR_REFUSE(Passes pp, BothPasses(build));
  return Op(kind, role, pp.decode, pp.prefill, width * kBf16);
}

PlanResult<PlannedOp> Planner::Elementwise(NpuOpKind kind, const std::string& role,
                                           const std::string& what, int64_t elements) {
  auto build = [&](NpuPass pass, int64_t batch) -> PlanResult<int> {
    std::vector<TileRequest> c;
    for (int64_t n : {4096, 2048, 1024, 512, 256, 128, 64, 32, 16}) {
      if (n > RoundUp(elements, 16) && n != 16) continue;
      c.push_back({what + " tile for " + role, "(" + Str(n) + " elements per core)", elements,
                   batch, n, 0, 1, 2, 0, 1, 2 * n * kBf16, 0, n * kBf16, 0, 0, 0});
    }
    PLAN_ASSIGN_OR_REFUSE(auto fit, FirstFit(c, t_, max_columns_));
    return Add(Program(what + ".n" + Str(elements) + Rows(batch), "vector", kind, pass,
                       {elements, 0, batch, 0, 0, 0, 0}, fit.second, batch * elements * kBf16 * 3,
                       batch * elements));
  };
  PLAN_ASSIGN_OR_REFUSE(Passes pp, BothPasses(build));
  return Op(kind, role, pp.decode, pp.prefill, 0);
}

// Per-head q/k norm (when the spec has it) and RoPE of q and k, then K and V into the cache.
PlanResult<PlannedOp> Planner::RopeKv(const LayerSpec& l) {
  const int64_t hd = s_.head_dim, rot = s_.ropes[static_cast<size_t>(l.rope)].rotary_dim;
  const int64_t vectors = s_.heads + 2 * s_.kv_heads;
  const int64_t tables = (s_.qk_norm ? 2 * hd * kBf16 : 0) + rot * 4;  // gammas, cos/sin fp32
  const std::string role = s_.qk_norm ? "qk_norm_rope_kv" : "rope_kv";
  auto build = [&](NpuPass pass, int64_t batch) -> PlanResult<int> {
    std::vector<TileRequest> c;
    for (int64_t h : {8, 4, 2, 1}) {
      if (h > vectors && h != 1) continue;
      c.push_back({role + " tile", "(" + Str(h) + " heads of " + Str(hd) + " per core)", vectors,
                   batch, h, hd, 1, 1, tables > 0 ? 1 : 0, 1, h * hd * kBf16, tables,
                   h * hd * kBf16, 0, hd * 4, 0});
    }
    PLAN_ASSIGN_OR_REFUSE(auto fit, FirstFit(c, t_, max_columns_));
    NpuOpShape shape{vectors, hd, batch, 0, s_.heads, s_.kv_heads, hd};
    return Add(Program(role + ".h" + Str(s_.heads) + "kv" + Str(s_.kv_heads) + "d" + Str(hd) +
                           ".r" + Str(rot) + Rows(batch),
                       "vector", NpuOpKind::kQkNormRopeKvWrite, pass, shape, fit.second,
                       batch * (vectors * hd * kBf16 * 2 + tables), batch * vectors * hd * 4));
  };
  PLAN_ASSIGN_OR_REFUSE(Passes pp, BothPasses(build));
  return Op(NpuOpKind::kQkNormRopeKvWrite, role, pp.decode, pp.prefill,
            s_.qk_norm ? 2 * hd * kBf16 : 0);
}

// Decode: each core keeps g query heads of one KV head and streams K/V blocks (K and V of a
// block in one stream, q in the other: a core has two input channels). Prefill: flash
// attention, a block of query rows of one head per core. One program per bucket; a sliding
// layer's KV is its window, so its buckets past the window share one program.
PlanResult<PlannedOp> Planner::Attention(const LayerSpec& l) {
  const int64_t hd = s_.head_dim, heads = s_.heads, kvh = s_.kv_heads, group = heads / kvh;
  const int64_t batch = o_.max_batch_rows;
  const int64_t window = l.kind == LayerKind::kSlidingAttention ? l.window : 0;
  std::vector<int> dec, pre;
  for (int64_t bucket : p_.context_buckets) {
    const int64_t len = window > 0 ? std::min(window, bucket) : bucket;
    std::vector<TileRequest> c;
    for (int64_t g = group; g >= 1; --g) {
      if (group % g != 0) continue;
      for (int64_t kv : {128, 64, 32, 16, 8}) {
        c.push_back({"attention decode tile",
                     "(head_dim " + Str(hd) + ", " + Str(g) + " query heads per core, KV block " +
                         Str(kv) + ")",
                     heads, 1, g, kv, 1, 2, 0, 1, g * hd * kBf16 + 2 * kv * hd * kBf16, 0,
                     g * hd * kBf16, g * hd * 4 + g * 8, g * kv * 4, 0});
      }
    }
    PLAN_ASSIGN_OR_REFUSE(auto fit, FirstFit(c, t_, max_columns_));
    const int64_t g = c[fit.first].rows_per_core;
    NpuOpShape shape{heads, hd, 1, len, heads, kvh, hd};
    const std::string dims = ".h" + Str(heads) + "kv" + Str(kvh) + "d" + Str(hd);
    dec.push_back(Add(Program("attention.decode" + dims + ".ctx" + Str(len), "attention",
                              NpuOpKind::kAttention, NpuPass::kDecode, shape, fit.second,
                              kvh * (group / g) * len * hd * kBf16 * 2 + heads * hd * kBf16 * 2,
                              heads * len * hd * 2)));
    if (!prefill()) continue;
    const int64_t plen = window > 0 ? std::min(window + batch, bucket) : bucket;
    c.clear();
    for (int64_t bq : {64, 32, 16, 8, 4}) {
      if (bq > RoundUp(batch, 4) && bq != 4) continue;
      for (int64_t kv : {64, 32, 16, 8}) {
        c.push_back(
            {"attention prefill tile",
             "(head_dim " + Str(hd) + ", " + Str(bq) + " query rows, KV block " + Str(kv) + ")",
             heads, batch, 1, kv, bq, 2, 0, 1, bq * hd * kBf16 + 2 * kv * hd * kBf16, 0,
             bq * hd * kBf16, bq * hd * 4 + bq * 8, bq * kv * 4, 0});
      }
    }
    PLAN_ASSIGN_OR_REFUSE(auto pfit, FirstFit(c, t_, max_columns_));
    const int64_t bq = c[pfit.first].batch_rows_per_tile;
    NpuOpShape pshape{heads, hd, batch, plen, heads, kvh, hd};
    pre.push_back(Add(
        Program("attention.prefill" + dims + ".ctx" + Str(plen) + Rows(batch), "attention",
                NpuOpKind::kAttention, NpuPass::kPrefill, pshape, pfit.second,
                heads * CeilDiv(batch, bq) * plen * hd * kBf16 * 2 + batch * heads * hd * kBf16 * 2,
                heads * batch * plen * hd * 2)));
  }
  return Op(NpuOpKind::kAttention, window > 0 ? "sliding_attention" : "attention", dec, pre, 0);
}

// Causal depthwise conv of q|k|v over the last conv_kernel inputs, with its history in and out.
PlanResult<PlannedOp> Planner::DeltaConv() {
  const DeltaNetSpec& n = *s_.deltanet;
  const int64_t cw = n.conv_width(), kern = n.conv_kernel, hist = (kern - 1) * 4;
  auto build = [&](NpuPass pass, int64_t batch) -> PlanResult<int> {
    std::vector<TileRequest> c;
    for (int64_t ch : {512, 256, 128, 64, 32, 16, 8, 4, 2}) {
      if (ch > RoundUp(cw, 2) && ch != 2) continue;
      c.push_back({"deltanet conv tile",
                   "(" + Str(ch) + " channels per core, kernel " + Str(kern) + ")", cw, batch, ch,
                   kern, batch, 2, 0, 2, ch * kern * kBf16 + ch * kBf16 + ch * hist, 0,
                   ch * kBf16 + ch * hist, ch * 4, 0, 0});
    }
    PLAN_ASSIGN_OR_REFUSE(auto fit, FirstFit(c, t_, max_columns_));
    return Add(Program("deltanet_conv.c" + Str(cw) + ".k" + Str(kern) + Rows(batch), "deltanet",
                       NpuOpKind::kDeltaNetConv, pass, {cw, kern, batch, 0, 0, 0, 0}, fit.second,
                       cw * (kern * kBf16 + 2 * hist) + batch * cw * kBf16 * 2, batch * cw * kern));
  };
  PLAN_ASSIGN_OR_REFUSE(Passes pp, BothPasses(build));
  return Op(NpuOpKind::kDeltaNetConv, "conv1d", pp.decode, pp.prefill, cw * kern * kBf16);
}

// The state matrices stay in DDR (fp32, 64 KiB per head at 128 x 128: more than a core holds)
// and stream through the cores in column slices, in and out, once per call.
PlanResult<PlannedOp> Planner::DeltaRecurrence() {
  const DeltaNetSpec& n = *s_.deltanet;
  const int64_t vh = n.value_heads, kd = n.key_dim, vd = n.value_dim;
  const int64_t state = vh * kd * vd * 4;
  auto build = [&](NpuPass pass, int64_t batch) -> PlanResult<int> {
    std::vector<TileRequest> c;
    std::vector<int64_t> vec_bytes;
    for (int64_t vc : {64, 32, 16, 8, 4, 2}) {
      if (vd % vc != 0) continue;
      const int64_t vec = 2 * kd * kBf16 + 2 * vc * kBf16 + 8;  // q, k, v, z slices, beta, g
      vec_bytes.push_back(vec);
      c.push_back({"deltanet recurrence tile",
                   "(key_dim " + Str(kd) + ", " + Str(vc) + " state columns per core)", vh * vd,
                   batch, vc, kd, batch, 2, 0, 2, kd * vc * 4 + vec, 0, kd * vc * 4 + vc * 4,
                   vc * 8, kd * 4, 0});
    }
    PLAN_ASSIGN_OR_REFUSE(auto fit, FirstFit(c, t_, max_columns_));
    const int64_t tiles = vh * vd / c[fit.first].rows_per_core;
    return Add(Program("deltanet_recurrence.vh" + Str(vh) + "kh" + Str(n.key_heads) + "kd" +
                           Str(kd) + "vd" + Str(vd) + Rows(batch),
                       "deltanet", NpuOpKind::kDeltaNetRecurrence, pass,
                       {vh * vd, kd, batch, 0, vh, n.key_heads, kd}, fit.second,
                       2 * state + batch * (tiles * vec_bytes[fit.first] + vh * vd * 4),
                       batch * vh * kd * vd * 4));
  };
  PLAN_ASSIGN_OR_REFUSE(Passes pp, BothPasses(build));
  return Op(NpuOpKind::kDeltaNetRecurrence, "recurrence", pp.decode, pp.prefill,
            vh * 8);  // A_log, dt_bias
}

PlanResult<LayerPlan> Planner::Layer(int64_t index) {
  const LayerSpec& l = s_.layer[static_cast<size_t>(index)];
  LayerPlan lp;
  lp.layer = index;
  lp.kind = l.kind;
  const int64_t h = s_.hidden;
  // The limit's name stays first: "core data memory: layer 3: ...".
  auto run = [&](PlanResult<PlannedOp> op) -> Refusal {
    if (!op) return op.refusal().Within("layer " + Str(index));
    lp.ops.push_back(std::move(*op));
    return std::nullopt;
  };
  PLAN_REFUSE_IF(run(Norm(NpuOpKind::kRmsNorm, "input_norm", h, 1)));
  if (l.is_attention()) {
    PLAN_REFUSE_IF(run(Matmul("q_proj", s_.q_proj_rows(), h, s_.qkv_bias)));
    PLAN_REFUSE_IF(run(Matmul("k_proj", s_.kv_dim, h, s_.qkv_bias)));
    PLAN_REFUSE_IF(run(Matmul("v_proj", s_.kv_dim, h, s_.qkv_bias)));
    PLAN_REFUSE_IF(run(RopeKv(l)));
    PLAN_REFUSE_IF(run(Attention(l)));
    if (s_.output_gate) {
      PLAN_REFUSE_IF(
          run(Elementwise(NpuOpKind::kOutputGate, "output_gate", "output_gate", s_.q_dim)));
    }
    PLAN_REFUSE_IF(run(Matmul("o_proj", h, s_.q_dim, s_.o_bias)));
    lp.kv_bytes_per_position = 2 * s_.kv_dim * kBf16;
    lp.kv_window = l.kind == LayerKind::kSlidingAttention ? l.window : 0;
  } else {
    const DeltaNetSpec& n = *s_.deltanet;
    PLAN_REFUSE_IF(run(Matmul("in_proj_qkv", n.conv_width(), h, false)));
    PLAN_REFUSE_IF(run(Matmul("in_proj_z", n.v_width(), h, false)));
    PLAN_REFUSE_IF(run(Matmul("in_proj_b", n.value_heads, h, false)));
    PLAN_REFUSE_IF(run(Matmul("in_proj_a", n.value_heads, h, false)));
    PLAN_REFUSE_IF(run(DeltaConv()));
    PLAN_REFUSE_IF(run(DeltaRecurrence()));
    PLAN_REFUSE_IF(run(Norm(NpuOpKind::kGatedRmsNorm, "delta_norm", n.value_dim, n.value_heads)));
    PLAN_REFUSE_IF(run(Matmul("out_proj", h, n.v_width(), false)));
    lp.state_bytes = (n.conv_state_floats() + n.matrix_state_floats()) * 4;
  }
  if (s_.sandwich_norms) {
    PLAN_REFUSE_IF(run(Norm(NpuOpKind::kRmsNorm, "post_attention_norm", h, 1)));
  }
  PLAN_REFUSE_IF(run(Elementwise(NpuOpKind::kResidualAdd, "mixer_residual", "add", h)));
  PLAN_REFUSE_IF(
      run(Norm(NpuOpKind::kRmsNorm,
               s_.sandwich_norms ? "pre_feedforward_norm" : "post_attention_norm", h, 1)));
  PLAN_REFUSE_IF(run(Matmul("gate_proj", s_.intermediate, h, false)));
  PLAN_REFUSE_IF(run(Matmul("up_proj", s_.intermediate, h, false)));
  PLAN_REFUSE_IF(run(Elementwise(
      NpuOpKind::kGatedActivation, "gated_activation",
      s_.activation == Activation::kGeluTanh ? "act.gelu_tanh" : "act.silu", s_.intermediate)));
  PLAN_REFUSE_IF(run(Matmul("down_proj", h, s_.intermediate, false)));
  if (s_.sandwich_norms) {
    PLAN_REFUSE_IF(run(Norm(NpuOpKind::kRmsNorm, "post_feedforward_norm", h, 1)));
  }
  PLAN_REFUSE_IF(run(Elementwise(NpuOpKind::kResidualAdd, "mlp_residual", "add", h)));
  for (const PlannedOp& op : lp.ops) {
    lp.weight_bytes += op.weight_bytes;
    lp.decode_ms += op.decode_ms;
    lp.prefill_ms += op.prefill_ms;
  }
  return lp;
}

// The chain `s` with the next layer appended.
PlanSubmission WithNextLayer(const XdnaPlan& p, PlanSubmission s) {
  const LayerPlan& lp = p.layer(s.first_layer + s.layer_count);
  ++s.layer_count;
  s.runs += static_cast<int>(lp.ops.size());
  s.decode_ms += lp.decode_ms;
  s.prefill_ms += lp.prefill_ms;
  s.estimated_ms = std::max(s.decode_ms, s.prefill_ms);
  return s;
}

PlanSubmission SumLayers(const XdnaPlan& p, int64_t first, int64_t count) {
  PlanSubmission s;
  s.first_layer = first;
  for (int64_t l = 0; l < count; ++l) s = WithNextLayer(p, s);
  return s;
}

// Greedy chains within the time budget and the run cap; then, if an even split into as many
// chains also fits, that one (so the last chain is not a short remainder).
Refusal Planner::Submissions() {
  const auto fits = [&](const PlanSubmission& s) {
    return s.estimated_ms <= p_.budget_ms && s.runs <= p_.max_runs_per_submission;
  };
  for (const LayerPlan& lp : p_.layers) {
    const PlanSubmission one = SumLayers(p_, lp.layer, 1);
    if (one.estimated_ms > p_.budget_ms) {
      return RefusePlan(
          PlanLimit::kCommandTimeout,
          "layer " + Str(lp.layer) + " alone is estimated at " + Num(one.estimated_ms) +
              " ms (decode " + Num(lp.decode_ms) + " ms, prefill " + Num(lp.prefill_ms) +
              " ms), over the " + Num(p_.budget_ms) + " ms a submission may take (" +
              Num(o_.budget_fraction * 100, 0) + " % of the " + Num(p_.command_timeout_ms, 0) +
              " ms command timeout) at " + Num(p_.npu_bytes_per_ms / 1e6, 2) + " GB/s");
    }
    if (one.runs > p_.max_runs_per_submission) {
      return RefusePlan(PlanLimit::kCommandTimeout,
                        "layer " + Str(lp.layer) + " needs " + Str(one.runs) +
                            " runs; a command chain may hold " + Str(p_.max_runs_per_submission));
    }
  }
  std::vector<PlanSubmission> greedy;
  int64_t first = span_.first;
  const int64_t end = span_.first + span_.count;
  while (first < end) {
    PlanSubmission chain = SumLayers(p_, first, 1);
    while (first + chain.layer_count < end) {
      PlanSubmission longer = WithNextLayer(p_, chain);
      if (!fits(longer)) break;
      chain = longer;
    }
    first += chain.layer_count;
    greedy.push_back(std::move(chain));
  }
  const int64_t chains = static_cast<int64_t>(greedy.size());
  std::vector<PlanSubmission> even;
  first = span_.first;
  for (int64_t c = 0; c < chains; ++c) {
    const int64_t count = span_.count / chains + (c < span_.count % chains ? 1 : 0);
    even.push_back(SumLayers(p_, first, count));
    first += count;
  }
  const bool even_fits = std::all_of(even.begin(), even.end(), fits);
  p_.submissions = even_fits ? std::move(even) : std::move(greedy);
  return std::nullopt;
}

PlanResult<XdnaPlan> Planner::Run() {
  PLAN_REFUSE_IF(ValidateOptions());
  PLAN_REFUSE_IF(ValidateSpec());
  const std::string gen(GenerationName(t_.generation));
  if (o_.hw_contexts_in_use >= t_.hw_context_limit) {
    return RefusePlan(PlanLimit::kHwContexts, "all " + Str(t_.hw_context_limit) + " of " + gen +
                                                  "'s hardware contexts are in use");
  }
  if (o_.xclbins_in_use >= t_.xclbin_limit) {
    return RefusePlan(PlanLimit::kXclbins,
                      "all " + Str(t_.xclbin_limit) + " xclbins a process may register are in use");
  }
  p_.generation = t_.generation;
  p_.span = span_;
  p_.weights = o_.weights;
  for (int64_t b : o_.context_buckets) {
    p_.context_buckets.push_back(b);
    if (b >= o_.max_context) break;
  }
  p_.max_context = o_.max_context;
  p_.max_batch_rows = o_.max_batch_rows;
  p_.kv_slots = o_.kv_slots;
  p_.npu_bytes_per_ms = o_.npu_bytes_per_ms;
  p_.per_run_overhead_ms = o_.per_run_overhead_ms;
  p_.macs_per_core_ms = t_.bf16_macs_per_core_cycle * o_.npu_clock_mhz * 1e3 * o_.mac_efficiency;
  p_.command_timeout_ms = o_.command_timeout_ms;
  p_.budget_ms = o_.command_timeout_ms * o_.budget_fraction;
  p_.max_runs_per_submission = o_.max_runs_per_submission;
  max_columns_ = o_.max_columns > 0 ? o_.max_columns : t_.columns;
  p_.max_columns = max_columns_;
  for (int64_t i = span_.first; i < span_.first + span_.count; ++i) {
    PLAN_ASSIGN_OR_REFUSE(LayerPlan lp, Layer(i));
    p_.layers.push_back(std::move(lp));
  }
  for (const PlannedProgram& prog : p_.programs) {
    auto it = std::find_if(p_.xclbins.begin(), p_.xclbins.end(),
                           [&](const NpuXclbin& x) { return x.name == prog.xclbin; });
    if (it == p_.xclbins.end()) {
      p_.xclbins.push_back({prog.xclbin, prog.tiling.columns});
    } else {
      it->columns = std::max(it->columns, prog.tiling.columns);
    }
  }
  std::string names;
  for (const NpuXclbin& x : p_.xclbins) names += (names.empty() ? "" : ", ") + x.name;
  const int used = static_cast<int>(p_.xclbins.size());
  p_.hw_contexts_in_use = o_.hw_contexts_in_use;
  p_.xclbins_in_use = o_.xclbins_in_use;
  p_.hw_contexts_used = used;
  p_.xclbins_used = used;
  if (o_.hw_contexts_in_use + used > t_.hw_context_limit) {
    return RefusePlan(PlanLimit::kHwContexts, "the plan needs " + Str(used) + " (" + names + "), " +
                                                  Str(o_.hw_contexts_in_use) + " of " + gen +
                                                  "'s " + Str(t_.hw_context_limit) +
                                                  " are in use by other models");
  }
  if (o_.xclbins_in_use + used > t_.xclbin_limit) {
    return RefusePlan(PlanLimit::kXclbins, "the plan needs " + Str(used) + " (" + names + "), " +
                                               Str(o_.xclbins_in_use) + " of the " +
                                               Str(t_.xclbin_limit) +
                                               " a process may register are in use");
  }
  // Totals, first in double so a huge request is refused rather than overflowing.
  double kv_max = 0, total = 0;
  for (const LayerPlan& lp : p_.layers) {
    kv_max += static_cast<double>(lp.kv_bytes_per_position) *
              static_cast<double>(p_.context_buckets.back());
    total += static_cast<double>(lp.weight_bytes) + static_cast<double>(lp.state_bytes);
  }
  if (total + kv_max * o_.kv_slots > 4e18) {
    return RefusePlan(PlanLimit::kShape, "the NPU buffers would need more than 4e18 bytes");
  }
  for (int64_t b : p_.context_buckets) {
    int64_t kv = 0;
    for (const LayerPlan& lp : p_.layers) {
      kv += lp.kv_bytes_per_position * (lp.kv_window > 0 ? std::min(lp.kv_window, b) : b);
    }
    p_.kv_bytes.push_back(kv);
  }
  for (const LayerPlan& lp : p_.layers) {
    p_.weight_bytes += lp.weight_bytes;
    p_.state_bytes += lp.state_bytes;
    p_.decode_ms += lp.decode_ms;
    p_.prefill_ms += lp.prefill_ms;
  }
  p_.memlock_bytes = p_.weight_bytes + p_.kv_slots * (p_.kv_bytes.back() + p_.state_bytes);
  PLAN_REFUSE_IF(Submissions());
  return std::move(p_);
}

}  // namespace

PlanResult<XdnaPlan> PlanXdnaLayers(const ModelSpec& spec, const NpuTarget& target,
                                    NpuLayerSpan span, const PlanOptions& options) {
  return Planner(spec, target, span, options).Run();
}

}  // namespace tessera
