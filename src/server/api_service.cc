#include "server/api_service.h"

#include "server/api_service_internal.h"
#include "server/web_ui.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

using namespace api_internal;  // NOLINT: this service's own helpers

// A client-supplied field as one log token: bytes outside printable ASCII, and spaces, as %XX,
// so a request cannot forge or split access-log lines.
std::string LogToken(std::string_view v) {
  if (v.empty()) return "-";
  std::string out;
  for (unsigned char c : v) {
    if (c > 0x20 && c < 0x7f && c != '%') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fms", ms);
  return buf;
}

// The readable access-log line (--log-format text):
//   access 2026-12-02T06:10:00Z 127.0.0.1 POST /v1/chat/completions 200 20.5ms key=alice
//     model=tiny prompt=5 completion=8 queue=0.1ms ttft=3.1ms finish=stop id=...
std::string AccessLogText(const HttpRequest& head, const std::string& id, int status,
                          const AccessRecord& rec, const std::string& finish, double total_ms) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string line = "access " + std::string(ts) + " " + LogToken(head.remote_addr) + " " +
                     LogToken(head.method) + " " + LogToken(head.path) + " " +
                     std::to_string(status) + " " + Ms(total_ms);
  if (!head.api_key_name.empty()) line += " key=" + LogToken(head.api_key_name);
  if (!rec.model.empty()) {
    line += " model=" + LogToken(rec.model) + " prompt=" + std::to_string(rec.prompt_tokens) +
            " completion=" + std::to_string(rec.completion_tokens) + " queue=" + Ms(rec.queue_ms) +
            " ttft=" + Ms(rec.ttft_ms);
  }
  if (!finish.empty()) line += " finish=" + LogToken(finish);
  return line + " id=" + LogToken(id) + "\n";
}

}  // namespace

// ------------------------------------------------------------------------------ job threads

JobThreads::JobThreads(int max_threads) : max_threads_(std::max(1, max_threads)) {}

void JobThreads::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
  // Threads are started as they are needed, up to the bound: a server configured for a long
  // queue holds no idle threads it has never used.
  if (idle_ < tasks_.size() && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  } else {
    cv_.notify_one();
  }
}

void JobThreads::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

void JobThreads::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // Post() no longer adds threads once stopping_ is set, so the list is stable here.
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

// ------------------------------------------------------------------------------ service

ApiService::ApiService(const ServeOptions& options)
    : options_(options),
      supervisor_(
          {options.executable, options.worker_args, std::chrono::seconds(options.hang_timeout_s)}),
      admission_(options.max_active, options.max_queued),
      rate_limiter_(options.rate_limit_per_minute == kRateLimitAuto
                        ? kDefaultRateLimitPerMinute
                        : options.rate_limit_per_minute),
      // Every admitted job (running or queued) has its thread; Enter() bounds how many.
      jobs_(options.max_active + options.max_queued) {
  served_ = options.models;
  for (const worker::ModelEntry& m : options.models) {
    model_names_.push_back(m.name);
    model_kinds_.push_back(m.kind);
    const bool chat = m.kind == ModelKind::kChat || m.kind == ModelKind::kDecide;
    if (default_chat_model_.empty() && chat) default_chat_model_ = m.name;
    if (default_completion_model_.empty() && (chat || m.kind == ModelKind::kCompletion)) {
      default_completion_model_ = m.name;
    }
  }
  if (default_chat_model_.empty() && !model_names_.empty()) default_chat_model_ = model_names_[0];
  if (default_completion_model_.empty() && !model_names_.empty()) {
    default_completion_model_ = model_names_[0];
  }
  // Checked before the server started (cmd_serve.cc); should the two ever disagree, no key is
  // accepted rather than fewer checks made.
  auth_required_ = !options.api_key.empty() || !options.api_keys_file.empty() ||
                   !options.saved_api_key_file.empty();
  if (auto keys = WithDefaultKey(options.api_keys, options.api_key)) {
    api_keys_.Replace(std::move(*keys));
  } else {
    std::fprintf(stderr, "tessera serve: API keys: %s; every request is refused\n",
                 keys.status().message().c_str());
  }
  metrics_ = std::make_unique<ServerMetrics>(model_names_);
  endpoints_ = BuiltinEndpoints(options.web_ui);
  endpoints_.insert(endpoints_.end(), options.extra_endpoints.begin(),
                    options.extra_endpoints.end());
  created_ = UnixNow();
  started_at_ = Clock::now();
}

