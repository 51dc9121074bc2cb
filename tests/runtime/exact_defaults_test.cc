// Exact by default: a model opened the way every command opens it (LoadedModel, default
// options, the cpu placement, a package converted on first use) gives an F32 checkpoint's
// float64 reference logits, prompt and decode alike, for every family tessera runs; and the KV
// cache precision follows the weights (F32: fp32, BF16: bf16) unless it is asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "model/synthetic_checkpoint.h"
#include "naive_forward.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace tessera {
namespace {

struct Family {
  const char* name;
  SyntheticModelSpec spec;
};

SyntheticModelSpec Base(ModelFamily family, uint64_t seed) {
  SyntheticModelSpec s;
  s.family = family;
  s.hidden = 64;
  s.intermediate = 96;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 4352;  // the synthetic tokenizer's ids fit
  s.max_position = 128;
  s.dtype = DType::kF32;
  s.seed = seed;
  return s;
}

std::vector<Family> Families() {
  std::vector<Family> out;
  SyntheticModelSpec llama = Base(ModelFamily::kLlama, 3);
  llama.rope_llama3 = Llama3RopeScaling{8.0, 1.0, 4.0, 32};
  out.push_back({"llama3.2", llama});
  out.push_back({"qwen2.5", Base(ModelFamily::kQwen2, 5)});
  out.push_back({"qwen3", Base(ModelFamily::kQwen3, 7)});
  SyntheticModelSpec qwen35 = Base(ModelFamily::kQwen3_5, 9);
  qwen35.layers = 4;  // three Gated DeltaNet layers, then gated attention
  qwen35.partial_rotary_factor = 0.25;
  out.push_back({"qwen3.5", qwen35});
  SyntheticModelSpec gemma = Base(ModelFamily::kGemma3, 11);
  gemma.layers = 4;
  gemma.kv_heads = 1;
  gemma.sliding_window = 5;  // shorter than the sequence
  gemma.sliding_window_pattern = 2;
  out.push_back({"gemma3", gemma});
  SyntheticModelSpec minicpm = Base(ModelFamily::kMiniCpm, 13);
  minicpm.scale_emb = 12;
  minicpm.scale_depth = 1.4;
  minicpm.dim_model_base = 16;
  out.push_back({"minicpm", minicpm});
  return out;
}

// max |got - oracle| over max |oracle| for rows [begin, end).
double RelativeDiff(const std::vector<float>& got, const std::vector<std::vector<double>>& oracle,
                    size_t begin, size_t end, size_t vocab) {
  double diff = 0, scale = 0;
  for (size_t t = begin; t < end; ++t) {
    for (size_t v = 0; v < vocab; ++v) {
      diff = std::max(diff, std::fabs(got[(t - begin) * vocab + v] - oracle[t][v]));
      scale = std::max(scale, std::fabs(oracle[t][v]));
    }
  }
  EXPECT_GT(scale, 0.1);  // not a degenerate all-zero model
  return diff / scale;
}

TEST(ExactDefaults, F32CheckpointsMatchTheirFloat64ReferenceWithDefaultOptions) {
  test::TempDir tmp;
  const std::vector<int32_t> tokens = test::RandomTokens(40, 4352, 17);
  const size_t prompt = 24;  // then 16 decode steps, each reading the cache
  for (const Family& family : Families()) {
    SCOPED_TRACE(family.name);
    const std::string dir = tmp.File(family.name);
    ASSERT_TRUE(WriteSyntheticModel(dir, family.spec).ok());
    ModelLoadOptions defaults;  // every option as the commands default it
    auto m = LoadedModel::Open(dir, defaults);
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ((*m)->kv_cache(), KvCacheType::kF32);
    EXPECT_TRUE((*m)->checkpoint().tensors.packed);  // it runs from its package
    auto source = OpenCheckpoint(dir);               // the oracle reads the source's tensors
    ASSERT_TRUE(source) << source.status().message();
    const auto oracle = test::NaiveForward(**source, tokens);
    ModelExecutor& exec = (*m)->executor();
    const size_t vocab = static_cast<size_t>(exec.spec().vocab);
    std::vector<float> last(vocab), all(prompt * vocab), steps;
    ASSERT_TRUE(exec.Forward(0, 0, std::span(tokens).first(prompt), last, all).ok());
    for (size_t t = prompt; t < tokens.size(); ++t) {
      ASSERT_TRUE(exec.Forward(0, static_cast<int64_t>(t), std::span(&tokens[t], 1), last).ok());
      steps.insert(steps.end(), last.begin(), last.end());
    }
    const double prefill = RelativeDiff(all, oracle, 0, prompt, vocab);
    const double decode = RelativeDiff(steps, oracle, prompt, tokens.size(), vocab);
    std::printf("[ measured ] %s default options vs float64: prompt %.3g, decode %.3g relative\n",
                family.name, prefill, decode);
    EXPECT_LE(prefill, 1e-4);
    EXPECT_LE(decode, 1e-4);
  }
}

TEST(ExactDefaults, KvCacheFollowsTheWeightsUnlessAsked) {
  test::TempDir tmp;
  SyntheticModelSpec spec = Base(ModelFamily::kQwen3, 21);
  spec.dtype = DType::kBF16;
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("bf16"), spec).ok());
  spec.dtype = DType::kF32;
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("f32"), spec).ok());
  struct Case {
    const char* dir;
    WeightFormat weights;
    std::optional<KvCacheType> asked;
    KvCacheType expected;
  };
  for (const Case& c : {Case{"bf16", WeightFormat::kAuto, std::nullopt, KvCacheType::kBF16},
                        Case{"f32", WeightFormat::kAuto, std::nullopt, KvCacheType::kF32},
                        Case{"f32", WeightFormat::kInt8, std::nullopt, KvCacheType::kBF16},
                        Case{"f32", WeightFormat::kInt4, std::nullopt, KvCacheType::kBF16},
                        Case{"f32", WeightFormat::kAuto, KvCacheType::kBF16, KvCacheType::kBF16},
                        Case{"bf16", WeightFormat::kAuto, KvCacheType::kF32, KvCacheType::kF32}}) {
    SCOPED_TRACE(std::string(c.dir) + " " + std::string(WeightFormatName(c.weights)));
    ModelLoadOptions o;
    o.weights = c.weights;
    o.kv_cache = c.asked;
    o.package_cache = false;
    auto m = LoadedModel::Open(tmp.File(c.dir), o);
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ((*m)->kv_cache(), c.expected);
  }
  EXPECT_FALSE(ParseKvCacheType("fp16"));
  auto parsed = ParseKvCacheType("auto");
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(parsed->has_value());
}

}  // namespace
}  // namespace tessera
