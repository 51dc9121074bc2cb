// The continuous-batching scheduler: 8 sequences at once with different prompt lengths and
// sampling settings give exactly the tokens each gives alone; cancelling one leaves the others
// intact; a long prompt arriving mid-stream delays the running streams by one chunk per step
// at most (every step still carries their decode tokens); FCFS admission past the slots; the
// prefix cache (shared KV blocks) reuses a shared prefix and changes no result; a small block
// pool preempts and resumes; steps cut to a row limit change no result; cancelled queued
// sequences end at the next step.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/option_scoring.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

constexpr int kSlots = 8;

// The small qwen3-shaped model these tests run.
SyntheticModelSpec SmallSpec() {
  SyntheticModelSpec s;
  s.family = ModelFamily::kQwen3;
  s.hidden = 64;
  s.intermediate = 96;
  s.vocab = 160;
  s.max_position = 512;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  return s;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteSyntheticCheckpoint(tmp_.File("m"), SmallSpec()).ok());
    auto ckpt = OpenCheckpoint(tmp_.File("m"));
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    ckpt_ = *ckpt;
  }

  std::unique_ptr<ModelExecutor> Load(int slots, int64_t batch_tokens, int64_t kv_blocks = 0) {
    auto placement = ParsePlacement("cpu", ckpt_->config.num_layers);
    EXPECT_TRUE(placement);
    ModelExecutor::Options o;
    o.max_slots = slots;
    o.max_seq = 512;
    o.max_batch_tokens = batch_tokens;
    o.backend.weights = WeightFormat::kBF16;  // decode and prompt arithmetic differ here
    o.kv_blocks = kv_blocks;
    auto exec = ModelExecutor::Load(ckpt_, *placement, o);
    EXPECT_TRUE(exec) << exec.status().message();
    return exec ? std::move(*exec) : nullptr;
  }

  // Request i: its own prompt length, and sampling for the odd ones.
  SequenceRequest Request(int i, int64_t max_new = 12) {
    SequenceRequest r;
    const size_t lengths[] = {1, 5, 17, 40, 64, 3, 130, 9};
    r.prompt_ids = test::RandomTokens(lengths[i % 8], 160, 50 + static_cast<uint32_t>(i));
    r.max_new_tokens = max_new;
    if (i % 2 == 1) {
      SamplingParams q;
      q.temperature = 0.9;
      q.top_k = 20;
      q.seed = 1000 + i;
      auto resolved = ResolveSamplingParams(q, {});
      EXPECT_TRUE(resolved);
      r.sampling = *resolved;
      // This random model is sure of its next token; flatten it so sampling has choices.
      r.constrain = [](std::span<float> logits) {
        for (float& v : logits) v *= 0.02f;
      };
    }
    return r;
  }

  test::TempDir tmp_;
  std::shared_ptr<const Checkpoint> ckpt_;
};

// Runs every step until idle; bounded.
void Drain(Scheduler& s) {
  for (int guard = 0; guard < 10000 && s.HasWork(); ++guard) ASSERT_TRUE(s.Step().ok());
  ASSERT_FALSE(s.HasWork());
}

TEST_F(SchedulerTest, EightStreamsGiveTheTokensEachGivesAlone) {
  auto exec = Load(kSlots, kSlots + 32);
  ASSERT_TRUE(exec);
  std::map<int, std::vector<int32_t>> alone, together;
  {
    Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
    for (int i = 0; i < kSlots; ++i) {
      SequenceRequest r = Request(i);
      r.on_finish = [&, i](const SequenceResult& res) { alone[i] = res.generated_ids; };
      ASSERT_TRUE(sched.Submit(std::move(r)));
      Drain(sched);  // one at a time
    }
  }
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  int max_running = 0;
  for (int i = 0; i < kSlots; ++i) {
    SequenceRequest r = Request(i);
    r.on_finish = [&, i](const SequenceResult& res) {
      EXPECT_TRUE(res.status.ok());
      together[i] = res.generated_ids;
    };
    ASSERT_TRUE(sched.Submit(std::move(r)));
  }
  for (int guard = 0; guard < 1000 && sched.HasWork(); ++guard) {
    ASSERT_TRUE(sched.Step().ok());
    max_running = std::max(max_running, sched.running());
  }
  EXPECT_EQ(max_running, kSlots);
  for (int i = 0; i < kSlots; ++i) {
    EXPECT_EQ(alone[i].size(), 12u) << i;
    EXPECT_EQ(alone[i], together[i]) << "sequence " << i;
  }
}

