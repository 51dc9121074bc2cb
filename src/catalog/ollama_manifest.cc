#include "catalog/ollama_manifest.h"

#include <nlohmann/json.hpp>

#include "format/json_util.h"

namespace tessera {
namespace {

enum class NamePart { kHost, kNamespace, kModel, kTag };

bool IsAlnumOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Ollama's isValidPart: the first character a letter, digit or '_', then also '-' and '.'
// (not in a namespace) and ':' (in a host, for a port).
bool IsValidPart(NamePart kind, std::string_view s) {
  const size_t max_len = kind == NamePart::kHost ? 350 : 80;
  if (s.empty() || s.size() > max_len) return false;
  if (!IsAlnumOrUnderscore(s.front())) return false;
  for (char c : s.substr(1)) {
    if (IsAlnumOrUnderscore(c) || c == '-' || c == '_') continue;
    if (c == '.' && kind != NamePart::kNamespace) continue;
    if (c == ':' && kind == NamePart::kHost) continue;
    return false;
  }
  return true;
}

bool IsFullyQualified(const OllamaName& n) {
  return IsValidPart(NamePart::kHost, n.host) && IsValidPart(NamePart::kNamespace, n.ns) &&
         IsValidPart(NamePart::kModel, n.model) && IsValidPart(NamePart::kTag, n.tag);
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// One {mediaType, digest, size} object of a manifest; `where` names it in messages.
Expected<OllamaLayer> ParseLayer(const nlohmann::json& j, const std::string& where,
                                 std::string_view what) {
  auto bad = [&](const std::string& why) {
    return Corrupt(std::string(what) + ": " + where + " " + why +
                   "; the manifest is damaged: pull the model again with `ollama pull`");
  };
  if (!j.is_object()) return bad("is not an object");
  OllamaLayer layer;
  const auto media = j.find("mediaType");
  if (media == j.end() || !media->is_string()) return bad("has no mediaType string");
  layer.media_type = media->get<std::string>();
  const auto digest = j.find("digest");
  if (digest == j.end() || !digest->is_string()) return bad("has no digest string");
  layer.digest = digest->get<std::string>();
  if (layer.digest.size() != 71 || !layer.digest.starts_with("sha256:") ||
      !IsLowerHex(std::string_view(layer.digest).substr(7))) {
    return bad("has digest " + QuoteForMessage(layer.digest) +
               ", not sha256: and 64 lowercase hex digits");
  }
  const auto size = j.find("size");
  // nlohmann keeps a non-negative integer as unsigned.
  if (size == j.end() || !size->is_number_unsigned()) {
    return bad("has no size (a non-negative integer)");
  }
  layer.size = size->get<uint64_t>();
  layer.kind = OllamaLayerKindOf(layer.media_type);
  return layer;
}

}  // namespace

std::string OllamaName::RelativePath() const {
  return host + "/" + ns + "/" + model + "/" + tag;
}

std::string OllamaName::Shortest() const {
  std::string out;
  if (host != kOllamaDefaultHost) {
    out = host + "/" + ns + "/";
  } else if (ns != kOllamaDefaultNamespace) {
    out = ns + "/";
  }
  return out + model + ":" + tag;
}

std::optional<OllamaName> ParseOllamaName(std::string_view s) {
  OllamaName n;
  // A tag follows the last ':' only when it comes after the last '/' ("host:port/ns/model").
  const size_t colon = s.rfind(':');
  const size_t slash = s.rfind('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    n.tag = std::string(s.substr(colon + 1));
    if (n.tag.empty()) return std::nullopt;
    s = s.substr(0, colon);
  }
  size_t cut = s.rfind('/');
  if (cut == std::string_view::npos) {
    n.model = std::string(s);
  } else {
    n.model = std::string(s.substr(cut + 1));
    s = s.substr(0, cut);
    if (n.model.empty() || s.empty()) return std::nullopt;
    cut = s.rfind('/');
    if (cut == std::string_view::npos) {
      n.ns = std::string(s);
    } else {
      n.ns = std::string(s.substr(cut + 1));
      std::string_view host = s.substr(0, cut);
      if (n.ns.empty() || host.empty()) return std::nullopt;
      if (const size_t scheme = host.find("://"); scheme != std::string_view::npos) {
        host = host.substr(scheme + 3);
        if (host.empty()) return std::nullopt;  // not the default host: no host at all
      }
      n.host = std::string(host);
    }
  }
  if (n.host.empty()) n.host = kOllamaDefaultHost;
  if (n.ns.empty()) n.ns = kOllamaDefaultNamespace;
  if (n.tag.empty()) n.tag = kOllamaDefaultTag;
  if (!IsFullyQualified(n)) return std::nullopt;
  return n;
}

std::optional<OllamaName> OllamaNameFromPath(std::string_view path) {
  OllamaName n;
  std::string* parts[] = {&n.host, &n.ns, &n.model, &n.tag};
  for (size_t i = 0; i < 4; ++i) {
    const size_t slash = path.find('/');
    if ((i < 3) == (slash == std::string_view::npos)) return std::nullopt;
    *parts[i] = std::string(path.substr(0, slash));
    path = i < 3 ? path.substr(slash + 1) : std::string_view();
  }
  if (!IsFullyQualified(n)) return std::nullopt;
  return n;
}

OllamaLayerKind OllamaLayerKindOf(std::string_view media_type) {
  constexpr std::string_view kPrefix = "application/vnd.ollama.image.";
  if (!media_type.starts_with(kPrefix)) return OllamaLayerKind::kOther;
  const std::string_view kind = media_type.substr(kPrefix.size());
  if (kind == "model") return OllamaLayerKind::kModel;
  if (kind == "template" || kind == "prompt") return OllamaLayerKind::kTemplate;
  if (kind == "system") return OllamaLayerKind::kSystem;
  if (kind == "params") return OllamaLayerKind::kParams;
  if (kind == "license") return OllamaLayerKind::kLicense;
  if (kind == "messages") return OllamaLayerKind::kMessages;
  if (kind == "adapter") return OllamaLayerKind::kAdapter;
  if (kind == "projector") return OllamaLayerKind::kProjector;
  if (kind == "embed") return OllamaLayerKind::kEmbed;
  return OllamaLayerKind::kOther;
}

uint64_t OllamaManifest::TotalSize() const {
  uint64_t total = config ? config->size : 0;
  for (const OllamaLayer& l : layers) total += l.size;
  return total;
}

Expected<OllamaManifest> ParseOllamaManifest(std::string_view text, std::string_view what) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, what, 16));
  auto bad = [&](const std::string& why) {
    return Corrupt(std::string(what) + ": " + why +
                   "; the manifest is damaged: pull the model again with `ollama pull`");
  };
  if (!doc.is_object()) return bad("not a JSON object");
  const auto version = doc.find("schemaVersion");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != 2) {
    return bad("schemaVersion is not 2");
  }
  if (const auto media = doc.find("mediaType"); media != doc.end() && !media->is_string()) {
    return bad("mediaType is not a string");
  }
  OllamaManifest manifest;
  const auto config = doc.find("config");
  if (config == doc.end() || !config->is_object()) return bad("no config object");
  // Ollama reads the config only when its digest is set.
  if (const auto digest = config->find("digest");
      digest != config->end() && !(digest->is_string() && digest->get<std::string>().empty())) {
    TS_ASSIGN_OR_RETURN(OllamaLayer layer, ParseLayer(*config, "config", what));
    manifest.config = std::move(layer);
  }
  const auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array()) return bad("no layers array");
  constexpr size_t kMaxLayers = 4096;
  if (layers->size() > kMaxLayers) {
    return bad(std::to_string(layers->size()) + " layers (at most " + std::to_string(kMaxLayers) +
               ")");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    TS_ASSIGN_OR_RETURN(OllamaLayer layer,
                        ParseLayer((*layers)[i], "layer " + std::to_string(i), what));
    manifest.layers.push_back(std::move(layer));
  }
  return manifest;
}

