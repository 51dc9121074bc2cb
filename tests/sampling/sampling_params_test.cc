#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace tessera {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The error a request with one bad field produces, or "" if it was accepted.
std::string ErrorFor(const SamplingParams& request, const SamplingDefaults& defaults = {}) {
  auto resolved = ResolveSamplingParams(request, defaults);
  if (resolved.has_value()) return "";
  EXPECT_EQ(resolved.status().code(), ErrorCode::kInvalidArgument);
  return resolved.status().message();
}

TEST(ResolveSamplingParamsTest, BuiltInDefaultsWhenNothingIsSet) {
  auto resolved = ResolveSamplingParams({}, {});
  ASSERT_TRUE(resolved.has_value()) << resolved.status().message();
  EXPECT_EQ(resolved->mode, SamplingMode::kSample);
  EXPECT_EQ(resolved->temperature, 1.0);
  EXPECT_EQ(resolved->top_k, 0);
  EXPECT_EQ(resolved->top_p, 1.0);
  EXPECT_EQ(resolved->min_p, 0.0);
  EXPECT_EQ(resolved->repetition_penalty, 1.0);
  EXPECT_EQ(resolved->presence_penalty, 0.0);
  EXPECT_EQ(resolved->frequency_penalty, 0.0);
  EXPECT_TRUE(resolved->seed_was_generated);
}

TEST(ResolveSamplingParamsTest, ModelDefaultsFillUnsetFields) {
  SamplingDefaults defaults;
  defaults.do_sample = true;
  defaults.temperature = 0.6;
  defaults.top_k = 20;
  defaults.top_p = 0.95;
  defaults.min_p = 0.05;
  defaults.repetition_penalty = 1.1;
  SamplingParams request;
  request.seed = 7;
  auto resolved = ResolveSamplingParams(request, defaults);
  ASSERT_TRUE(resolved.has_value()) << resolved.status().message();
  EXPECT_EQ(resolved->mode, SamplingMode::kSample);
  EXPECT_EQ(resolved->temperature, 0.6);
  EXPECT_EQ(resolved->top_k, 20);
  EXPECT_EQ(resolved->top_p, 0.95);
  EXPECT_EQ(resolved->min_p, 0.05);
  EXPECT_EQ(resolved->repetition_penalty, 1.1);
  EXPECT_EQ(resolved->seed, 7u);
  EXPECT_FALSE(resolved->seed_was_generated);
}

TEST(ResolveSamplingParamsTest, RequestOverridesModelDefaults) {
  SamplingDefaults defaults;
  defaults.do_sample = true;
  defaults.temperature = 0.6;
  defaults.top_k = 20;
  defaults.top_p = 0.95;
  defaults.min_p = 0.05;
  defaults.repetition_penalty = 1.1;
  SamplingParams request;
  request.temperature = 1.3;
  request.top_k = 0;
  request.top_p = 0.5;
  request.min_p = 0.0;
  request.repetition_penalty = 1.0;
  request.presence_penalty = -0.5;
  request.frequency_penalty = 0.25;
  auto resolved = ResolveSamplingParams(request, defaults);
  ASSERT_TRUE(resolved.has_value()) << resolved.status().message();
  EXPECT_EQ(resolved->temperature, 1.3);
  EXPECT_EQ(resolved->top_k, 0);
  EXPECT_EQ(resolved->top_p, 0.5);
  EXPECT_EQ(resolved->min_p, 0.0);
  EXPECT_EQ(resolved->repetition_penalty, 1.0);
  EXPECT_EQ(resolved->presence_penalty, -0.5);
  EXPECT_EQ(resolved->frequency_penalty, 0.25);
}