// Option ids index the logits directly: one outside the vocabulary (a tokenizer larger than
// the model) is refused before anything is submitted, single-token options or not.
TEST_F(SchedulerTest, OptionScoringRefusesIdsOutsideTheVocabulary) {
  auto exec = Load(2, 64);
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {});
  const int32_t vocab = static_cast<int32_t>(exec->spec().vocab);
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (const auto& options : {std::vector<std::vector<int32_t>>{{4}, {vocab}},
                              std::vector<std::vector<int32_t>>{{4, 5}, {6, vocab + 100}},
                              std::vector<std::vector<int32_t>>{{-1}}}) {
    int finished = 0;
    auto scores = std::make_shared<OptionScores>(options.size());
    OptionScoring s = SubmitOptionScoring(sched, prompt, options, scores,
                                          [&](const SequenceResult&) { ++finished; }, {});
    ASSERT_FALSE(s.status.ok());
    EXPECT_NE(s.status.message().find("outside the model's"), std::string::npos)
        << s.status.message();
    EXPECT_TRUE(s.ids.empty());
    EXPECT_FALSE(sched.HasWork());
    EXPECT_EQ(finished, 0);
  }
  // In range, the same call scores.
  auto scores = std::make_shared<OptionScores>(2);
  OptionScoring ok = SubmitOptionScoring(sched, prompt, {{4}, {vocab - 1}}, scores, nullptr, {});
  ASSERT_TRUE(ok.status.ok()) << ok.status.message();
  Drain(sched);
  EXPECT_LT(scores->logprob[0], 0.0);
  EXPECT_LT(scores->logprob[1], 0.0);
}

TEST_F(SchedulerTest, CancellingOneLeavesTheOthersIntact) {
  auto exec = Load(4, 4 + 32);
  ASSERT_TRUE(exec);
  std::map<int, SequenceResult> base, with_cancel;
  for (bool cancel : {false, true}) {
    Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
    std::map<int, SequenceResult>& out = cancel ? with_cancel : base;
    uint64_t victim = 0;
    int victim_tokens = 0;
    for (int i = 0; i < 4; ++i) {
      SequenceRequest r = Request(i, 20);
      if (i == 2) r.on_token = [&](int32_t) { return ++victim_tokens < 1000; };
      r.on_finish = [&, i](const SequenceResult& res) { out[i] = res; };
      auto id = sched.Submit(std::move(r));
      ASSERT_TRUE(id);
      if (i == 2) victim = *id;
    }
    for (int guard = 0; guard < 1000 && sched.HasWork(); ++guard) {
      if (cancel && victim_tokens == 3) sched.Cancel(victim);
      ASSERT_TRUE(sched.Step().ok());
    }
  }
  EXPECT_EQ(with_cancel[2].stop_reason, StopReason::kCancelled);
  EXPECT_LT(with_cancel[2].generated_ids.size(), base[2].generated_ids.size());
  for (int i : {0, 1, 3}) {
    EXPECT_EQ(with_cancel[i].generated_ids, base[i].generated_ids) << i;
    EXPECT_EQ(with_cancel[i].stop_reason, StopReason::kLength);
  }
}

TEST_F(SchedulerTest, ALongPromptDelaysOthersByOneChunkPerStep) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  int64_t step = 0;
  std::vector<int64_t> token_steps;
  SequenceRequest running = Request(0, 40);
  running.on_token = [&](int32_t) {
    token_steps.push_back(step);
    return true;
  };
  ASSERT_TRUE(sched.Submit(std::move(running)));
  for (; step < 3; ++step) ASSERT_TRUE(sched.Step().ok());
  // A 400-token prompt: 13 chunks of 32, one per step.
  SequenceRequest long_prompt;
  long_prompt.prompt_ids = test::RandomTokens(400, 160, 9);
  long_prompt.max_new_tokens = 2;
  int64_t long_first_token_step = -1;
  long_prompt.on_token = [&](int32_t) {
    if (long_first_token_step < 0) long_first_token_step = step;
    return true;
  };
  ASSERT_TRUE(sched.Submit(std::move(long_prompt)));
  for (int guard = 0; guard < 1000 && sched.HasWork(); ++step, ++guard)
    ASSERT_TRUE(sched.Step().ok());
  // The running stream got a token in every step while the long prompt was prefilled.
  ASSERT_EQ(token_steps.size(), 40u);
  for (size_t k = 1; k < token_steps.size(); ++k) EXPECT_EQ(token_steps[k], token_steps[k - 1] + 1);
  EXPECT_EQ(long_first_token_step, 3 + 12);  // 13 chunk steps, the first token at the last
}

