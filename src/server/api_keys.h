// The server's API keys: TESSERA_API_KEY (or the key generated at start), named "default", and
// the keys of an --api-keys file, each with a name. A request's bearer token is compared with
// every key, each comparison in constant time and none skipped once one matched, so the time
// taken says nothing about which key (if any) matched. The name, never the key, is what the
// access log, /metrics and the prefix cache's scope see.
//
// The file: one `name:key` per line, split at the first ':'. Blank lines and lines whose first
// non-blank character is '#' are skipped; spaces and tabs around a line (and a CR before its
// newline) are ignored. A name is 1-64 of [A-Za-z0-9_.-]; a key is 16-512 printable ASCII
// characters without spaces. A name or a key given twice is an error naming both lines; the
// file must hold at least one key, and group and others must have no access to it
// (chmod 600 FILE), as ssh asks of a private key. No message ever shows a key.
//
//   auto keys = LoadApiKeysFile("/etc/tessera/keys");        // Expected<std::vector<ApiKey>>
//   ApiKeyring ring;
//   ring.Replace(*WithDefaultKey(std::move(*keys), env_key)); // env_key may be empty
//   std::optional<std::string> who = ring.Identify(token);   // the key's name, or nullopt
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera::server {

struct ApiKey {
  std::string name;
  std::string key;
};

inline constexpr size_t kMinApiKeyBytes = 16;
inline constexpr size_t kMaxApiKeyBytes = 512;
inline constexpr size_t kMaxApiKeysFileBytes = 1u << 20;
// The name of TESSERA_API_KEY's key (and of the generated one).
inline constexpr std::string_view kDefaultApiKeyName = "default";

// A key's own rules (kMinApiKeyBytes-kMaxApiKeyBytes printable ASCII, no spaces).
bool ValidApiKey(std::string_view key);
// The text of a secret file: refused (PermissionDenied, with the chmod to run) when group or
// others have any access to it, as ssh refuses a private key; NotFound when it does not exist;
// InvalidArgument when it is not a regular file or larger than `max_bytes`. Messages start
// with what went wrong ("cannot open it: ..."); the caller names the file.
Expected<std::string> ReadOwnerOnlyFile(const std::string& path, size_t max_bytes);
// The keys of a file's text; an error names the line ("line 3: ...") and what to do.
Expected<std::vector<ApiKey>> ParseApiKeys(std::string_view text);
// Reads and parses `path`, refusing a file group or others have any access to.
Expected<std::vector<ApiKey>> LoadApiKeysFile(const std::string& path);
// `keys` plus `default_key` (when not empty) under kDefaultApiKeyName; an error when a file
// key has that name or the same key.
Expected<std::vector<ApiKey>> WithDefaultKey(std::vector<ApiKey> keys,
                                             const std::string& default_key);

// The keys in use, replaced whole (SIGHUP); safe to use from any thread.
class ApiKeyring {
 public:
  void Replace(std::vector<ApiKey> keys);
  bool empty() const;
  size_t size() const;
  // The name of the key equal to `token`, or nullopt. Compares with every key.
  std::optional<std::string> Identify(std::string_view token) const;

 private:
  std::shared_ptr<const std::vector<ApiKey>> Current() const;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<ApiKey>> keys_ = std::make_shared<std::vector<ApiKey>>();
};

}  // namespace tessera::server
