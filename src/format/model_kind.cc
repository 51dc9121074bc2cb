#include "format/model_kind.h"

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "format/json_util.h"

namespace tessera {
namespace {

constexpr size_t kMaxSideFileBytes = 1u << 20;  // the small JSON files read here

// One of the checkpoint's small JSON files, parsed.
Expected<nlohmann::json> ReadJsonFile(const std::string& dir, const std::string& name) {
  TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/" + name, kMaxSideFileBytes));
  return ParseJsonDocument(text, name);
}

// One that must hold an object.
Expected<nlohmann::json> ReadJsonObject(const std::string& dir, const std::string& name) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonFile(dir, name));
  if (!doc.is_object())
    return Corrupt(name + ": expected a JSON object, found " + JsonTypeName(doc));
  return doc;
}

// The pooling module of a sentence-transformers checkpoint (modules.json), or "" when it has
// none; also whether a Normalize module follows.
struct StModules {
  std::string pooling_path;
  bool normalize = false;
};

Expected<StModules> ReadModules(const std::string& dir) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonFile(dir, "modules.json"));
  if (!doc.is_array()) return Corrupt("modules.json: expected a list of modules");
  StModules out;
  for (const nlohmann::json& m : doc) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) {
      return Corrupt("modules.json: each module needs a string \"type\"");
    }
    const std::string type = m["type"].get<std::string>();
    if (type.ends_with(".Pooling")) {
      if (!m.contains("path") || !m["path"].is_string()) {
        return Corrupt("modules.json: the Pooling module has no \"path\"");
      }
      out.pooling_path = m["path"].get<std::string>();
      if (out.pooling_path.find("..") != std::string::npos || out.pooling_path.empty() ||
          out.pooling_path.front() == '/') {
        return Corrupt("modules.json: the Pooling module's path " +
                       QuoteForMessage(out.pooling_path) + " leaves the checkpoint");
      }
    } else if (type.ends_with(".Normalize")) {
      out.normalize = true;
    }
  }
  return out;
}

Status ReadEmbedding(const std::string& dir, const StModules& modules, ModelKindInfo* info) {
  TS_ASSIGN_OR_RETURN(nlohmann::json pooling,
                      ReadJsonObject(dir, modules.pooling_path + "/config.json"));
  const std::string what = modules.pooling_path + "/config.json";
  JsonObjectReader p(pooling, what);
  TS_ASSIGN_OR_RETURN(std::optional<bool> last, p.OptionalBool("pooling_mode_lasttoken"));
  if (!last.value_or(false)) {
    std::string found;
    for (const auto& [key, value] : pooling.items()) {
      if (key.starts_with("pooling_mode_") && value.is_boolean() && value.get<bool>()) {
        found += (found.empty() ? "" : ", ") + key;
      }
    }
    return Unsupported(what +
                       ": tessera embeds with last-token pooling (a causal model's last "
                       "position has seen the whole input); this checkpoint asks for " +
                       (found.empty() ? std::string("no pooling mode") : found));
  }
  info->kind = ModelKind::kEmbed;
  info->normalize = modules.normalize;
  info->evidence = what + ": last-token pooling" + (modules.normalize ? ", normalised" : "");
  if (FileExists(dir + "/config_sentence_transformers.json")) {
    TS_ASSIGN_OR_RETURN(nlohmann::json st,
                        ReadJsonObject(dir, "config_sentence_transformers.json"));
    if (st.contains("prompts") && !st["prompts"].is_null()) {
      if (!st["prompts"].is_object()) {
        return Corrupt("config_sentence_transformers.json: prompts must be an object");
      }
      for (const auto& [name, prompt] : st["prompts"].items()) {
        if (!prompt.is_string()) {
          return Corrupt("config_sentence_transformers.json: prompts." + name +
                         " must be a string");
        }
        info->prompts[name] = prompt.get<std::string>();
      }
    }
  }
  return Status::Ok();
}

Status ReadLabels(const nlohmann::json& cfg, ModelKindInfo* info) {
  if (!cfg.contains("id2label") || !cfg["id2label"].is_object() || cfg["id2label"].empty()) {
    return Unsupported(
        "config.json: a sequence classifier needs id2label (its class names); none found");
  }
  const nlohmann::json& map = cfg["id2label"];
  constexpr size_t kMaxLabels = 4096;
  if (map.size() > kMaxLabels) return Unsupported("config.json: id2label has over 4096 classes");
  info->labels.assign(map.size(), "");
  std::vector<bool> seen(map.size(), false);
  for (const auto& [key, value] : map.items()) {
    size_t index = 0, used = 0;
    try {
      index = std::stoul(key, &used);
    } catch (...) {
      used = 0;
    }
    if (used != key.size() || key.empty() || index >= map.size() || !value.is_string()) {
      return Corrupt("config.json: id2label must map the indices 0.." +
                     std::to_string(map.size() - 1) + " to names; found key " +
                     QuoteForMessage(key));
    }
    if (seen[index]) return Corrupt("config.json: id2label names class " + key + " twice");
    seen[index] = true;
    info->labels[index] = value.get<std::string>();
  }
  return Status::Ok();
}