// The worker's time slices (Step's row limit): however small each step's limit, every running
// stream gets its token in every step, a step runs no more than the limit (or its decode rows
// and one kMinPromptChunkRows chunk), and every sequence gives the tokens it gives unlimited.
TEST_F(SchedulerTest, RowLimitedStepsKeepEveryTokenAndEveryStream) {
  auto exec = Load(kSlots, kSlots + 64);
  ASSERT_TRUE(exec);
  std::map<int, std::vector<int32_t>> unlimited, limited;
  for (bool limit : {false, true}) {
    Scheduler sched(*exec, {.chunk_tokens = 64, .reuse_prefixes = false});
    std::map<int, std::vector<int32_t>>& out = limit ? limited : unlimited;
    for (int i = 0; i < kSlots; ++i) {
      SequenceRequest r = Request(i, 16);
      r.on_finish = [&, i](const SequenceResult& res) {
        EXPECT_TRUE(res.status.ok());
        out[i] = res.generated_ids;
      };
      ASSERT_TRUE(sched.Submit(std::move(r)));
    }
    const int64_t limits[] = {1, 3, 9, 2, 40, 12};
    for (int step = 0; step < 2000 && sched.HasWork(); ++step) {
      const int64_t most = limits[step % 6];
      const int decoding = sched.decoding();
      ASSERT_TRUE(sched.Step(limit ? std::optional<int64_t>(most) : std::nullopt).ok());
      EXPECT_GE(sched.last_step_decode_rows(), decoding) << "step " << step;
      if (limit) {
        EXPECT_LE(sched.last_step_rows(),
                  std::max(most, sched.last_step_decode_rows() + kMinPromptChunkRows))
            << "step " << step;
      }
    }
    ASSERT_FALSE(sched.HasWork());
  }
  for (int i = 0; i < kSlots; ++i) {
    EXPECT_EQ(unlimited[i].size(), 16u) << i;
    EXPECT_EQ(limited[i], unlimited[i]) << "sequence " << i;
  }
}

// A cancelled job's queued sequences end at the next step, also behind one that still waits.
TEST_F(SchedulerTest, CancelledQueuedSequencesEndAtTheNextStep) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  std::map<int, StopReason> ended;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    SequenceRequest r = Request(2, 30);
    r.on_finish = [&, i](const SequenceResult& res) { ended[i] = res.stop_reason; };
    auto id = sched.Submit(std::move(r));
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  ASSERT_TRUE(sched.Step().ok());  // 0 and 1 run; 2..5 wait
  ASSERT_EQ(sched.waiting(), 4);
  sched.Cancel(ids[3]);
  sched.Cancel(ids[5]);
  ASSERT_TRUE(sched.Step().ok());
  EXPECT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[3], StopReason::kCancelled);
  EXPECT_EQ(ended[5], StopReason::kCancelled);
  EXPECT_EQ(sched.waiting(), 2);  // 2 and 4 still wait, in order
  Drain(sched);
  EXPECT_EQ(ended[2], StopReason::kLength);
  EXPECT_EQ(ended[4], StopReason::kLength);
}

// Runs one greedy prompt for 6 tokens to its end.
SequenceResult Ask(Scheduler& sched, std::vector<int32_t> prompt, CacheScope scope = {}) {
  SequenceRequest r;
  r.prompt_ids = std::move(prompt);
  r.cache_scope = std::move(scope);
  r.max_new_tokens = 6;
  SequenceResult out;
  r.on_finish = [&](const SequenceResult& res) { out = res; };
  EXPECT_TRUE(sched.Submit(std::move(r)));
  Drain(sched);
  return out;
}

// a then b.
std::vector<int32_t> Joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(SchedulerTest, MoreSequencesThanSlotsAreAdmittedInOrder) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  std::vector<int> finished;
  for (int i = 0; i < 6; ++i) {
    SequenceRequest r = Request(i % 2 == 0 ? 1 : 5, 4);
    r.on_finish = [&, i](const SequenceResult&) { finished.push_back(i); };
    ASSERT_TRUE(sched.Submit(std::move(r)));
  }
  EXPECT_EQ(sched.waiting(), 6);
  ASSERT_TRUE(sched.Step().ok());
  EXPECT_EQ(sched.running(), 2);
  EXPECT_EQ(sched.waiting(), 4);
  Drain(sched);
  EXPECT_EQ(finished, (std::vector<int>{0, 1, 2, 3, 4, 5}));  // same lengths: FCFS order
}

