#include "catalog/package.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "catalog/model_store.h"
#include "format/json_util.h"
#include "format/model_config.h"
#include "model/checkpoint.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

constexpr char kTensorFileName[] = "model.safetensors";
constexpr char kVerifiedCacheName[] = ".tessera-verified.json";
constexpr uintmax_t kMaxManifestBytes = 16u << 20;
// A cache entry is trusted only for a file last modified this long before it was verified:
// a write within one timestamp tick of the verification could otherwise keep its mtime
// (the "racy git" problem).
constexpr int64_t kRacyWindowNs = 2'000'000'000;

const char* const kSmallFiles[] = {"config.json",         "generation_config.json",
                                   "tokenizer.json",      "tokenizer_config.json",
                                   "chat_template.jinja", "special_tokens_map.json"};

struct FileRecord {
  std::string path;
  uint64_t size = 0;
  std::string sha256;
  int64_t mtime_ns = -1;  // source files only: lets a reuse check skip re-hashing
};

nlohmann::json RecordsToJson(const std::vector<FileRecord>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : records) {
    out.push_back({{"path", r.path}, {"size", r.size}, {"sha256", r.sha256}});
    if (r.mtime_ns >= 0) out.back()["mtime_ns"] = r.mtime_ns;
  }
  return out;
}

// A file entry of the manifest ({"path", "size", "sha256"[, "mtime_ns"]}), or nothing when an
// entry is malformed.
std::optional<FileRecord> RecordFromJson(const nlohmann::json& f) {
  if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
      !f["size"].is_number_unsigned() || !f.contains("sha256") || !f["sha256"].is_string()) {
    return std::nullopt;
  }
  FileRecord r{f["path"].get<std::string>(), f["size"].get<uint64_t>(),
               f["sha256"].get<std::string>()};
  if (f.contains("mtime_ns") && f["mtime_ns"].is_number_integer()) {
    r.mtime_ns = f["mtime_ns"].get<int64_t>();
  }
  return r;
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// The files of a source checkpoint that a package is made from, sorted.
std::vector<std::string> SourceFileNames(const std::string& source);

Expected<std::string> ReadWholeFile(const std::string& path, uintmax_t max_bytes) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return NotFound("cannot read " + path + ": " + ec.message());
  if (size > max_bytes) return Corrupt(path + " is too large");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return IoError("cannot read " + path);
  return text.str();
}

Status WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) return IoError("cannot write " + path);
  return Status::Ok();
}

Expected<FileRecord> HashRecord(const std::string& dir, const std::string& name) {
  TS_ASSIGN_OR_RETURN(std::string digest, Sha256File(dir + "/" + name));
  std::error_code ec;
  uint64_t size = fs::file_size(dir + "/" + name, ec);
  if (ec) return IoError("cannot stat " + dir + "/" + name);
  return FileRecord{name, size, digest};
}

// A file of a package: a plain name, or one folder and a plain name (a sentence-transformers
// module's config, e.g. 1_Pooling/config.json); no component empty or starting with '.'.
bool IsPackageFileName(const std::string& name) {
  const size_t slash = name.find('/');
  auto plain = [](std::string_view part) { return !part.empty() && part.front() != '.'; };
  if (slash == std::string::npos) return plain(name);
  const std::string_view rest = std::string_view(name).substr(slash + 1);
  return plain(std::string_view(name).substr(0, slash)) && plain(rest) &&
         rest.find('/') == std::string_view::npos;
}

// The sentence-transformers files a task model is recognised by (format/model_kind.h):
// modules.json, config_sentence_transformers.json and each module folder's config.json.
std::vector<std::string> SentenceTransformersFiles(const std::string& source) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const char* name : {"modules.json", "config_sentence_transformers.json"}) {
    if (fs::exists(source + "/" + name, ec)) names.push_back(name);
  }
  auto text = ReadWholeFile(source + "/modules.json", kMaxManifestBytes);
  if (!text) return names;
  const nlohmann::json modules = nlohmann::json::parse(*text, nullptr, false);
  if (!modules.is_array()) return names;
  for (const auto& m : modules) {
    if (!m.is_object() || !m.contains("path") || !m["path"].is_string()) continue;
    const std::string file = m["path"].get<std::string>() + "/config.json";
    if (IsPackageFileName(file) && fs::is_regular_file(source + "/" + file, ec)) {
      names.push_back(file);
    }
  }
  return names;
}

