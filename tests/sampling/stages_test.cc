// Each stage on canned rows whose results were worked out by hand (see the comments). Rows
// whose probabilities matter are built as logits = log(weight) so that the intended
// probabilities can be read off directly; thresholds are chosen well away from the
// resulting float rounding, except in the tie cases, whose sums are exact.
#include "sampling/stages.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tessera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Ids whose logit is still above -inf.
std::vector<int32_t> Kept(const std::vector<float>& logits) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > -kInf) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

std::vector<float> LogOf(const std::vector<double>& weights) {
  std::vector<float> logits;
  for (double w : weights) logits.push_back(static_cast<float>(std::log(w)));
  return logits;
}

using Ids = std::vector<int32_t>;

// prompt: 0 0 0 1; generated: 1 2 2. Tokens 3 and 4 never occur.
TokenHistory MakeHistory() {
  TokenHistory history(5);
  for (int32_t id : {0, 0, 0, 1}) EXPECT_TRUE(history.AddPrompt(id).ok());
  for (int32_t id : {1, 2, 2}) EXPECT_TRUE(history.AddGenerated(id).ok());
  return history;
}

TEST(TokenHistoryTest, CountsPromptAndGeneratedSeparately) {
  TokenHistory history = MakeHistory();
  EXPECT_EQ(history.prompt_count(0), 3u);
  EXPECT_EQ(history.prompt_count(1), 1u);
  EXPECT_EQ(history.generated_count(1), 1u);
  EXPECT_EQ(history.generated_count(2), 2u);
  EXPECT_EQ(history.prompt_count(3) + history.generated_count(3), 0u);
  EXPECT_EQ(Ids(history.distinct_ids().begin(), history.distinct_ids().end()), (Ids{0, 1, 2}));
  EXPECT_EQ(history.AddGenerated(5).message(), "token id must be between 0 and 4, got 5");
  EXPECT_EQ(history.AddPrompt(-1).message(), "token id must be between 0 and 4, got -1");
}

TEST(PenaltiesTest, RepetitionDividesPositiveAndMultipliesNegativeOncePerDistinctToken) {
  // 2/2 = 1 (three prompt repeats still penalise once), -1*2 = -2, 0.5/2 = 0.25; 3, 4 unseen.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(logits, MakeHistory(), 2.0, 0.0, 0.0);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f, -2.0f}));

  std::vector<float> inexact = {2.0f, 0.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(inexact, MakeHistory(), 1.5, 0.0, 0.0);
  EXPECT_FLOAT_EQ(inexact[0], 4.0f / 3.0f);
  EXPECT_EQ(inexact[1], 0.0f);  // zero is neither shrunk nor grown
  EXPECT_FLOAT_EQ(inexact[2], 1.0f / 3.0f);
}

TEST(PenaltiesTest, PresenceSubtractsOncePerGeneratedTokenOnly) {
  // Token 0 was only in the prompt: untouched. 1: -1 - 0.5; 2 (twice): 0.5 - 0.5.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(logits, MakeHistory(), 1.0, 0.5, 0.0);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.5f, 0.0f, 3.0f, -2.0f}));

  std::vector<float> boosted = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(boosted, MakeHistory(), 1.0, -1.0, 0.0);
  EXPECT_EQ(boosted, (std::vector<float>{2.0f, 0.0f, 1.5f, 3.0f, -2.0f}));
}

TEST(PenaltiesTest, FrequencySubtractsCountTimesPenalty) {
  // 1: -1 - 1*0.25 = -1.25; 2: 0.5 - 2*0.25 = 0.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(logits, MakeHistory(), 1.0, 0.0, 0.25);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.25f, 0.0f, 3.0f, -2.0f}));
}

TEST(PenaltiesTest, RepetitionThenPresenceAndFrequency) {
  // 0: 2/2 = 1. 1: -1*2 - (0.5 + 0.25) = -2.75. 2: 0.5/2 - (0.5 + 2*0.25) = -0.75.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyPenalties(logits, MakeHistory(), 2.0, 0.5, 0.25);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.75f, -0.75f, 3.0f, -2.0f}));
}

TEST(PenaltiesTest, OffSettingsLeaveTheRowUntouched) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  const std::vector<float> original = logits;
  ApplyPenalties(logits, MakeHistory(), 1.0, 0.0, 0.0);
  EXPECT_EQ(logits, original);
}

