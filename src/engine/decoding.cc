#include "engine/decoding.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop";
    case StopReason::kLength:
      return "length";
    case StopReason::kContext:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

int32_t ArgMax(std::span<const float> logits) {
  // The first index of the largest value (NaN never wins a comparison; a leading NaN is
  // kept, as a plain scan keeps it). Two passes over 16 independent lanes, held in four
  // 4-float GCC / clang vector types (the width every x86-64 has): the maximum per lane, then
  // the first block of 16 holding it. A batched step takes one per sequence over the whole
  // vocabulary; written as plain loops over a float array, GCC 12 kept the lanes in scalar
  // registers (maxss) and scanned for the first occurrence one float at a time.
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  using Quad = float __attribute__((vector_size(4 * sizeof(float))));
  constexpr size_t kQuads = 4, kLanes = 4 * kQuads;
  const float* x = logits.data();
  Quad lane[kQuads];
  for (Quad& q : lane) q = Quad{} - INFINITY;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kQuads; ++k) {
      Quad v;
      std::memcpy(&v, x + i + 4 * k, sizeof(v));
      lane[k] = v > lane[k] ? v : lane[k];
    }
  }
  float most = x[0];
  for (; i < n; ++i) most = x[i] > most ? x[i] : most;
  for (const Quad& q : lane)
    for (int l = 0; l < 4; ++l) most = q[l] > most ? q[l] : most;
  size_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    auto hit = Quad{} == Quad{} + 1.0f;  // all false: lanes of 0, -1 where equal
    for (size_t k = 0; k < kQuads; ++k) {
      Quad v;
      std::memcpy(&v, x + j + 4 * k, sizeof(v));
      hit |= v == most;
    }
    if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) break;
  }
  for (; j < n; ++j)
    if (x[j] == most) return static_cast<int32_t>(j);
  return 0;
}

std::vector<std::pair<int32_t, float>> TopK(std::span<const float> logits, int k) {
  std::vector<std::pair<int32_t, float>> all;
  all.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) all.emplace_back(static_cast<int32_t>(i), logits[i]);
  size_t kk = std::min(all.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(kk), all.end(),
                    [](const auto& a, const auto& b) {
                      return a.second > b.second || (a.second == b.second && a.first < b.first);
                    });
  all.resize(kk);
  return all;
}

std::vector<int32_t> StopIds(const Checkpoint& ckpt) {
  const std::vector<int64_t>& src = !ckpt.generation.eos_token_ids.empty()
                                        ? ckpt.generation.eos_token_ids
                                        : ckpt.config.eos_token_ids;
  std::vector<int32_t> ids;
  for (int64_t id : src) {
    if (id >= 0 && id < ckpt.config.vocab_size) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

SamplingDefaults SamplingDefaultsFor(const GenerationConfig& g) {
  SamplingDefaults d;
  d.do_sample = g.do_sample;
  d.temperature = g.temperature;
  d.top_k = g.top_k;
  d.top_p = g.top_p;
  d.min_p = g.min_p;
  d.repetition_penalty = g.repetition_penalty;
  return d;
}

}  // namespace tessera