std::string ReconvertHint(const std::string& dir, const std::string& source) {
  return "re-convert it: tessera convert " + (source.empty() ? std::string("SOURCE") : source) +
         " " + dir;
}

static_assert(kPackageTensorAlignment == kPackedTensorAlignment);

// The tensor file is the backend's (WritePackedTensorFile in backend/backend.h); the package
// records its version in the file's metadata too.
Expected<FileRecord> WriteTensorFile(const Checkpoint& source, WeightFormat format,
                                     const std::string& path, const ProgressCallback& progress) {
  TS_ASSIGN_OR_RETURN(PackedTensorFile file,
                      WritePackedTensorFile(
                          source, format, path,
                          {{"tessera_package", std::to_string(kPackageFormatVersion)}}, progress));
  return FileRecord{kTensorFileName, file.bytes, file.sha256};
}

struct CacheEntry {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  std::string sha256;
  int64_t verified_at_ns = 0;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::map<std::string, CacheEntry> ReadVerifiedCache(const std::string& dir) {
  std::map<std::string, CacheEntry> cache;
  auto text = ReadWholeFile(dir + "/" + kVerifiedCacheName, kMaxManifestBytes);
  if (!text) return cache;
  auto doc = ParseJsonDocument(*text, kVerifiedCacheName);
  if (!doc || !doc->is_object()) return cache;  // a damaged cache only costs a re-hash
  for (const auto& [path, e] : doc->items()) {
    if (!e.is_object()) continue;
    CacheEntry entry;
    try {
      entry.size = e.at("size").get<uint64_t>();
      entry.mtime_ns = e.at("mtime_ns").get<int64_t>();
      entry.inode = e.at("inode").get<uint64_t>();
      entry.sha256 = e.at("sha256").get<std::string>();
      entry.verified_at_ns = e.at("verified_at_ns").get<int64_t>();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    cache[path] = entry;
  }
  return cache;
}

void WriteVerifiedCache(const std::string& dir, const std::map<std::string, CacheEntry>& cache) {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [path, e] : cache) {
    doc[path] = {{"size", e.size},
                 {"mtime_ns", e.mtime_ns},
                 {"inode", e.inode},
                 {"sha256", e.sha256},
                 {"verified_at_ns", e.verified_at_ns}};
  }
  const std::string tmp = dir + "/" + kVerifiedCacheName + ".tmp";
  // Best effort: a read-only package still verifies, it just re-hashes next time.
  if (WriteWholeFile(tmp, doc.dump()).ok()) {
    std::rename(tmp.c_str(), (dir + "/" + kVerifiedCacheName).c_str());
  }
}

std::vector<std::string> SourceFileNames(const std::string& source) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(source, ec)) {
    std::string name = entry.path().filename().string();
    bool small = false;
    for (const char* s : kSmallFiles) small |= name == s;
    if (small || name.ends_with(".safetensors") || name == "model.safetensors.index.json") {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

bool IsPackageDir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/" + kPackageManifestName, ec);
}

Status ConvertToPackage(const std::string& source, const std::string& dest,
                        const PackageOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(source, ec)) return NotFound(source + " is not a directory");
  if (fs::exists(dest, ec) && !IsPackageDir(dest)) {
    return InvalidArgument(dest +
                           " exists and is not a tessera package; choose another "
                           "destination or remove it");
  }
  if (IsPackageDir(source)) {
    return InvalidArgument(source + " is already a package; convert its source checkpoint");
  }
  TS_ASSIGN_OR_RETURN(std::string config_text,
                      ReadWholeFile(source + "/config.json", kMaxManifestBytes));
  TS_RETURN_IF_ERROR(ParseModelConfig(config_text).status().WithContext(source + "/config.json"));
  TS_ASSIGN_OR_RETURN(nlohmann::json config, ParseJsonDocument(config_text, "config.json"));
  std::string architecture = StringOr(config, "model_type");
  // Opening binds and validates every tensor against the config before anything is written.
  TS_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> checkpoint, OpenCheckpoint(source));
  TS_ASSIGN_OR_RETURN(WeightFormat format, ResolveWeightFormat(*checkpoint, options.weights));

  // Source record: every model file with size and sha256, and the pulled revision if known.
  nlohmann::json source_json = {{"dir", fs::absolute(source, ec).string()}};
  if (auto lock = ReadLockFile(source)) {
    source_json["repo"] = lock->repo;
    source_json["revision"] = lock->revision;
    source_json["commit"] = lock->commit;
  }
  std::vector<FileRecord> source_files;
  const std::vector<std::string> source_names = SourceFileNames(source);
  // Hashing reads every source byte: shown per file, as the bytes hashed so far.
  constexpr char kHashingPhase[] = "hashing the source";
  uint64_t source_bytes = 0, hashed_bytes = 0;
  for (const auto& name : source_names) {
    if (const uint64_t n = fs::file_size(source + "/" + name, ec); !ec) source_bytes += n;
  }
  auto hashing = [&](bool finished) {
    ReportProgress(options.progress, {.phase = kHashingPhase,
                                      .done = hashed_bytes,
                                      .total = source_bytes,
                                      .unit = ProgressUnit::kBytes,
                                      .finished = finished});
  };
  hashing(false);
  for (const auto& name : source_names) {
    // Names are recorded in the manifest, which is JSON text.
    if (!IsValidUtf8(name)) {
      return InvalidArgument(source + ": the file name " + QuoteForMessage(name) +
                             " is not valid UTF-8; rename or remove it");
    }
    struct stat st {};
    // The time is taken before hashing: a later change moves it and forces a re-hash.
    if (stat((source + "/" + name).c_str(), &st) != 0) return IoError("cannot stat " + name);
    TS_ASSIGN_OR_RETURN(FileRecord r, HashRecord(source, name));
    r.mtime_ns = MtimeNs(st);
    hashed_bytes += r.size;
    source_files.push_back(std::move(r));
    hashing(false);
  }
  hashing(true);
  source_json["files"] = RecordsToJson(source_files);

  const fs::path dest_path = fs::absolute(dest, ec);
  fs::create_directories(dest_path.parent_path(), ec);
  const std::string staging = dest_path.string() + ".staging-" + std::to_string(getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return IoError("cannot create " + staging + ": " + ec.message());
  struct StagingCleanup {
    std::string dir;
    bool keep = false;
    ~StagingCleanup() {
      std::error_code ignored;
      if (!keep) fs::remove_all(dir, ignored);
    }
  } cleanup{staging};

  std::vector<FileRecord> files;
  TS_ASSIGN_OR_RETURN(
      FileRecord tensor_file,
      WriteTensorFile(*checkpoint, format, staging + "/" + kTensorFileName, options.progress));
  files.push_back(tensor_file);
  std::vector<std::string> copied;
  for (const char* name : kSmallFiles) {
    if (fs::exists(source + "/" + name, ec)) copied.push_back(name);
  }
  for (std::string& name : SentenceTransformersFiles(source)) copied.push_back(std::move(name));
  for (const std::string& name : copied) {
    if (const size_t slash = name.find('/'); slash != std::string::npos) {
      fs::create_directories(staging + "/" + name.substr(0, slash), ec);
    }
    fs::copy_file(source + "/" + name, staging + "/" + name, ec);  // follows symlinks
    if (ec) return IoError("cannot copy " + name + ": " + ec.message());
    TS_ASSIGN_OR_RETURN(FileRecord r, HashRecord(staging, name));
    files.push_back(std::move(r));
  }
  nlohmann::json manifest = {{"format_version", kPackageFormatVersion},
                             {"kind", "tessera-package"},
                             {"architecture", architecture},
                             {"dtype", std::string(WeightFormatName(format))},
                             {"packed_layout", std::string(PackedWeightLayout())},
                             {"alignment", kPackageTensorAlignment},
                             {"source", source_json},
                             {"files", RecordsToJson(files)}};
  // A source directory's path need not be UTF-8; it is only shown in the reconvert hint.
  const std::string manifest_text =
      manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  TS_RETURN_IF_ERROR(WriteWholeFile(staging + "/" + kPackageManifestName, manifest_text));
  TS_RETURN_IF_ERROR(
      WriteWholeFile(staging + "/" + kPackageManifestHashName, Sha256Hex(manifest_text) + "\n"));
  TS_RETURN_IF_ERROR(SwapDirectoryIntoPlace(staging, dest_path.string()));
  cleanup.keep = true;  // moved (SwapDirectoryIntoPlace removed the old copy)
  return Status::Ok();
}

