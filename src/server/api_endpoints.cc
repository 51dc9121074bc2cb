// The built-in endpoint table (endpoints.h) and what every row shares: matching a path, the
// /metrics label, and the model-kind check of a request's `model`.
#include <nlohmann/json.hpp>

#include "server/anthropic_api.h"
#include "server/api_service.h"
#include "server/api_service_internal.h"
#include "server/ollama_api.h"
#include "server/responses_api.h"
#include "server/web_ui.h"

namespace tessera::server {

using namespace api_internal;  // NOLINT: this service's own helpers

bool EndpointMatches(const Endpoint& e, std::string_view path, std::string* label) {
  constexpr std::string_view kId = "{id}";
  const std::string_view pattern = e.path;
  bool hit = false;
  if (pattern.ends_with(kId)) {
    const std::string_view prefix = pattern.substr(0, pattern.size() - kId.size());
    hit = path.size() > prefix.size() && path.starts_with(prefix);
  } else {
    hit = path == pattern;
  }
  std::string_view matched = e.path;
  for (const std::string& alias : e.aliases) {
    if (!hit && path == alias) {
      hit = true;
      matched = alias;
    }
  }
  if (!hit && e.also_matches && e.also_matches(path)) {
    hit = true;
    matched = e.label.empty() ? path : std::string_view(e.label);
  }
  if (hit && label != nullptr) *label = std::string(matched);
  return hit;
}

bool EndpointAnswers(const Endpoint& e, std::string_view method) {
  switch (e.method) {
    case EndpointMethod::kGet:
      return method == "GET" || method == "HEAD";
    case EndpointMethod::kPost:
      return method == "POST";
    case EndpointMethod::kDelete:
      return method == "DELETE";
  }
  return false;
}

const Endpoint* ApiService::FindEndpoint(std::string_view path, std::string* label,
                                         std::string_view method) const {
  const Endpoint* first = nullptr;
  for (const Endpoint& e : endpoints_) {
    if (!EndpointMatches(e, path, first == nullptr ? label : nullptr)) continue;
    if (method.empty() || EndpointAnswers(e, method)) return &e;
    if (first == nullptr) first = &e;
  }
  return first;
}

std::string ApiService::AllowedMethods(std::string_view path) const {
  std::string allow;
  for (const Endpoint& e : endpoints_) {
    if (!EndpointMatches(e, path)) continue;
    if (!allow.empty()) allow += ", ";
    allow += e.method == EndpointMethod::kGet    ? "GET, HEAD"
             : e.method == EndpointMethod::kPost ? "POST"
                                                 : "DELETE";
  }
  return allow;
}

std::variant<std::string, ApiError> ApiService::ModelFor(const Endpoint& e,
                                                         const std::string& name) const {
  if (e.model_kinds.empty()) {
    if (name.empty() || KnownModel(name)) return name;
    return ModelNotFound(name);
  }
  const ModelKind want = e.model_kinds.front();
  if (name.empty()) {
    std::lock_guard<std::mutex> lock(models_mu_);
    for (ModelKind kind : e.model_kinds) {
      for (size_t i = 0; i < model_names_.size(); ++i) {
        if (model_kinds_[i] == kind) return model_names_[i];
      }
    }
    ApiError err = InvalidField("model", "no " + e.noun +
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
  if (std::find(e.model_kinds.begin(), e.model_kinds.end(), *kind) == e.model_kinds.end()) {
    return InvalidField("model", "'" + name + "' is " + AModelOfKind(*kind) +
                                     "; this endpoint needs " + AModelOfKind(want));
  }
  return name;
}

std::vector<Endpoint> ApiService::BuiltinEndpoints(bool web_ui) {
  using Handler = void (ApiService::*)(Call&);
  // A row answered whole by a member of the service.
  auto get = [](std::string path, Handler handler, EndpointAccess access) {
    Endpoint e;
    e.path = std::move(path);
    e.method = EndpointMethod::kGet;
    e.access = access;
    e.handler = [handler](ApiService& s, std::shared_ptr<Call> call, const Endpoint&) {
      (s.*handler)(*call);
    };
    return e;
  };
  // A task endpoint: parsed, routed to a model of its kinds and answered by the worker.
  auto task = [](std::string path, TaskEndpoint kind, std::vector<ModelKind> kinds,
                 std::string noun, std::string id_prefix) {
    Endpoint e;
    e.path = std::move(path);
    e.model_kinds = std::move(kinds);
    e.noun = std::move(noun);
    e.id_prefix = std::move(id_prefix);
    e.handler = [kind](ApiService& s, std::shared_ptr<Call> call, const Endpoint& endpoint) {
      s.TaskJobCall(std::move(call), endpoint, kind);
    };
    return e;
  };
  std::vector<Endpoint> table;
  table.push_back(get("/health", &ApiService::Health, EndpointAccess::kOpen));
  table.push_back(get("/ready", &ApiService::Ready, EndpointAccess::kOpen));
  table.push_back(get("/metrics", &ApiService::Metrics, EndpointAccess::kMetrics));
  table.push_back(get("/v1/models", &ApiService::ModelsList, EndpointAccess::kApiKey));
  table.push_back(get("/v1/models/{id}", &ApiService::OneModel, EndpointAccess::kApiKey));
  for (const bool chat : {true, false}) {
    Endpoint e;
    e.path = chat ? "/v1/chat/completions" : "/v1/completions";
    e.handler = [chat](ApiService& s, std::shared_ptr<Call> call, const Endpoint&) {
      s.Generation(
          std::move(call),
          [chat](const nlohmann::ordered_json& body,
                 const GenerationDefaults& defaults) -> std::variant<ParsedGeneration, ApiError> {
            auto parsed = chat ? ParseChatRequest(body, defaults.chat_model)
                               : ParseCompletionRequest(body, defaults.completion_model);
            if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
            ParsedGeneration p;
            p.request = std::move(std::get<GenerationRequest>(parsed));
            p.wire = chat ? MakeOpenAIChatWire(p.request.include_usage)
                          : MakeOpenAITextWire(p.request.include_usage);
            return p;
          });
    };
    table.push_back(std::move(e));
  }
  // OpenAI's Responses API (responses_api.h), on the chat path and its own store.
  for (Endpoint& e : ResponsesEndpoints(std::make_shared<ResponseStore>())) table.push_back(e);
  for (const bool tokenize : {true, false}) {
    Endpoint e;
    e.path = tokenize ? "/tokenize" : "/detokenize";
    e.handler = [tokenize](ApiService& s, std::shared_ptr<Call> call, const Endpoint&) {
      s.TokenJob(std::move(call), tokenize);
    };
    table.push_back(std::move(e));
  }
  table.push_back(
      task("/v1/embeddings", TaskEndpoint::kEmbeddings, {ModelKind::kEmbed}, "embedding", "embd-"));
  table.push_back(
      task("/v1/rerank", TaskEndpoint::kRerank, {ModelKind::kRerank}, "reranker", "rerank-"));
  table.back().aliases = {"/rerank"};
  table.push_back(
      task("/v1/moderations", TaskEndpoint::kModerations, {ModelKind::kGuard}, "guard", "modr-"));
  table.push_back(task("/classify", TaskEndpoint::kClassify, {ModelKind::kClassify}, "classifier",
                       "classify-"));
  // System One runs on a decide model, else on any chat model.
  table.push_back(task("/v1/systemone", TaskEndpoint::kSystemOne,
                       {ModelKind::kDecide, ModelKind::kChat}, "decide or chat", "s1-"));
  // OpenAI's decisions API: the same job, OpenAI's shapes.
  table.push_back(task("/v1/decisions", TaskEndpoint::kDecisions,
                       {ModelKind::kDecide, ModelKind::kChat}, "decide or chat", "dec-"));
  for (Endpoint& e : AnthropicEndpoints()) table.push_back(std::move(e));
  for (Endpoint& e : OllamaEndpoints()) table.push_back(std::move(e));
  if (web_ui) {
    // The page's files are public: the page itself asks for the key.
    Endpoint ui;  // no path of its own: its paths are IsWebUiPath's
    ui.method = EndpointMethod::kGet;
    ui.access = EndpointAccess::kOpen;
    ui.also_matches = IsWebUiPath;
    ui.label = "ui";
    ui.handler = [](ApiService&, std::shared_ptr<Call> call, const Endpoint&) {
      call->exchange->Respond(WebUiResponse(call->request));
    };
    table.push_back(std::move(ui));
  }
  return table;
}

}  // namespace tessera::server
