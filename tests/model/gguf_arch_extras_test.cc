// gemma3 and minicpm GGUF files, written from a synthetic Hugging Face checkpoint the way
// llama.cpp's converter writes them (support/hf_to_gguf.h: gemma3's norm weights + 1, its
// sandwich-norm names, sliding window and local RoPE base; minicpm's interleaved q/k rows, muP
// scales as embedding/residual/logit_scale, LongRoPE factors as tensors), give the logits
// tessera computes from the checkpoint itself, on the reference and cpu backends; and a
// malformed field of theirs is refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>

#include "backend/logits_test_util.h"
#include "format/format_test_util.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_parity.h"
#include "model/synthetic_checkpoint.h"
#include "support/gguf_writer.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

// A small model of `family`: 4 heads of 16 (2 for k/v), hidden 64, 64 positions.
SyntheticModelSpec Gemma3Spec() {
  SyntheticModelSpec s = test::SmallGgufSpec(ModelFamily::kGemma3);
  s.nested_config = false;  // Gemma3ForCausalLM, as gemma-3-270m / 1b are published
  s.layers = 7;             // five sliding layers, a global one, a sliding one
  s.tied = true;
  s.rope_theta = 1e6;
  s.rope_local_theta = 2e4;  // not llama.cpp's default (1e4), so that reading it matters
  s.sliding_window = 5;      // shorter than the prompt, so the window matters
  s.sliding_window_pattern = 6;
  s.query_pre_attn_scalar = 16;
  s.rms_norm_eps = 1e-6;
  s.seed = 31;
  return s;
}

SyntheticModelSpec MiniCpmSpec() {
  SyntheticModelSpec s = test::SmallGgufSpec(ModelFamily::kMiniCpm);
  s.layers = 3;
  s.tied = false;
  s.rope_theta = 1e4;
  s.scale_emb = 12.0;
  s.scale_depth = 1.4;
  s.dim_model_base = 16.0;
  LongRopeScaling rope;
  for (int i = 0; i < 8; ++i) {
    rope.short_factor.push_back(1.0 + 0.25 * i);
    rope.long_factor.push_back(2.0 + 0.5 * i);
  }
  rope.original_max_position_embeddings = s.max_position;
  s.rope_longrope = rope;
  s.rms_norm_eps = 1e-5;
  s.seed = 37;
  return s;
}

