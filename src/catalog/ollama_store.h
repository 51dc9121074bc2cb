// Ollama's model store, read in place: $OLLAMA_MODELS, else ~/.ollama/models, laid out as
// Ollama writes it:
//   manifests/<host>/<namespace>/<model>/<tag>   a Docker-style manifest (schemaVersion 2)
//   blobs/sha256-<hex>                            every layer, named by its sha256
// A name resolves to its model layer (a GGUF file) plus the template, system, params and
// license layers. Nothing is ever written here (no cache, no lock, no timestamps).
//
//   TS_ASSIGN_OR_RETURN(std::string root, OllamaModelsDir());
//   TS_ASSIGN_OR_RETURN(std::optional<GgufModel> m, FindOllamaModel(root, "qwen2.5:0.5b"));
//   if (m) TS_RETURN_IF_ERROR(VerifyGgufModel(*m, progress));  // hashes the model blob
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "catalog/gguf_model.h"
#include "catalog/ollama_manifest.h"

namespace tessera {

// $OLLAMA_MODELS, else $HOME/.ollama/models (as Ollama's envconfig.Models()).
Expected<std::string> OllamaModelsDir();

// The model a manifest names. Every blob must exist with the size the manifest gives; the
// config and the small layers (template, system, params, license) are read and checked
// against their sha256 here; the model blob's sha256 is left to VerifyGgufModel. Refused
// (Unsupported, naming what): no model layer or more than one, adapters, projectors, preset
// messages, a second template/system/params layer, a layer type tessera does not know, a
// model_format other than gguf. The deprecated embed layer is ignored, as Ollama does.
Expected<GgufModel> ReadOllamaModel(const std::string& root, const OllamaName& name);

// `text` when it is an Ollama name whose manifest is in the store (as written, else the one
// manifest whose parts equal it regardless of case, as Ollama matches names; two such:
// InvalidArgument); nullopt when the text is not an Ollama name or no such manifest exists.
// A manifest that exists but is refused or malformed is an error.
Expected<std::optional<GgufModel>> FindOllamaModel(const std::string& root, std::string_view text);

struct ListedOllamaModel {
  OllamaName name;
  std::string manifest_path;
  uint64_t total_size = 0;                 // config and layers, as `ollama list` counts them
  Expected<GgufModel> model{GgufModel{}};  // or why it is refused
};

// Every manifest at manifests/*/*/*/* (Ollama's own glob) whose path is a valid name, sorted
// by path. With `rehash`, each model blob's sha256 is checked too.
std::vector<ListedOllamaModel> ListOllamaModels(const std::string& root, bool rehash);

}  // namespace tessera
