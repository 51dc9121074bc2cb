// The Responses API's rows of the endpoint table: POST /v1/responses on the shared generation
// path, and GET / DELETE /v1/responses/{id} on the store, answered on the event loop (a map
// lookup under a lock).
#include <nlohmann/json.hpp>

#include "server/api_service.h"
#include "server/responses_api.h"

namespace tessera::server {
namespace {

constexpr std::string_view kResponsesPath = "/v1/responses";

// The id of /v1/responses/{id}, or the error to answer: the sub-resources (input_items,
// cancel) and query parameters (stream) are not served.
std::variant<std::string, ApiError> ResponseIdOf(const HttpRequest& request) {
  const std::string id = request.path.substr(kResponsesPath.size() + 1);
  if (const size_t slash = id.find('/'); slash != std::string::npos) {
    ApiError e = InvalidField("", request.method + " " + request.path +
                                      " is not served: only GET and DELETE /v1/responses/{id}");
    e.status = 404;
    e.code = "not_found";
    return e;
  }
  if (const size_t q = request.target.find('?'); q != std::string::npos) {
    std::string query = request.target.substr(q + 1);
    const std::string name = query.substr(0, query.find_first_of("=&"));
    if (!name.empty()) {
      return InvalidField(name, name +
                                    " is not supported here: a stored response is answered "
                                    "whole; remove the query parameter");
    }
  }
  return id;
}

}  // namespace

std::vector<Endpoint> ResponsesEndpoints(std::shared_ptr<ResponseStore> store) {
  std::vector<Endpoint> rows(3);
  Endpoint& create = rows[0];
  create.path = std::string(kResponsesPath);
  create.handler = [store](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
    const std::string tenant = call->request.api_key_name;
    s.Generation(
        std::move(call),
        [store, tenant](const nlohmann::ordered_json& body,
                        const GenerationDefaults& d) -> std::variant<ParsedGeneration, ApiError> {
          auto parsed = ParseResponsesRequest(body, d.chat_model, *store, tenant);
          if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
          auto& r = std::get<ParsedResponsesRequest>(parsed);
          ParsedGeneration p;
          p.request = std::move(r.request);
          p.wire = MakeResponsesWire(std::move(r.context), store, tenant);
          return p;
        });
  };
  for (const bool get : {true, false}) {
    Endpoint& e = rows[get ? 1 : 2];
    e.path = std::string(kResponsesPath) + "/{id}";
    e.method = get ? EndpointMethod::kGet : EndpointMethod::kDelete;
    e.handler = [store, get](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
      auto id = ResponseIdOf(call->request);
      if (auto* e = std::get_if<ApiError>(&id)) return s.SendError(*call, *e);
      const std::string& name = std::get<std::string>(id);
      const std::string& tenant = call->request.api_key_name;
      if (get) {
        std::shared_ptr<const StoredResponse> kept = store->Get(tenant, name);
        if (kept == nullptr) return s.SendError(*call, StoredResponseNotFound(name, *store, ""));
        return s.SendJson(*call, 200, kept->response);
      }
      if (!store->Erase(tenant, name))
        return s.SendError(*call, StoredResponseNotFound(name, *store, ""));
      s.SendJson(*call, 200, {{"id", name}, {"object", "response.deleted"}, {"deleted", true}});
    };
  }
  return rows;
}

}  // namespace tessera::server
