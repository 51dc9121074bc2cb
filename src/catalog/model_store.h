// Where models live and how a name finds one. tessera's own store is $TESSERA_MODELS
// (default ~/.local/share/tessera/models): one directory per model, named by catalog id or
// "Org--Name", with tessera-lock.json beside the files. A model already in the Hugging Face
// cache (models--Org--Name/snapshots/COMMIT, files symlinked into blobs/) is used in place.
//
//   TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
//   TS_ASSIGN_OR_RETURN(ResolvedModel m, ResolveModel("qwen3-0.6b", *catalog));
//   LoadCheckpoint(m.dir);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "catalog/catalog.h"
#include "catalog/model_names.h"

namespace tessera {

inline constexpr char kLockFileName[] = "tessera-lock.json";
inline constexpr int kLockFormatVersion = 1;

// $TESSERA_MODELS, else $HOME/.local/share/tessera/models (not created here).
Expected<std::string> ModelsDir();
// $HF_HUB_CACHE, else $HF_HOME/hub, else $HOME/.cache/huggingface/hub (as huggingface_hub).
Expected<std::string> HubCacheDir();

struct LockedFile {
  std::string path;  // relative to the model directory
  uint64_t size = 0;
  std::string sha256;
};

// tessera-lock.json: what was pulled, from where, and what every file must hash to.
struct LockFile {
  std::string repo;
  std::string revision;  // as requested
  std::string commit;    // as the hub resolved it
  std::vector<LockedFile> files;
};

Expected<LockFile> ReadLockFile(const std::string& model_dir);
// Written to a temporary file and renamed, so a reader never sees half of one.
Status WriteLockFile(const std::string& model_dir, const LockFile& lock);
// Every locked file present with its recorded size; with `rehash`, also its sha256.
// The error names the first file that differs.
Status CheckAgainstLock(const std::string& model_dir, const LockFile& lock, bool rehash);

// The snapshot directory of `repo` at `revision` (a commit, or a ref under refs/) in the hub
// cache, or NotFound.
Expected<std::string> FindHubCacheSnapshot(const std::string& hub_cache, std::string_view repo,
                                           std::string_view revision);

// kBuiltin: the demo model carried in the binary (catalog/builtin_model.h).
enum class ModelLocation { kStore, kHubCache, kPath, kBuiltin };
const char* ModelLocationName(ModelLocation location);

struct ResolvedModel {
  std::string name;  // the store name, or the path as given
  std::string dir;   // the checkpoint directory to load
  ModelLocation location = ModelLocation::kPath;
};

// A path (see LooksLikePath) is used as is; kBuiltinModelName is the built-in demo model
// (written out on first use); any other name is looked up in the store, then the hub cache.
// NotFound says to run `tessera pull`.
Expected<ResolvedModel> ResolveModel(std::string_view name_or_path, const Catalog& catalog);

// The catalog entry of a checkpoint directory: by the repository its tessera-lock.json or
// package manifest records, or by its place in the Hugging Face cache
// (models--Org--Name/snapshots/COMMIT); nullptr for any other folder or an unknown repository.
const CatalogEntry* CatalogEntryOfModelDir(const Catalog& catalog, const std::string& dir);

struct InstalledModel {
  std::string name;
  std::string purpose;  // from the catalog, else the checkpoint's kind, "-" when unknown
  std::string dtype;    // config.json torch_dtype, "-" when absent
  uint64_t size_bytes = 0;
  std::string verification;  // "verified", "unverified" (no lock) or "changed: <why>"
  ModelLocation location = ModelLocation::kStore;
  std::string dir;
  std::string commit;  // from the lock or the snapshot name; may be empty
};

// Everything in the store and the hub cache. `rehash` re-checks sha256 of locked files.
Expected<std::vector<InstalledModel>> ListInstalledModels(const Catalog& catalog, bool rehash);

// Removes a model from tessera's store (never from the hub cache). Returns its directory.
Expected<std::string> RemoveStoredModel(std::string_view name, const Catalog& catalog);

// Puts `staging` at `dest` in one step: an atomic exchange when `dest` exists (the old copy
// is then deleted), a plain rename otherwise. Both must be on one filesystem.
Status SwapDirectoryIntoPlace(const std::string& staging, const std::string& dest);

}  // namespace tessera