struct Case {
  const char* name;
  SyntheticModelSpec spec;
  bool with_tokenizer;  // a byte-level tokenizer.json: gemma3's embedding loses its extra rows
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class GgufArchParity : public ::testing::TestWithParam<Case> {};

TEST_P(GgufArchParity, LogitsMatchTheHuggingFaceCheckpoint) {
  const Case& c = GetParam();
  test::TempDir tmp;
  const std::string dir = tmp.File("hf");
  SyntheticModelSpec spec = c.spec;
  if (c.with_tokenizer) {
    spec.vocab = 4352;  // room for the synthetic tokenizer's ids, and unused rows past them
    ASSERT_TRUE(WriteSyntheticModel(dir, spec).ok());
  } else {
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir, spec).ok());
  }
  const std::string gguf = tmp.File("model.gguf");
  const Status written = test::WriteGgufOfCheckpoint(dir, "smollm", gguf);
  ASSERT_TRUE(written.ok()) << written.ToString();

  const test::HfAndGguf both = test::OpenHfAndGguf(dir, gguf);
  ASSERT_TRUE(both.ok());
  const ModelConfig& got = both.gguf->config;
  const ModelConfig& want = both.hf->config;
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.layer_types, want.layer_types);
  EXPECT_EQ(got.sliding_window, want.sliding_window);
  EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings);
  EXPECT_EQ(got.hidden_act, want.hidden_act);
  EXPECT_EQ(got.query_pre_attn_scalar, want.query_pre_attn_scalar);
  EXPECT_DOUBLE_EQ(got.rope_local_theta, want.rope_local_theta);
  EXPECT_NEAR(got.embed_scale, want.embed_scale, 1e-6 * want.embed_scale);
  EXPECT_NEAR(got.residual_scale, want.residual_scale, 1e-6 * want.residual_scale);
  EXPECT_NEAR(got.logit_scale, want.logit_scale, 1e-6 * want.logit_scale);
  ASSERT_EQ(got.rope_longrope.has_value(), want.rope_longrope.has_value());
  if (want.rope_longrope) {
    EXPECT_EQ(got.rope_longrope->short_factor, want.rope_longrope->short_factor);
    EXPECT_EQ(got.rope_longrope->long_factor, want.rope_longrope->long_factor);
  }
  // Gemma3Model keeps the embedding rows of the tokenizer's ids only.
  const int64_t vocab = got.vocab_size;
  if (c.with_tokenizer && spec.family == ModelFamily::kGemma3) {
    EXPECT_LT(vocab, want.vocab_size);
  } else {
    EXPECT_EQ(vocab, want.vocab_size);
  }

  const std::vector<int32_t> tokens = test::RandomTokens(24, vocab, 5);
  auto want_exec = test::Load(both.hf, "reference", WeightFormat::kAuto, 64, 8);
  auto got_exec = test::Load(both.gguf, "reference", WeightFormat::kAuto, 64, 8);
  auto cpu_exec = test::Load(both.gguf, "cpu", WeightFormat::kF32, 64, 8);
  ASSERT_TRUE(want_exec && got_exec && cpu_exec);
  const std::vector<float> all_want = test::AllLogits(*want_exec, tokens);
  // The logits of the ids both have (all of them unless the embedding was cut).
  std::vector<float> reference;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const auto row = all_want.begin() + static_cast<ptrdiff_t>(pos * want.vocab_size);
    reference.insert(reference.end(), row, row + vocab);
  }
  double scale = 0;
  for (float v : reference) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const double diff = test::MaxAbsDiff(test::AllLogits(*got_exec, tokens), reference);
  const double cpu_diff = test::MaxAbsDiff(test::AllLogits(*cpu_exec, tokens), reference);
  std::printf("[ measured ] %s: max |logit| %.3g, max |diff| reference %.3g, cpu F32 %.3g\n",
              c.name, scale, diff, cpu_diff);
  EXPECT_LE(diff, 1e-4 * scale);
  EXPECT_LE(cpu_diff, 1e-4 * scale);
}

