#include "server/http_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include "server/connection_watch.h"
#include "server/guards.h"
#include "server/openai_api.h"
#include "server/worker_supervisor.h"

namespace tessera::server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How often a request that waits (in the queue, for the worker, for the next token) looks
// whether its client is still connected.
constexpr auto kClientCheckInterval = std::chrono::milliseconds(50);

// usage for a response that tokenized nothing.
json ZeroUsage() {
  return {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}};
}

ApiError ServerError(int status, const std::string& code, const std::string& message) {
  ApiError e;
  e.status = status;
  e.type = "server_error";
  e.code = code;
  e.message = message;
  return e;
}

// What a request whose client went away is answered (nobody reads it; the access log shows
// the status, 499 as nginx logs it).
ApiError ClientGone() {
  ApiError e = ServerError(499, "client_disconnected",
                           "the client closed the connection before the answer was ready; the "
                           "request was cancelled");
  e.type = "invalid_request_error";
  return e;
}

// What the access log says about one request; filled as the request is handled.
struct LogRecord {
  Clock::time_point start;
  std::string model;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_ms = 0;
  double ttft_ms = 0;
  std::string finish;
};

class Service {
 public:
  explicit Service(const ServeOptions& options)
      : options_(options),
        supervisor_({options.executable, options.worker_args}),
        admission_(options.max_active, options.max_queued),
        rate_limiter_(options.rate_limit_per_minute) {
    for (const ModelEntry& m : options.models) model_names_.push_back(m.name);
    std::random_device rd;
    request_prefix_ = std::to_string(rd() % 1000000);
    created_ = UnixNow();
    started_at_ = Clock::now();
  }

  WorkerSupervisor& supervisor() { return supervisor_; }
  AdmissionQueue& admission() { return admission_; }
  void StartDraining() { draining_ = true; }