TEST_F(SchedulerTest, SharedPrefixIsReusedAndChangesNothing) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  const std::vector<int32_t> system = test::RandomTokens(100, 160, 77);
  auto ask = [&](Scheduler& sched, uint32_t q) {
    return Ask(sched, Joined(system, test::RandomTokens(7, 160, q)));
  };
  Scheduler cached(*exec, {.chunk_tokens = 32, .reuse_prefixes = true});
  const SequenceResult first = ask(cached, 1);
  const SequenceResult second = ask(cached, 2);
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ(second.cached_tokens, 100);
  EXPECT_EQ(second.timings.prefill_tokens, 7);
  Scheduler plain(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  (void)ask(plain, 1);
  const SequenceResult uncached = ask(plain, 2);
  EXPECT_EQ(uncached.cached_tokens, 0);
  EXPECT_EQ(second.generated_ids, uncached.generated_ids);
}

// Prefix-cache isolation: a prompt computed under one scope is not reused under another (its
// cached_tokens is 0, the whole prompt runs), the same scope reuses it to the token, and the
// results are the same either way.
TEST_F(SchedulerTest, APrefixIsReusedOnlyWithinItsScope) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  const std::vector<int32_t> secret = test::RandomTokens(100, 160, 78);
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = true});
  const CacheScope alice{"alice", ""}, bob{"bob", ""}, bob_salted{"bob", "tenant-1"};
  const SequenceResult first = Ask(sched, Joined(secret, {1, 2}), alice);
  EXPECT_EQ(first.cached_tokens, 0);
  const SequenceResult probe = Ask(sched, Joined(secret, {3, 4}), bob);
  EXPECT_EQ(probe.cached_tokens, 0);
  EXPECT_EQ(probe.timings.prefill_tokens, 102);
  EXPECT_EQ(Ask(sched, Joined(secret, {5, 6}), bob_salted).cached_tokens, 0);
  EXPECT_EQ(Ask(sched, Joined(secret, {7, 8}), CacheScope{}).cached_tokens, 0);
  const SequenceResult again = Ask(sched, Joined(secret, {3, 4}), alice);
  EXPECT_EQ(again.cached_tokens, 100);
  EXPECT_EQ(again.generated_ids, probe.generated_ids);
  EXPECT_EQ(Ask(sched, Joined(secret, {9, 10}), bob).cached_tokens, 100);  // his own, now
}

TEST_F(SchedulerTest, RefusesBadRequests) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {});
  SequenceRequest empty;
  EXPECT_FALSE(sched.Submit(std::move(empty)));
  SequenceRequest oov;
  oov.prompt_ids = {1, 160};
  EXPECT_FALSE(sched.Submit(std::move(oov)));
  SequenceRequest too_long;
  too_long.prompt_ids.assign(513, 1);
  EXPECT_FALSE(sched.Submit(std::move(too_long)));
  SequenceRequest bad_slot;
  bad_slot.prompt_ids = {1};
  bad_slot.pinned_slot = 5;
  EXPECT_FALSE(sched.Submit(std::move(bad_slot)));
  EXPECT_FALSE(sched.HasWork());
}

TEST_F(SchedulerTest, ChoicesShareThePromptAndGiveWhatTheyGiveAlone) {
  auto exec = Load(4, 4 + 32);
  ASSERT_TRUE(exec);
  auto run = [&](bool share) {
    Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
    std::vector<SequenceResult> out(3);
    uint64_t first = 0;
    for (int i = 0; i < 3; ++i) {
      SequenceRequest r = Request(1, 10);  // 5 prompt tokens, sampled
      r.prompt_ids = test::RandomTokens(70, 160, 3);
      r.sampling->seed = 500 + static_cast<uint64_t>(i);
      r.sampling->top_k = 0;
      // This random model is sure of its next token; flatten it so the seeds matter.
      r.constrain = [](std::span<float> logits) {
        for (float& v : logits) v *= 0.01f;
      };
      if (share && i > 0) r.share_prompt_with = first;
      r.on_finish = [&out, i](const SequenceResult& res) { out[static_cast<size_t>(i)] = res; };
      auto id = sched.Submit(std::move(r));
      EXPECT_TRUE(id);
      if (i == 0) first = *id;
    }
    Drain(sched);
    return out;
  };
  const auto shared = run(true), separate = run(false);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(shared[i].generated_ids, separate[i].generated_ids) << i;
    EXPECT_EQ(shared[i].cached_tokens, i == 0 ? 0 : 70) << i;  // the prompt ran once
  }
  EXPECT_NE(shared[0].generated_ids, shared[1].generated_ids);  // different seeds
}

