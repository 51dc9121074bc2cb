// Bounded, junk-tolerant reading of small sysfs / procfs files and directories, for doctor and
// the device layer: a read never blocks on a FIFO, never opens a device node, never takes more
// than its cap, and a wrong kind of file (a directory, a dangling link) is an error that says so.
//
//   auto vendor = sysfs::ReadSmallFile(pci_dir / "vendor");     // "0x1022\n" or a Status
//   std::optional<uint32_t> id = sysfs::ParseHexId(*vendor, 0xffff);
//   for (const std::string& name : sysfs::ListDir(root / "sys/class/accel")) { ... }
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera::sysfs {

namespace fs = std::filesystem;

inline constexpr size_t kAttrCap = 4096;      // a sysfs attribute is at most a page
inline constexpr size_t kDirEntryCap = 1024;  // entries read from any one directory

inline std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// File contents shown to a person: non-printable bytes escaped, long contents cut.
inline std::string Shown(std::string_view s, size_t cap = 48) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < cap; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\x%02x", c);
      out += esc;
    }
  }
  if (s.size() > cap) out += "...";
  return "'" + out + "'";
}

inline std::string Hex(uint32_t v, int width) {
  char text[16];
  std::snprintf(text, sizeof(text), "%0*x", width, v);
  return text;
}

// Reads a small regular file (sysfs attribute, /proc file) whole, refusing anything else:
// directories, devices and FIFOs are named as such, never opened.
inline Expected<std::string> ReadSmallFile(const fs::path& path, size_t cap = kAttrCap) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      struct stat lst {};
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
        return NotFound(path.string() + " is a dangling symlink");
      }
      return NotFound(path.string() + " does not exist");
    }
    return IoError(path.string() + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Corrupt(path.string() + " is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) return Corrupt(path.string() + " is not a regular file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return IoError(path.string() + ": " + std::strerror(errno));
  std::string data(cap + 1, '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return IoError(path.string() + ": " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > cap) {
    return Corrupt(path.string() + " is larger than " + std::to_string(cap) + " bytes");
  }
  data.resize(got);
  return data;
}

// The names in a directory, sorted, at most kDirEntryCap of them; empty when unreadable.
inline std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end && names.size() < kDirEntryCap; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Hex digits with an optional 0x prefix, at most 16 of them (a capability mask); surrounding
// whitespace is ignored.
inline std::optional<uint64_t> ParseHex(std::string_view text) {
  std::string s = Trim(text);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s = s.substr(2);
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!std::isxdigit(u)) return std::nullopt;
    v = v * 16 + static_cast<uint64_t>(std::isdigit(u) ? u - '0' : std::tolower(u) - 'a' + 10);
  }
  return v;
}

// "0x1022" (sysfs) or "1022" -> 0x1022, when it fits `max`.
inline std::optional<uint32_t> ParseHexId(std::string_view text, uint32_t max) {
  std::optional<uint64_t> v = ParseHex(text);
  if (!v || *v > max) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

inline std::optional<int64_t> ParseDecimal(std::string_view text, int64_t max) {
  std::string s = Trim(text);
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

inline bool IsDottedNumbers(std::string_view s, int parts) {
  int seen = 0;
  size_t digits = 0;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (++digits > 9) return false;
    } else if (c == '.' && digits > 0) {
      ++seen;
      digits = 0;
    } else {
      return false;
    }
  }
  return digits > 0 && seen + 1 == parts;
}

inline bool IsPrintableText(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

}  // namespace tessera::sysfs