INSTANTIATE_TEST_SUITE_P(All, GgufArchParity,
                         ::testing::Values(Case{"gemma3", Gemma3Spec(), false},
                                           Case{"gemma3_tokenizer", Gemma3Spec(), true},
                                           Case{"minicpm", MiniCpmSpec(), false}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(GgufArchExtras, MapsGemma3NormNames) {
  EXPECT_EQ(HfTensorName("blk.2.ffn_norm.weight", "gemma3"),
            "model.layers.2.pre_feedforward_layernorm.weight");
  EXPECT_EQ(HfTensorName("blk.2.post_attention_norm.weight", "gemma3"),
            "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(HfTensorName("blk.0.post_ffw_norm.weight", "gemma3"),
            "model.layers.0.post_feedforward_layernorm.weight");
  EXPECT_EQ(HfTensorName("blk.2.ffn_norm.weight", "llama"),
            "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(HfTensorName("blk.0.post_ffw_norm.weight", "llama"), "");
  EXPECT_EQ(HfTensorName("rope_factors_long.weight", "minicpm"), "");
}

// The converter's file with one arch-specific field made wrong by `mutate`.
Status OpenMutated(const SyntheticModelSpec& spec, void (*mutate)(test::GgufWriter*)) {
  test::TempDir tmp;
  EXPECT_TRUE(WriteSyntheticCheckpoint(tmp.File("hf"), spec).ok());
  test::GgufWriter w;
  const Status built = test::BuildGgufOfCheckpoint(tmp.File("hf"), "", true, &w);
  EXPECT_TRUE(built.ok()) << built.ToString();
  mutate(&w);
  test::WriteFile(tmp.File("bad.gguf"), w.Build());
  auto ckpt = OpenCheckpoint(tmp.File("bad.gguf"));
  return ckpt ? Status::Ok() : ckpt.status();
}

// The layout Ollama's converter writes for Gemma3ForCausalLM: the local RoPE base as
// rope.local.freq_base and the sliding layers as one bool per layer.
TEST(GgufArchExtras, ReadsOllamasGemma3Keys) {
  test::TempDir tmp;
  SyntheticModelSpec spec = Gemma3Spec();
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("hf"), spec).ok());
  test::GgufWriter w;
  ASSERT_TRUE(test::BuildGgufOfCheckpoint(tmp.File("hf"), "", true, &w).ok());
  ASSERT_TRUE(w.RemoveKey("gemma3.rope.freq_base_swa"));
  w.AddF32("gemma3.rope.local.freq_base", static_cast<float>(spec.rope_local_theta));
  // Not llama.cpp's every-6th pattern, so that the bools are what is read.
  const std::vector<bool> sliding = {true, false, true, true, false, true, true};
  w.AddBoolArray("gemma3.attention.sliding_window_pattern", sliding);
  test::WriteFile(tmp.File("ollama.gguf"), w.Build());
  auto ckpt = OpenCheckpoint(tmp.File("ollama.gguf"));
  ASSERT_TRUE(ckpt) << ckpt.status().ToString();
  EXPECT_DOUBLE_EQ((*ckpt)->config.rope_local_theta, spec.rope_local_theta);
  ASSERT_EQ((*ckpt)->config.layer_types.size(), sliding.size());
  for (size_t i = 0; i < sliding.size(); ++i) {
    EXPECT_EQ((*ckpt)->config.layer_types[i] == LayerType::kSlidingAttention, sliding[i]) << i;
  }
}

TEST(GgufArchExtras, RefusesMalformedGemma3Fields) {
  const SyntheticModelSpec s = Gemma3Spec();
  test::ExpectOneLineError(OpenMutated(s,
                                       [](test::GgufWriter* w) {
                                         w->RemoveKey("gemma3.attention.sliding_window");
                                         w->AddString("gemma3.attention.sliding_window", "5");
                                       }),
                           ErrorCode::kCorrupt, {"bad.gguf", "gemma3.attention.sliding_window"});
  test::ExpectOneLineError(OpenMutated(s,
                                       [](test::GgufWriter* w) {
                                         w->RemoveKey("gemma3.rope.freq_base_swa");
                                         w->AddF32("gemma3.rope.freq_base_swa", -1.0f);
                                       }),
                           ErrorCode::kCorrupt, {"gemma3.rope.freq_base_swa", "positive"});
  test::ExpectOneLineError(
      OpenMutated(s,
                  [](test::GgufWriter* w) {
                    w->AddBoolArray("gemma3.attention.sliding_window_pattern", {true, false});
                  }),
      ErrorCode::kCorrupt, {"gemma3.attention.sliding_window_pattern", "one bool per layer (7)"});
  test::ExpectOneLineError(
      OpenMutated(s, [](test::GgufWriter* w) { w->AddF32("gemma3.final_logit_softcapping", 30); }),
      ErrorCode::kUnsupported, {"gemma3.final_logit_softcapping", "soft-capping"});
}

TEST(GgufArchExtras, RefusesMalformedMiniCpmFields) {
  const SyntheticModelSpec s = MiniCpmSpec();
  test::ExpectOneLineError(
      OpenMutated(s, [](test::GgufWriter* w) { w->RemoveKey("minicpm.logit_scale"); }),
      ErrorCode::kUnsupported, {"minicpm.logit_scale", "missing", "re-convert"});
  test::ExpectOneLineError(OpenMutated(s,
                                       [](test::GgufWriter* w) {
                                         w->RemoveKey("minicpm.residual_scale");
                                         w->AddF32("minicpm.residual_scale",
                                                   std::numeric_limits<float>::quiet_NaN());
                                       }),
                           ErrorCode::kCorrupt, {"minicpm.residual_scale", "positive"});
  test::ExpectOneLineError(OpenMutated(s,
                                       [](test::GgufWriter* w) {
                                         w->RemoveTensor("rope_factors_short.weight");
                                         w->AddTensor("rope_factors_short.weight", GgmlType::kF32,
                                                      {4},
                                                      test::F32Bytes(std::vector<float>(4, 1)));
                                       }),
                           ErrorCode::kCorrupt, {"'rope_factors_short.weight'", "F32 [8]"});
  test::ExpectOneLineError(OpenMutated(s,
                                       [](test::GgufWriter* w) {
                                         w->RemoveKey("minicpm.rope.scaling.type");
                                         w->AddString("minicpm.rope.scaling.type", "yarn");
                                       }),
                           ErrorCode::kUnsupported, {"minicpm.rope.scaling.type", "'yarn'"});
}

}  // namespace
}  // namespace tessera