std::string PackageSourceRepo(const std::string& dir) {
  auto text = ReadWholeFile(dir + "/" + kPackageManifestName, kMaxManifestBytes);
  if (!text) return "";
  auto manifest = ParseJsonDocument(*text, kPackageManifestName);
  if (!manifest || !manifest->is_object() || !manifest->contains("source") ||
      !(*manifest)["source"].is_object()) {
    return "";
  }
  return StringOr((*manifest)["source"], "repo");
}

Expected<PackageInfo> VerifyPackage(const std::string& dir) {
  const std::string manifest_path = dir + "/" + kPackageManifestName;
  TS_ASSIGN_OR_RETURN(std::string manifest_text, ReadWholeFile(manifest_path, kMaxManifestBytes));
  auto parsed = ParseJsonDocument(manifest_text, kPackageManifestName);
  if (!parsed || !parsed->is_object()) {
    return Corrupt("the package manifest in " + dir + " is damaged; " + ReconvertHint(dir, ""));
  }
  const nlohmann::json& manifest = *parsed;
  std::string source_dir;
  if (manifest.contains("source") && manifest["source"].is_object() &&
      manifest["source"].contains("dir") && manifest["source"]["dir"].is_string()) {
    source_dir = manifest["source"]["dir"];
  }
  // The version first, so an old package gets the message that helps.
  auto version = manifest.find("format_version");
  if (version == manifest.end() || !version->is_number_integer()) {
    return Corrupt("the package in " + dir + " has no format version; " +
                   ReconvertHint(dir, source_dir));
  }
  const int64_t format = version->get<int64_t>();
  if (format < kPackageFormatVersion) {
    return Unsupported("the package in " + dir + " uses format " + std::to_string(format) +
                       ", older than this tessera's " + std::to_string(kPackageFormatVersion) +
                       "; " + ReconvertHint(dir, source_dir));
  }
  if (format > kPackageFormatVersion) {
    return Unsupported("the package in " + dir + " uses format " + std::to_string(format) +
                       ", newer than this tessera understands; upgrade tessera or " +
                       ReconvertHint(dir, source_dir));
  }
  auto recorded = ReadWholeFile(dir + "/" + kPackageManifestHashName, 1024);
  std::string recorded_hash = recorded ? *recorded : "";
  while (!recorded_hash.empty() && recorded_hash.back() == '\n') recorded_hash.pop_back();
  if (recorded_hash != Sha256Hex(manifest_text)) {
    return Corrupt("the package manifest in " + dir + " does not match its sha256; " +
                   ReconvertHint(dir, source_dir));
  }

  PackageInfo info;
  info.architecture = StringOr(manifest, "architecture");
  info.dtype = StringOr(manifest, "dtype");
  if (manifest.contains("source") && manifest["source"].is_object()) {
    info.source_repo = StringOr(manifest["source"], "repo");
    info.source_commit = StringOr(manifest["source"], "commit");
  }
  auto files = manifest.find("files");
  if (files == manifest.end() || !files->is_array() || files->empty()) {
    return Corrupt("the package manifest in " + dir + " lists no files; " +
                   ReconvertHint(dir, source_dir));
  }
  std::map<std::string, CacheEntry> cache = ReadVerifiedCache(dir);
  bool cache_changed = false;
  for (const auto& f : *files) {
    const std::optional<FileRecord> record = RecordFromJson(f);
    if (!record) {
      return Corrupt("a file entry in the package manifest of " + dir + " is malformed; " +
                     ReconvertHint(dir, source_dir));
    }
    const std::string& name = record->path;
    if (!IsPackageFileName(name)) {
      return Corrupt("the package manifest of " + dir + " names " + QuoteForMessage(name) +
                     ", which is not a plain file name; " + ReconvertHint(dir, source_dir));
    }
    const uint64_t size = record->size;
    const std::string& sha256 = record->sha256;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      return Corrupt(name + " is missing from the package in " + dir + "; " +
                     ReconvertHint(dir, source_dir));
    }
    if (static_cast<uint64_t>(st.st_size) != size) {
      return Corrupt(name + " in the package " + dir + " is " + std::to_string(st.st_size) +
                     " bytes, the manifest says " + std::to_string(size) + "; " +
                     ReconvertHint(dir, source_dir));
    }
    const int64_t mtime_ns = MtimeNs(st);
    auto cached = cache.find(name);
    if (cached != cache.end() && cached->second.size == size &&
        cached->second.mtime_ns == mtime_ns && cached->second.inode == st.st_ino &&
        cached->second.sha256 == sha256 &&
        mtime_ns + kRacyWindowNs <= cached->second.verified_at_ns) {
      ++info.files_cached;
      continue;
    }
    TS_ASSIGN_OR_RETURN(std::string digest, Sha256File(path));
    ++info.files_hashed;
    if (digest != sha256) {
      return Corrupt(name + " in the package " + dir + " does not match its sha256 (damaged); " +
                     ReconvertHint(dir, source_dir));
    }
    cache[name] = CacheEntry{size, mtime_ns, static_cast<uint64_t>(st.st_ino), sha256, NowNs()};
    cache_changed = true;
  }
  if (cache_changed) WriteVerifiedCache(dir, cache);
  return info;
}

}  // namespace tessera

