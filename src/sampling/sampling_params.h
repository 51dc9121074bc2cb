// What a request asks of the sampler, the model's defaults for what it leaves out, and the
// validated, fully resolved result the Sampler is built from.
//
//   SamplingParams request;
//   request.temperature = 0.7;
//   request.seed = 1234;
//   SamplingDefaults defaults;            // from generation_config.json
//   defaults.do_sample = true;
//   defaults.top_p = 0.9;
//   TS_ASSIGN_OR_RETURN(ResolvedSamplingParams p, ResolveSamplingParams(request, defaults));
//   // p.mode == SamplingMode::kSample, p.temperature == 0.7, p.top_p == 0.9, p.seed == 1234
//
// Allowed ranges (NaN is outside every range):
//   temperature         0..2     0 = greedy (argmax); the other stages are then skipped
//   top_k               >= 0     0 = off
//   top_p               (0, 1]   1 = off
//   min_p               0..1     0 = off
//   repetition_penalty  0.1..2   1 = off
//   presence_penalty    -2..2    0 = off
//   frequency_penalty   -2..2    0 = off
//   seed                0..2^63-1
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/status.h"

namespace tessera {

inline constexpr int64_t kMaxSamplingSeed = INT64_MAX;  // 2^63 - 1

// A request's sampling fields; an unset field takes the model's default, then the built-in
// one. Integer fields are signed so that a negative value from a request can be reported.
struct SamplingParams {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::optional<int64_t> seed;
};

// The subset of a model's generation_config.json that the sampler honours.
// do_sample == false (Hugging Face's meaning: decode greedily) makes greedy the default, and
// the file's temperature is then ignored, as transformers ignores it; a request that sets a
// temperature still gets it. An absent do_sample means "no opinion": the file's temperature,
// or the built-in 1.0, applies.
struct SamplingDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
};

enum class SamplingMode { kGreedy, kSample };

struct ResolvedSamplingParams {
  SamplingMode mode = SamplingMode::kGreedy;  // kGreedy exactly when temperature == 0
  double temperature = 0.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  // The RNG seed. In greedy mode it is the request's seed if one was given (unused) or 0.
  uint64_t seed = 0;
  // True when the request gave no seed and sampling is on, so `seed` came from
  // std::random_device; report it so the user can replay the output.
  bool seed_was_generated = false;
};

// Fills unset fields (request, then model default, then built-in: temperature 1, top_k 0,
// top_p 1, min_p 0, repetition 1, presence 0, frequency 0), validates every field, and draws
// a seed when sampling without one. A value that came from the model's defaults is reported
// as such in the error, since the user cannot see it in their request.
Expected<ResolvedSamplingParams> ResolveSamplingParams(const SamplingParams& request,
                                                       const SamplingDefaults& model_defaults);

// The first field a request sets out of its range, named (e.g. {"top_p", "top_p must be
// greater than 0 and at most 1, got 0"}): the front ends refuse it before any model is asked.
struct SamplingFieldError {
  std::string_view field;
  Status status;
};
std::optional<SamplingFieldError> CheckRequestedSampling(const SamplingParams& request);

// Checks the ranges above and that `mode` agrees with `temperature`; used by
// ResolveSamplingParams and again by Sampler::Create for params built by hand.
Status ValidateResolvedSamplingParams(const ResolvedSamplingParams& params);

// Drawn seeds stay below 2^53, so every JSON client (JavaScript numbers are doubles) can send
// a reported seed back exactly.
inline constexpr uint64_t kMaxDrawnSamplingSeed = (uint64_t{1} << 53) - 1;

// A seed in 0..kMaxDrawnSamplingSeed from std::random_device. If the device is unavailable it falls
// back to mixing the clock and a process-wide counter, which is unpredictable enough to vary
// output.
uint64_t GenerateSamplingSeed();

}  // namespace tessera
