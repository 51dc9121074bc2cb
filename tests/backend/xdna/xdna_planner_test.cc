// The XDNA planner: every plan passes the independent CheckPlan or is refused naming a limit,
// over the real models' shapes and a randomized sweep; each limit has a refusal that reaches
// it; CheckPlan itself refuses broken plans. Expectations are computed here from the spec,
// never read back from the planner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "backend/xdna/planner.h"
#include "model/model_spec.h"
#include "model/synthetic_checkpoint.h"

namespace tessera {
namespace {

const NpuTarget& X1() {
  return NpuTargetFor(XdnaGeneration::kXdna1);
}
const NpuTarget& X2() {
  return NpuTargetFor(XdnaGeneration::kXdna2);
}

// config.json fields as the family parsers set them (model_config.cc), from a preset.
ModelConfig ConfigFor(const SyntheticModelSpec& s) {
  ModelConfig c;
  c.family = s.family;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.intermediate;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.vocab_size = s.vocab;
  c.max_position_embeddings = s.max_position;
  c.rms_norm_eps = s.rms_norm_eps;
  c.rope_theta = s.rope_theta;
  c.rope_llama3 = s.rope_llama3;
  c.tie_word_embeddings = s.tied;
  c.attention_bias = s.family == ModelFamily::kQwen2 || s.attention_bias;
  c.qk_norm = s.family == ModelFamily::kQwen3 || s.family == ModelFamily::kQwen3_5 ||
              s.family == ModelFamily::kGemma3;
  c.partial_rotary_factor = s.partial_rotary_factor;
  for (int64_t i = 0; i < s.layers; ++i) {
    LayerType t = LayerType::kFullAttention;
    if (s.family == ModelFamily::kQwen3_5 && (i + 1) % s.full_attention_interval != 0) {
      t = LayerType::kLinearAttention;
    }
    if (s.family == ModelFamily::kGemma3 && (i + 1) % s.sliding_window_pattern != 0) {
      t = LayerType::kSlidingAttention;
    }
    c.layer_types.push_back(t);
  }
  if (s.family == ModelFamily::kQwen3_5) {
    c.linear_attention =
        LinearAttentionConfig{s.linear_key_heads, s.linear_value_heads, s.linear_key_dim,
                              s.linear_value_dim, s.linear_conv_kernel};
    c.attn_output_gate = true;
    c.norm_one_plus_weight = true;
  }
  if (s.family == ModelFamily::kGemma3) {
    c.sliding_window = s.sliding_window;
    c.rope_local_theta = s.rope_local_theta;
    c.query_pre_attn_scalar = s.query_pre_attn_scalar;
    c.hidden_act = HiddenAct::kGeluTanh;
    c.norm_one_plus_weight = true;
    c.sandwich_norms = true;
  }
  return c;
}

ModelSpec Preset(const std::string& name) {
  Expected<SyntheticModelSpec> s = SyntheticPreset(name);
  EXPECT_TRUE(s.has_value()) << name;
  Expected<ModelSpec> spec = BuildModelSpec(ConfigFor(*s));
  EXPECT_TRUE(spec.has_value()) << name << ": " << spec.status().message();
  return *spec;
}

const char* const kPresets[] = {"smollm2-135m", "qwen2.5-0.5b", "qwen3-0.6b",
                                "minicpm5-2b",  "qwen3.5-0.8b", "gemma3-270m"};
const NpuWeightFormat kFormats[] = {NpuWeightFormat::kBf16, NpuWeightFormat::kInt8,
                                    NpuWeightFormat::kInt4};

NpuLayerSpan All(const ModelSpec& s) {
  return {0, s.layers};
}

// The property every result must have: a plan the oracle accepts, or a refusal naming a
// limit, whose message starts with that limit's name.
void ExpectPlanOrLimit(const PlanResult<XdnaPlan>& plan, const NpuTarget& t,
                       const std::string& what) {
  if (plan) {
    std::optional<PlanRefusal> check = CheckPlan(*plan, t);
    EXPECT_FALSE(check.has_value()) << what << ": " << check->status.message();
  } else {
    const PlanRefusal r = plan.refusal();
    EXPECT_NE(r.limit, PlanLimit::kInconsistent) << what;
    EXPECT_EQ(r.status.message().rfind(std::string(PlanLimitName(r.limit)) + ": ", 0), 0u)
        << what << ": " << r.status.message();
  }
}

PlanLimit RefusedBy(const PlanResult<XdnaPlan>& plan) {
  EXPECT_FALSE(plan.has_value());
  if (plan) return PlanLimit::kInconsistent;
  EXPECT_FALSE(plan.status().ok());
  return plan.refusal().limit;
}

TEST(XdnaPlanner, PresetsPlanOnBothGenerationsEveryFormatAndBucket) {
  for (const char* name : kPresets) {
    const ModelSpec spec = Preset(name);
    for (const NpuTarget* t : {&X1(), &X2()}) {
      for (int64_t count : {spec.layers, std::min<int64_t>(3, spec.layers)}) {
        for (NpuWeightFormat f : kFormats) {
          for (int64_t ctx : {512, 1024, 2048, 4096}) {
            for (int64_t rows : {1, 128}) {
              PlanOptions o;
              o.weights = f;
              o.max_context = ctx;
              o.max_batch_rows = rows;
              const std::string what =
                  std::string(name) + " " + std::string(GenerationName(t->generation)) +
                  " layers " + std::to_string(count) + " " + std::string(NpuWeightFormatName(f)) +
                  " ctx " + std::to_string(ctx) + " rows " + std::to_string(rows);
              PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, *t, {0, count}, o);
              // These are the published shapes; each must plan, not merely be refused well.
              ASSERT_TRUE(plan.has_value()) << what << ": " << plan.status().message();
              ExpectPlanOrLimit(plan, *t, what);
              EXPECT_EQ(static_cast<int64_t>(plan->layers.size()), count) << what;
              EXPECT_GE(plan->context_buckets.back(), ctx) << what;
            }
          }
        }
      }
    }
  }
}

TEST(XdnaPlanner, MiniCpm5SplitsIntoSeveralChainsEachInsideTheBudget) {
  const ModelSpec spec = Preset("minicpm5-2b");
  ASSERT_EQ(spec.layers, 42);
  ASSERT_EQ(spec.hidden, 2048);
  const double budget_ms = 2000.0 * 0.5;  // FACTS 4: TDR 2000 ms; half of it per chain
  for (const NpuTarget* t : {&X1(), &X2()}) {
    for (NpuWeightFormat f : kFormats) {
      for (int64_t rows : {1, 128}) {
        PlanOptions o;
        o.weights = f;
        o.max_batch_rows = rows;
        PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, *t, All(spec), o);
        ASSERT_TRUE(plan.has_value()) << plan.status().message();
        ASSERT_FALSE(CheckPlan(*plan, *t).has_value());
        EXPECT_GT(plan->submissions.size(), 1u);
        int64_t next = 0;
        for (const PlanSubmission& s : plan->submissions) {
          EXPECT_EQ(s.first_layer, next);
          EXPECT_LT(s.layer_count, 42);
          double decode = 0, prefill = 0;
          size_t runs = 0;
          for (int64_t l = s.first_layer; l < s.first_layer + s.layer_count; ++l) {
            for (const PlannedOp& op : plan->layer(l).ops) {
              decode += op.decode_ms;
              prefill += op.prefill_ms;
              ++runs;
            }
          }
          EXPECT_LE(std::max(decode, prefill), budget_ms);
          EXPECT_LE(runs, 128u);
          next += s.layer_count;
        }
        EXPECT_EQ(next, 42);
      }
    }
  }
}

