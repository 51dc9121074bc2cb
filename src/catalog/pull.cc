#include "catalog/pull.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/environment.h"
#include "base/progress.h"
#include "base/sha256.h"
#include "catalog/model_store.h"
#include "format/json_util.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxMetadataBytes = 64u << 20;
constexpr size_t kMaxErrorBodyBytes = 4096;
// Far more than any checkpoint has; bounds the work a hostile file list can cause.
constexpr size_t kMaxModelFiles = 4096;

bool IsSha256Hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsCancelled(const PullOptions& options) {
  return options.cancelled && options.cancelled();
}

void Log(const PullOptions& options, const std::string& line) {
  if (options.log) options.log(line);
}

// Percent-encodes everything but unreserved characters (a revision may hold '/').
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One easy handle with the settings every request shares.
struct CurlHandle {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {0};

  CurlHandle(const std::string& url, const PullOptions& options) {
    InitCurlOnce();
    curl = curl_easy_init();
    if (curl == nullptr) return;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "tessera/0.1");
    long timeout = options.stall_timeout_seconds > 0 ? options.stall_timeout_seconds : 30;
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, timeout);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, timeout);
    // curl drops a custom Authorization header when a redirect leaves the host (CDN).
    if (!options.token.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + options.token).c_str());
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    }
  }
  ~CurlHandle() {
    if (headers != nullptr) curl_slist_free_all(headers);
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
  CurlHandle(const CurlHandle&) = delete;
  CurlHandle& operator=(const CurlHandle&) = delete;

  long ResponseCode() const {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
};

// The one-line explanation of an HTTP error status from the hub.
Status HttpError(long code, const std::string& what, const PullOptions& options) {
  if (code == 401 || code == 403) {
    return InvalidArgument(
        "the hub refused access to " + what + " (HTTP " + std::to_string(code) + "); " +
        (options.token.empty()
             ? "the model may be gated or private: set HF_TOKEN to a token that can read it"
             : "HF_TOKEN was sent but does not give access; check the token and accept the "
               "model's terms on the hub"));
  }
  if (code == 404) {
    return NotFound(what + " was not found on the hub (HTTP 404); check the name and revision");
  }
  return IoError("the hub answered HTTP " + std::to_string(code) + " for " + what +
                 "; try again later");
}

Status TransferError(CURLcode rc, const CurlHandle& handle, const std::string& what,
                     const PullOptions& options) {
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return DeadlineExceeded(what + " stalled: no data for " +
                            std::to_string(options.stall_timeout_seconds) +
                            " s (check the network; the next pull resumes where this stopped)");
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    return Cancelled(what + " interrupted; the next pull resumes where this stopped");
  }
  std::string detail = handle.error[0] != '\0' ? handle.error : curl_easy_strerror(rc);
  if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) {
    return IoError("cannot reach " + options.endpoint + " (" + detail +
                   "); check the network, or HF_ENDPOINT if set");
  }
  return IoError(what + " failed: " + detail);
}

size_t AppendToString(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t n = size * count;
  if (body->size() + n > kMaxMetadataBytes) return 0;  // too large: abort the transfer
  body->append(data, n);
  return n;
}

// Stall and Ctrl-C watch for the file-list request (downloads have their own, with the bar).
struct MetadataWatch {
  const PullOptions* options = nullptr;
  curl_off_t last_bytes = -1;
  Clock::time_point last_change;
  bool stalled = false;
};

int MetadataProgress(void* user, curl_off_t, curl_off_t now_bytes, curl_off_t, curl_off_t) {
  auto* w = static_cast<MetadataWatch*>(user);
  if (IsCancelled(*w->options)) return 1;
  auto now = Clock::now();
  if (now_bytes != w->last_bytes) {
    w->last_bytes = now_bytes;
    w->last_change = now;
  } else if (now - w->last_change >= std::chrono::seconds(w->options->stall_timeout_seconds)) {
    w->stalled = true;
    return 1;
  }
  return 0;
}

Expected<RemoteRevision> FetchRevision(const ModelRef& spec, const PullOptions& options) {
  const std::string what = spec.repo + "@" + spec.revision;
  const std::string url = options.endpoint + "/api/models/" + spec.repo + "/revision/" +
                          UrlEncode(spec.revision) + "?blobs=true";
  CurlHandle handle(url, options);
  if (handle.curl == nullptr) return Internal("curl_easy_init failed");
  std::string body;
  curl_easy_setopt(handle.curl, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(handle.curl, CURLOPT_WRITEDATA, &body);
  MetadataWatch watch;
  watch.options = &options;
  watch.last_change = Clock::now();
  curl_easy_setopt(handle.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFOFUNCTION, MetadataProgress);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFODATA, &watch);
  CURLcode rc = curl_easy_perform(handle.curl);
  if (watch.stalled) rc = CURLE_OPERATION_TIMEDOUT;
  if (rc == CURLE_WRITE_ERROR) return Corrupt("the hub's file list for " + what + " is too large");
  if (rc != CURLE_OK)
    return TransferError(rc, handle, "fetching the file list of " + what, options);
  long code = handle.ResponseCode();
  if (code != 200) return HttpError(code, what, options);

  return ParseHubRevision(body, what);
}

