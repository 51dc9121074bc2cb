// The environment variables tessera reads: all of them are listed here and read here, nowhere
// else (docs/configuration.md documents each). Behaviour is chosen by command-line flags; the
// environment only carries what a container or a shell profile has to set once: where models
// live, the API key, a hub mirror and its token, and the package cache policy.
//
//   if (std::optional<std::string> dir = ReadEnv(EnvVar::kModels)) UseStore(*dir);
//   TS_ASSIGN_OR_RETURN(bool on, ReadEnvSwitch(EnvVar::kPackageCache, true));
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

enum class EnvVar {
  kModels,        // TESSERA_MODELS: tessera's model store (default ~/.local/share/tessera/models)
  kApiKey,        // TESSERA_API_KEY: serve's bearer key (else one is generated and saved)
  kPackageCache,  // TESSERA_PACKAGE_CACHE: on|off, convert path-given checkpoints on first use
  kReadOnlyDirs,  // TESSERA_READ_ONLY_DIRS: colon-separated folders never written into
  kHome,          // HOME
  kHfHome,        // HF_HOME: the Hugging Face cache's root (its hub/ is read in place)
  kHfHubCache,    // HF_HUB_CACHE: the Hugging Face hub cache itself
  kHfEndpoint,    // HF_ENDPOINT: the hub (or a mirror) `pull` downloads from
  kHfToken,       // HF_TOKEN: bearer token sent to the hub
  kOllamaModels,  // OLLAMA_MODELS: Ollama's store, read in place (default ~/.ollama/models)

  // XDG_CONFIG_HOME: where serve saves the API key it generates (default ~/.config)
  kXdgConfigHome,
};

std::string_view EnvVarName(EnvVar var);  // e.g. "TESSERA_MODELS"

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> ReadEnv(EnvVar var);

// An on/off variable: on|1|true, off|0|false; unset or empty gives `fallback`. Any other value
// is an InvalidArgument naming the variable and the values it takes.
Expected<bool> ReadEnvSwitch(EnvVar var, bool fallback);

}  // namespace tessera
