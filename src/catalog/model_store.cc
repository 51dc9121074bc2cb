#include "catalog/model_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/environment.h"
#include "base/sha256.h"
#include "catalog/builtin_model.h"
#include "catalog/gguf_stores.h"
#include "catalog/lmstudio_store.h"
#include "catalog/package.h"
#include "format/json_util.h"
#include "format/model_kind.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

// Lock files and configs are small; anything bigger is not what we wrote.
constexpr uintmax_t kMaxSmallFileBytes = 16u << 20;

std::string EnvOrEmpty(EnvVar var) {
  return ReadEnv(var).value_or(std::string());
}

Expected<std::string> HomeDir() {
  std::string home = EnvOrEmpty(EnvVar::kHome);
  if (home.empty()) return NotFound("HOME is not set; set TESSERA_MODELS to a directory");
  return home;
}

Expected<std::string> ReadSmallFile(const std::string& path) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return NotFound("cannot read " + path + ": " + ec.message());
  if (size > kMaxSmallFileBytes) return Corrupt(path + " is too large to be what it claims");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The config.json torch_dtype (or "dtype") of a checkpoint directory, "-" when unknown.
std::string CheckpointDtype(const std::string& dir) {
  auto text = ReadSmallFile(dir + "/config.json");
  if (!text) return "-";
  auto doc = ParseJsonDocument(*text, "config.json", 64, DuplicateKeys::kKeepLast);
  if (!doc || !doc->is_object()) return "-";
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto it = doc->find(key);
    if (it != doc->end() && it->is_string()) return it->get<std::string>();
  }
  return "-";
}

// Bytes of the regular files in `dir` and below (following symlinks to files, so hub-cache
// blobs count; sentence-transformers models keep files in subfolders).
uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    std::error_code file_ec;
    if (entry.is_regular_file(file_ec)) {
      uintmax_t size = fs::file_size(entry.path(), file_ec);
      if (!file_ec) total += size;
    }
  }
  return total;
}

// The catalog's purpose, else what the checkpoint says it is (DetectModelKind: a causal LM
// without a chat template is "completion"), else "-".
std::string PurposeOf(const Catalog& catalog, const std::string& name, const std::string& repo,
                      const std::string& dir) {
  const CatalogEntry* e = catalog.Find(name);
  if (e == nullptr && !repo.empty()) e = catalog.FindByRepo(repo);
  if (e != nullptr) return e->purpose;
  auto kind = DetectModelKind(dir);
  return kind ? std::string(ModelKindName(kind->kind)) : "-";
}

// "models--Org--Name" (a hub cache folder) to "Org/Name"; "" for any other name.
std::string RepoOfHubCacheFolder(const std::string& folder) {
  if (!folder.starts_with("models--")) return "";
  const std::string rest = folder.substr(8);
  const size_t sep = rest.find("--");
  if (sep == std::string::npos) return "";
  std::string repo = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  return ValidateRepoId(repo).ok() ? repo : "";
}

bool IsCheckpointDir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/config.json", ec);
}

// The store folders a name may live in, in the order resolution tries them: its store name,
// then, for a repository the catalog names, "Org--Name", where `pull ORG/REPO` put it before
// the catalog knew the repository (so adding a catalog entry does not orphan earlier pulls).
std::vector<std::string> StoreFoldersOf(const ModelRef& spec) {
  std::vector<std::string> folders{spec.store_name};
  const size_t slash = spec.repo.find('/');
  if (slash != std::string::npos) {
    std::string by_repo = spec.repo.substr(0, slash) + "--" + spec.repo.substr(slash + 1);
    if (by_repo != spec.store_name) folders.push_back(std::move(by_repo));
  }
  return folders;
}

// The name under which `resolve`, `generate` and `rm` find the store folder `folder` of
// `models_dir`: its own name when that is a catalog id, "Org/Name" for "Org--Name"; "" when no
// name reaches it (a folder made by hand, or an "Org--Name" copy shadowed by a copy under the
// catalog id).
std::string NameOfStoreFolder(const Catalog& catalog, const std::string& models_dir,
                              const std::string& folder) {
  std::string candidate = folder;
  if (const size_t sep = folder.find("--"); sep != std::string::npos) {
    candidate = folder.substr(0, sep) + "/" + folder.substr(sep + 2);
  }
  auto spec = ParseModelRef(candidate, catalog);
  if (!spec) return "";
  for (const std::string& tried : StoreFoldersOf(*spec)) {
    if (tried == folder) return candidate;
    if (IsCheckpointDir(models_dir + "/" + tried)) return "";  // found first
  }
  return "";
}

}  // namespace

