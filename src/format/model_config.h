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

enum class ModelFamily { kLlama, kQwen2, kQwen3, kQwen3_5, kMiniCpm, kGemma3 };
// "llama", "qwen2", "qwen3", "qwen3_5", "minicpm", "gemma3"
std::string_view ModelFamilyName(ModelFamily family);

// config.json's layer_types, one per decoder layer.
enum class LayerType {
  kFullAttention,     // "full_attention"
  kSlidingAttention,  // "sliding_attention": attends to the last sliding_window positions
  kLinearAttention,   // "linear_attention": Gated DeltaNet (qwen3_5)
};
enum class HiddenAct { kSilu, kGeluTanh };  // "silu"; "gelu_pytorch_tanh" (gemma3)

// RoPE frequency scaling as Llama 3.1/3.2 publish it (rope_scaling {"rope_type": "llama3"}):
// wavelengths longer than original_max_position_embeddings / low_freq_factor are divided by
// `factor`, shorter than original / high_freq_factor are kept, and the band between is blended.
struct Llama3RopeScaling {
  double factor = 1.0;  // >= 1
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;  // > low_freq_factor
  int64_t original_max_position_embeddings = 8192;
};

// LongRoPE (rope_scaling {"rope_type": "longrope"}, MiniCPM 4): each frequency divided by its
// short factor (contexts up to original_max_position_embeddings) and cos/sin multiplied by
// sqrt(1 + ln(max_position / original) / ln(original)).
struct LongRopeScaling {
  std::vector<double> short_factor;  // rotary_dim / 2 values, each > 0
  std::vector<double> long_factor;
  int64_t original_max_position_embeddings = 0;
};

// Gated DeltaNet linear attention (qwen3_5's linear_* fields).
struct LinearAttentionConfig {
  int64_t num_key_heads = 0;    // linear_num_key_heads
  int64_t num_value_heads = 0;  // linear_num_value_heads, a multiple of num_key_heads
  int64_t key_head_dim = 0;     // linear_key_head_dim
  int64_t value_head_dim = 0;   // linear_value_head_dim
  int64_t conv_kernel = 0;      // linear_conv_kernel_dim
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

  // The 2026 families. Defaults describe llama/qwen2/qwen3.
  std::vector<LayerType> layer_types;  // num_layers entries; all full attention by default
  int64_t sliding_window = 0;          // positions a sliding layer attends to (0: none)
  double rope_local_theta = 0;         // theta of sliding layers (gemma3 rope_local_base_freq)
  double partial_rotary_factor = 1.0;  // fraction of each head's dims that RoPE rotates
  std::optional<LongRopeScaling> rope_longrope;
  double rope_linear_factor = 1.0;  // rope_type "linear": positions divided by this factor
  bool attn_output_gate = false;    // q_proj also gives a sigmoid gate per head (qwen3_5)
  std::optional<double> query_pre_attn_scalar;  // attention scale is its rsqrt (gemma3)
  HiddenAct hidden_act = HiddenAct::kSilu;
  bool norm_one_plus_weight = false;  // RMSNorm scales by (1 + w), zero-centred (qwen3_5, gemma3)
  bool sandwich_norms = false;        // gemma3: pre/post norms around both attention and MLP
  std::optional<LinearAttentionConfig> linear_attention;
  // Scales. gemma3's embedding scale is sqrt(hidden_size) rounded to the weights' dtype.
  double embed_scale = 1.0;  // minicpm scale_emb; gemma3 sqrt(hidden_size)
  bool embed_scale_rounded_to_weight_dtype = false;
  double residual_scale = 1.0;  // minicpm scale_depth / sqrt(num_hidden_layers)
  double logit_scale = 1.0;     // minicpm dim_model_base / hidden_size
  // Where the decoder's tensors live: "model." or, for a multimodal checkpoint's text model,
  // "model.language_model." (qwen3_5) / "language_model.model." (gemma3); tensors under
  // ignored_prefixes (vision tower, MTP head) are present but unused.
  // A sequence classifier (architectures ["*ForSequenceClassification"]): its class count,
  // the rows of its score head (score.weight [num_labels, hidden]) read from id2label (or
  // num_labels); 0 for a causal LM. DetectModelKind (model_kind.h) checks the labels.
  int64_t num_labels = 0;
  std::string tensor_prefix = "model.";
  std::string lm_head_name = "lm_head.weight";
  std::vector<std::string> ignored_prefixes;
  // tessera's default for the chat template variable enable_thinking when the caller gives
  // none (Qwen3.5's template thinks unless told not to; tessera answers directly by default).
  std::optional<bool> default_enable_thinking;
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