TEST(ResolveSamplingParamsTest, DoSampleFalseMakesGreedyTheDefault) {
  SamplingDefaults defaults;
  defaults.do_sample = false;
  defaults.temperature = 0.7;  // ignored, as transformers ignores it without do_sample
  defaults.top_p = 0.8;
  auto resolved = ResolveSamplingParams({}, defaults);
  ASSERT_TRUE(resolved.has_value()) << resolved.status().message();
  EXPECT_EQ(resolved->mode, SamplingMode::kGreedy);
  EXPECT_EQ(resolved->temperature, 0.0);
  EXPECT_EQ(resolved->top_p, 0.8);
  EXPECT_FALSE(resolved->seed_was_generated);
  EXPECT_EQ(resolved->seed, 0u);

  // The ignored temperature is not validated either.
  defaults.temperature = 9.0;
  EXPECT_TRUE(ResolveSamplingParams({}, defaults).has_value());

  // A request that asks for a temperature samples anyway.
  SamplingParams request;
  request.temperature = 0.8;
  auto sampled = ResolveSamplingParams(request, defaults);
  ASSERT_TRUE(sampled.has_value());
  EXPECT_EQ(sampled->mode, SamplingMode::kSample);
  EXPECT_EQ(sampled->temperature, 0.8);
  EXPECT_TRUE(sampled->seed_was_generated);
}

TEST(ResolveSamplingParamsTest, TemperatureZeroIsGreedyAndKeepsAGivenSeed) {
  SamplingDefaults defaults;
  defaults.do_sample = true;
  defaults.temperature = 0.6;
  SamplingParams request;
  request.temperature = 0.0;
  request.seed = 99;
  auto resolved = ResolveSamplingParams(request, defaults);
  ASSERT_TRUE(resolved.has_value());
  EXPECT_EQ(resolved->mode, SamplingMode::kGreedy);
  EXPECT_EQ(resolved->seed, 99u);
  EXPECT_FALSE(resolved->seed_was_generated);

  // A model whose own default temperature is 0 decodes greedily by default.
  SamplingDefaults zero;
  zero.temperature = 0.0;
  auto greedy = ResolveSamplingParams({}, zero);
  ASSERT_TRUE(greedy.has_value());
  EXPECT_EQ(greedy->mode, SamplingMode::kGreedy);
}

TEST(ResolveSamplingParamsTest, GeneratedSeedIsReportedAndInRange) {
  auto first = ResolveSamplingParams({}, {});
  auto second = ResolveSamplingParams({}, {});
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(first->seed_was_generated);
  EXPECT_TRUE(second->seed_was_generated);
  EXPECT_LE(first->seed, static_cast<uint64_t>(kMaxSamplingSeed));
  EXPECT_LE(second->seed, static_cast<uint64_t>(kMaxSamplingSeed));
  // Two 63-bit random seeds collide with probability 2^-63.
  EXPECT_NE(first->seed, second->seed);
}

TEST(ResolveSamplingParamsTest, EveryOutOfRangeFieldIsNamedWithValueAndRange) {
  auto with = [](auto setter) {
    SamplingParams request;
    setter(request);
    return ErrorFor(request);
  };
  EXPECT_EQ(with([](auto& r) { r.temperature = 3.5; }),
            "temperature must be between 0 and 2, got 3.5");
  EXPECT_EQ(with([](auto& r) { r.temperature = -0.1; }),
            "temperature must be between 0 and 2, got -0.1");
  EXPECT_EQ(with([](auto& r) { r.temperature = kNaN; }),
            "temperature must be between 0 and 2, got nan");
  EXPECT_EQ(with([](auto& r) { r.top_k = -1; }),
            "top_k must be 0 (off) or a positive integer, got -1");
  EXPECT_EQ(with([](auto& r) { r.top_p = 0.0; }),
            "top_p must be greater than 0 and at most 1, got 0");
  EXPECT_EQ(with([](auto& r) { r.top_p = 1.5; }),
            "top_p must be greater than 0 and at most 1, got 1.5");
  EXPECT_EQ(with([](auto& r) { r.top_p = kNaN; }),
            "top_p must be greater than 0 and at most 1, got nan");
  EXPECT_EQ(with([](auto& r) { r.min_p = -0.01; }), "min_p must be between 0 and 1, got -0.01");
  EXPECT_EQ(with([](auto& r) { r.min_p = 1.5; }), "min_p must be between 0 and 1, got 1.5");
  EXPECT_EQ(with([](auto& r) { r.min_p = kNaN; }), "min_p must be between 0 and 1, got nan");
  EXPECT_EQ(with([](auto& r) { r.repetition_penalty = 0.05; }),
            "repetition_penalty must be between 0.1 and 2, got 0.05");
  EXPECT_EQ(with([](auto& r) { r.repetition_penalty = 2.5; }),
            "repetition_penalty must be between 0.1 and 2, got 2.5");
  EXPECT_EQ(with([](auto& r) { r.repetition_penalty = kNaN; }),
            "repetition_penalty must be between 0.1 and 2, got nan");
  EXPECT_EQ(with([](auto& r) { r.presence_penalty = -2.5; }),
            "presence_penalty must be between -2 and 2, got -2.5");
  EXPECT_EQ(with([](auto& r) { r.presence_penalty = 2.01; }),
            "presence_penalty must be between -2 and 2, got 2.01");
  EXPECT_EQ(with([](auto& r) { r.presence_penalty = kNaN; }),
            "presence_penalty must be between -2 and 2, got nan");
  EXPECT_EQ(with([](auto& r) { r.frequency_penalty = -3.0; }),
            "frequency_penalty must be between -2 and 2, got -3");
  EXPECT_EQ(with([](auto& r) { r.frequency_penalty = 2.5; }),
            "frequency_penalty must be between -2 and 2, got 2.5");
  EXPECT_EQ(with([](auto& r) { r.frequency_penalty = kNaN; }),
            "frequency_penalty must be between -2 and 2, got nan");
  EXPECT_EQ(with([](auto& r) { r.seed = -1; }),
            "seed must be between 0 and 9223372036854775807, got -1");
  EXPECT_EQ(with([](auto& r) { r.temperature = std::numeric_limits<double>::infinity(); }),
            "temperature must be between 0 and 2, got inf");
}

