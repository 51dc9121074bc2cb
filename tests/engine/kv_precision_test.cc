// What a bf16 KV cache costs against fp32, on the same weights and backend: the logits of
// teacher-forced sequences (max and mean absolute difference, top-1 agreement) and greedy
// generation (how many tokens agree before the first divergence), on the real stories260k and
// on synthetic models of three families. Each measurement is printed (the figures in
// docs/backends.md come from this test) and held to a bound well above what was measured,
// so a broken bf16 path (wrong rounding, a misread layout) fails while honest rounding passes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model_executor.h"
#include "engine/run_sequence.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

std::unique_ptr<ModelExecutor> Load(std::shared_ptr<const Checkpoint> ckpt, KvCacheType kv,
                                    WeightFormat format, int64_t context) {
  auto placement = ParsePlacement("cpu", ckpt->config.num_layers);
  EXPECT_TRUE(placement);
  ModelExecutor::Options o;
  o.max_seq = context;
  o.max_batch_tokens = 128;
  o.backend.weights = format;
  o.backend.kv_cache = kv;
  auto exec = ModelExecutor::Load(ckpt, *placement, o);
  EXPECT_TRUE(exec) << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

struct LogitCost {
  double max_abs = 0, mean_abs = 0, top1 = 0;
};

LogitCost CompareLogits(ModelExecutor& a, ModelExecutor& b, const std::vector<int32_t>& tokens) {
  const size_t vocab = static_cast<size_t>(a.spec().vocab);
  std::vector<float> last(vocab), la(tokens.size() * vocab), lb(la.size());
  EXPECT_TRUE(a.Forward(0, 0, tokens, last, la).ok());
  EXPECT_TRUE(b.Forward(0, 0, tokens, last, lb).ok());
  LogitCost c;
  double sum = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    const double d = std::fabs(static_cast<double>(la[i]) - lb[i]);
    c.max_abs = std::max(c.max_abs, d);
    sum += d;
  }
  c.mean_abs = sum / static_cast<double>(la.size());
  c.top1 = test::Top1Agreement(la, lb, static_cast<int64_t>(vocab));
  return c;
}

// Greedy tokens of both executors from `prompt`: how many agree before the first difference.
int64_t AgreeingTokens(ModelExecutor& a, ModelExecutor& b, const std::vector<int32_t>& prompt,
                       int64_t n) {
  SequenceRequest req;
  req.prompt_ids = prompt;
  req.max_new_tokens = n;
  auto ra = RunOneSequence(a, req), rb = RunOneSequence(b, req);
  EXPECT_TRUE(ra && rb);
  if (!ra || !rb) return 0;
  int64_t same = 0;
  while (same < n && ra->generated_ids[static_cast<size_t>(same)] ==
                         rb->generated_ids[static_cast<size_t>(same)])
    ++same;
  return same;
}

TEST(KvPrecision, Stories260kBf16AgainstF32) {
  const std::string dir = test::SharedDir() + "/models/stories260k";
  auto ckpt = OpenCheckpoint(dir);
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto f32 = Load(*ckpt, KvCacheType::kF32, WeightFormat::kF32, 512);
  auto b16 = Load(*ckpt, KvCacheType::kBF16, WeightFormat::kF32, 512);
  ASSERT_TRUE(f32 && b16);
  const LogitCost cost = CompareLogits(*f32, *b16, test::RandomTokens(400, 512, 3));
  std::ifstream in(dir + "/reference_greedy.json");
  const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  int64_t agree = 0, total = 0;
  int identical = 0;
  for (const auto& c : cases) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = c["max_new_tokens"].get<int64_t>();
    const int64_t same = AgreeingTokens(*f32, *b16, prompt, n);
    agree += same;
    total += n;
    identical += same == n;
  }
  std::printf(
      "stories260k: logits max |diff| %.4f, mean %.5f, top-1 %.4f over 400 positions; "
      "greedy %d of %zu cases identical, %lld of %lld tokens before a divergence\n",
      cost.max_abs, cost.mean_abs, cost.top1, identical, cases.size(),
      static_cast<long long>(agree), static_cast<long long>(total));
  EXPECT_LT(cost.max_abs, 0.5);
  EXPECT_GT(cost.top1, 0.97);
  EXPECT_GT(static_cast<double>(agree) / static_cast<double>(total), 0.6);
}

TEST(KvPrecision, SyntheticFamiliesBf16AgainstF32) {
  for (ModelFamily family : {ModelFamily::kQwen2, ModelFamily::kQwen3, ModelFamily::kLlama}) {
    SyntheticModelSpec s;
    s.family = family;
    s.hidden = 128;
    s.intermediate = 256;
    s.layers = 4;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 32;
    s.vocab = 512;
    s.max_position = 1024;
    s.seed = 21 + static_cast<uint64_t>(family);
    test::TempDir tmp;
    ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), s).ok());
    auto ckpt = OpenCheckpoint(tmp.File("m"));
    ASSERT_TRUE(ckpt);
    auto f32 = Load(*ckpt, KvCacheType::kF32, WeightFormat::kBF16, 1024);
    auto b16 = Load(*ckpt, KvCacheType::kBF16, WeightFormat::kBF16, 1024);
    ASSERT_TRUE(f32 && b16);
    const LogitCost cost = CompareLogits(*f32, *b16, test::RandomTokens(700, 512, 5));
    std::printf(
        "%s (bf16 weights): logits max |diff| %.4f, mean %.5f, top-1 %.4f over 700 "
        "positions\n",
        std::string(ModelFamilyName(family)).c_str(), cost.max_abs, cost.mean_abs, cost.top1);
    EXPECT_LT(cost.max_abs, 0.5);
    EXPECT_GT(cost.top1, 0.95);
  }
}

}  // namespace
}  // namespace tessera
