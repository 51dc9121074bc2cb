// The scheduler's prefix cache and prompt chunks on stories260k: a chat turn extending what an
// earlier sequence computed runs only its new suffix and gives exactly the tokens (and logits)
// of a full prefill; chunking a prompt, or resuming it one row past a 128-row block, changes
// no bit; cancelling between a prompt's chunks ends it before its first token.
#include <gtest/gtest.h>

#include <optional>

#include "engine/model_executor.h"
#include "engine/run_sequence.h"
#include "engine/scheduler.h"
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

constexpr Scheduler::Options kNoCache{.reuse_prefixes = false};

TEST(ReusePrefix, SuffixPrefillMatchesFullPrefill) {
  auto exec = LoadStories();
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {});
  // A first turn: its prompt, then 12 generated ids (all but the last enter the cache).
  SequenceRequest first;
  first.prompt_ids = {1, 403, 407, 261, 378, 430};
  first.max_new_tokens = 12;
  auto r1 = RunToEnd(sched, first, 5);
  ASSERT_TRUE(r1) << r1.status().message();
  ASSERT_EQ(r1->generated_ids.size(), 12u);

  // The second turn's prompt extends everything the first turn produced.
  std::vector<int32_t> cached = first.prompt_ids;
  cached.insert(cached.end(), r1->generated_ids.begin(), r1->generated_ids.end() - 1);
  SequenceRequest second = first;
  second.prompt_ids = cached;
  second.prompt_ids.push_back(r1->generated_ids.back());
  for (int32_t id : {267, 365, 261}) second.prompt_ids.push_back(id);
  second.max_new_tokens = 20;
  auto reused = RunToEnd(sched, second, 5);
  ASSERT_TRUE(reused) << reused.status().message();
  EXPECT_EQ(reused->cached_tokens, static_cast<int64_t>(cached.size()));
  EXPECT_EQ(reused->timings.prefill_tokens,
            static_cast<int64_t>(second.prompt_ids.size() - cached.size()));

  // The same prompt from scratch.
  auto full = RunOneSequence(*exec, second, 5, kNoCache);
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

// The same prompt again is found whole in the cache, yet its last two ids run: the last one's
// logits choose the first token, and it runs as a prompt row as it did the first time (a lone
// row would take the decode arithmetic).
TEST(ReusePrefix, TheSamePromptAgainRunsItsLastTwoIds) {
  auto exec = LoadStories();
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {});
  SequenceRequest req;
  req.prompt_ids = {1, 403, 407, 261};
  req.max_new_tokens = 5;
  auto a = RunToEnd(sched, req);
  ASSERT_TRUE(a) << a.status().message();
  auto b = RunToEnd(sched, req);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(b->cached_tokens, static_cast<int64_t>(req.prompt_ids.size()) - 2);
  EXPECT_EQ(b->timings.prefill_tokens, 2);
  EXPECT_EQ(a->generated_ids, b->generated_ids);
}

std::vector<int32_t> LongPrompt(int64_t n) {
  std::vector<int32_t> ids = {1};
  for (int64_t i = 1; i < n; ++i) ids.push_back(static_cast<int32_t>(260 + (i * 37) % 200));
  return ids;
}

TEST(PrefillChunks, ChunkedPrefillGivesIdenticalLogits) {
  auto exec = LoadStories("cpu");
  ASSERT_TRUE(exec);
  SequenceRequest req;
  req.prompt_ids = LongPrompt(kPrefillChunkTokens + 200);  // two chunks (context: 512)
  req.max_new_tokens = 4;
  // One chunk: the whole step budget beside the slots' decode tokens.
  const int64_t whole_chunk = exec->max_batch_tokens() - exec->max_slots();
  ASSERT_GE(whole_chunk, static_cast<int64_t>(req.prompt_ids.size()));
  auto whole =
      RunOneSequence(*exec, req, 8, {.chunk_tokens = whole_chunk, .reuse_prefixes = false});
  ASSERT_TRUE(whole) << whole.status().message();
  auto chunked =
      RunOneSequence(*exec, req, 8, {.chunk_tokens = kPrefillChunkTokens, .reuse_prefixes = false});
  ASSERT_TRUE(chunked) << chunked.status().message();
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
  SequenceRequest req;
  req.prompt_ids = LongPrompt(225);
  req.max_new_tokens = 4;
  auto whole = RunOneSequence(*exec, req, 8, kNoCache);
  ASSERT_TRUE(whole) << whole.status().message();
  // An earlier prompt shares the first 96 ids (three whole KV blocks), then differs.
  constexpr int64_t kShared = 96;
  static_assert(kShared % kKvBlockTokens == 0);
  Scheduler sched(*exec, {});
  SequenceRequest earlier;
  earlier.prompt_ids.assign(req.prompt_ids.begin(), req.prompt_ids.begin() + kShared);
  earlier.prompt_ids.push_back(5);  // LongPrompt's ids after the first are 260..459
  earlier.max_new_tokens = 1;
  ASSERT_TRUE(RunToEnd(sched, earlier));
  auto rest = RunToEnd(sched, req, 8);
  ASSERT_TRUE(rest) << rest.status().message();
  EXPECT_EQ(rest->cached_tokens, kShared);
  EXPECT_EQ(rest->timings.prefill_tokens, 225 - kShared);
  EXPECT_EQ(rest->generated_ids, whole->generated_ids);
  EXPECT_EQ(rest->top_logits, whole->top_logits);  // bit for bit
}

// Cancel() between two chunks of a prompt (the worker's cancel arriving mid-prefill): the
// next step ends the sequence with no token.
TEST(PrefillChunks, CancellingBetweenChunksStopsBeforeTheFirstToken) {
  auto exec = LoadStories("cpu");
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {.chunk_tokens = kPrefillChunkTokens, .reuse_prefixes = false});
  SequenceRequest req;
  req.prompt_ids = LongPrompt(kPrefillChunkTokens + 100);
  req.max_new_tokens = 4;
  int tokens = 0;
  req.on_token = [&](int32_t) { return ++tokens > 0; };
  std::optional<SequenceResult> done;
  req.on_finish = [&](const SequenceResult& r) { done = r; };
  auto id = sched.Submit(std::move(req));
  ASSERT_TRUE(id) << id.status().message();
  ASSERT_TRUE(sched.Step().ok());  // the first chunk
  ASSERT_FALSE(done);
  sched.Cancel(*id);
  ASSERT_TRUE(sched.Step().ok());
  ASSERT_TRUE(done);
  EXPECT_FALSE(sched.HasWork());
  EXPECT_EQ(done->stop_reason, StopReason::kCancelled);
  EXPECT_TRUE(done->generated_ids.empty());
  EXPECT_EQ(tokens, 0);
}

}  // namespace
}  // namespace tessera