Expected<std::string> ModelsDir() {
  std::string dir = EnvOrEmpty(EnvVar::kModels);
  if (!dir.empty()) return dir;
  TS_ASSIGN_OR_RETURN(std::string home, HomeDir());
  return home + "/.local/share/tessera/models";
}

Expected<std::string> HubCacheDir() {
  std::string dir = EnvOrEmpty(EnvVar::kHfHubCache);
  if (!dir.empty()) return dir;
  std::string hf_home = EnvOrEmpty(EnvVar::kHfHome);
  if (!hf_home.empty()) return hf_home + "/hub";
  TS_ASSIGN_OR_RETURN(std::string home, HomeDir());
  return home + "/.cache/huggingface/hub";
}

Expected<LockFile> ReadLockFile(const std::string& model_dir) {
  const std::string path = model_dir + "/" + kLockFileName;
  TS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, path));
  auto bad = [&](const std::string& why) {
    return Corrupt(path + ": " + why + "; pull the model again with --force");
  };
  if (!doc.is_object()) return bad("not a JSON object");
  const auto format = doc.find("format");
  if (format == doc.end() || !format->is_number_integer() ||
      format->get<int64_t>() != kLockFormatVersion) {
    return bad("unknown lock format");
  }
  LockFile lock;
  for (auto [key, field] : {std::pair{"repo", &lock.repo}, std::pair{"revision", &lock.revision},
                            std::pair{"commit", &lock.commit}}) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_string()) return bad(std::string("no \"") + key + "\"");
    *field = it->get<std::string>();
  }
  auto files = doc.find("files");
  if (files == doc.end() || !files->is_array()) return bad("no \"files\" array");
  for (const auto& f : *files) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("sha256") || !f["sha256"].is_string()) {
      return bad("a file entry lacks path, size or sha256");
    }
    LockedFile lf{f["path"].get<std::string>(), f["size"].get<uint64_t>(),
                  f["sha256"].get<std::string>()};
    // Paths come from a file on disk; keep them to plain names inside the model directory.
    if (lf.path.empty() || lf.path.find('/') != std::string::npos || lf.path == "." ||
        lf.path == "..") {
      return bad("file entry " + QuoteForMessage(lf.path) + " is not a plain file name");
    }
    lock.files.push_back(std::move(lf));
  }
  return lock;
}

