// The stores of GGUF files (Ollama's, LM Studio's, folders given by path) as ResolveModel and
// ListInstalledModels in catalog/model_store.cc see them.
//
//   TS_ASSIGN_OR_RETURN(GgufStoreLookup lookup, FindInGgufStores("qwen2.5:0.5b"));
//   for (ResolvedModel& m : lookup.found) candidates.push_back(std::move(m));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "catalog/lmstudio_store.h"
#include "catalog/model_store.h"

namespace tessera {

struct GgufStoreLookup {
  std::vector<ResolvedModel> found;
  std::vector<std::string> looked_in;  // "Ollama's store (DIR)", ... for the not-found message
  bool is_name_there = false;          // the text is a name in one of these stores' syntax
};

// `name` in Ollama's store, then LM Studio's folder. A store whose root is unknown (no HOME)
// is skipped. An Ollama manifest that exists for the name but is refused or malformed is an
// error (the name means it; nothing else is tried).
Expected<GgufStoreLookup> FindInGgufStores(std::string_view name);

// A path that is a GGUF file, or a folder holding no config.json and *.gguf files (one: that
// file; several: InvalidArgument naming them). nullopt for any other folder.
Expected<std::optional<ResolvedModel>> ResolveGgufPath(const std::string& as_given,
                                                       const std::string& path);

// Ollama's and LM Studio's models as `tessera list` rows (named as `ollama list` would, and
// publisher/repo/file.gguf).
std::vector<InstalledModel> ListGgufStoreModels(bool rehash);

// A GGUF file as a `tessera list` row: `verification` when it is one, else "refused: <why>".
InstalledModel InstalledFromGgufFile(const ListedGgufFile& file, std::string verification);

}  // namespace tessera