Expected<OllamaConfig> ParseOllamaConfig(std::string_view text, std::string_view what) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, what, 16));
  if (!doc.is_object()) return Corrupt(std::string(what) + ": not a JSON object");
  OllamaConfig config;
  JsonObjectReader reader(doc, std::string(what));
  for (auto [key, field] :
       {std::pair{"model_format", &config.model_format}, std::pair{"file_type", &config.file_type},
        std::pair{"model_family", &config.model_family},
        std::pair{"model_type", &config.parameter_size}}) {
    TS_ASSIGN_OR_RETURN(std::optional<std::string> value, reader.OptionalString(key));
    *field = value.value_or("");
  }
  return config;
}

namespace {

// The fields of Ollama's api.Options and api.Runner, by type.
struct ParamFields {
  std::vector<std::pair<const char*, std::optional<double> OllamaParams::*>> floats;
  std::vector<std::pair<const char*, std::optional<int64_t> OllamaParams::*>> ints;
};

const ParamFields& Fields() {
  static const ParamFields fields{{{"temperature", &OllamaParams::temperature},
                                   {"top_p", &OllamaParams::top_p},
                                   {"min_p", &OllamaParams::min_p},
                                   {"typical_p", &OllamaParams::typical_p},
                                   {"repeat_penalty", &OllamaParams::repeat_penalty},
                                   {"presence_penalty", &OllamaParams::presence_penalty},
                                   {"frequency_penalty", &OllamaParams::frequency_penalty}},
                                  {{"num_ctx", &OllamaParams::num_ctx},
                                   {"num_predict", &OllamaParams::num_predict},
                                   {"top_k", &OllamaParams::top_k},
                                   {"seed", &OllamaParams::seed},
                                   {"repeat_last_n", &OllamaParams::repeat_last_n},
                                   {"num_keep", &OllamaParams::num_keep},
                                   {"num_batch", &OllamaParams::num_batch},
                                   {"num_gpu", &OllamaParams::num_gpu},
                                   {"main_gpu", &OllamaParams::main_gpu},
                                   {"num_thread", &OllamaParams::num_thread},
                                   {"draft_num_predict", &OllamaParams::draft_num_predict}}};
  return fields;
}

}  // namespace

