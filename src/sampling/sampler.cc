#include "sampling/sampler.h"

#include <string>

namespace tessera {

Sampler::Sampler(const ResolvedSamplingParams& params, size_t vocab_size)
    : params_(params), history_(vocab_size), scratch_(vocab_size), rng_(params.seed) {}

Expected<Sampler> Sampler::Create(const ResolvedSamplingParams& params, int64_t vocab_size) {
  TS_RETURN_IF_ERROR(ValidateResolvedSamplingParams(params));
  if (vocab_size < 1 || vocab_size > INT32_MAX) {
    return InvalidArgument("vocab_size must be between 1 and " + std::to_string(INT32_MAX) +
                           ", got " + std::to_string(vocab_size));
  }
  return Sampler(params, static_cast<size_t>(vocab_size));
}

Status Sampler::AcceptPrompt(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    TS_RETURN_IF_ERROR(history_.AddPrompt(token).WithContext("prompt token"));
  }
  return Status::Ok();
}

Status Sampler::Accept(int32_t token) {
  return history_.AddGenerated(token).WithContext("generated token");
}

Expected<int32_t> Sampler::Sample(std::span<float> logits) {
  if (logits.size() != history_.vocab_size()) {
    return InvalidArgument("logits row length must equal the vocabulary size " +
                           std::to_string(history_.vocab_size()) + ", got " +
                           std::to_string(logits.size()));
  }
  ApplyPenalties(logits, history_, params_.repetition_penalty, params_.presence_penalty,
                 params_.frequency_penalty);
  SanitizeLogits(logits);
  if (params_.mode == SamplingMode::kGreedy) return GreedyArgmax(logits);
  ApplyTemperature(logits, params_.temperature);
  ApplyTopK(logits, params_.top_k, scratch_);
  ApplyTopP(logits, params_.top_p, scratch_);
  ApplyMinP(logits, params_.min_p);
  return DrawToken(logits, rng_, scratch_);
}

}  // namespace tessera