// State shared with curl's callbacks while one file downloads.
struct Download {
  FILE* out = nullptr;
  const std::string* name = nullptr;
  const PullOptions* options = nullptr;
  CURL* curl = nullptr;
  uint64_t resume_from = 0;  // bytes already on disk when the request began
  uint64_t written = 0;      // bytes written by this request
  std::optional<uint64_t> expected_size;
  bool started = false;
  bool too_large = false;
  bool stalled = false;
  long status = 0;
  std::string error_body;
  // curl's own low-speed check averages over several seconds, so a stall right after a burst
  // is noticed late; this tracks the last byte itself.
  Clock::time_point last_data;
  uint64_t written_at_last_check = 0;
};

size_t WriteDownload(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<Download*>(user);
  size_t n = size * count;
  if (!d->started) {
    d->started = true;
    curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &d->status);
    // 200 to a Range request: the server sent the whole file, so start over.
    if (d->status == 200 && d->resume_from > 0) {
      if (ftruncate(fileno(d->out), 0) != 0 || std::fseek(d->out, 0, SEEK_SET) != 0) return 0;
      d->resume_from = 0;
    }
  }
  if (d->status != 200 && d->status != 206) {
    if (d->error_body.size() < kMaxErrorBodyBytes) d->error_body.append(data, n);
    return n;
  }
  if (d->expected_size && d->resume_from + d->written + n > *d->expected_size) {
    d->too_large = true;
    return 0;
  }
  if (std::fwrite(data, 1, n, d->out) != n) return 0;
  d->written += n;
  return n;
}

// The file's bytes so far, to the caller's progress display.
void ReportDownload(const Download& d, bool finished) {
  ReportProgress(d.options->progress, {.phase = *d.name,
                                       .done = d.resume_from + d.written,
                                       .total = d.expected_size.value_or(0),
                                       .unit = ProgressUnit::kBytes,
                                       .finished = finished});
}

int DownloadProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* d = static_cast<Download*>(user);
  if (IsCancelled(*d->options)) return 1;
  auto now = Clock::now();
  if (d->written != d->written_at_last_check) {
    d->written_at_last_check = d->written;
    d->last_data = now;
  } else if (now - d->last_data >= std::chrono::seconds(d->options->stall_timeout_seconds)) {
    d->stalled = true;
    return 1;
  }
  ReportDownload(*d, false);  // the display limits its own redraws
  return 0;
}

// One request for `file`, appending to `part` from its current size. Returns whether the
// error (if any) is worth retrying.
Status DownloadOnce(const std::string& url, const RemoteFile& file, const std::string& part,
                    const PullOptions& options, uint64_t* bytes_received, bool* retryable) {
  *retryable = false;
  std::error_code ec;
  uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (ec) have = 0;
  if (file.size && have > *file.size) {
    fs::remove(part, ec);  // longer than the file can be: not ours to resume
    have = 0;
  }
  if (file.size && have == *file.size && fs::exists(part, ec)) return Status::Ok();
  FILE* out = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
  if (out == nullptr) return IoError("cannot write " + part + ": " + std::strerror(errno));
  if (have > 0) {
    Log(options, "resuming " + file.name + " from byte " + std::to_string(have));
  }
  CurlHandle handle(url, options);
  if (handle.curl == nullptr) {
    std::fclose(out);
    return Internal("curl_easy_init failed");
  }
  Download d;
  d.out = out;
  d.name = &file.name;
  d.options = &options;
  d.curl = handle.curl;
  d.resume_from = have;
  d.expected_size = file.size;
  d.last_data = Clock::now();
  curl_easy_setopt(handle.curl, CURLOPT_WRITEFUNCTION, WriteDownload);
  curl_easy_setopt(handle.curl, CURLOPT_WRITEDATA, &d);
  curl_easy_setopt(handle.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFOFUNCTION, DownloadProgress);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFODATA, &d);
  if (have > 0) {
    curl_easy_setopt(handle.curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(have));
  }
  CURLcode rc = curl_easy_perform(handle.curl);
  bool close_failed = std::fclose(out) != 0;
  // The final state, however fast the transfer was.
  ReportDownload(d, rc == CURLE_OK && !d.too_large && (d.status == 200 || d.status == 206));
  *bytes_received = d.written;
  const std::string what = "download of " + file.name;
  if (d.too_large) {
    fs::remove(part, ec);
    return Corrupt(file.name + " is larger than the hub says (" + std::to_string(*file.size) +
                   " bytes); the download was discarded");
  }
  if (d.stalled) rc = CURLE_OPERATION_TIMEDOUT;
  long code = d.status != 0 ? d.status : handle.ResponseCode();
  if (code == 416 && have > 0) {
    fs::remove(part, ec);  // the server cannot resume this: start again
    *retryable = true;
    return IoError("the server could not resume " + file.name);
  }
  if (code != 0 && code != 200 && code != 206) return HttpError(code, file.name, options);
  if (rc != CURLE_OK) {
    *retryable = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
                 rc == CURLE_SEND_ERROR || rc == CURLE_COULDNT_CONNECT;
    return TransferError(rc, handle, what, options);
  }
  if (close_failed) return IoError("cannot write " + part);
  return Status::Ok();
}

