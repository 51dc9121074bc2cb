#include "server/ollama_pull.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "catalog/builtin_model.h"
#include "catalog/model_store.h"
#include "server/api_service.h"
#include "server/api_service_internal.h"
#include "server/json_fields.h"
#include "server/ollama_api.h"
#include "worker/worker.h"

namespace tessera::server {
namespace {

using namespace api_internal;  // NOLINT: the service's own helpers
using ojson = nlohmann::ordered_json;

constexpr std::string_view kLatestTag = ":latest";

std::string HowToName() {
  return "give a tessera catalog name (`tessera list --catalog`, e.g. qwen3-0.6b) or a Hugging "
         "Face repository ORG/REPO[@REVISION]";
}

// The pulls running in this server: at most one per model name, kMaxConcurrentPulls in all,
// each on a thread of its own pool. ApiService::Stop (the row's stop) ends them, before the
// front end that carries their answers is destroyed.
class PullRegistry {
 public:
  PullRegistry() : threads_(kMaxConcurrentPulls) {}
  ~PullRegistry() { Stop(); }
  // Stops every pull (each notices within a second) and joins their threads.
  void Stop() {
    stopping_ = true;
    threads_.Stop();
  }
  PullRegistry(const PullRegistry&) = delete;
  PullRegistry& operator=(const PullRegistry&) = delete;

  // Why a pull of `name` cannot start now, or nothing (then it is counted until Leave).
  std::optional<ApiError> Enter(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_.count(name) > 0) {
      return ServerError(409, "pull_in_progress",
                         "a pull of " + name +
                             " is already running on this server (its progress goes to the "
                             "request that started it); wait for it to end, then pull again");
    }
    if (static_cast<int>(active_.size()) >= kMaxConcurrentPulls) {
      return ServerError(503, "too_many_pulls",
                         "this server already runs " + std::to_string(kMaxConcurrentPulls) +
                             " pulls, its limit; try again when one has ended");
    }
    active_.insert(name);
    return std::nullopt;
  }
  void Leave(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(name);
  }
  bool stopping() const { return stopping_.load(); }
  void Post(std::function<void()> task) { threads_.Post(std::move(task)); }

