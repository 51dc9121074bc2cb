#include "worker/worker.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/progress.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "grammar/tokenizer_vocabulary.h"
#include "runtime/gguf_loading.h"
#include "runtime/loaded_model.h"
#include "worker/decision_job.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"
#include "worker/step_slicer.h"
#include "worker/systemone_job.h"
#include "worker/task_job.h"

namespace tessera::worker {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct ResidentModel {
  std::string name;
  ModelKindInfo kind;  // the checkpoint's, with the operator's declared kind
  std::unique_ptr<LoadedModel> model;
  std::shared_ptr<const TokenVocabulary> vocabulary;  // built on first constrained job
  int active_jobs = 0;
  uint64_t last_used = 0;
  StepCost step_cost{};  // measured, for the time slices of StepRowLimit
};

class Worker {
 public:
  Worker(int fd, const WorkerOptions& options) : fd_(fd), options_(options) {}

  int Run() {
    if (options_.models.empty()) {
      std::fprintf(stderr, "tessera worker: no models given\n");
      return 2;
    }
    if (options_.prewarm) {
      double load_ms = 0;
      bool busy = false;
      auto model = Acquire(options_.models.front().name, &load_ms, &busy);
      if (!model) {
        // The message names the cause for the operator's log; the server keeps /ready at 503
        // and does not restart a worker that would fail the same way.
        std::fprintf(stderr, "tessera worker: %s\n", model.status().message().c_str());
        return kWorkerExitModelLoadFailed;
      }
    }
    if (!WriteFrame(fd_, Encode(ReadyMessage{options_.models.front().name})).ok()) return 0;
    // The loop: take every frame waiting on the socket (blocking only when there is nothing
    // to run), then one scheduler step per model with work, each cut to its time slice while
    // another model decodes (StepModels), then each job's own turn (AfterStep: a task job
    // builds or submits its next block). Jobs join and leave the running batch between steps;
    // a Cancel takes effect at the next step.
    while (!closed_) {
      const bool busy = HasWork();
      pollfd p{fd_, POLLIN, 0};
      int ready = ::poll(&p, 1, busy ? 0 : -1);
      while (ready > 0 && !closed_) {
        auto frame = ReadFrame(fd_);
        if (!frame) return 0;  // the server went away: nothing left to serve
        if (!HandleFrame(*frame)) return 1;
        p.revents = 0;
        ready = ::poll(&p, 1, 0);
      }
      if (ready < 0 && errno != EINTR) return 1;
      if (int exit_code = StepModels(); exit_code != 0) return exit_code;
      for (auto& [id, running] : jobs_) running.job->AfterStep();
      ReapEnded();
      RetryDeferred();
    }
    return 0;
  }

  void ReapEnded() {
    for (uint64_t id : ended_) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      --it->second.model->active_jobs;
      jobs_.erase(it);
    }
    ended_.clear();
  }

 private:
  bool HasWork() const {
    for (const auto& m : resident_)
      if (m->model->scheduler().HasWork()) return true;
    for (const auto& [id, running] : jobs_)
      if (running.job->HasPendingWork()) return true;
    return false;
  }

  // One round: a step of each model with work, each cut to its time slice while another model
  // is decoding (StepRowLimit, step_slicer.h). Returns an exit code, 0 to go on.
  int StepModels() {
    loads_.clear();
    for (const auto& m : resident_) {
      const Scheduler& sched = m->model->scheduler();
      loads_.push_back({sched.HasWork(), sched.decoding() > 0, m->step_cost});
    }
    for (size_t i = 0; i < resident_.size(); ++i) {
      if (!loads_[i].has_work) continue;
      ResidentModel& m = *resident_[i];
      Scheduler& sched = m.model->scheduler();
      const auto t0 = std::chrono::steady_clock::now();
      Status st = sched.Step(StepRowLimit(i, loads_));
      m.step_cost.Record(sched.last_step_rows(), MsSince(t0));
      loads_[i].cost = m.step_cost;
      loads_[i].decoding = sched.decoding() > 0;
      if (st.ok()) continue;
      // The sequences of that batch were failed (each job got its error).
      std::fprintf(stderr, "tessera worker: step failed: %s\n", st.message().c_str());
      if (st.code() == ErrorCode::kDeviceLost) {
        // Nothing runs on a lost NPU again in this process: exit, and the server starts a
        // new worker (which opens the device afresh, or fails to load and says why).
        std::fprintf(stderr,
                     "tessera worker: the NPU was lost; exiting so the server "
                     "restarts the worker\n");
        return kWorkerExitNpuLost;
      }
    }
    return 0;
  }