TEST(ResolveSamplingParamsTest, BoundaryValuesAreAccepted) {
  SamplingParams low;
  low.temperature = 0.0;
  low.top_k = 0;
  low.top_p = 1e-300;
  low.min_p = 0.0;
  low.repetition_penalty = 0.1;
  low.presence_penalty = -2.0;
  low.frequency_penalty = -2.0;
  low.seed = 0;
  EXPECT_EQ(ErrorFor(low), "");
  SamplingParams high;
  high.temperature = 2.0;
  high.top_k = std::numeric_limits<int64_t>::max();
  high.top_p = 1.0;
  high.min_p = 1.0;
  high.repetition_penalty = 2.0;
  high.presence_penalty = 2.0;
  high.frequency_penalty = 2.0;
  high.seed = kMaxSamplingSeed;
  EXPECT_EQ(ErrorFor(high), "");
}

TEST(ResolveSamplingParamsTest, BadModelDefaultIsBlamedOnTheModel) {
  SamplingDefaults defaults;
  defaults.temperature = 5.0;
  EXPECT_EQ(ErrorFor({}, defaults),
            "temperature must be between 0 and 2, got 5 (from the model's "
            "generation_config.json)");
  // The request's own value replaces the bad default, so the request succeeds.
  SamplingParams request;
  request.temperature = 1.0;
  EXPECT_EQ(ErrorFor(request, defaults), "");

  SamplingDefaults bad_k;
  bad_k.top_k = -5;
  EXPECT_EQ(ErrorFor({}, bad_k),
            "top_k must be 0 (off) or a positive integer, got -5 (from the model's "
            "generation_config.json)");
  SamplingDefaults bad_p;
  bad_p.top_p = kNaN;
  EXPECT_EQ(ErrorFor({}, bad_p),
            "top_p must be greater than 0 and at most 1, got nan (from the model's "
            "generation_config.json)");
}

TEST(ValidateResolvedSamplingParamsTest, ChecksRangesSeedAndModeConsistency) {
  ResolvedSamplingParams params;  // greedy, temperature 0
  EXPECT_TRUE(ValidateResolvedSamplingParams(params).ok());
  params.temperature = 0.5;
  EXPECT_EQ(ValidateResolvedSamplingParams(params).message(),
            "sampling mode must be sample when temperature is 0.5, got greedy");
  params.mode = SamplingMode::kSample;
  EXPECT_TRUE(ValidateResolvedSamplingParams(params).ok());
  params.seed = static_cast<uint64_t>(kMaxSamplingSeed) + 1;
  EXPECT_EQ(ValidateResolvedSamplingParams(params).message(),
            "seed must be between 0 and 9223372036854775807, got 9223372036854775808");
  params.seed = 0;
  params.min_p = 2.0;
  EXPECT_EQ(ValidateResolvedSamplingParams(params).message(),
            "min_p must be between 0 and 1, got 2");
}

}  // namespace
}  // namespace tessera