Status WriteLockFile(const std::string& model_dir, const LockFile& lock) {
  nlohmann::json doc = {{"format", kLockFormatVersion},
                        {"repo", lock.repo},
                        {"revision", lock.revision},
                        {"commit", lock.commit},
                        {"files", nlohmann::json::array()}};
  for (const auto& f : lock.files) {
    doc["files"].push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  }
  const std::string path = model_dir + "/" + kLockFileName;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << doc.dump(2) << "\n";
    out.flush();
    if (!out) return IoError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status CheckAgainstLock(const std::string& model_dir, const LockFile& lock, bool rehash) {
  for (const auto& f : lock.files) {
    const std::string path = model_dir + "/" + f.path;
    std::error_code ec;
    uintmax_t size = fs::file_size(path, ec);
    if (ec) return NotFound(f.path + " is missing");
    if (size != f.size) {
      return Corrupt(f.path + " is " + std::to_string(size) + " bytes, the lock says " +
                     std::to_string(f.size));
    }
    if (rehash) {
      TS_ASSIGN_OR_RETURN(std::string digest, Sha256File(path));
      if (digest != f.sha256) return Corrupt(f.path + " does not match its sha256");
    }
  }
  return Status::Ok();
}

Expected<std::string> FindHubCacheSnapshot(const std::string& hub_cache, std::string_view repo,
                                           std::string_view revision) {
  TS_RETURN_IF_ERROR(ValidateRepoId(repo));
  TS_RETURN_IF_ERROR(ValidateRevision(revision));
  size_t slash = repo.find('/');
  const std::string repo_dir = hub_cache + "/models--" + std::string(repo.substr(0, slash)) + "--" +
                               std::string(repo.substr(slash + 1));
  std::string commit(revision);
  if (!IsCommitId(revision)) {
    auto ref = ReadSmallFile(repo_dir + "/refs/" + std::string(revision));
    if (!ref) return NotFound(std::string(repo) + "@" + std::string(revision) + " is not cached");
    commit = *ref;
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
    if (!IsCommitId(commit)) {
      return Corrupt(repo_dir + "/refs/" + std::string(revision) + " does not hold a commit id");
    }
  }
  const std::string snapshot = repo_dir + "/snapshots/" + commit;
  if (!IsCheckpointDir(snapshot)) {
    return NotFound(std::string(repo) + " snapshot " + commit + " has no config.json");
  }
  return snapshot;
}

const char* ModelLocationName(ModelLocation location) {
  switch (location) {
    case ModelLocation::kStore:
      return "store";
    case ModelLocation::kHubCache:
      return "hf-cache";
    case ModelLocation::kPath:
      return "path";
    case ModelLocation::kBuiltin:
      return "built-in";
    case ModelLocation::kFirstUsePackage:
      return "package";
    case ModelLocation::kOllama:
      return "ollama";
    case ModelLocation::kLmStudio:
      return "lmstudio";
    case ModelLocation::kFolder:
      return "folder";
  }
  return "?";
}

namespace {

// tessera's store, then the Hugging Face cache: nullopt when neither holds `spec`.
Expected<std::optional<ResolvedModel>> FindInTesseraStores(const ModelRef& spec,
                                                           const std::string& models_dir,
                                                           const std::string& hub_cache) {
  for (const std::string& folder : StoreFoldersOf(spec)) {
    const std::string stored = models_dir + "/" + folder;
    if (!IsCheckpointDir(stored)) continue;
    // With an explicit revision, the stored copy counts only if it is that revision.
    auto lock = ReadLockFile(stored);
    bool matches = !spec.revision_given ||
                   (lock && (lock->revision == spec.revision || lock->commit == spec.revision));
    if (matches) {
      if (IsPackageDir(stored)) TS_RETURN_IF_ERROR(VerifyPackage(stored).status());
      return std::optional<ResolvedModel>(ResolvedModel{folder, stored, ModelLocation::kStore});
    }
  }
  auto snapshot = FindHubCacheSnapshot(hub_cache, spec.repo, spec.revision);
  if (snapshot) {
    return std::optional<ResolvedModel>(
        ResolvedModel{spec.store_name, *snapshot, ModelLocation::kHubCache});
  }
  if (snapshot.status().code() != ErrorCode::kNotFound) return snapshot.status();
  return std::optional<ResolvedModel>();
}

// How to name one candidate of an ambiguous name alone: an Ollama name with its tag (no other
// store's names hold ':'), else the path.
std::string UnambiguousSpelling(const ResolvedModel& m) {
  if (m.location == ModelLocation::kOllama) return m.gguf->name;
  return m.Where();
}

const char* SourceName(ModelLocation location) {
  switch (location) {
    case ModelLocation::kStore:
      return "tessera's store";
    case ModelLocation::kHubCache:
      return "the Hugging Face cache";
    case ModelLocation::kOllama:
      return "Ollama's store";
    case ModelLocation::kLmStudio:
      return "LM Studio's folder";
    default:
      return ModelLocationName(location);
  }
}

}  // namespace

Expected<ResolvedModel> ResolveModel(std::string_view name_or_path, const Catalog& catalog) {
  if (LooksLikePath(name_or_path)) {
    std::string path(name_or_path);
    if (path.starts_with("~/")) {
      TS_ASSIGN_OR_RETURN(std::string home, HomeDir());
      path = home + path.substr(1);
    }
    TS_ASSIGN_OR_RETURN(std::optional<ResolvedModel> gguf,
                        ResolveGgufPath(std::string(name_or_path), path));
    if (gguf) return std::move(*gguf);
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      return NotFound(path + " is neither a checkpoint folder nor a GGUF file");
    }
    // A package is used only once every byte is verified.
    if (IsPackageDir(path)) TS_RETURN_IF_ERROR(VerifyPackage(path).status());
    return ResolvedModel{std::string(name_or_path), path, ModelLocation::kPath};
  }
  if (name_or_path == kBuiltinModelName) {
    TS_ASSIGN_OR_RETURN(std::string dir, MaterializeBuiltinModel());
    return ResolvedModel{kBuiltinModelName, dir, ModelLocation::kBuiltin};
  }
  std::vector<ResolvedModel> found;
  std::vector<std::string> looked_in;
  Expected<ModelRef> spec = ParseModelRef(name_or_path, catalog);
  if (spec) {
    TS_ASSIGN_OR_RETURN(std::string models_dir, ModelsDir());
    TS_ASSIGN_OR_RETURN(std::string hub_cache, HubCacheDir());
    looked_in = {models_dir, hub_cache};
    TS_ASSIGN_OR_RETURN(std::optional<ResolvedModel> ours,
                        FindInTesseraStores(*spec, models_dir, hub_cache));
    if (ours) found.push_back(std::move(*ours));
  }
  TS_ASSIGN_OR_RETURN(GgufStoreLookup others, FindInGgufStores(name_or_path));
  for (ResolvedModel& m : others.found) found.push_back(std::move(m));
  looked_in.insert(looked_in.end(), others.looked_in.begin(), others.looked_in.end());
  if (found.size() == 1) return std::move(found[0]);
  const std::string quoted = QuoteForMessage(name_or_path);
  if (found.size() > 1) {
    std::string list;
    for (const ResolvedModel& m : found) {
      list += std::string(list.empty() ? "" : "; ") + SourceName(m.location) + ": " + m.Where() +
              " (name it alone as " + UnambiguousSpelling(m) + ")";
    }
    return InvalidArgument(quoted + " names " + std::to_string(found.size()) +
                           " models, and tessera does not guess which: " + list);
  }
  // Not a name in any store's syntax: tessera's reason says what a name may be.
  if (!spec && !others.is_name_there) return spec.status();
  std::string places;
  for (const std::string& p : looked_in) places += (places.empty() ? "" : ", ") + p;
  if (spec) {
    return NotFound("model " + quoted + " is not installed (looked in " + places +
                    "); run `tessera pull " + std::string(name_or_path) + "`");
  }
  return NotFound("model " + quoted + " is not installed (looked in " + places +
                  "); it is not a name `tessera pull` takes (`tessera list --catalog` shows "
                  "those, or give ORG/REPO), and `ollama pull " +
                  std::string(name_or_path) + "` would put it in Ollama's store");
}

