#include "model/gguf_arch.h"

#include <array>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "format/json_util.h"

namespace tessera {
namespace {

using nlohmann::json;

std::string Number(double v) {
  return JsonForMessage(json(v));
}

// An optional float key that, when present, must be finite and > 0.
Expected<std::optional<float>> OptionalPositive(const GgufFile& gguf, const std::string& key) {
  if (!gguf.Has(key)) return std::optional<float>();
  TS_ASSIGN_OR_RETURN(float v, gguf.GetF32(key));
  if (!std::isfinite(v) || !(v > 0)) {
    return Corrupt(gguf.path() + ": " + key + " = " + Number(v) + " must be a positive number");
  }
  return std::optional<float>(v);
}

// ---- gemma3: Gemma3Model in conversion/gemma.py, llama_model_gemma3 in src/models/gemma3.cpp.

// llama.cpp's tensor names for Gemma's sandwich norms (LLM_TENSOR_ATTN_POST_NORM,
// LLM_TENSOR_FFN_NORM from pre_feedforward_layernorm, LLM_TENSOR_FFN_POST_NORM).
constexpr std::array<GgufNamePair, 3> kGemma3LayerNames = {{
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
}};

Status Gemma3Config(const GgufFile& gguf, const std::string& p, json& config) {
  json& c = config;
  const auto layers = c["num_hidden_layers"].get<uint32_t>();
  const auto hidden = c["hidden_size"].get<uint32_t>();
  const auto heads = c["num_attention_heads"].get<uint32_t>();
  // llama.cpp's rule when key_length is absent; Gemma 3 configs always state head_dim.
  if (!c.contains("head_dim")) c["head_dim"] = heads ? hidden / heads : 0;
  c.erase("hidden_act");
  c["hidden_activation"] = "gelu_pytorch_tanh";
  // The file carries no query_pre_attn_scalar: llama.cpp scales queries by 1/sqrt(head_dim),
  // or 1/sqrt(hidden / heads) for the 62-layer (27B) model, as Google's reference code does.
  c["query_pre_attn_scalar"] =
      layers == 62 && heads ? hidden / heads : c["head_dim"].get<uint32_t>();
  // Sliding layers: with attention.sliding_window > 0, layer i slides unless
  // i % pattern == pattern - 1 (pattern: attention.sliding_window_pattern, default 6, as
  // llama.cpp reads it) or as the pattern key's one bool per layer says (Ollama's converter
  // writes it so); their RoPE base is rope.freq_base_swa (llama.cpp's key) or
  // rope.local.freq_base (Ollama's), default 10000.
  uint32_t window = 0;
  if (gguf.Has(p + "attention.sliding_window")) {
    TS_ASSIGN_OR_RETURN(window, gguf.GetU32(p + "attention.sliding_window"));
  }
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  const GgufValue* per_layer = gguf.Find(pattern_key);
  if (per_layer != nullptr && per_layer->type != GgufValueType::kArray) per_layer = nullptr;
  if (per_layer != nullptr &&
      (per_layer->item_type != GgufValueType::kBool || per_layer->item_count != layers)) {
    return Corrupt(gguf.path() + ": " + pattern_key + " is " + DescribeGgufValue(*per_layer) +
                   "; expected a u32 period or one bool per layer (" + std::to_string(layers) +
                   ")");
  }
  uint32_t pattern = 6;
  if (window > 0 && per_layer == nullptr && gguf.Has(pattern_key)) {
    TS_ASSIGN_OR_RETURN(pattern, gguf.GetU32(pattern_key));
  }
  json types = json::array();
  for (uint32_t i = 0; i < layers; ++i) {
    const bool sliding =
        window > 0 && (per_layer != nullptr ? per_layer->items[i] != 0
                                            : pattern == 0 || i % pattern < pattern - 1);
    types.push_back(sliding ? "sliding_attention" : "full_attention");
  }
  c["layer_types"] = std::move(types);
  if (window > 0) {
    c["sliding_window"] = window;
    std::string base_key = p + "rope.freq_base_swa";
    if (!gguf.Has(base_key)) base_key = p + "rope.local.freq_base";
    TS_ASSIGN_OR_RETURN(auto local, OptionalPositive(gguf, base_key));
    c["rope_local_base_freq"] = static_cast<double>(local.value_or(10000.0f));
  }
  if (gguf.Has(p + "final_logit_softcapping")) {
    TS_ASSIGN_OR_RETURN(float cap, gguf.GetF32(p + "final_logit_softcapping"));
    if (cap != 0.0f) {
      return Unsupported(gguf.path() + ": " + p + "final_logit_softcapping = " + Number(cap) +
                         " asks for logit soft-capping, which tessera does not implement");
    }
  }
  return Status::Ok();
}

// ---- minicpm: MiniCPMModel in conversion/minicpm.py, llama_model_minicpm (granite's graph).

constexpr std::array<std::string_view, 2> kMiniCpmRopeFactorTensors = {"rope_factors_long.weight",
                                                                       "rope_factors_short.weight"};

// A LongRoPE factor tensor: F32, one value per rotated pair.
Expected<std::vector<double>> RopeFactors(const GgufFile& gguf, std::string_view name,
                                          uint64_t pairs) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (t == nullptr) {
    return Corrupt(gguf.path() + ": the tensor '" + std::string(name) +
                   "' is missing; rope.scaling.type \"longrope\" needs it");
  }
  if (t->type != GgmlType::kF32 || t->dims.size() != 1 || t->dims[0] != pairs) {
    return Corrupt(gguf.path() + ": the tensor '" + std::string(name) + "' must be F32 [" +
                   std::to_string(pairs) + "] (head_dim / 2 LongRoPE factors)");
  }
  std::vector<double> out;
  for (uint64_t i = 0; i < pairs; ++i) {
    float v;
    std::memcpy(&v, t->data.data() + 4 * i, 4);
    if (!std::isfinite(v) || !(v > 0)) {
      return Corrupt(gguf.path() + ": the tensor '" + std::string(name) + "' holds " + Number(v) +
                     " at " + std::to_string(i) + "; LongRoPE factors must be positive");
    }
    out.push_back(v);
  }
  return out;
}

Status MiniCpmConfig(const GgufFile& gguf, const std::string& p, json& config) {
  json& c = config;
  const auto layers = c["num_hidden_layers"].get<uint32_t>();
  const auto hidden = c["hidden_size"].get<uint32_t>();
  // The converter writes the muP scales as llama.cpp applies them: embeddings times
  // embedding_scale (scale_emb), each branch's output times residual_scale
  // (scale_depth / sqrt(layers)), logits divided by logit_scale (hidden / dim_model_base).
  // Files without them predate those keys; llama.cpp's fallbacks for them are MiniCPM-2B's
  // constants, so tessera asks for a re-conversion instead of guessing.
  float scales[3] = {};
  const char* keys[3] = {"embedding_scale", "residual_scale", "logit_scale"};
  for (int i = 0; i < 3; ++i) {
    TS_ASSIGN_OR_RETURN(auto v, OptionalPositive(gguf, p + keys[i]));
    if (!v) {
      return Unsupported(gguf.path() + ": " + p + keys[i] +
                         " is missing (a file from an older convert_hf_to_gguf.py); "
                         "re-convert the Hugging Face checkpoint with a current one");
    }
    scales[i] = *v;
  }
  c["scale_emb"] = static_cast<double>(scales[0]);
  c["scale_depth"] = static_cast<double>(scales[1]) * std::sqrt(static_cast<double>(layers));
  c["dim_model_base"] = static_cast<double>(hidden) / static_cast<double>(scales[2]);

  std::string_view scaling = "none";
  if (gguf.Has(p + "rope.scaling.type")) {
    TS_ASSIGN_OR_RETURN(scaling, gguf.GetString(p + "rope.scaling.type"));
  }
  if (scaling == "none") {
    for (std::string_view name : kMiniCpmRopeFactorTensors) {
      if (gguf.FindTensor(name) != nullptr) {
        return Corrupt(gguf.path() + ": the tensor '" + std::string(name) + "' is present but " +
                       p + "rope.scaling.type is not \"longrope\"");
      }
    }
    return Status::Ok();
  }
  if (scaling != "longrope") {
    return Unsupported(gguf.path() + ": " + p + "rope.scaling.type " + QuoteForMessage(scaling) +
                       " is not supported for minicpm; only \"longrope\" or none");
  }
  // Short factors up to the original context, long ones beyond; llama.cpp's original context is
  // rope.scaling.original_context_length, else the training context (the converter writes none
  // for MiniCPM), and it scales attention only by an explicit rope.scaling.attn_factor.
  const auto context = c["max_position_embeddings"].get<uint32_t>();
  uint32_t original = context;
  if (gguf.Has(p + "rope.scaling.original_context_length")) {
    TS_ASSIGN_OR_RETURN(original, gguf.GetU32(p + "rope.scaling.original_context_length"));
  }
  if (original != context || gguf.Has(p + "rope.scaling.attn_factor")) {
    return Unsupported(gguf.path() + ": " + p +
                       "rope.scaling.original_context_length / attn_factor: LongRoPE beyond the "
                       "original context is not supported from GGUF; only the converter's "
                       "MiniCPM layout (original context = context_length)");
  }
  const auto heads = c["num_attention_heads"].get<uint32_t>();
  const uint32_t head_dim = c.contains("head_dim") ? c["head_dim"].get<uint32_t>()
                            : heads != 0           ? hidden / heads
                                                   : 0;
  TS_ASSIGN_OR_RETURN(auto long_factor,
                      RopeFactors(gguf, kMiniCpmRopeFactorTensors[0], head_dim / 2));
  TS_ASSIGN_OR_RETURN(auto short_factor,
                      RopeFactors(gguf, kMiniCpmRopeFactorTensors[1], head_dim / 2));
  c["rope_scaling"] = {{"rope_type", "longrope"},
                       {"long_factor", long_factor},
                       {"short_factor", short_factor},
                       {"original_max_position_embeddings", original}};
  return Status::Ok();
}

}  // namespace

const GgufArchHooks kGemma3GgufHooks = {
    .add_config = Gemma3Config,
    .layer_names = kGemma3LayerNames,
    .metadata_tensors = {},
    .norm_shift = 1.0f,  // Gemma3Model.norm_shift: +1 on every "*norm.weight"
    .qk_biases_in_hf_order = false,
    .reads_rope_scaling = false,
};

const GgufArchHooks kMiniCpmGgufHooks = {
    .add_config = MiniCpmConfig,
    .layer_names = {},
    .metadata_tensors = kMiniCpmRopeFactorTensors,
    .norm_shift = 0.0f,
    .qk_biases_in_hf_order = true,
    .reads_rope_scaling = true,
};

std::string_view GgufLayerNameOverride(const GgufArchHooks& hooks, std::string_view gguf_suffix) {
  for (const GgufNamePair& names : hooks.layer_names) {
    if (names.first == gguf_suffix) return names.second;
  }
  return {};
}

}  // namespace tessera
