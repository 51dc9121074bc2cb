// GenerateRequest::reuse_prefix_tokens: continuing from ids already in the slot's KV cache
// gives exactly the tokens (and logits) of a full prefill, and runs only the new suffix.
#include <gtest/gtest.h>

#include "engine/generator.h"
#include "engine/model_executor.h"
#include "model/checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

std::unique_ptr<ModelExecutor> LoadStories() {
  auto ckpt = OpenCheckpoint(test::SharedDir() + "/models/stories260k");
  EXPECT_TRUE(ckpt) << ckpt.status().message();
  if (!ckpt) return nullptr;
  auto placement = ParsePlacement("reference", (*ckpt)->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return nullptr;
  ModelExecutor::Options options;
  options.max_slots = 2;
  auto exec = ModelExecutor::Load(*ckpt, *placement, options);
  EXPECT_TRUE(exec) << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

TEST(ReusePrefix, SuffixPrefillMatchesFullPrefill) {
  auto exec = LoadStories();
  ASSERT_TRUE(exec);
  // A first turn: its prompt, then 12 generated ids (all but the last enter the cache).
  GenerateRequest first;
  first.prompt_ids = {1, 403, 407, 261, 378, 430};
  first.max_new_tokens = 12;
  first.top_logits_k = 5;
  auto r1 = Generate(*exec, 0, first);
  ASSERT_TRUE(r1) << r1.status().message();
  ASSERT_EQ(r1->generated_ids.size(), 12u);

  // The second turn's prompt extends everything the first turn produced.
  std::vector<int32_t> cached = first.prompt_ids;
  cached.insert(cached.end(), r1->generated_ids.begin(), r1->generated_ids.end() - 1);
  GenerateRequest second = first;
  second.prompt_ids = cached;
  second.prompt_ids.push_back(r1->generated_ids.back());
  for (int32_t id : {267, 365, 261}) second.prompt_ids.push_back(id);
  second.max_new_tokens = 20;
  second.reuse_prefix_tokens = static_cast<int64_t>(cached.size());
  auto reused = Generate(*exec, 0, second);
  ASSERT_TRUE(reused) << reused.status().message();
  EXPECT_EQ(reused->timings.prefill_tokens,
            static_cast<int64_t>(second.prompt_ids.size() - cached.size()));

  // The same prompt from scratch in another slot.
  second.reuse_prefix_tokens = 0;
  auto full = Generate(*exec, 1, second);
  ASSERT_TRUE(full) << full.status().message();
  EXPECT_EQ(full->timings.prefill_tokens, static_cast<int64_t>(second.prompt_ids.size()));
  EXPECT_EQ(reused->generated_ids, full->generated_ids);
  ASSERT_EQ(reused->top_logits.size(), full->top_logits.size());
  for (size_t i = 0; i < full->top_logits.size(); ++i) {
    for (size_t k = 0; k < full->top_logits[i].size(); ++k) {
      EXPECT_EQ(reused->top_logits[i][k].first, full->top_logits[i][k].first);
      EXPECT_NEAR(reused->top_logits[i][k].second, full->top_logits[i][k].second, 1e-4);
    }
  }
}

TEST(ReusePrefix, WholePromptCachedStillRunsTheLastId) {
  auto exec = LoadStories();
  ASSERT_TRUE(exec);
  GenerateRequest req;
  req.prompt_ids = {1, 403, 407, 261};
  req.max_new_tokens = 5;
  auto a = Generate(*exec, 0, req);
  ASSERT_TRUE(a);
  req.reuse_prefix_tokens = 100;  // more than the prompt: clamped to all but the last id
  auto b = Generate(*exec, 0, req);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(b->timings.prefill_tokens, 1);
  EXPECT_EQ(a->generated_ids, b->generated_ids);
  req.reuse_prefix_tokens = -1;
  auto c = Generate(*exec, 0, req);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