  void Install(httplib::Server& svr) {
    svr.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
    svr.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) { return OnError(req, res); }));
    svr.set_exception_handler([this](const httplib::Request&, httplib::Response& res,
                                     std::exception_ptr) {
      SendError(
          res, ServerError(500, "internal_error", "internal error; the request was not completed"));
    });
    svr.set_logger(
        [this](const httplib::Request& req, const httplib::Response& res) { Log(req, res); });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, {{"status", "ok"}});
    });
    svr.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
      const bool ready = supervisor_.ready() && !draining_;
      // Queue occupancy lets a client (and the tests) see load before it is refused.
      SendJson(res, ready ? 200 : 503,
               {{"status", draining_ ? std::string("draining") : supervisor_.state()},
                {"active", admission_.active()},
                {"queued", admission_.waiting()}});
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, ModelsListBody(model_names_, created_));
    });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generation(req, res, /*chat=*/true);
    });
    svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generation(req, res, /*chat=*/false);
    });
    svr.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      TokenJob(req, res, true);
    });
    svr.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      TokenJob(req, res, false);
    });
  }

 private:
  // ---- response bodies ----

  // x_tessera_stats of a response that ran no generation: its queue wait and the server's
  // state (the same counters /ready reports).
  json ServerStats(double queue_wait_ms) const {
    return {{"queue_wait_ms", queue_wait_ms},
            {"active", admission_.active()},
            {"queued", admission_.waiting()},
            {"worker_state", supervisor_.state()},
            {"worker_restarts", supervisor_.restarts()},
            {"uptime_s", MsBetween(started_at_, Clock::now()) / 1000.0}};
  }

  // Every JSON answer carries usage and x_tessera_stats; a body without its own gets zero
  // usage and the server's stats.
  void SendJson(httplib::Response& res, int status, json body, double queue_wait_ms = 0) {
    if (!body.contains("usage")) body["usage"] = ZeroUsage();
    if (!body.contains("x_tessera_stats")) body["x_tessera_stats"] = ServerStats(queue_wait_ms);
    res.status = status;
    res.set_content(Dump(body), "application/json");
  }

  // An OpenAI error object, with usage and x_tessera_stats beside it. The ways a request can
  // be cut short are also noted in the access log.
  void SendError(httplib::Response& res, const ApiError& e, double queue_wait_ms = 0) {
    NoteAbnormalEnd(res, e);
    SendJson(res, e.status, ErrorBody(e), queue_wait_ms);
  }

  // An error once the worker had the job: what it reported so far goes with it.
  static json JobErrorBody(const ApiError& e, const JobOutcome& outcome, double queue_ms) {
    json body = ErrorBody(e);
    body["usage"] = UsageJson(outcome);
    body["x_tessera_stats"] = StatsJson(outcome, queue_ms);
    return body;
  }

  void SendJobError(httplib::Response& res, const ApiError& e, const JobOutcome& outcome,
                    double queue_ms) {
    RecordOutcome(res, outcome, queue_ms);
    NoteAbnormalEnd(res, e);
    SendJson(res, e.status, JobErrorBody(e, outcome, queue_ms));
  }

  void NoteAbnormalEnd(const httplib::Response& res, const ApiError& e) {
    if (e.code == "client_disconnected" || e.code == "worker_crashed" || e.code == "timeout") {
      UpdateLog(res, [&](LogRecord& r) { r.finish = e.code; });
    }
  }

  // ---- protections that run before routing ----

  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res) {
    using HR = httplib::Server::HandlerResponse;
    const std::string id = "req-" + request_prefix_ + "-" + std::to_string(++request_counter_);
    res.set_header("X-Request-Id", id);
    {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_[id].start = Clock::now();
    }
    const std::string origin = req.get_header_value("Origin");
    const bool origin_allowed = !origin.empty() && OriginAllowed(origin);
    if (origin_allowed) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {
      if (!origin_allowed) {
        ApiError e =
            InvalidField("",
                         "cross-origin requests from this origin are not allowed; start the server "
                         "with --allow-origin to permit one");
        e.status = 403;
        e.code = "cors_origin_denied";
        SendError(res, e);
        return HR::Handled;
      }
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      return HR::Handled;
    }
    if (req.path == "/health" || req.path == "/ready") return HR::Unhandled;
    if (draining_) {
      SendError(res, ServerError(503, "shutting_down", "the server is shutting down"));
      return HR::Handled;
    }
    if (options_.rate_limit_per_minute > 0) {
      int retry_after = 0;
      if (!rate_limiter_.Allow(req.remote_addr, &retry_after)) {
        ApiError e =
            InvalidField("", "rate limit of " + std::to_string(options_.rate_limit_per_minute) +
                                 " requests per minute exceeded; retry after " +
                                 std::to_string(retry_after) + " s");
        e.status = 429;
        e.type = "rate_limit_error";
        e.code = "rate_limit_exceeded";
        res.set_header("Retry-After", std::to_string(retry_after));
        SendError(res, e);
        return HR::Handled;
      }
    }
    if (!options_.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool ok =
          auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
          ConstantTimeEquals(std::string_view(auth).substr(prefix.size()), options_.api_key);
      if (!ok) {
        ApiError e =
            InvalidField("", auth.empty() ? "missing API key; send 'Authorization: Bearer <key>'"
                                          : "incorrect API key");
        e.status = 401;
        e.code = "invalid_api_key";
        res.set_header("WWW-Authenticate", "Bearer");
        SendError(res, e);
        return HR::Handled;
      }
    }
    return HR::Unhandled;
  }

  bool OriginAllowed(const std::string& origin) const {
    for (const std::string& o : options_.allow_origins) {
      if (o == "*" || o == origin) return true;
    }
    return false;
  }

  httplib::Server::HandlerResponse OnError(const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.status = res.status;
    switch (res.status) {
      case 404:
        e.message = "no such endpoint";
        e.code = "not_found";
        break;
      case 405:
        e.message = "method not allowed on this endpoint";
        break;
      case 413:
        e.message =
            "the request body is larger than " + std::to_string(options_.max_body_bytes) + " bytes";
        e.code = "body_too_large";
        break;
      case 408:
        e.message = "the request was not received in time";
        break;
      default:
        e.message = res.status >= 500 ? "internal error" : "malformed HTTP request";
        if (res.status >= 500) e.type = "server_error";
    }
    SendError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }

  void Log(const httplib::Request& req, const httplib::Response& res) {
    const std::string id = res.get_header_value("X-Request-Id");
    LogRecord rec;
    {
      std::lock_guard<std::mutex> lock(log_mu_);
      auto it = log_.find(id);
      if (it != log_.end()) {
        rec = it->second;
        log_.erase(it);
      } else {
        rec.start = Clock::now();
      }
    }
    json line = {{"ts", UnixNow()},
                 {"id", id},
                 {"client", req.remote_addr},
                 {"method", req.method},
                 {"path", req.path},
                 {"status", res.status},
                 {"model", rec.model},
                 {"prompt_tokens", rec.prompt_tokens},
                 {"completion_tokens", rec.completion_tokens},
                 {"queue_ms", rec.queue_ms},
                 {"ttft_ms", rec.ttft_ms},
                 {"total_ms", MsBetween(rec.start, Clock::now())}};
    if (!rec.finish.empty()) line["finish_reason"] = rec.finish;
    std::string text = "access " + Dump(line) + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
  }

  void UpdateLog(const httplib::Response& res, const std::function<void(LogRecord&)>& update) {
    const std::string id = res.get_header_value("X-Request-Id");
    std::lock_guard<std::mutex> lock(log_mu_);
    auto it = log_.find(id);
    if (it != log_.end()) update(it->second);
  }

  bool KnownModel(const std::string& name) const {
    for (const std::string& n : model_names_) {
      if (n == name) return true;
    }
    return false;
  }

  static ApiError ModelNotFound(const std::string& name) {
    ApiError e = InvalidField(
        "model",
        "the model '" + name + "' does not exist or is not served here; GET /v1/models lists them");
    e.status = 404;
    e.code = "model_not_found";
    return e;
  }

  static ApiError FromJobError(const JobErrorMessage& m) {
    ApiError e;
    e.message = m.message;
    switch (m.kind) {
      case JobErrorKind::kInvalidRequest:
        break;
      case JobErrorKind::kContextLength:
        e.code = "context_length_exceeded";
        e.param = "messages";
        break;
      case JobErrorKind::kModelNotFound:
        e.status = 404;
        e.code = "model_not_found";
        e.param = "model";
        break;
      case JobErrorKind::kInternal:
        e = ServerError(500, "internal_error", m.message);
        break;
    }
    return e;
  }

  static ApiError WorkerDied() {
    return ServerError(502, "worker_crashed",
                       "the inference worker stopped while handling this request; it is being "
                       "restarted, retry shortly");
  }

  static ApiError DeadlinePassed() {
    return ServerError(504, "timeout",
                       "the request took longer than the server's request timeout and was stopped");
  }

  // A job admitted to the worker: the admission slot and the routing are released exactly
  // once, by the destructor, whichever way the request ends.
  struct ActiveJob {
    Service* service = nullptr;
    uint64_t ticket = 0;
    uint64_t job_id = 0;
    bool submitted = false;
    bool finished = false;     // a terminal message arrived (or the worker died)
    bool client_gone = false;  // the client closed the connection while it waited
    Clock::time_point admitted_at;
    Clock::time_point deadline;
    ConnectionWatch watch;         // the client's connection, while the handler runs
    Clock::time_point next_check;  // when to look at it again
    std::shared_ptr<JobChannel> channel = std::make_shared<JobChannel>();

    ~ActiveJob() {
      if (service == nullptr) return;
      if (submitted) {
        if (!finished) {
          // Cancel and wait (bounded) for the worker to stop, so the next job starts clean.
          service->supervisor_.Cancel(job_id);
          const auto limit = std::min(deadline, Clock::now() + std::chrono::seconds(10));
          while (auto ev = channel->Wait(limit)) {
            if (ev->worker_died) break;
            auto type = PeekMessageType(ev->frame);
            if (type && (*type == MessageType::kDone || *type == MessageType::kJobError)) break;
          }
        }
        service->supervisor_.Release(job_id);
      }
      service->admission_.Leave(ticket, MsBetween(admitted_at, Clock::now()) / 1000.0);
    }
  };

  // How long to block before looking at the client's connection again.
  static Clock::time_point NextCheck(const ConnectionWatch& watch, Clock::time_point deadline) {
    return watch.found() ? std::min(deadline, Clock::now() + kClientCheckInterval) : deadline;
  }

  static ApiError WorkerUnavailable(httplib::Response& res) {
    res.set_header("Retry-After", "2");
    return ServerError(503, "worker_unavailable",
                       "the inference worker is not ready; retry shortly");
  }

  // Queue, wait for a ready worker, submit. On failure fills `error` and returns null; a
  // client that leaves meanwhile gives up its place (ClientGone).
  std::unique_ptr<ActiveJob> Admit(JobRequest& job, Clock::time_point deadline,
                                   const ConnectionWatch& watch, double* queue_ms, ApiError* error,
                                   httplib::Response& res) {
    const auto arrived = Clock::now();
    AdmissionQueue::Entry entry = admission_.Enter();
    if (!entry.admitted) {
      *error = ServerError(429, "queue_full",
                           "the server is busy (the queue is full); retry after " +
                               std::to_string(entry.retry_after_s) + " s");
      error->type = "rate_limit_error";
      res.set_header("Retry-After", std::to_string(entry.retry_after_s));
      return nullptr;
    }
    std::function<bool()> gone;
    if (watch.found()) gone = [&watch] { return watch.PeerClosed(); };
    const AdmissionQueue::Turn turn =
        admission_.WaitTurn(entry.ticket, deadline, gone, kClientCheckInterval);
    *queue_ms = MsBetween(arrived, Clock::now());
    if (turn != AdmissionQueue::Turn::kRun) {
      *error = turn == AdmissionQueue::Turn::kAbandoned ? ClientGone() : DeadlinePassed();
      return nullptr;
    }
    auto active = std::make_unique<ActiveJob>();
    active->service = this;
    active->ticket = entry.ticket;
    active->admitted_at = Clock::now();
    active->deadline = deadline;
    active->watch = watch;
    while (!supervisor_.WaitReady(NextCheck(watch, deadline))) {
      if (Clock::now() >= deadline || supervisor_.state() == "stopped") {
        *error = WorkerUnavailable(res);
        return nullptr;
      }
      if (watch.PeerClosed()) {
        *error = ClientGone();
        return nullptr;
      }
    }
    job.job_id = ++job_counter_;
    active->job_id = job.job_id;
    if (!supervisor_.Submit(job, active->channel).ok()) {
      *error = WorkerUnavailable(res);
      return nullptr;
    }
    active->submitted = true;
    return active;
  }

  // The job's next message. Null when the deadline passed (the worker is then killed: the
  // only way to stop a stuck kernel) or the client left (~ActiveJob cancels the job); `error`
  // says which.
  std::optional<WorkerEvent> WaitEvent(ActiveJob& job, ApiError* error) {
    while (true) {
      // The connection is looked at by the clock, not only when a wait times out: a job that
      // keeps producing tokens never lets one time out.
      if (job.watch.found() && Clock::now() >= job.next_check) {
        job.next_check = Clock::now() + kClientCheckInterval;
        if (job.watch.PeerClosed()) {
          job.client_gone = true;
          *error = ClientGone();
          return std::nullopt;
        }
      }
      const auto until = job.watch.found() ? std::min(job.deadline, job.next_check) : job.deadline;
      if (auto ev = job.channel->Wait(until)) return ev;
      if (Clock::now() >= job.deadline) {
        supervisor_.KillWorker();
        job.finished = true;
        *error = DeadlinePassed();
        return std::nullopt;
      }
    }
  }

  // Reads one event into `outcome`: kFailed (with `error`) when the job failed, the deadline
  // passed or the client left (then job.client_gone); kDone once Done arrived.
  enum class Step { kProgress, kDone, kFailed };
  Step NextEvent(ActiveJob& job, JobOutcome& outcome, ApiError* error, DeltaMessage* delta) {
    auto ev = WaitEvent(job, error);
    if (!ev) return Step::kFailed;
    if (ev->worker_died) {
      job.finished = true;
      *error = WorkerDied();
      return Step::kFailed;
    }
    auto type = PeekMessageType(ev->frame);
    if (!type) return Step::kProgress;
    switch (*type) {
      case MessageType::kStarted:
        if (auto m = DecodeStarted(ev->frame)) outcome.started = *m;
        return Step::kProgress;
      case MessageType::kDelta:
        if (auto m = DecodeDelta(ev->frame)) {
          outcome.text += m->text;
          outcome.logprobs.insert(outcome.logprobs.end(), m->logprobs.begin(), m->logprobs.end());
          if (delta != nullptr) *delta = std::move(*m);
        }
        return Step::kProgress;
      case MessageType::kDone:
        job.finished = true;
        if (auto m = DecodeDone(ev->frame)) outcome.done = *m;
        return Step::kDone;
      case MessageType::kJobError:
        job.finished = true;
        if (auto m = DecodeJobError(ev->frame)) {
          *error = FromJobError(*m);
        } else {
          *error = ServerError(500, "internal_error", "internal error");
        }
        return Step::kFailed;
      default:
        return Step::kProgress;
    }
  }

  static ConnectionWatch WatchClient(const httplib::Request& req) {
    return ConnectionWatch::Find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  }

  void Generation(const httplib::Request& req, httplib::Response& res, bool chat) {
    const auto deadline = Clock::now() + std::chrono::seconds(options_.request_timeout_s);
    auto body = ParseJsonBody(req.body);
    if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
    const json& doc = std::get<json>(body);
    auto parsed = chat ? ParseChatRequest(doc, model_names_.front())
                       : ParseCompletionRequest(doc, model_names_.front());
    if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
    GenerationRequest request = std::move(std::get<GenerationRequest>(parsed));
    if (!KnownModel(request.job.model)) return SendError(res, ModelNotFound(request.job.model));
    UpdateLog(res, [&](LogRecord& r) { r.model = request.job.model; });

    auto meta = std::make_shared<ResponseMeta>();
    meta->id = (chat ? "chatcmpl-" : "cmpl-") + res.get_header_value("X-Request-Id");
    meta->model = request.job.model;
    meta->created = UnixNow();
    meta->logprobs = request.job.logprobs;
    ApiError error;
    std::shared_ptr<ActiveJob> job =
        Admit(request.job, deadline, WatchClient(req), &meta->queue_ms, &error, res);
    if (!job) return SendError(res, error, meta->queue_ms);
    auto outcome = std::make_shared<JobOutcome>();

    // Wait for Started (or an error) first, so a request the worker refuses (a prompt
    // longer than the context) still gets its 4xx status rather than a 200 stream.
    while (!outcome->started) {
      Step step = NextEvent(*job, *outcome, &error, nullptr);
      if (step == Step::kFailed) return SendJobError(res, error, *outcome, meta->queue_ms);
      if (step == Step::kDone) break;
    }
    if (!request.stream) {
      Step step = Step::kProgress;
      while (!outcome->done &&
             (step = NextEvent(*job, *outcome, &error, nullptr)) == Step::kProgress) {
      }
      if (step == Step::kFailed) return SendJobError(res, error, *outcome, meta->queue_ms);
      RecordOutcome(res, *outcome, meta->queue_ms);
      res.set_content(
          Dump(chat ? ChatCompletionBody(*meta, *outcome) : TextCompletionBody(*meta, *outcome)),
          "application/json");
      return;
    }
    const std::string request_id = res.get_header_value("X-Request-Id");
    const bool include_usage = request.include_usage;
    res.set_header("Cache-Control", "no-cache");
    // The provider runs on this handler's thread while it writes the response, so the
    // connection (and the watch) is still this request's. False: the client is gone, stop.
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, outcome, meta, chat, include_usage, request_id](size_t,
                                                                    httplib::DataSink& sink) {
          return StreamEvents(*job, *outcome, *meta, chat, include_usage, request_id, sink);
        },
        [job](bool) mutable { job.reset(); });
  }

  void RecordOutcome(const httplib::Response& res, const JobOutcome& outcome, double queue_ms) {
    UpdateLog(res, [&](LogRecord& r) { FillRecord(r, outcome, queue_ms); });
  }

  static void FillRecord(LogRecord& r, const JobOutcome& outcome, double queue_ms) {
    r.queue_ms = queue_ms;
    if (outcome.started) r.prompt_tokens = outcome.started->prompt_tokens;
    if (outcome.done) {
      r.completion_tokens = outcome.done->completion_tokens;
      r.ttft_ms = outcome.done->ttft_ms;
      r.finish = outcome.done->finish_reason;
    }
  }

  // Writes the whole stream; false when the client went away (a write failed, or the
  // connection closed while the worker was silent), so httplib stops calling the provider.
  bool StreamEvents(ActiveJob& job, JobOutcome& outcome, const ResponseMeta& meta, bool chat,
                    bool include_usage, const std::string& request_id, httplib::DataSink& sink) {
    auto send = [&](const json& j) {
      std::string line = "data: " + Dump(j) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    bool open =
        chat ? send(ChatChunk(meta, {{"role", "assistant"}, {"content", ""}}, "", nullptr)) : true;
    ApiError error;
    Step step = outcome.done ? Step::kDone : Step::kProgress;
    while (open && step == Step::kProgress) {
      DeltaMessage delta;
      step = NextEvent(job, outcome, &error, &delta);
      if (step != Step::kProgress || (delta.text.empty() && delta.logprobs.empty())) continue;
      const std::vector<TokenLogprobEntry>* lp = meta.logprobs ? &delta.logprobs : nullptr;
      open = send(chat ? ChatChunk(meta, {{"content", delta.text}}, "", lp)
                       : TextChunk(meta, delta.text, "", lp));
    }
    auto note_finish = [&](const std::string& finish) {
      std::lock_guard<std::mutex> lock(log_mu_);
      auto it = log_.find(request_id);
      if (it == log_.end()) return;
      FillRecord(it->second, outcome, meta.queue_ms);
      it->second.finish = finish;
    };
    if (!open || job.client_gone) {
      // ~ActiveJob cancels the generation.
      note_finish("client_disconnected");
      return false;
    }
    if (step == Step::kFailed) {
      // Headers are gone already: the failure travels as an SSE error event.
      send(JobErrorBody(error, outcome, meta.queue_ms));
      sink.done();
      note_finish(error.code);
      return true;
    }
    const std::string finish = outcome.done ? outcome.done->finish_reason : "stop";
    json last = chat ? ChatChunk(meta, json::object(), finish, nullptr)
                     : TextChunk(meta, "", finish, nullptr);
    last["usage"] = UsageJson(outcome);
    last["x_tessera_stats"] = StatsJson(outcome, meta.queue_ms);
    send(last);
    if (include_usage) {
      json usage = {{"id", meta.id},
                    {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", meta.created},
                    {"model", meta.model},
                    {"choices", json::array()},
                    {"usage", UsageJson(outcome)},
                    {"x_tessera_stats", StatsJson(outcome, meta.queue_ms)}};
      send(usage);
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    note_finish(outcome.done ? outcome.done->finish_reason : "");
    return true;
  }

  // Tokenizer endpoints report the ids they took or produced as prompt tokens.
  static json TokenUsage(size_t n) {
    return {{"prompt_tokens", n}, {"completion_tokens", 0}, {"total_tokens", n}};
  }

  void TokenJob(const httplib::Request& req, httplib::Response& res, bool tokenize) {
    const auto deadline = Clock::now() + std::chrono::seconds(options_.request_timeout_s);
    auto body = ParseJsonBody(req.body);
    if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
    const json& doc = std::get<json>(body);
    auto parsed = tokenize ? ParseTokenizeRequest(doc, model_names_.front())
                           : ParseDetokenizeRequest(doc, model_names_.front());
    if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
    JobRequest request = std::move(std::get<JobRequest>(parsed));
    if (!KnownModel(request.model)) return SendError(res, ModelNotFound(request.model));
    UpdateLog(res, [&](LogRecord& r) { r.model = request.model; });
    ApiError error;
    double queue_ms = 0;
    std::unique_ptr<ActiveJob> job =
        Admit(request, deadline, WatchClient(req), &queue_ms, &error, res);
    if (!job) return SendError(res, error, queue_ms);
    while (true) {
      auto ev = WaitEvent(*job, &error);
      if (!ev) return SendError(res, error, queue_ms);
      if (ev->worker_died) {
        job->finished = true;
        return SendError(res, WorkerDied(), queue_ms);
      }
      auto type = PeekMessageType(ev->frame);
      if (!type) continue;
      if (*type == MessageType::kJobError) {
        job->finished = true;
        auto m = DecodeJobError(ev->frame);
        return SendError(
            res, m ? FromJobError(*m) : ServerError(500, "internal_error", "internal error"),
            queue_ms);
      }
      if (*type == MessageType::kTokens) {
        job->finished = true;
        auto m = DecodeTokens(ev->frame);
        if (!m) return SendError(res, ServerError(500, "internal_error", "internal error"));
        UpdateLog(res,
                  [&](LogRecord& r) { r.prompt_tokens = static_cast<int64_t>(m->ids.size()); });
        const size_t n = m->ids.size();
        return SendJson(
            res, 200,
            {{"model", request.model}, {"tokens", m->ids}, {"count", n}, {"usage", TokenUsage(n)}},
            queue_ms);
      }
      if (*type == MessageType::kText) {
        job->finished = true;
        auto m = DecodeText(ev->frame);
        if (!m) return SendError(res, ServerError(500, "internal_error", "internal error"));
        return SendJson(res, 200,
                        {{"model", request.model},
                         {"prompt", m->text},
                         {"usage", TokenUsage(request.ids.size())}},
                        queue_ms);
      }
    }
  }

  const ServeOptions& options_;
  WorkerSupervisor supervisor_;
  AdmissionQueue admission_;
  RateLimiter rate_limiter_;
  std::vector<std::string> model_names_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> request_counter_{0};
  std::atomic<uint64_t> job_counter_{0};
  std::string request_prefix_;
  int64_t created_ = 0;
  Clock::time_point started_at_;
  std::mutex log_mu_;
  std::map<std::string, LogRecord> log_;
};

}  // namespace

int RunServer(const ServeOptions& options) {
  if (options.models.empty()) {
    std::fprintf(stderr, "tessera serve: no model given; pass --model DIR\n");
    return 2;
  }
  // Signals are taken by one thread with sigwait; every other thread (and, until it resets
  // its mask, the worker child) has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // internal: wakes the signal thread when the server stops
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<httplib::Server> svr;
  if (!options.tls_cert.empty() || !options.tls_key.empty()) {
    if (options.tls_cert.empty() || options.tls_key.empty()) {
      std::fprintf(stderr, "tessera serve: --tls-cert and --tls-key must be given together\n");
      return 2;
    }
    auto tls =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!tls->is_valid()) {
      std::fprintf(stderr, "tessera serve: could not load the TLS certificate or key\n");
      return 1;
    }
    svr = std::move(tls);
  } else {
    svr = std::make_unique<httplib::Server>();
  }
  const size_t threads = static_cast<size_t>(std::max(1, options.http_threads));
  svr->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr->set_payload_max_length(options.max_body_bytes);
  svr->set_read_timeout(options.socket_timeout_s, 0);
  svr->set_write_timeout(options.socket_timeout_s, 0);
  // An idle keep-alive connection keeps its thread only this long (also before its first
  // request), so idle clients cannot starve new ones for the socket timeout.
  svr->set_keep_alive_timeout(
      std::max(1, std::min(options.socket_timeout_s, options.keep_alive_timeout_s)));

  Service service(options);
  service.Install(*svr);
  int port = options.port;
  if (port == 0) {
    port = svr->bind_to_any_port(options.host);
    if (port < 0) port = 0;
  } else if (!svr->bind_to_port(options.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::fprintf(
        stderr,
        "tessera serve: cannot listen on %s:%d (in use or not an address of this machine)\n",
        options.host.c_str(), options.port);
    return 1;
  }
  service.supervisor().Start();
  std::printf("tessera serve: listening on %s://%s:%d (models: ",
              options.tls_cert.empty() ? "http" : "https", options.host.c_str(), port);
  for (size_t i = 0; i < options.models.size(); ++i)
    std::printf("%s%s", i ? ", " : "", options.models[i].name.c_str());
  std::printf(")\n");
  std::fflush(stdout);

  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1) return;
    std::fprintf(stderr, "tessera serve: %s received; finishing in-flight requests\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    service.StartDraining();
    service.admission().WaitIdle(Clock::now() + std::chrono::seconds(options.request_timeout_s));
    svr->stop();
  });
  const bool listened = svr->listen_after_bind();
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  service.supervisor().Stop();
  std::fprintf(stderr, "tessera serve: stopped\n");
  return listened ? 0 : 1;
}

}  // namespace tessera::server
