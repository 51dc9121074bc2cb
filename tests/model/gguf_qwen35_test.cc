// Qwen3.5 from GGUF: a synthetic qwen3_5 checkpoint written as the F32 GGUF llama.cpp's
// converter would write (support/hf_to_gguf_qwen35.h: 1 + w norms, -exp(A_log), squeezed
// conv1d, value heads regrouped to tiled order) loads back to the same model: the same config
// and the same logits as the Hugging Face folder, on the reference and cpu backends; and the
// loader refuses malformed qwen35 fields with one line naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "backend/logits_test_util.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "format/format_test_util.h"
#include "format/gguf_quants.h"
#include "format/safetensors.h"
#include "model/checkpoint.h"
#include "model/gguf_parity.h"
#include "model/synthetic_checkpoint.h"
#include "model/tensor_convert.h"
#include "support/gguf_writer.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

struct Case {
  const char* name;
  int64_t key_heads, value_heads, key_dim, value_dim;
  bool tied, nested;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// Both checkpoints' logits on one backend: the cpu backend in F32 (its exact format), the
// reference backend as it is.
test::LogitsDiff CompareLogits(std::shared_ptr<const Checkpoint> want,
                               std::shared_ptr<const Checkpoint> got, const std::string& backend,
                               const std::vector<int32_t>& tokens) {
  const WeightFormat format = backend == "cpu" ? WeightFormat::kF32 : WeightFormat::kAuto;
  return test::CompareCheckpointLogits(std::move(want), std::move(got), backend, format, tokens);
}

SyntheticModelSpec Spec(const Case& c) {
  SyntheticModelSpec s;
  s.family = ModelFamily::kQwen3_5;
  s.hidden = 64;
  s.intermediate = 96;
  s.layers = 6;  // linear, linear, attention, linear, linear, attention
  s.full_attention_interval = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.partial_rotary_factor = 0.25;
  s.vocab = 4352;  // the synthetic tokenizer's ids fit
  s.max_position = 64;
  s.tied = c.tied;
  s.nested_config = c.nested;
  s.rope_theta = 1e7;
  s.rms_norm_eps = 1e-6;
  s.linear_key_heads = c.key_heads;
  s.linear_value_heads = c.value_heads;
  s.linear_key_dim = c.key_dim;
  s.linear_value_dim = c.value_dim;
  s.linear_conv_kernel = 4;
  s.seed = 35;
  return s;
}

class GgufQwen35 : public ::testing::TestWithParam<Case> {};

TEST_P(GgufQwen35, LogitsMatchTheHuggingFaceCheckpoint) {
  const SyntheticModelSpec spec = Spec(GetParam());
  test::TempDir tmp;
  const std::string dir = tmp.File("hf"), gguf = tmp.File("m.gguf");
  ASSERT_TRUE(WriteSyntheticModel(dir, spec).ok());
  const Status written = test::WriteGgufOfCheckpoint(dir, "qwen35", gguf);
  ASSERT_TRUE(written.ok()) << written.ToString();

  const test::HfAndGguf both = test::OpenHfAndGguf(dir, gguf);
  ASSERT_TRUE(both.ok());
  const ModelConfig& got = both.gguf->config;
  const ModelConfig& want = both.hf->config;
  EXPECT_EQ(got.family, ModelFamily::kQwen3_5);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.layer_types, want.layer_types);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.partial_rotary_factor, want.partial_rotary_factor);
  EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings);
  ASSERT_TRUE(got.linear_attention);
  EXPECT_EQ(got.linear_attention->num_key_heads, want.linear_attention->num_key_heads);
  EXPECT_EQ(got.linear_attention->num_value_heads, want.linear_attention->num_value_heads);
  EXPECT_EQ(got.linear_attention->key_head_dim, want.linear_attention->key_head_dim);
  EXPECT_EQ(got.linear_attention->value_head_dim, want.linear_attention->value_head_dim);
  EXPECT_EQ(got.linear_attention->conv_kernel, want.linear_attention->conv_kernel);
  EXPECT_TRUE(got.attn_output_gate && got.norm_one_plus_weight);

  const std::vector<int32_t> tokens = test::RandomTokens(20, spec.vocab, 7);
  for (const char* backend : {"reference", "cpu"}) {
    const test::LogitsDiff d = CompareLogits(both.hf, both.gguf, backend, tokens);
    std::printf("[ measured ] qwen35 %s %s: max |logit| %.3g, max |diff| %.3g\n", GetParam().name,
                backend, d.scale, d.diff);
    EXPECT_LE(d.diff, 1e-4 * d.scale) << backend;
  }
}

