#include "format/model_config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "format/json_util.h"

namespace tessera {
namespace {

using nlohmann::json;

// Sizes are kept to int32 range so products of two of them (e.g. vocab x hidden) cannot
// overflow int64 anywhere downstream.
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
constexpr double kMaxDouble = std::numeric_limits<double>::max();
// HF writes model_max_length = 1e30 (int(1e30) in some files) for "no limit".
constexpr double kUnboundedModelMaxLength = 1e18;

constexpr const char* kConfig = "config.json";
constexpr const char* kGenerationConfig = "generation_config.json";
constexpr const char* kTokenizerConfig = "tokenizer_config.json";

Expected<json> ParseObject(std::string_view text, const char* what) {
  TS_ASSIGN_OR_RETURN(json doc, ParseJsonDocument(text, what));
  if (!doc.is_object()) {
    return Corrupt(std::string(what) + ": expected a JSON object, found " + JsonTypeName(doc));
  }
  return doc;
}

// The "type"/"rope_type" of a rope_scaling or rope_parameters value, for messages.
std::string RopeTypeOf(const json& value) {
  if (value.is_object()) {
    for (const char* key : {"rope_type", "type"}) {
      auto it = value.find(key);
      if (it != value.end() && it->is_string()) return it->get<std::string>();
    }
  }
  return "";
}

// The fields of a "llama3" scaling object (`where` is "rope_scaling" or "rope_parameters").
Expected<Llama3RopeScaling> ParseLlama3Scaling(const json& value, const char* where) {
  JsonObjectReader r(value, kConfig, std::string(where) + ".");
  Llama3RopeScaling s;
  for (const char* key :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if (!r.Has(key)) {
      return r.FieldError(ErrorCode::kCorrupt, key, "is missing; rope_type \"llama3\" needs it");
    }
  }
  TS_ASSIGN_OR_RETURN(auto factor, r.OptionalFiniteDouble("factor", 1.0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(auto low, r.OptionalFiniteDouble("low_freq_factor", 0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(auto high, r.OptionalFiniteDouble("high_freq_factor", 0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                      r.RequiredPositiveInt("original_max_position_embeddings"));
  s.factor = *factor;
  s.low_freq_factor = *low;
  s.high_freq_factor = *high;
  if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor)) {
    return r.FieldError(ErrorCode::kCorrupt, "high_freq_factor",
                        "must be greater than low_freq_factor (> 0); found low " +
                            JsonForMessage(json(s.low_freq_factor)) + ", high " +
                            JsonForMessage(json(s.high_freq_factor)));
  }
  return s;
}

// A positive finite number list (LongRoPE's factors).
Expected<std::vector<double>> PositiveList(const JsonObjectReader& r, const char* key) {
  const json* v = r.Get(key);
  if (v == nullptr) {
    return r.FieldError(ErrorCode::kCorrupt, key, "is missing; rope_type \"longrope\" needs it");
  }
  std::vector<double> out;
  if (v->is_array()) {
    for (const json& x : *v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || !(x.get<double>() > 0)) break;
      out.push_back(x.get<double>());
    }
  }
  if (!v->is_array() || out.size() != v->size() || out.empty()) {
    return r.FieldError(
        ErrorCode::kCorrupt, key,
        "must be a non-empty list of positive numbers, found " + JsonForMessage(*v));
  }
  return out;
}

Expected<LongRopeScaling> ParseLongRope(const json& value, const JsonObjectReader& cfg,
                                        const char* where) {
  JsonObjectReader r(value, kConfig, std::string(where) + ".");
  LongRopeScaling s;
  TS_ASSIGN_OR_RETURN(s.short_factor, PositiveList(r, "short_factor"));
  TS_ASSIGN_OR_RETURN(s.long_factor, PositiveList(r, "long_factor"));
  TS_ASSIGN_OR_RETURN(auto original,
                      r.OptionalInt("original_max_position_embeddings", 1, kMaxSize));
  if (!original) {
    TS_ASSIGN_OR_RETURN(original, cfg.OptionalInt("original_max_position_embeddings", 1, kMaxSize));
  }
  if (!original) {
    return r.FieldError(ErrorCode::kCorrupt, "original_max_position_embeddings",
                        "is missing; rope_type \"longrope\" needs it");
  }
  s.original_max_position_embeddings = *original;
  return s;
}

// One scaling object (rope_scaling, or rope_parameters written the newer way): "default",
// "llama3", "linear" and "longrope" are implemented; anything else is refused by name.
Status ParseRopeScaling(const json& value, const JsonObjectReader& cfg, const char* where,
                        ModelConfig* c) {
  if (!value.is_object()) {
    return cfg.FieldError(ErrorCode::kCorrupt, where,
                          "must be an object, found " + JsonForMessage(value));
  }
  const std::string type = RopeTypeOf(value);
  if (type == "llama3") {
    TS_ASSIGN_OR_RETURN(c->rope_llama3, ParseLlama3Scaling(value, where));
  } else if (type == "longrope") {
    TS_ASSIGN_OR_RETURN(c->rope_longrope, ParseLongRope(value, cfg, where));
  } else if (type == "linear") {
    JsonObjectReader r(value, kConfig, std::string(where) + ".");
    TS_ASSIGN_OR_RETURN(auto factor, r.OptionalFiniteDouble("factor", 1.0, kMaxDouble));
    if (!factor) {
      return r.FieldError(ErrorCode::kCorrupt, "factor",
                          "is missing; rope_type \"linear\" needs it");
    }
    c->rope_linear_factor = *factor;
  } else if (!type.empty() && type != "default") {
    return cfg.FieldError(ErrorCode::kUnsupported, where,
                          "rope_type " + QuoteForMessage(type) +
                              " is not supported; only \"default\" (plain RoPE), \"linear\", "
                              "\"llama3\" and \"longrope\"");
  } else if (type.empty() && std::string_view(where) == "rope_scaling") {
    return cfg.FieldError(ErrorCode::kUnsupported, where,
                          JsonForMessage(value) +
                              " names no rope_type; only plain RoPE (null or "
                              "\"default\"), \"linear\", \"llama3\" and "
                              "\"longrope\" are supported");
  }
  return Status::Ok();
}

// rope_scaling (older files) and rope_parameters (newer transformers; it also carries
// rope_theta and partial_rotary_factor, and for gemma3 one object per layer type).
Status CheckRope(const JsonObjectReader& cfg, ModelConfig* c) {
  if (const json* scaling = cfg.Get("rope_scaling")) {
    TS_RETURN_IF_ERROR(ParseRopeScaling(*scaling, cfg, "rope_scaling", c));
  }
  const json* params = cfg.Get("rope_parameters");
  if (params == nullptr) return Status::Ok();
  if (!params->is_object()) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rope_parameters",
                          "must be an object, found " + JsonForMessage(*params));
  }
  auto read_block = [&](const json& block, const char* where, double* theta) -> Status {
    TS_RETURN_IF_ERROR(ParseRopeScaling(block, cfg, where, c));
    JsonObjectReader rope(block, kConfig, std::string(where) + ".");
    TS_ASSIGN_OR_RETURN(auto t, rope.OptionalFiniteDouble("rope_theta", 0, kMaxDouble));
    if (t) *theta = *t;
    TS_ASSIGN_OR_RETURN(auto partial, rope.OptionalFiniteDouble("partial_rotary_factor", 0, 1));
    if (partial) c->partial_rotary_factor = *partial;
    return Status::Ok();
  };
  const json* full = params->contains("full_attention") ? &(*params)["full_attention"] : nullptr;
  const json* local =
      params->contains("sliding_attention") ? &(*params)["sliding_attention"] : nullptr;
  if (full == nullptr && local == nullptr) {
    return read_block(*params, "rope_parameters", &c->rope_theta);
  }
  if (full) TS_RETURN_IF_ERROR(read_block(*full, "rope_parameters.full_attention", &c->rope_theta));
  if (local) {
    // The local layers' RoPE is plain: scaling there would apply to the global layers too.
    if (!RopeTypeOf(*local).empty() && RopeTypeOf(*local) != "default") {
      return cfg.FieldError(ErrorCode::kUnsupported, "rope_parameters.sliding_attention",
                            "rope_type " + QuoteForMessage(RopeTypeOf(*local)) +
                                " is not supported for sliding layers; only \"default\"");
    }
    TS_RETURN_IF_ERROR(
        read_block(*local, "rope_parameters.sliding_attention", &c->rope_local_theta));
  }
  return Status::Ok();
}

struct FamilyType {
  ModelFamily family;
  bool nested;  // the text model's config sits under "text_config" (multimodal checkpoints)
};

Expected<FamilyType> ParseFamily(const JsonObjectReader& cfg) {
  static constexpr char kSupported[] =
      "llama, qwen2, qwen3, qwen3_5, qwen3_5_text, minicpm, gemma3, gemma3_text";
  TS_ASSIGN_OR_RETURN(auto model_type, cfg.OptionalString("model_type"));
  if (!model_type) {
    return cfg.FieldError(ErrorCode::kCorrupt, "model_type",
                          std::string("is missing; it is required (one of: ") + kSupported + ")");
  }
  const std::pair<const char*, FamilyType> known[] = {
      {"llama", {ModelFamily::kLlama, false}},
      {"qwen2", {ModelFamily::kQwen2, false}},
      {"qwen3", {ModelFamily::kQwen3, false}},
      {"qwen3_5", {ModelFamily::kQwen3_5, true}},
      {"qwen3_5_text", {ModelFamily::kQwen3_5, false}},
      {"minicpm", {ModelFamily::kMiniCpm, false}},
      {"gemma3", {ModelFamily::kGemma3, true}},
      {"gemma3_text", {ModelFamily::kGemma3, false}}};
  for (const auto& [name, type] : known) {
    if (*model_type == name) return type;
  }
  return Unsupported(std::string(kConfig) + ": model_type " + QuoteForMessage(*model_type) +
                     " is not supported; supported: " + kSupported);
}

// layer_types, or the family's default pattern from `interval_key` (every interval-th layer is
// full attention, the others `other`).
Status ParseLayerTypes(const JsonObjectReader& cfg, ModelConfig* c, const char* interval_key,
                       LayerType other) {
  c->layer_types.assign(static_cast<size_t>(c->num_layers), LayerType::kFullAttention);
  if (const json* types = cfg.Get("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c->num_layers) {
      return cfg.FieldError(
          ErrorCode::kCorrupt, "layer_types",
          "must be a list of num_hidden_layers (" + std::to_string(c->num_layers) + ") strings");
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      if (name == "full_attention") continue;
      if (name == "sliding_attention" && c->family == ModelFamily::kGemma3) {
        c->layer_types[i] = LayerType::kSlidingAttention;
      } else if (name == "linear_attention" && c->family == ModelFamily::kQwen3_5) {
        c->layer_types[i] = LayerType::kLinearAttention;
      } else {
        return cfg.FieldError(ErrorCode::kUnsupported, "layer_types[" + std::to_string(i) + "]",
                              JsonForMessage(t) + " is not a layer kind tessera runs for " +
                                  std::string(ModelFamilyName(c->family)));
      }
    }
    return Status::Ok();
  }
  if (interval_key == nullptr) return Status::Ok();
  const int64_t fallback = other == LayerType::kLinearAttention ? 4 : 6;
  TS_ASSIGN_OR_RETURN(auto interval, cfg.OptionalInt(interval_key, 1, kMaxSize));
  for (int64_t i = 0; i < c->num_layers; ++i) {
    if ((i + 1) % interval.value_or(fallback) != 0) c->layer_types[static_cast<size_t>(i)] = other;
  }
  return Status::Ok();
}

// Refuses a field that is set to something the runtime does not implement.
Status RefuseIfSet(const JsonObjectReader& cfg, const char* key, const char* why) {
  if (const json* v = cfg.Get(key)) {
    if (!(v->is_boolean() && !v->get<bool>())) {
      return cfg.FieldError(ErrorCode::kUnsupported, key,
                            JsonForMessage(*v) + " is not supported (" + why + ")");
    }
  }
  return Status::Ok();
}

// qwen3_5: hybrid Gated DeltaNet / gated attention.
Status ParseQwen35(const JsonObjectReader& cfg, ModelConfig* c) {
  TS_RETURN_IF_ERROR(
      ParseLayerTypes(cfg, c, "full_attention_interval", LayerType::kLinearAttention));
  LinearAttentionConfig la;
  const std::pair<const char*, int64_t*> fields[] = {
      {"linear_num_key_heads", &la.num_key_heads},
      {"linear_num_value_heads", &la.num_value_heads},
      {"linear_key_head_dim", &la.key_head_dim},
      {"linear_value_head_dim", &la.value_head_dim},
      {"linear_conv_kernel_dim", &la.conv_kernel}};
  for (const auto& [key, out] : fields) {
    TS_ASSIGN_OR_RETURN(*out, cfg.RequiredPositiveInt(key, kMaxSize));
  }
  if (la.num_value_heads % la.num_key_heads != 0) {
    return cfg.FieldError(ErrorCode::kCorrupt, "linear_num_value_heads",
                          std::to_string(la.num_value_heads) +
                              " is not a multiple of linear_num_key_heads " +
                              std::to_string(la.num_key_heads));
  }
  if (la.conv_kernel > 64) {
    return cfg.FieldError(ErrorCode::kUnsupported, "linear_conv_kernel_dim",
                          std::to_string(la.conv_kernel) + " is over the supported 64");
  }
  c->linear_attention = la;
  TS_ASSIGN_OR_RETURN(auto gate, cfg.OptionalBool("attn_output_gate"));
  if (!gate.value_or(true)) {
    return cfg.FieldError(ErrorCode::kUnsupported, "attn_output_gate",
                          "is false; qwen3_5 attention is always gated");
  }
  c->attn_output_gate = true;
  c->qk_norm = true;
  c->norm_one_plus_weight = true;
  TS_RETURN_IF_ERROR(RefuseIfSet(cfg, "attention_bias", "qwen3_5 projections have no bias"));
  return Status::Ok();
}

Status ParseGemma3(const JsonObjectReader& cfg, ModelConfig* c) {
  TS_RETURN_IF_ERROR(
      ParseLayerTypes(cfg, c, "sliding_window_pattern", LayerType::kSlidingAttention));
  TS_ASSIGN_OR_RETURN(auto window, cfg.OptionalInt("sliding_window", 1, kMaxSize));
  for (LayerType t : c->layer_types) {
    if (t == LayerType::kSlidingAttention && !window) {
      return cfg.FieldError(ErrorCode::kCorrupt, "sliding_window",
                            "is missing; sliding_attention layers need it");
    }
  }
  c->sliding_window = window.value_or(0);
  TS_ASSIGN_OR_RETURN(auto local, cfg.OptionalFiniteDouble("rope_local_base_freq", 0, kMaxDouble));
  if (c->rope_local_theta == 0) c->rope_local_theta = local.value_or(10000.0);
  if (!(c->rope_local_theta > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rope_local_base_freq", "must be greater than 0");
  }
  TS_ASSIGN_OR_RETURN(c->query_pre_attn_scalar,
                      cfg.OptionalFiniteDouble("query_pre_attn_scalar", 0, kMaxDouble));
  if (c->query_pre_attn_scalar && !(*c->query_pre_attn_scalar > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "query_pre_attn_scalar", "must be greater than 0");
  }
  if (!c->query_pre_attn_scalar) c->query_pre_attn_scalar = static_cast<double>(c->head_dim);
  TS_RETURN_IF_ERROR(RefuseIfSet(cfg, "final_logit_softcapping", "logit soft-capping"));
  TS_RETURN_IF_ERROR(RefuseIfSet(cfg, "attn_logit_softcapping", "attention soft-capping"));
  TS_RETURN_IF_ERROR(RefuseIfSet(cfg, "use_bidirectional_attention", "bidirectional attention"));
  c->qk_norm = true;
  c->norm_one_plus_weight = true;
  c->sandwich_norms = true;
  c->embed_scale = std::sqrt(static_cast<double>(c->hidden_size));
  c->embed_scale_rounded_to_weight_dtype = true;
  return Status::Ok();
}

Status ParseMiniCpm(const JsonObjectReader& cfg, ModelConfig* c) {
  // MiniCPMConfig's defaults are 1 for all three.
  TS_ASSIGN_OR_RETURN(auto scale_emb, cfg.OptionalFiniteDouble("scale_emb", 0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(auto scale_depth, cfg.OptionalFiniteDouble("scale_depth", 0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(auto base, cfg.OptionalFiniteDouble("dim_model_base", 0, kMaxDouble));
  for (auto [key, v] : {std::pair{"scale_emb", scale_emb}, std::pair{"scale_depth", scale_depth},
                        std::pair{"dim_model_base", base}}) {
    if (v && !(*v > 0)) return cfg.FieldError(ErrorCode::kCorrupt, key, "must be greater than 0");
  }
  c->embed_scale = scale_emb.value_or(1.0);
  c->residual_scale = scale_depth.value_or(1.0) / std::sqrt(static_cast<double>(c->num_layers));
  c->logit_scale = base.value_or(1.0) / static_cast<double>(c->hidden_size);
  TS_RETURN_IF_ERROR(RefuseIfSet(cfg, "sparse_config", "InfLLM v2 sparse attention"));
  TS_ASSIGN_OR_RETURN(auto attention_bias, cfg.OptionalBool("attention_bias"));
  c->attention_bias = attention_bias.value_or(false);
  return Status::Ok();
}

// Checks a token id against the vocabulary so later lookups cannot go out of range.
Status CheckTokenId(const JsonObjectReader& cfg, const char* field, int64_t id,
                    int64_t vocab_size) {
  if (id >= vocab_size) {
    return cfg.FieldError(
        ErrorCode::kCorrupt, field,
        std::to_string(id) + " is not below vocab_size " + std::to_string(vocab_size));
  }
  return Status::Ok();
}

// A special token written as "<s>", as {"content": "<s>", ...} (an AddedToken), or null.
Expected<std::optional<std::string>> SpecialToken(const JsonObjectReader& cfg, std::string_view key,
                                                  const json* value) {
  if (value == nullptr || value->is_null()) return std::optional<std::string>();
  if (value->is_string()) return std::optional<std::string>(value->get<std::string>());
  if (value->is_object()) {
    auto content = value->find("content");
    if (content != value->end() && content->is_string()) {
      return std::optional<std::string>(content->get<std::string>());
    }
  }
  return cfg.FieldError(
      ErrorCode::kCorrupt, key,
      "must be a string or an object with a string \"content\", found " + JsonForMessage(*value));
}

}  // namespace

std::string_view ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlama:
      return "llama";
    case ModelFamily::kQwen2:
      return "qwen2";
    case ModelFamily::kQwen3:
      return "qwen3";
    case ModelFamily::kQwen3_5:
      return "qwen3_5";
    case ModelFamily::kMiniCpm:
      return "minicpm";
    case ModelFamily::kGemma3:
      return "gemma3";
  }
  return "unknown";
}

Expected<ModelConfig> ParseModelConfig(std::string_view config_json) {
  TS_ASSIGN_OR_RETURN(json doc, ParseObject(config_json, kConfig));
  JsonObjectReader top(doc, kConfig);
  ModelConfig c;
  TS_ASSIGN_OR_RETURN(FamilyType type, ParseFamily(top));
  c.family = type.family;
  const json* text = &doc;
  if (type.nested) {
    text = top.Get("text_config");
    if (text == nullptr || !text->is_object()) {
      return top.FieldError(ErrorCode::kCorrupt, "text_config",
                            "is missing or not an object; a multimodal " +
                                std::string(ModelFamilyName(c.family)) +
                                " config keeps the text model's fields there");
    }
  }
  JsonObjectReader cfg(*text, kConfig, type.nested ? "text_config." : "");

  TS_ASSIGN_OR_RETURN(c.hidden_size, cfg.RequiredPositiveInt("hidden_size", kMaxSize));
  TS_ASSIGN_OR_RETURN(c.intermediate_size, cfg.RequiredPositiveInt("intermediate_size", kMaxSize));
  TS_ASSIGN_OR_RETURN(c.num_layers, cfg.RequiredPositiveInt("num_hidden_layers", kMaxSize));
  TS_ASSIGN_OR_RETURN(c.num_heads, cfg.RequiredPositiveInt("num_attention_heads", kMaxSize));
  TS_ASSIGN_OR_RETURN(c.vocab_size, cfg.RequiredPositiveInt("vocab_size", kMaxSize));
  TS_ASSIGN_OR_RETURN(c.max_position_embeddings,
                      cfg.RequiredPositiveInt("max_position_embeddings", kMaxSize));

  TS_ASSIGN_OR_RETURN(auto kv_heads, cfg.OptionalInt("num_key_value_heads", 1, kMaxSize));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    return Corrupt(std::string(kConfig) + ": num_attention_heads " + std::to_string(c.num_heads) +
                   " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  }

  TS_ASSIGN_OR_RETURN(auto head_dim, cfg.OptionalInt("head_dim", 1, kMaxSize));
  const bool head_dim_required = c.family == ModelFamily::kQwen3 ||
                                 c.family == ModelFamily::kQwen3_5 ||
                                 c.family == ModelFamily::kGemma3;
  if (head_dim) {
    // Explicit head_dim may differ from hidden_size / heads (Qwen3 does this on purpose).
    c.head_dim = *head_dim;
  } else if (head_dim_required) {
    return cfg.FieldError(ErrorCode::kCorrupt, "head_dim",
                          "is missing; " + std::string(ModelFamilyName(c.family)) +
                              " configs must give it explicitly");
  } else if (c.hidden_size % c.num_heads != 0) {
    return Corrupt(std::string(kConfig) + ": hidden_size " + std::to_string(c.hidden_size) +
                   " is not divisible by num_attention_heads " + std::to_string(c.num_heads) +
                   ", and no head_dim is given");
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }

  TS_ASSIGN_OR_RETURN(auto eps, cfg.OptionalFiniteDouble("rms_norm_eps", 0, kMaxDouble));
  c.rms_norm_eps = eps.value_or(1e-6);
  TS_ASSIGN_OR_RETURN(auto theta, cfg.OptionalFiniteDouble("rope_theta", 0, kMaxDouble));
  c.rope_theta = theta.value_or(c.family == ModelFamily::kGemma3 ? 1000000.0 : 10000.0);
  TS_ASSIGN_OR_RETURN(auto partial, cfg.OptionalFiniteDouble("partial_rotary_factor", 0, 1));
  if (partial)
    c.partial_rotary_factor = *partial;
  else if (c.family == ModelFamily::kQwen3_5)
    c.partial_rotary_factor = 0.25;  // the class default
  TS_RETURN_IF_ERROR(CheckRope(cfg, &c));
  if (!(c.rms_norm_eps > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rms_norm_eps",
                          "must be greater than 0, found " + JsonForMessage(json(c.rms_norm_eps)));
  }
  if (!(c.rope_theta > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rope_theta",
                          "must be greater than 0, found " + JsonForMessage(json(c.rope_theta)));
  }
  // The rotated part of a head: an even number of dims, at least 2.
  const double rotary = static_cast<double>(c.head_dim) * c.partial_rotary_factor;
  const auto rotary_dim = static_cast<int64_t>(rotary);
  if (!(c.partial_rotary_factor > 0) || rotary_dim != rotary || rotary_dim % 2 != 0) {
    return cfg.FieldError(ErrorCode::kCorrupt, "partial_rotary_factor",
                          JsonForMessage(json(c.partial_rotary_factor)) +
                              " does not rotate an even number of each head's " +
                              std::to_string(c.head_dim) + " dims");
  }
  if (c.rope_longrope) {
    for (const auto* list : {&c.rope_longrope->short_factor, &c.rope_longrope->long_factor}) {
      if (static_cast<int64_t>(list->size()) != rotary_dim / 2) {
        return cfg.FieldError(ErrorCode::kCorrupt, "rope_scaling",
                              "longrope factor lists must hold head_dim / 2 (" +
                                  std::to_string(rotary_dim / 2) + ") values, found " +
                                  std::to_string(list->size()));
      }
    }
  }

  // gemma3 names it hidden_activation; the others hidden_act.
  const bool gemma = c.family == ModelFamily::kGemma3;
  const char* act_key = gemma && cfg.Has("hidden_activation") ? "hidden_activation" : "hidden_act";
  TS_ASSIGN_OR_RETURN(auto act, cfg.OptionalString(act_key));
  if (gemma) {
    if (act && *act != "gelu_pytorch_tanh" && *act != "gelu_tanh") {
      return cfg.FieldError(
          ErrorCode::kUnsupported, act_key,
          QuoteForMessage(*act) + " is not supported; only \"gelu_pytorch_tanh\"");
    }
    c.hidden_act = HiddenAct::kGeluTanh;
  } else if (act && *act != "silu") {
    return cfg.FieldError(ErrorCode::kUnsupported, act_key,
                          QuoteForMessage(*act) + " is not supported; only \"silu\"");
  }

  // LlamaConfig, Qwen2/3Config and MiniCPMConfig default to untied; Gemma3TextConfig to tied.
  // A multimodal config's own tie_word_embeddings wins over its text_config's.
  TS_ASSIGN_OR_RETURN(auto tie, cfg.OptionalBool("tie_word_embeddings"));
  if (type.nested) {
    TS_ASSIGN_OR_RETURN(auto outer_tie, top.OptionalBool("tie_word_embeddings"));
    if (outer_tie) tie = outer_tie;
  }
  c.tie_word_embeddings = tie.value_or(gemma);

  TS_ASSIGN_OR_RETURN(auto attention_bias, cfg.OptionalBool("attention_bias"));
  TS_ASSIGN_OR_RETURN(auto mlp_bias, cfg.OptionalBool("mlp_bias"));
  TS_ASSIGN_OR_RETURN(auto sliding, cfg.OptionalBool("use_sliding_window"));
  if (mlp_bias.value_or(false)) {
    return cfg.FieldError(ErrorCode::kUnsupported, "mlp_bias",
                          "is true, which is not supported; only false");
  }
  switch (c.family) {
    case ModelFamily::kLlama:
      c.attention_bias = attention_bias.value_or(false);
      break;
    case ModelFamily::kQwen2:
      // Qwen2's modeling code always gives q/k/v a bias, whatever the config says.
      c.attention_bias = true;
      break;
    case ModelFamily::kQwen3:
      c.attention_bias = attention_bias.value_or(false);
      c.qk_norm = true;
      break;
    case ModelFamily::kQwen3_5:
      TS_RETURN_IF_ERROR(ParseQwen35(cfg, &c));
      c.default_enable_thinking = false;
      c.tensor_prefix = type.nested ? "model.language_model." : "model.";
      if (type.nested)
        c.ignored_prefixes = {"model.visual.", "mtp."};
      else
        c.ignored_prefixes = {"mtp."};
      break;
    case ModelFamily::kMiniCpm:
      TS_RETURN_IF_ERROR(ParseMiniCpm(cfg, &c));
      break;
    case ModelFamily::kGemma3:
      TS_RETURN_IF_ERROR(ParseGemma3(cfg, &c));
      if (type.nested) {
        c.tensor_prefix = "language_model.model.";
        c.lm_head_name = "language_model.lm_head.weight";
        c.ignored_prefixes = {"vision_tower.", "multi_modal_projector."};
      }
      break;
  }
  if (c.layer_types.empty()) {
    TS_RETURN_IF_ERROR(ParseLayerTypes(cfg, &c, nullptr, LayerType::kFullAttention));
  }
  if (c.family != ModelFamily::kLlama && c.family != ModelFamily::kGemma3 &&
      sliding.value_or(false)) {
    return cfg.FieldError(ErrorCode::kUnsupported, "use_sliding_window",
                          "is true; sliding-window attention is not supported (set it to false)");
  }
  if (c.rope_longrope && c.family != ModelFamily::kMiniCpm) {
    return cfg.FieldError(ErrorCode::kUnsupported, "rope_scaling",
                          "rope_type \"longrope\" is implemented for minicpm only");
  }

  // Which head: a causal LM's, or a sequence classifier's score rows.
  if (const json* arch = top.Get("architectures");
      arch != nullptr && arch->is_array() && !arch->empty() && (*arch)[0].is_string() &&
      (*arch)[0].get<std::string>().ends_with("ForSequenceClassification")) {
    if (const json* labels = top.Get("id2label"); labels != nullptr && labels->is_object()) {
      c.num_labels = static_cast<int64_t>(labels->size());
    } else {
      TS_ASSIGN_OR_RETURN(auto n, top.OptionalInt("num_labels", 1, 4096));
      c.num_labels = n.value_or(0);
    }
    if (c.num_labels < 1 || c.num_labels > 4096) {
      return top.FieldError(ErrorCode::kCorrupt, "id2label",
                            "a sequence classifier needs 1..4096 classes in id2label");
    }
  }

  TS_ASSIGN_OR_RETURN(c.bos_token_id, cfg.OptionalInt("bos_token_id", 0, kMaxSize));
  if (!c.bos_token_id && type.nested) {
    TS_ASSIGN_OR_RETURN(c.bos_token_id, top.OptionalInt("bos_token_id", 0, kMaxSize));
  }
  if (c.bos_token_id) {
    TS_RETURN_IF_ERROR(CheckTokenId(cfg, "bos_token_id", *c.bos_token_id, c.vocab_size));
  }
  TS_ASSIGN_OR_RETURN(c.eos_token_ids, cfg.IntOrIntList("eos_token_id", kMaxSize));
  if (c.eos_token_ids.empty() && type.nested) {
    TS_ASSIGN_OR_RETURN(c.eos_token_ids, top.IntOrIntList("eos_token_id", kMaxSize));
  }
  for (int64_t id : c.eos_token_ids) {
    TS_RETURN_IF_ERROR(CheckTokenId(cfg, "eos_token_id", id, c.vocab_size));
  }
  return c;
}

Expected<GenerationConfig> ParseGenerationConfig(std::string_view text) {
  TS_ASSIGN_OR_RETURN(json doc, ParseObject(text, kGenerationConfig));
  JsonObjectReader cfg(doc, kGenerationConfig);
  GenerationConfig g;
  TS_ASSIGN_OR_RETURN(g.eos_token_ids, cfg.IntOrIntList("eos_token_id", kMaxSize));
  TS_ASSIGN_OR_RETURN(g.bos_token_id, cfg.OptionalInt("bos_token_id", 0, kMaxSize));
  TS_ASSIGN_OR_RETURN(g.pad_token_id, cfg.OptionalInt("pad_token_id", 0, kMaxSize));
  TS_ASSIGN_OR_RETURN(auto do_sample, cfg.OptionalBool("do_sample"));
  g.do_sample = do_sample.value_or(false);
  TS_ASSIGN_OR_RETURN(g.temperature, cfg.OptionalFiniteDouble("temperature", 0, kMaxDouble));
  TS_ASSIGN_OR_RETURN(g.top_p, cfg.OptionalFiniteDouble("top_p", 0, 1));
  TS_ASSIGN_OR_RETURN(g.top_k, cfg.OptionalInt("top_k", 0, kMaxSize));
  TS_ASSIGN_OR_RETURN(g.min_p, cfg.OptionalFiniteDouble("min_p", 0, 1));
  TS_ASSIGN_OR_RETURN(g.repetition_penalty,
                      cfg.OptionalFiniteDouble("repetition_penalty", 0, kMaxDouble));
  if (g.repetition_penalty && *g.repetition_penalty <= 0) {
    return cfg.FieldError(
        ErrorCode::kCorrupt, "repetition_penalty",
        "must be greater than 0, found " + JsonForMessage(json(*g.repetition_penalty)));
  }
  TS_ASSIGN_OR_RETURN(g.max_length, cfg.OptionalInt("max_length", 1, INT64_MAX));
  TS_ASSIGN_OR_RETURN(g.max_new_tokens, cfg.OptionalInt("max_new_tokens", 1, INT64_MAX));
  return g;
}

Expected<TokenizerConfig> ParseTokenizerConfig(std::string_view text) {
  TS_ASSIGN_OR_RETURN(json doc, ParseObject(text, kTokenizerConfig));
  JsonObjectReader cfg(doc, kTokenizerConfig);
  TokenizerConfig t;
  TS_ASSIGN_OR_RETURN(t.add_bos_token, cfg.OptionalBool("add_bos_token"));
  TS_ASSIGN_OR_RETURN(t.add_eos_token, cfg.OptionalBool("add_eos_token"));
  TS_ASSIGN_OR_RETURN(t.bos_token, SpecialToken(cfg, "bos_token", cfg.Get("bos_token")));
  TS_ASSIGN_OR_RETURN(t.eos_token, SpecialToken(cfg, "eos_token", cfg.Get("eos_token")));
  TS_ASSIGN_OR_RETURN(t.unk_token, SpecialToken(cfg, "unk_token", cfg.Get("unk_token")));
  TS_ASSIGN_OR_RETURN(t.pad_token, SpecialToken(cfg, "pad_token", cfg.Get("pad_token")));

  if (const json* extra = cfg.Get("additional_special_tokens")) {
    if (!extra->is_array()) {
      return cfg.FieldError(ErrorCode::kCorrupt, "additional_special_tokens",
                            "must be a list, found " + JsonTypeName(*extra));
    }
    for (size_t i = 0; i < extra->size(); ++i) {
      std::string field = "additional_special_tokens[" + std::to_string(i) + "]";
      TS_ASSIGN_OR_RETURN(auto token, SpecialToken(cfg, field, &(*extra)[i]));
      if (!token) {
        return cfg.FieldError(ErrorCode::kCorrupt, field, "must not be null");
      }
      t.additional_special_tokens.push_back(std::move(*token));
    }
  }

  if (const json* tmpl = cfg.Get("chat_template")) {
    if (tmpl->is_string()) {
      t.chat_templates.push_back({"default", tmpl->get<std::string>()});
    } else if (tmpl->is_array()) {
      for (size_t i = 0; i < tmpl->size(); ++i) {
        const json& entry = (*tmpl)[i];
        JsonObjectReader named(entry, kTokenizerConfig,
                               "chat_template[" + std::to_string(i) + "].");
        if (!entry.is_object()) {
          return cfg.FieldError(
              ErrorCode::kCorrupt, "chat_template[" + std::to_string(i) + "]",
              "must be an object {\"name\", \"template\"}, found " + JsonTypeName(entry));
        }
        TS_ASSIGN_OR_RETURN(auto name, named.OptionalString("name"));
        TS_ASSIGN_OR_RETURN(auto source, named.OptionalString("template"));
        if (!name || !source) {
          return named.FieldError(ErrorCode::kCorrupt, name ? "template" : "name",
                                  "is missing; it is required (a string)");
        }
        for (const NamedTemplate& seen : t.chat_templates) {
          if (seen.name == *name) {
            return named.FieldError(ErrorCode::kCorrupt, "name",
                                    QuoteForMessage(*name) + " is used twice");
          }
        }
        t.chat_templates.push_back({std::move(*name), std::move(*source)});
      }
    } else {
      return cfg.FieldError(
          ErrorCode::kCorrupt, "chat_template",
          "must be a string or a list of {\"name\", \"template\"}, found " + JsonTypeName(*tmpl));
    }
  }

  if (const json* max_len = cfg.Get("model_max_length")) {
    if (!max_len->is_number()) {
      return cfg.FieldError(ErrorCode::kCorrupt, "model_max_length",
                            "must be a number, found " + JsonForMessage(*max_len));
    }
    double v = max_len->get<double>();
    if (!(v > 0)) {
      return cfg.FieldError(ErrorCode::kCorrupt, "model_max_length",
                            "must be positive, found " + JsonForMessage(*max_len));
    }
    if (v <= kUnboundedModelMaxLength) {
      if (max_len->is_number_float() && v != std::floor(v)) {
        return cfg.FieldError(ErrorCode::kCorrupt, "model_max_length",
                              "must be a whole number, found " + JsonForMessage(*max_len));
      }
      t.model_max_length = max_len->is_number_unsigned()
                               ? static_cast<int64_t>(max_len->get<uint64_t>())
                               : static_cast<int64_t>(v);
    }
  }

  TS_ASSIGN_OR_RETURN(auto cleanup, cfg.OptionalBool("clean_up_tokenization_spaces"));
  t.clean_up_tokenization_spaces = cleanup.value_or(false);
  TS_ASSIGN_OR_RETURN(auto cls, cfg.OptionalString("tokenizer_class"));
  t.tokenizer_class = cls.value_or("");
  return t;
}

}  // namespace tessera