// Downloads and verifies one file into `dest` (through dest + ".part").
Status FetchFile(const std::string& base_url, const RemoteFile& file, const std::string& dest,
                 const PullOptions& options, PullResult* result) {
  const std::string part = dest + ".part";
  const std::string url = base_url + UrlEncode(file.name);
  Log(options, "downloading " + file.name +
                   (file.size ? " (" + FormatBytes(static_cast<double>(*file.size)) + ")" : ""));
  auto begin = Clock::now();
  uint64_t received_total = 0;
  Status last;
  for (int attempt = 1; attempt <= std::max(1, options.max_attempts); ++attempt) {
    uint64_t received = 0;
    bool retryable = false;
    last = DownloadOnce(url, file, part, options, &received, &retryable);
    received_total += received;
    if (last.ok() || !retryable) break;
    Log(options, last.message() + "; retrying (" + std::to_string(attempt) + "/" +
                     std::to_string(options.max_attempts) + ")");
  }
  result->bytes_downloaded += received_total;
  TS_RETURN_IF_ERROR(last);
  std::error_code ec;
  uint64_t size = fs::file_size(part, ec);
  if (ec) return IoError("cannot stat " + part + ": " + ec.message());
  if (file.size && size != *file.size) {
    fs::remove(part, ec);
    return Corrupt(file.name + ": received " + std::to_string(size) + " bytes but the hub says " +
                   std::to_string(*file.size) + "; the download was discarded");
  }
  if (!file.lfs_sha256.empty()) {
    TS_ASSIGN_OR_RETURN(std::string digest, Sha256File(part));
    if (digest != file.lfs_sha256) {
      fs::remove(part, ec);
      return Corrupt(file.name + " failed verification (sha256 " + digest + ", the hub says " +
                     file.lfs_sha256 + "); the download was discarded");
    }
  } else if (IsCommitId(file.blob_id)) {
    TS_ASSIGN_OR_RETURN(std::string blob, GitBlobIdOfFile(part));
    if (blob != file.blob_id) {
      fs::remove(part, ec);
      return Corrupt(file.name + " failed verification (Git blob id " + blob + ", the hub says " +
                     file.blob_id + "); the download was discarded");
    }
  }
  if (std::rename(part.c_str(), dest.c_str()) != 0) {
    return IoError("cannot rename " + part + ": " + std::strerror(errno));
  }
  double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  Log(options, "verified " + file.name + ": " + FormatBytes(static_cast<double>(size)) + " in " +
                   std::to_string(static_cast<int>(seconds * 10) / 10.0).substr(0, 4) + " s");
  ++result->files_downloaded;
  return Status::Ok();
}

// True when the installed copy's `file` is provably what the hub now publishes: the lock's
// sha256 for LFS files, the Git blob id (recomputed) for the small ones.
bool InstalledCopyMatches(const std::optional<LockFile>& lock, const std::string& dest_dir,
                          const RemoteFile& file) {
  if (!lock || !file.size) return false;
  for (const auto& f : lock->files) {
    if (f.path != file.name || f.size != *file.size) continue;
    const std::string path = dest_dir + "/" + f.path;
    std::error_code ec;
    if (fs::file_size(path, ec) != f.size || ec) return false;
    if (!file.lfs_sha256.empty()) return f.sha256 == file.lfs_sha256;
    if (!IsCommitId(file.blob_id)) return false;
    auto blob = GitBlobIdOfFile(path);
    return blob && *blob == file.blob_id;
  }
  return false;
}