// Regrouped: more value heads than key heads (the converter tiles them), value heads wider
// than key heads, the published multimodal layout (vision tower and MTP weights left out).
// Plain: as many value as key heads of one size (what llama.cpp's loader requires), untied,
// the text-only layout.
INSTANTIATE_TEST_SUITE_P(All, GgufQwen35,
                         ::testing::Values(Case{"regrouped", 2, 4, 8, 12, true, true},
                                           Case{"plain", 2, 2, 16, 16, false, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// Every metadata value of `from`, copied as written.
void CopyMetadata(const GgufFile& from, test::GgufWriter* w) {
  for (const auto& [key, v] : from.metadata()) {
    std::string payload;
    if (v.type == GgufValueType::kString) {
      test::AppendGgufString(&payload, v.string);
    } else if (v.type == GgufValueType::kArray) {
      test::AppendLe(&payload, static_cast<uint32_t>(v.item_type), 4);
      test::AppendLe(&payload, v.item_count, 8);
      if (v.item_type == GgufValueType::kString) {
        for (std::string_view item : v.strings) test::AppendGgufString(&payload, item);
      } else {
        payload.append(reinterpret_cast<const char*>(v.items.data()), v.items.size());
      }
    } else {
      payload.append(reinterpret_cast<const char*>(v.scalar.data()), v.scalar.size());
    }
    w->AddRaw(key, static_cast<uint32_t>(v.type), payload);
  }
}

// Block bytes for a tensor of the F32 file, and the values they stand for; nullopt keeps F32.
struct Blocks {
  GgmlType type = GgmlType::kF32;
  std::string bytes;
  std::vector<float> values;
};
using Quantizer =
    std::function<std::optional<Blocks>(const GgufTensor&, const std::vector<float>&)>;

// The F32 file of `spec` written twice more: with the tensors `quantize` picks as blocks, and
// with the values those blocks stand for as F32. Both load to the same tensors (every one
// widens to exactly the same floats) and the same logits, on the reference and cpu backends;
// the F32 file itself is the Hugging Face folder's model (LogitsMatchTheHuggingFaceCheckpoint).
// Returns the block file's checkpoint.
std::shared_ptr<const Checkpoint> ExpectBlocksLoadAsTheirValues(const SyntheticModelSpec& spec,
                                                                const Quantizer& quantize) {
  test::TempDir tmp;
  const std::string dir = tmp.File("hf"), f32 = tmp.File("f32.gguf");
  EXPECT_TRUE(WriteSyntheticModel(dir, spec).ok());
  EXPECT_TRUE(test::WriteGgufOfCheckpoint(dir, "qwen35", f32).ok());
  auto file = GgufFile::Open(f32);
  EXPECT_TRUE(file) << file.status().ToString();
  if (!file) return nullptr;
  test::GgufWriter quantized, dequantized;
  CopyMetadata(*file, &quantized);
  CopyMetadata(*file, &dequantized);
  for (const GgufTensor& t : file->tensors()) {
    std::vector<float> v(t.num_elements);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    if (std::optional<Blocks> b = quantize(t, v)) {
      quantized.AddTensor(t.name, b->type, t.dims, b->bytes);
      dequantized.AddTensor(t.name, GgmlType::kF32, t.dims, test::F32Bytes(b->values));
    } else {
      quantized.AddTensor(t.name, GgmlType::kF32, t.dims, test::F32Bytes(v));
      dequantized.AddTensor(t.name, GgmlType::kF32, t.dims, test::F32Bytes(v));
    }
  }
  test::WriteFile(tmp.File("blocks.gguf"), quantized.Build());
  test::WriteFile(tmp.File("values.gguf"), dequantized.Build());
  auto from_blocks = OpenCheckpoint(tmp.File("blocks.gguf"));
  EXPECT_TRUE(from_blocks) << from_blocks.status().ToString();
  auto from_values = OpenCheckpoint(tmp.File("values.gguf"));
  EXPECT_TRUE(from_values) << from_values.status().ToString();
  if (!from_blocks || !from_values) return nullptr;
  for (const std::string& name : (*from_values)->files.Names()) {
    std::vector<float> got, want;
    EXPECT_TRUE(WidenToF32(*(*from_blocks)->files.Find(name), &got).ok()) << name;
    EXPECT_TRUE(WidenToF32(*(*from_values)->files.Find(name), &want).ok()) << name;
    EXPECT_TRUE(got == want) << name;
  }
  const std::vector<int32_t> tokens = test::RandomTokens(20, spec.vocab, 9);
  for (const char* backend : {"reference", "cpu"}) {
    const test::LogitsDiff d = CompareLogits(*from_values, *from_blocks, backend, tokens);
    std::printf("[ measured ] qwen35 blocks %s: max |logit| %.3g, max |diff| %.3g\n", backend,
                d.scale, d.diff);
    EXPECT_LE(d.diff, 1e-5 * d.scale) << backend;
  }
  return *from_blocks;
}

// Q8_0 matrices as the converter's q8_0 (or llama-quantize) makes them: every 2-D ".weight"
// of whole blocks but ssm_conv1d and the norms. With value heads regrouped their blocks move
// whole: the rows of attn_qkv, attn_gate, ssm_alpha, ssm_beta, and ssm_out's columns (a value
// head of 32 columns being one block).
TEST(GgufQwen35File, Q8_0BlocksMoveWhole) {
  int matrices = 0;
  auto ckpt = ExpectBlocksLoadAsTheirValues(
      Spec(Case{"q8_0", 2, 4, 16, 32, true, true}),
      [&](const GgufTensor& t, const std::vector<float>& v) -> std::optional<Blocks> {
        if (t.dims.size() != 2 || t.dims[0] % 32 != 0 || !t.name.ends_with(".weight") ||
            t.name.ends_with("ssm_conv1d.weight") || t.name.ends_with("norm.weight")) {
          return std::nullopt;
        }
        ++matrices;
        Blocks b{GgmlType::kQ8_0, "", {}};
        b.bytes = test::QuantizeQ8_0(v, &b.values);
        return b;
      });
  ASSERT_TRUE(ckpt);
  EXPECT_GT(matrices, 20);
  EXPECT_EQ(ckpt->files.Find("model.layers.0.linear_attn.out_proj.weight")->dtype,
            DType::kGgmlBlocks);
}

// F16 and BF16 files (the converter's --outtype f16 / bf16: every 2-D ".weight" but
// ssm_conv1d and the norms): regrouped rows and ssm_out's columns move as 2-byte elements.
TEST(GgufQwen35File, HalfPrecisionMatricesMove) {
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    auto ckpt = ExpectBlocksLoadAsTheirValues(
        Spec(Case{"half", 2, 4, 8, 12, true, true}),
        [&](const GgufTensor& t, const std::vector<float>& v) -> std::optional<Blocks> {
          if (t.dims.size() != 2 || !t.name.ends_with(".weight") ||
              t.name.ends_with("ssm_conv1d.weight") || t.name.ends_with("norm.weight")) {
            return std::nullopt;
          }
          Blocks b{type, std::string(2 * v.size(), '\0'), std::vector<float>(v.size())};
          for (size_t i = 0; i < v.size(); ++i) {
            const uint16_t h = type == GgmlType::kF16 ? FloatToF16(v[i]) : FloatToBf16(v[i]);
            std::memcpy(&b.bytes[2 * i], &h, 2);
            b.values[i] = type == GgmlType::kF16 ? F16ToFloat(h) : Bf16ToFloat(h);
          }
          return b;
        });
    ASSERT_TRUE(ckpt);
    EXPECT_EQ(ckpt->files.Find("model.layers.0.linear_attn.out_proj.weight")->dtype,
              type == GgmlType::kF16 ? DType::kF16 : DType::kBF16);
  }
}

// Q4_K blocks of 256 columns over value heads of 64: ssm_out is widened to F32 at open, then
// its columns move. (Random block bytes with finite scales: only the layout is under test.)
TEST(GgufQwen35File, Q4_KBlocksStraddlingValueHeadsAreWidened) {
  uint64_t state = 1;
  auto ckpt = ExpectBlocksLoadAsTheirValues(
      Spec(Case{"q4_k", 2, 4, 16, 64, true, true}),
      [&](const GgufTensor& t, const std::vector<float>&) -> std::optional<Blocks> {
        if (!t.name.ends_with("ssm_out.weight")) return std::nullopt;
        Blocks b{GgmlType::kQ4_K, std::string(t.num_elements / 256 * 144, '\0'), {}};
        for (size_t i = 0; i < b.bytes.size(); ++i) {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          b.bytes[i] = static_cast<char>(state >> 56);
          if (i % 144 == 0) {  // d and dmin: small finite f16
            const uint16_t d = FloatToF16(0.002f), dmin = FloatToF16(0.001f);
            std::memcpy(&b.bytes[i], &d, 2);
            std::memcpy(&b.bytes[i + 2], &dmin, 2);
            i += 3;
          }
        }
        b.values.resize(t.num_elements);
        EXPECT_TRUE(DequantizeToF32(
                        GgmlType::kQ4_K,
                        std::span(reinterpret_cast<const uint8_t*>(b.bytes.data()), b.bytes.size()),
                        b.values)
                        .ok());
        return b;
      });
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->files.Find("model.layers.0.linear_attn.out_proj.weight")->dtype, DType::kF32);
}

// An MTP head as Qwen3.5 publishes it (mtp_num_hidden_layers 1; mtp.layers.0 a gated attention
// decoder layer; mtp.fc and three norms): the converter writes it as block num_layers
// (nextn_predict_layers 1, its own tensors as blk.N.nextn.*, every norm 1 + w); tessera reads
// the decoder alone from the file, as from the folder.
TEST(GgufQwen35File, MtpHeadIsWrittenAfterTheDecoderAndNotRun) {
  const SyntheticModelSpec spec = Spec(Case{"mtp", 2, 2, 16, 16, false, false});
  test::TempDir tmp;
  const std::string dir = tmp.File("hf"), gguf = tmp.File("m.gguf");
  ASSERT_TRUE(WriteSyntheticModel(dir, spec).ok());
  std::vector<TensorToWrite> tensors;
  {
    auto ckpt = CheckpointTensors::Open(dir);
    ASSERT_TRUE(ckpt);
    for (const std::string& name : ckpt->Names()) {
      const TensorInfo& t = *ckpt->Find(name);
      std::vector<float> v(t.num_elements);
      ASSERT_TRUE(CopyTensorToF32(t, v).ok());
      tensors.push_back(MakeTensor(name, DType::kF32, t.shape, v));
    }
  }
  const int64_t h = spec.hidden, q = spec.heads * spec.head_dim, kv = spec.kv_heads * spec.head_dim;
  const std::string l = "mtp.layers.0.";
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {l + "input_layernorm.weight", {h}},
           {l + "self_attn.q_proj.weight", {2 * q, h}},
           {l + "self_attn.k_proj.weight", {kv, h}},
           {l + "self_attn.v_proj.weight", {kv, h}},
           {l + "self_attn.o_proj.weight", {h, q}},
           {l + "self_attn.q_norm.weight", {spec.head_dim}},
           {l + "self_attn.k_norm.weight", {spec.head_dim}},
           {l + "post_attention_layernorm.weight", {h}},
           {l + "mlp.gate_proj.weight", {spec.intermediate, h}},
           {l + "mlp.up_proj.weight", {spec.intermediate, h}},
           {l + "mlp.down_proj.weight", {h, spec.intermediate}},
           {"mtp.pre_fc_norm_embedding.weight", {h}},
           {"mtp.pre_fc_norm_hidden.weight", {h}},
           {"mtp.norm.weight", {h}}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 7);
    tensors.push_back(MakeTensor(name, DType::kF32, shape, v));
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
  auto config_text = ReadFileToString(dir + "/config.json", 1 << 20);
  ASSERT_TRUE(config_text);
  nlohmann::json config = nlohmann::json::parse(*config_text);
  config["mtp_num_hidden_layers"] = 1;
  test::WriteFile(dir + "/config.json", config.dump(2));
  const Status written = test::WriteGgufOfCheckpoint(dir, "qwen35", gguf);
  ASSERT_TRUE(written.ok()) << written.ToString();

  auto file = GgufFile::Open(gguf);
  ASSERT_TRUE(file) << file.status().ToString();
  EXPECT_EQ(*file->GetU32("qwen35.block_count"), spec.layers + 1);
  EXPECT_EQ(*file->GetU32("qwen35.nextn_predict_layers"), 1u);
  const std::string b = "blk." + std::to_string(spec.layers) + ".";
  for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
           {b + "nextn.eh_proj.weight", {2 * static_cast<uint64_t>(h), static_cast<uint64_t>(h)}},
           {b + "nextn.enorm.weight", {static_cast<uint64_t>(h)}},
           {b + "nextn.hnorm.weight", {static_cast<uint64_t>(h)}},
           {b + "nextn.shared_head_norm.weight", {static_cast<uint64_t>(h)}},
           {b + "attn_q.weight", {static_cast<uint64_t>(h), 2 * static_cast<uint64_t>(q)}},
           {b + "post_attention_norm.weight", {static_cast<uint64_t>(h)}}}) {
    const GgufTensor* t = file->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dims, dims) << name;
  }
  float enorm1 = 0;  // 0.01 * (1 % 7), plus the converter's 1
  std::memcpy(&enorm1, file->FindTensor(b + "nextn.enorm.weight")->data.data() + 4, 4);
  EXPECT_FLOAT_EQ(enorm1, 1.01f);

  const test::HfAndGguf both = test::OpenHfAndGguf(dir, gguf);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both.gguf->config.num_layers, spec.layers);
  const std::vector<int32_t> tokens = test::RandomTokens(12, spec.vocab, 3);
  const test::LogitsDiff d = CompareLogits(both.hf, both.gguf, "reference", tokens);
  EXPECT_LE(d.diff, 1e-4 * d.scale);
}

