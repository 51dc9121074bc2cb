// Internal to ApiService (api_service.cc, api_jobs.cc, api_tasks.cc): the error objects it
// answers with, small helpers, and the record of a job admitted to the worker.
#pragma once

#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_service.h"
#include "server/generation_wire.h"
#include "server/openai_api.h"
#include "server/task_api.h"

namespace tessera::server::api_internal {

using nlohmann::json;

inline std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

inline double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How often a job that waits (in the queue, for the worker, for the next token) looks whether
// its client is still connected (the front end notices it on the event loop).
constexpr auto kClientCheckInterval = std::chrono::milliseconds(50);

inline json ZeroUsage() {
  return {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}};
}

inline ApiError ServerError(int status, const std::string& code, const std::string& message) {
  ApiError e;
  e.status = status;
  e.type = "server_error";
  e.code = code;
  e.message = message;
  return e;
}

// What a request whose client went away is answered (nobody reads it; the access log shows
// the status, 499 as nginx logs it).
inline ApiError ClientGone() {
  ApiError e = ServerError(499, "client_disconnected",
                           "the client closed the connection before the answer was ready; the "
                           "request was cancelled");
  e.type = "invalid_request_error";
  return e;
}

inline ApiError ModelNotFound(const std::string& name) {
  ApiError e = InvalidField(
      "model",
      "the model '" + name + "' does not exist or is not served here; GET /v1/models lists them");
  e.status = 404;
  e.code = "model_not_found";
  return e;
}

// The request field a job's input (its prompt, messages or state) was read from: as the worker
// names it in its refusals (by the payload) and as the client's API spells it.
struct InputFieldNames {
  std::string_view worker;  // a chat's "messages", a completion's "prompt", System One's
                            // "state", any other job's "input"
  std::string_view client;  // GenerationRequest / TaskRequest::input_field; empty: the worker's
};

inline InputFieldNames InputFieldOf(const worker::JobPayload& payload,
                                    std::string_view client_name) {
  std::string_view worker = "input";
  if (std::holds_alternative<worker::ChatPayload>(payload)) worker = "messages";
  if (std::holds_alternative<worker::CompletionPayload>(payload)) worker = "prompt";
  if (std::holds_alternative<worker::SystemOnePayload>(payload)) worker = "state";
  return {worker, client_name.empty() ? worker : client_name};
}

// The worker's refusal of a job, its fields named as the client's API names them: a refusal of
// the input (a too-long prompt, or one naming input.worker) names input.client.
inline ApiError FromJobError(const worker::JobErrorMessage& m, const InputFieldNames& input) {
  ApiError e;
  e.message = m.message;
  switch (m.kind) {
    case worker::JobErrorKind::kInvalidRequest:
      e.param = m.field;  // set by the job that refused it, never read out of the message
      break;
    case worker::JobErrorKind::kContextLength:
      e.code = "context_length_exceeded";
      e.param = m.field.empty() ? std::string(input.worker) : m.field;
      break;
    case worker::JobErrorKind::kModelNotFound:
      e.status = 404;
      e.code = "model_not_found";
      e.param = "model";
      break;
    case worker::JobErrorKind::kInternal:
      e = ServerError(500, "internal_error", m.message);
      break;
    case worker::JobErrorKind::kEngineBusy:
      e = ServerError(503, "engine_busy", m.message);
      break;
  }
  if (e.param == input.worker) e.param = input.client;
  return e;
}

inline ApiError WorkerDied() {
  return ServerError(502, "worker_crashed",
                     "the inference worker stopped while handling this request; it is being "
                     "restarted, retry shortly");
}

// What a job whose worker went away is answered, by how the loss concerns it.
inline ApiError WorkerLost(WorkerLoss loss) {
  if (loss == WorkerLoss::kServerStopping) {
    return ServerError(503, "shutting_down",
                       "the server is stopping and cut this request short; send it again once "
                       "the server is back (or to another instance)");
  }
  return WorkerDied();
}

inline ApiError DeadlinePassed() {
  return ServerError(504, "timeout",
                     "the request took longer than the server's request timeout (--request-"
                     "timeout) and was cancelled; ask for less (max_tokens, fewer inputs), or "
                     "ask the operator for a longer timeout");
}

inline ApiError WorkerUnavailable() {
  return ServerError(503, "worker_unavailable", "the inference worker is not ready; retry shortly");
}

