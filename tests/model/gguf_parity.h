// What the GGUF parity tests share: a small synthetic shape, the Hugging Face folder and the
// GGUF file written from it opened side by side, and every position's logits of both compared.
//
//   SyntheticModelSpec spec = test::SmallGgufSpec(ModelFamily::kQwen2);
//   ... write `dir` and `gguf` ...
//   test::HfAndGguf both = test::OpenHfAndGguf(dir, gguf);
//   if (!both.ok()) return;  // the failure is reported
//   test::LogitsDiff d = test::CompareCheckpointLogits(both.hf, both.gguf, "cpu",
//   WeightFormat::kF32, ids); EXPECT_LE(d.diff, 1e-4 * d.scale);
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/logits_test_util.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"

namespace tessera::test {

// 2 layers, hidden 64, 4 heads of 16 (2 KV heads), vocab 128, 64 positions: every family's
// tensors, small enough for the reference backend.
inline SyntheticModelSpec SmallGgufSpec(ModelFamily family) {
  SyntheticModelSpec s;
  s.family = family;
  s.hidden = 64;
  s.intermediate = 96;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 128;
  s.max_position = 64;
  return s;
}

struct HfAndGguf {
  std::shared_ptr<const Checkpoint> hf, gguf;
  bool ok() const { return hf && gguf; }
};

// Both checkpoints, or the ones that opened after a test failure naming what did not.
inline HfAndGguf OpenHfAndGguf(const std::string& dir, const std::string& gguf) {
  HfAndGguf both;
  auto from_hf = OpenCheckpoint(dir);
  EXPECT_TRUE(from_hf) << from_hf.status().ToString();
  if (from_hf) both.hf = *from_hf;
  auto from_gguf = OpenCheckpoint(gguf);
  EXPECT_TRUE(from_gguf) << from_gguf.status().ToString();
  if (from_gguf) both.gguf = *from_gguf;
  return both;
}

// Every position's logits of `tokens` from both checkpoints on one placement and format: the
// largest |logit| of `want`'s and the largest difference (infinite when one fails to load).
struct LogitsDiff {
  double scale = 0, diff = INFINITY;
};
inline LogitsDiff CompareCheckpointLogits(std::shared_ptr<const Checkpoint> want,
                                          std::shared_ptr<const Checkpoint> got,
                                          const std::string& placement, WeightFormat format,
                                          const std::vector<int32_t>& tokens) {
  auto want_exec = Load(std::move(want), placement, format, 64, 8);
  auto got_exec = Load(std::move(got), placement, format, 64, 8);
  LogitsDiff r;
  if (!want_exec || !got_exec) return r;
  const std::vector<float> logits = AllLogits(*want_exec, tokens);
  for (float x : logits) r.scale = std::max(r.scale, std::fabs(static_cast<double>(x)));
  r.diff = MaxAbsDiff(AllLogits(*got_exec, tokens), logits);
  return r;
}

}  // namespace tessera::test
