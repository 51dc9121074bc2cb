// LM Studio's models folder, read in place: ~/.lmstudio/models/<publisher>/<repo>/*.gguf (the
// layout LM Studio documents, kept from the Hugging Face repository it downloaded from). A
// model is named `publisher/repo` (when that folder holds one GGUF file) or
// `publisher/repo/file.gguf`. Also a plain folder of GGUF files, given by path.
//
//   TS_ASSIGN_OR_RETURN(std::string root, LmStudioModelsDir());
//   std::vector<GgufModel> found = FindLmStudioModels(root, "lmstudio-community/Qwen2.5-GGUF");
//   // several: the name is ambiguous, and the caller says so, naming each file
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "catalog/gguf_model.h"

namespace tessera {

// $HOME/.lmstudio/models.
Expected<std::string> LmStudioModelsDir();

// The GGUF files `text` names in LM Studio's folder: every *.gguf of publisher/repo, or the one
// file of publisher/repo/file.gguf; empty when `text` is not such a name (each part 1-255
// characters of letters, digits, '.', '-', '_', not starting with '.') or nothing is there.
std::vector<GgufModel> FindLmStudioModels(const std::string& root, std::string_view text);

// A listed *.gguf file, or why it cannot be used (it does not start with "GGUF").
struct ListedGgufFile {
  std::string name;
  std::string path;
  ModelLocation location = ModelLocation::kLmStudio;
  uint64_t size_bytes = 0;
  Expected<GgufModel> model{GgufModel{}};
};

// Every <publisher>/<repo>/*.gguf, sorted by path, named publisher/repo/file.gguf.
std::vector<ListedGgufFile> ListLmStudioModels(const std::string& root);

// Every *.gguf directly in `dir` (a plain folder), named by its absolute path.
std::vector<ListedGgufFile> ListGgufFolder(const std::string& dir, ModelLocation location);

}  // namespace tessera