// A running sequence's full blocks are shared with a new sequence of the same prefix; the
// positions of its block still being written (96..99 here) are recomputed.
TEST_F(SchedulerTest, ARunningSequencesFullBlocksAreSharedNotRecomputed) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  const std::vector<int32_t> system = test::RandomTokens(100, 160, 12);
  auto request = [&](uint32_t q, int64_t max_new, SequenceResult* out) {
    SequenceRequest r;
    r.prompt_ids = system;
    const auto question = test::RandomTokens(9, 160, q);
    r.prompt_ids.insert(r.prompt_ids.end(), question.begin(), question.end());
    r.max_new_tokens = max_new;
    r.on_finish = [out](const SequenceResult& res) { *out = res; };
    return r;
  };
  SequenceResult long_one, second, second_alone;
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = true});
  ASSERT_TRUE(sched.Submit(request(1, 40, &long_one)));
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(sched.Step().ok());  // its prompt is computed
  ASSERT_EQ(sched.running(), 1);
  ASSERT_TRUE(sched.Submit(request(2, 8, &second)));
  Drain(sched);
  EXPECT_EQ(second.cached_tokens, 96);  // 3 blocks of the running sequence
  EXPECT_EQ(second.timings.prefill_tokens, 13);
  Scheduler plain(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  ASSERT_TRUE(plain.Submit(request(2, 8, &second_alone)));
  Drain(plain);
  EXPECT_EQ(second.generated_ids, second_alone.generated_ids);
}

// The prefix cache outlives the slots: a prefix computed long ago (its slots reused since by
// other prompts) is found again by its blocks; a multi-turn chat's next turn runs only the new
// turn (and the reply's last token, which never ran); results are the same with the cache off.
TEST_F(SchedulerTest, CachedBlocksOutliveSlotsAndServeTheNextTurn) {
  auto exec = Load(2, 2 + 32);
  ASSERT_TRUE(exec);
  const std::vector<int32_t> system = test::RandomTokens(70, 160, 21);
  auto run = [&](Scheduler& sched, std::vector<int32_t> prompt, int64_t max_new) {
    SequenceRequest r;
    r.prompt_ids = std::move(prompt);
    r.max_new_tokens = max_new;
    SequenceResult out;
    r.on_finish = [&](const SequenceResult& res) { out = res; };
    EXPECT_TRUE(sched.Submit(std::move(r)));
    Drain(sched);
    return out;
  };
  auto with = [&](const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::vector<int32_t> v = a;
    v.insert(v.end(), b.begin(), b.end());
    return v;
  };
  for (bool cache : {true, false}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = cache});
    const auto turn1 = with(system, test::RandomTokens(5, 160, 1));
    const SequenceResult first = run(sched, turn1, 6);
    // Four other prompts pass through both slots.
    for (uint32_t i = 0; i < 4; ++i) run(sched, test::RandomTokens(40, 160, 300 + i), 3);
    const auto turn2 = with(with(turn1, first.generated_ids), test::RandomTokens(9, 160, 2));
    const SequenceResult second = run(sched, turn2, 6);
    const SequenceResult again = run(sched, with(system, test::RandomTokens(5, 160, 3)), 6);
    if (cache) {
      // Everything the first sequence ran: its prompt and all but its last generated token.
      EXPECT_EQ(second.cached_tokens,
                static_cast<int64_t>(turn1.size() + first.generated_ids.size()) - 1);
      EXPECT_EQ(second.timings.prefill_tokens, 10);
      EXPECT_EQ(again.cached_tokens, 70);
      EXPECT_GT(sched.kv_pool().cached(), 0);
    } else {
      EXPECT_EQ(second.cached_tokens, 0);
      EXPECT_EQ(again.cached_tokens, 0);
    }
    EXPECT_EQ(sched.kv_pool().available(), sched.kv_pool().blocks());  // every block returned
    static std::vector<int32_t> second_ids, again_ids;
    if (cache) {
      second_ids = second.generated_ids;
      again_ids = again.generated_ids;
    } else {
      EXPECT_EQ(second.generated_ids, second_ids);
      EXPECT_EQ(again.generated_ids, again_ids);
    }
  }
}

// A small hybrid model (recurrent DeltaNet layers) on two slots with two kept states.
Expected<std::unique_ptr<ModelExecutor>> LoadHybrid(const test::TempDir& tmp) {
  SyntheticModelSpec spec = SmallSpec();
  spec.family = ModelFamily::kQwen3_5;  // DeltaNet, DeltaNet, DeltaNet, gated attention
  spec.layers = 4;
  spec.partial_rotary_factor = 0.25;
  spec.linear_key_heads = 2;
  spec.linear_value_heads = 4;
  spec.linear_key_dim = 8;
  spec.linear_value_dim = 12;
  TS_RETURN_IF_ERROR(WriteSyntheticCheckpoint(tmp.File("m"), spec));
  TS_ASSIGN_OR_RETURN(auto ckpt, OpenCheckpoint(tmp.File("m")));
  TS_ASSIGN_OR_RETURN(auto placement, ParsePlacement("cpu", ckpt->config.num_layers));
  ModelExecutor::Options o;
  o.max_slots = 2;
  o.max_seq = 512;
  o.max_batch_tokens = 2 + 32;
  o.kept_states = 2;
  return ModelExecutor::Load(ckpt, placement, o);
}

