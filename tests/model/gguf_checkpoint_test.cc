// A GGUF file as a checkpoint: the same synthetic weights written as safetensors and as GGUF
// (the way llama.cpp's convert_hf_to_gguf.py writes them: reversed dims, renamed tensors,
// llama's q/k rows interleaved per head) give the same logits on the reference backend.
#include "model/gguf_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "backend/logits_test_util.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "format/format_test_util.h"
#include "format/safetensors.h"
#include "model/gguf_parity.h"
#include "model/synthetic_checkpoint.h"
#include "support/gguf_writer.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

// Hugging Face name -> GGUF name, as llama.cpp's tensor map has them (support/hf_to_gguf.h).
std::string GgufName(const std::string& hf) {
  std::string name = test::GgufTensorNameOf(hf);
  EXPECT_FALSE(name.empty()) << hf;
  return name;
}

SyntheticModelSpec Spec(ModelFamily family) {
  SyntheticModelSpec s = test::SmallGgufSpec(family);
  s.tied = family == ModelFamily::kQwen3;
  s.attention_bias = family == ModelFamily::kLlama;
  s.rope_theta = family == ModelFamily::kLlama ? 10000.0 : 1000000.0;
  s.rms_norm_eps = 1e-5;
  s.seed = 11 + static_cast<uint64_t>(family);
  return s;
}

// Writes the checkpoint at `dir` as a GGUF file, weights F32, or Q8_0 for 2-D matrices whose
// rows are whole blocks; then (Q8_0) rewrites dir's safetensors with the values the blocks
// stand for, so that both describe the same model.
void WriteGguf(const std::string& dir, const SyntheticModelSpec& s, bool q8_0,
               const std::string& path) {
  auto ckpt = CheckpointTensors::Open(dir);
  ASSERT_TRUE(ckpt) << ckpt.status().ToString();
  auto config_text = ReadFileToString(dir + "/config.json", 1u << 20);
  ASSERT_TRUE(config_text) << config_text.status().ToString();
  auto config = ParseModelConfig(*config_text);
  ASSERT_TRUE(config) << config.status().ToString();
  test::GgufWriter w;
  ASSERT_TRUE(test::AddGgufArchitecture(*config, &w).ok());
  w.AddU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.bos_token_id));
  w.AddU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos_token_id));
  std::vector<TensorToWrite> rewritten;
  for (const std::string& name : ckpt->Names()) {
    const TensorInfo& t = *ckpt->Find(name);
    std::vector<float> v(t.num_elements);
    ASSERT_TRUE(CopyTensorToF32(t, v).ok());
    std::vector<float> stored = v;  // what the safetensors side holds
    const int64_t permuted_heads = test::GgufPermutedHeads(name, *config);
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    std::string bytes;
    if (q8_0 && t.shape.size() == 2 && t.shape[1] % 32 == 0) {
      bytes = test::QuantizeQ8_0(v, &stored);  // row-wise blocks, before any permutation
      v = stored;
    }
    if (permuted_heads > 0) {
      v = test::PermuteLlamaRows(v, t.shape[0], permuted_heads);
      if (!bytes.empty()) {
        std::vector<float> unused;
        bytes =
            test::QuantizeQ8_0(test::PermuteLlamaRows(stored, t.shape[0], permuted_heads), &unused);
      }
    }
    if (bytes.empty()) {
      w.AddTensor(GgufName(name), GgmlType::kF32, dims, test::F32Bytes(v));
    } else {
      w.AddTensor(GgufName(name), GgmlType::kQ8_0, dims, bytes);
    }
    rewritten.push_back(MakeTensor(name, DType::kF32, t.shape, stored));
  }
  test::WriteFile(path, w.Build());
  if (q8_0) {
    ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", rewritten).ok());
  }
}

struct Case {
  ModelFamily family;
  bool q8_0;
};

class GgufCheckpointParity : public ::testing::TestWithParam<Case> {};