// A qwen35 file of one linear layer (hidden 32; 1 key head and 2 value heads of 8; conv1d
// [kernel 4, channels 32]) with the given conv1d dims and first A value; `whole`: every tensor
// of that layer and an MTP block after it (nextn_predict_layers 1), else only the embedding,
// ssm_a and ssm_conv1d.
struct SmallQwen35 {
  std::vector<uint64_t> conv_dims = {4, 32};
  float a = -1.0f;
  bool kernel_key = true;
  bool whole = false;

  std::string Build() const {
    test::GgufWriter w;
    w.AddString("general.architecture", "qwen35");
    for (auto [key, v] :
         std::vector<std::pair<std::string, uint32_t>>{{"block_count", whole ? 2 : 1},
                                                       {"context_length", 64},
                                                       {"embedding_length", 32},
                                                       {"feed_forward_length", 64},
                                                       {"attention.head_count", 2},
                                                       {"attention.head_count_kv", 1},
                                                       {"attention.key_length", 16},
                                                       {"rope.dimension_count", 4},
                                                       {"ssm.state_size", 8},
                                                       {"ssm.group_count", 1},
                                                       {"ssm.time_step_rank", 2},
                                                       {"ssm.inner_size", 16}}) {
      w.AddU32("qwen35." + key, v);
    }
    if (kernel_key) w.AddU32("qwen35.ssm.conv_kernel", 4);
    if (whole) w.AddU32("qwen35.nextn_predict_layers", 1);
    w.AddF32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    auto zeros = [&](const std::string& name, std::vector<uint64_t> dims) {
      uint64_t n = 1;
      for (uint64_t d : dims) n *= d;
      w.AddTensor(name, GgmlType::kF32, dims, std::string(4 * n, '\0'));
    };
    zeros("token_embd.weight", {32, 8});
    const float a_values[2] = {a, -1.0f};
    w.AddTensor("blk.0.ssm_a", GgmlType::kF32, {2}, test::F32Bytes(a_values));
    zeros("blk.0.ssm_conv1d.weight", conv_dims);
    if (!whole) return w.Build();
    for (auto [name, dims] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"output_norm.weight", {32}},
             {"blk.0.attn_norm.weight", {32}},
             {"blk.0.post_attention_norm.weight", {32}},
             {"blk.0.attn_qkv.weight", {32, 32}},
             {"blk.0.attn_gate.weight", {32, 16}},
             {"blk.0.ssm_beta.weight", {32, 2}},
             {"blk.0.ssm_alpha.weight", {32, 2}},
             {"blk.0.ssm_dt.bias", {2}},
             {"blk.0.ssm_norm.weight", {8}},
             {"blk.0.ssm_out.weight", {16, 32}},
             {"blk.0.ffn_gate.weight", {32, 64}},
             {"blk.0.ffn_up.weight", {32, 64}},
             {"blk.0.ffn_down.weight", {64, 32}},
             {"blk.1.attn_norm.weight", {32}},
             {"blk.1.nextn.eh_proj.weight", {64, 32}}}) {
      zeros(name, dims);
    }
    return w.Build();
  }
};