TEST(XdnaPlanner, SlowBandwidthSplitsByTimeAndEveryChainFits) {
  const ModelSpec spec = Preset("minicpm5-2b");
  PlanOptions o;
  o.npu_bytes_per_ms = 0.25e6;  // 0.25 GB/s: a bf16 layer (~94 MB) takes ~380 ms
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X1(), All(spec), o);
  ASSERT_TRUE(plan.has_value()) << plan.status().message();
  ASSERT_FALSE(CheckPlan(*plan, X1()).has_value());
  double total = 0;
  for (const LayerPlan& l : plan->layers) total += l.decode_ms;
  EXPECT_GE(static_cast<double>(plan->submissions.size()), std::ceil(total / 1000.0));
  for (const PlanSubmission& s : plan->submissions) {
    double ms = 0;
    for (int64_t l = s.first_layer; l < s.first_layer + s.layer_count; ++l) {
      ms += plan->layer(l).decode_ms;
    }
    EXPECT_LE(ms, 1000.0);
    EXPECT_LT(s.runs, 128);  // the time budget, not the run cap, made this split
  }
}

// Parameters per layer, counted from the spec (matrices only), for the weight-bytes bounds.
int64_t MatrixWeights(const ModelSpec& s, const LayerSpec& l) {
  int64_t n = 3 * s.intermediate * s.hidden;
  if (l.is_attention()) {
    n += s.q_proj_rows() * s.hidden + 2 * s.kv_dim * s.hidden + s.hidden * s.q_dim;
  } else {
    const DeltaNetSpec& d = *s.deltanet;
    n += (d.conv_width() + d.v_width() + 2 * d.value_heads) * s.hidden + s.hidden * d.v_width();
  }
  return n;
}

