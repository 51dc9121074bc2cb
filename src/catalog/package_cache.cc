#include "catalog/package_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "backend/backend.h"
#include "base/environment.h"
#include "base/sha256.h"
#include "catalog/model_store.h"
#include "catalog/package.h"

namespace tessera {
namespace fs = std::filesystem;

Expected<bool> PackageCacheEnabled() {
  return ReadEnvSwitch(EnvVar::kPackageCache, true);
}

namespace {

// Writable by its permission bits as well as by access(2): root passes access() on any folder
// of a writable filesystem, but a folder marked read-only is one the user meant to keep as is.
bool FolderIsWritable(const fs::path& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  if (access(dir.c_str(), W_OK) != 0) return false;
  const mode_t bit = st.st_uid == geteuid() ? S_IWUSR : st.st_gid == getegid() ? S_IWGRP : S_IWOTH;
  return (st.st_mode & bit) != 0;
}

}  // namespace

fs::path CanonicalDir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  while (!p.empty() && !p.has_filename()) p = p.parent_path();  // "dir/"
  return ec ? fs::path() : p;
}

namespace {

// `source` (canonical) lies strictly below the folder `root`.
bool IsBelow(const fs::path& source, const std::string& root) {
  const fs::path r = CanonicalDir(root);
  if (r.empty() || source.empty()) return false;
  const fs::path rel = source.lexically_relative(r);
  return !rel.empty() && *rel.begin() != ".." && *rel.begin() != ".";
}

}  // namespace

bool IsInManagedStore(const std::string& dir) {
  const fs::path source = CanonicalDir(dir);
  auto inside = [&](const Expected<std::string>& root) { return root && IsBelow(source, *root); };
  return inside(ModelsDir()) || inside(HubCacheDir());
}

bool IsReadOnlyByPolicy(const std::string& dir) {
  const std::optional<std::string> env = ReadEnv(EnvVar::kReadOnlyDirs);
  if (!env) return false;
  const fs::path source = CanonicalDir(dir);
  const std::string& list = *env;
  size_t start = 0;
  while (start <= list.size()) {
    size_t colon = list.find(':', start);
    if (colon == std::string::npos) colon = list.size();
    const std::string root = list.substr(start, colon - start);
    if (!root.empty() && (IsBelow(source, root) || source == CanonicalDir(root))) return true;
    start = colon + 1;
  }
  return false;
}

Expected<std::string> PackageCachePath(const std::string& source_dir, WeightFormat format) {
  const fs::path source = CanonicalDir(source_dir);
  if (source.empty()) return IoError("cannot resolve the path " + source_dir);
  const std::string suffix = "tessera-" + std::string(WeightFormatName(format));
  const fs::path parent = source.parent_path();
  if (FolderIsWritable(parent) && !IsReadOnlyByPolicy(source.string())) {
    return (parent / (source.filename().string() + "." + suffix)).string();
  }
  TS_ASSIGN_OR_RETURN(std::string models, ModelsDir());
  // The path's hash keeps two read-only sources with the same folder name apart.
  const std::string tag = Sha256Hex(source.string()).substr(0, 12);
  return (fs::path(models) / ".packages" / (source.filename().string() + "-" + tag + "-" + suffix))
      .string();
}

namespace {

// The bytes of the files directly in `dir` (a checkpoint's weights, config and tokenizer).
uint64_t FolderBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec)) {
      if (const uint64_t n = entry.file_size(ec); !ec) total += n;
    }
  }
  return total;
}

}  // namespace

Expected<CachedPackage> PackageOnFirstUse(const Checkpoint& source, WeightFormat requested,
                                          const FirstUseReport& report) {
  if (source.tensors.packed) return InvalidArgument(source.dir + " is already a package");
  TS_ASSIGN_OR_RETURN(WeightFormat format, ResolveWeightFormat(source, requested));
  TS_ASSIGN_OR_RETURN(std::string path, PackageCachePath(source.dir, format));
  CachedPackage result{path, true, "first use"};
  if (IsPackageDir(path)) {
    auto verified = VerifyPackage(path);
    auto current = verified ? PackageMatchesSource(path, source.dir) : Expected<bool>(false);
    if (!verified) {
      // An older (or newer) package format is refused as Unsupported, damage as Corrupt.
      result.reason = (verified.status().code() == ErrorCode::kUnsupported
                           ? "the cached package is in another package format ("
                           : "the cached package was damaged (") +
                      verified.status().message() + ")";
    } else if (verified->dtype != WeightFormatName(format)) {
      result.reason = "the cached package holds " + verified->dtype;
    } else if (!current) {
      return current.status();
    } else if (!*current) {
      result.reason = "the source changed";
    } else {
      result.converted_now = false;
      result.reason.clear();
      return result;
    }
  }
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  PackageOptions options;
  options.weights = format;
  options.progress = report.progress;
  if (report.log) {
    // Said before the wait, with the size: the package is about as large as the source again.
    report.log("packaging " + CanonicalDir(source.dir).string() + " (" +
               FormatBytes(static_cast<double>(FolderBytes(source.dir))) +
               ") for the cpu backend as " + std::string(WeightFormatName(format)) + " (" +
               result.reason + "); once, cached at " + path);
  }
  TS_RETURN_IF_ERROR(ConvertToPackage(source.dir, path, options));
  return result;
}

Expected<std::shared_ptr<const Checkpoint>> CheckpointForRun(const std::string& model_path,
                                                             std::shared_ptr<const Checkpoint> ckpt,
                                                             bool cpu_only, WeightFormat weights,
                                                             const FirstUseReport& report) {
  auto note = [&](const std::string& line) {
    if (report.log) report.log(line);
  };
  TS_ASSIGN_OR_RETURN(const bool enabled, PackageCacheEnabled());
  std::error_code ec;
  if (ckpt->tensors.packed || !cpu_only || !enabled || !fs::is_directory(model_path, ec) ||
      IsInManagedStore(model_path)) {
    return ckpt;
  }
  auto cached = PackageOnFirstUse(*ckpt, weights, report);
  if (!cached) {
    // Visible, not hidden: the run goes on from the source.
    note("could not cache a package of " + model_path + " (" + cached.status().message() +
         "); packing at load");
    return ckpt;
  }
  note(cached->converted_now ? "converted " + model_path + " into the package " + cached->dir +
                                   " (" + cached->reason + ")"
                             : "using the package " + cached->dir);
  return OpenCheckpoint(cached->dir);
}

}  // namespace tessera