TEST(GgufQwen35File, MalformedFieldsAreRefusedByName) {
  test::TempDir tmp;
  auto open = [&](const SmallQwen35& m) {
    test::WriteFile(tmp.File("m.gguf"), m.Build());
    return OpenCheckpoint(tmp.File("m.gguf")).status();
  };
  // conv1d: [kernel 4, channels 2*1*8 + 16 = 32], here a kernel of 3.
  test::ExpectOneLineError(open({.conv_dims = {3, 32}}), ErrorCode::kCorrupt,
                           {"m.gguf", "'blk.0.ssm_conv1d.weight'", "[3, 32]", "[4, 32]"});
  test::ExpectOneLineError(open({.a = 0.5f}), ErrorCode::kCorrupt,
                           {"m.gguf", "'blk.0.ssm_a'", "-exp(A_log)"});
  test::ExpectOneLineError(open({.kernel_key = false}), ErrorCode::kNotFound,
                           {"'qwen35.ssm.conv_kernel'", "missing"});
}

TEST(GgufQwen35File, MtpBlocksAreIgnored) {
  test::TempDir tmp;
  test::WriteFile(tmp.File("m.gguf"), SmallQwen35{.whole = true}.Build());
  auto ckpt = OpenCheckpoint(tmp.File("m.gguf"));
  ASSERT_TRUE(ckpt) << ckpt.status().ToString();
  EXPECT_EQ((*ckpt)->config.num_layers, 1);  // block_count 2 - nextn_predict_layers 1
  EXPECT_EQ((*ckpt)->config.layer_types, std::vector<LayerType>{LayerType::kLinearAttention});
  EXPECT_NE((*ckpt)->files.Find("mtp.blk.1.nextn.eh_proj.weight"), nullptr);
  const auto& ignored = (*ckpt)->tensors.ignored;
  EXPECT_NE(std::find(ignored.begin(), ignored.end(),
                      "2 tensors under mtp. (not part of the text model)"),
            ignored.end());
}

}  // namespace
}  // namespace tessera