TEST(XdnaPlanner, WeightAndKvBytesMatchTheSpec) {
  for (const char* name : kPresets) {
    const ModelSpec spec = Preset(name);
    for (NpuWeightFormat f : kFormats) {
      PlanOptions o;
      o.weights = f;
      o.max_context = 3000;  // buckets 512..4096 are all built
      o.kv_slots = 2;
      PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), o);
      ASSERT_TRUE(plan.has_value()) << name << ": " << plan.status().message();
      ASSERT_EQ(plan->context_buckets, (std::vector<int64_t>{512, 1024, 2048, 4096}));
      const double bytes_per_weight = f == NpuWeightFormat::kBf16   ? 2.0
                                      : f == NpuWeightFormat::kInt8 ? 1.0
                                                                    : 0.5;
      double weights = 0;
      for (const LayerSpec& l : spec.layer) weights += MatrixWeights(spec, l) * bytes_per_weight;
      // At least the matrices; at most 30 % more (scales, biases, norms, row padding).
      EXPECT_GE(static_cast<double>(plan->weight_bytes), weights) << name;
      EXPECT_LE(static_cast<double>(plan->weight_bytes), weights * 1.3) << name;
      for (size_t i = 0; i < plan->context_buckets.size(); ++i) {
        const int64_t bucket = plan->context_buckets[i];
        int64_t kv = 0;
        for (const LayerSpec& l : spec.layer) {
          if (!l.is_attention()) continue;
          const int64_t len =
              l.kind == LayerKind::kSlidingAttention ? std::min(l.window, bucket) : bucket;
          kv += 2 * spec.kv_dim * 2 * len;  // K and V, bf16
        }
        EXPECT_EQ(plan->kv_bytes[i], kv) << name << " bucket " << bucket;
      }
      int64_t state = 0;
      if (spec.deltanet) {
        state = spec.count(LayerKind::kGatedDeltaNet) *
                (spec.deltanet->conv_state_floats() + spec.deltanet->matrix_state_floats()) * 4;
      }
      EXPECT_EQ(plan->state_bytes, state) << name;
      EXPECT_EQ(plan->memlock_bytes,
                plan->weight_bytes + 2 * (plan->kv_bytes.back() + plan->state_bytes));
    }
  }
}

// The op sequence a layer must run, from the spec alone.
std::vector<std::string> ExpectedRoles(const ModelSpec& s, const LayerSpec& l) {
  std::vector<std::string> r = {"input_norm"};
  if (l.is_attention()) {
    r.insert(r.end(), {"q_proj", "k_proj", "v_proj", s.qk_norm ? "qk_norm_rope_kv" : "rope_kv",
                       l.kind == LayerKind::kSlidingAttention ? "sliding_attention" : "attention"});
    if (s.output_gate) r.push_back("output_gate");
    r.push_back("o_proj");
  } else {
    r.insert(r.end(), {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "recurrence",
                       "delta_norm", "out_proj"});
  }
  if (s.sandwich_norms) r.push_back("post_attention_norm");
  r.push_back("mixer_residual");
  r.push_back(s.sandwich_norms ? "pre_feedforward_norm" : "post_attention_norm");
  r.insert(r.end(), {"gate_proj", "up_proj", "gated_activation", "down_proj"});
  if (s.sandwich_norms) r.push_back("post_feedforward_norm");
  r.push_back("mlp_residual");
  return r;
}

