// Helpers the whole-model backend tests share: an executor over a placement, every position's
// logits of a teacher-forced sequence (random ids and logit comparisons: test_support.h).
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
#include "test_support.h"  // RandomTokens, MaxAbsDiff, Top1Agreement

namespace tessera::test {

// An executor (2 slots) over placement `spec`, or null after a test failure saying why.
inline std::unique_ptr<ModelExecutor> Load(std::shared_ptr<const Checkpoint> ckpt,
                                           const std::string& spec, WeightFormat format,
                                           int64_t max_seq, int64_t batch,
                                           std::optional<CpuIsa> cpu_isa = std::nullopt) {
  auto placement = ParsePlacement(spec, ckpt->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return nullptr;
  ModelExecutor::Options o;
  o.max_slots = 2;
  o.max_seq = max_seq;
  o.max_batch_tokens = batch;
  o.backend.weights = format;
  o.backend.cpu_isa = cpu_isa;
  auto exec = ModelExecutor::Load(std::move(ckpt), *placement, o);
  EXPECT_TRUE(exec) << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

// Every position's logits of `tokens` from position 0 of slot 0, prefilled in the executor's
// chunks.
inline std::vector<float> AllLogits(ModelExecutor& exec, const std::vector<int32_t>& tokens) {
  const size_t vocab = static_cast<size_t>(exec.spec().vocab);
  std::vector<float> last(vocab), all(tokens.size() * vocab);
  EXPECT_TRUE(exec.Forward(0, 0, tokens, last, all).ok());
  return all;
}

}  // namespace tessera::test
