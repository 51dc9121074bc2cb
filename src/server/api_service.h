// The OpenAI-compatible API behind the HTTP front end: protections that need only the request
// head (CORS, draining, rate limit, bearer auth, routes) run in Screen(), before the body is
// read; Handle() validates the body, admits generation and tokenizer jobs through the bounded
// queue on the event loop (a full queue is a 429 at once, costing no thread) and runs each
// admitted job on one of max_active + max_queued job threads, which wait for the worker and
// answer through the request's HttpExchange, streamed or whole.
//
//   ApiService service(options);                 // options: ServeOptions (http_server.h)
//   auto fe = HttpFrontEnd::Create(fe_options, &service);
//   service.supervisor().Start();
//   ... (*fe)->Run() ...
//   service.StartDraining();  service.admission().WaitIdle(deadline);
//   (*fe)->Stop();  service.Stop();              // joins the job threads
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "server/api_error.h"
#include "server/api_keys.h"
#include "server/endpoints.h"
#include "server/guards.h"
#include "server/http_exchange.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/worker_supervisor.h"

namespace tessera::server {

// Named here, defined where they are built (generation_wire.h, openai_api.h, task_api.h):
// a file that only routes or screens requests needs neither JSON nor the wires.
class GenerationWire;
struct GenerationDefaults;
struct JobOutcome;
struct ParsedGeneration;
struct ResponseMeta;
struct TaskRequest;
enum class TaskEndpoint;

// Turns a request body into the job and the wire that answers it (generation_wire.h).
using GenerationParser = std::function<std::variant<ParsedGeneration, ApiError>(
    const nlohmann::ordered_json& body, const GenerationDefaults& defaults)>;

// At most `max_threads` threads, started as needed, that run posted tasks in order; Stop()
// runs what is queued, then joins. Tasks posted after Stop() are dropped.
class JobThreads {
 public:
  explicit JobThreads(int max_threads);
  ~JobThreads() { Stop(); }
  void Post(std::function<void()> task);
  void Stop();

 private:
  void Loop();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// One request being answered: its head (and body), where the answer goes, its CORS headers.
struct ApiCall {
  HttpRequest request;
  std::shared_ptr<HttpExchange> exchange;
  std::vector<HttpHeader> cors;
  Clock::time_point arrived;
  ApiDialect dialect = ApiDialect::kOpenAI;  // the endpoint's: the shape of its errors
};

class ApiService final : public HttpHandler {
 public:
  explicit ApiService(const ServeOptions& options);
  ~ApiService() override;

  WorkerSupervisor& supervisor() { return supervisor_; }
  // The per-client rate limit in use (0: off); set before serving when it was left to the
  // listening addresses (ServeOptions::rate_limit_per_minute).
  void SetRateLimit(int per_minute) { rate_limiter_.set_limit(per_minute); }
  int rate_limit() const { return rate_limiter_.limit(); }
  AdmissionQueue& admission() { return admission_; }
  void StartDraining() { draining_ = true; }
  bool draining() const { return draining_; }
  // Joins the job threads and ends the endpoints' own work (Endpoint::stop), after the front
  // end stopped and the worker was stopped.
  void Stop() {
    jobs_.Stop();
    for (const Endpoint& e : endpoints_) {
      if (e.stop) e.stop();
    }
  }

  std::optional<HttpResponse> Screen(HttpRequest& head) override;
  // SIGHUP: reads the --api-keys file again; a file that fails to load or check leaves the keys
  // in use as they were. The message says what happened, for the server's log.
  Status ReloadApiKeys(std::string* message);
  // The key read from or saved in ServeOptions::saved_api_key_file, named "default"; set
  // before serving (until then no token is accepted).
  void UseSavedApiKey(const std::string& key);
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  HttpResponse ProtocolError(int status, const std::string& code,
                             const std::string& message) override;
  void Completed(const HttpRequest& head, const std::string& request_id, int status,
                 const AccessRecord& record, double total_ms) override;

