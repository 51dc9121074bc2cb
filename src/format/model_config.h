// Typed views of a Hugging Face checkpoint's JSON files: config.json, generation_config.json
// and tokenizer_config.json. Parsing validates every field the runtime uses and refuses what
// it does not understand, naming the field, the value found and what is supported.
//
//   TS_ASSIGN_OR_RETURN(ModelConfig cfg, ParseModelConfig(ReadFileToString(path).value()));
//   cfg.family == ModelFamily::kQwen3
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

enum class ModelFamily { kLlama, kQwen2, kQwen3 };
std::string_view ModelFamilyName(ModelFamily family);  // "llama", "qwen2", "qwen3"

// RoPE frequency scaling as Llama 3.1/3.2 publish it (rope_scaling {"rope_type": "llama3"}):
// wavelengths longer than original_max_position_embeddings / low_freq_factor are divided by
// `factor`, shorter than original / high_freq_factor are kept, and the band between is blended.
struct Llama3RopeScaling {
  double factor = 1.0;  // >= 1
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;  // > low_freq_factor
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kLlama;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;    // num_hidden_layers
  int64_t num_heads = 0;     // num_attention_heads
  int64_t num_kv_heads = 0;  // num_key_value_heads (defaults to num_heads)
  int64_t head_dim = 0;      // explicit head_dim, else hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_llama3;  // set for rope_type "llama3"
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (always true for qwen2)
  bool qk_norm = false;         // per-head q_norm/k_norm (qwen3)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
};

// Refuses: unknown model_type; rope_scaling other than null, "default" or a complete, valid
// "llama3" (factor >= 1, 0 < low_freq_factor < high_freq_factor, original_max_position_embeddings
// > 0; each missing or invalid field is named); hidden_act other than silu;
// mlp_bias true; missing or non-positive sizes; num_heads not divisible by num_kv_heads;
// hidden_size != num_heads * head_dim where head_dim is implied; NaN/inf/non-positive eps
// or theta; sliding-window attention switched on.
// Defaults are transformers' class defaults (eps 1e-6, theta 10000, untied embeddings,
// num_key_value_heads = num_attention_heads); max_position_embeddings is required, and so is
// head_dim for qwen3. Sizes must fit in int32; bos/eos ids must be below vocab_size.
// rope_scaling {"rope_type": "default"} and the newer rope_parameters {"rope_type":
// "default", "rope_theta": x} mean plain RoPE and are accepted (x overrides rope_theta);
// "llama3" is accepted in either place.
// Duplicate keys anywhere in the file are refused.
Expected<ModelConfig> ParseModelConfig(std::string_view config_json);

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // scalar or list in the file
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  bool do_sample = false;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_length;
  std::optional<int64_t> max_new_tokens;
};
Expected<GenerationConfig> ParseGenerationConfig(std::string_view json);

struct NamedTemplate {
  std::string name;  // "default", "tool_use", ...
  std::string source;
};

struct TokenizerConfig {
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // Special-token strings; each may be written as a string or as {"content": ...}.
  std::optional<std::string> bos_token, eos_token, unk_token, pad_token;
  std::vector<std::string> additional_special_tokens;
  std::vector<NamedTemplate> chat_templates;  // string form becomes one named "default"
  std::optional<int64_t> model_max_length;    // absent when the file says 1e30-ish "unbounded"
  bool clean_up_tokenization_spaces = false;
  std::string tokenizer_class;
};
Expected<TokenizerConfig> ParseTokenizerConfig(std::string_view json);

}  // namespace tessera