  // False on a frame that cannot be a job request (the protocol is broken).
  bool HandleFrame(const std::string& frame) {
    auto type = PeekMessageType(frame);
    if (!type) return true;
    if (*type == MessageType::kCancel) {
      auto cancel = Decode<CancelRequest>(frame);
      if (cancel) CancelJob(cancel->job_id);
      return true;
    }
    if (*type == MessageType::kAddModel) {
      auto added = Decode<AddModelMessage>(frame);
      if (!added) return false;
      if (FindEntry(added->name) == nullptr) {
        added_models_.push_back({added->name, added->dir, added->kind});
        std::fprintf(stderr, "tessera worker: serving model '%s' from %s\n", added->name.c_str(),
                     added->dir.c_str());
      }
      return true;
    }
    if (*type != MessageType::kJobRequest) return true;
    auto job = Decode<JobRequest>(frame);
    if (!job) {
      std::fprintf(stderr, "tessera worker: %s\n", job.status().message().c_str());
      return false;
    }
    HandleJob(std::move(*job));
    return true;
  }

  void CancelJob(uint64_t job_id) {
    if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      it->second.job->Cancel();
      return;
    }
    // A job waiting for its model to be loaded: answered at once, without running.
    for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
      if (it->job_id != job_id) continue;
      deferred_.erase(it);
      DoneMessage done;
      done.job_id = job_id;
      done.finish_reason = FinishReason::kCancelled;
      Send(Encode(done));
      return;
    }
  }

  // The resident model `name`, loading it (and unloading the least recently used idle one
  // past the residency limit). Unavailable: every resident model is busy, try again later.
  // The model, loaded if need be. *busy says the error is only that every resident model is in
  // use (the job waits for one to finish); any other error is the model's own.
  Expected<ResidentModel*> Acquire(const std::string& name, double* load_ms, bool* busy) {
    *busy = false;
    ++clock_;
    for (auto& m : resident_) {
      if (m->name == name) {
        m->last_used = clock_;
        return m.get();
      }
    }
    const ModelEntry* entry = FindEntry(name);
    if (entry == nullptr) return NotFound("the model '" + name + "' is not served here");
    while (!resident_.empty() && static_cast<int>(resident_.size()) >= options_.max_loaded_models) {
      auto lru = resident_.end();
      for (auto it = resident_.begin(); it != resident_.end(); ++it) {
        if ((*it)->active_jobs > 0 || (*it)->model->scheduler().HasWork()) continue;
        if (lru == resident_.end() || (*it)->last_used < (*lru)->last_used) lru = it;
      }
      if (lru == resident_.end()) {
        *busy = true;
        return ResourceExhausted("every resident model is busy");
      }
      std::fprintf(stderr, "tessera worker: unloading model '%s'\n", (*lru)->name.c_str());
      resident_.erase(lru);
    }
    auto t0 = std::chrono::steady_clock::now();
    LogLoad(name, "loading from " + entry->dir, std::nullopt);
    TS_ASSIGN_OR_RETURN(ModelKindInfo kind, DetectEntryKind(*entry));
    TS_ASSIGN_OR_RETURN(std::optional<GgufModel> gguf, GgufModelOfEntry(*entry));
    kind.kind = entry->kind;
    ModelLoadOptions o;
    o.placement = options_.placement;
    o.context = options_.context;
    o.parallel = options_.parallel;
    o.kv_memory_mib = options_.kv_memory_mib;
    o.task_model = !GeneratesText(entry->kind);
    o.kv_cache = options_.kv_cache;
    o.bf16_activations = options_.bf16_activations;
    o.cpu_isa = options_.cpu_isa;
    o.npu = options_.npu;
    o.tool_call_syntax = entry->tool_call_syntax;
    o.prewarm = true;
    auto log = [&](const std::string& line) { LogLoad(name, line, std::nullopt); };
    // Each phase as plain lines (a first-use conversion every 10% or 5 s), in the log format.
    ProgressRenderer phases(ProgressStyle::kPlain, [&](std::string_view text) {
      while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
      LogLoad(name, std::string(text), std::nullopt);
    });
    o.progress = phases.Callback();
    TS_ASSIGN_OR_RETURN(
        std::unique_ptr<LoadedModel> loaded,
        gguf ? LoadedModel::Open(*gguf, o, log) : LoadedModel::Open(entry->dir, o, log));
    auto m = std::make_unique<ResidentModel>();
    m->name = name;
    m->kind = std::move(kind);
    m->model = std::move(loaded);
    m->last_used = clock_;
    *load_ms = MsSince(t0);
    // The soak gate counts these lines: "loaded and warmed" stays in the text.
    LogLoad(name,
            "loaded and warmed in " + std::to_string(std::lround(*load_ms)) + " ms (" +
                m->model->Describe() + ")",
            *load_ms);
    resident_.push_back(std::move(m));
    return resident_.back().get();
  }

  // The model served as `name`: given at start, or added since (AddModelMessage).
  const ModelEntry* FindEntry(const std::string& name) const {
    for (const ModelEntry& e : options_.models) {
      if (e.name == name) return &e;
    }
    for (const ModelEntry& e : added_models_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }

  // One model-load line on stderr: "tessera worker: model 'x' TEXT", or with --log-format
  // json {"type": "model_load", "ts", "model", "message"[, "load_ms" at the end]}.
  void LogLoad(const std::string& model, const std::string& text, std::optional<double> load_ms) {
    std::string line;
    if (options_.log_json) {
      nlohmann::ordered_json j = {{"type", "model_load"},
                                  {"ts", static_cast<double>(std::time(nullptr))},
                                  {"model", model},
                                  {"message", text}};
      if (load_ms) j["load_ms"] = *load_ms;
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      line = "tessera worker: model '" + model + "' " + text;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  void RetryDeferred() {
    if (deferred_.empty()) return;
    std::deque<JobRequest> again;
    again.swap(deferred_);
    while (!again.empty()) {
      JobRequest job = std::move(again.front());
      again.pop_front();
      HandleJob(std::move(job));
    }
  }

  void Send(const std::string& payload) {
    if (!WriteFrame(fd_, payload).ok()) closed_ = true;
  }

  void Fail(uint64_t job_id, const JobFailure& f) {
    Send(Encode(JobErrorMessage{job_id, f.kind, f.message, f.prompt_tokens, f.field}));
  }

  void HandleJob(JobRequest job) {
    double load_ms = 0;
    bool busy = false;
    auto model = Acquire(job.model, &load_ms, &busy);
    if (!model) {
      if (busy) {
        deferred_.push_back(std::move(job));  // another model is busy; after its jobs end
      } else if (model.status().code() == ErrorCode::kResourceExhausted) {
        // The model does not fit where it must run (the NPU's contexts or memory, even with
        // idle models closed): the client is told so, and may retry when others are gone.
        std::fprintf(stderr, "tessera worker: loading '%s': %s\n", job.model.c_str(),
                     model.status().message().c_str());
        Fail(job.job_id,
             {JobErrorKind::kEngineBusy,
              "the model '" + job.model + "' does not fit: " + model.status().message()});
      } else if (model.status().code() == ErrorCode::kNotFound) {
        Fail(job.job_id, {JobErrorKind::kModelNotFound, model.status().message()});
      } else {
        // Load errors name files; the operator sees them here, the client a generic line.
        std::fprintf(stderr, "tessera worker: loading '%s': %s\n", job.model.c_str(),
                     model.status().message().c_str());
        Fail(job.job_id,
             {JobErrorKind::kInternal, "the model '" + job.model + "' could not be loaded"});
      }
      return;
    }
    ResidentModel& m = **model;
    std::optional<JobFailure> failure =
        std::visit([&](const auto& payload) { return Run(m, job, payload, load_ms); }, job.payload);
    if (failure) Fail(job.job_id, *failure);
  }

  // One overload per payload: a failure is answered by the caller; a started job answers
  // itself.
  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const TokenizePayload& p,
                                double) {
    auto ids = m.model->EncodeText(p.text, p.add_special_tokens);
    if (!ids) return JobFailure{JobErrorKind::kInvalidRequest, ids.status().message()};
    Send(Encode(TokensMessage{job.job_id, std::move(*ids)}));
    return std::nullopt;
  }

  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job,
                                const ChatTokenizePayload& p, double) {
    auto ids = ChatPromptIds(p.chat, job.model, *m.model);
    if (auto* refused = std::get_if<JobFailure>(&ids)) return std::move(*refused);
    Send(Encode(TokensMessage{job.job_id, std::move(std::get<std::vector<int32_t>>(ids))}));
    return std::nullopt;
  }

  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const DetokenizePayload& p,
                                double) {
    const Tokenizer& tok = m.model->tokenizer();
    for (int32_t id : p.ids) {
      if (id < 0 || id >= tok.vocab_size()) {
        return InvalidRequest("tokens", "id " + std::to_string(id) +
                                            " is outside the vocabulary of " +
                                            std::to_string(tok.vocab_size()));
      }
    }
    auto text = tok.Decode(p.ids, /*skip_special_tokens=*/false);
    if (!text) return InvalidRequest("tokens", text.status().message());
    Send(Encode(TextMessage{job.job_id, std::move(*text)}));
    return std::nullopt;
  }

  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const ChatPayload& p,
                                double load_ms) {
    if (p.options.response_format.kind != ResponseFormatKind::kDecision) {
      return StartGeneration(m, job, load_ms);
    }
    const size_t max_options =
        m.kind.kind == ModelKind::kDecide ? kMaxDeclaredDecisionOptions : kMaxDecisionOptions;
    return Track(m, job.job_id,
                 DecisionJob::Start(job.job_id, p, job.cache_scope, *m.model, max_options, load_ms,
                                    Sender(), Ender()));
  }

  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const CompletionPayload&,
                                double load_ms) {
    return StartGeneration(m, job, load_ms);
  }

  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const SystemOnePayload& p,
                                double) {
    if (m.kind.kind != ModelKind::kChat && m.kind.kind != ModelKind::kDecide) {
      return InvalidRequest("model", "'" + m.name + "' is " + AModelOfKind(m.kind.kind) +
                                         "; System One needs a chat or decide model");
    }
    SystemOneOptions options{options_.systemone_resume, options_.systemone_entries};
    return Track(
        m, job.job_id,
        SystemOneJob::Start(job.job_id, p, job.cache_scope, *m.model, options, Sender(), Ender()));
  }

  // Embed, rerank, classify and moderate.
  template <typename Payload>
  std::optional<JobFailure> Run(ResidentModel& m, const JobRequest& job, const Payload& p,
                                double load_ms) {
    TaskRequest task = TaskRequest::Of(p);
    task.cache_scope = job.cache_scope;
    task.load_ms = load_ms;
    // The server routes by kind; this is the worker's own check of what it was sent.
    const ModelKind needed = TaskModelKind(task.kind);
    if (m.kind.kind != needed) {
      return InvalidRequest("model", "'" + m.name + "' is " + AModelOfKind(m.kind.kind) +
                                         "; this endpoint needs " + AModelOfKind(needed));
    }
    return Track(m, job.job_id,
                 TaskJob::Start(job.job_id, task, *m.model, m.kind, Sender(), Ender()));
  }

  std::function<void(const std::string&)> Sender() {
    return [this](const std::string& frame) { Send(frame); };
  }
  // Ended jobs are deleted by the loop (ReapEnded), never inside their own callback.
  std::function<void(uint64_t)> Ender() {
    return [this](uint64_t job_id) { ended_.push_back(job_id); };
  }

  // Validates a chat or completion job and submits its choices to the model's scheduler; the
  // job streams its deltas and its end itself (generation_job.h).
  std::optional<JobFailure> StartGeneration(ResidentModel& m, const JobRequest& job,
                                            double load_ms) {
    auto vocabulary = [&m]() -> Expected<std::shared_ptr<const TokenVocabulary>> {
      if (!m.vocabulary) {
        TS_ASSIGN_OR_RETURN(m.vocabulary,
                            VocabularyFromTokenizer(m.model->tokenizer(), m.model->stop_ids()));
      }
      return m.vocabulary;
    };
    return Track(m, job.job_id,
                 GenerationJob::Start(job, *m.model, vocabulary, load_ms, Sender(), Ender()));
  }

  // A started job is kept (and counted against its model) until it sends its end; a refused
  // one is returned for the caller to answer.
  template <class J>
  std::optional<JobFailure> Track(ResidentModel& m, uint64_t job_id,
                                  std::variant<std::unique_ptr<J>, JobFailure> started) {
    if (auto* failure = std::get_if<JobFailure>(&started)) return *failure;
    ++m.active_jobs;
    jobs_[job_id] = {&m, std::move(std::get<std::unique_ptr<J>>(started))};
    return std::nullopt;
  }

  struct RunningJob {
    ResidentModel* model = nullptr;
    std::unique_ptr<WorkerJob> job;  // generation, decision, task or System One
  };

  int fd_;
  const WorkerOptions& options_;
  std::deque<ModelEntry> added_models_;  // AddModelMessage; a deque keeps entries in place
  std::vector<std::unique_ptr<ResidentModel>> resident_;
  std::vector<ModelLoad> loads_;  // StepModels' scratch, one per resident model
  std::map<uint64_t, RunningJob> jobs_;
  std::vector<uint64_t> ended_;      // jobs that sent their end, to delete
  std::deque<JobRequest> deferred_;  // jobs for a model that cannot be loaded until one is idle
  uint64_t clock_ = 0;
  bool closed_ = false;
};

}  // namespace