namespace {

// `name` when it resolves to `dir`, else name@commit when that does, else `dir` itself (a
// path, which every command that takes a model accepts). A hub-cache snapshot that is not the
// one `main` points to, or one shadowed by a stored copy, needs more than its name.
std::string NameResolvingTo(const std::string& name, const std::string& commit,
                            const std::string& dir, const Catalog& catalog) {
  for (const std::string& candidate : {name, name + "@" + commit}) {
    auto resolved = ResolveModel(candidate, catalog);
    if (resolved &&
        fs::path(resolved->dir).lexically_normal() == fs::path(dir).lexically_normal()) {
      return candidate;
    }
  }
  return dir;
}

}  // namespace

Expected<std::vector<InstalledModel>> ListInstalledModels(const Catalog& catalog, bool rehash) {
  std::vector<InstalledModel> models;
  TS_ASSIGN_OR_RETURN(std::string models_dir, ModelsDir());
  std::error_code ec;
  std::vector<fs::path> stored;
  for (const auto& entry : fs::directory_iterator(models_dir, ec)) stored.push_back(entry.path());
  std::sort(stored.begin(), stored.end());
  for (const auto& path : stored) {
    const std::string name = path.filename().string();
    if (name.starts_with(".") || !IsCheckpointDir(path.string())) continue;  // staging etc.
    InstalledModel m;
    m.dir = path.string();
    // Listed by a name every other command accepts, else by its path (also accepted).
    m.name = NameOfStoreFolder(catalog, models_dir, name);
    if (m.name.empty()) m.name = m.dir;
    m.location = ModelLocation::kStore;
    m.dtype = CheckpointDtype(m.dir);
    m.size_bytes = DirectoryBytes(m.dir);
    std::string repo;
    auto lock = ReadLockFile(m.dir);
    if (IsPackageDir(m.dir)) {
      // Packages carry their own manifest; verification is cheap when the cache is warm.
      auto package = VerifyPackage(m.dir);
      m.verification = package ? "verified" : "changed: " + package.status().message();
      if (package) {
        m.dtype = package->dtype;
        repo = package->source_repo;
        m.commit = package->source_commit;
      }
    } else if (!lock) {
      m.verification = "unverified";
    } else {
      repo = lock->repo;
      m.commit = lock->commit;
      Status st = CheckAgainstLock(m.dir, *lock, rehash);
      m.verification = st.ok() ? "verified" : "changed: " + st.message();
    }
    m.purpose = PurposeOf(catalog, name, repo, m.dir);
    models.push_back(std::move(m));
  }
  TS_ASSIGN_OR_RETURN(std::string hub_cache, HubCacheDir());
  std::vector<fs::path> repos;
  for (const auto& entry : fs::directory_iterator(hub_cache, ec)) repos.push_back(entry.path());
  std::sort(repos.begin(), repos.end());
  for (const auto& repo_dir : repos) {
    const std::string repo = RepoOfHubCacheFolder(repo_dir.filename().string());
    if (repo.empty()) continue;
    std::vector<fs::path> snapshots;
    for (const auto& s : fs::directory_iterator(repo_dir / "snapshots", ec)) {
      snapshots.push_back(s.path());
    }
    std::sort(snapshots.begin(), snapshots.end());
    for (const auto& snapshot : snapshots) {
      if (!IsCheckpointDir(snapshot.string())) continue;
      InstalledModel m;
      const CatalogEntry* e = catalog.FindByRepo(repo);
      m.dir = snapshot.string();
      m.commit = snapshot.filename().string();
      m.name = NameResolvingTo(e != nullptr ? e->id : repo, m.commit, m.dir, catalog);
      m.purpose = PurposeOf(catalog, e != nullptr ? e->id : repo, repo, m.dir);
      m.location = ModelLocation::kHubCache;
      m.dtype = CheckpointDtype(m.dir);
      m.size_bytes = DirectoryBytes(m.dir);
      m.verification = "unverified";
      models.push_back(std::move(m));
    }
  }
  // Packages converted on first use from read-only sources (package_cache.h); a package
  // written beside its source is not found here.
  std::vector<fs::path> packages;
  for (const auto& entry : fs::directory_iterator(fs::path(models_dir) / ".packages", ec)) {
    packages.push_back(entry.path());
  }
  std::sort(packages.begin(), packages.end());
  for (const auto& path : packages) {
    if (path.filename().string().starts_with(".") || !IsPackageDir(path.string())) continue;
    InstalledModel m;
    m.dir = path.string();
    m.name = m.dir;
    m.location = ModelLocation::kFirstUsePackage;
    m.size_bytes = DirectoryBytes(m.dir);
    auto package = VerifyPackage(m.dir);
    m.verification = package ? "verified" : "changed: " + package.status().message();
    m.dtype = package ? package->dtype : CheckpointDtype(m.dir);
    if (package) m.commit = package->source_commit;
    m.purpose = PurposeOf(catalog, "", package ? package->source_repo : "", m.dir);
    models.push_back(std::move(m));
  }
  for (InstalledModel& m : ListGgufStoreModels(rehash)) models.push_back(std::move(m));
  // A name another store also answers to is ambiguous (ResolveModel refuses it): such a row is
  // named by its path. A refused Ollama model keeps its name, which says why when resolved.
  for (InstalledModel& m : models) {
    if (m.name == m.Where()) continue;
    if (m.location == ModelLocation::kOllama && m.verification != "verified") continue;
    auto resolved = ResolveModel(m.name, catalog);
    if (!resolved ||
        fs::path(resolved->Where()).lexically_normal() != fs::path(m.Where()).lexically_normal()) {
      m.name = m.Where();
    }
  }
  return models;
}

