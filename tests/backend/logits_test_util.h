// Helpers the whole-model backend tests share: an executor over a placement, every position's
// logits of a teacher-forced sequence, random token ids, and two ways of comparing logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model_executor.h"
#include "engine/placement.h"

namespace tessera::test {

// An executor (2 slots) over placement `spec`, or null after a test failure saying why.
inline std::unique_ptr<ModelExecutor> Load(std::shared_ptr<const Checkpoint> ckpt,
                                           const std::string& spec, WeightFormat format,
                                           int64_t max_seq, int64_t batch) {
  auto placement = ParsePlacement(spec, ckpt->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return nullptr;
  ModelExecutor::Options o;
  o.max_slots = 2;
  o.max_seq = max_seq;
  o.max_batch_tokens = batch;
  o.backend.weights = format;
  auto exec = ModelExecutor::Load(std::move(ckpt), *placement, o);
  EXPECT_TRUE(exec) << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

// Every position's logits of `tokens` from position 0 of slot 0, prefilled in the executor's
// chunks.
inline std::vector<float> AllLogits(ModelExecutor& exec, const std::vector<int32_t>& tokens) {
  const size_t vocab = static_cast<size_t>(exec.dims().vocab);
  std::vector<float> last(vocab), all(tokens.size() * vocab);
  EXPECT_TRUE(exec.Forward(0, 0, tokens, last, all).ok());
  return all;
}

inline std::vector<int32_t> RandomTokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Fraction of positions whose arg-max agrees.
inline double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b,
                            int64_t vocab) {
  const size_t n = a.size() / static_cast<size_t>(vocab);
  size_t same = 0;
  for (size_t t = 0; t < n; ++t) {
    auto ra = a.begin() + static_cast<ptrdiff_t>(t * vocab),
         rb = b.begin() + static_cast<ptrdiff_t>(t * vocab);
    same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  return static_cast<double>(same) / static_cast<double>(n);
}

}  // namespace tessera::test
