// GenerateRequest::reuse_prefix_tokens: continuing from ids already in the slot's KV cache
// gives exactly the tokens (and logits) of a full prefill, and runs only the new suffix.
#include <gtest/gtest.h>

#include "engine/generator.h"
#include "engine/model_executor.h"
#include "model/checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

std::unique_ptr<ModelExecutor> LoadStories(const char* placement_spec = "reference",
                                           WeightFormat weights = WeightFormat::kAuto) {
  auto ckpt = OpenCheckpoint(test::SharedDir() + "/models/stories260k");
  EXPECT_TRUE(ckpt) << ckpt.status().message();
  if (!ckpt) return nullptr;
  auto placement = ParsePlacement(placement_spec, (*ckpt)->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return nullptr;
  ModelExecutor::Options options;
  options.max_slots = 2;
  options.backend.weights = weights;
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

namespace tessera {
namespace {

std::vector<int32_t> LongPrompt(int64_t n) {
  std::vector<int32_t> ids = {1};
  for (int64_t i = 1; i < n; ++i) ids.push_back(static_cast<int32_t>(260 + (i * 37) % 200));
  return ids;
}

TEST(PrefillChunks, ChunkedPrefillGivesIdenticalLogits) {
  auto exec = LoadStories("cpu");
  ASSERT_TRUE(exec);
  GenerateRequest req;
  req.prompt_ids = LongPrompt(kPrefillChunkTokens + 200);  // two chunks (context: 512)
  req.max_new_tokens = 4;
  req.top_logits_k = 8;
  auto whole = Generate(*exec, 0, req);
  ASSERT_TRUE(whole) << whole.status().message();
  int asked = 0;
  req.keep_prefilling = [&] {
    ++asked;
    return true;
  };
  auto chunked = Generate(*exec, 0, req);
  ASSERT_TRUE(chunked) << chunked.status().message();
  EXPECT_EQ(asked, 1);  // between the two chunks
  EXPECT_EQ(chunked->generated_ids, whole->generated_ids);
  EXPECT_EQ(chunked->top_logits, whole->top_logits);  // bit for bit
}

// The rest of a prompt after a cached prefix may be one row past a 128-row block (here 129
// rows from position 96). The backend then does not run that last row alone: a lone row takes
// the decode arithmetic, which sums bf16 weights differently, and the bits would depend on
// where the cached prefix ended.
TEST(PrefillChunks, ARestOneRowPastABlockGivesTheWholePromptsBits) {
  auto exec = LoadStories("cpu", WeightFormat::kBF16);
  ASSERT_TRUE(exec);
  GenerateRequest req;
  req.prompt_ids = LongPrompt(225);
  req.max_new_tokens = 4;
  req.top_logits_k = 8;
  auto whole = Generate(*exec, 0, req);
  ASSERT_TRUE(whole) << whole.status().message();
  req.reuse_prefix_tokens = 96;
  auto rest = Generate(*exec, 0, req);
  ASSERT_TRUE(rest) << rest.status().message();
  EXPECT_EQ(rest->timings.prefill_tokens, 129);
  EXPECT_EQ(rest->generated_ids, whole->generated_ids);
  EXPECT_EQ(rest->top_logits, whole->top_logits);  // bit for bit
}

TEST(PrefillChunks, CancellingBetweenChunksStopsBeforeTheFirstToken) {
  auto exec = LoadStories("cpu");
  ASSERT_TRUE(exec);
  GenerateRequest req;
  req.prompt_ids = LongPrompt(kPrefillChunkTokens + 100);
  req.max_new_tokens = 4;
  int tokens = 0;
  req.on_token = [&](int32_t) { return ++tokens > 0; };
  req.keep_prefilling = [] { return false; };
  auto r = Generate(*exec, 0, req);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->stop_reason, StopReason::kCancelled);
  EXPECT_TRUE(r->generated_ids.empty());
  EXPECT_EQ(tokens, 0);
  EXPECT_EQ(r->timings.prefill_tokens, kPrefillChunkTokens);
}

}  // namespace
}  // namespace tessera