// Prompts through both slots, each in one chunk ending off a block boundary: they keep no
// state, and leave no slot holding another prompt's live state.
void PassOtherPromptsThroughEverySlot(Scheduler& sched) {
  for (uint32_t i = 0; i < 4; ++i) Ask(sched, test::RandomTokens(20, 160, 400 + i));
}

// A hybrid model: its state is kept at the last block boundary of a prompt, so a later prompt
// with the same beginning resumes there on another slot, after other prompts have used every
// slot; the tokens are those of a run without the cache.
TEST(SchedulerHybrid, KeptStatesResumeACachedPrefixOnAnySlot) {
  test::TempDir tmp;
  auto exec = LoadHybrid(tmp);
  ASSERT_TRUE(exec) << exec.status().message();
  ASSERT_EQ((*exec)->kept_states(), 2);
  const std::vector<int32_t> system = test::RandomTokens(100, 160, 31);
  auto with_question = [&](uint32_t q) { return Joined(system, test::RandomTokens(7, 160, q)); };
  std::vector<int32_t> cached_ids, plain_ids;
  for (bool cache : {true, false}) {
    Scheduler sched(**exec, {.chunk_tokens = 32, .reuse_prefixes = cache});
    Ask(sched, with_question(1));  // chunks end at 32, 64, 96: the state at 96 is kept
    PassOtherPromptsThroughEverySlot(sched);
    const SequenceResult second = Ask(sched, with_question(2));
    EXPECT_EQ(second.cached_tokens, cache ? 96 : 0);
    (cache ? cached_ids : plain_ids) = second.generated_ids;
  }
  EXPECT_EQ(cached_ids, plain_ids);
}

// A hybrid model, where a prompt's last kept boundary lies past the point where the next
// prompt branches off it (a 90-token system prompt, 30-token questions, 32-token chunks: the
// first prompt's state is kept at 96, where its last chunk starts). The second prompt cannot
// resume, but a chunk of it ends at the branch point (the end of the last whole block they
// share) and keeps its state there, so the third resumes from it; the tokens are those of
// runs without the cache.
TEST(SchedulerHybrid, BranchPointsKeepAStateForTheNextPromptWithThatBeginning) {
  test::TempDir tmp;
  auto exec = LoadHybrid(tmp);
  ASSERT_TRUE(exec) << exec.status().message();
  const std::vector<int32_t> system = test::RandomTokens(90, 160, 41);
  auto with_question = [&](uint32_t q) { return Joined(system, test::RandomTokens(30, 160, q)); };
  std::vector<int32_t> cached_ids[2], plain_ids[2];
  for (bool cache : {true, false}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    Scheduler sched(**exec, {.chunk_tokens = 32, .reuse_prefixes = cache});
    Ask(sched, with_question(1));
    PassOtherPromptsThroughEverySlot(sched);
    const SequenceResult second = Ask(sched, with_question(2));
    PassOtherPromptsThroughEverySlot(sched);
    const SequenceResult third = Ask(sched, with_question(3));
    const int64_t branch = 90 / kKvBlockTokens * kKvBlockTokens;
    ASSERT_GT(branch, 0);
    EXPECT_EQ(second.cached_tokens, 0);
    EXPECT_EQ(third.cached_tokens, cache ? branch : 0);
    EXPECT_EQ(third.timings.prefill_tokens, cache ? 120 - branch : 120);
    (cache ? cached_ids : plain_ids)[0] = second.generated_ids;
    (cache ? cached_ids : plain_ids)[1] = third.generated_ids;
  }
  EXPECT_EQ(cached_ids[0], plain_ids[0]);
  EXPECT_EQ(cached_ids[1], plain_ids[1]);
}

