// Where a resolved or listed model lives (catalog/model_store.h, catalog/gguf_model.h).
#pragma once

namespace tessera {

// kStore: tessera's own store. kHubCache: the Hugging Face cache, in place. kPath: a folder or
// file given by path. kBuiltin: the demo model carried in the binary (catalog/builtin_model.h).
// kFirstUsePackage: a package converted on first use under <models dir>/.packages.
// kOllama: Ollama's store ($OLLAMA_MODELS), in place. kLmStudio: LM Studio's models folder
// (~/.lmstudio/models), in place. kFolder: a GGUF file of a folder `tessera list --folder` was
// given.
enum class ModelLocation {
  kStore,
  kHubCache,
  kPath,
  kBuiltin,
  kFirstUsePackage,
  kOllama,
  kLmStudio,
  kFolder
};
// "store", "hf-cache", "path", "built-in", "package", "ollama", "lmstudio", "folder".
const char* ModelLocationName(ModelLocation location);

}  // namespace tessera
