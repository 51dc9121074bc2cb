// What the CLI commands share to find a model (--model as a folder or a name) and to load it
// with its phases shown.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/loaded_model.h"

namespace tessera {

// --model: an existing directory is used as given; anything else is a model name resolved
// through tessera's store and the Hugging Face cache (catalog/model_store.h).
Expected<std::string> ResolveModelDir(const std::string& model_arg);

// LoadedModel::Open with its phases (and a first-use conversion) shown on stderr: a bar on a
// terminal, plain lines otherwise (base/progress.h); its notes as "tessera: ..." lines.
Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const std::string& dir,
                                                                ModelLoadOptions options);

// The model `tessera chat` uses without --model: the one installed model (tessera list), or
// the built-in demo model (catalog/builtin_model.h) when none is installed; the choice is
// said in one line on stderr. Several installed: InvalidArgument naming them.
Expected<std::string> DefaultChatModelName();

}  // namespace tessera
