// The /api/* rows of the endpoint table (ollama_api.h): every row answers errors in Ollama's
// shape. Generation and embeddings go through ApiService's shared paths; the model listings
// are answered on the spot from the checkpoint folders; /api/pull runs tessera's pull
// (ollama_pull.h); the other calls that would change a model store answer 501 with what to run
// instead.
#include <nlohmann/json.hpp>

#include "server/api_service.h"
#include "server/api_service_internal.h"
#include "server/json_fields.h"
#include "server/ollama_api.h"
#include "server/ollama_pull.h"

#ifndef TESSERA_VERSION
#error "TESSERA_VERSION must be defined (src/server/CMakeLists.txt)"
#endif

namespace tessera::server {
namespace {

using namespace api_internal;  // NOLINT: the service's own helpers
using nlohmann::json;
using ojson = nlohmann::ordered_json;

Endpoint Row(std::string path, EndpointMethod method, EndpointHandler handler) {
  Endpoint e;
  e.path = std::move(path);
  e.method = method;
  e.dialect = ApiDialect::kOllama;
  e.handler = std::move(handler);
  return e;
}

ModelKindLookup KindsOf(const ApiService& s) {
  return [&s](const std::string& name) { return s.KindOf(name); };
}

// A served model by the name in `model` (or the older `name`), or the error to answer.
std::variant<worker::ModelEntry, ApiError> ShownModel(const ApiService& s, const ojson& body) {
  static constexpr std::string_view kShowFields[] = {"model",  "name",     "verbose",
                                                     "system", "template", "options"};
  if (auto e = RefuseUnknownOllamaFields(body, kShowFields, "/api/show")) return *e;
  bool verbose = false;  // the answer is the same either way: tessera lists no tensors
  if (auto e = ReadBool(body, "verbose", &verbose)) return *e;
  for (const char* refused : {"system", "template", "options"}) {
    const ojson* v = Field(body, refused);
    const bool given =
        v != nullptr && (v->is_string() ? !v->get_ref<const std::string&>().empty() : !v->empty());
    if (given) {
      return InvalidField(refused,
                          std::string(refused) + " is not supported by /api/show; remove it");
    }
  }
  std::string name;
  for (const char* key : {"model", "name"}) {
    if (auto e = ReadString(body, key, &name)) return *e;
    if (!name.empty()) break;
  }
  if (name.empty()) return InvalidField("model", "model must name a served model");
  name = OllamaServedName(name, KindsOf(s));
  for (worker::ModelEntry& m : s.served_models()) {
    if (m.name == name) return std::move(m);
  }
  return ModelNotFound(name);
}

void NotImplemented(ApiService& s, ApiCall& call, const std::string& why) {
  s.SendError(call, ServerError(501, "not_implemented", why));
}

}  // namespace

std::vector<Endpoint> OllamaEndpoints() {
  std::vector<Endpoint> rows;
  rows.push_back(Row("/api/version", EndpointMethod::kGet,
                     [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
                       s.SendJson(*call, 200, {{"version", TESSERA_VERSION}});
                     }));
  rows.push_back(Row("/api/tags", EndpointMethod::kGet,
                     [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
                       json models = json::array();
                       for (const worker::ModelEntry& m : s.served_models()) {
                         models.push_back(OllamaTagsEntry(DescribeServedModel(m)));
                       }
                       s.SendJson(*call, 200, {{"models", std::move(models)}});
                     }));
  // Every served model is listed as running: the worker loads them on demand and keeps them
  // (--max-loaded-models may evict one), and never on a GPU.
  rows.push_back(Row("/api/ps", EndpointMethod::kGet,
                     [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
                       json models = json::array();
                       for (const worker::ModelEntry& m : s.served_models()) {
                         json entry = OllamaTagsEntry(DescribeServedModel(m));
                         entry.erase("modified_at");
                         entry["expires_at"] = "9999-12-31T23:59:59Z";
                         entry["size_vram"] = 0;
                         models.push_back(std::move(entry));
                       }
                       s.SendJson(*call, 200, {{"models", std::move(models)}});
                     }));
  rows.push_back(
      Row("/api/show", EndpointMethod::kPost,
          [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
            auto body = ParseJsonBody(call->request.body);
            if (auto* e = std::get_if<ApiError>(&body)) return s.SendError(*call, *e);
            auto model = ShownModel(s, std::get<ojson>(body));
            if (auto* e = std::get_if<ApiError>(&model)) return s.SendError(*call, *e);
            s.SendJson(*call, 200,
                       OllamaShowBody(DescribeServedModel(std::get<worker::ModelEntry>(model))));
          }));
  for (const bool chat : {true, false}) {
    rows.push_back(Row(chat ? "/api/chat" : "/api/generate", EndpointMethod::kPost,
                       [chat](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
                         s.Generation(std::move(call),
                                      [chat, kinds = KindsOf(s)](
                                          const ojson& body, const GenerationDefaults& defaults) {
                                        return chat ? ParseOllamaChat(body, defaults, kinds)
                                                    : ParseOllamaGenerate(body, defaults, kinds);
                                      });
                       }));
  }
  for (const bool legacy : {false, true}) {
    Endpoint e =
        Row(legacy ? "/api/embeddings" : "/api/embed", EndpointMethod::kPost,
            [legacy](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint& row) {
              s.Task(
                  std::move(call), row,
                  [legacy, kinds = KindsOf(s)](const ojson& body) {
                    return ParseOllamaEmbed(body, legacy, kinds);
                  },
                  [legacy](const TaskRequest& request, const worker::TaskResultMessage& result,
                           const std::string&, double queue_ms) {
                    return OllamaEmbedBody(request, result, legacy, queue_ms);
                  });
            });
    e.model_kinds = {ModelKind::kEmbed};
    e.noun = "embedding";
    e.id_prefix = "embd-";
    rows.push_back(std::move(e));
  }
  // The other calls that change a model store: tessera's store is changed by its CLI.
  for (Endpoint& e : OllamaPullEndpoints()) rows.push_back(std::move(e));
  const std::pair<const char*, const char*> not_implemented[] = {
      {"/api/create", "/api/create is not implemented: tessera serves checkpoints as they are"},
      {"/api/push", "/api/push is not implemented: tessera does not publish models"},
      {"/api/copy",
       "/api/copy is not implemented: serve a model under another name with "
       "`tessera serve --model NAME=DIR`"},
      {"/api/delete",
       "/api/delete is not implemented: run `tessera rm NAME` on the server's "
       "machine"}};
  for (const auto& [path, why] : not_implemented) {
    const std::string reason = why;
    const bool del = std::string_view(path) == "/api/delete";
    rows.push_back(Row(path, del ? EndpointMethod::kDelete : EndpointMethod::kPost,
                       [reason](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
                         NotImplemented(s, *call, reason);
                       }));
  }
  return rows;
}

}  // namespace tessera::server