std::vector<InstalledModel> ListGgufFolderModels(const std::string& dir) {
  std::vector<InstalledModel> rows;
  for (const ListedGgufFile& file : ListGgufFolder(dir, ModelLocation::kFolder)) {
    rows.push_back(InstalledFromGgufFile(file, "unverified"));
  }
  return rows;
}

const CatalogEntry* CatalogEntryOfModelDir(const Catalog& catalog, const std::string& dir) {
  std::string repo;
  if (auto lock = ReadLockFile(dir)) {
    repo = lock->repo;
  } else if (IsPackageDir(dir)) {
    repo = PackageSourceRepo(dir);
  } else {
    fs::path path = fs::path(dir).lexically_normal();
    if (!path.has_filename()) path = path.parent_path();  // "dir/" ends in an empty name
    const fs::path snapshots = path.parent_path();
    if (snapshots.filename() == "snapshots") {
      repo = RepoOfHubCacheFolder(snapshots.parent_path().filename().string());
    }
  }
  return repo.empty() ? nullptr : catalog.FindByRepo(repo);
}

namespace {

// rm of a name that lives in Ollama's store or LM Studio's folder: refused, saying whose it is
// (another program's store is only ever read). Ok when the name is in neither.
Status RefuseRemovingFromOtherStores(std::string_view name) {
  auto others = FindInGgufStores(name);
  if (!others || others->found.empty()) return Status::Ok();
  const ResolvedModel& m = others->found[0];
  const std::string& where = m.gguf->manifest_path.empty() ? m.Where() : m.gguf->manifest_path;
  return InvalidArgument(std::string(name) + " lives in " + SourceName(m.location) + " (" + where +
                         "), which tessera never changes; " +
                         (m.location == ModelLocation::kOllama
                              ? "use `ollama rm " + std::string(name) + "`"
                              : std::string("delete it with LM Studio")));
}

}  // namespace