TEST(XdnaPlanner, EveryLayerKindIsPlannedWithItsOps) {
  for (const char* name : kPresets) {
    const ModelSpec spec = Preset(name);
    PlanOptions o;
    o.max_batch_rows = 64;
    PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), o);
    ASSERT_TRUE(plan.has_value()) << name << ": " << plan.status().message();
    for (const LayerPlan& lp : plan->layers) {
      const LayerSpec& l = spec.layer[static_cast<size_t>(lp.layer)];
      std::vector<std::string> roles;
      for (const PlannedOp& op : lp.ops) {
        roles.push_back(op.role);
        ASSERT_FALSE(op.decode_programs.empty());
        ASSERT_EQ(op.prefill_programs.size(), op.decode_programs.size());
        for (int i : op.decode_programs) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, static_cast<int>(plan->programs.size()));
          EXPECT_EQ(plan->programs[static_cast<size_t>(i)].kind, op.kind);
        }
        if (op.kind == NpuOpKind::kGatedActivation) {
          const std::string& prog = plan->programs[static_cast<size_t>(op.decode_programs[0])].name;
          const bool gelu = spec.activation == Activation::kGeluTanh;
          EXPECT_NE(prog.find(gelu ? "gelu" : "silu"), std::string::npos) << prog;
        }
        if (op.kind == NpuOpKind::kAttention) {
          ASSERT_EQ(op.decode_programs.size(), plan->context_buckets.size());
          for (size_t b = 0; b < op.decode_programs.size(); ++b) {
            const PlannedProgram& p = plan->programs[static_cast<size_t>(op.decode_programs[b])];
            const int64_t bucket = plan->context_buckets[b];
            EXPECT_EQ(p.shape.context,
                      l.kind == LayerKind::kSlidingAttention ? std::min(l.window, bucket) : bucket);
            EXPECT_EQ(p.shape.head_dim, spec.head_dim);
          }
        }
      }
      EXPECT_EQ(roles, ExpectedRoles(spec, l)) << name << " layer " << lp.layer;
    }
  }
}

// A random spec: sizes from plausible (multiples of 64, real head dims) and implausible
// (anything, odd, huge) ranges; random layer kinds; sometimes inconsistent fields.
ModelSpec RandomSpec(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const bool plausible = pick(0, 3) != 0;
  ModelSpec s;
  s.hidden = plausible ? 64 * pick(1, 128) : pick(1, 300000);
  s.intermediate = plausible ? 64 * pick(1, 400) : pick(1, 600000);
  s.head_dim = plausible ? int64_t{32} << pick(0, 4) : pick(1, 4096);
  s.kv_heads = pick(1, plausible ? 16 : 64);
  s.heads = s.kv_heads * pick(1, plausible ? 8 : 40);
  s.q_dim = s.heads * s.head_dim;
  s.kv_dim = s.kv_heads * s.head_dim;
  if (pick(0, 30) == 0) s.q_dim += 2;  // inconsistent on purpose
  s.layers = pick(1, plausible ? 48 : 300);
  s.qkv_bias = pick(0, 1) == 1;
  s.o_bias = pick(0, 3) == 0;
  s.qk_norm = pick(0, 1) == 1;
  s.output_gate = pick(0, 3) == 0;
  s.sandwich_norms = pick(0, 3) == 0;
  s.activation = pick(0, 1) == 1 ? Activation::kGeluTanh : Activation::kSilu;
  RopeSpec rope;
  rope.rotary_dim = std::min<int64_t>(s.head_dim / 2 * 2, 2 * pick(0, 256));
  s.ropes = {rope, rope};
  const bool hybrid = pick(0, 2) == 0;
  if (hybrid && pick(0, 10) != 0) {
    s.deltanet = DeltaNetSpec{pick(1, 32), 0, plausible ? 128 : pick(1, 3000),
                              plausible ? 128 : pick(1, 3000), pick(1, plausible ? 4 : 200)};
    s.deltanet->value_heads = s.deltanet->key_heads * pick(1, 4);
  }
  for (int64_t i = 0; i < s.layers; ++i) {
    LayerSpec l;
    const int64_t k = pick(0, 3);
    if (hybrid && k < 2) l.kind = LayerKind::kGatedDeltaNet;
    if (k == 2 && pick(0, 1) == 1) {
      l.kind = LayerKind::kSlidingAttention;
      l.window = pick(0, 8192);
      l.rope = 1;
    }
    s.layer.push_back(l);
  }
  return s;
}

