// What the CLI commands share to find a model (--model as a folder or a name) and to load it
// with its phases shown.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "catalog/model_store.h"
#include "runtime/loaded_model.h"

namespace tessera {

// --model: an existing directory or file is a path; anything else is a model name resolved
// through tessera's store, the Hugging Face cache, Ollama's store and LM Studio's folder
// (ResolveModel in catalog/model_store.h). A GGUF model comes back with `gguf` set: the
// struct the GGUF loader takes (catalog/gguf_model.h).
Expected<ResolvedModel> ResolveModelArg(const std::string& model_arg);

// ResolveModelArg for the commands that load a model: a GGUF model whose store records its
// sha256 (Ollama's) is verified here (VerifyGgufShowingProgress), once, when it is opened.
Expected<ResolvedModel> ResolveModelToLoad(const std::string& model_arg);

// VerifyGgufModel with its progress on stderr (a bar on a terminal, plain lines otherwise):
// what opening a GGUF model from a store does first, once.
Status VerifyGgufShowingProgress(const GgufModel& model);

// LoadedModel::Open with its phases (and a first-use conversion) shown on stderr: a bar on a
// terminal, plain lines otherwise (base/progress.h); its notes as "tessera: ..." lines.
Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const std::string& dir,
                                                                ModelLoadOptions options);
// The same for a resolved model: its checkpoint folder, or its GGUF file in place with the
// store's layers (LoadedModel::Open(GgufModel)).
Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const ResolvedModel& model,
                                                                ModelLoadOptions options);

// The model `tessera chat` uses without --model: the one installed model (tessera list; an
// Ollama model listed as refused does not count), or
// the built-in demo model (catalog/builtin_model.h) when none is installed; the choice is
// said in one line on stderr. Several installed: InvalidArgument naming them.
Expected<std::string> DefaultChatModelName();

}  // namespace tessera