// Whether the checkpoint has a chat template where LoadChatTemplateConfig (chat/chat_template.h)
// looks for one: chat_template.jinja, else tokenizer_config.json's chat_template.
Expected<bool> HasChatTemplate(const std::string& dir) {
  if (FileExists(dir + "/chat_template.jinja")) return true;
  if (!FileExists(dir + "/tokenizer_config.json")) return false;
  // Larger than the other side files: gemma-3's holds its vocabulary's added tokens (1.2 MB).
  constexpr size_t kMaxTokenizerConfigBytes = 64u << 20;
  TS_ASSIGN_OR_RETURN(std::string text,
                      ReadFileToString(dir + "/tokenizer_config.json", kMaxTokenizerConfigBytes));
  TS_ASSIGN_OR_RETURN(nlohmann::json tc, ParseJsonDocument(text, "tokenizer_config.json"));
  if (!tc.is_object()) return Corrupt("tokenizer_config.json: expected a JSON object");
  const auto it = tc.find("chat_template");
  return it != tc.end() && !it->is_null();
}

}  // namespace

std::string AModelOfKind(ModelKind kind) {
  const std::string_view name = ModelKindName(kind);
  const bool vowel =
      !name.empty() && std::string_view("aeiou").find(name.front()) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(name) + " model";
}

std::string_view ModelKindName(ModelKind kind) {
  switch (kind) {
    case ModelKind::kChat:
      return "chat";
    case ModelKind::kEmbed:
      return "embed";
    case ModelKind::kRerank:
      return "rerank";
    case ModelKind::kGuard:
      return "guard";
    case ModelKind::kClassify:
      return "classify";
    case ModelKind::kDecide:
      return "decide";
    case ModelKind::kCompletion:
      return "completion";
  }
  return "chat";
}

bool GeneratesText(ModelKind kind) {
  return kind == ModelKind::kChat || kind == ModelKind::kCompletion;
}

std::optional<ModelKind> ParseModelKind(std::string_view name) {
  for (ModelKind k : {ModelKind::kChat, ModelKind::kEmbed, ModelKind::kRerank, ModelKind::kGuard,
                      ModelKind::kClassify, ModelKind::kDecide, ModelKind::kCompletion}) {
    if (ModelKindName(k) == name) return k;
  }
  return std::nullopt;
}

Expected<ModelKindInfo> DetectModelKind(const std::string& dir) {
  TS_ASSIGN_OR_RETURN(nlohmann::json cfg, ReadJsonObject(dir, "config.json"));
  std::string arch;
  if (cfg.contains("architectures") && !cfg["architectures"].is_null()) {
    const nlohmann::json& a = cfg["architectures"];
    if (!a.is_array() || a.size() != 1 || !a[0].is_string()) {
      return Corrupt("config.json: architectures must be a list of one name, found " +
                     JsonForMessage(a));
    }
    arch = a[0].get<std::string>();
  }
  ModelKindInfo info;
  if (arch.ends_with("ForSequenceClassification")) {
    TS_RETURN_IF_ERROR(ReadLabels(cfg, &info));
    info.kind = ModelKind::kClassify;
    info.evidence =
        "config.json: " + arch + " with " + std::to_string(info.labels.size()) + " labels";
    return info;
  }
  if (FileExists(dir + "/modules.json")) {
    TS_ASSIGN_OR_RETURN(StModules modules, ReadModules(dir));
    if (!modules.pooling_path.empty()) {
      TS_RETURN_IF_ERROR(ReadEmbedding(dir, modules, &info));
      return info;
    }
  }
  if (arch.empty() || arch.ends_with("ForCausalLM") || arch.ends_with("ForConditionalGeneration")) {
    TS_ASSIGN_OR_RETURN(const bool chat_template, HasChatTemplate(dir));
    info.kind = chat_template ? ModelKind::kChat : ModelKind::kCompletion;
    info.evidence =
        arch.empty() ? "config.json: no architectures (a causal LM)" : "config.json: " + arch;
    if (!chat_template) info.evidence += "; no chat template";
    return info;
  }
  return Unsupported("config.json: architecture " + QuoteForMessage(arch) +
                     " is not one tessera runs; it runs causal LMs (chat, and as rerankers, "
                     "guards and deciders), sentence-transformers last-token embedding models "
                     "and *ForSequenceClassification classifiers");
}

}  // namespace tessera