Expected<int> ParseSystemOneReuse(std::string_view name) {
  if (name == "none") return 0;
  if (name == "shared") return 1;
  if (name == "pinned") return 2;
  return InvalidArgument("--systemone-reuse must be none, shared or pinned, got '" +
                         std::string(name) + "'");
}

Expected<std::optional<GgufModel>> GgufModelOfEntry(const ModelEntry& entry) {
  std::error_code ec;
  if (std::filesystem::is_directory(entry.dir, ec)) return std::optional<GgufModel>();
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  auto resolved = ResolveModel(entry.dir, *catalog);
  if (!resolved) return resolved.status().WithContext("model '" + entry.name + "'");
  if (!resolved->gguf) {
    return InvalidArgument("model '" + entry.name + "': " + entry.dir +
                           " is neither a checkpoint folder nor a GGUF model");
  }
  return resolved->gguf;
}

Expected<ModelKindInfo> DetectEntryKind(const ModelEntry& entry) {
  TS_ASSIGN_OR_RETURN(std::optional<GgufModel> gguf, GgufModelOfEntry(entry));
  return gguf ? DetectGgufModelKind(gguf->path) : DetectModelKind(entry.dir);
}

Status ResolveModelKinds(std::vector<ModelEntry>& models,
                         const std::vector<std::string>& declared) {
  for (ModelEntry& m : models) {
    auto info = DetectEntryKind(m);
    if (!info) return info.status().WithContext("model '" + m.name + "'");
    m.kind = info->kind;
  }
  for (const std::string& spec : declared) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--kind '" + spec + "' must be NAME=KIND");
    }
    const std::string name = spec.substr(0, eq);
    auto kind = ParseModelKind(spec.substr(eq + 1));
    if (!kind) {
      return InvalidArgument("--kind '" + spec +
                             "': the kind must be chat, embed, rerank, guard, classify, decide or "
                             "completion");
    }
    auto it = std::find_if(models.begin(), models.end(),
                           [&](const ModelEntry& m) { return m.name == name; });
    if (it == models.end())
      return InvalidArgument("--kind '" + spec + "': no model is named " + name);
    if (*kind != it->kind &&
        (it->kind == ModelKind::kCompletion || *kind == ModelKind::kCompletion)) {
      // Rerankers, guards and deciders put their questions through the chat template.
      return InvalidArgument(
          "--kind '" + spec + "': " +
          (it->kind == ModelKind::kCompletion
               ? "the checkpoint of '" + name +
                     "' has no chat template, so it is a completion model (/v1/completions); "
                     "it cannot be served as " +
                     std::string(ModelKindName(*kind))
               : "a completion model is a causal LM without a chat template; '" + name +
                     "' has one, so it is " + AModelOfKind(it->kind)));
    }
    // The kinds a causal LM with a chat template may be served as.
    auto causal = [](ModelKind k) {
      return k == ModelKind::kChat || k == ModelKind::kRerank || k == ModelKind::kGuard ||
             k == ModelKind::kDecide;
    };
    if (*kind != it->kind && !(causal(it->kind) && causal(*kind))) {
      return InvalidArgument("--kind '" + spec + "': the checkpoint of '" + name + "' is " +
                             AModelOfKind(it->kind) + "; it cannot be served as " +
                             std::string(ModelKindName(*kind)) +
                             " (only a causal LM may be declared rerank, guard or decide)");
    }
    it->kind = *kind;
  }
  return Status::Ok();
}