Expected<OllamaParams> ParseOllamaParams(std::string_view text, std::string_view what) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, what, 16));
  if (!doc.is_object()) return Corrupt(std::string(what) + ": not a JSON object");
  OllamaParams p;
  JsonObjectReader reader(doc, std::string(what));
  for (const auto& [key, value] : doc.items()) {
    bool known = false;
    for (const auto& [name, field] : Fields().floats) {
      if (key != name) continue;
      known = true;
      TS_ASSIGN_OR_RETURN(p.*field, reader.OptionalFiniteDouble(key, -1e9, 1e9));
    }
    for (const auto& [name, field] : Fields().ints) {
      if (key != name) continue;
      known = true;
      TS_ASSIGN_OR_RETURN(p.*field, reader.OptionalInt(key, INT32_MIN, UINT32_MAX));
    }
    if (key == "use_mmap") {
      known = true;
      TS_ASSIGN_OR_RETURN(p.use_mmap, reader.OptionalBool(key));
    } else if (key == "stop") {
      known = true;
      if (value.is_null()) continue;
      if (!value.is_array()) {
        return reader.FieldError(ErrorCode::kCorrupt, key, "must be an array of strings");
      }
      for (const auto& s : value) {
        if (!s.is_string()) {
          return reader.FieldError(ErrorCode::kCorrupt, key, "must be an array of strings");
        }
        p.stop.push_back(s.get<std::string>());
      }
    }
    if (!known) p.ignored.push_back(key);
  }
  return p;
}

nlohmann::json OllamaParamsToJson(const OllamaParams& p) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, field] : Fields().floats) {
    if (p.*field) out[name] = *(p.*field);
  }
  for (const auto& [name, field] : Fields().ints) {
    if (p.*field) out[name] = *(p.*field);
  }
  if (p.use_mmap) out["use_mmap"] = *p.use_mmap;
  if (!p.stop.empty()) out["stop"] = p.stop;
  if (!p.ignored.empty()) out["ignored"] = p.ignored;
  return out;
}

}  // namespace tessera
