// The API key `tessera serve` generates when given none (no TESSERA_API_KEY, --api-keys or
// --no-auth), kept in the user's config directory so that a restart keeps it: scripts and open
// pages go on working. The file holds the key on one line, mode 0600, in a directory created
// 0700; it is written to a temporary file (created 0600 with O_EXCL, never readable by others
// even briefly) and linked into place, so a reader sees no key or the whole key, and two servers
// started at once end up with the same one. A file group or others can read, or whose content
// is not a key, is refused with what to do (the same checks as --api-keys, api_keys.h).
//
//   TS_ASSIGN_OR_RETURN(std::string path, SavedApiKeyPath(ReadEnv(EnvVar::kXdgConfigHome),
//                                                         ReadEnv(EnvVar::kHome)));
//   TS_ASSIGN_OR_RETURN(SavedApiKey saved, LoadOrCreateSavedApiKey(path));
//   if (saved.created) Announce(saved.key);
#pragma once

#include <optional>
#include <string>

#include "base/status.h"

namespace tessera::server {

struct SavedApiKey {
  std::string key;
  bool created = false;  // generated and saved just now (else read from the file)
};

// $XDG_CONFIG_HOME/tessera/api-key, else $HOME/.config/tessera/api-key. A relative
// XDG_CONFIG_HOME is ignored, as the XDG Base Directory specification asks; neither set (or
// HOME relative) is an error saying how to give a key instead.
Expected<std::string> SavedApiKeyPath(const std::optional<std::string>& xdg_config_home,
                                      const std::optional<std::string>& home);

// The key saved at `path`; when there is no file, a new random key ("tsk-" and 32 hex
// digits), saved there first (missing directories are created 0700).
Expected<SavedApiKey> LoadOrCreateSavedApiKey(const std::string& path);

}  // namespace tessera::server
