// Fuzzes the runtime-package manifest as opening a package reads it: VerifyPackage on a
// directory holding the fuzzed tessera-package.json (with its correct sha256 file, so the
// fuzzer gets past the hash check), an optional fuzzed .tessera-verified.json and one real
// file (config.json, "{}\n"), then PackageMatchesSource against a source directory with the
// same config.json.
// Input: manifest [ "\n\0\n" verification cache ].
#include <cstdint>
#include <filesystem>
#include <string>

#include "base/sha256.h"
#include "catalog/package.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const auto parts = tessera::fuzz::Split(data, size, 2);
  static const std::string pkg = tessera::fuzz::ScratchDir() + "/package";
  static const std::string src = tessera::fuzz::ScratchDir() + "/source";
  static const bool made = [] {
    fs::create_directories(pkg);
    fs::create_directories(src);
    tessera::fuzz::WriteFileOrDie(pkg + "/config.json", "{}\n");
    tessera::fuzz::WriteFileOrDie(src + "/config.json", "{}\n");
    return true;
  }();
  (void)made;
  tessera::fuzz::WriteFileOrDie(pkg + "/" + tessera::kPackageManifestName, parts[0]);
  tessera::fuzz::WriteFileOrDie(pkg + "/" + tessera::kPackageManifestHashName,
                                tessera::Sha256Hex(parts[0]) + "\n");
  const std::string cache = pkg + "/.tessera-verified.json";
  if (parts.size() == 2) {
    tessera::fuzz::WriteFileOrDie(cache, parts[1]);
  } else {
    fs::remove(cache);
  }
  (void)tessera::IsPackageDir(pkg);
  tessera::fuzz::Note("VerifyPackage", tessera::VerifyPackage(pkg).status().ToString());
  (void)tessera::PackageMatchesSource(pkg, src);
  return 0;
}