TEST_P(GgufCheckpointParity, LogitsMatchTheSafetensorsCheckpoint) {
  const Case c = GetParam();
  test::TempDir tmp;
  const SyntheticModelSpec spec = Spec(c.family);
  const std::string dir = tmp.File("hf");
  ASSERT_TRUE(WriteSyntheticCheckpoint(dir, spec).ok());
  const std::string gguf = tmp.File("model.gguf");
  WriteGguf(dir, spec, c.q8_0, gguf);
  if (HasFatalFailure()) return;

  const test::HfAndGguf both = test::OpenHfAndGguf(dir, gguf);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both.gguf->config.tie_word_embeddings, spec.tied);
  EXPECT_EQ(both.gguf->config.head_dim, spec.head_dim);
  EXPECT_EQ(both.gguf->config.num_kv_heads, spec.kv_heads);
  if (c.q8_0) {
    EXPECT_EQ(both.gguf->tensors.layers[0].gate_proj->dtype, DType::kGgmlBlocks);
  }

  const std::vector<int32_t> tokens = test::RandomTokens(24, spec.vocab, 5);
  auto want_exec = test::Load(both.hf, "reference", WeightFormat::kAuto, 64, 8);
  auto got_exec = test::Load(both.gguf, "reference", WeightFormat::kAuto, 64, 8);
  ASSERT_TRUE(want_exec && got_exec);
  const std::vector<float> want = test::AllLogits(*want_exec, tokens);
  const std::vector<float> got = test::AllLogits(*got_exec, tokens);
  double scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const double diff = test::MaxAbsDiff(got, want);
  std::printf("[ measured ] %s %s: max |logit| %.3g, max |diff| %.3g\n",
              std::string(ModelFamilyName(c.family)).c_str(), c.q8_0 ? "Q8_0" : "F32", scale, diff);
  EXPECT_LE(diff, 1e-4 * scale);
  // The cpu backend widens the same tensors row range by row range (F32 panels).
  auto cpu_exec = test::Load(both.gguf, "cpu", WeightFormat::kF32, 64, 8);
  ASSERT_TRUE(cpu_exec);
  const double cpu_diff = test::MaxAbsDiff(test::AllLogits(*cpu_exec, tokens), want);
  std::printf("[ measured ] cpu F32 from the GGUF: max |diff| %.3g\n", cpu_diff);
  EXPECT_LE(cpu_diff, 1e-4 * scale);

  // The cpu backend's default: exact F32 for an F32 file, the INT8 repack for block-quantized
  // weights. Its error (per-row INT8 weights and activations) is about 1e-2 of the largest
  // logit at real shapes (bench/results/gguf.md); bounded here at 3e-2 with top-1 agreement.
  auto resolved = ResolveWeightFormat(*both.gguf, WeightFormat::kAuto);
  ASSERT_TRUE(resolved);
  EXPECT_EQ(*resolved, c.q8_0 ? WeightFormat::kInt8 : WeightFormat::kF32);
  auto auto_exec = test::Load(both.gguf, "cpu", WeightFormat::kAuto, 64, 8);
  ASSERT_TRUE(auto_exec);
  const std::vector<float> by_default = test::AllLogits(*auto_exec, tokens);
  const double bound = (c.q8_0 ? 3e-2 : 1e-4) * scale;
  const double auto_diff = test::MaxAbsDiff(by_default, want);
  // Top-1 must agree wherever the reference's lead over its runner-up exceeds twice the bound
  // (closer calls may flip legitimately: the small llama's logits span only about 2).
  const size_t vocab = static_cast<size_t>(spec.vocab);
  auto argmax = [](const float* row, size_t n) {
    return static_cast<size_t>(std::max_element(row, row + n) - row);
  };
  size_t clear = 0, agree = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    std::vector<float> row(want.begin() + static_cast<ptrdiff_t>(p * vocab),
                           want.begin() + static_cast<ptrdiff_t>((p + 1) * vocab));
    const size_t top = argmax(row.data(), vocab);
    const float lead = row[top];
    row[top] = -INFINITY;
    if (lead - row[argmax(row.data(), vocab)] <= 2 * bound) continue;
    ++clear;
    agree += argmax(by_default.data() + p * vocab, vocab) == top;
  }
  std::printf(
      "[ measured ] cpu default (%s) from the GGUF: max |diff| %.3g, top-1 %zu/%zu "
      "(positions with a clear lead)\n",
      std::string(WeightFormatName(*resolved)).c_str(), auto_diff, agree, clear);
  EXPECT_LE(auto_diff, bound);
  EXPECT_EQ(agree, clear);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(ModelFamilyName(info.param.family)) + (info.param.q8_0 ? "_Q8_0" : "_F32");
}

INSTANTIATE_TEST_SUITE_P(All, GgufCheckpointParity,
                         ::testing::Values(Case{ModelFamily::kLlama, false},
                                           Case{ModelFamily::kQwen2, false},
                                           Case{ModelFamily::kQwen3, false},
                                           Case{ModelFamily::kLlama, true},
                                           Case{ModelFamily::kQwen3, true}),
                         CaseName);

TEST(GgufCheckpoint, MapsTensorNames) {
  EXPECT_EQ(HfTensorName("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(HfTensorName("blk.0.ffn_down.weight"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(HfTensorName("output.weight"), "lm_head.weight");
  EXPECT_EQ(HfTensorName("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(HfTensorName("blk.x.attn_q.weight"), "");
  EXPECT_EQ(HfTensorName("blk.01.attn_q.weight"), "");
  EXPECT_EQ(HfTensorName("blk.1.token_embd.weight"), "");
  EXPECT_EQ(HfTensorName("rope_freqs.weight"), "");
}

TEST(GgufCheckpoint, RefusesWhatItCannotRun) {
  test::TempDir tmp;
  auto open = [&](const test::GgufWriter& w) {
    test::WriteFile(tmp.File("m.gguf"), w.Build());
    return OpenCheckpoint(tmp.File("m.gguf")).status();
  };
  test::GgufWriter gemma;
  gemma.AddString("general.architecture", "mamba");
  test::ExpectOneLineError(open(gemma), ErrorCode::kUnsupported,
                           {"m.gguf", "'mamba'", "llama, qwen2, qwen3"});

  // A whole small qwen3 with one Q2_K matrix.
  test::GgufWriter w;
  w.AddString("general.architecture", "qwen3");
  for (auto [key, v] :
       std::vector<std::pair<std::string, uint32_t>>{{"block_count", 1},
                                                     {"context_length", 64},
                                                     {"embedding_length", 256},
                                                     {"feed_forward_length", 256},
                                                     {"attention.head_count", 2},
                                                     {"attention.head_count_kv", 1},
                                                     {"attention.key_length", 128}}) {
    w.AddU32("qwen3." + key, v);
  }
  w.AddF32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.AddTensor("token_embd.weight", GgmlType::kF32, {256, 4}, std::string(4096, '\0'));
  w.AddTensor("blk.0.ffn_down.weight", GgmlType::kQ2_K, {256, 256}, std::string(256 * 84, '\0'));
  test::ExpectOneLineError(open(w), ErrorCode::kUnsupported,
                           {"'blk.0.ffn_down.weight'", "Q2_K is not supported", "Q6_K"});
  // Missing metadata is named too.
  test::GgufWriter bare;
  bare.AddString("general.architecture", "llama");
  test::ExpectOneLineError(open(bare), ErrorCode::kNotFound, {"'llama.block_count'", "missing"});
}

}  // namespace
}  // namespace tessera