TEST(XdnaPlanner, RandomShapesEitherPassTheCheckerOrNameALimit) {
  std::mt19937_64 rng(20240916);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int planned = 0, refused = 0;
  std::vector<int> by_limit(static_cast<size_t>(PlanLimit::kInconsistent) + 1, 0);
  for (int i = 0; i < 2000; ++i) {
    const ModelSpec spec = RandomSpec(rng);
    const NpuTarget& t = pick(0, 1) == 0 ? X1() : X2();
    PlanOptions o;
    o.weights = kFormats[pick(0, 2)];
    o.max_context = pick(1, 5000);
    o.max_batch_rows = pick(0, 1) == 0 ? 1 : pick(2, 256);
    o.hw_contexts_in_use = static_cast<int>(pick(0, 3));
    o.xclbins_in_use = static_cast<int>(pick(0, 12));
    o.npu_bytes_per_ms = pick(0, 5) == 0 ? 1e5 : 8e6;
    const int64_t first = pick(0, spec.layers - 1);
    const NpuLayerSpan span{first, pick(1, spec.layers - first)};
    PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, t, span, o);
    ExpectPlanOrLimit(plan, t, "random shape " + std::to_string(i));
    if (plan) {
      ++planned;
    } else {
      ++refused;
      ++by_limit[static_cast<size_t>(plan.refusal().limit)];
    }
  }
  std::cout << "planned " << planned << ", refused " << refused << ":";
  for (size_t l = 0; l < by_limit.size(); ++l) {
    if (by_limit[l] > 0) {
      std::cout << " " << PlanLimitName(static_cast<PlanLimit>(l)) << " " << by_limit[l];
    }
  }
  std::cout << "\n";
  // Not vacuous: both outcomes occur, and refusals come from several limits.
  EXPECT_GT(planned, 200);
  EXPECT_GT(refused, 200);
  EXPECT_GT(by_limit[static_cast<size_t>(PlanLimit::kShape)], 0);
  EXPECT_GT(by_limit[static_cast<size_t>(PlanLimit::kCoreMemory)], 0);
  EXPECT_GT(by_limit[static_cast<size_t>(PlanLimit::kContextBucket)], 0);
  EXPECT_GT(by_limit[static_cast<size_t>(PlanLimit::kCommandTimeout)], 0);
}

// ---- One refusal per limit. ----

TEST(XdnaPlannerRefuses, CoreMemoryForAHeadDimWhoseSmallestAttentionTileOverflows) {
  ModelSpec spec = Preset("qwen3-0.6b");
  spec.head_dim = 1024;
  spec.q_dim = spec.heads * 1024;
  spec.kv_dim = spec.kv_heads * 1024;
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), PlanOptions{});
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kCoreMemory);
  EXPECT_NE(plan.status().message().find("of 64 KiB"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("attention"), std::string::npos);
}

TEST(XdnaPlannerRefuses, CoreMemoryForAHiddenSizeWhoseNormRowOverflows) {
  ModelSpec spec = Preset("smollm2-135m");
  spec.hidden = 8192;
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X1(), All(spec), PlanOptions{});
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kCoreMemory);
  EXPECT_NE(plan.status().message().find("input_norm"), std::string::npos);
}

TEST(XdnaPlannerRefuses, MemTileForAnInputVectorLargerThanTheMemTile) {
  ModelSpec spec = Preset("smollm2-135m");
  spec.intermediate = 262144;  // down_proj's input vector alone is 512 KiB of bf16
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), PlanOptions{});
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kMemTileMemory);
  EXPECT_NE(plan.status().message().find("down_proj"), std::string::npos);
}

TEST(XdnaPlannerRefuses, ColumnsPastTheGeneration) {
  const ModelSpec spec = Preset("qwen3-0.6b");
  PlanOptions o;
  o.max_columns = 8;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), All(spec), o)), PlanLimit::kColumns);
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), o);
  ASSERT_TRUE(plan.has_value()) << plan.status().message();
  EXPECT_FALSE(CheckPlan(*plan, X2()).has_value());
  o.max_columns = 2;  // leave room: every program within two columns
  plan = PlanXdnaLayers(spec, X1(), All(spec), o);
  ASSERT_TRUE(plan.has_value());
  for (const PlannedProgram& p : plan->programs) EXPECT_LE(p.tiling.columns, 2) << p.name;
}

TEST(XdnaPlannerRefuses, DmaChannelsAndBufferDescriptorsOfANarrowerTarget) {
  const ModelSpec spec = Preset("qwen3-0.6b");
  NpuTarget few_channels = X1();
  few_channels.mem_tile_dma_out = 2;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, few_channels, All(spec), PlanOptions{})),
            PlanLimit::kDmaChannels);
  NpuTarget few_bds = X1();
  few_bds.core_buffer_descriptors = 4;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, few_bds, All(spec), PlanOptions{})),
            PlanLimit::kBufferDescriptors);
}

