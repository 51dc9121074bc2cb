#include "server/api_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "engine/cache_scope.h"
#include "server/guards.h"

namespace tessera::server {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxCacheTenantBytes) return false;  // it scopes the cache
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status LineError(size_t line, const std::string& what) {
  return InvalidArgument("line " + std::to_string(line) + ": " + what);
}

}  // namespace

bool ValidApiKey(std::string_view key) {
  if (key.size() < kMinApiKeyBytes || key.size() > kMaxApiKeyBytes) return false;
  for (unsigned char c : key)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

Expected<std::vector<ApiKey>> ParseApiKeys(std::string_view text) {
  std::vector<ApiKey> keys;
  std::map<std::string, size_t> name_line;
  std::map<std::string, size_t> key_index;  // each key's place in `keys` (a set: linear time)
  std::vector<size_t> key_line;             // parallel to keys
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t end = text.find('\n');
    std::string_view line = Trim(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return LineError(line_no, "expected name:key (a name, a colon, then the key)");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view key = line.substr(colon + 1);
    if (!ValidName(name)) {
      return LineError(line_no,
                       "the name before ':' must be 1-64 letters, digits, '_', '.' or '-'");
    }
    if (!ValidApiKey(key)) {
      return LineError(line_no, "the key of '" + std::string(name) + "' must be " +
                                    std::to_string(kMinApiKeyBytes) + "-" +
                                    std::to_string(kMaxApiKeyBytes) +
                                    " printable ASCII characters without spaces (e.g. `openssl "
                                    "rand -hex 24`)");
    }
    if (auto seen = name_line.find(std::string(name)); seen != name_line.end()) {
      return LineError(line_no, "the name '" + std::string(name) + "' is also on line " +
                                    std::to_string(seen->second) + "; names must be unique");
    }
    if (auto seen = key_index.find(std::string(key)); seen != key_index.end()) {
      const size_t i = seen->second;
      return LineError(line_no, "the key of '" + std::string(name) + "' is the key of '" +
                                    keys[i].name + "' (line " + std::to_string(key_line[i]) +
                                    "); every name needs its own key");
    }
    name_line.emplace(std::string(name), line_no);
    key_index.emplace(std::string(key), keys.size());
    key_line.push_back(line_no);
    keys.push_back({std::string(name), std::string(key)});
  }
  if (keys.empty()) return InvalidArgument("holds no keys; add a line name:key");
  return keys;
}

Expected<std::string> ReadOwnerOnlyFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::string("cannot open it: ") + std::strerror(err);
    return err == ENOENT ? NotFound(why) : InvalidArgument(why);
  }
  struct stat st {};
  std::string text;
  Status problem = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    problem = InvalidArgument(std::string("cannot stat it: ") + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    problem = InvalidArgument("not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    problem = PermissionDenied(std::string("group or others have access to it (mode ") + mode +
                               "); run chmod 600 " + path);
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    problem = InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes");
  } else {
    char buf[4096];
    while (text.size() <= max_bytes) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = InvalidArgument(std::string("cannot read it: ") + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    if (problem.ok() && text.size() > max_bytes) {
      problem = InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  if (!problem.ok()) return problem;
  return text;
}

Expected<std::vector<ApiKey>> LoadApiKeysFile(const std::string& path) {
  auto text = ReadOwnerOnlyFile(path, kMaxApiKeysFileBytes);
  if (!text) {
    return Status(text.status().code() == ErrorCode::kNotFound ? ErrorCode::kInvalidArgument
                                                               : text.status().code(),
                  "--api-keys " + path + ": " + text.status().message());
  }
  auto keys = ParseApiKeys(*text);
  if (!keys) return keys.status().WithContext("--api-keys " + path);
  return keys;
}

Expected<std::vector<ApiKey>> WithDefaultKey(std::vector<ApiKey> keys,
                                             const std::string& default_key) {
  if (default_key.empty()) return keys;
  for (const ApiKey& k : keys) {
    if (k.name == kDefaultApiKeyName) {
      return InvalidArgument("the name '" + std::string(kDefaultApiKeyName) +
                             "' is TESSERA_API_KEY's; give that line another name");
    }
    if (k.key == default_key) {
      return InvalidArgument("the key of '" + k.name +
                             "' is TESSERA_API_KEY; every name needs its own key");
    }
  }
  keys.push_back({std::string(kDefaultApiKeyName), default_key});
  return keys;
}

void ApiKeyring::Replace(std::vector<ApiKey> keys) {
  auto next = std::make_shared<const std::vector<ApiKey>>(std::move(keys));
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(next);
}

std::shared_ptr<const std::vector<ApiKey>> ApiKeyring::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

bool ApiKeyring::empty() const {
  return Current()->empty();
}

size_t ApiKeyring::size() const {
  return Current()->size();
}

std::optional<std::string> ApiKeyring::Identify(std::string_view token) const {
  const std::shared_ptr<const std::vector<ApiKey>> keys = Current();
  // Every key is compared (no early exit) and the match is selected by a mask, not a branch:
  // the time depends on the token's length and the keys, not on which one matched.
  size_t found = keys->size();
  for (size_t i = 0; i < keys->size(); ++i) {
    const size_t equal = ConstantTimeEquals(token, (*keys)[i].key) ? 1 : 0;
    const size_t mask = static_cast<size_t>(0) - equal;
    found = (found & ~mask) | (i & mask);
  }
  if (found == keys->size()) return std::nullopt;
  return (*keys)[found].name;
}

}  // namespace tessera::server
