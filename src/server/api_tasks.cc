// ApiService's task endpoints (embeddings, rerank, moderations, classify): parsed and routed to
// a model of the endpoint's kind, admitted through the same queue as generation (a batch of
// many inputs waits its turn; a full queue is a 429 queue_full with Retry-After, as for
// generation), and answered whole when
// the worker's TaskResultMessage arrives.
#include "server/api_service.h"

#include <nlohmann/json.hpp>

#include "server/api_service_internal.h"

namespace tessera::server {

using namespace api_internal;  // NOLINT: this service's own helpers

std::optional<ModelKind> ApiService::KindOf(const std::string& name) const {
  std::lock_guard<std::mutex> lock(models_mu_);
  for (size_t i = 0; i < model_names_.size(); ++i) {
    if (model_names_[i] == name) return model_kinds_[i];
  }
  return std::nullopt;
}

void ApiService::TaskJobCall(std::shared_ptr<Call> call, const Endpoint& endpoint,
                             TaskEndpoint task) {
  Task(
      std::move(call), endpoint,
      [task](const nlohmann::ordered_json& body) { return ParseTaskRequest(task, body); },
      [](const TaskRequest& request, const worker::TaskResultMessage& result, const std::string& id,
         double) { return TaskResponseBody(request, result, request.job.model, id, UnixNow()); });
}

void ApiService::Task(std::shared_ptr<Call> call, const Endpoint& endpoint, TaskParser parse,
                      TaskAnswer answer) {
  const std::optional<uint64_t> ticket = EnterQueue(*call);
  if (!ticket) return;
  // endpoints_ lives as long as the service, which outlives its job threads.
  jobs_.Post([this, call, ticket = *ticket, &endpoint, parse = std::move(parse),
              answer = std::move(answer)] {
    auto doc = ParseJsonBody(call->request.body);
    std::variant<TaskRequest, ApiError> parsed = ApiError{};
    if (auto* e = std::get_if<ApiError>(&doc)) {
      parsed = *e;
    } else {
      parsed = parse(std::get<nlohmann::ordered_json>(doc));
    }
    if (auto* request = std::get_if<TaskRequest>(&parsed)) {
      auto model = ModelFor(endpoint, request->job.model);
      if (auto* e = std::get_if<ApiError>(&model)) {
        parsed = *e;
      } else {
        request->job.model = std::get<std::string>(model);
      }
    }
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      admission_.Withdraw(ticket);
      return SendError(*call, *e);
    }
    TaskRequest& request = std::get<TaskRequest>(parsed);
    call->exchange->Note([&](AccessRecord& r) { r.model = request.job.model; });
    RunTask(*call, std::move(request), ticket, endpoint, answer);
  });
}

void ApiService::RunTask(Call& call, TaskRequest request, uint64_t ticket, const Endpoint& endpoint,
                         const TaskAnswer& shape) {
  double queue_ms = 0;
  std::vector<HttpHeader> extra;
  auto answer = AwaitAnswer(call, request.job, ticket, &extra, &queue_ms, request.input_field);
  if (auto* e = std::get_if<ApiError>(&answer)) {
    // System One answers a malformed request with 422 (an over-limit state stays a 400).
    if (request.endpoint == TaskEndpoint::kSystemOne && e->status == 400 &&
        e->code != "context_length_exceeded") {
      e->status = 422;
      e->code = "invalid_field";
    }
    return SendError(call, *e, queue_ms, extra);
  }
  auto m = worker::Decode<worker::TaskResultMessage>(std::get<JobAnswer>(answer).frame);
  if (!m || !TaskResultFits(request, *m)) {
    return SendError(call, ServerError(500, "internal_error", "internal error"));
  }
  call.exchange->Note([&](AccessRecord& r) {
    r.prompt_tokens = m->prompt_tokens;
    r.queue_ms = queue_ms;
  });
  nlohmann::ordered_json body =
      shape(request, *m, endpoint.id_prefix + call.exchange->request_id(), queue_ms);
  body["x_tessera_stats"] = {{"queue_ms", queue_ms},
                             {"worker_queue_ms", m->queue_ms},
                             {"run_ms", m->run_ms},
                             {"cached_tokens", m->cached_tokens},
                             {"inputs", m->items.size()}};
  // Only for the request that waited for its model to load (and warm).
  if (m->load_ms > 0) body["x_tessera_stats"]["model_load_ms"] = m->load_ms;
  SendOrderedJson(call, 200, std::move(body), queue_ms);
}

}  // namespace tessera::server
