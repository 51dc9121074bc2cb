// The HTTP endpoints, each declared once: its path, method, who may call it, the model kinds
// its `model` field may name, the id prefix of its answers and its handler. Screening (auth,
// 404, 405), routing and /metrics read this one table (ApiService::BuiltinEndpoints, plus
// ServeOptions::extra_endpoints); adding an endpoint is a row and a handler.
//
//   Endpoint echo;
//   echo.path = "/v1/echo";                       // POST, behind the API key by default
//   echo.model_kinds = {ModelKind::kEmbed};       // `model` must name an embedding model
//   echo.noun = "embedding";
//   echo.id_prefix = "echo-";
//   echo.handler = [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint& e) {
//     auto model = s.ModelFor(e, name);           // the kind check, with its 400/404
//     ...
//     s.SendJson(*call, 200, {{"id", e.id_prefix + call->exchange->request_id()}});
//   };
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/model_kind.h"

namespace tessera::server {

class ApiService;
struct ApiCall;  // api_service.h: one request being answered
struct Endpoint;

using EndpointHandler = std::function<void(ApiService& service, std::shared_ptr<ApiCall> call,
                                           const Endpoint& endpoint)>;

enum class EndpointMethod { kGet, kPost, kDelete };  // kGet answers HEAD too
// kOpen: no key (/health, the web page); kApiKey: the bearer key when the server has one;
// kMetrics: kApiKey, or kOpen with --metrics-public.
enum class EndpointAccess { kOpen, kApiKey, kMetrics };
// Whose wire shape an endpoint's errors take (generation_wire.h: ErrorBodyIn).
enum class ApiDialect { kOpenAI, kAnthropic, kOllama };

struct Endpoint {
  // The path, or a pattern ending in "{id}" ("/v1/models/{id}": the rest of the path, not
  // empty, e.g. an org/name id). It is also the /metrics route label. Rows of one path differ
  // in their method (GET and DELETE /v1/responses/{id}).
  std::string path;
  std::vector<std::string> aliases;  // other exact paths answered the same way ("/rerank")
  // Paths answered besides `path` when set (the web page's files); their label is `label`.
  std::function<bool(std::string_view path)> also_matches;
  std::string label;  // /metrics label for also_matches; empty: the path itself
  EndpointMethod method = EndpointMethod::kPost;
  EndpointAccess access = EndpointAccess::kApiKey;
  // The kinds of served model the request's `model` may name, preferred first (a request
  // without one runs on the first served model of the first kind that has one); empty: the
  // endpoint takes no model, or any.
  std::vector<ModelKind> model_kinds;
  std::string noun;                          // what such a model is called in errors ("reranker")
  std::string id_prefix;                     // of the answers' ids ("rerank-")
  ApiDialect dialect = ApiDialect::kOpenAI;  // the shape of its errors, screening's included
  EndpointHandler handler;
  // Called by ApiService::Stop, once the front end has stopped and before it is destroyed: a
  // row whose handler runs work on threads of its own (/api/pull) ends it here, as nothing may
  // answer through an exchange after that. May be empty.
  std::function<void()> stop{};
};

// Whether `path` is one `e` answers; `label` (may be null) gets the /metrics label.
bool EndpointMatches(const Endpoint& e, std::string_view path, std::string* label = nullptr);
// Whether `e` answers the HTTP `method` ("GET", "HEAD", "POST", "DELETE").
bool EndpointAnswers(const Endpoint& e, std::string_view method);

}  // namespace tessera::server