  // What endpoint handlers (endpoints.h) answer with.
  void SendJson(ApiCall& call, int status, nlohmann::json body, double queue_wait_ms = 0);
  // As SendJson, keeping the body's member order (System One's answers keyed by name).
  void SendOrderedJson(ApiCall& call, int status, nlohmann::ordered_json body,
                       double queue_wait_ms = 0);
  void SendError(ApiCall& call, const ApiError& e, double queue_wait_ms = 0,
                 std::vector<HttpHeader> extra = {});
  // The served model a request to `e` runs on: `name` when it is of one of e.model_kinds,
  // else (no name) the first served model of the first kind that has one; otherwise the error
  // to answer (404 for an unknown name or none of the kinds served, 400 for the wrong kind).
  std::variant<std::string, ApiError> ModelFor(const Endpoint& e, const std::string& name) const;
  // Every endpoint the server answers: the built-in table, then ServeOptions::extra_endpoints.
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  // The web page's row only with `web_ui` (--no-ui: its paths are unknown). api_endpoints.cc.
  static std::vector<Endpoint> BuiltinEndpoints(bool web_ui);

  // The one generation path (generation_wire.h): joins the queue on the event loop, then on a
  // job thread parses the body with `parse`, checks the model can generate (a chat payload
  // needs a chat template), runs the job and answers through the parser's wire, whole or
  // streamed. Every API that generates text calls this from its endpoint rows.
  void Generation(std::shared_ptr<ApiCall> call, GenerationParser parse);
  // The prompt tokens of a chat, as a generation would run it (template, tools, thinking
  // switch): `parse` turns the body into a job with a ChatTokenizePayload, `answer` shapes
  // the count (Anthropic's count_tokens). The model checks are Generation's.
  using ChatTokenCountParser = std::function<std::variant<worker::JobRequest, ApiError>(
      const nlohmann::ordered_json& body, const GenerationDefaults& defaults)>;
  void ChatTokenCount(std::shared_ptr<ApiCall> call, ChatTokenCountParser parse,
                      std::function<nlohmann::json(size_t count)> answer);
  // A task job (embeddings, ...) in another API's shape (Ollama's /api/embed): `parse` turns
  // the body into a TaskRequest whose model is routed by `endpoint`'s kinds (ModelFor), and
  // `answer` shapes the worker's result; the admission and the worker are the task path's.
  using TaskParser =
      std::function<std::variant<TaskRequest, ApiError>(const nlohmann::ordered_json& body)>;
  using TaskAnswer = std::function<nlohmann::ordered_json(const TaskRequest& request,
                                                          const worker::TaskResultMessage& result,
                                                          const std::string& id, double queue_ms)>;
  void Task(std::shared_ptr<ApiCall> call, const Endpoint& endpoint, TaskParser parse,
            TaskAnswer answer);
  // The served models as --model gave them (name, checkpoint folder, kind), in order, then
  // those added since (AddServedModel).
  std::vector<worker::ModelEntry> served_models() const;
  std::optional<ModelKind> KindOf(const std::string& name) const;
  // Serves `model` from now on (a model pulled while the server runs: /api/pull): the worker
  // is told first, so a request naming it once this returns finds it there. A name already
  // served is left as it is (false).
  bool AddServedModel(const worker::ModelEntry& model);
  int64_t started_unix() const { return created_; }

 private:
  using Call = ApiCall;
  struct ActiveJob;
  enum class Step { kProgress, kDone, kFailed };

  nlohmann::json ServerStats(double queue_wait_ms) const;
  nlohmann::json NpuDeviceJson() const;  // the NPU the models' xdna layers use, or null
  void AddPlacementStats(nlohmann::json& stats, const std::string& model) const;
  nlohmann::json FullStats(const JobOutcome& outcome, double queue_ms) const;
  HttpResponse JsonResponse(const Call& call, int status, nlohmann::json body,
                            double queue_wait_ms = 0) const;
  void SendJobError(Call& call, const GenerationWire& wire, const ApiError& e,
                    const JobOutcome& outcome, double queue_ms);
  nlohmann::json JobErrorBody(const GenerationWire& wire, ApiDialect dialect, const ApiError& e,
                              const JobOutcome& outcome, double queue_ms) const;
  bool OriginAllowed(std::string_view origin) const;
  std::vector<HttpHeader> CorsHeaders(const HttpRequest& head) const;
  bool KnownModel(const std::string& name) const;
  // Why `model` cannot run a generation (a chat one when `chat`), or nothing: unknown (404),
  // an embedding or classifier model, a completion model asked for a chat.
  std::optional<ApiError> GenerationModelError(const std::string& model, bool chat) const;