namespace tessera {

Expected<bool> PackageMatchesSource(const std::string& package_dir, const std::string& source_dir) {
  TS_ASSIGN_OR_RETURN(std::string text,
                      ReadWholeFile(package_dir + "/" + kPackageManifestName, kMaxManifestBytes));
  TS_ASSIGN_OR_RETURN(nlohmann::json manifest, ParseJsonDocument(text, kPackageManifestName));
  const auto source = manifest.find("source");
  if (source == manifest.end() || !source->is_object() || !source->contains("files") ||
      !(*source)["files"].is_array()) {
    return Corrupt("the package manifest in " + package_dir + " records no source files");
  }
  std::vector<std::string> recorded_names;
  for (const auto& f : (*source)["files"]) {
    const std::optional<FileRecord> r = RecordFromJson(f);
    if (!r) {
      return Corrupt("a source entry in the package manifest of " + package_dir + " is malformed");
    }
    recorded_names.push_back(r->path);
    struct stat st {};
    if (stat((source_dir + "/" + r->path).c_str(), &st) != 0) return false;
    if (static_cast<uint64_t>(st.st_size) != r->size) return false;
    if (r->mtime_ns == MtimeNs(st)) continue;
    TS_ASSIGN_OR_RETURN(std::string digest, Sha256File(source_dir + "/" + r->path));
    if (digest != r->sha256) return false;
  }
  std::sort(recorded_names.begin(), recorded_names.end());
  return recorded_names == SourceFileNames(source_dir);
}

}  // namespace tessera
