#include "fuzz_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tessera::fuzz {

std::vector<std::string_view> Split(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = rest.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(rest);
  return parts;
}

namespace {

std::string MakeScratchDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tessera-fuzz-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    perror("mkdtemp");
    abort();
  }
  return pattern;
}

}  // namespace

const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string d = MakeScratchDir();
    // Only the process that made it removes it (libFuzzer forks no children here).
    static const pid_t owner = getpid();
    static std::string to_remove;
    to_remove = d;
    atexit([] {
      if (getpid() != owner) return;
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return d;
  }();
  return dir;
}

void Note(const char* what, const std::string& outcome) {
  static const bool verbose = getenv("TESSERA_FUZZ_VERBOSE") != nullptr;
  if (verbose) fprintf(stderr, "  %s: %s\n", what, outcome.c_str());
}

void WriteFileOrDie(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    abort();
  }
}

}  // namespace tessera::fuzz
