#include "format/model_config.h"

#include <cmath>
#include <limits>

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

// Plain RoPE and Llama 3's frequency scaling are what tessera implements: rope_scaling must be
// absent, null, "default" or "llama3". Newer transformers write rope_parameters instead of
// rope_theta (and of rope_scaling); "default" and "llama3" are accepted there, and its
// rope_theta is used.
Status CheckRope(const JsonObjectReader& cfg, double* rope_theta,
                 std::optional<Llama3RopeScaling>* llama3) {
  if (const json* scaling = cfg.Get("rope_scaling")) {
    std::string type = RopeTypeOf(*scaling);
    if (type == "llama3") {
      TS_ASSIGN_OR_RETURN(*llama3, ParseLlama3Scaling(*scaling, "rope_scaling"));
    } else if (type != "default") {
      return cfg.FieldError(
          ErrorCode::kUnsupported, "rope_scaling",
          (type.empty() ? JsonForMessage(*scaling) : "type " + QuoteForMessage(type)) +
              " is not supported; only plain RoPE (null or \"default\") and \"llama3\"");
    }
  }
  if (const json* params = cfg.Get("rope_parameters")) {
    if (!params->is_object()) {
      return cfg.FieldError(ErrorCode::kCorrupt, "rope_parameters",
                            "must be an object, found " + JsonForMessage(*params));
    }
    std::string type = RopeTypeOf(*params);
    if (type == "llama3") {
      TS_ASSIGN_OR_RETURN(*llama3, ParseLlama3Scaling(*params, "rope_parameters"));
    } else if (!type.empty() && type != "default") {
      return cfg.FieldError(ErrorCode::kUnsupported, "rope_parameters",
                            "rope_type " + QuoteForMessage(type) +
                                " is not supported; only \"default\" (plain RoPE) and \"llama3\"");
    }
    JsonObjectReader rope(*params, kConfig, "rope_parameters.");
    TS_ASSIGN_OR_RETURN(auto theta, rope.OptionalFiniteDouble("rope_theta", 0, kMaxDouble));
    if (theta) *rope_theta = *theta;
  }
  return Status::Ok();
}

Expected<ModelFamily> ParseFamily(const JsonObjectReader& cfg) {
  TS_ASSIGN_OR_RETURN(auto model_type, cfg.OptionalString("model_type"));
  if (!model_type) {
    return cfg.FieldError(ErrorCode::kCorrupt, "model_type",
                          "is missing; it is required (one of: llama, qwen2, qwen3)");
  }
  if (*model_type == "llama") return ModelFamily::kLlama;
  if (*model_type == "qwen2") return ModelFamily::kQwen2;
  if (*model_type == "qwen3") return ModelFamily::kQwen3;
  return Unsupported(std::string(kConfig) + ": model_type " + QuoteForMessage(*model_type) +
                     " is not supported; supported: llama, qwen2, qwen3");
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
  }
  return "unknown";
}

Expected<ModelConfig> ParseModelConfig(std::string_view config_json) {
  TS_ASSIGN_OR_RETURN(json doc, ParseObject(config_json, kConfig));
  JsonObjectReader cfg(doc, kConfig);
  ModelConfig c;
  TS_ASSIGN_OR_RETURN(c.family, ParseFamily(cfg));

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
  if (head_dim) {
    // Explicit head_dim may differ from hidden_size / heads (Qwen3 does this on purpose).
    c.head_dim = *head_dim;
  } else if (c.family == ModelFamily::kQwen3) {
    return cfg.FieldError(ErrorCode::kCorrupt, "head_dim",
                          "is missing; qwen3 configs must give it explicitly");
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
  c.rope_theta = theta.value_or(10000.0);
  TS_RETURN_IF_ERROR(CheckRope(cfg, &c.rope_theta, &c.rope_llama3));
  if (!(c.rms_norm_eps > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rms_norm_eps",
                          "must be greater than 0, found " + JsonForMessage(json(c.rms_norm_eps)));
  }
  if (!(c.rope_theta > 0)) {
    return cfg.FieldError(ErrorCode::kCorrupt, "rope_theta",
                          "must be greater than 0, found " + JsonForMessage(json(c.rope_theta)));
  }

  TS_ASSIGN_OR_RETURN(auto act, cfg.OptionalString("hidden_act"));
  if (act && *act != "silu") {
    return cfg.FieldError(ErrorCode::kUnsupported, "hidden_act",
                          QuoteForMessage(*act) + " is not supported; only \"silu\"");
  }

  // transformers' LlamaConfig, Qwen2Config and Qwen3Config all default to untied.
  TS_ASSIGN_OR_RETURN(auto tie, cfg.OptionalBool("tie_word_embeddings"));
  c.tie_word_embeddings = tie.value_or(false);

  TS_ASSIGN_OR_RETURN(auto attention_bias, cfg.OptionalBool("attention_bias"));
  TS_ASSIGN_OR_RETURN(auto mlp_bias, cfg.OptionalBool("mlp_bias"));
  TS_ASSIGN_OR_RETURN(auto sliding, cfg.OptionalBool("use_sliding_window"));
  switch (c.family) {
    case ModelFamily::kLlama:
      c.attention_bias = attention_bias.value_or(false);
      if (mlp_bias.value_or(false)) {
        return cfg.FieldError(ErrorCode::kUnsupported, "mlp_bias",
                              "is true, which is not supported; only false");
      }
      break;
    case ModelFamily::kQwen2:
      // Qwen2's modeling code always gives q/k/v a bias, whatever the config says.
      c.attention_bias = true;
      break;
    case ModelFamily::kQwen3:
      c.attention_bias = attention_bias.value_or(false);
      c.qk_norm = true;
      break;
  }
  if (c.family != ModelFamily::kLlama && sliding.value_or(false)) {
    return cfg.FieldError(ErrorCode::kUnsupported, "use_sliding_window",
                          "is true; sliding-window attention is not supported (set it to false)");
  }

  TS_ASSIGN_OR_RETURN(c.bos_token_id, cfg.OptionalInt("bos_token_id", 0, kMaxSize));
  if (c.bos_token_id) {
    TS_RETURN_IF_ERROR(CheckTokenId(cfg, "bos_token_id", *c.bos_token_id, c.vocab_size));
  }
  TS_ASSIGN_OR_RETURN(c.eos_token_ids, cfg.IntOrIntList("eos_token_id", kMaxSize));
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
