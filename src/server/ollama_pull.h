// POST /api/pull: Ollama's pull call, run by tessera's own pull (catalog/pull.h) into tessera's
// store ($TESSERA_MODELS), from the Hugging Face hub or HF_ENDPOINT, verified and resumable;
// the pulled model is then served (ApiService::AddServedModel) and listed by /api/tags. The
// progress travels in Ollama's shape (api.ProgressResponse), one JSON object a line:
//   {"status":"pulling manifest"}
//   {"status":"pulling 3f1a2b4c5d6e","digest":"sha256:3f1a...","total":N,"completed":M}  (LFS)
//   {"status":"pulling config.json","total":N,"completed":M}                           (Git)
//   {"status":"verifying sha256 digest"} {"status":"writing manifest"} {"status":"success"}
// or a last {"error":"..."} line; with "stream": false one {"status":"success"} object (or
// the error with its status). Pulls run on their own threads (at most kMaxConcurrentPulls,
// one per model name), never on the HTTP front end's or the generation jobs' threads, and stop
// when the client leaves.
//
//   for (Endpoint& e : OllamaPullEndpoints()) table.push_back(std::move(e));
//
//   // The parts alone (tests):
//   auto request = ParseOllamaPull(body);                     // {"model", "stream", ...}
//   auto target = OllamaPullTarget("qwen3-0.6b", *catalog);   // a ModelRef, or the 400
//   OllamaPullProgress progress([&](nlohmann::ordered_json line) { lines.push_back(line); });
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/progress.h"
#include "catalog/catalog.h"
#include "catalog/model_names.h"
#include "catalog/pull.h"
#include "server/endpoints.h"
#include "server/openai_api.h"

namespace tessera::server {

// Pulls of different models that may run at once; one more is a 503 saying so.
inline constexpr int kMaxConcurrentPulls = 2;

struct OllamaPullRequest {
  std::string name;  // as the client wrote it ("model", else the older "name")
  bool stream = true;
};

// {"model"|"name", "stream", "insecure"}: insecure is accepted and has no effect (Ollama
// ignores it too); "username"/"password" given are refused (the server's HF_TOKEN
// authenticates); any other field is refused by name.
std::variant<OllamaPullRequest, ApiError> ParseOllamaPull(const nlohmann::ordered_json& body);

// What `name` pulls: a catalog id or ORG/REPO[@REVISION], as `tessera pull` takes them, with
// Ollama's default tag ":latest" allowed. Another tag ("qwen3:0.6b", an Ollama registry name)
// and the built-in model are refused with what to do instead.
std::variant<ModelRef, ApiError> OllamaPullTarget(const std::string& name, const Catalog& catalog);

// The name the pulled model is served under, as `tessera list` shows it: the catalog id, or
// ORG/REPO.
std::string ServedNameOfPull(const ModelRef& spec);

// Turns a pull's callbacks (PullOptions::listed, progress, installing) into Ollama's progress
// lines, in Ollama's order and each status once: a file's line at its first event, at each
// whole percent and when it ends; Finish() shows every file not yet shown as complete (taken
// from the installed copy, or already current), then the statuses not yet sent, then success.
class OllamaPullProgress {
 public:
  using Emit = std::function<void(nlohmann::ordered_json line)>;
  explicit OllamaPullProgress(Emit emit) : emit_(std::move(emit)) {}

  void Begin();  // {"status":"pulling manifest"}
  void Listed(const RemoteRevision& revision);
  void File(const ProgressEvent& event);
  void Installing();  // "verifying sha256 digest", "writing manifest"
  void Finish();      // the rest, then {"status":"success"}

 private:
  struct FileState {
    std::string sha256;  // empty for files kept in Git
    uint64_t size = 0;
    int shown_percent = -1;  // the last whole percent sent; -1: none yet
    bool done = false;
  };
  nlohmann::ordered_json FileLine(const std::string& name, const FileState& f,
                                  uint64_t completed) const;
  void SendStatus(const char* status);

  Emit emit_;
  std::vector<std::string> order_;  // files in the hub's order
  std::map<std::string, FileState> files_;
  std::set<std::string> statuses_sent_;
};

// The /api/pull row (its handler owns the running pulls).
std::vector<Endpoint> OllamaPullEndpoints();

}  // namespace tessera::server
