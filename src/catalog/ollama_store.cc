#include "catalog/ollama_store.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/environment.h"
#include "base/mapped_file.h"
#include "base/sha256.h"
#include "format/json_util.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

// Manifests, configs, templates, params and licenses are small; anything larger is not one.
constexpr size_t kMaxSmallBlobBytes = 4u << 20;

std::string BlobPath(const std::string& root, const OllamaLayer& layer) {
  return root + "/blobs/" + layer.BlobName();
}

// A small layer's bytes, checked against its size and sha256 (cheap, so done at every read).
Expected<std::string> ReadSmallBlob(const std::string& root, const OllamaLayer& layer,
                                    const std::string& model_name) {
  const std::string path = BlobPath(root, layer);
  if (layer.size > kMaxSmallBlobBytes) {
    return Corrupt(model_name + ": the " + layer.media_type + " layer is " +
                   std::to_string(layer.size) + " bytes, more than such a layer can be (" +
                   std::to_string(kMaxSmallBlobBytes) + ")");
  }
  auto text = ReadFileToString(path, kMaxSmallBlobBytes);
  if (!text) {
    return NotFound(model_name + ": blob " + path + " of its manifest is missing or unreadable (" +
                    text.status().message() + "); pull the model again with `ollama pull " +
                    model_name + "`");
  }
  if (text->size() != layer.size || Sha256Hex(*text) != layer.Hex()) {
    return Corrupt(model_name + ": blob " + path + " does not match its digest " + layer.digest +
                   "; the file is damaged: pull the model again with `ollama pull " + model_name +
                   "`");
  }
  return *text;
}

const char* RefusedLayerWhat(OllamaLayerKind kind) {
  switch (kind) {
    case OllamaLayerKind::kAdapter:
      return "a LoRA adapter layer";
    case OllamaLayerKind::kProjector:
      return "a vision projector layer";
    case OllamaLayerKind::kMessages:
      return "preset messages (a MESSAGE layer)";
    default:
      return nullptr;
  }
}

}  // namespace

Expected<std::string> OllamaModelsDir() {
  if (std::optional<std::string> dir = ReadEnv(EnvVar::kOllamaModels)) return *dir;
  std::optional<std::string> home = ReadEnv(EnvVar::kHome);
  if (!home) return NotFound("HOME is not set; set OLLAMA_MODELS to Ollama's models folder");
  return *home + "/.ollama/models";
}

Expected<GgufModel> ReadOllamaModel(const std::string& root, const OllamaName& name) {
  const std::string display = name.Shortest();
  const std::string manifest_path = root + "/manifests/" + name.RelativePath();
  auto text = ReadFileToString(manifest_path, kMaxSmallBlobBytes);
  if (!text) {
    if (text.status().code() == ErrorCode::kNotFound) {
      return NotFound(display + " is not in Ollama's store (" + root + ")");
    }
    return Status(text.status().code(),
                  "Ollama manifest of " + display + ": " + text.status().message());
  }
  TS_ASSIGN_OR_RETURN(OllamaManifest manifest, ParseOllamaManifest(*text, manifest_path));
  GgufModel model;
  model.name = display;
  model.location = ModelLocation::kOllama;
  model.manifest_path = manifest_path;
  auto refuse = [&](const std::string& what) {
    return Unsupported(display + " (Ollama) has " + what +
                       ", which tessera does not support; run it with Ollama, or use a model "
                       "without it");
  };
  if (manifest.config) {
    TS_ASSIGN_OR_RETURN(std::string config_text, ReadSmallBlob(root, *manifest.config, display));
    TS_ASSIGN_OR_RETURN(OllamaConfig config,
                        ParseOllamaConfig(config_text, display + " (Ollama) config blob"));
    if (!config.model_format.empty() && config.model_format != "gguf") {
      return refuse("weights in the " + QuoteForMessage(config.model_format) + " format, not GGUF");
    }
    model.quantization = config.file_type;
    model.family = config.model_family;
    model.parameter_size = config.parameter_size;
  }
  const OllamaLayer* weights = nullptr;
  for (const OllamaLayer& layer : manifest.layers) {
    if (const char* what = RefusedLayerWhat(layer.kind)) return refuse(what);
    switch (layer.kind) {
      case OllamaLayerKind::kModel:
        if (weights != nullptr) return refuse("more than one model layer");
        weights = &layer;
        break;
      case OllamaLayerKind::kTemplate:
      case OllamaLayerKind::kSystem:
      case OllamaLayerKind::kParams: {
        std::optional<std::string>* text_field =
            layer.kind == OllamaLayerKind::kTemplate ? &model.go_template
            : layer.kind == OllamaLayerKind::kSystem ? &model.system_prompt
                                                     : nullptr;
        if ((text_field != nullptr && text_field->has_value()) ||
            (text_field == nullptr && model.params.has_value())) {
          return refuse("a second " + layer.media_type + " layer");
        }
        TS_ASSIGN_OR_RETURN(std::string bytes, ReadSmallBlob(root, layer, display));
        if (text_field != nullptr) {
          *text_field = std::move(bytes);
        } else {
          TS_ASSIGN_OR_RETURN(model.params,
                              ParseOllamaParams(bytes, display + " (Ollama) params layer"));
        }
        break;
      }
      case OllamaLayerKind::kLicense: {
        TS_ASSIGN_OR_RETURN(std::string bytes, ReadSmallBlob(root, layer, display));
        model.licenses.push_back(std::move(bytes));
        break;
      }
      case OllamaLayerKind::kEmbed:
        break;  // deprecated since Ollama 0.1.3; Ollama ignores it too
      default:
        return refuse("a layer of type " + QuoteForMessage(layer.media_type));
    }
  }
  if (weights == nullptr) {
    return Unsupported(display + " (Ollama) has no model layer (" + kOllamaModelMediaType +
                       "): there are no weights to load");
  }
  model.path = BlobPath(root, *weights);
  model.size_bytes = weights->size;
  model.expected_sha256 = weights->Hex();
  std::error_code ec;
  const uintmax_t size = fs::file_size(model.path, ec);
  if (ec) {
    return NotFound(display + ": its model blob " + model.path + " is missing (" + ec.message() +
                    "); pull the model again with `ollama pull " + display + "`");
  }
  if (size != weights->size) {
    return Corrupt(display + ": its model blob " + model.path + " is " + std::to_string(size) +
                   " bytes, its digest says " + std::to_string(weights->size) +
                   "; the file is damaged: pull the model again with `ollama pull " + display +
                   "`");
  }
  return model;
}