TEST(XdnaPlannerRefuses, HardwareContextsAndXclbinsInUse) {
  const ModelSpec spec = Preset("qwen3-0.6b");
  PlanOptions o;
  o.hw_contexts_in_use = 4;  // decode needs 3 (gemv, vector, attention)
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), All(spec), o)), PlanLimit::kHwContexts);
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), o);
  ASSERT_TRUE(plan.has_value()) << plan.status().message();
  EXPECT_EQ(plan->hw_contexts_used, 3);
  o.hw_contexts_in_use = 0;
  o.xclbins_in_use = 14;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X2(), All(spec), o)), PlanLimit::kXclbins);
}

TEST(XdnaPlannerRefuses, CommandTimeoutWhenOneLayerExceedsTheBudget) {
  const ModelSpec spec = Preset("minicpm5-2b");
  PlanOptions o;
  o.npu_bytes_per_ms = 1e4;  // 10 MB/s
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X1(), All(spec), o);
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kCommandTimeout);
  EXPECT_NE(plan.status().message().find("layer 0"), std::string::npos);
  o = PlanOptions{};
  o.max_runs_per_submission = 5;  // fewer than one layer's runs
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), All(spec), o)), PlanLimit::kCommandTimeout);
}

TEST(XdnaPlannerRefuses, ContextPastTheLargestBucketAndMalformedBuckets) {
  const ModelSpec spec = Preset("qwen3-0.6b");
  PlanOptions o;
  o.max_context = 8192;
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X2(), All(spec), o);
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kContextBucket);
  EXPECT_NE(plan.status().message().find("4096"), std::string::npos);
  o.max_context = 512;
  o.context_buckets = {1024, 512};
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X2(), All(spec), o)), PlanLimit::kContextBucket);
  o.context_buckets = {};
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X2(), All(spec), o)), PlanLimit::kContextBucket);
}

TEST(XdnaPlannerRefuses, ShapesOffTheDmaGranuleOrKernelBlocks) {
  ModelSpec odd = Preset("smollm2-135m");
  odd.hidden = 577;  // bf16 rows of 1154 bytes
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(odd, X1(), All(odd), PlanOptions{});
  EXPECT_EQ(RefusedBy(plan), PlanLimit::kShape);
  EXPECT_NE(plan.status().message().find("4-byte"), std::string::npos);
  ModelSpec k100 = Preset("smollm2-135m");
  k100.hidden = 100;  // word-aligned but not a whole K block
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(k100, X1(), All(k100), PlanOptions{})), PlanLimit::kShape);
  ModelSpec no_sizes = Preset("qwen3.5-0.8b");
  no_sizes.deltanet.reset();
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(no_sizes, X2(), All(no_sizes), PlanOptions{})),
            PlanLimit::kShape);
  // The same spec planned from an attention-only prefix needs no DeltaNet sizes.
  EXPECT_TRUE(PlanXdnaLayers(no_sizes, X2(), {3, 1}, PlanOptions{}).has_value());
}

TEST(XdnaPlannerRefuses, MalformedRequests) {
  const ModelSpec spec = Preset("qwen3-0.6b");
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), {20, 9}, PlanOptions{})), PlanLimit::kOptions);
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), {0, 0}, PlanOptions{})), PlanLimit::kOptions);
  PlanOptions o;
  o.npu_bytes_per_ms = 0;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(spec, X1(), All(spec), o)), PlanLimit::kOptions);
}