// A hybrid model with a hint: the first prompt says where other prompts are likely to branch
// off it (keep_state_at, e.g. where its last user message starts), so a chunk ends at the
// block boundary before that and the state is kept there: the second prompt with the same
// 90-token beginning resumes from it; the tokens are those of a run without the cache.
TEST(SchedulerHybrid, KeepStateAtLetsTheNextPromptResumeWhereItBranches) {
  test::TempDir tmp;
  auto exec = LoadHybrid(tmp);
  ASSERT_TRUE(exec) << exec.status().message();
  const std::vector<int32_t> system = test::RandomTokens(90, 160, 51);
  std::vector<int32_t> cached_ids, plain_ids;
  for (bool cache : {true, false}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    Scheduler sched(**exec, {.chunk_tokens = 32, .reuse_prefixes = cache});
    SequenceRequest first;
    first.prompt_ids = Joined(system, test::RandomTokens(30, 160, 1));
    first.max_new_tokens = 6;
    first.keep_state_at = static_cast<int64_t>(system.size());
    ASSERT_TRUE(sched.Submit(std::move(first)));
    Drain(sched);
    PassOtherPromptsThroughEverySlot(sched);
    const SequenceResult second = Ask(sched, Joined(system, test::RandomTokens(30, 160, 2)));
    const int64_t kept = 90 / kKvBlockTokens * kKvBlockTokens;
    EXPECT_EQ(second.cached_tokens, cache ? kept : 0);
    (cache ? cached_ids : plain_ids) = second.generated_ids;
  }
  EXPECT_EQ(cached_ids, plain_ids);
}

// Many sequences through a small pool: prompts built from a few shared beginnings (so blocks
// are shared, partly matched and copied), waves of submissions while others run, random
// cancellations, preemptions. Every sequence finishes exactly once, every block comes back,
// and each sequence that was not cancelled (preempted or not) gives exactly the
// tokens it gives alone with no cache.
TEST_F(SchedulerTest, RandomTrafficThroughASmallPoolKeepsEveryPromise) {
  auto exec = Load(4, 4 + 32, /*kv_blocks=*/10);
  ASSERT_TRUE(exec);
  std::mt19937 rng(11);
  const std::vector<std::vector<int32_t>> stems = {test::RandomTokens(70, 160, 71),
                                                   test::RandomTokens(45, 160, 72),
                                                   test::RandomTokens(33, 160, 73)};
  struct Case {
    std::vector<int32_t> prompt;
    int64_t max_new = 0;
    int cancel_after = -1;  // tokens after which on_token asks to stop; -1: never
    int finishes = 0;
    int tokens_seen = 0;
    SequenceResult result;
  };
  std::vector<Case> cases(40);
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    const auto& stem = stems[rng() % stems.size()];
    const size_t keep = rng() % (stem.size() + 1);
    c.prompt.assign(stem.begin(), stem.begin() + static_cast<std::ptrdiff_t>(keep));
    const auto tail = test::RandomTokens(1 + rng() % 40, 160, 1000 + static_cast<uint32_t>(i));
    c.prompt.insert(c.prompt.end(), tail.begin(), tail.end());
    c.max_new = 1 + static_cast<int64_t>(rng() % 80);
    if (rng() % 5 == 0) c.cancel_after = static_cast<int>(rng() % 10);
  }
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = true});
  auto submit = [&](size_t i) {
    Case& c = cases[i];
    SequenceRequest r;
    r.prompt_ids = c.prompt;
    r.max_new_tokens = c.max_new;
    r.on_token = [&c](int32_t) { return c.cancel_after < 0 || ++c.tokens_seen <= c.cancel_after; };
    r.on_finish = [&c](const SequenceResult& res) {
      ++c.finishes;
      c.result = res;
    };
    ASSERT_TRUE(sched.Submit(std::move(r)));
  };
  size_t next = 0;
  for (int guard = 0; guard < 100000 && (next < cases.size() || sched.HasWork()); ++guard) {
    // A wave of 1-6 submissions every few steps.
    if (next < cases.size() && rng() % 4 == 0) {
      for (size_t k = 1 + rng() % 6; k > 0 && next < cases.size(); --k) submit(next++);
    }
    if (sched.HasWork()) {
      ASSERT_TRUE(sched.Step().ok());
    }
  }
  ASSERT_FALSE(sched.HasWork());
  EXPECT_EQ(sched.kv_pool().available(), sched.kv_pool().blocks());
  EXPECT_GT(sched.preemptions(), 0);  // the pool was tight
  int compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    ASSERT_EQ(c.finishes, 1);
    EXPECT_TRUE(c.result.status.ok()) << c.result.status.message();
    EXPECT_LE(static_cast<int64_t>(c.result.generated_ids.size()), c.max_new);
    if (c.result.stop_reason == StopReason::kCancelled) continue;
    EXPECT_EQ(static_cast<int64_t>(c.result.generated_ids.size()), c.max_new);
    Scheduler alone(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
    SequenceRequest r;
    r.prompt_ids = c.prompt;
    r.max_new_tokens = c.max_new;
    SequenceResult want;
    r.on_finish = [&](const SequenceResult& res) { want = res; };
    ASSERT_TRUE(alone.Submit(std::move(r)));
    Drain(alone);
    EXPECT_EQ(c.result.generated_ids, want.generated_ids);
    ++compared;
  }
  EXPECT_GT(compared, 20);
}

