#include "toy_endpoint.h"

#include <nlohmann/json.hpp>

#include "server/api_service.h"
#include "server/openai_api.h"

namespace tessera::server::test {
namespace {

void Echo(ApiService& service, std::shared_ptr<ApiCall> call, const Endpoint& endpoint) {
  auto body = ParseJsonBody(call->request.body);
  if (auto* e = std::get_if<ApiError>(&body)) return service.SendError(*call, *e);
  const nlohmann::ordered_json& doc = std::get<nlohmann::ordered_json>(body);
  const std::string name = doc.value("model", std::string());
  auto model = service.ModelFor(endpoint, name);
  if (auto* e = std::get_if<ApiError>(&model)) return service.SendError(*call, *e);
  service.SendJson(*call, 200,
                   {{"id", endpoint.id_prefix + call->exchange->request_id()},
                    {"model", std::get<std::string>(model)},
                    {"echo", doc.value("text", std::string())}});
}

}  // namespace

Endpoint ToyEndpoint() {
  Endpoint e;
  e.path = "/v1/toy";
  e.model_kinds = {ModelKind::kEmbed};
  e.noun = "embedding";
  e.id_prefix = "toy-";
  e.handler = Echo;
  return e;
}

}  // namespace tessera::server::test
