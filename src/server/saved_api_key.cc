#include "server/saved_api_key.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "server/api_keys.h"

namespace tessera::server {
namespace {

constexpr size_t kKeyRandomBytes = 16;  // 128 bits

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Every missing directory of `dir`'s path, created 0700 (like `mkdir -p -m 700`, which leaves
// existing ones as they are).
Status MakePrivateDirs(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return InvalidArgument(Errno("cannot create the directory " + prefix));
    }
    if (slash == std::string::npos) return Status::Ok();
  }
}

Expected<std::string> NewKey() {
  unsigned char bytes[kKeyRandomBytes];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(Errno("no random bytes for a key (getrandom)"));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string key = "tsk-";
  for (unsigned char b : bytes) {
    key.push_back(kHex[b >> 4]);
    key.push_back(kHex[b & 15]);
  }
  return key;
}

Status WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidArgument(Errno("cannot write it"));
    text.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Writes `key` to a new 0600 file beside `path` and links it to `path`, which must not exist.
// Returns false (and writes nothing) when another process saved its key there first.
Expected<bool> SaveNewKey(const std::string& path, const std::string& key) {
  std::string temp = path + ".tmp-XXXXXX";
  // mkostemp creates with O_EXCL and mode 0600 whatever the umask: nobody else can read it.
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return InvalidArgument(Errno("cannot create a file beside " + path));
  Status written = WriteAll(fd, key + "\n");
  if (written.ok() && ::fsync(fd) != 0) written = InvalidArgument(Errno("cannot sync it"));
  ::close(fd);
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return Status(written.code(), temp + ": " + written.message());
  }
  // link, not rename: it never replaces a key another server saved meanwhile.
  const int linked = ::link(temp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked == 0) return true;
  if (link_errno == EEXIST) return false;
  errno = link_errno;
  return InvalidArgument(Errno("cannot save the key as " + path));
}

// A new key saved at `path` (missing directories made 0700); created false (and no key) when
// another process saved its key there first.
Expected<SavedApiKey> CreateKeyFile(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    TS_RETURN_IF_ERROR(MakePrivateDirs(path.substr(0, slash)));
  }
  TS_ASSIGN_OR_RETURN(std::string key, NewKey());
  TS_ASSIGN_OR_RETURN(bool saved, SaveNewKey(path, key));
  if (!saved) return SavedApiKey{};
  return SavedApiKey{std::move(key), true};
}

// The key in the file's text: one line, blanks around it ignored.
Expected<std::string> KeyOfText(const std::string& path, std::string_view text) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(kBlanks);
  const size_t end = text.find_last_not_of(kBlanks);
  const std::string_view key =
      begin == std::string_view::npos ? std::string_view() : text.substr(begin, end - begin + 1);
  if (!ValidApiKey(key)) {
    return InvalidArgument(path + ": holds no API key (one line of " +
                           std::to_string(kMinApiKeyBytes) + "-" + std::to_string(kMaxApiKeyBytes) +
                           " printable ASCII characters without spaces); delete the file and "
                           "serve again to generate a new key, or write a key into it");
  }
  return std::string(key);
}

}  // namespace

Expected<std::string> SavedApiKeyPath(const std::optional<std::string>& xdg_config_home,
                                      const std::optional<std::string>& home) {
  if (xdg_config_home && xdg_config_home->starts_with('/')) {
    return *xdg_config_home + "/tessera/api-key";
  }
  if (home && home->starts_with('/')) return *home + "/.config/tessera/api-key";
  return InvalidArgument(
      "no place to save the generated API key: neither XDG_CONFIG_HOME nor HOME is an absolute "
      "path; set one of them, or give a key with TESSERA_API_KEY or --api-keys FILE");
}

Expected<SavedApiKey> LoadOrCreateSavedApiKey(const std::string& path) {
  constexpr size_t kMaxFileBytes = 4096;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto text = ReadOwnerOnlyFile(path, kMaxFileBytes);
    if (text) {
      TS_ASSIGN_OR_RETURN(std::string key, KeyOfText(path, *text));
      return SavedApiKey{std::move(key), false};
    }
    if (text.status().code() != ErrorCode::kNotFound) {
      return Status(text.status().code(),
                    "the saved API key " + path + ": " + text.status().message());
    }
    auto saved = CreateKeyFile(path);
    if (!saved) {
      return Status(saved.status().code(),
                    "cannot save a new API key: " + saved.status().message() +
                        "; give a key with TESSERA_API_KEY or --api-keys FILE, or point "
                        "XDG_CONFIG_HOME at a folder you can write");
    }
    if (saved->created) return std::move(*saved);
    // Another server saved its key first: read that one (the next turn of the loop).
  }
  return Internal("the saved API key " + path + " appeared and vanished while being read");
}

}  // namespace tessera::server