Status DeclareToolCallSyntaxes(std::vector<ModelEntry>& models,
                               const std::vector<std::string>& declared) {
  for (const std::string& spec : declared) {
    const size_t eq = spec.find('=');
    const std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string flag = "--tool-call-syntax '" + spec + "'";
    TS_ASSIGN_OR_RETURN(ToolCallSyntax syntax,
                        ToolCallSyntaxFromName(spec.substr(eq == std::string::npos ? 0 : eq + 1),
                                               flag + ": the syntax"));
    if (eq == 0) return InvalidArgument(flag + ": name the model before '=' (MODEL=SYNTAX)");
    if (eq == std::string::npos && models.size() != 1) {
      return InvalidArgument(flag + ": " + std::to_string(models.size()) +
                             " models are served; say which with MODEL=SYNTAX");
    }
    auto it = eq == std::string::npos
                  ? models.begin()
                  : std::find_if(models.begin(), models.end(),
                                 [&](const ModelEntry& m) { return m.name == name; });
    if (it == models.end()) return InvalidArgument(flag + ": no served model is named " + name);
    it->tool_call_syntax = syntax;
  }
  return Status::Ok();
}

int RunWorker(int fd, const WorkerOptions& options) {
  Worker worker(fd, options);
  return worker.Run();
}

}  // namespace tessera::worker
