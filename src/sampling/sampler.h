// One sequence's token sampler: penalties, temperature, top_k, top_p, min_p and a seeded
// multinomial draw, in that order (stages.h documents each stage exactly).
//
//   TS_ASSIGN_OR_RETURN(ResolvedSamplingParams params, ResolveSamplingParams(request, defaults));
//   TS_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(params, vocab_size));
//   TS_RETURN_IF_ERROR(sampler.AcceptPrompt(prompt_ids));
//   for (;;) {
//     std::span<float> logits = ...;                       // the model's row for this step
//     auto top = ComputeTopLogprobs(logits, 5);            // optional; before Sample edits it
//     TS_ASSIGN_OR_RETURN(int32_t token, sampler.Sample(logits));
//     TS_RETURN_IF_ERROR(sampler.Accept(token));           // Sample does not record it
//   }
//
// Reproducibility: the same resolved params, the same Accept calls and the same logits give
// the same tokens on every platform. Each Sample in sample mode consumes exactly one 64-bit
// value from the RNG; greedy mode consumes none.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"
#include "sampling/stages.h"

namespace tessera {

class Sampler {
 public:
  // Validates the params again (they may have been built by hand) and vocab_size, which must
  // be between 1 and 2^31-1. Allocates everything Sample will ever need: after this, neither
  // Sample nor Accept allocates.
  static Expected<Sampler> Create(const ResolvedSamplingParams& params, int64_t vocab_size);

  // Move-only: a copied vector keeps its elements but not its reserved capacity, so a copy
  // would allocate again on the per-token path.
  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Records prompt tokens: they count toward repetition_penalty only.
  Status AcceptPrompt(std::span<const int32_t> tokens);
  // Records a generated token: it counts toward all three penalties.
  Status Accept(int32_t token);

  // Picks the next token from one row of logits (vocab_size floats), editing the row in
  // place. InvalidArgument when the row has the wrong length; Internal when every logit is
  // NaN or -inf after the penalties, since a model that produces that has a bug.
  Expected<int32_t> Sample(std::span<float> logits);

  const ResolvedSamplingParams& params() const { return params_; }
  const TokenHistory& history() const { return history_; }
  int64_t vocab_size() const { return static_cast<int64_t>(history_.vocab_size()); }

 private:
  Sampler(const ResolvedSamplingParams& params, size_t vocab_size);

  ResolvedSamplingParams params_;
  TokenHistory history_;
  SamplingScratch scratch_;
  Xoshiro256StarStar rng_;
};

}  // namespace tessera
