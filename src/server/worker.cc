#include "server/worker.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "runtime/loaded_model.h"
#include "runtime/text_stream.h"
#include "server/worker_protocol.h"

namespace tessera::server {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct ResidentModel {
  std::string name;
  std::unique_ptr<LoadedModel> model;
  int active_jobs = 0;
  uint64_t last_used = 0;
};

// A job-level failure: the kind decides the HTTP status, the message is shown to the client.
struct JobFailure {
  JobErrorKind kind;
  std::string message;
  int64_t prompt_tokens = 0;  // for kContextLength
};

// A generation job running in a model's scheduler.
struct ActiveJob {
  uint64_t job_id = 0;
  ResidentModel* model = nullptr;
  uint64_t sequence = 0;
  std::unique_ptr<TextStream> stream;
  bool logprobs = false;
  std::vector<float> step_logits;  // the current step's raw row, for logprobs
  int64_t generated = 0;
  int64_t prompt_tokens = 0;
  double load_ms = 0;
  bool stopped_by_string = false;
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
      auto model = Acquire(options_.models.front().name, &load_ms);
      if (!model) {
        // The message names the cause for the operator's log; the server keeps /ready at 503.
        std::fprintf(stderr, "tessera worker: %s\n", model.status().message().c_str());
        return 1;
      }
    }
    if (!WriteFrame(fd_, EncodeReady({options_.models.front().name})).ok()) return 0;
    // The loop: take every frame waiting on the socket (blocking only when there is nothing
    // to run), then one scheduler step per model with work. Jobs join and leave the running
    // batch between steps; a Cancel takes effect at the next step.
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
      for (auto& m : resident_) {
        if (!m->model->scheduler().HasWork()) continue;
        if (Status st = m->model->scheduler().Step(); !st.ok()) {
          // The sequences of that batch were failed (each job got its error).
          std::fprintf(stderr, "tessera worker: step failed: %s\n", st.message().c_str());
        }
      }
      RetryDeferred();
    }
    return 0;
  }

 private:
  bool HasWork() const {
    for (const auto& m : resident_)
      if (m->model->scheduler().HasWork()) return true;
    return false;
  }

  // False on a frame that cannot be a job request (the protocol is broken).
  bool HandleFrame(const std::string& frame) {
    auto type = PeekMessageType(frame);
    if (!type) return true;
    if (*type == MessageType::kCancel) {
      auto cancel = DecodeCancel(frame);
      if (cancel) CancelJob(cancel->job_id);
      return true;
    }
    if (*type != MessageType::kJobRequest) return true;
    auto job = DecodeJobRequest(frame);
    if (!job) {
      std::fprintf(stderr, "tessera worker: %s\n", job.status().message().c_str());
      return false;
    }
    HandleJob(std::move(*job));
    return true;
  }

  void CancelJob(uint64_t job_id) {
    if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      it->second->model->model->scheduler().Cancel(it->second->sequence);
      return;
    }
    // A job waiting for its model to be loaded: answered at once, without running.
    for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
      if (it->job_id != job_id) continue;
      deferred_.erase(it);
      DoneMessage done;
      done.job_id = job_id;
      done.finish_reason = "cancelled";
      Send(EncodeDone(done));
      return;
    }
  }

  // The resident model `name`, loading it (and unloading the least recently used idle one
  // past the residency limit). Unavailable: every resident model is busy, try again later.
  Expected<ResidentModel*> Acquire(const std::string& name, double* load_ms) {
    ++clock_;
    for (auto& m : resident_) {
      if (m->name == name) {
        m->last_used = clock_;
        return m.get();
      }
    }
    const ModelEntry* entry = nullptr;
    for (const ModelEntry& e : options_.models) {
      if (e.name == name) entry = &e;
    }
    if (entry == nullptr) return NotFound("the model '" + name + "' is not served here");
    while (!resident_.empty() && static_cast<int>(resident_.size()) >= options_.max_loaded_models) {
      auto lru = resident_.end();
      for (auto it = resident_.begin(); it != resident_.end(); ++it) {
        if ((*it)->active_jobs > 0 || (*it)->model->scheduler().HasWork()) continue;
        if (lru == resident_.end() || (*it)->last_used < (*lru)->last_used) lru = it;
      }
      if (lru == resident_.end()) return Unavailable();
      std::fprintf(stderr, "tessera worker: unloading model '%s'\n", (*lru)->name.c_str());
      resident_.erase(lru);
    }
    auto t0 = std::chrono::steady_clock::now();
    ModelLoadOptions o;
    o.placement = options_.placement;
    o.context = options_.context;
    o.parallel = options_.parallel;
    o.bf16_activations = options_.bf16_activations;
    o.prewarm = true;
    auto log = [&](const std::string& line) {
      std::fprintf(stderr, "tessera worker: %s\n", line.c_str());
    };
    TS_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> loaded, LoadedModel::Open(entry->dir, o, log));
    auto m = std::make_unique<ResidentModel>();
    m->name = name;
    m->model = std::move(loaded);
    m->last_used = clock_;
    *load_ms = MsSince(t0);
    std::fprintf(stderr, "tessera worker: model '%s' loaded and warmed in %.0f ms (%s)\n",
                 name.c_str(), *load_ms, m->model->Describe().c_str());
    resident_.push_back(std::move(m));
    return resident_.back().get();
  }

  static Status Unavailable() { return ResourceExhausted("every resident model is busy"); }

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
    Send(EncodeJobError({job_id, f.kind, f.message, f.prompt_tokens}));
  }

  void HandleJob(JobRequest job) {
    double load_ms = 0;
    auto model = Acquire(job.model, &load_ms);
    if (!model) {
      if (model.status().code() == ErrorCode::kResourceExhausted) {
        deferred_.push_back(std::move(job));  // another model is busy; after its jobs end
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
    switch (job.kind) {
      case JobKind::kTokenize:
        return Tokenize(m, job);
      case JobKind::kDetokenize:
        return Detokenize(m, job);
      case JobKind::kChat:
      case JobKind::kCompletion:
        if (auto failure = Start(m, job, load_ms)) Fail(job.job_id, *failure);
        return;
    }
  }

  void Tokenize(const ResidentModel& m, const JobRequest& job) {
    auto ids = m.model->EncodeText(job.prompt, job.add_special_tokens);
    if (!ids) return Fail(job.job_id, {JobErrorKind::kInvalidRequest, ids.status().message()});
    Send(EncodeTokens({job.job_id, std::move(*ids)}));
  }

  void Detokenize(const ResidentModel& m, const JobRequest& job) {
    const Tokenizer& tok = m.model->tokenizer();
    for (int32_t id : job.ids) {
      if (id < 0 || id >= tok.vocab_size()) {
        return Fail(job.job_id,
                    {JobErrorKind::kInvalidRequest, "tokens: id " + std::to_string(id) +
                                                        " is outside the vocabulary of " +
                                                        std::to_string(tok.vocab_size())});
      }
    }
    auto text = tok.Decode(job.ids, /*skip_special_tokens=*/false);
    if (!text)
      return Fail(job.job_id,
                  {JobErrorKind::kInvalidRequest, "tokens: " + text.status().message()});
    Send(EncodeText({job.job_id, std::move(*text)}));
  }

  Expected<std::vector<int32_t>> PromptIds(const ResidentModel& m, const JobRequest& job) {
    if (job.kind == JobKind::kChat) {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const ChatMessage& msg : job.messages) {
        messages.push_back({{"role", msg.role}, {"content", msg.content}});
      }
      auto prompt = m.model->RenderChat(messages, nlohmann::ordered_json::object());
      if (!prompt) return prompt.status().WithContext("messages");
      return std::move(prompt->ids);
    }
    auto ids = m.model->EncodeText(job.prompt, /*add_special=*/true);
    if (!ids) return ids.status().WithContext("prompt");
    return ids;
  }

  // Validates the job and submits it to the model's scheduler; its callbacks stream the
  // deltas and the end.
  std::optional<JobFailure> Start(ResidentModel& m, const JobRequest& job, double load_ms) {
    if (job.kind == JobKind::kChat && !m.model->has_chat_template()) {
      return JobFailure{
          JobErrorKind::kInvalidRequest,
          "the model '" + m.name + "' has no chat template; use /v1/completions with a prompt"};
    }
    auto ids = PromptIds(m, job);
    if (!ids) return JobFailure{JobErrorKind::kInvalidRequest, ids.status().message()};
    std::vector<int32_t> prompt_ids = std::move(*ids);
    if (prompt_ids.empty())
      return JobFailure{JobErrorKind::kInvalidRequest, "prompt: the prompt is empty"};
    const int64_t context = m.model->context();
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
    if (prompt_len >= context) {
      return JobFailure{JobErrorKind::kContextLength,
                        "the prompt is " + std::to_string(prompt_len) + " tokens but the model '" +
                            m.name + "' has a context of " + std::to_string(context) +
                            " tokens, which must also hold the reply; shorten the prompt",
                        prompt_len};
    }
    auto sampling = ResolveSamplingParams(job.sampling, m.model->sampling_defaults());
    if (!sampling) return JobFailure{JobErrorKind::kInvalidRequest, sampling.status().message()};
    // A drawn seed is reported so the user can replay it; keep it below 2^53 so that every
    // JSON client (JavaScript numbers are doubles) can send it back exactly.
    if (sampling->seed_was_generated) sampling->seed &= (uint64_t{1} << 53) - 1;

    auto active = std::make_unique<ActiveJob>();
    ActiveJob* a = active.get();
    a->job_id = job.job_id;
    a->model = &m;
    a->logprobs = job.logprobs;
    a->prompt_tokens = prompt_len;
    a->load_ms = load_ms;
    TextStreamOptions stream_options;
    stream_options.stop = job.stop;
    stream_options.logprobs = job.logprobs;
    stream_options.top_logprobs = job.top_logprobs;
    a->stream = std::make_unique<TextStream>(m.model->tokenizer(), prompt_ids, stream_options,
                                             m.model->stop_ids());
    SequenceRequest req;
    req.prompt_ids = std::move(prompt_ids);
    const int64_t room = context - prompt_len;
    req.max_new_tokens = job.max_tokens < 0 ? room : std::min(job.max_tokens, room);
    req.stop_ids = m.model->stop_ids();
    req.sampling = *sampling;
    if (job.logprobs) {
      req.on_logits = [a](std::span<const float> logits) {
        a->step_logits.assign(logits.begin(), logits.end());
      };
    }
    req.on_token = [this, a](int32_t id) { return OnToken(*a, id); };
    req.on_finish = [this, a](const SequenceResult& r) { OnFinish(*a, r); };
    auto id = m.model->scheduler().Submit(std::move(req));
    if (!id) return JobFailure{JobErrorKind::kInvalidRequest, id.status().message()};
    a->sequence = *id;
    ++m.active_jobs;
    Send(EncodeStarted({job.job_id, prompt_len, *sampling}));
    jobs_[job.job_id] = std::move(active);
    return std::nullopt;
  }

  bool OnToken(ActiveJob& a, int32_t id) {
    TokenDelta d = a.stream->Push(id, a.step_logits);
    DeltaMessage delta;
    delta.job_id = a.job_id;
    delta.completion_tokens = ++a.generated;
    delta.text = std::move(d.text);
    if (d.logprob) {
      TokenLogprobEntry entry;
      entry.token = std::move(d.logprob->token);
      entry.logprob = d.logprob->logprob;
      for (auto& [text, lp] : d.logprob->top) entry.top.push_back({std::move(text), lp});
      delta.logprobs.push_back(std::move(entry));
    }
    // Sent for every token, also one whose text is held back (a possible stop string): the
    // count lets an error after it still report the usage so far.
    Send(EncodeDelta(delta));
    a.stopped_by_string = d.stopped;
    return !d.stopped && !closed_;
  }

  void OnFinish(ActiveJob& a, const SequenceResult& r) {
    const uint64_t job_id = a.job_id;
    --a.model->active_jobs;
    if (!r.status.ok()) {
      std::fprintf(stderr, "tessera worker: generation failed: %s\n", r.status.message().c_str());
      Fail(job_id, {JobErrorKind::kInternal, "generation failed inside the engine"});
      jobs_.erase(job_id);
      return;
    }
    const bool cancelled = r.stop_reason == StopReason::kCancelled && !a.stopped_by_string;
    if (!a.stopped_by_string && !cancelled) {
      std::string tail = a.stream->Finish();
      a.stopped_by_string = a.stream->stopped();
      if (!tail.empty()) Send(EncodeDelta({job_id, tail, {}, a.generated}));
    }
    DoneMessage done;
    done.job_id = job_id;
    if (cancelled) {
      done.finish_reason = "cancelled";
    } else if (a.stopped_by_string || r.stop_reason == StopReason::kStopToken) {
      done.finish_reason = "stop";
    } else {
      done.finish_reason = "length";
    }
    done.prompt_tokens = a.prompt_tokens;
    done.completion_tokens = static_cast<int64_t>(r.generated_ids.size());
    done.cached_tokens = r.cached_tokens;
    done.queue_ms = r.queue_ms;
    done.load_ms = a.load_ms;
    const GenerateTimings& t = r.timings;
    done.prefill_ms = t.prefill_ms;
    done.ttft_ms = t.ttft_ms;
    done.decode_ms = t.decode_ms;
    done.prefill_tok_s = t.prefill_tok_s;
    done.decode_tok_s = t.decode_tok_s;
    Send(EncodeDone(done));
    jobs_.erase(job_id);  // `a` ends here
  }

  int fd_;
  const WorkerOptions& options_;
  std::vector<std::unique_ptr<ResidentModel>> resident_;
  std::map<uint64_t, std::unique_ptr<ActiveJob>> jobs_;
  std::deque<JobRequest> deferred_;  // jobs for a model that cannot be loaded until one is idle
  uint64_t clock_ = 0;
  bool closed_ = false;
};

}  // namespace

int RunWorker(int fd, const WorkerOptions& options) {
  Worker worker(fd, options);
  return worker.Run();
}

}  // namespace tessera::server