TEST(XdnaPlanner, GenerationsDifferInColumnsAndContexts) {
  const ModelSpec spec = Preset("minicpm5-2b");
  PlanResult<XdnaPlan> p1 = PlanXdnaLayers(spec, X1(), All(spec), PlanOptions{});
  PlanResult<XdnaPlan> p2 = PlanXdnaLayers(spec, X2(), All(spec), PlanOptions{});
  ASSERT_TRUE(p1.has_value() && p2.has_value());
  int cols1 = 0, cols2 = 0;
  for (const PlannedProgram& p : p1->programs) cols1 = std::max(cols1, p.tiling.columns);
  for (const PlannedProgram& p : p2->programs) cols2 = std::max(cols2, p.tiling.columns);
  EXPECT_EQ(cols1, 4);
  EXPECT_EQ(cols2, 8);
  // A plan valid on XDNA2 that spans 8 columns is not valid on XDNA1.
  XdnaPlan moved = *p2;
  moved.generation = XdnaGeneration::kXdna1;
  EXPECT_TRUE(CheckPlan(moved, X1()).has_value());
  // qwen3.5 with prefill needs five xclbins; two contexts in use leave XDNA1 only four.
  const ModelSpec hybrid = Preset("qwen3.5-0.8b");
  PlanOptions o;
  o.max_batch_rows = 128;
  o.hw_contexts_in_use = 2;
  EXPECT_EQ(RefusedBy(PlanXdnaLayers(hybrid, X1(), All(hybrid), o)), PlanLimit::kHwContexts);
  PlanResult<XdnaPlan> h2 = PlanXdnaLayers(hybrid, X2(), All(hybrid), o);
  ASSERT_TRUE(h2.has_value()) << h2.status().message();
  EXPECT_EQ(h2->hw_contexts_used, 5);
}

