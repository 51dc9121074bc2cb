// CheckPlan, DescribePlan, refusals and the names of the plan's enums (planner.h). The checker is
// written apart from the search in planner.cc and shares none of its code: it recomputes every
// total from the plan's recorded parts and compares both with the target's limits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <tuple>

#include "backend/xdna/planner.h"

namespace tessera {
namespace {

std::string Str(int64_t v) {
  return std::to_string(v);
}
std::string Num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string KiB(int64_t bytes) {
  return Num(static_cast<double>(bytes) / 1024.0) + " KiB";
}
std::string Bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return Num(b / 1e9, 2) + " GB";
  if (b >= 1e6) return Num(b / 1e6, 1) + " MB";
  return KiB(bytes);
}

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
bool Near(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

// Every limit is checked on the recorded number and on the number recomputed from the
// parts, so a plan that is consistent but over a limit names the limit, and one whose parts
// disagree with its totals is refused as inconsistent.
std::optional<PlanRefusal> CheckTiling(const XdnaPlan& p, const PlannedProgram& prog,
                                       const NpuTarget& t, int xclbin_cols) {
  const NpuTiling& g = prog.tiling;
  const std::string who = "program " + prog.name;
  if (g.columns < 1 || g.columns > t.columns || g.columns > p.max_columns ||
      g.columns > xclbin_cols) {
    return RefusePlan(PlanLimit::kColumns, who + " spans " + Str(g.columns) +
                                               " columns; the target has " + Str(t.columns) +
                                               ", the plan allows " + Str(p.max_columns) +
                                               ", its xclbin " + Str(xclbin_cols));
  }
  if (g.cores_per_column < 1 || g.cores_per_column > t.core_rows) {
    return RefusePlan(PlanLimit::kColumns, who + " uses " + Str(g.cores_per_column) +
                                               " cores per column of " + Str(t.core_rows));
  }
  const int64_t bufs[] = {g.split_tile_bytes,  g.broadcast_tile_bytes, g.output_tile_bytes,
                          g.accumulator_bytes, g.scratch_bytes,        g.mem_resident_bytes};
  for (int64_t b : bufs) {
    if (b < 0 || b % t.dma_granule_bytes != 0) {
      return RefusePlan(PlanLimit::kShape, who + " has a " + Str(b) + "-byte buffer, not whole " +
                                               Str(t.dma_granule_bytes) + "-byte words");
    }
  }
  if (g.stack_bytes < t.core_stack_bytes || g.heap_bytes < t.core_heap_bytes) {
    return RefusePlan(PlanLimit::kCoreMemory,
                      who + " reserves less stack or heap than a core program gets");
  }
  // L1 = 2 x streamed tiles (double-buffered) + accumulator + scratch + stack + heap.
  int64_t l1 =
      SatMul(2, SatAdd(SatAdd(g.split_tile_bytes, g.broadcast_tile_bytes), g.output_tile_bytes));
  for (int64_t b : {g.accumulator_bytes, g.scratch_bytes, g.stack_bytes, g.heap_bytes}) {
    l1 = SatAdd(l1, b);
  }
  if (std::max(l1, g.l1_bytes) > t.core_data_bytes) {
    return RefusePlan(PlanLimit::kCoreMemory, who + " needs " + KiB(std::max(l1, g.l1_bytes)) +
                                                  " of " + KiB(t.core_data_bytes) +
                                                  " core data memory");
  }
  if (l1 != g.l1_bytes) {
    return RefusePlan(PlanLimit::kInconsistent, who + " records L1 " + Str(g.l1_bytes) +
                                                    " bytes, its buffers add up to " + Str(l1));
  }
  // A mem tile stages each core's split and output tiles and the broadcast tile, doubled.
  const int64_t staged =
      SatAdd(SatMul(g.cores_per_column, SatAdd(g.split_tile_bytes, g.output_tile_bytes)),
             g.broadcast_tile_bytes);
  const int64_t mem = SatAdd(g.mem_resident_bytes, SatMul(2, staged));
  if (std::max(mem, g.mem_tile_bytes) > t.mem_tile_bytes) {
    return RefusePlan(PlanLimit::kMemTileMemory, who + " needs " +
                                                     KiB(std::max(mem, g.mem_tile_bytes)) + " of " +
                                                     KiB(t.mem_tile_bytes) + " mem tile memory");
  }
  if (mem != g.mem_tile_bytes) {
    return RefusePlan(
        PlanLimit::kInconsistent,
        who + " records a mem tile of " + Str(g.mem_tile_bytes) + " bytes, not " + Str(mem));
  }
  // Channels from the streams: every input reaches a core through one channel; the mem tile
  // receives each input once and each core's outputs, sends split inputs to every core, the
  // broadcast once and the outputs on to the shim. Two descriptors per channel (ping-pong).
  if (g.split_streams < 0 || g.broadcast_streams < 0 || g.output_streams < 1) {
    return RefusePlan(PlanLimit::kInconsistent, who + " has no output stream");
  }
  const int inputs = g.split_streams + g.broadcast_streams;
  const int cpc = g.cores_per_column;
  const NpuDmaUse core{inputs, g.output_streams, 2 * (inputs + g.output_streams)};
  const int mem_in = inputs + cpc * g.output_streams;
  const int mem_out = cpc * g.split_streams + g.broadcast_streams + g.output_streams;
  const NpuDmaUse mt{mem_in, mem_out, 2 * (mem_in + mem_out)};
  const NpuDmaUse shim{inputs, g.output_streams, 0};
  for (const auto& [c, m, s] :
       {std::tuple{core, mt, shim}, std::tuple{g.core, g.mem_tile, g.shim}}) {
    if (c.in > t.core_dma_in || c.out > t.core_dma_out || m.in > t.mem_tile_dma_in ||
        m.out > t.mem_tile_dma_out || s.in > t.shim_dma_in || s.out > t.shim_dma_out) {
      return RefusePlan(PlanLimit::kDmaChannels,
                        who + " uses channels (in/out) core " + Str(c.in) + "/" + Str(c.out) +
                            " of " + Str(t.core_dma_in) + "/" + Str(t.core_dma_out) +
                            ", mem tile " + Str(m.in) + "/" + Str(m.out) + " of " +
                            Str(t.mem_tile_dma_in) + "/" + Str(t.mem_tile_dma_out) + ", shim " +
                            Str(s.in) + "/" + Str(s.out) + " of " + Str(t.shim_dma_in) + "/" +
                            Str(t.shim_dma_out));
    }
    if (c.buffer_descriptors > t.core_buffer_descriptors ||
        m.buffer_descriptors > t.mem_tile_buffer_descriptors) {
      return RefusePlan(PlanLimit::kBufferDescriptors,
                        who + " uses " + Str(c.buffer_descriptors) + " core (of " +
                            Str(t.core_buffer_descriptors) + ") and " + Str(m.buffer_descriptors) +
                            " mem tile (of " + Str(t.mem_tile_buffer_descriptors) +
                            ") buffer descriptors");
    }
  }
  auto same = [](const NpuDmaUse& a, const NpuDmaUse& b) {
    return a.in == b.in && a.out == b.out && a.buffer_descriptors == b.buffer_descriptors;
  };
  if (!same(core, g.core) || !same(mt, g.mem_tile) || !same(shim, g.shim)) {
    return RefusePlan(PlanLimit::kInconsistent, who + " records DMA use its streams do not give");
  }
  const NpuOpShape& s = prog.shape;
  if (g.rows_per_core < 1 || g.batch_rows_per_tile < 1 || g.passes < 1 || s.rows < 1 ||
      s.batch_rows < 1) {
    return RefusePlan(PlanLimit::kInconsistent, who + " has an empty shape or tiling");
  }
  const int64_t tiles = SatMul((s.rows + g.rows_per_core - 1) / g.rows_per_core,
                               (s.batch_rows + g.batch_rows_per_tile - 1) / g.batch_rows_per_tile);
  if (SatMul(SatMul(g.columns, cpc), g.passes) < tiles) {
    return RefusePlan(PlanLimit::kInconsistent,
                      who + ": " + Str(g.columns) + " x " + Str(cpc) + " cores x " + Str(g.passes) +
                          " passes do not cover " + Str(tiles) + " tiles");
  }
  if (prog.kind == NpuOpKind::kMatmul &&
      (g.k_chunk < 1 || g.k_chunk % 32 != 0 || s.k % g.k_chunk != 0)) {
    return RefusePlan(PlanLimit::kShape, who + ": K chunk " + Str(g.k_chunk) +
                                             " is not a multiple of 32 dividing K " + Str(s.k));
  }
  if (prog.bytes_per_call < 0 || prog.macs_per_call < 0) {
    return RefusePlan(PlanLimit::kInconsistent, who + " has negative traffic");
  }
  return std::nullopt;
}

double CheckerMs(const XdnaPlan& p, const PlannedProgram& prog) {
  double ms = static_cast<double>(prog.bytes_per_call) / p.npu_bytes_per_ms;
  if (prog.pass == NpuPass::kPrefill) {
    const double rate = p.macs_per_core_ms * prog.tiling.columns * prog.tiling.cores_per_column;
    ms = std::max(ms, static_cast<double>(prog.macs_per_call) / rate);
  }
  return ms + p.per_run_overhead_ms;
}

}  // namespace

std::string_view NpuWeightFormatName(NpuWeightFormat format) {
  static constexpr std::string_view kNames[] = {"bf16", "int8", "int4"};
  return kNames[static_cast<size_t>(format)];
}

std::string_view PlanLimitName(PlanLimit limit) {
  static constexpr std::string_view kNames[] = {"core data memory",
                                                "mem tile memory",
                                                "columns",
                                                "DMA channels",
                                                "buffer descriptors",
                                                "hardware contexts",
                                                "xclbins",
                                                "command timeout",
                                                "context bucket",
                                                "shape",
                                                "plan options",
                                                "inconsistent plan"};
  static_assert(std::size(kNames) == static_cast<size_t>(PlanLimit::kInconsistent) + 1);
  return kNames[static_cast<size_t>(limit)];
}

PlanRefusal RefusePlan(PlanLimit limit, const std::string& detail) {
  std::string message = std::string(PlanLimitName(limit)) + ": " + detail;
  switch (limit) {
    case PlanLimit::kShape:
      return {limit, Unsupported(std::move(message))};
    case PlanLimit::kOptions:
    case PlanLimit::kContextBucket:
      return {limit, InvalidArgument(std::move(message))};
    case PlanLimit::kInconsistent:
      return {limit, Corrupt(std::move(message))};
    default:
      return {limit, ResourceExhausted(std::move(message))};
  }
}

PlanRefusal PlanRefusal::Within(const std::string& context) const {
  // RefusePlan wrote the message, so the numbers follow the limit's name and ": ".
  const size_t name = PlanLimitName(limit).size() + 2;
  return RefusePlan(limit, context + ": " + status.message().substr(name));
}

std::string_view NpuOpKindName(NpuOpKind kind) {
  static constexpr std::string_view kNames[] = {
      "rmsnorm",          "matmul",        "qk_norm_rope_kv",
      "attention",        "output_gate",   "residual_add",
      "gated_activation", "deltanet_conv", "deltanet_recurrence",
      "gated_rmsnorm"};
  static_assert(std::size(kNames) == static_cast<size_t>(NpuOpKind::kGatedRmsNorm) + 1);
  return kNames[static_cast<size_t>(kind)];
}

std::optional<PlanRefusal> CheckPlan(const XdnaPlan& p, const NpuTarget& t) {
  auto bad = [](const std::string& m) { return RefusePlan(PlanLimit::kInconsistent, m); };
  if (p.generation != t.generation) return bad("the plan is for another generation");
  if (p.max_columns < 1 || p.max_columns > t.columns) {
    return RefusePlan(PlanLimit::kColumns, "the plan allows " + Str(p.max_columns) +
                                               " columns, the target has " + Str(t.columns));
  }
  if (!(p.npu_bytes_per_ms > 0) || !(p.macs_per_core_ms > 0) || !(p.per_run_overhead_ms >= 0) ||
      !(p.budget_ms > 0) || p.budget_ms > p.command_timeout_ms || p.max_runs_per_submission < 1 ||
      p.kv_slots < 1 || p.max_batch_rows < 1) {
    return bad("the time model or request is out of range");
  }
  std::map<std::string, int> xclbin_cols;
  for (const NpuXclbin& x : p.xclbins) {
    if (!xclbin_cols.emplace(x.name, x.columns).second) return bad("xclbin " + x.name + " twice");
    if (x.columns < 1 || x.columns > t.columns) {
      return RefusePlan(PlanLimit::kColumns, "xclbin " + x.name + " spans " + Str(x.columns) +
                                                 " columns of " + Str(t.columns));
    }
  }
  const int used = static_cast<int>(p.xclbins.size());
  if (p.hw_contexts_used != used || p.xclbins_used != used) {
    return bad("one hardware context per xclbin: " + Str(used) + " xclbins, " +
               Str(p.hw_contexts_used) + " contexts, " + Str(p.xclbins_used) + " xclbins used");
  }
  if (p.hw_contexts_in_use < 0 || p.hw_contexts_in_use + used > t.hw_context_limit) {
    return RefusePlan(PlanLimit::kHwContexts, Str(p.hw_contexts_in_use) + " in use + " + Str(used) +
                                                  " of " + Str(t.hw_context_limit));
  }
  if (p.xclbins_in_use < 0 || p.xclbins_in_use + used > t.xclbin_limit) {
    return RefusePlan(PlanLimit::kXclbins, Str(p.xclbins_in_use) + " in use + " + Str(used) +
                                               " of " + Str(t.xclbin_limit));
  }
  for (const PlannedProgram& prog : p.programs) {
    auto it = xclbin_cols.find(prog.xclbin);
    if (it == xclbin_cols.end()) return bad("program " + prog.name + " has no xclbin");
    if (auto refusal = CheckTiling(p, prog, t, it->second)) return refusal;
  }
  // Buckets and layers.
  const std::vector<int64_t>& b = p.context_buckets;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] < 1 || (i > 0 && b[i] <= b[i - 1])) return bad("context buckets not increasing");
  }
  if (b.empty() || b.back() < p.max_context) {
    return RefusePlan(PlanLimit::kContextBucket,
                      "no bucket holds max_context " + Str(p.max_context));
  }
  if (p.span.count < 1 || static_cast<int64_t>(p.layers.size()) != p.span.count) {
    return bad("the span has " + Str(p.span.count) + " layers, the plan " +
               Str(static_cast<int64_t>(p.layers.size())));
  }
  const int programs = static_cast<int>(p.programs.size());
  int64_t weights = 0, state = 0;
  double decode = 0, prefill = 0;
  std::vector<int64_t> kv(b.size(), 0);
  for (size_t j = 0; j < p.layers.size(); ++j) {
    const LayerPlan& lp = p.layers[j];
    const std::string who = "layer " + Str(lp.layer);
    if (lp.layer != p.span.first + static_cast<int64_t>(j)) return bad(who + " out of order");
    int64_t lw = 0;
    double ld = 0, lpre = 0;
    for (const PlannedOp& op : lp.ops) {
      const std::string what = who + " " + op.role;
      const size_t want_dec = op.kind == NpuOpKind::kAttention ? b.size() : 1;
      const size_t want_pre = p.max_batch_rows > 1 ? want_dec : 0;
      if (op.decode_programs.size() != want_dec || op.prefill_programs.size() != want_pre) {
        return bad(what + " has " + Str(static_cast<int64_t>(op.decode_programs.size())) +
                   " decode and " + Str(static_cast<int64_t>(op.prefill_programs.size())) +
                   " prefill programs");
      }
      double d = 0, pr = 0;
      for (int pass = 0; pass < 2; ++pass) {
        for (int i : pass == 0 ? op.decode_programs : op.prefill_programs) {
          if (i < 0 || i >= programs) return bad(what + " names a missing program");
          const PlannedProgram& prog = p.programs[static_cast<size_t>(i)];
          const NpuPass want = pass == 0 ? NpuPass::kDecode : NpuPass::kPrefill;
          if (prog.kind != op.kind || prog.pass != want) {
            return bad(what + " runs program " + prog.name + " of another kind or pass");
          }
          (pass == 0 ? d : pr) = std::max(pass == 0 ? d : pr, CheckerMs(p, prog));
        }
      }
      if (!Near(d, op.decode_ms) || !Near(pr, op.prefill_ms)) {
        return bad(what + " records " + Num(op.decode_ms, 4) + "/" + Num(op.prefill_ms, 4) +
                   " ms, its programs give " + Num(d, 4) + "/" + Num(pr, 4));
      }
      if (op.kind == NpuOpKind::kMatmul) {
        // The weights are stored once, in the decode program's tile layout; prefill reads it.
        const PlannedProgram& g = p.programs[static_cast<size_t>(op.decode_programs[0])];
        const int64_t tiles =
            SatMul((g.shape.rows + g.tiling.rows_per_core - 1) / g.tiling.rows_per_core,
                   g.shape.k / g.tiling.k_chunk);
        if (SatMul(tiles, g.tiling.split_tile_bytes) != op.weight_bytes) {
          return bad(what + " records " + Str(op.weight_bytes) + " weight bytes, its tiles hold " +
                     Str(SatMul(tiles, g.tiling.split_tile_bytes)));
        }
        for (int i : op.prefill_programs) {
          const NpuTiling& pt = p.programs[static_cast<size_t>(i)].tiling;
          if (pt.split_tile_bytes != g.tiling.split_tile_bytes ||
              pt.rows_per_core != g.tiling.rows_per_core || pt.k_chunk != g.tiling.k_chunk) {
            return bad(what + ": prefill reads another weight layout than decode");
          }
        }
      }
      if (op.weight_bytes < 0) return bad(what + " has negative weights");
      lw = SatAdd(lw, op.weight_bytes);
      ld += op.decode_ms;
      lpre += op.prefill_ms;
    }
    if (lw != lp.weight_bytes || !Near(ld, lp.decode_ms) || !Near(lpre, lp.prefill_ms)) {
      return bad(who + "'s totals are not the sum of its ops");
    }
    if (lp.kv_bytes_per_position < 0 || lp.kv_window < 0 || lp.state_bytes < 0) {
      return bad(who + " has negative KV or state bytes");
    }
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t len = lp.kv_window > 0 ? std::min(lp.kv_window, b[i]) : b[i];
      kv[i] = SatAdd(kv[i], SatMul(lp.kv_bytes_per_position, len));
    }
    weights = SatAdd(weights, lp.weight_bytes);
    state = SatAdd(state, lp.state_bytes);
    decode += lp.decode_ms;
    prefill += lp.prefill_ms;
  }
  if (kv != p.kv_bytes || weights != p.weight_bytes || state != p.state_bytes ||
      SatAdd(weights, SatMul(p.kv_slots, SatAdd(kv.back(), state))) != p.memlock_bytes ||
      !Near(decode, p.decode_ms) || !Near(prefill, p.prefill_ms)) {
    return bad("the KV, state, weight, memlock or time totals are not the sums of the layers");
  }
  // Submissions: contiguous, in order, covering the span, each inside the budget.
  int64_t next = p.span.first;
  const int64_t end = p.span.first + p.span.count;
  for (const PlanSubmission& s : p.submissions) {
    if (s.first_layer != next || s.layer_count < 1 || s.layer_count > end - next) {
      return bad("submissions do not cover layers " + Str(p.span.first) + ".." + Str(end - 1) +
                 " in order");
    }
    int runs = 0;
    double d = 0, pr = 0;
    for (int64_t l = s.first_layer; l < s.first_layer + s.layer_count; ++l) {
      const LayerPlan& lp = p.layers[static_cast<size_t>(l - p.span.first)];
      runs += static_cast<int>(lp.ops.size());
      d += lp.decode_ms;
      pr += lp.prefill_ms;
    }
    const std::string who =
        "the chain of layers " + Str(s.first_layer) + ".." + Str(s.first_layer + s.layer_count - 1);
    if (runs != s.runs || !Near(d, s.decode_ms) || !Near(pr, s.prefill_ms) ||
        !Near(std::max(d, pr), s.estimated_ms)) {
      return bad(who + " records other runs or times than its layers give");
    }
    if (runs > p.max_runs_per_submission) {
      return RefusePlan(PlanLimit::kCommandTimeout,
                        who + " holds " + Str(runs) + " runs of " + Str(p.max_runs_per_submission));
    }
    if (std::max(d, pr) > p.budget_ms) {
      return RefusePlan(PlanLimit::kCommandTimeout, who + " is estimated at " +
                                                        Num(std::max(d, pr)) + " ms, over the " +
                                                        Num(p.budget_ms) + " ms budget");
    }
    next += s.layer_count;
  }
  if (next != end) return bad("submissions stop at layer " + Str(next) + " of " + Str(end));
  return std::nullopt;
}

