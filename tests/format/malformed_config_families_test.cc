// config.json of the 2026 families (qwen3_5, gemma3, minicpm): every field they add, missing
// or invalid, is a one-line error naming it; what changes the math and is not implemented is
// refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/model_config.h"
#include "format_test_util.h"

namespace tessera {
namespace {

using nlohmann::json;
using test::ExpectOneLineError;

// Qwen3.5 as published: a multimodal config with the text model under text_config.
json Qwen35() {
  return json::parse(R"({"model_type": "qwen3_5", "tie_word_embeddings": true,
    "text_config": {"model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "vocab_size": 256, "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
      "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                      "full_attention"],
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
      "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                          "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
                          "mrope_interleaved": true},
      "eos_token_id": 3}, "vision_config": {"depth": 2}})");
}

json Gemma3() {
  return json::parse(R"({"model_type": "gemma3_text", "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 6, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 256, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "sliding_window": 512, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
    "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": null,
    "attn_logit_softcapping": null, "rope_scaling": null, "eos_token_id": [1, 106]})");
}

json MiniCpm() {
  return json::parse(R"({"model_type": "minicpm", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 256, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "hidden_act": "silu", "scale_emb": 12, "scale_depth": 1.4,
    "dim_model_base": 16, "tie_word_embeddings": true})");
}

Status Parse(const json& cfg) {
  return ParseModelConfig(cfg.dump()).status();
}

TEST(FamilyConfig, Qwen35ParsesAsPublished) {
  auto c = ParseModelConfig(Qwen35().dump());
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c->layer_types,
            (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kLinearAttention,
                                    LayerType::kLinearAttention, LayerType::kFullAttention}));
  ASSERT_TRUE(c->linear_attention);
  EXPECT_EQ(c->linear_attention->num_value_heads, 4);
  EXPECT_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_TRUE(c->attn_output_gate);
  EXPECT_TRUE(c->norm_one_plus_weight);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->tensor_prefix, "model.language_model.");
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{3});
  EXPECT_EQ(c->default_enable_thinking, false);  // tessera answers directly by default
  // Without layer_types, full_attention_interval (default 4) decides.
  json no_types = Qwen35();
  no_types["text_config"].erase("layer_types");
  no_types["text_config"]["num_hidden_layers"] = 8;
  no_types["text_config"]["full_attention_interval"] = 2;
  auto d = ParseModelConfig(no_types.dump());
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(d->layer_types[0], LayerType::kLinearAttention);
  EXPECT_EQ(d->layer_types[1], LayerType::kFullAttention);
  // The text-only form.
  json text = Qwen35()["text_config"];
  auto e = ParseModelConfig(text.dump());
  ASSERT_TRUE(e) << e.status().message();
  EXPECT_EQ(e->tensor_prefix, "model.");
  EXPECT_FALSE(e->tie_word_embeddings);  // Qwen3_5TextConfig's default
}

TEST(FamilyConfig, Gemma3ParsesAsPublished) {
  auto c = ParseModelConfig(Gemma3().dump());
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kGemma3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c->layer_types[i], LayerType::kSlidingAttention) << i;
  EXPECT_EQ(c->layer_types[5], LayerType::kFullAttention);
  EXPECT_EQ(c->sliding_window, 512);
  EXPECT_EQ(c->rope_local_theta, 1e4);
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c->hidden_act, HiddenAct::kGeluTanh);
  EXPECT_TRUE(c->tie_word_embeddings);  // Gemma3TextConfig's default
  EXPECT_TRUE(c->sandwich_norms);
  EXPECT_DOUBLE_EQ(c->embed_scale, 8.0);
  // The newer per-layer-type rope_parameters, and linear scaling of the global layers.
  json newer = Gemma3();
  newer.erase("rope_theta");
  newer.erase("rope_local_base_freq");
  newer["rope_parameters"] = json::parse(R"({"full_attention": {"rope_type": "linear",
      "factor": 8.0, "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default",
      "rope_theta": 10000.0}})");
  auto d = ParseModelConfig(newer.dump());
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(d->rope_theta, 1e6);
  EXPECT_EQ(d->rope_local_theta, 1e4);
  EXPECT_EQ(d->rope_linear_factor, 8.0);
}

TEST(FamilyConfig, MiniCpmScales) {
  auto c = ParseModelConfig(MiniCpm().dump());
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kMiniCpm);
  EXPECT_DOUBLE_EQ(c->embed_scale, 12.0);
  EXPECT_DOUBLE_EQ(c->residual_scale, 1.4 / 2.0);
  EXPECT_DOUBLE_EQ(c->logit_scale, 16.0 / 64.0);
  json longrope = MiniCpm();
  longrope["rope_scaling"] = json::parse(R"({"rope_type": "longrope",
      "short_factor": [1, 1, 2, 4, 8, 8, 8, 8], "long_factor": [2, 2, 4, 8, 16, 16, 16, 16],
      "original_max_position_embeddings": 512})");
  auto d = ParseModelConfig(longrope.dump());
  ASSERT_TRUE(d) << d.status().message();
  ASSERT_TRUE(d->rope_longrope);
  EXPECT_EQ(d->rope_longrope->short_factor[3], 4.0);
}

