// Synthetic checkpoints written by the test: every architecture, tied and untied heads, GQA
// ratios 1/2/4/8, F32/BF16/F16 and sharded files, checked against the naive oracle; hybrid
// placement over two backend instances must give logits identical to one backend.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "engine/model_executor.h"
#include "engine/run_sequence.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "naive_forward.h"
#include "test_support.h"

namespace tessera {
namespace {

ModelExecutor::Options ExecOptions(int slots, int64_t max_seq, int64_t max_batch_tokens) {
  ModelExecutor::Options o;
  o.max_slots = slots;
  o.max_seq = max_seq;
  o.max_batch_tokens = max_batch_tokens;
  return o;
}

const std::vector<int32_t> kTokens = {1, 17, 99, 3, 64, 127, 5, 42, 42, 8, 77, 0, 31};

struct Case {
  ModelFamily family;
  bool tied;
  int64_t gqa;  // heads / kv_heads
  DType dtype;
  int shards;
  bool attention_bias = false;
  bool llama3_rope = false;  // Llama 3's RoPE scaling, with every band in use at these lengths
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(ModelFamilyName(c.family)) + (c.tied ? "_tied" : "_untied") + "_gqa" +
         std::to_string(c.gqa) + "_" + std::string(DTypeName(c.dtype)) + "_shards" +
         std::to_string(c.shards) + (c.attention_bias ? "_bias" : "") +
         (c.llama3_rope ? "_llama3rope" : "");
}

SyntheticModelSpec SpecFor(const Case& c) {
  SyntheticModelSpec s;
  s.family = c.family;
  s.tied = c.tied;
  s.heads = 8;
  s.kv_heads = 8 / c.gqa;
  s.head_dim = c.family == ModelFamily::kQwen3 ? 12 : 8;  // qwen3: head_dim != hidden / heads
  s.hidden = 64;
  s.intermediate = 80;
  s.layers = 3;
  s.vocab = 128;
  s.dtype = c.dtype;
  s.shards = c.shards;
  s.attention_bias = c.attention_bias;
  s.rope_theta = c.family == ModelFamily::kLlama ? 10000.0 : 1000000.0;
  s.seed = 7 + static_cast<uint64_t>(c.gqa) * 3 + static_cast<uint64_t>(c.family) * 11;
  if (c.llama3_rope) {
    // head_dim 8, theta 1e4: wavelengths 6.3, 63, 628, 6283. With an original context of 8,
    // 6.3 lies in the blended band (between 8/4 and 8/1) and the others are divided by 8.
    s.rope_llama3 = Llama3RopeScaling{8.0, 1.0, 4.0, 8};
  }
  return s;
}

class SyntheticModel : public ::testing::TestWithParam<Case> {};

TEST_P(SyntheticModel, MatchesNaiveOracleAndHybridPlacement) {
  const Case& c = GetParam();
  test::TempDir tmp;
  std::string dir = tmp.File("model");
  ASSERT_TRUE(WriteSyntheticCheckpoint(dir, SpecFor(c)).ok());
  auto ckpt = OpenCheckpoint(dir);
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ((*ckpt)->config.family, c.family);

  auto run_all = [&](const std::string& spec) {
    auto placement = ParsePlacement(spec, (*ckpt)->config.num_layers);
    EXPECT_TRUE(placement) << placement.status().message();
    auto exec = ModelExecutor::Load(*ckpt, *placement, ExecOptions(1, 32, 5));
    EXPECT_TRUE(exec) << exec.status().message();
    std::vector<float> last(128), all(kTokens.size() * 128);
    EXPECT_TRUE((*exec)->Forward(0, 0, kTokens, last, all).ok());
    return all;
  };
  std::vector<float> single = run_all("reference");
  auto oracle = test::NaiveForward(**ckpt, kTokens);
  double max_diff = 0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    for (size_t v = 0; v < 128; ++v)
      max_diff = std::max(max_diff, std::abs(single[t * 128 + v] - oracle[t][v]));
  }
  EXPECT_LT(max_diff, 2e-4) << "reference backend vs naive oracle";
  // Hybrid placement: identical bits, not merely close.
  EXPECT_EQ(run_all("reference:1,reference"), single);
  EXPECT_EQ(run_all("reference:2,reference:1"), single);
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (ModelFamily f : {ModelFamily::kLlama, ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    for (int64_t gqa : {1, 2, 4, 8}) {
      cases.push_back({f, gqa % 4 == 0, gqa, DType::kF32, 1});
    }
    cases.push_back({f, true, 2, DType::kBF16, 1});
    cases.push_back({f, false, 4, DType::kBF16, 3});
    cases.push_back({f, true, 1, DType::kF16, 2});
  }
  cases.push_back({ModelFamily::kLlama, false, 2, DType::kF32, 1, /*attention_bias=*/true});
  cases.push_back({ModelFamily::kQwen3, true, 2, DType::kBF16, 1, /*attention_bias=*/true});
  cases.push_back({ModelFamily::kLlama, true, 4, DType::kF32, 1, false, /*llama3_rope=*/true});
  cases.push_back({ModelFamily::kLlama, false, 2, DType::kBF16, 1, false, /*llama3_rope=*/true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, SyntheticModel, ::testing::ValuesIn(AllCases()), CaseName);

TEST(SyntheticModel, DecodeStepByStepEqualsPrefill) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kQwen2;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto placement = ParsePlacement("reference", spec.layers);
  ASSERT_TRUE(placement);
  auto exec = ModelExecutor::Load(*ckpt, *placement, ExecOptions(2, 32, 512));
  ASSERT_TRUE(exec);
  std::vector<float> prefill(128), step(128);
  ASSERT_TRUE((*exec)->Forward(0, 0, kTokens, prefill).ok());
  for (size_t i = 0; i < kTokens.size(); ++i) {
    ASSERT_TRUE((*exec)->Forward(1, static_cast<int64_t>(i), std::span(&kTokens[i], 1), step).ok());
  }
  for (size_t v = 0; v < 128; ++v) EXPECT_NEAR(prefill[v], step[v], 1e-5);
}

TEST(SyntheticModel, Bf16CheckpointEqualsF32OfTheSameRoundedWeights) {
  // Widening BF16 is exact, so BF16 weights and the F32 copy of the rounded values agree bit
  // for bit once the weights are the same numbers.
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.dtype = DType::kBF16;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("bf16"), spec).ok());
  auto bf16 = OpenCheckpoint(tmp.File("bf16"));
  ASSERT_TRUE(bf16) << bf16.status().message();
  // Re-write every tensor as F32 with the widened values.
  std::vector<TensorToWrite> f32;
  for (const std::string& name : (*bf16)->files.Names()) {
    const TensorInfo* t = (*bf16)->files.Find(name);
    std::vector<float> v(t->num_elements);
    ASSERT_TRUE(CopyTensorToF32(*t, v).ok());
    f32.push_back(MakeTensor(name, DType::kF32, t->shape, v));
  }
  std::string f32_dir = tmp.File("f32");
  ASSERT_TRUE(WriteSyntheticCheckpoint(f32_dir, spec).ok());  // config files
  ASSERT_TRUE(WriteSafetensors(f32_dir + "/model.safetensors", f32).ok());
  auto f32_ckpt = OpenCheckpoint(f32_dir);
  ASSERT_TRUE(f32_ckpt) << f32_ckpt.status().message();
  auto logits = [&](std::shared_ptr<const Checkpoint> ck) {
    auto exec =
        ModelExecutor::Load(ck, *ParsePlacement("reference", spec.layers), ExecOptions(1, 32, 512));
    std::vector<float> last(128);
    EXPECT_TRUE((*exec)->Forward(0, 0, kTokens, last).ok());
    return last;
  };
  EXPECT_EQ(logits(*bf16), logits(*f32_ckpt));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(SyntheticModel, SeededSamplingIsReproducible) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.tied = false;  // an untied head gives O(1) logits: a flat distribution to sample from
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto exec = ModelExecutor::Load(*ckpt, *ParsePlacement("reference", spec.layers),
                                  ExecOptions(1, 64, 512));
  ASSERT_TRUE(exec);
  auto run = [&](int64_t seed) {
    SamplingParams p;
    p.temperature = 1.5;  // flat enough that different seeds diverge quickly
    p.seed = seed;
    auto resolved = ResolveSamplingParams(p, {});
    EXPECT_TRUE(resolved) << resolved.status().message();
    SequenceRequest req;
    req.prompt_ids = {1, 5, 9};
    req.max_new_tokens = 40;
    req.sampling = *resolved;
    auto r = RunOneSequence(**exec, std::move(req));
    EXPECT_TRUE(r) << r.status().message();
    return r ? r->generated_ids : std::vector<int32_t>{};
  };
  auto a = run(1234);
  EXPECT_EQ(a.size(), 40u);
  EXPECT_EQ(run(1234), a);
  EXPECT_NE(run(99), a);
  // Greedy ignores the seed entirely.
  SequenceRequest greedy;
  greedy.prompt_ids = {1, 5, 9};
  greedy.max_new_tokens = 10;
  auto g1 = RunOneSequence(**exec, std::move(greedy));
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->generated_ids.size(), 10u);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Llama 3's RoPE scaling on the cpu backend (F32) against the reference, and the scaling
// really changes the logits (so the oracle comparison above is not blind to it).
TEST(SyntheticModel, Llama3RopeOnCpuMatchesReferenceAndChangesTheLogits) {
  test::TempDir tmp;
  Case c{ModelFamily::kLlama, true, 2, DType::kF32, 1, false, true};
  SyntheticModelSpec scaled = SpecFor(c);
  SyntheticModelSpec plain = scaled;
  plain.rope_llama3.reset();
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("scaled"), scaled).ok());
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("plain"), plain).ok());
  auto logits = [&](const std::string& dir, const std::string& placement) {
    auto ckpt = OpenCheckpoint(dir);
    EXPECT_TRUE(ckpt) << ckpt.status().message();
    auto exec = ModelExecutor::Load(*ckpt, *ParsePlacement(placement, scaled.layers),
                                    ExecOptions(1, 32, 16));
    EXPECT_TRUE(exec) << exec.status().message();
    std::vector<float> last(128), all(kTokens.size() * 128);
    EXPECT_TRUE((*exec)->Forward(0, 0, kTokens, last, all).ok());
    return all;
  };
  const std::vector<float> ref = logits(tmp.File("scaled"), "reference");
  const std::vector<float> cpu = logits(tmp.File("scaled"), "cpu");
  const std::vector<float> unscaled = logits(tmp.File("plain"), "reference");
  double cpu_diff = 0, scaling_effect = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    cpu_diff = std::max(cpu_diff, static_cast<double>(std::abs(cpu[i] - ref[i])));
    scaling_effect = std::max(scaling_effect, static_cast<double>(std::abs(unscaled[i] - ref[i])));
  }
  EXPECT_LE(cpu_diff, 1e-4);
  EXPECT_GT(scaling_effect, 1e-3);
}

}  // namespace
}  // namespace tessera