TEST(SanitizeLogitsTest, NaNBecomesMinusInfinity) {
  std::vector<float> logits = {kNaN, 1.0f, -kInf, -3.0f};
  SanitizeLogits(logits);
  EXPECT_EQ(logits, (std::vector<float>{-kInf, 1.0f, -kInf, -3.0f}));
}

TEST(SanitizeLogitsTest, PositiveInfinityTakesAllTheProbability) {
  std::vector<float> logits = {1.0f, kInf, kNaN, kInf, 1e30f};
  SanitizeLogits(logits);
  EXPECT_EQ(logits, (std::vector<float>{-kInf, 0.0f, -kInf, 0.0f, -kInf}));
}

TEST(GreedyArgmaxTest, FirstIndexWinsTies) {
  EXPECT_EQ(GreedyArgmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}).value(), 1);
  EXPECT_EQ(GreedyArgmax(std::vector<float>{-kInf, -5.0f}).value(), 1);
  EXPECT_EQ(GreedyArgmax(std::vector<float>{7.0f, 7.0f, 7.0f}).value(), 0);
}

TEST(GreedyArgmaxTest, NothingChoosableIsAnInternalError) {
  auto all_minus_inf = GreedyArgmax(std::vector<float>{-kInf, -kInf});
  ASSERT_FALSE(all_minus_inf.has_value());
  EXPECT_EQ(all_minus_inf.status().code(), ErrorCode::kInternal);
  EXPECT_FALSE(GreedyArgmax(std::vector<float>{}).has_value());
}

TEST(TemperatureTest, ShiftsByMaxAndDivides) {
  // (l - 3) / 0.5 and (l - 3) / 2.
  std::vector<float> sharp = {1.0f, 3.0f, -kInf, 2.0f};
  ApplyTemperature(sharp, 0.5);
  EXPECT_EQ(sharp, (std::vector<float>{-4.0f, 0.0f, -kInf, -2.0f}));
  std::vector<float> flat = {1.0f, 3.0f, -kInf, 2.0f};
  ApplyTemperature(flat, 2.0);
  EXPECT_EQ(flat, (std::vector<float>{-1.0f, 0.0f, -kInf, -0.5f}));
}

TEST(TemperatureTest, TinyTemperatureUnderflowsInsteadOfOverflowing) {
  std::vector<float> logits = {1.0f, 100.0f, 99.0f};
  ApplyTemperature(logits, 1e-40);
  EXPECT_EQ(logits[1], 0.0f);
  EXPECT_EQ(logits[0], -kInf);
  EXPECT_EQ(logits[2], -kInf);
}

TEST(TopKTest, KeepsTheKLargest) {
  SamplingScratch scratch(5);
  std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
  ApplyTopK(logits, 2, scratch);
  EXPECT_EQ(Kept(logits), (Ids{1, 3}));
  EXPECT_EQ(logits[1], 5.0f);
  EXPECT_EQ(logits[3], 4.0f);
}

TEST(TopKTest, ZeroOrLargeKKeepsEverything) {
  SamplingScratch scratch(5);
  for (int64_t k : {0, 5, 6, 1000}) {
    std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
    ApplyTopK(logits, k, scratch);
    EXPECT_EQ(Kept(logits), (Ids{0, 1, 2, 3, 4})) << "k = " << k;
  }
}

TEST(TopKTest, TiesWithTheKthAreKept) {
  SamplingScratch scratch(4);
  std::vector<float> one = {1.0f, 3.0f, 3.0f, 2.0f};
  ApplyTopK(one, 1, scratch);
  EXPECT_EQ(Kept(one), (Ids{1, 2}));
  std::vector<float> three = {1.0f, 3.0f, 2.0f, 2.0f};
  ApplyTopK(three, 2, scratch);
  EXPECT_EQ(Kept(three), (Ids{1, 2, 3}));
}

TEST(TopKTest, CountsOnlyTokensStillInPlay) {
  SamplingScratch scratch(4);
  std::vector<float> logits = {-kInf, 1.0f, -kInf, 2.0f};
  ApplyTopK(logits, 1, scratch);
  EXPECT_EQ(Kept(logits), (Ids{3}));
}