namespace {

bool EqualIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The names of every manifests/*/*/*/* file, as Ollama globs them.
std::vector<std::pair<OllamaName, std::string>> ManifestNames(const std::string& root) {
  std::vector<std::pair<OllamaName, std::string>> names;
  const fs::path manifests = fs::path(root) / "manifests";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(manifests, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() < 3) continue;
    it.disable_recursion_pending();
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const std::string relative = fs::relative(it->path(), manifests, file_ec).generic_string();
    if (std::optional<OllamaName> name = OllamaNameFromPath(relative)) {
      names.emplace_back(std::move(*name), it->path().string());
    }
  }
  std::sort(names.begin(), names.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return names;
}

}  // namespace

Expected<std::optional<GgufModel>> FindOllamaModel(const std::string& root, std::string_view text) {
  std::optional<OllamaName> name = ParseOllamaName(text);
  if (!name) return std::optional<GgufModel>();
  std::error_code ec;
  if (!fs::exists(root + "/manifests/" + name->RelativePath(), ec)) {
    // Ollama matches each part of a name regardless of case (getExistingName): so does
    // tessera, but two manifests that differ only in case are refused, not picked from.
    std::vector<OllamaName> matches;
    for (const auto& [existing, path] : ManifestNames(root)) {
      if (EqualIgnoringCase(existing.host, name->host) &&
          EqualIgnoringCase(existing.ns, name->ns) &&
          EqualIgnoringCase(existing.model, name->model) &&
          EqualIgnoringCase(existing.tag, name->tag)) {
        matches.push_back(existing);
      }
    }
    if (matches.empty()) return std::optional<GgufModel>();
    if (matches.size() > 1) {
      return InvalidArgument(std::string(text) + " matches " + matches[0].Shortest() + " and " +
                             matches[1].Shortest() +
                             " in Ollama's store, which differ only in case; give one exactly");
    }
    name = matches[0];
  }
  TS_ASSIGN_OR_RETURN(GgufModel model, ReadOllamaModel(root, *name));
  return std::optional<GgufModel>(std::move(model));
}

std::vector<ListedOllamaModel> ListOllamaModels(const std::string& root, bool rehash) {
  std::vector<ListedOllamaModel> listed;
  for (auto& [name, path] : ManifestNames(root)) {
    ListedOllamaModel entry;
    entry.name = name;
    entry.manifest_path = path;
    if (auto text = ReadFileToString(entry.manifest_path, kMaxSmallBlobBytes)) {
      if (auto manifest = ParseOllamaManifest(*text, entry.manifest_path)) {
        entry.total_size = manifest->TotalSize();
      }
    }
    entry.model = ReadOllamaModel(root, name);
    if (rehash && entry.model) {
      if (Status st = VerifyGgufModel(*entry.model); !st.ok()) entry.model = st;
    }
    listed.push_back(std::move(entry));
  }
  return listed;
}

}  // namespace tessera
