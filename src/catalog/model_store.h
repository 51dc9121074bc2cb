// Where models live and how a name finds one. tessera's own store is $TESSERA_MODELS
// (default ~/.local/share/tessera/models): one directory per model, named by catalog id or
// "Org--Name", with tessera-lock.json beside the files. A model already in the Hugging Face
// cache (models--Org--Name/snapshots/COMMIT, files symlinked into blobs/) is used in place,
// and so are GGUF models in Ollama's store and LM Studio's folder (catalog/gguf_model.h).
//
//   TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
//   TS_ASSIGN_OR_RETURN(ResolvedModel m, ResolveModel("qwen3-0.6b", *catalog));
//   if (m.gguf) LoadGguf(*m.gguf); else LoadCheckpoint(m.dir);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "catalog/catalog.h"
#include "catalog/gguf_model.h"
#include "catalog/model_location.h"
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

struct ResolvedModel {
  std::string name;  // the store name, or the path as given
  std::string dir;   // the checkpoint directory to load; "" for a GGUF model
  ModelLocation location = ModelLocation::kPath;
  // Set for a GGUF model (Ollama's store, LM Studio's folder, a GGUF file or a folder of GGUF
  // files given by path): what the GGUF loader takes (catalog/gguf_model.h).
  std::optional<GgufModel> gguf{};

  // The checkpoint directory or the GGUF file.
  const std::string& Where() const { return gguf ? gguf->path : dir; }
};

// Resolution, in this order (docs/model-store.md, "Models you already have"):
//  1. A path (see LooksLikePath): a checkpoint or package folder is used as is; a GGUF file, or
//     a folder holding no config.json and exactly one *.gguf, is that GGUF file (several:
//     refused, naming them).
//  2. kBuiltinModelName: the built-in demo model (written out on first use).
//  3. Any other name is looked up in every store whose names it can be: tessera's store, then
//     the Hugging Face cache (NAME, ORG/REPO, @REV); Ollama's store (NAME[:TAG],
//     NS/NAME[:TAG], HOST/NS/NAME[:TAG]); LM Studio's folder (PUBLISHER/REPO,
//     PUBLISHER/REPO/FILE.gguf). Found in one: that model. Found in several (a stored copy
//     shadowing the same repository in the Hugging Face cache counts once): InvalidArgument
//     naming each candidate and how to name it alone. Found nowhere: NotFound naming the
//     places looked in (and `tessera pull` for a tessera name).
Expected<ResolvedModel> ResolveModel(std::string_view name_or_path, const Catalog& catalog);

// The catalog entry of a checkpoint directory: by the repository its tessera-lock.json or
// package manifest records, or by its place in the Hugging Face cache
// (models--Org--Name/snapshots/COMMIT); nullptr for any other folder or an unknown repository.
const CatalogEntry* CatalogEntryOfModelDir(const Catalog& catalog, const std::string& dir);

struct InstalledModel {
  std::string name;     // what resolve/generate/rm accept for it: a name, name@commit or the path
  std::string purpose;  // from the catalog, else the checkpoint's kind, "-" when unknown
  std::string dtype;    // config.json torch_dtype, a GGUF model's quantization, "-" when unknown
  uint64_t size_bytes = 0;
  // "verified", "unverified" (no lock, or a GGUF file no store records a hash of), "changed:
  // <why>", or for an Ollama model tessera cannot run "refused: <why>".
  std::string verification;
  ModelLocation location = ModelLocation::kStore;
  std::string dir;     // the checkpoint folder; "" for a GGUF model
  std::string file;    // the GGUF file; "" for a checkpoint
  std::string commit;  // from the lock or the snapshot name; may be empty

  const std::string& Where() const { return file.empty() ? dir : file; }
};

// Everything in the store, the hub cache, <models dir>/.packages, Ollama's store and LM
// Studio's folder, each with its disk use (regular files below its folder, symlinks followed;
// an Ollama model: its manifest's layers, as `ollama list` counts them). `rehash` re-checks
// the sha256 of locked files and of Ollama's model blobs. Every NAME resolves back to its
// entry (ResolveModel); one that would not (an ambiguous name) is replaced by the path.
Expected<std::vector<InstalledModel>> ListInstalledModels(const Catalog& catalog, bool rehash);
// The GGUF files directly in `dir`, as `tessera list --folder DIR` shows them (location
// kFolder, named by path).
std::vector<InstalledModel> ListGgufFolderModels(const std::string& dir);

// Removes a model from tessera's store (never from the hub cache). Returns its directory.
Expected<std::string> RemoveStoredModel(std::string_view name, const Catalog& catalog);

// Puts `staging` at `dest` in one step: an atomic exchange when `dest` exists (the old copy
// is then deleted), a plain rename otherwise. Both must be on one filesystem.
Status SwapDirectoryIntoPlace(const std::string& staging, const std::string& dest);

}  // namespace tessera
