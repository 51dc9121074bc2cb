// Runtime packages: a checkpoint converted once into one 64-byte-aligned tensor file holding
// the CPU backend's packed panels (F32, BF16, INT8 or INT4, quantized exactly as loading the
// source would) and the source's other tensors byte for byte (a tied embedding only once, as
// the packed LM head), plus the small files it needs, described by a versioned manifest that
// records the source (revision and per-file hashes) and every package file's size and sha256.
// The tensor file is the cpu backend's to lay out and write (backend/cpu/cpu_package_writer.h);
// this file keeps the manifest, hashing, verification and the staging directory that is
// swapped in atomically. Opening a package verifies every byte before anything maps it.
//
//   PackageOptions opts; opts.weights = WeightFormat::kInt8;
//   TS_RETURN_IF_ERROR(ConvertToPackage("/models/src", "/models/src.pkg", opts));
//   TS_ASSIGN_OR_RETURN(PackageInfo info, VerifyPackage("/models/src.pkg"));
//   OpenCheckpoint("/models/src.pkg");   // a checkpoint dir whose tensors are already packed
//   (the CPU backend maps the panels in place: nothing is converted or copied at load)
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

#include "backend/backend.h"
#include "base/progress.h"
#include "base/status.h"

namespace tessera {

// 3: a model with tied embeddings stores its embedding once, as the packed LM head (2 kept the
// plain embedding beside it as well); 2: matrices stored as the CPU backend's packed panels (1
// held plain tensors).
inline constexpr int kPackageFormatVersion = 3;
inline constexpr char kPackageManifestName[] = "tessera-package.json";
inline constexpr char kPackageManifestHashName[] = "tessera-package.sha256";
inline constexpr uint64_t kPackageTensorAlignment = 64;  // the cpu writer's (package.cc checks)

struct PackageOptions {
  // The weight format of the panels: kF32, kBF16, kInt8 or kInt4; kAuto takes the source's
  // (BF16 for BF16/F16 checkpoints, F32 for F32 ones).
  WeightFormat weights = WeightFormat::kBF16;
  // Phases "hashing the source" and "packing tensors", in bytes; the caller shows them.
  ProgressCallback progress{};
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

// The hub repository the manifest records as the package's source ("" when none, or when the
// manifest cannot be read). Not a verification: VerifyPackage is.
std::string PackageSourceRepo(const std::string& dir);

// Checks format version, the manifest's own hash, then every file's size and sha256 (cache
// entries are trusted only for files unchanged since well before they were verified).
// Errors say to re-convert.
Expected<PackageInfo> VerifyPackage(const std::string& dir);

// True when `source_dir` still holds exactly the files `package_dir` was converted from:
// the same names and sizes, and the same sha256 for any file whose mtime moved.
Expected<bool> PackageMatchesSource(const std::string& package_dir, const std::string& source_dir);

}  // namespace tessera