 private:
  std::mutex mu_;
  std::set<std::string> active_;
  std::atomic<bool> stopping_{false};
  JobThreads threads_;
};

// Ollama answers a failed pull 500 unless it knows better.
int PullErrorStatus(const Status& st) {
  switch (st.code()) {
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kResourceExhausted:  // another process pulls the same model
      return 409;
    default:
      return 500;
  }
}

std::string Line(const ojson& line) {
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// The served entry of a pulled model, with its kind read from the checkpoint.
Expected<worker::ModelEntry> PulledModelEntry(const ModelRef& spec, const std::string& dir) {
  std::vector<worker::ModelEntry> one = {{ServedNameOfPull(spec), dir}};
  TS_RETURN_IF_ERROR(worker::ResolveModelKinds(one, {}));
  return one.front();
}

// On a pull thread: the whole pull, answered streamed or whole.
void RunPull(ApiService& s, ApiCall& call, const ModelRef& spec, const std::string& models_dir,
             bool stream, const PullRegistry& registry) {
  HttpExchange& ex = *call.exchange;
  bool began = false;
  bool open = true;
  OllamaPullProgress progress([&](ojson line) {
    if (!stream || !open) return;
    if (!began) {
      std::vector<HttpHeader> headers = call.cors;
      headers.push_back({"Cache-Control", "no-cache"});
      ex.BeginStream(200, std::move(headers), "application/x-ndjson");
      began = true;
    }
    open = ex.StreamWrite(Line(line));
  });
  PullOptions options = PullOptionsFromEnvironment();
  // A draining server (SIGTERM) stops its pulls at once: the next pull resumes them.
  options.cancelled = [&] {
    return registry.stopping() || s.draining() || !open || ex.client_gone();
  };
  options.listed = [&](const RemoteRevision& revision) { progress.Listed(revision); };
  options.progress = [&](const ProgressEvent& event) { progress.File(event); };
  options.installing = [&] { progress.Installing(); };
  progress.Begin();
  Status failed;
  if (auto result = PullModel(spec, models_dir, options); !result) {
    failed = result.status();
  } else if (auto entry = PulledModelEntry(spec, result->dir); !entry) {
    failed = entry.status().WithContext("pulled into " + result->dir + " but it cannot be served");
  } else {
    if (s.AddServedModel(*entry)) {
      std::fprintf(stderr, "tessera serve: pulled and now serving model '%s' (%s) from %s\n",
                   entry->name.c_str(), std::string(ModelKindName(entry->kind)).c_str(),
                   entry->dir.c_str());
    }
    progress.Finish();
  }
  const bool gone = !open || ex.client_gone();
  ex.Note([&](AccessRecord& r) {
    r.model = ServedNameOfPull(spec);
    r.finish = gone ? "client_disconnected" : failed.ok() ? "success" : "error";
  });
  if (failed.ok()) {
    if (!stream) s.SendJson(call, 200, {{"status", "success"}});
  } else if (!began) {
    s.SendError(call, ServerError(PullErrorStatus(failed), "pull_failed", failed.message()));
  } else if (open) {
    ex.StreamWrite(Line({{"error", failed.message()}}));
  }
  if (began) ex.EndStream();
}

}  // namespace

std::variant<OllamaPullRequest, ApiError> ParseOllamaPull(const ojson& body) {
  static constexpr std::string_view kFields[] = {"model",    "name",     "stream",
                                                 "insecure", "username", "password"};
  if (auto e = RefuseUnknownOllamaFields(body, kFields, "/api/pull")) return *e;
  OllamaPullRequest r;
  for (const char* key : {"model", "name"}) {
    if (auto e = ReadString(body, key, &r.name)) return *e;
    if (!r.name.empty()) break;
  }
  if (r.name.empty())
    return InvalidField("model", "model must name the model to pull; " + HowToName());
  if (auto e = ReadBool(body, "stream", &r.stream)) return *e;
  bool insecure = false;  // Ollama ignores it too; HF_ENDPOINT's scheme decides
  if (auto e = ReadBool(body, "insecure", &insecure)) return *e;
  for (const char* refused : {"username", "password"}) {
    std::string given;
    if (auto e = ReadString(body, refused, &given)) return *e;
    if (!given.empty()) {
      return InvalidField(refused, std::string(refused) +
                                       " is not taken: the server authenticates to the hub with "
                                       "its HF_TOKEN; remove it");
    }
  }
  return r;
}

std::variant<ModelRef, ApiError> OllamaPullTarget(const std::string& name, const Catalog& catalog) {
  std::string text = name;
  if (text.ends_with(kLatestTag)) text.resize(text.size() - kLatestTag.size());
  if (text.find(':') != std::string::npos) {
    return InvalidField("model", "'" + name +
                                     "' is an Ollama registry name; tessera pulls from Hugging "
                                     "Face: " +
                                     HowToName() +
                                     " (a model pulled with `ollama pull` is served from "
                                     "Ollama's store as it is)");
  }
  if (text == kBuiltinModelName) {
    return InvalidField("model", std::string(kBuiltinModelName) +
                                     " is the built-in demo model, carried in the binary: nothing "
                                     "to pull; serve it with `tessera serve --model " +
                                     kBuiltinModelName + "`");
  }
  auto spec = ParseModelRef(text, catalog);
  if (!spec) {
    return InvalidField("model", "cannot pull '" + name + "': " + spec.status().message());
  }
  return *spec;
}

std::string ServedNameOfPull(const ModelRef& spec) {
  return spec.entry != nullptr ? spec.store_name : spec.repo;
}

void OllamaPullProgress::SendStatus(const char* status) {
  if (!statuses_sent_.insert(status).second) return;
  emit_({{"status", status}});
}

void OllamaPullProgress::Begin() {
  SendStatus("pulling manifest");
}

void OllamaPullProgress::Listed(const RemoteRevision& revision) {
  for (const RemoteFile& f : revision.files) {
    if (files_.count(f.name) > 0) continue;
    order_.push_back(f.name);
    files_[f.name] = {f.lfs_sha256, f.size.value_or(0)};
  }
}

ojson OllamaPullProgress::FileLine(const std::string& name, const FileState& f,
                                   uint64_t completed) const {
  ojson line = {{"status", "pulling " + (f.sha256.empty() ? name : f.sha256.substr(0, 12))}};
  if (!f.sha256.empty()) line["digest"] = "sha256:" + f.sha256;
  // Go's omitempty, as Ollama writes them: a zero is left out.
  if (f.size > 0) line["total"] = f.size;
  if (completed > 0) line["completed"] = completed;
  return line;
}

void OllamaPullProgress::File(const ProgressEvent& event) {
  auto it = files_.find(std::string(event.phase));
  if (it == files_.end()) return;  // not a file the list named
  FileState& f = it->second;
  if (f.done) return;
  if (event.total > 0) f.size = event.total;
  const uint64_t done = f.size > 0 ? std::min(event.done, f.size) : event.done;
  const int percent = f.size > 0 ? static_cast<int>(done * 100 / f.size) : 0;
  if (!event.finished && percent == f.shown_percent) return;
  f.shown_percent = percent;
  f.done = event.finished;
  emit_(FileLine(it->first, f, done));
}

void OllamaPullProgress::Installing() {
  // Every file is verified by now (each as its download ended); those the pull took from the
  // installed copy or an earlier staging are shown complete.
  for (const std::string& name : order_) {
    FileState& f = files_[name];
    if (f.done) continue;
    f.done = true;
    emit_(FileLine(name, f, f.size));
  }
  SendStatus("verifying sha256 digest");
  SendStatus("writing manifest");
}

void OllamaPullProgress::Finish() {
  Installing();
  SendStatus("success");
}

std::vector<Endpoint> OllamaPullEndpoints() {
  auto registry = std::make_shared<PullRegistry>();
  Endpoint e;
  e.path = "/api/pull";
  e.method = EndpointMethod::kPost;
  e.dialect = ApiDialect::kOllama;
  e.handler = [registry](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
    auto body = ParseJsonBody(call->request.body);
    if (auto* e = std::get_if<ApiError>(&body)) return s.SendError(*call, *e);
    auto request = ParseOllamaPull(std::get<ojson>(body));
    if (auto* e = std::get_if<ApiError>(&request)) return s.SendError(*call, *e);
    const auto& pull = std::get<OllamaPullRequest>(request);
    auto catalog = BuiltinCatalog();
    auto models_dir = ModelsDir();
    if (!catalog || !models_dir) {
      const Status& st = !catalog ? catalog.status() : models_dir.status();
      return s.SendError(*call, ServerError(500, "pull_failed", st.message()));
    }
    auto target = OllamaPullTarget(pull.name, **catalog);
    if (auto* e = std::get_if<ApiError>(&target)) return s.SendError(*call, *e);
    ModelRef spec = std::get<ModelRef>(target);
    if (auto busy = registry->Enter(spec.store_name)) return s.SendError(*call, *busy);
    // The registry outlives the task (its destructor joins the pool), so a plain pointer.
    PullRegistry* pulls = registry.get();
    pulls->Post([&s, call, spec, dir = *models_dir, stream = pull.stream, pulls] {
      RunPull(s, *call, spec, dir, stream, *pulls);
      pulls->Leave(spec.store_name);
    });
  };
  e.stop = [registry] { registry->Stop(); };
  return {std::move(e)};
}

}  // namespace tessera::server