ApiService::~ApiService() {
  jobs_.Stop();
}

json ApiService::ServerStats(double queue_wait_ms) const {
  const AdmissionQueue::Load load = admission_.load();
  return {{"queue_wait_ms", queue_wait_ms},
          {"active", load.active},
          {"queued", load.waiting},
          {"worker_state", WorkerStateName(supervisor_.state())},
          {"worker_restarts", supervisor_.restarts()},
          {"npu_device", NpuDeviceJson()},
          {"uptime_s", MsBetween(started_at_, Clock::now()) / 1000.0}};
}

json ApiService::NpuDeviceJson() const {
  return options_.npu_device.empty() ? json(nullptr) : json(options_.npu_device);
}

// Where the model's layers ran: its placement and the NPU device (null without one).
void ApiService::AddPlacementStats(json& stats, const std::string& model) const {
  auto it = options_.placements.find(model);
  stats["placement"] = it == options_.placements.end() ? json(nullptr) : json(it->second);
  stats["npu_device"] = NpuDeviceJson();
}

// The job's stats (StatsJson) and the server's, in one object.
json ApiService::FullStats(const JobOutcome& outcome, double queue_ms) const {
  json stats = ServerStats(queue_ms);
  stats.update(StatsJson(outcome, queue_ms));
  return stats;
}

