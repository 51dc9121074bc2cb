// F16 and BF16 GGUF files as convert_hf_to_gguf.py --outtype f16|bf16 writes them (matrices
// rounded to nearest even, 1-D tensors and norms kept F32; support/hf_to_gguf.h) hold the same
// weights as a safetensors checkpoint of those F16/BF16 values, so tessera's logits from the two
// agree within 1e-4 of the largest logit on the reference backend and on the cpu backend's
// default format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/logits_test_util.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_parity.h"
#include "model/synthetic_checkpoint.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

struct Case {
  ModelFamily family;
  GgmlType outtype;  // kF16 or kBF16
};

SyntheticModelSpec Spec(ModelFamily family) {
  SyntheticModelSpec s = test::SmallGgufSpec(family);
  s.vocab = 4352;  // the synthetic tokenizer's ids (the writer puts the tokenizer in the file)
  s.tied = family == ModelFamily::kQwen3;
  s.attention_bias = family == ModelFamily::kLlama;
  s.rope_theta = family == ModelFamily::kLlama ? 10000.0 : 1000000.0;
  s.rms_norm_eps = 1e-5;
  s.dtype = DType::kF32;  // the converter rounds F32 sources: the case where rounding matters
  s.seed = 23 + static_cast<uint64_t>(family);
  return s;
}

DType DTypeOf(GgmlType t) {
  return t == GgmlType::kF16 ? DType::kF16 : DType::kBF16;
}

// Rewrites dir's model.safetensors with the values the GGUF file should hold: 2-D tensors as
// `dtype` (the safetensors writer's own round-to-nearest-even), 1-D ones unchanged in F32.
void RoundCheckpointMatrices(const std::string& dir, DType dtype) {
  std::vector<TensorToWrite> rounded;
  {
    auto ckpt = CheckpointTensors::Open(dir);
    ASSERT_TRUE(ckpt) << ckpt.status().ToString();
    for (const std::string& name : ckpt->Names()) {
      const TensorInfo& t = *ckpt->Find(name);
      std::vector<float> v(t.num_elements);
      ASSERT_TRUE(CopyTensorToF32(t, v).ok());
      rounded.push_back(MakeTensor(name, t.shape.size() == 2 ? dtype : DType::kF32, t.shape, v));
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", rounded).ok());
}

// Every bound tensor of the two checkpoints: same dtype, bit-identical values after tessera's
// reading (GGUF: dims reversed, llama's q/k rows un-interleaved).
void ExpectSameWeights(const Checkpoint& gguf, const Checkpoint& hf) {
  std::vector<std::pair<TensorRef, TensorRef>> pairs = {
      {gguf.tensors.embed, hf.tensors.embed},
      {gguf.tensors.final_norm, hf.tensors.final_norm},
      {gguf.tensors.lm_head, hf.tensors.lm_head}};
  ASSERT_EQ(gguf.tensors.layers.size(), hf.tensors.layers.size());
  for (size_t i = 0; i < hf.tensors.layers.size(); ++i) {
    const LayerTensors &g = gguf.tensors.layers[i], &h = hf.tensors.layers[i];
    for (auto field :
         {&LayerTensors::input_norm, &LayerTensors::q_proj, &LayerTensors::q_bias,
          &LayerTensors::k_proj, &LayerTensors::k_bias, &LayerTensors::v_proj,
          &LayerTensors::v_bias, &LayerTensors::o_proj, &LayerTensors::q_norm,
          &LayerTensors::k_norm, &LayerTensors::post_attn_norm, &LayerTensors::gate_proj,
          &LayerTensors::up_proj, &LayerTensors::down_proj}) {
      pairs.emplace_back(g.*field, h.*field);
    }
  }
  size_t compared = 0;
  for (const auto& [g, h] : pairs) {
    ASSERT_EQ(static_cast<bool>(g), static_cast<bool>(h));
    if (!h) continue;
    EXPECT_EQ(g->dtype, h->dtype) << h->name;
    std::vector<float> gv, hv;
    ASSERT_TRUE(WidenToF32(g, &gv).ok() && WidenToF32(h, &hv).ok()) << h->name;
    ASSERT_EQ(gv.size(), hv.size()) << h->name;
    size_t differ = 0;
    for (size_t j = 0; j < hv.size(); ++j) differ += gv[j] != hv[j];
    EXPECT_EQ(differ, 0u) << h->name << ": values that differ of " << hv.size();
    ++compared;
  }
  EXPECT_GE(compared, 11u);
}

class GgufFloatTypes : public ::testing::TestWithParam<Case> {};

TEST_P(GgufFloatTypes, LogitsMatchTheSafetensorsCheckpoint) {
  const Case c = GetParam();
  const SyntheticModelSpec spec = Spec(c.family);
  test::TempDir tmp;
  const std::string dir = tmp.File("hf"), path = tmp.File("model.gguf");
  ASSERT_TRUE(WriteSyntheticModel(dir, spec).ok());
  // The synthetic tokenizer splits like GPT-2; "smollm" is the nearest supported pre name.
  Status written = test::WriteGgufOfCheckpoint(dir, "smollm", path, true, c.outtype);
  ASSERT_TRUE(written.ok()) << written.ToString();
  RoundCheckpointMatrices(dir, DTypeOf(c.outtype));
  if (HasFatalFailure()) return;

  // The converter's per-tensor types, as stored.
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file) << file.status().ToString();
  auto type_of = [&](const std::string& name) {
    const GgufTensor* t = file->FindTensor(name);
    EXPECT_TRUE(t) << name;
    return t ? t->type : GgmlType::kF32;
  };
  EXPECT_EQ(type_of("token_embd.weight"), c.outtype);
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), c.outtype);
  EXPECT_EQ(type_of("blk.1.ffn_down.weight"), c.outtype);
  EXPECT_EQ(type_of("blk.0.attn_norm.weight"), GgmlType::kF32);
  EXPECT_EQ(type_of("blk.1.ffn_norm.weight"), GgmlType::kF32);
  EXPECT_EQ(type_of("output_norm.weight"), GgmlType::kF32);
  if (c.family != ModelFamily::kQwen3) {
    EXPECT_EQ(type_of("output.weight"), c.outtype);
  }
  if (c.family == ModelFamily::kQwen2) {
    EXPECT_EQ(type_of("blk.0.attn_k.bias"), GgmlType::kF32);
  }
  if (c.family == ModelFamily::kQwen3) {
    EXPECT_EQ(type_of("blk.0.attn_q_norm.weight"), GgmlType::kF32);
  }

  const test::HfAndGguf both = test::OpenHfAndGguf(dir, path);
  ASSERT_TRUE(both.ok());
  ExpectSameWeights(*both.gguf, *both.hf);

  const std::vector<int32_t> tokens = test::RandomTokens(24, spec.vocab, 7);
  const std::string type_name = c.outtype == GgmlType::kF16 ? "F16" : "BF16";
  // The reference backend, and the cpu backend in its default format (BF16 panels for 16-bit
  // weights, the same for both checkpoints).
  for (const char* placement : {"reference", "cpu"}) {
    const test::LogitsDiff d =
        test::CompareCheckpointLogits(both.hf, both.gguf, placement, WeightFormat::kAuto, tokens);
    std::printf("[ measured ] %s %s %s: max |logit| %.3g, max |diff| %.3g\n",
                std::string(ModelFamilyName(c.family)).c_str(), type_name.c_str(), placement,
                d.scale, d.diff);
    EXPECT_GT(d.scale, 0.0);
    EXPECT_LE(d.diff, 1e-4 * d.scale) << placement;
  }
  auto gguf_format = ResolveWeightFormat(*both.gguf, WeightFormat::kAuto);
  auto hf_format = ResolveWeightFormat(*both.hf, WeightFormat::kAuto);
  ASSERT_TRUE(gguf_format && hf_format);
  EXPECT_EQ(*gguf_format, WeightFormat::kBF16);
  EXPECT_EQ(*gguf_format, *hf_format);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(ModelFamilyName(info.param.family)) +
         (info.param.outtype == GgmlType::kF16 ? "_F16" : "_BF16");
}

