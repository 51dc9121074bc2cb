// What the CLI commands share to find a model: --model as a folder or a name.
#pragma once

#include <string>

#include "base/status.h"

namespace tessera {

// --model: an existing directory is used as given; anything else is a model name resolved
// through tessera's store and the Hugging Face cache (catalog/model_store.h).
Expected<std::string> ResolveModelDir(const std::string& model_arg);

// The model `tessera chat` uses without --model: the one installed model (tessera list), or
// the built-in demo model (catalog/builtin_model.h) when none is installed; the choice is
// said in one line on stderr. Several installed: InvalidArgument naming them.
Expected<std::string> DefaultChatModelName();

}  // namespace tessera