TEST(TopPTest, SmallestPrefixReachingP) {
  SamplingScratch scratch(3);
  // Probabilities 0.1, 0.6, 0.3: sorted 1 (0.6), 2 (0.9 cumulative), 0 (1.0).
  const std::vector<float> base = LogOf({0.1, 0.6, 0.3});
  auto run = [&](double p) {
    std::vector<float> logits = base;
    ApplyTopP(logits, p, scratch);
    return Kept(logits);
  };
  EXPECT_EQ(run(0.5), (Ids{1}));
  EXPECT_EQ(run(0.85), (Ids{1, 2}));
  EXPECT_EQ(run(0.95), (Ids{0, 1, 2}));
  EXPECT_EQ(run(1e-9), (Ids{1}));  // always at least one
}

TEST(TopPTest, TiesBreakTowardTheLowerIdAndExactBoundaryIsInclusive) {
  SamplingScratch scratch(4);
  // Four equal logits: each probability is exactly 1/4 and every partial sum is exact.
  auto run = [&](double p) {
    std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
    ApplyTopP(logits, p, scratch);
    return Kept(logits);
  };
  EXPECT_EQ(run(0.25), (Ids{0}));
  EXPECT_EQ(run(0.5), (Ids{0, 1}));  // 0.5 >= 0.5: the boundary token completes the set
  EXPECT_EQ(run(0.5000001), (Ids{0, 1, 2}));
  EXPECT_EQ(run(0.75), (Ids{0, 1, 2}));
  EXPECT_EQ(run(0.99), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(run(1.0), (Ids{0, 1, 2, 3}));
}

TEST(TopPTest, POfOneKeepsEvenNegligibleTokens) {
  SamplingScratch scratch(3);
  std::vector<float> logits = {0.0f, -200.0f, -kInf};
  ApplyTopP(logits, 1.0, scratch);
  EXPECT_EQ(Kept(logits), (Ids{0, 1}));
  std::vector<float> almost = {0.0f, -200.0f, -kInf};
  ApplyTopP(almost, 0.999999, scratch);
  EXPECT_EQ(Kept(almost), (Ids{0}));
}

TEST(TopPTest, ProbabilitiesAreRenormalisedOverSurvivors) {
  SamplingScratch scratch(3);
  // Two survivors at 1/2 each: p = 0.5 is reached by the first.
  std::vector<float> logits = {-kInf, 0.0f, 0.0f};
  ApplyTopP(logits, 0.5, scratch);
  EXPECT_EQ(Kept(logits), (Ids{1}));
}

TEST(MinPTest, DropsTokensBelowFractionOfTheMax) {
  // Relative probabilities 1, 0.5, 0.25, 0.25 (shifted by +2 to show only ratios matter).
  std::vector<float> base = LogOf({1.0, 0.5, 0.25, 0.25});
  for (float& logit : base) logit += 2.0f;
  auto run = [&](double min_p) {
    std::vector<float> logits = base;
    ApplyMinP(logits, min_p);
    return Kept(logits);
  };
  EXPECT_EQ(run(0.0), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(run(0.2), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(run(0.3), (Ids{0, 1}));
  EXPECT_EQ(run(0.6), (Ids{0}));
  EXPECT_EQ(run(1.0), (Ids{0}));
}

TEST(MinPTest, MinPOneKeepsTiesWithTheMax) {
  std::vector<float> logits = {0.5f, 0.5f, -1.0f, -kInf};
  ApplyMinP(logits, 1.0);
  EXPECT_EQ(Kept(logits), (Ids{0, 1}));
}

TEST(StageOrderTest, TopKBeforeTopPDiffersFromTheReverse) {
  // Probabilities 0.4, 0.3, 0.2, 0.1; k = 2, p = 0.5.
  // k then p: survivors 0.4, 0.3 renormalise to 4/7, 3/7; 4/7 >= 0.5 keeps {0}.
  // p then k: 0.4 < 0.5, 0.7 >= 0.5 keeps {0, 1}; top-2 of that is still {0, 1}.
  SamplingScratch scratch(4);
  const std::vector<float> base = LogOf({0.4, 0.3, 0.2, 0.1});
  std::vector<float> k_then_p = base;
  ApplyTopK(k_then_p, 2, scratch);
  ApplyTopP(k_then_p, 0.5, scratch);
  std::vector<float> p_then_k = base;
  ApplyTopP(p_then_k, 0.5, scratch);
  ApplyTopK(p_then_k, 2, scratch);
  EXPECT_EQ(Kept(k_then_p), (Ids{0}));
  EXPECT_EQ(Kept(p_then_k), (Ids{0, 1}));
}

// DrawToken's inverse CDF, checked against the RNG's stream: with four equal weights the
// total is exactly 4 and u = 4r, so the draw is floor(4r). The floor(4r) values for seed 7
// below were computed from the separate Python transcription of xoshiro256** (see
// rng_test.cc): (NextU64() >> 11) * 4 >> 53.
const std::vector<int32_t> kSeed7Quarters = {2, 1, 3, 3, 3, 3, 0, 0, 1, 0, 2, 2,
                                             3, 3, 1, 2, 1, 1, 0, 0, 0, 2, 2, 1};

TEST(DrawTokenTest, InverseCdfInIdOrder) {
  SamplingScratch scratch(4);
  Xoshiro256StarStar rng(7);
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  for (size_t i = 0; i < kSeed7Quarters.size(); ++i) {
    EXPECT_EQ(DrawToken(logits, rng, scratch).value(), kSeed7Quarters[i]) << "draw " << i;
  }
}

TEST(DrawTokenTest, SkipsDroppedTokens) {
  // Survivors 1 and 3 with weight 1 each: u = 2r picks 1 when r < 1/2, i.e. floor(4r) <= 1.
  SamplingScratch scratch(4);
  Xoshiro256StarStar rng(7);
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 0.0f};
  for (size_t i = 0; i < kSeed7Quarters.size(); ++i) {
    const int32_t expected = kSeed7Quarters[i] <= 1 ? 1 : 3;
    EXPECT_EQ(DrawToken(logits, rng, scratch).value(), expected) << "draw " << i;
  }
}

TEST(DrawTokenTest, NothingLeftIsInternalErrorAndConsumesNoRandomness) {
  SamplingScratch scratch(2);
  Xoshiro256StarStar rng(5);
  Xoshiro256StarStar untouched(5);
  auto result = DrawToken(std::vector<float>{-kInf, kNaN}, rng, scratch);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.status().code(), ErrorCode::kInternal);
  EXPECT_EQ(rng.NextU64(), untouched.NextU64());
}

TEST(LogprobsTest, TopLogprobsMatchClosedForm) {
  // logsumexp(1, 2, 3) = 3 + log(1 + e^-1 + e^-2) = 3.4076059644443806.
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, kNaN};
  auto top = ComputeTopLogprobs(logits, 2);
  ASSERT_TRUE(top.has_value());
  ASSERT_EQ(top->size(), 2u);
  EXPECT_EQ((*top)[0].id, 2);
  EXPECT_NEAR((*top)[0].logprob, -0.4076059644443806, 1e-6);
  EXPECT_EQ((*top)[1].id, 1);
  EXPECT_NEAR((*top)[1].logprob, -1.4076059644443806, 1e-6);
  EXPECT_NEAR(ComputeTokenLogprob(logits, 0).value(), -2.4076059644443806, 1e-6);
  EXPECT_EQ(ComputeTokenLogprob(logits, 3).value(), -kInf);  // NaN counts as -inf
}

TEST(LogprobsTest, TiesLowerIdFirstAndNLargerThanRow) {
  const std::vector<float> logits = {0.0f, 0.0f, -kInf};
  auto top = ComputeTopLogprobs(logits, 5);
  ASSERT_TRUE(top.has_value());
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].id, 0);
  EXPECT_EQ((*top)[1].id, 1);
  EXPECT_EQ((*top)[2].id, 2);
  EXPECT_NEAR((*top)[0].logprob, -0.6931471805599453, 1e-6);  // log(1/2)
  EXPECT_NEAR((*top)[1].logprob, -0.6931471805599453, 1e-6);
  EXPECT_EQ((*top)[2].logprob, -kInf);
  EXPECT_TRUE(ComputeTopLogprobs(logits, 0).value().empty());
}

TEST(LogprobsTest, Errors) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_EQ(ComputeTopLogprobs(logits, -1).status().message(),
            "number of top logprobs must be at least 0, got -1");
  EXPECT_EQ(ComputeTokenLogprob(logits, 2).status().message(),
            "token id must be between 0 and 1, got 2");
  EXPECT_EQ(ComputeTopLogprobs(std::vector<float>{-kInf}, 1).status().code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace tessera
