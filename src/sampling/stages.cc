#include "sampling/stages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sampling/portable_exp.h"

namespace tessera {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// A token is still a candidate while its logit is above -inf; NaN fails this test too.
bool IsCandidate(float logit) {
  return logit > kMinusInf;
}

// double -> float that turns values past the float range into +-inf. A plain cast of such a
// value is undefined behaviour in C++, even though IEEE hardware would give the same answer.
float ToFloatSaturating(double value) {
  if (value > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (value < -std::numeric_limits<float>::max()) return kMinusInf;
  return static_cast<float>(value);
}

// The largest candidate logit, or -inf when there is none.
float MaxCandidate(std::span<const float> logits) {
  float max = kMinusInf;
  for (float logit : logits) {
    if (logit > max) max = logit;
  }
  return max;
}

}  // namespace

Expected<double> LogSumExp(std::span<const float> logits) {
  const float max = MaxCandidate(logits);
  if (!IsCandidate(max)) {
    return Internal("cannot compute log-probabilities: every logit is -inf or NaN");
  }
  double sum = 0.0;
  for (float logit : logits) {
    if (IsCandidate(logit)) sum += std::exp(static_cast<double>(logit) - max);
  }
  return static_cast<double>(max) + std::log(sum);
}

TokenHistory::TokenHistory(size_t vocab_size)
    : prompt_counts_(vocab_size, 0), generated_counts_(vocab_size, 0) {
  distinct_ids_.reserve(vocab_size);
}

Status TokenHistory::AddPrompt(int32_t id) {
  return Add(id, prompt_counts_);
}
Status TokenHistory::AddGenerated(int32_t id) {
  return Add(id, generated_counts_);
}

Status TokenHistory::Add(int32_t id, std::vector<uint32_t>& counts) {
  if (id < 0 || static_cast<size_t>(id) >= counts.size()) {
    return InvalidArgument("token id must be between 0 and " + std::to_string(counts.size() - 1) +
                           ", got " + std::to_string(id));
  }
  const size_t index = static_cast<size_t>(id);
  if (prompt_counts_[index] == 0 && generated_counts_[index] == 0) distinct_ids_.push_back(id);
  // Saturate rather than wrap: four billion repeats already mean "very many".
  if (counts[index] != std::numeric_limits<uint32_t>::max()) ++counts[index];
  return Status::Ok();
}

SamplingScratch::SamplingScratch(size_t vocab_size) {
  ids.reserve(vocab_size);
  weights.reserve(vocab_size);
}

void ApplyPenalties(std::span<float> logits, const TokenHistory& history, double repetition_penalty,
                    double presence_penalty, double frequency_penalty) {
  const bool repetition_on = repetition_penalty != 1.0;
  const bool additive_on = presence_penalty != 0.0 || frequency_penalty != 0.0;
  if (!repetition_on && !additive_on) return;
  for (int32_t id : history.distinct_ids()) {
    const size_t index = static_cast<size_t>(id);
    if (index >= logits.size()) continue;
    double value = logits[index];
    if (repetition_on) {
      value = value > 0.0 ? value / repetition_penalty : value * repetition_penalty;
    }
    const uint32_t generated = history.generated_count(id);
    if (additive_on && generated > 0) {
      value -= presence_penalty + static_cast<double>(generated) * frequency_penalty;
    }
    logits[index] = ToFloatSaturating(value);
  }
}

void SanitizeLogits(std::span<float> logits) {
  bool any_positive_infinity = false;
  for (float& logit : logits) {
    if (std::isnan(logit)) logit = kMinusInf;
    if (logit == std::numeric_limits<float>::infinity()) any_positive_infinity = true;
  }
  if (!any_positive_infinity) return;
  for (float& logit : logits) {
    logit = logit == std::numeric_limits<float>::infinity() ? 0.0f : kMinusInf;
  }
}

Expected<int32_t> GreedyArgmax(std::span<const float> logits) {
  int64_t best = -1;
  float best_logit = kMinusInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    // Strictly greater: among equal logits the first index stays.
    if (logits[i] > best_logit) {
      best_logit = logits[i];
      best = static_cast<int64_t>(i);
    }
  }
  if (best < 0) return Internal("cannot choose a token: every logit is -inf or NaN");
  return static_cast<int32_t>(best);
}

void ApplyTemperature(std::span<float> logits, double temperature) {
  const float max = MaxCandidate(logits);
  if (!IsCandidate(max)) return;
  for (float& logit : logits) {
    if (!IsCandidate(logit)) {
      logit = kMinusInf;
      continue;
    }
    logit = ToFloatSaturating((static_cast<double>(logit) - max) / temperature);
  }
}