  // A ticket if the queue has room; else the 429 queue_full (every endpoint) is sent here.
  std::optional<uint64_t> EnterQueue(Call& call);
  void TokenJob(std::shared_ptr<Call> call, bool tokenize);
  void TaskJobCall(std::shared_ptr<Call> call, const Endpoint& endpoint, TaskEndpoint task);
  // The endpoint answering `path`, or null; `label` gets its /metrics label. With `method`, the
  // row of that path answering it, else the path's first row (which Screen answers 405).
  const Endpoint* FindEndpoint(std::string_view path, std::string* label = nullptr,
                               std::string_view method = {}) const;
  // The Allow header of `path`: the methods of its rows ("GET, HEAD, DELETE").
  std::string AllowedMethods(std::string_view path) const;
  void Health(Call& call);
  void Ready(Call& call);
  void Metrics(Call& call);
  void ModelsList(Call& call);
  void OneModel(Call& call);
  // On a job thread: the blocking part of each.
  void RunGeneration(Call& call, ParsedGeneration parsed, uint64_t ticket);
  void RunTokenJob(Call& call, worker::JobRequest request, uint64_t ticket);
  // The generic client of every job answered by one message (tokenizer and task endpoints):
  // admits `job`, waits for the worker's answer and returns its frame, or the error to send
  // (a refusal names its field as the client's API does: `input_field` is the request field
  // the job's input was read from, TaskRequest::input_field).
  struct JobAnswer {
    worker::MessageType type = worker::MessageType::kDone;
    std::string frame;
    double queue_ms = 0;
  };
  std::variant<JobAnswer, ApiError> AwaitAnswer(Call& call, worker::JobRequest& job,
                                                uint64_t ticket, std::vector<HttpHeader>* extra,
                                                double* queue_ms,
                                                std::string_view input_field = {});
  void RunTask(Call& call, TaskRequest request, uint64_t ticket, const Endpoint& endpoint,
               const TaskAnswer& answer);
  std::unique_ptr<ActiveJob> Admit(Call& call, worker::JobRequest& job, uint64_t ticket,
                                   double* queue_ms, ApiError* error,
                                   std::vector<HttpHeader>* extra);
  bool SubmitToWorker(ActiveJob& active, worker::JobRequest& job, ApiError* error,
                      std::vector<HttpHeader>* extra);
  bool RunAgain(ActiveJob& active, worker::JobRequest& job, ApiError* error);
  std::optional<WorkerEvent> WaitEvent(ActiveJob& job, ApiError* error);

  Step NextEvent(ActiveJob& job, JobOutcome& outcome, ApiError* error, worker::DeltaMessage* delta);
  void StreamEvents(Call& call, ActiveJob& job, JobOutcome& outcome, const ResponseMeta& meta,
                    GenerationWire& wire);

  const ServeOptions& options_;
  WorkerSupervisor supervisor_;
  AdmissionQueue admission_;
  RateLimiter rate_limiter_;
  ApiKeyring api_keys_;
  bool auth_required_ = false;  // a key (TESSERA_API_KEY, saved, or --api-keys) is set
  // The served models (--model's, then AddServedModel's) and their names and kinds, parallel;
  // requests read them on every thread while a pull may add one.
  mutable std::mutex models_mu_;
  std::vector<worker::ModelEntry> served_;
  std::vector<std::string> model_names_;
  std::unique_ptr<ServerMetrics> metrics_;  // /metrics; fed by Completed()
  std::vector<ModelKind> model_kinds_;      // parallel to model_names_
  std::string default_chat_model_;          // the first chat (or decide) model, else the first
  // The first model that continues a prompt (chat, decide or completion), else the first.
  std::string default_completion_model_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> job_counter_{0};
  int64_t created_ = 0;
  Clock::time_point started_at_;
  JobThreads jobs_;
  std::vector<Endpoint> endpoints_;  // BuiltinEndpoints() + options.extra_endpoints
};

}  // namespace tessera::server