// Every JSON answer carries x_tessera_stats, and OpenAI's also usage; a body without its own
// gets the server's stats (and zero usage). Json: nlohmann::json, or ordered_json to keep the
// members' order. Other dialects count tokens in their own fields.
template <typename Json, typename StatsFn>
static std::string CompleteBody(Json body, ApiDialect dialect, const StatsFn& server_stats) {
  if (dialect == ApiDialect::kOpenAI && !body.contains("usage")) body["usage"] = ZeroUsage();
  if (!body.contains("x_tessera_stats")) body["x_tessera_stats"] = server_stats();
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse ApiService::JsonResponse(const Call& call, int status, json body,
                                      double queue_wait_ms) const {
  HttpResponse r = HttpResponse::Json(status, CompleteBody(std::move(body), call.dialect, [&] {
                                        return ServerStats(queue_wait_ms);
                                      }));
  r.headers = call.cors;
  return r;
}

void ApiService::SendJson(Call& call, int status, json body, double queue_wait_ms) {
  call.exchange->Respond(JsonResponse(call, status, std::move(body), queue_wait_ms));
}

void ApiService::SendOrderedJson(Call& call, int status, nlohmann::ordered_json body,
                                 double queue_wait_ms) {
  HttpResponse r = HttpResponse::Json(status, CompleteBody(std::move(body), call.dialect, [&] {
                                        return ServerStats(queue_wait_ms);
                                      }));
  r.headers = call.cors;
  call.exchange->Respond(std::move(r));
}

// A 503 engine_busy always says when to come back (1 s unless the caller knows better).
static void AddRetryAfter(const ApiError& e, std::vector<HttpHeader>& headers) {
  if (e.status != 503 || e.code != "engine_busy") return;
  for (const HttpHeader& h : headers)
    if (h.name == "Retry-After") return;
  headers.push_back({"Retry-After", "1"});
}

void ApiService::SendError(Call& call, const ApiError& e, double queue_wait_ms,
                           std::vector<HttpHeader> extra) {
  if (AbnormalEnd(e)) call.exchange->Note([&](AccessRecord& r) { r.finish = e.code; });
  HttpResponse r = JsonResponse(call, e.status, ErrorBodyIn(call.dialect, e), queue_wait_ms);
  for (HttpHeader& h : extra) r.headers.push_back(std::move(h));
  AddRetryAfter(e, r.headers);
  call.exchange->Respond(std::move(r));
}

// An error once the worker had the job: the full stats object (the job's and the server's)
// goes with it, and the usage so far where the wire's API has it in its errors.
json ApiService::JobErrorBody(const GenerationWire& wire, ApiDialect dialect, const ApiError& e,
                              const JobOutcome& outcome, double queue_ms) const {
  json body = ErrorBodyIn(dialect, e);
  if (wire.errors_carry_usage()) body["usage"] = UsageJson(outcome);
  body["x_tessera_stats"] = FullStats(outcome, queue_ms);
  return body;
}

void ApiService::SendJobError(Call& call, const GenerationWire& wire, const ApiError& e,
                              const JobOutcome& outcome, double queue_ms) {
  call.exchange->Note([&](AccessRecord& r) {
    FillRecord(r, outcome, queue_ms);
    if (AbnormalEnd(e)) r.finish = e.code;
  });
  HttpResponse r =
      JsonResponse(call, e.status, JobErrorBody(wire, call.dialect, e, outcome, queue_ms));
  AddRetryAfter(e, r.headers);
  call.exchange->Respond(std::move(r));
}

bool ApiService::OriginAllowed(std::string_view origin) const {
  for (const std::string& o : options_.allow_origins) {
    if (o == "*" || o == origin) return true;
  }
  return false;
}

std::vector<HttpHeader> ApiService::CorsHeaders(const HttpRequest& head) const {
  const std::string_view origin = head.Header("Origin");
  if (origin.empty() || !OriginAllowed(origin)) return {};
  return {{"Access-Control-Allow-Origin", std::string(origin)}, {"Vary", "Origin"}};
}

std::vector<worker::ModelEntry> ApiService::served_models() const {
  std::lock_guard<std::mutex> lock(models_mu_);
  return served_;
}

bool ApiService::AddServedModel(const worker::ModelEntry& model) {
  if (KnownModel(model.name)) return false;
  supervisor_.AddModel({model.name, model.dir, model.kind});
  std::lock_guard<std::mutex> lock(models_mu_);
  // Two pulls of one name never run together (ollama_pull.cc), so nothing added it meanwhile.
  served_.push_back(model);
  model_names_.push_back(model.name);
  model_kinds_.push_back(model.kind);
  metrics_->AddModel(model.name);
  return true;
}

bool ApiService::KnownModel(const std::string& name) const {
  std::lock_guard<std::mutex> lock(models_mu_);
  return std::find(model_names_.begin(), model_names_.end(), name) != model_names_.end();
}

HttpResponse ApiService::ProtocolError(int status, const std::string& code,
                                       const std::string& message) {
  ApiError e;
  e.status = status;
  e.code = code;
  e.message = message;
  if (status >= 500) e.type = "server_error";
  json body = ErrorBody(e);
  body["usage"] = ZeroUsage();
  body["x_tessera_stats"] = ServerStats(0);
  return HttpResponse::Json(status, Dump(body));
}

// ---- protections that need only the head

void ApiService::UseSavedApiKey(const std::string& key) {
  api_keys_.Replace({{std::string(kDefaultApiKeyName), key}});
}

Status ApiService::ReloadApiKeys(std::string* message) {
  if (options_.api_keys_file.empty()) {
    *message = "no --api-keys file to reload; the keys stay as they are";
    return InvalidArgument(*message);
  }
  auto keys = LoadApiKeysFile(options_.api_keys_file);
  if (keys) keys = WithDefaultKey(std::move(*keys), options_.api_key);
  if (!keys) {
    *message = "the API keys were not reloaded (" + keys.status().message() + "); the " +
               std::to_string(api_keys_.size()) + " keys loaded before stay in use";
    return keys.status();
  }
  const size_t n = keys->size();
  api_keys_.Replace(std::move(*keys));
  *message = "reloaded " + std::to_string(n) + (n == 1 ? " API key" : " API keys") + " from " +
             options_.api_keys_file;
  return Status::Ok();
}

std::optional<HttpResponse> ApiService::Screen(HttpRequest& head) {
  Call call{head, nullptr, CorsHeaders(head), Clock::now()};
  const Endpoint* endpoint = FindEndpoint(head.path, nullptr, head.method);
  if (endpoint != nullptr) call.dialect = endpoint->dialect;
  auto refuse = [&](const ApiError& e, std::vector<HttpHeader> extra = {}) {
    HttpResponse r = JsonResponse(call, e.status, ErrorBodyIn(call.dialect, e));
    for (HttpHeader& h : extra) r.headers.push_back(std::move(h));
    return r;
  };
  if (head.method == "OPTIONS") {
    if (call.cors.empty()) {
      ApiError e = InvalidField("",
                                "cross-origin requests from this origin are not allowed; start the "
                                "server with --allow-origin to permit one");
      e.status = 403;
      e.code = "cors_origin_denied";
      return refuse(e);
    }
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.headers = call.cors;
    r.SetHeader("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    r.SetHeader("Access-Control-Allow-Headers",
                "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
    r.SetHeader("Access-Control-Max-Age", "600");
    return r;
  }
  // The page's files are public: the page itself asks for the key.
  const bool open_route =
      endpoint != nullptr &&
      (endpoint->access == EndpointAccess::kOpen ||
       (endpoint->access == EndpointAccess::kMetrics && options_.metrics_public));
  if (open_route) {
    if (head.method == "GET" || head.method == "HEAD") return std::nullopt;
  } else {
    if (draining_) return refuse(ServerError(503, "shutting_down", "the server is shutting down"));
    {
      int retry_after = 0;
      if (!rate_limiter_.Allow(head.remote_addr, &retry_after)) {
        ApiError e = InvalidField("", "rate limit of " + std::to_string(rate_limiter_.limit()) +
                                          " requests per minute exceeded; retry after " +
                                          std::to_string(retry_after) + " s");
        e.status = 429;
        e.type = "rate_limit_error";
        e.code = "rate_limit_exceeded";
        return refuse(e, {{"Retry-After", std::to_string(retry_after)}});
      }
    }
    if (auth_required_) {
      // Bearer, or Anthropic's x-api-key (what its clients send).
      const std::string_view auth = head.Header("Authorization");
      const std::string_view x_api_key = head.Header("x-api-key");
      std::optional<std::string_view> token = BearerToken(auth);
      if (!token && auth.empty() && !x_api_key.empty()) token = x_api_key;
      std::optional<std::string> name = token ? api_keys_.Identify(*token) : std::nullopt;
      if (!name) {
        ApiError e = InvalidField(
            "",
            auth.empty() && x_api_key.empty()
                ? "missing API key; send 'Authorization: Bearer <key>' (or 'x-api-key: <key>')"
                : "incorrect API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')");
        e.status = 401;
        e.code = "invalid_api_key";
        return refuse(e, {{"WWW-Authenticate", "Bearer"}});
      }
      head.api_key_name = std::move(*name);  // for the log, /metrics and the cache's scope
    }
  }
  if (endpoint == nullptr) {
    ApiError e = InvalidField("", "no such endpoint: " + head.path);
    e.status = 404;
    e.code = "not_found";
    return refuse(e);
  }
  if (!EndpointAnswers(*endpoint, head.method)) {
    const std::string allow = AllowedMethods(head.path);
    ApiError e =
        InvalidField("", head.method + " is not allowed on " + head.path + "; use " + allow);
    e.status = 405;
    e.code = "method_not_allowed";
    return refuse(e, {{"Allow", allow}});
  }
  return std::nullopt;
}

// ---- routes

void ApiService::Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  auto call = std::make_shared<Call>();
  call->cors = CorsHeaders(request);
  call->request = std::move(request);
  call->exchange = std::move(exchange);
  call->arrived = Clock::now();
  if (const Endpoint* endpoint = FindEndpoint(call->request.path, nullptr, call->request.method)) {
    call->dialect = endpoint->dialect;
    return endpoint->handler(*this, std::move(call), *endpoint);
  }
  ApiError e = InvalidField("", "no such endpoint");
  e.status = 404;
  e.code = "not_found";
  SendError(*call, e);
}

void ApiService::Health(Call& call) {
  SendJson(call, 200, {{"status", "ok"}});
}

void ApiService::Ready(Call& call) {
  const bool ready = supervisor_.ready() && !draining_;
  // Queue occupancy lets a client (and the tests) see load before it is refused.
  const AdmissionQueue::Load load = admission_.load();
  SendJson(call, ready ? 200 : 503,
           {{"status", draining_ ? std::string("draining")
                                 : std::string(WorkerStateName(supervisor_.state()))},
            {"active", load.active},
            {"queued", load.waiting},
            {"placements", options_.placements},
            {"npu_device", NpuDeviceJson()}});
}

void ApiService::Metrics(Call& call) {
  MetricsGauges g;
  const AdmissionQueue::Load load = admission_.load();
  g.active = load.active;
  g.queued = load.waiting;
  g.worker_restarts = supervisor_.restarts();
  g.worker_ready = supervisor_.ready();
  g.placements = options_.placements;
  g.npu_device = options_.npu_device;
  g.resident_bytes = ProcessResidentBytes();
  const pid_t worker = supervisor_.worker_pid();
  g.worker_resident_bytes = worker > 0 ? ProcessResidentBytes(worker) : 0;
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_->Render(g);
  r.headers = call.cors;
  call.exchange->Respond(std::move(r));
}

void ApiService::ModelsList(Call& call) {
  // x_tessera_kind lets a client (the web page) offer each endpoint the models it takes.
  std::lock_guard<std::mutex> lock(models_mu_);
  json body = ModelsListBody(model_names_, created_);
  for (size_t i = 0; i < model_kinds_.size(); ++i)
    body["data"][i]["x_tessera_kind"] = std::string(ModelKindName(model_kinds_[i]));
  SendJson(call, 200, std::move(body));
}

void ApiService::OneModel(Call& call) {
  const std::string id = *ModelIdFromPath(call.request.path);
  if (!KnownModel(id)) return SendError(call, ModelNotFound(id));
  nlohmann::json body = ModelBody(id, created_);
  if (const std::optional<ModelKind> kind = KindOf(id)) {
    body["x_tessera_kind"] = std::string(ModelKindName(*kind));  // as in the list
  }
  SendJson(call, 200, std::move(body));
}

void ApiService::Completed(const HttpRequest& head, const std::string& request_id, int status,
                           const AccessRecord& rec, double total_ms) {
  std::string finish = rec.finish;
  if (status == 499 && finish.empty()) finish = "client_disconnected";
  std::string route = "other";  // unknown paths share one label: clients cannot grow the set
  FindEndpoint(head.path, &route);
  metrics_->Observe(route, status, head.api_key_name, rec, total_ms);
  std::string text;
  if (options_.access_log_json) {
    json line = {{"type", "access"},
                 {"ts", UnixNow()},
                 {"id", request_id},
                 {"client", head.remote_addr},
                 {"method", head.method},
                 {"path", head.path},
                 {"status", status},
                 {"key", head.api_key_name.empty() ? json(nullptr) : json(head.api_key_name)},
                 {"model", rec.model},
                 {"prompt_tokens", rec.prompt_tokens},
                 {"completion_tokens", rec.completion_tokens},
                 {"queue_ms", rec.queue_ms},
                 {"ttft_ms", rec.ttft_ms},
                 {"total_ms", total_ms}};
    if (!finish.empty()) line["finish_reason"] = finish;
    text = Dump(line) + "\n";
  } else {
    text = AccessLogText(head, request_id, status, rec, finish, total_ms);
  }
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace tessera::server