// Every endpoint's answer past the admission queue (TEI answers an overloaded queue 429 too).
inline ApiError QueueFull(int retry_after_s) {
  ApiError e = ServerError(429, "queue_full",
                           "the server is busy (the queue is full); retry after " +
                               std::to_string(retry_after_s) + " s");
  e.type = "rate_limit_error";
  return e;
}

// The ways a request can be cut short, as the access log names them.
inline bool AbnormalEnd(const ApiError& e) {
  return e.code == "client_disconnected" || e.code == "worker_crashed" || e.code == "timeout" ||
         e.code == "shutting_down";
}

// "/v1/models/{id}": the id, percent-decoded (ids such as org/name may come encoded).
inline std::optional<std::string> ModelIdFromPath(std::string_view path) {
  constexpr std::string_view kPrefix = "/v1/models/";
  if (path.substr(0, kPrefix.size()) != kPrefix || path.size() == kPrefix.size()) return {};
  std::string id;
  for (size_t i = kPrefix.size(); i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && std::isxdigit(path[i + 1]) &&
        std::isxdigit(path[i + 2])) {
      id.push_back(static_cast<char>(std::stoi(std::string(path.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      id.push_back(path[i]);
    }
  }
  return id;
}

// The bearer token of an Authorization value; the scheme is case-insensitive (RFC 7235).
inline std::optional<std::string_view> BearerToken(std::string_view auth) {
  constexpr size_t kScheme = 6;  // "Bearer"
  if (auth.size() <= kScheme + 1 || !EqualsIgnoreCase(auth.substr(0, kScheme), "Bearer") ||
      auth[kScheme] != ' ') {
    return {};
  }
  std::string_view token = auth.substr(kScheme + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

// What the access log keeps of a job.
inline void FillRecord(AccessRecord& r, const JobOutcome& outcome, double queue_ms) {
  r.queue_ms = queue_ms;
  const UsageCounts usage = CountUsage(outcome);
  r.prompt_tokens = usage.prompt_tokens;
  r.completion_tokens = usage.completion_tokens;
  if (outcome.done) {
    const worker::DoneMessage& d = *outcome.done;
    r.ttft_ms = d.ttft_ms;
    r.finish = std::string(worker::FinishReasonName(d.finish_reason));
    r.scheduler = {true,        d.slots,          d.slots_in_use,    d.sequences_waiting,
                   d.kv_blocks, d.kv_blocks_free, d.kv_blocks_cached};
  } else if (outcome.ttft_ms_seen >= 0) {
    r.ttft_ms = outcome.ttft_ms_seen;
  }
}

}  // namespace tessera::server::api_internal

namespace tessera::server {

// A job admitted to the worker: the admission slot and the routing are released exactly once,
// by the destructor, whichever way the request ends.
struct ApiService::ActiveJob {
  ApiService* service = nullptr;
  uint64_t ticket = 0;
  uint64_t job_id = 0;
  bool submitted = false;
  bool finished = false;     // a terminal message arrived (or the worker died)
  bool client_gone = false;  // the client went away while it waited
  // How the loss of its worker concerned it, if its worker went away under it; and how
  // often it ran again (RunAgain: at most once).
  std::optional<WorkerLoss> worker_lost;
  int retries = 0;
  api_internal::InputFieldNames input;  // how its refusals name the request's input (FromJobError)
  Clock::time_point admitted_at;
  Clock::time_point submitted_at;
  Clock::time_point deadline;
  std::shared_ptr<HttpExchange> exchange;
  std::shared_ptr<JobChannel> channel = std::make_shared<JobChannel>();

  ~ActiveJob() {
    if (service == nullptr) return;
    if (submitted) {
      if (!finished) {
        // Cancel and wait for the worker to stop, so the next job starts clean. It stops at its
        // next step; past the hang timeout the supervisor kills the worker, which ends it too
        // (the second's margin lets that death arrive).
        service->supervisor_.Cancel(job_id);
        const auto limit =
            Clock::now() + std::chrono::seconds(service->options_.hang_timeout_s + 1);
        while (auto ev = channel->Wait(limit)) {
          if (ev->worker_died) break;
          auto type = worker::PeekMessageType(ev->frame);
          if (type && EndsJob(*type)) break;
        }
      }
      service->supervisor_.Release(job_id);
    }
    service->admission_.Leave(ticket, api_internal::MsBetween(admitted_at, Clock::now()) / 1000.0);
  }
};

}  // namespace tessera::server
