// `tessera pull`: downloads a model from the Hugging Face hub (or any server laid out like it)
// into tessera's store, verified, resumable and never half-installed.
//
//   PullOptions options = PullOptionsFromEnvironment();   // HF_ENDPOINT, HF_TOKEN
//   TS_ASSIGN_OR_RETURN(ModelRef spec, ParseModelRef("qwen3-0.6b", *catalog));
//   TS_ASSIGN_OR_RETURN(PullResult r, PullModel(spec, models_dir, options));
//
// Protocol (what a test server must serve):
//   GET  {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
//        -> {"sha": COMMIT, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256",
//           "size"}}]}  (the hub's files-metadata form of the model-info call)
//   GET  {endpoint}/{repo}/resolve/{COMMIT}/{file}   with "Range: bytes=N-" to resume
// Every LFS file must match its sha256; other files their size and Git blob id when given.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "catalog/model_names.h"

namespace tessera {

struct RemoteRevision;  // below

struct PullOptions {
  std::string endpoint = "https://huggingface.co";
  std::string token;               // sent as "Authorization: Bearer" when set
  int stall_timeout_seconds = 30;  // no byte for this long ends the download (also connect)
  int max_attempts = 3;            // per file, for dropped connections (resumed with Range)
  bool force = false;              // download and verify everything again
  // Asked at least once a second while the pull runs (also while a download stalls): true
  // stops it cleanly (SIGINT; a server's client that left). May be empty.
  std::function<bool()> cancelled;
  std::function<void(const std::string&)> log;  // notes (resuming, verified); may be empty
  ProgressCallback progress;  // bytes of each file as it downloads (phase: the file's name)
  // Once the hub's file list is read, before anything is fetched: the files the pull needs.
  std::function<void(const RemoteRevision&)> listed;
  // Once every file is downloaded and verified, before the lock file is written and the copy
  // swapped in (not called when the installed copy is already current).
  std::function<void()> installing;
};

// Defaults, with HF_ENDPOINT and HF_TOKEN applied.
PullOptions PullOptionsFromEnvironment();

struct PullResult {
  std::string dir;
  std::string commit;
  bool already_current = false;
  uint64_t bytes_downloaded = 0;
  int files_downloaded = 0;
  int files_reused = 0;  // identical files taken from the installed copy
};

// Pulls `spec` into `models_dir`/<store_name>. On any failure the installed copy (if any) is
// untouched; partial files stay in `models_dir`/.staging-<name> for the next pull to resume.
Expected<PullResult> PullModel(const ModelRef& spec, const std::string& models_dir,
                               const PullOptions& options);

// What the hub says one needed file is.
struct RemoteFile {
  std::string name;
  std::optional<uint64_t> size;
  std::string lfs_sha256;  // empty for files kept in Git
  std::string blob_id;     // Git blob id, when given
};

struct RemoteRevision {
  std::string commit;             // 40 hex digits
  std::vector<RemoteFile> files;  // only the needed files (IsNeededModelFile), each once
};

// Parses the body of the revision call (untrusted: every field is checked); `what` names the
// repository in errors. Refuses a listing without config.json or weights, a weights file
// without an LFS sha256 and a file listed twice.
Expected<RemoteRevision> ParseHubRevision(std::string_view body, const std::string& what);

// True for the files a model needs: config.json, generation_config.json, *.safetensors and
// model.safetensors.index.json, tokenizer.json, tokenizer_config.json, chat_template.jinja,
// special_tokens_map.json (top level only).
bool IsNeededModelFile(const std::string& name);

}  // namespace tessera