bool LockMatchesRevision(const LockFile& lock, const RemoteRevision& revision) {
  if (lock.commit != revision.commit || lock.files.size() != revision.files.size()) return false;
  for (const auto& remote : revision.files) {
    bool found = false;
    for (const auto& f : lock.files) {
      if (f.path != remote.name) continue;
      found = (!remote.size || f.size == *remote.size) &&
              (remote.lfs_sha256.empty() || f.sha256 == remote.lfs_sha256);
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

Expected<RemoteRevision> ParseHubRevision(std::string_view body, const std::string& what) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(body, "hub file list"));
  auto bad = [&](const std::string& why) {
    return Corrupt("the hub's file list for " + what + " is malformed: " + why);
  };
  if (!doc.is_object()) return bad("not an object");
  RemoteRevision revision;
  auto sha = doc.find("sha");
  if (sha == doc.end() || !sha->is_string() || !IsCommitId(sha->get<std::string>())) {
    return bad("no 40-digit commit \"sha\"");
  }
  revision.commit = sha->get<std::string>();
  auto siblings = doc.find("siblings");
  if (siblings == doc.end() || !siblings->is_array()) return bad("no \"siblings\" array");
  for (const auto& s : *siblings) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) {
      return bad("a sibling has no \"rfilename\"");
    }
    RemoteFile file;
    file.name = s["rfilename"].get<std::string>();
    if (!IsNeededModelFile(file.name)) continue;
    if (revision.files.size() >= kMaxModelFiles) {
      return bad("more than " + std::to_string(kMaxModelFiles) + " model files");
    }
    for (const auto& seen : revision.files) {
      if (seen.name == file.name) return bad(file.name + " is listed twice");
    }
    if (s.contains("size") && s["size"].is_number_unsigned()) file.size = s["size"].get<uint64_t>();
    if (s.contains("blobId") && s["blobId"].is_string()) file.blob_id = s["blobId"];
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const auto& lfs = s["lfs"];
      if (!lfs.contains("sha256") || !lfs["sha256"].is_string() ||
          !IsSha256Hex(lfs["sha256"].get<std::string>())) {
        return bad(file.name + " has LFS metadata without a sha256");
      }
      file.lfs_sha256 = lfs["sha256"];
      if (lfs.contains("size") && lfs["size"].is_number_unsigned()) {
        file.size = lfs["size"].get<uint64_t>();
      }
    }
    // Weights are always LFS on the hub; without a hash they cannot be checked.
    if (file.name.ends_with(".safetensors") && file.lfs_sha256.empty()) {
      return bad(file.name + " has no LFS sha256, so it cannot be verified");
    }
    revision.files.push_back(std::move(file));
  }
  bool has_config = false, has_weights = false;
  for (const auto& f : revision.files) {
    has_config |= f.name == "config.json";
    has_weights |= f.name.ends_with(".safetensors");
  }
  if (!has_config || !has_weights) {
    return Unsupported(what +
                       " has no config.json or no .safetensors weights; tessera needs a "
                       "Hugging Face transformers checkpoint");
  }
  return revision;
}

bool IsNeededModelFile(const std::string& name) {
  static const char* const kFixed[] = {"config.json",
                                       "generation_config.json",
                                       "model.safetensors.index.json",
                                       "tokenizer.json",
                                       "tokenizer_config.json",
                                       "chat_template.jinja",
                                       "special_tokens_map.json"};
  for (const char* fixed : kFixed) {
    if (name == fixed) return true;
  }
  if (!name.ends_with(".safetensors") || name.size() > 200) return false;
  // Weights shards: a plain top-level name.
  if (name.front() == '.' || name.front() == '-') return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

namespace {

// An flock on <models dir>/.pull-NAME.lock. The file is removed when the pull ends, so no empty
// lock files stay behind. Safe with concurrent pulls because it is unlinked only by its holder,
// while holding the lock, and a pull that gets the lock checks that the path still names the
// file it locked (else it locked a file just unlinked, and tries again with a fresh one).
class PullLock {
 public:
  static Expected<PullLock> Acquire(const std::string& path, const std::string& name) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      int fd = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      if (fd < 0) return IoError("cannot create " + path + ": " + std::strerror(errno));
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return ResourceExhausted("another `tessera pull " + name +
                                 "` is running; wait for it to finish");
      }
      struct stat held {
      }, named{};
      if (fstat(fd, &held) == 0 && stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
          held.st_ino == named.st_ino) {
        return PullLock(path, fd);
      }
      close(fd);  // the holder before us removed it: lock the new one
    }
    return IoError("cannot lock " + path + ": it keeps being replaced");
  }
  PullLock(PullLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
    other.fd_ = -1;
  }
  PullLock(const PullLock&) = delete;
  PullLock& operator=(const PullLock&) = delete;
  PullLock& operator=(PullLock&&) = delete;
  ~PullLock() {
    if (fd_ < 0) return;
    unlink(path_.c_str());  // still holding the lock
    close(fd_);
  }

 private:
  PullLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace

PullOptions PullOptionsFromEnvironment() {
  PullOptions options;
  if (auto endpoint = ReadEnv(EnvVar::kHfEndpoint)) options.endpoint = *endpoint;
  while (options.endpoint.ends_with("/")) options.endpoint.pop_back();
  if (auto token = ReadEnv(EnvVar::kHfToken)) options.token = *token;
  return options;
}

Expected<PullResult> PullModel(const ModelRef& spec, const std::string& models_dir,
                               const PullOptions& options) {
  std::error_code ec;
  fs::create_directories(models_dir, ec);
  if (ec) return IoError("cannot create " + models_dir + ": " + ec.message());

  // One pull per model at a time (released when the pull ends or the process dies).
  TS_ASSIGN_OR_RETURN(
      PullLock pull_lock,
      PullLock::Acquire(models_dir + "/.pull-" + spec.store_name + ".lock", spec.store_name));

  TS_ASSIGN_OR_RETURN(RemoteRevision revision, FetchRevision(spec, options));
  if (options.listed) options.listed(revision);
  PullResult result;
  result.commit = revision.commit;
  result.dir = models_dir + "/" + spec.store_name;

  std::optional<LockFile> installed;
  if (auto lock = ReadLockFile(result.dir)) installed = std::move(*lock);
  if (!options.force && installed && LockMatchesRevision(*installed, revision) &&
      CheckAgainstLock(result.dir, *installed, /*rehash=*/false).ok()) {
    result.already_current = true;
    return result;
  }

  // Staging survives failures so the next pull resumes; it belongs to one commit.
  const std::string staging = models_dir + "/.staging-" + spec.store_name;
  const std::string marker = staging + "/.commit";
  std::ifstream marker_in(marker);
  std::string staged_commit;
  std::getline(marker_in, staged_commit);
  if (options.force || staged_commit != revision.commit) fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return IoError("cannot create " + staging + ": " + ec.message());
  {
    std::ofstream marker_out(marker, std::ios::trunc);
    marker_out << revision.commit << "\n";
  }

  const std::string base_url =
      options.endpoint + "/" + spec.repo + "/resolve/" + revision.commit + "/";
  LockFile lock{spec.repo, spec.revision, revision.commit, {}};
  for (const auto& file : revision.files) {
    if (IsCancelled(options)) {
      return Cancelled("interrupted; the installed copy is untouched and the next pull resumes");
    }
    const std::string dest = staging + "/" + file.name;
    bool have_verified = false;
    if (!options.force && InstalledCopyMatches(installed, result.dir, file) &&
        !fs::exists(dest, ec)) {
      fs::copy_file(result.dir + "/" + file.name, dest, ec);
      if (!ec) {
        ++result.files_reused;
        have_verified = true;
      }
    }
    if (!have_verified && fs::exists(dest, ec)) {
      // Finished by an earlier, interrupted pull of this commit; check it again.
      auto digest = Sha256File(dest);
      have_verified = digest && (file.lfs_sha256.empty() || *digest == file.lfs_sha256) &&
                      (!file.size || fs::file_size(dest, ec) == *file.size);
      if (!have_verified) fs::remove(dest, ec);
    }
    if (!have_verified) {
      Status st = FetchFile(base_url, file, dest, options, &result);
      if (!st.ok()) {
        return st.WithContext(result.dir + (installed ? " (installed copy untouched)" : ""));
      }
    }
    TS_ASSIGN_OR_RETURN(std::string sha256, Sha256File(dest));
    lock.files.push_back({file.name, fs::file_size(dest, ec), sha256});
  }
  // Leave only what the lock lists (and the lock itself).
  for (const auto& entry : fs::directory_iterator(staging, ec)) {
    const std::string name = entry.path().filename().string();
    bool listed = false;
    for (const auto& f : lock.files) listed |= f.path == name;
    if (!listed) fs::remove_all(entry.path(), ec);
  }
  if (options.installing) options.installing();
  TS_RETURN_IF_ERROR(WriteLockFile(staging, lock));
  TS_RETURN_IF_ERROR(SwapDirectoryIntoPlace(staging, result.dir));
  return result;
}

}  // namespace tessera