TEST(MalformedFamilyConfig, Qwen35Fields) {
  for (const char* key : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                          "linear_value_head_dim", "linear_conv_kernel_dim", "head_dim"}) {
    json c = Qwen35();
    c["text_config"].erase(key);
    const std::string field = std::string("text_config.") + key;
    ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {field.c_str()});
    c["text_config"][key] = -1;
    ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {key});
  }
  json c = Qwen35();
  c["text_config"]["linear_num_value_heads"] = 3;
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"linear_num_value_heads", "multiple"});
  c = Qwen35();
  c["text_config"]["layer_types"][1] = "mamba";
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"layer_types[1]", "mamba"});
  c = Qwen35();
  c["text_config"]["layer_types"][1] = "sliding_attention";  // not a qwen3_5 kind
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"layer_types[1]"});
  c = Qwen35();
  c["text_config"]["layer_types"].erase(0);
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"layer_types", "num_hidden_layers"});
  c = Qwen35();
  c["text_config"]["attn_output_gate"] = false;
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"attn_output_gate"});
  c = Qwen35();
  c["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.3;  // 4.8 dims
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"partial_rotary_factor"});
  c = Qwen35();
  c["text_config"]["attention_bias"] = true;
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"attention_bias"});
  c = Qwen35();
  c.erase("text_config");
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"text_config"});
  c = Qwen35();
  c["text_config"] = "big";
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"text_config"});
  c = Qwen35();
  c["text_config"]["linear_conv_kernel_dim"] = 1000;
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"linear_conv_kernel_dim"});
}

TEST(MalformedFamilyConfig, Gemma3Fields) {
  json c = Gemma3();
  c.erase("sliding_window");
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"sliding_window", "missing"});
  c = Gemma3();
  c["sliding_window"] = 0;
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"sliding_window"});
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    c = Gemma3();
    c[key] = 30.0;
    ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {key});
  }
  c = Gemma3();
  c["hidden_activation"] = "relu";
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"hidden_activation", "relu"});
  c = Gemma3();
  c["query_pre_attn_scalar"] = -1;
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"query_pre_attn_scalar"});
  c = Gemma3();
  c["rope_local_base_freq"] = "fast";
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"rope_local_base_freq"});
  c = Gemma3();
  c["sliding_window_pattern"] = 0;
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"sliding_window_pattern"});
  c = Gemma3();
  c["use_bidirectional_attention"] = true;
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"use_bidirectional_attention"});
  c = Gemma3();
  c["rope_scaling"] = json::parse(R"({"rope_type": "yarn", "factor": 4})");
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"rope_scaling", "yarn"});
  c = Gemma3();
  c["model_type"] = "gemma3";  // multimodal without its text_config
  ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {"text_config"});
}

TEST(MalformedFamilyConfig, MiniCpmFields) {
  for (const char* key : {"scale_emb", "scale_depth", "dim_model_base"}) {
    json c = MiniCpm();
    c[key] = 0;
    ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {key});
    c[key] = "x";
    ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {key});
  }
  json c = MiniCpm();
  c["sparse_config"] = json::parse(R"({"kernel_size": 32})");
  ExpectOneLineError(Parse(c), ErrorCode::kUnsupported, {"sparse_config"});
  const char* bad_longrope[] = {
      R"({"rope_type": "longrope", "long_factor": [1, 1, 1, 1, 1, 1, 1, 1],
          "original_max_position_embeddings": 512})",
      R"({"rope_type": "longrope", "short_factor": [1, 1], "long_factor": [1, 1],
          "original_max_position_embeddings": 512})",
      R"({"rope_type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, -1],
          "long_factor": [1, 1, 1, 1, 1, 1, 1, 1], "original_max_position_embeddings": 512})",
      R"({"rope_type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
          "long_factor": [1, 1, 1, 1, 1, 1, 1, 1]})"};
  const char* names[] = {"short_factor", "head_dim / 2", "short_factor",
                         "original_max_position_embeddings"};
  for (size_t i = 0; i < std::size(bad_longrope); ++i) {
    c = MiniCpm();
    c["rope_scaling"] = json::parse(bad_longrope[i]);
    ExpectOneLineError(Parse(c), ErrorCode::kCorrupt, {names[i]});
  }
}

}  // namespace
}  // namespace tessera
