// Runtime packages: a checkpoint converted once into one 64-byte-aligned tensor file in the
// dtype it will run in, plus the small files it needs, described by a versioned manifest that
// records the source (revision and per-file hashes) and every package file's size and sha256.
// Packages are written to a staging directory and swapped in atomically; opening one
// verifies every byte before anything maps it.
//
//   PackageOptions opts; opts.dtype = PackageDType::kBF16;
//   TS_RETURN_IF_ERROR(ConvertToPackage("/models/src", "/models/src.pkg", opts));
//   TS_ASSIGN_OR_RETURN(PackageInfo info, VerifyPackage("/models/src.pkg"));
//   OpenCheckpoint("/models/src.pkg");   // model.safetensors + config.json: a checkpoint dir
//
// Layout: tessera-package.json (the manifest), tessera-package.sha256 (sha256 of the manifest
// bytes, so a flipped byte in the manifest is caught too), model.safetensors (every tensor's
// data at a 64-byte aligned offset), config.json, generation_config.json and the tokenizer
// files as found in the source. .tessera-verified.json caches verification results keyed by
// (size, mtime, inode) so warm starts skip re-hashing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

inline constexpr int kPackageFormatVersion = 1;
inline constexpr char kPackageManifestName[] = "tessera-package.json";
inline constexpr char kPackageManifestHashName[] = "tessera-package.sha256";
inline constexpr uint64_t kPackageTensorAlignment = 64;

// Packed INT8/INT4 panels are not offered: the CPU backend packs at load from a checkpoint
// and has no way (yet) to take pre-packed panels, so such a package could not be used.
enum class PackageDType { kF32, kBF16 };

struct PackageOptions {
  PackageDType dtype = PackageDType::kBF16;
};

// Converts the checkpoint directory `source` into a package at `dest` (replaced atomically
// when it is already a package; any other existing `dest` is refused).
Status ConvertToPackage(const std::string& source, const std::string& dest,
                        const PackageOptions& options);

struct PackageInfo {
  std::string architecture;
  std::string dtype;
  std::string source_repo;  // from the source's tessera-lock.json, when it had one
  std::string source_commit;
  int files_hashed = 0;  // files re-hashed (not answered from the verification cache)
  int files_cached = 0;
};

// True when `dir` holds a package manifest.
bool IsPackageDir(const std::string& dir);

// Checks format version, the manifest's own hash, then every file's size and sha256 (cache
// entries are trusted only for files unchanged since well before they were verified).
// Errors say to re-convert.
Expected<PackageInfo> VerifyPackage(const std::string& dir);

}  // namespace tessera
