// ApiService's task endpoints (embeddings, rerank, moderations, classify): parsed and routed to
// a model of the endpoint's kind, admitted through the same queue as generation (a batch of
// many inputs waits its turn; a full queue is a 429 with Retry-After), and answered whole when
// the worker's TaskResultMessage arrives.
#include "server/api_service.h"

#include <nlohmann/json.hpp>

#include "server/api_service_internal.h"

namespace tessera::server {

using namespace api_internal;  // NOLINT: this service's own helpers

namespace {

const char* EndpointNoun(TaskEndpoint e) {
  switch (e) {
    case TaskEndpoint::kEmbeddings:
      return "embedding";
    case TaskEndpoint::kRerank:
      return "reranker";
    case TaskEndpoint::kModerations:
      return "guard";
    case TaskEndpoint::kClassify:
      return "classifier";
    case TaskEndpoint::kSystemOne:
      return "decide or chat";
  }
  return "";
}

const char* IdPrefix(TaskEndpoint e) {
  switch (e) {
    case TaskEndpoint::kEmbeddings:
      return "embd-";
    case TaskEndpoint::kRerank:
      return "rerank-";
    case TaskEndpoint::kModerations:
      return "modr-";
    case TaskEndpoint::kClassify:
      return "classify-";
    case TaskEndpoint::kSystemOne:
      return "s1-";
  }
  return "";
}

}  // namespace

std::optional<ModelKind> ApiService::KindOf(const std::string& name) const {
  for (size_t i = 0; i < model_names_.size(); ++i) {
    if (model_names_[i] == name) return model_kinds_[i];
  }
  return std::nullopt;
}

std::variant<std::string, ApiError> ApiService::TaskModel(const std::string& name,
                                                          TaskEndpoint e) const {
  const ModelKind want = KindFor(e);
  // System One runs on a decide model, else on any chat model.
  auto fits = [&](ModelKind kind) {
    return kind == want || (e == TaskEndpoint::kSystemOne && kind == ModelKind::kChat);
  };
  if (name.empty()) {
    for (size_t i = 0; i < model_names_.size(); ++i) {
      if (model_kinds_[i] == want) return model_names_[i];
    }
    for (size_t i = 0; i < model_names_.size(); ++i) {
      if (fits(model_kinds_[i])) return model_names_[i];
    }
    ApiError err = InvalidField("model", std::string("no ") + EndpointNoun(e) +
                                             " model is served here; start the server with one "
                                             "(--model DIR, and --kind NAME=" +
                                             std::string(ModelKindName(want)) +
                                             " for a causal LM that is one)");
    err.status = 404;
    err.code = "model_not_found";
    return err;
  }
  const std::optional<ModelKind> kind = KindOf(name);
  if (!kind) return ModelNotFound(name);
  if (!fits(*kind)) {
    return InvalidField("model", "'" + name + "' is a " + std::string(ModelKindName(*kind)) +
                                     " model; this endpoint needs a " +
                                     std::string(ModelKindName(want)) + " model");
  }
  return name;
}

void ApiService::TaskJobCall(std::shared_ptr<Call> call, TaskEndpoint endpoint) {
  const std::optional<uint64_t> ticket = EnterQueue(*call, /*busy_is_503=*/true);
  if (!ticket) return;
  jobs_.Post([this, call, ticket = *ticket, endpoint] {
    auto doc = ParseJsonBody(call->request.body);
    std::variant<TaskRequest, ApiError> parsed = ApiError{};
    if (auto* e = std::get_if<ApiError>(&doc)) {
      parsed = *e;
    } else {
      parsed = ParseTaskRequest(endpoint, std::get<nlohmann::ordered_json>(doc));
    }
    if (auto* request = std::get_if<TaskRequest>(&parsed)) {
      auto model = TaskModel(request->job.model, endpoint);
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
    RunTask(*call, std::move(request), ticket);
  });
}

void ApiService::RunTask(Call& call, TaskRequest request, uint64_t ticket) {
  double queue_ms = 0;
  std::vector<HttpHeader> extra;
  auto answer = AwaitAnswer(call, request.job, ticket, &extra, &queue_ms);
  if (auto* e = std::get_if<ApiError>(&answer)) {
    // System One answers a malformed request with 422 (an over-limit state stays a 400).
    if (request.endpoint == TaskEndpoint::kSystemOne && e->status == 400 &&
        e->code != "context_length_exceeded") {
      e->status = 422;
      e->code = "invalid_field";
    }
    return SendError(call, *e, queue_ms, extra);
  }
  auto m = Decode<TaskResultMessage>(std::get<JobAnswer>(answer).frame);
  if (!m || !TaskResultFits(request, *m)) {
    return SendError(call, ServerError(500, "internal_error", "internal error"));
  }
  call.exchange->Note([&](AccessRecord& r) {
    r.prompt_tokens = m->prompt_tokens;
    r.queue_ms = queue_ms;
  });
  nlohmann::ordered_json body =
      TaskResponseBody(request, *m, request.job.model,
                       IdPrefix(request.endpoint) + call.exchange->request_id(), UnixNow());
  body["x_tessera_stats"] = {{"queue_ms", queue_ms},
                             {"worker_queue_ms", m->queue_ms},
                             {"run_ms", m->run_ms},
                             {"cached_tokens", m->cached_tokens},
                             {"inputs", m->items.size()}};
  SendOrderedJson(call, 200, std::move(body), queue_ms);
}

}  // namespace tessera::server