Expected<std::string> RemoveStoredModel(std::string_view name, const Catalog& catalog) {
  auto parsed = ParseModelRef(name, catalog);
  if (!parsed) TS_RETURN_IF_ERROR(RefuseRemovingFromOtherStores(name));
  TS_ASSIGN_OR_RETURN(ModelRef spec, std::move(parsed));
  if (spec.revision_given) {
    return InvalidArgument("rm takes a name without @REVISION; a model is stored once");
  }
  TS_ASSIGN_OR_RETURN(std::string models_dir, ModelsDir());
  std::string dir = models_dir + "/" + spec.store_name;
  std::error_code ec;
  for (const std::string& folder : StoreFoldersOf(spec)) {
    if (fs::is_directory(models_dir + "/" + folder, ec)) {
      dir = models_dir + "/" + folder;
      break;
    }
  }
  if (!fs::is_directory(dir, ec)) {
    TS_ASSIGN_OR_RETURN(std::string hub_cache, HubCacheDir());
    if (FindHubCacheSnapshot(hub_cache, spec.repo, spec.revision)) {
      return InvalidArgument(std::string(name) + " lives in the Hugging Face cache (" + hub_cache +
                             "), which tessera does not delete from; use "
                             "`huggingface-cli delete-cache`");
    }
    TS_RETURN_IF_ERROR(RefuseRemovingFromOtherStores(name));
    return NotFound(std::string(name) + " is not in " + models_dir + "; see `tessera list`");
  }
  // Rename first so a half-deleted directory is never mistaken for a model.
  const std::string doomed =
      models_dir + "/.removing-" + spec.store_name + "-" + std::to_string(getpid());
  if (std::rename(dir.c_str(), doomed.c_str()) != 0) {
    return IoError("cannot remove " + dir + ": " + std::strerror(errno));
  }
  fs::remove_all(doomed, ec);
  if (ec) return IoError("removed " + dir + " from the store but not from disk: " + ec.message());
  return dir;
}

Status SwapDirectoryIntoPlace(const std::string& staging, const std::string& dest) {
  std::error_code ec;
  if (!fs::exists(dest, ec)) {
    if (std::rename(staging.c_str(), dest.c_str()) != 0) {
      return IoError("cannot move " + staging + " to " + dest + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }
  if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) != 0) {
    return IoError("cannot swap " + staging + " into " + dest + ": " + std::strerror(errno));
  }
  // `staging` now holds the previous copy.
  fs::remove_all(staging, ec);
  return Status::Ok();
}

}  // namespace tessera