// A pool smaller than what the sequences want at once: the newest running sequence is
// preempted when a decode step finds no block, waits, and resumes; every sequence completes,
// the oldest exactly as alone, and every block comes back. A prompt larger than the whole
// pool is refused at submission.
TEST_F(SchedulerTest, ASmallPoolPreemptsAndResumesAndRefusesWhatCanNeverFit) {
  auto exec = Load(4, 4 + 32, /*kv_blocks=*/8);  // 256 positions for 4 slots
  ASSERT_TRUE(exec);
  Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = true});
  std::vector<SequenceResult> out(4);
  for (int i = 0; i < 4; ++i) {
    SequenceRequest r;
    r.prompt_ids = test::RandomTokens(40, 160, 600 + static_cast<uint32_t>(i));
    r.max_new_tokens = 60;  // 100 positions: 4 blocks each, 16 wanted of 8
    r.on_finish = [&out, i](const SequenceResult& res) { out[static_cast<size_t>(i)] = res; };
    ASSERT_TRUE(sched.Submit(std::move(r)));
  }
  Drain(sched);
  EXPECT_GT(sched.preemptions(), 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(out[static_cast<size_t>(i)].status.ok()) << i;
    EXPECT_EQ(out[static_cast<size_t>(i)].stop_reason, StopReason::kLength) << i;
    EXPECT_EQ(out[static_cast<size_t>(i)].generated_ids.size(), 60u) << i;
  }
  EXPECT_EQ(sched.kv_pool().available(), 8);
  Scheduler alone(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
  SequenceRequest r;
  r.prompt_ids = test::RandomTokens(40, 160, 600);
  r.max_new_tokens = 60;
  SequenceResult first_alone;
  r.on_finish = [&](const SequenceResult& res) { first_alone = res; };
  ASSERT_TRUE(alone.Submit(std::move(r)));
  Drain(alone);
  EXPECT_EQ(out[0].generated_ids, first_alone.generated_ids);

  SequenceRequest huge;
  huge.prompt_ids.assign(300, 1);  // 10 blocks of a pool of 8
  auto refused = sched.Submit(std::move(huge));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("--kv-memory"), std::string::npos);
}

// A preempted sequence resumes without changing a bit: its prompt runs again as prompt rows
// and the tokens it had generated are replayed as decode rows, as they first ran (bf16 weights
// round prompt rows differently), so every logits row it sees equals the run alone. With the
// prefix cache off the whole sequence is recomputed; with it on, what was evicted.
TEST_F(SchedulerTest, APreemptedSequenceSeesTheLogitsItSeesAlone) {
  auto exec = Load(4, 4 + 32, /*kv_blocks=*/8);  // 256 positions for 4 slots
  ASSERT_TRUE(exec);
  struct Run {
    SequenceResult result;
    std::vector<std::vector<float>> rows;
  };
  auto request = [](int i, Run* run) {
    SequenceRequest r;
    r.prompt_ids = test::RandomTokens(40 + 7 * i, 160, 700 + static_cast<uint32_t>(i));
    r.max_new_tokens = 56;  // about 100 positions each: 4 blocks, 16 wanted of 8
    r.on_logits = [run](std::span<const float> row) {
      run->rows.emplace_back(row.begin(), row.end());
    };
    r.on_finish = [run](const SequenceResult& res) { run->result = res; };
    return r;
  };
  for (bool reuse : {false, true}) {
    SCOPED_TRACE(reuse ? "prefix cache on" : "prefix cache off");
    std::vector<Run> together(4);
    Scheduler sched(*exec, {.chunk_tokens = 32, .reuse_prefixes = reuse});
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(sched.Submit(request(i, &together[static_cast<size_t>(i)])));
    Drain(sched);
    int preempted = 0;
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      const Run& got = together[static_cast<size_t>(i)];
      ASSERT_TRUE(got.result.status.ok()) << got.result.status.message();
      if (got.result.preemptions > 0) ++preempted;
      Run alone;
      Scheduler solo(*exec, {.chunk_tokens = 32, .reuse_prefixes = false});
      ASSERT_TRUE(solo.Submit(request(i, &alone)));
      Drain(solo);
      EXPECT_EQ(got.result.generated_ids, alone.result.generated_ids);
      ASSERT_EQ(got.rows.size(), alone.rows.size());
      for (size_t k = 0; k < got.rows.size(); ++k) {
        ASSERT_EQ(got.rows[k], alone.rows[k]) << "logits row " << k << " differs";
      }
    }
    EXPECT_GT(preempted, 0);
  }
}

}  // namespace
}  // namespace tessera
