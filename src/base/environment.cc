#include "base/environment.h"

#include <cstdlib>

namespace tessera {

std::string_view EnvVarName(EnvVar var) {
  switch (var) {
    case EnvVar::kModels:
      return "TESSERA_MODELS";
    case EnvVar::kApiKey:
      return "TESSERA_API_KEY";
    case EnvVar::kPackageCache:
      return "TESSERA_PACKAGE_CACHE";
    case EnvVar::kReadOnlyDirs:
      return "TESSERA_READ_ONLY_DIRS";
    case EnvVar::kHome:
      return "HOME";
    case EnvVar::kXdgConfigHome:
      return "XDG_CONFIG_HOME";
    case EnvVar::kHfHome:
      return "HF_HOME";
    case EnvVar::kHfHubCache:
      return "HF_HUB_CACHE";
    case EnvVar::kHfEndpoint:
      return "HF_ENDPOINT";
    case EnvVar::kHfToken:
      return "HF_TOKEN";
    case EnvVar::kOllamaModels:
      return "OLLAMA_MODELS";
  }
  return "";
}

std::optional<std::string> ReadEnv(EnvVar var) {
  const char* value = std::getenv(std::string(EnvVarName(var)).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

Expected<bool> ReadEnvSwitch(EnvVar var, bool fallback) {
  const std::optional<std::string> value = ReadEnv(var);
  if (!value) return fallback;
  if (*value == "on" || *value == "1" || *value == "true") return true;
  if (*value == "off" || *value == "0" || *value == "false") return false;
  return InvalidArgument(std::string(EnvVarName(var)) + "='" + *value +
                         "': expected on or off (1/0, true/false)");
}

}  // namespace tessera