std::string DescribePlan(const XdnaPlan& p) {
  const int64_t last = p.span.first + p.span.count - 1;
  std::string out = std::string(GenerationName(p.generation)) + " plan: layers " +
                    Str(p.span.first) + "-" + Str(last) +
                    " on the NPU, the rest and the LM head "
                    "on the CPU; " +
                    std::string(NpuWeightFormatName(p.weights)) + " weights " +
                    Bytes(p.weight_bytes) + ", KV " + Bytes(p.kv_bytes.back()) + " at " +
                    Str(p.context_buckets.back()) + " positions";
  if (p.state_bytes > 0) out += ", recurrent state " + Bytes(p.state_bytes);
  out += " per sequence; memlock " + Bytes(p.memlock_bytes) + " for " + Str(p.kv_slots) +
         " sequence(s)\n";
  int cols = 0;
  std::string names;
  for (const NpuXclbin& x : p.xclbins) {
    cols = std::max(cols, x.columns);
    names += (names.empty() ? "" : ", ") + x.name;
  }
  out += "  " + Str(static_cast<int64_t>(p.programs.size())) + " programs in " +
         Str(p.xclbins_used) + " xclbins (" + names + "), " + Str(p.hw_contexts_used) +
         " hardware contexts (+" + Str(p.hw_contexts_in_use) + " in use), up to " + Str(cols) +
         " columns\n";
  std::string sizes;
  double longest = 0;
  for (const PlanSubmission& s : p.submissions) {
    sizes += (sizes.empty() ? "" : "+") + Str(s.layer_count);
    longest = std::max(longest, s.estimated_ms);
  }
  out += "  " + Str(static_cast<int64_t>(p.submissions.size())) + " command chains (" + sizes +
         " layers), longest " + Num(longest) + " ms of a " + Num(p.budget_ms) +
         " ms budget (command timeout " + Num(p.command_timeout_ms, 0) + " ms)\n";
  out += "  estimated (not measured) at " + Num(p.npu_bytes_per_ms / 1e6, 2) + " GB/s: decode " +
         Num(p.decode_ms) + " ms per token";
  if (p.max_batch_rows > 1) {
    out += ", prefill " + Num(p.prefill_ms) + " ms per " + Str(p.max_batch_rows) + " rows";
  }
  return out + "\n";
}

}  // namespace tessera