TEST(XdnaPlanner, DescribePlanNamesProgramsChainsAndBytes) {
  const ModelSpec spec = Preset("minicpm5-2b");
  PlanOptions o;
  o.max_batch_rows = 128;
  PlanResult<XdnaPlan> plan = PlanXdnaLayers(spec, X1(), All(spec), o);
  ASSERT_TRUE(plan.has_value());
  const std::string text = DescribePlan(*plan);
  EXPECT_NE(text.find("xdna1 plan: layers 0-41"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(plan->submissions.size()) + " command chains"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(std::to_string(plan->programs.size()) + " programs"), std::string::npos);
  EXPECT_NE(text.find("memlock"), std::string::npos);
  EXPECT_NE(text.find("decode"), std::string::npos);
  std::cout << text;
}

TEST(XdnaPlanner, RefusePlanNamesItsLimitFirstAndKeepsItTyped) {
  for (int i = 0; i <= static_cast<int>(PlanLimit::kInconsistent); ++i) {
    const PlanLimit l = static_cast<PlanLimit>(i);
    const PlanRefusal r = RefusePlan(l, "detail");
    EXPECT_EQ(r.limit, l);
    EXPECT_FALSE(r.status.ok());
    EXPECT_EQ(r.status.message(), std::string(PlanLimitName(l)) + ": detail");
    const PlanRefusal in = r.Within("layer 3");
    EXPECT_EQ(in.limit, l);
    EXPECT_EQ(in.status.code(), r.status.code());
    EXPECT_EQ(in.status.message(), std::string(PlanLimitName(l)) + ": layer 3: detail");
  }
  EXPECT_EQ(RefusePlan(PlanLimit::kShape, "x").status.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(RefusePlan(PlanLimit::kOptions, "x").status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RefusePlan(PlanLimit::kInconsistent, "x").status.code(), ErrorCode::kCorrupt);
  EXPECT_EQ(RefusePlan(PlanLimit::kCoreMemory, "x").status.code(), ErrorCode::kResourceExhausted);
}

// ---- The oracle can fail: break one number of a valid plan at a time. ----

class CheckPlanMutation : public ::testing::Test {
 protected:
  void SetUp() override {
    const ModelSpec spec = Preset("qwen3-0.6b");
    PlanOptions o;
    o.max_batch_rows = 128;
    PlanResult<XdnaPlan> p = PlanXdnaLayers(spec, X1(), All(spec), o);
    ASSERT_TRUE(p.has_value()) << p.status().message();
    plan_ = *p;
    ASSERT_FALSE(CheckPlan(plan_, X1()).has_value());
    ASSERT_GT(plan_.submissions.size(), 1u);
  }
  PlanLimit Broken(const XdnaPlan& p) {
    std::optional<PlanRefusal> r = CheckPlan(p, X1());
    EXPECT_TRUE(r.has_value());
    if (!r) return PlanLimit::kOptions;  // never a checker's limit
    EXPECT_FALSE(r->status.ok());
    return r->limit;
  }
  static PlannedProgram& GemvOf(XdnaPlan& plan) {
    for (PlannedProgram& p : plan.programs) {
      if (p.kind == NpuOpKind::kMatmul && p.pass == NpuPass::kDecode) return p;
    }
    ADD_FAILURE() << "no gemv";
    return plan.programs[0];
  }
  XdnaPlan plan_;
};

TEST_F(CheckPlanMutation, L1OverTheCoreMemory) {
  XdnaPlan p = plan_;
  p.programs[0].tiling.split_tile_bytes = 40 * 1024;  // doubled alone: 80 KiB
  EXPECT_EQ(Broken(p), PlanLimit::kCoreMemory);
  p = plan_;
  p.programs[0].tiling.l1_bytes = 70 * 1024;
  EXPECT_EQ(Broken(p), PlanLimit::kCoreMemory);
  p = plan_;
  p.programs[0].tiling.l1_bytes += 4;  // within 64 KiB but not what the buffers add up to
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  p = plan_;
  p.programs[0].tiling.stack_bytes = 0;
  EXPECT_EQ(Broken(p), PlanLimit::kCoreMemory);
}

TEST_F(CheckPlanMutation, MemTileColumnsChannelsDescriptors) {
  XdnaPlan p = plan_;
  p.programs[0].tiling.mem_resident_bytes = 600 * 1024;
  EXPECT_EQ(Broken(p), PlanLimit::kMemTileMemory);
  p = plan_;
  p.programs[0].tiling.columns = 5;
  EXPECT_EQ(Broken(p), PlanLimit::kColumns);
  p = plan_;
  p.programs[0].tiling.cores_per_column = 5;
  EXPECT_EQ(Broken(p), PlanLimit::kColumns);
  p = plan_;
  p.programs[0].tiling.mem_tile.out = 7;
  EXPECT_EQ(Broken(p), PlanLimit::kDmaChannels);
  p = plan_;
  p.programs[0].tiling.split_streams = 3;  // a core has two input channels
  EXPECT_EQ(Broken(p), PlanLimit::kDmaChannels);
  p = plan_;
  p.programs[0].tiling.core.buffer_descriptors = 17;
  EXPECT_EQ(Broken(p), PlanLimit::kBufferDescriptors);
  p = plan_;
  p.programs[0].tiling.output_tile_bytes += 2;  // half a word
  EXPECT_EQ(Broken(p), PlanLimit::kShape);
}

TEST_F(CheckPlanMutation, CoverageAndWeightLayout) {
  XdnaPlan p = plan_;
  GemvOf(p).tiling.rows_per_core = 1;  // the same cores and passes no longer cover the rows
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  EXPECT_NE(CheckPlan(p, X1())->status.message().find("do not cover"), std::string::npos);
  p = plan_;
  p.layers[0].ops[1].weight_bytes += 4;  // q_proj
  p.layers[0].weight_bytes += 4;
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  p = plan_;
  p.layers[0].ops[1].decode_programs[0] = static_cast<int>(p.programs.size());
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
}

TEST_F(CheckPlanMutation, ChainsOverBudgetOrIncomplete) {
  XdnaPlan p = plan_;
  p.budget_ms = p.submissions[0].estimated_ms / 2;
  EXPECT_EQ(Broken(p), PlanLimit::kCommandTimeout);
  p = plan_;  // all layers in one chain: over the run cap
  PlanSubmission all;
  all.first_layer = 0;
  all.layer_count = p.span.count;
  for (const PlanSubmission& s : p.submissions) {
    all.runs += s.runs;
    all.decode_ms += s.decode_ms;
    all.prefill_ms += s.prefill_ms;
  }
  all.estimated_ms = std::max(all.decode_ms, all.prefill_ms);
  p.submissions = {all};
  EXPECT_EQ(Broken(p), PlanLimit::kCommandTimeout);
  p = plan_;
  p.submissions.pop_back();
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  p = plan_;
  p.layers[3].decode_ms += 1;
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
}

TEST_F(CheckPlanMutation, ContextsXclbinsBucketsAndTotals) {
  XdnaPlan p = plan_;
  p.hw_contexts_in_use = 6 - p.hw_contexts_used + 1;
  EXPECT_EQ(Broken(p), PlanLimit::kHwContexts);
  p = plan_;
  p.xclbins_in_use = 16;
  EXPECT_EQ(Broken(p), PlanLimit::kXclbins);
  p = plan_;
  p.max_context = p.context_buckets.back() + 1;
  EXPECT_EQ(Broken(p), PlanLimit::kContextBucket);
  p = plan_;
  p.kv_bytes[0] += 1;
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  p = plan_;
  p.memlock_bytes -= 1;
  EXPECT_EQ(Broken(p), PlanLimit::kInconsistent);
  p = plan_;
  p.xclbins.pop_back();
  EXPECT_TRUE(CheckPlan(p, X1()).has_value());
}

}  // namespace
}  // namespace tessera
