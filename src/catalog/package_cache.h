// Convert on first use: a user's own checkpoint given by path is converted once into a
// runtime package (catalog/package.h) in the format it will run in, cached beside it, or in
// the models directory when its folder is read-only (by its permissions or by
// TESSERA_READ_ONLY_DIRS), and reused while the source is unchanged.
//
//   TS_ASSIGN_OR_RETURN(auto source, OpenCheckpoint("/data/my-finetune"));
//   TS_ASSIGN_OR_RETURN(CachedPackage pkg, PackageOnFirstUse(*source, WeightFormat::kInt8));
//   OpenCheckpoint(pkg.dir);  // "/data/my-finetune.tessera-int8", already packed
//
// TESSERA_PACKAGE_CACHE=off turns it off (the source is then packed at every load).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "base/progress.h"
#include "base/status.h"
#include "model/checkpoint.h"

namespace tessera {

// TESSERA_PACKAGE_CACHE (base/environment.h): on unless it says off; another value is an error.
Expected<bool> PackageCacheEnabled();

// True for a folder inside tessera's models directory or the Hugging Face cache: those are
// used in place (convert them explicitly with `tessera convert` to get a package).
bool IsInManagedStore(const std::string& dir);

// True for a folder listed in TESSERA_READ_ONLY_DIRS (separated by ':') or below one: read-only
// by policy, even where the filesystem would let tessera write (shared data, a colleague's
// checkpoints). Nothing is written beside such a folder.
bool IsReadOnlyByPolicy(const std::string& dir);

// Where the package of `source_dir` in `format` lives: "<source_dir>.tessera-<format>" when the
// parent folder is writable and the source is not read-only by policy, else
// "<models dir>/.packages/<name>-<hash of the path>-<format>".
Expected<std::string> PackageCachePath(const std::string& source_dir, WeightFormat format);

struct CachedPackage {
  std::string dir;
  bool converted_now = false;  // false: an up-to-date package was reused
  std::string reason;          // why it was (re)converted: "first use", "source changed", ...
};

// What a first-use conversion tells its caller: `log` gets whole lines (the announcement
// before converting, naming the source's size and where the package goes, and what was
// chosen); `progress` the conversion's phases (PackageOptions::progress). Either may be empty.
struct FirstUseReport {
  std::function<void(const std::string&)> log{};
  ProgressCallback progress{};
};

// The package for `source` run as `requested` (kAuto: the source's own precision); converts
// when there is none, or when the one found is damaged, stale or of another format.
Expected<CachedPackage> PackageOnFirstUse(const Checkpoint& source, WeightFormat requested,
                                          const FirstUseReport& report = {});

// The checkpoint a run should load: for a source given by path (an existing directory that
// is not a package and not in a managed store), running only on the cpu backend, with the
// cache enabled: its package from PackageOnFirstUse; otherwise `ckpt` itself. `report.log`
// gets the announcement of a conversion and one line saying what was chosen (nothing when
// nothing changed). A package that cannot be written is reported there and the source is used
// (packed at load as before).
Expected<std::shared_ptr<const Checkpoint>> CheckpointForRun(const std::string& model_path,
                                                             std::shared_ptr<const Checkpoint> ckpt,
                                                             bool cpu_only, WeightFormat weights,
                                                             const FirstUseReport& report);

}  // namespace tessera
