// The individual stages of the sampler chain, each a function over one row of logits, plus
// the log-probability helpers for the OpenAI `logprobs` field. The Sampler (sampler.h) runs
// them in this fixed order:
//   1. penalties      ApplyPenalties       (over a TokenHistory)
//   2. clean-up       SanitizeLogits       (NaN and +inf made well defined)
//   3. temperature    ApplyTemperature     (or GreedyArgmax when temperature is 0)
//   4. top_k          ApplyTopK
//   5. top_p          ApplyTopP
//   6. min_p          ApplyMinP
//   7. the draw       DrawToken
// A token a stage drops gets logit -inf, so every later stage sees only the survivors and the
// probabilities it computes are renormalised over them (top_p after top_k uses the top-k
// distribution, as transformers and vLLM do). Stages 3-7 compute exponentials with
// PortableExp in double precision, so the kept set and the drawn token are bit-reproducible.
//
//   SamplingScratch scratch(logits.size());
//   ApplyTemperature(logits, 0.7);
//   ApplyTopK(logits, 40, scratch);
//   ApplyTopP(logits, 0.9, scratch);
//   Xoshiro256StarStar rng(seed);
//   TS_ASSIGN_OR_RETURN(int32_t token, DrawToken(logits, rng, scratch));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/rng.h"

namespace tessera {

// Per-token counts of what a sequence has seen: prompt tokens and generated tokens counted
// separately, stored densely (two uint32 per vocabulary entry) so that recording a token is
// O(1) and never allocates, plus the distinct ids in first-seen order so that the penalties
// touch only the tokens that occurred rather than the whole vocabulary.
class TokenHistory {
 public:
  explicit TokenHistory(size_t vocab_size);

  // InvalidArgument when id is outside [0, vocab_size).
  Status AddPrompt(int32_t id);
  Status AddGenerated(int32_t id);

  uint32_t prompt_count(int32_t id) const { return prompt_counts_[static_cast<size_t>(id)]; }
  uint32_t generated_count(int32_t id) const { return generated_counts_[static_cast<size_t>(id)]; }
  // Every id seen at least once, prompt or generated, in the order first seen.
  std::span<const int32_t> distinct_ids() const { return distinct_ids_; }
  size_t vocab_size() const { return prompt_counts_.size(); }

 private:
  Status Add(int32_t id, std::vector<uint32_t>& counts);

  std::vector<uint32_t> prompt_counts_;
  std::vector<uint32_t> generated_counts_;
  std::vector<int32_t> distinct_ids_;  // reserved to vocab_size: it can never reallocate
};

// Work space for the stages, sized once for a vocabulary; the stages reuse its capacity and
// never allocate when the row is no longer than that vocabulary.
struct SamplingScratch {
  explicit SamplingScratch(size_t vocab_size);
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

// Stage 1. For each distinct id in history:
//   repetition (tokens seen in the prompt or generated; Hugging Face semantics):
//     logit > 0 ? logit / repetition_penalty : logit * repetition_penalty
//   then presence and frequency (generated tokens only, as OpenAI and vLLM count them, so
//   that a long prompt does not suppress the words the answer must repeat):
//     logit -= presence_penalty (once, if generated at all) + count * frequency_penalty
// Arithmetic is in double, rounded back to float once. Values at their "off" setting
// (1, 0, 0) leave the row untouched.
void ApplyPenalties(std::span<float> logits, const TokenHistory& history, double repetition_penalty,
                    double presence_penalty, double frequency_penalty);

// Stage 2. NaN becomes -inf (the token can never be chosen). If any logit is +inf, those
// tokens share all the probability (the limit of softmax): they become 0 and every other
// logit becomes -inf. Finite values are untouched.
void SanitizeLogits(std::span<float> logits);

// Greedy decoding: the index of the largest logit, the lowest index among equals. Internal
// error when the row is empty or every logit is -inf (nothing can be chosen). Expects a
// sanitized row (no NaN).
Expected<int32_t> GreedyArgmax(std::span<const float> logits);

// Stage 3, temperature > 0: logit -> (logit - max) / temperature. Subtracting the maximum
// first leaves the distribution unchanged (softmax is shift invariant) but means a tiny
// temperature can only underflow toward -inf, never overflow to +inf. A row of all -inf is
// left as is.
void ApplyTemperature(std::span<float> logits, double temperature);

// Stage 4. Keeps the tokens whose logit is >= the k-th largest logit; tokens tied with the
// k-th are all kept (transformers' semantics), so more than k may survive. k == 0 or k at
// least the number of finite logits keeps everything.
void ApplyTopK(std::span<float> logits, int64_t k, SamplingScratch& scratch);

// Stage 5. Orders the surviving tokens by logit, highest first and the lower id first among
// equals, and keeps the shortest prefix whose cumulative weight reaches p x the total weight
// (weights exp(logit - max), summed in that order, in double). At least one token is always
// kept. p >= 1 keeps everything without computing anything, so rounding can never drop a
// token at p = 1.
void ApplyTopP(std::span<float> logits, double p, SamplingScratch& scratch);

// Stage 6. Drops tokens whose probability is below min_p x the largest probability, that is
// whose weight exp(logit - max) is < min_p. The most likely token (and its ties) always
// survives. min_p == 0 keeps everything.
void ApplyMinP(std::span<float> logits, double min_p);

// Stage 7. Weights w_i = PortableExp(logit_i - max) over the finite logits, visited in
// increasing id order; W = their sum in that order; u = rng.NextDouble() * W; the result is
// the first id whose running sum exceeds u (if rounding lets u reach the final sum, the last
// id with a positive weight). Consumes exactly one NextU64() per call. Internal error, with
// no draw consumed, when every logit is -inf.
Expected<int32_t> DrawToken(std::span<const float> logits, Xoshiro256StarStar& rng,
                            SamplingScratch& scratch);

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

// The n most likely tokens of log_softmax(logits), highest first and the lower id first
// among equals; n larger than the row returns the whole row. Pass the raw model logits
// (before Sampler::Sample, which edits them in place): OpenAI reports the model's own
// distribution. NaN counts as -inf. InvalidArgument for n < 0; Internal error when every
// logit is -inf. Uses std::exp/std::log: for reporting, not for choosing tokens.
Expected<std::vector<TokenLogprob>> ComputeTopLogprobs(std::span<const float> logits, int n);

// log(sum(exp(logits))) in double, NaN counted as -inf: log_softmax(logits)[id] is
// logits[id] minus this. Internal error when nothing is finite.
Expected<double> LogSumExp(std::span<const float> logits);

// log_softmax(logits)[id]; InvalidArgument when id is outside the row.
Expected<float> ComputeTokenLogprob(std::span<const float> logits, int32_t id);

}  // namespace tessera