void ApplyTopK(std::span<float> logits, int64_t k, SamplingScratch& scratch) {
  if (k <= 0) return;
  std::vector<int32_t>& ids = scratch.ids;
  ids.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (IsCandidate(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<uint64_t>(k) >= ids.size()) return;
  // Only the k-th largest value matters, and it is the same whichever of several equal
  // logits lands in that slot, so an O(n) selection is enough.
  const auto kth = ids.begin() + (k - 1);
  std::nth_element(ids.begin(), kth, ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const float threshold = logits[*kth];
  for (float& logit : logits) {
    if (!(logit >= threshold)) logit = kMinusInf;
  }
}

void ApplyTopP(std::span<float> logits, double p, SamplingScratch& scratch) {
  if (p >= 1.0) return;
  std::vector<int32_t>& ids = scratch.ids;
  std::vector<double>& weights = scratch.weights;
  ids.clear();
  weights.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (IsCandidate(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  if (ids.empty()) return;
  // A strict total order (value, then id), so the sorted sequence is unique and does not
  // depend on the sort algorithm of the standard library in use.
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    if (logits[a] != logits[b]) return logits[a] > logits[b];
    return a < b;
  });
  const double max = logits[ids.front()];
  double total = 0.0;
  for (int32_t id : ids) {
    weights.push_back(PortableExp(static_cast<double>(logits[id]) - max));
    total += weights.back();
  }
  // Summing in the same order as `total` makes the final running sum equal total exactly,
  // so the loop below always stops by the last token.
  const double target = p * total;
  double running = 0.0;
  size_t keep = 0;
  while (keep < ids.size()) {
    running += weights[keep];
    ++keep;
    if (running >= target) break;
  }
  for (size_t j = keep; j < ids.size(); ++j) logits[ids[j]] = kMinusInf;
}

void ApplyMinP(std::span<float> logits, double min_p) {
  if (min_p <= 0.0) return;
  const float max = MaxCandidate(logits);
  if (!IsCandidate(max)) return;
  for (float& logit : logits) {
    if (!IsCandidate(logit)) {
      logit = kMinusInf;
      continue;
    }
    // probability / max probability == exp(logit - max); the max token gets exactly 1.
    const double relative = PortableExp(static_cast<double>(logit) - max);
    if (relative < min_p) logit = kMinusInf;
  }
}

Expected<int32_t> DrawToken(std::span<const float> logits, Xoshiro256StarStar& rng,
                            SamplingScratch& scratch) {
  const float max = MaxCandidate(logits);
  if (!IsCandidate(max)) {
    return Internal("cannot sample a token: every logit is -inf or NaN after filtering");
  }
  std::vector<int32_t>& ids = scratch.ids;
  std::vector<double>& weights = scratch.weights;
  ids.clear();
  weights.clear();
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!IsCandidate(logits[i])) continue;
    ids.push_back(static_cast<int32_t>(i));
    weights.push_back(PortableExp(static_cast<double>(logits[i]) - max));
    total += weights.back();
  }
  const double u = rng.NextDouble() * total;
  double running = 0.0;
  for (size_t j = 0; j < ids.size(); ++j) {
    running += weights[j];
    if (u < running) return ids[j];
  }
  // Only reachable when u rounded up to the total; the maximum's weight is exactly 1, so a
  // positive weight exists.
  for (size_t j = ids.size(); j-- > 0;) {
    if (weights[j] > 0.0) return ids[j];
  }
  return ids.back();
}

Expected<std::vector<TokenLogprob>> ComputeTopLogprobs(std::span<const float> logits, int n) {
  if (n < 0)
    return InvalidArgument("number of top logprobs must be at least 0, got " + std::to_string(n));
  TS_ASSIGN_OR_RETURN(const double log_total, LogSumExp(logits));
  const size_t limit = std::min(static_cast<size_t>(n), logits.size());
  // The best `limit` (id, logit) pairs so far, best first. Ids arrive in increasing order and
  // an equal logit never displaces an earlier one, so ties keep the lower id first.
  std::vector<TokenLogprob> best;
  best.reserve(limit + 1);
  if (limit == 0) return best;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float value = IsCandidate(logits[i]) ? logits[i] : kMinusInf;
    if (best.size() == limit && !(value > best.back().logprob)) continue;
    auto position = std::find_if(best.begin(), best.end(),
                                 [&](const TokenLogprob& entry) { return entry.logprob < value; });
    best.insert(position, TokenLogprob{static_cast<int32_t>(i), value});
    if (best.size() > limit) best.pop_back();
  }
  for (TokenLogprob& entry : best) {
    entry.logprob = ToFloatSaturating(static_cast<double>(entry.logprob) - log_total);
  }
  return best;
}

Expected<float> ComputeTokenLogprob(std::span<const float> logits, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size()) {
    return InvalidArgument("token id must be between 0 and " +
                           std::to_string(static_cast<int64_t>(logits.size()) - 1) + ", got " +
                           std::to_string(id));
  }
  TS_ASSIGN_OR_RETURN(const double log_total, LogSumExp(logits));
  const float value = logits[static_cast<size_t>(id)];
  if (!IsCandidate(value)) return kMinusInf;
  return ToFloatSaturating(static_cast<double>(value) - log_total);
}

}  // namespace tessera