INSTANTIATE_TEST_SUITE_P(All, GgufFloatTypes,
                         ::testing::Values(Case{ModelFamily::kLlama, GgmlType::kF16},
                                           Case{ModelFamily::kQwen2, GgmlType::kF16},
                                           Case{ModelFamily::kQwen3, GgmlType::kF16},
                                           Case{ModelFamily::kLlama, GgmlType::kBF16},
                                           Case{ModelFamily::kQwen2, GgmlType::kBF16},
                                           Case{ModelFamily::kQwen3, GgmlType::kBF16}),
                         CaseName);

// The per-tensor rule on its own: only matrices take the output type.
TEST(GgufFloatTypes, ConverterKeepsVectorsAndNormsF32) {
  EXPECT_EQ(test::GgufFloatTypeOf("blk.0.attn_q.weight", 2, GgmlType::kF16), GgmlType::kF16);
  EXPECT_EQ(test::GgufFloatTypeOf("token_embd.weight", 2, GgmlType::kBF16), GgmlType::kBF16);
  EXPECT_EQ(test::GgufFloatTypeOf("blk.0.attn_q.bias", 1, GgmlType::kF16), GgmlType::kF32);
  EXPECT_EQ(test::GgufFloatTypeOf("blk.3.attn_k_norm.weight", 1, GgmlType::kBF16), GgmlType::kF32);
  EXPECT_EQ(test::GgufFloatTypeOf("some_2d_norm.weight", 2, GgmlType::kF16), GgmlType::kF32);
  EXPECT_EQ(test::GgufFloatTypeOf("blk.0.ffn_up.weight", 2, GgmlType::kF32), GgmlType::kF32);
}

// Round to nearest even, ties to even, as numpy's astype(float16) and gguf-py's BF16.
TEST(GgufFloatTypes, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between F16's 1 and 1 + 2^-10: ties to the even 1 (0x3c00);
  // 1 + 3 * 2^-11 ties up to 1 + 2^-9 (0x3c02). BF16: 1 + 2^-8 ties to 1 (0x3f80),
  // 1 + 3 * 2^-8 ties up to 0x3f82; 1 + 2^-8 + 2^-20 rounds up to 0x3f81.
  const std::string f16 = test::GgufFloatBytes(
      {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11)}, GgmlType::kF16);
  EXPECT_EQ(f16, std::string("\x00\x3c\x02\x3c", 4));
  const std::string bf16 =
      test::GgufFloatBytes({1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8),
                            1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)},
                           GgmlType::kBF16);
  EXPECT_EQ(bf16, std::string("\x80\x3f\x82\x3f\x81\x3f", 6));
}

}  // namespace
}  // namespace tessera
