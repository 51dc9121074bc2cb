// stories260k (a real trained Llama) against the exact greedy references of llama2.c run.c.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/model_executor.h"
#include "engine/run_sequence.h"
#include "model/checkpoint.h"
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

std::string ModelDir() {
  return test::SharedDir() + "/models/stories260k";
}

nlohmann::json References() {
  return nlohmann::json::parse(test::ReadFile(ModelDir() + "/reference_greedy.json"));
}

std::unique_ptr<ModelExecutor> LoadStories(const std::string& placement_spec) {
  auto ckpt = OpenCheckpoint(ModelDir());
  EXPECT_TRUE(ckpt) << ckpt.status().message();
  if (!ckpt) return nullptr;
  auto placement = ParsePlacement(placement_spec, (*ckpt)->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return nullptr;
  auto exec = ModelExecutor::Load(*ckpt, *placement, {});
  EXPECT_TRUE(exec) << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

class Stories260k : public ::testing::TestWithParam<std::string> {};

TEST_P(Stories260k, GreedyMatchesRunCTokenForToken) {
  auto exec = LoadStories(GetParam());
  ASSERT_TRUE(exec);
  nlohmann::json refs = References();
  ASSERT_GE(refs["cases"].size(), 1u);
  for (const auto& c : refs["cases"]) {
    SequenceRequest req;
    req.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    req.max_new_tokens = c["max_new_tokens"].get<int64_t>();
    req.stop_ids = {2};  // generation_config eos; the references stop on length
    auto result = RunOneSequence(*exec, std::move(req), /*top_logits_k=*/10);
    ASSERT_TRUE(result) << result.status().message();
    auto expected = c["generated_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(result->generated_ids, expected) << c["id"];
    EXPECT_STREQ(StopReasonName(result->stop_reason), "length");
    // First-step top-10 logits against the float64 reference.
    const auto& top = result->top_logits.at(0);
    const auto& ref_top = c["first_step_top10_logits"];
    ASSERT_EQ(top.size(), ref_top.size());
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_EQ(top[i].first, ref_top[i][0].get<int32_t>()) << c["id"] << " rank " << i;
      EXPECT_NEAR(top[i].second, ref_top[i][1].get<double>(), 1e-4) << c["id"] << " rank " << i;
    }
  }
}

// One backend, and the same model split over two backend instances (hybrid placement).
INSTANTIATE_TEST_SUITE_P(Placements, Stories260k,
                         ::testing::Values("reference", "reference:2,reference",
                                           "reference:1,reference:3,reference"));

TEST(Stories260kOracle, EveryPositionMatchesTheNaiveForward) {
  auto ckpt = OpenCheckpoint(ModelDir());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto placement = ParsePlacement("reference", (*ckpt)->config.num_layers);
  ASSERT_TRUE(placement);
  auto exec = ModelExecutor::Load(*ckpt, *placement, ExecOptions(1, 64, 7));
  ASSERT_TRUE(exec) << exec.status().message();
  std::vector<int32_t> tokens = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376,
                                 298, 315, 421, 395, 317, 426, 338, 401, 396, 267};
  const int64_t vocab = (*exec)->spec().vocab;
  std::vector<float> last(static_cast<size_t>(vocab));
  std::vector<float> all(tokens.size() * static_cast<size_t>(vocab));
  // Prefill in chunks of 7 (max_batch_tokens) must agree with the whole-sequence oracle.
  ASSERT_TRUE((*exec)->Forward(0, 0, tokens, last, all).ok());
  auto oracle = test::NaiveForward(**ckpt, tokens);
  double max_diff = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t v = 0; v < vocab; ++v) {
      max_diff = std::max(max_diff, std::abs(all[t * vocab + v] - oracle[t][v]));
    }
  }
  EXPECT_LT(max_diff, 1e-4);
  for (int64_t v = 0; v < vocab; ++v) EXPECT_EQ(last[v], all[(tokens.size() - 1) * vocab + v]);
}

}  // namespace
}  // namespace tessera
