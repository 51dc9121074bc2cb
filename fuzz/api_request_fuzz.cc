// Fuzzes the JSON request bodies of the API as the server validates them: ParseJsonBody, then
// the endpoint's parser (ParseChatRequest, ParseCompletionRequest, ParseTokenizeRequest,
// ParseDetokenizeRequest, ParseTaskRequest, ParseResponsesRequest (against a store holding
// one response), ParseAnthropicMessages or ParseAnthropicCountTokens; Ollama's
// ParseOllamaChat, ParseOllamaGenerate, ParseOllamaEmbed). A request that passes is encoded
// for the worker and must decode there (Encode -> Decode), as it would on its way to the engine.
// Input: the endpoint on the first line ("chat", "completions", "tokenize", "detokenize",
// "embeddings", "rerank", "moderations", "classify", "systemone", "responses", "messages",
// "count_tokens", "ollama-chat", "ollama-generate", "ollama-embed", "ollama-embeddings"),
// then the body.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_util.h"
#include "server/anthropic_api.h"
#include "server/ollama_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "server/task_api.h"
#include "worker/protocol.h"

namespace ts = tessera::server;
namespace tw = tessera::worker;

namespace {

constexpr std::string_view kEndpoints[] = {
    "chat",        "completions",     "tokenize",     "detokenize",
    "embeddings",  "rerank",          "moderations",  "classify",
    "systemone",   "responses",       "messages",     "count_tokens",
    "ollama-chat", "ollama-generate", "ollama-embed", "ollama-embeddings"};
// Where Ollama's four endpoints start in kEndpoints (found by name, so entries may be added).
constexpr size_t IndexOf(std::string_view name) {
  size_t i = 0;
  while (i < std::size(kEndpoints) && kEndpoints[i] != name) ++i;
  return i;
}
constexpr size_t kFirstOllama = IndexOf("ollama-chat");
static_assert(kFirstOllama + 3 < std::size(kEndpoints) &&
              kEndpoints[kFirstOllama + 3] == "ollama-embeddings");

// Ollama's parsers see "default-model" as a chat model, "story" as a completion model and
// "emb" as an embedding model.
std::optional<tessera::ModelKind> Kinds(const std::string& name) {
  if (name == "default-model") return tessera::ModelKind::kChat;
  if (name == "story") return tessera::ModelKind::kCompletion;
  if (name == "emb") return tessera::ModelKind::kEmbed;
  return std::nullopt;
}

void MustRoundTrip(const tw::JobRequest& job) {
  auto back = tw::Decode<tw::JobRequest>(tw::Encode(job));
  if (!back) {
    fprintf(stderr, "an accepted request does not decode in the worker: %s\n",
            back.status().ToString().c_str());
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  const std::string_view name = input.substr(0, eol);
  const std::string body(eol == std::string_view::npos ? std::string_view()
                                                       : input.substr(eol + 1));
  size_t endpoint = 0;
  bool known = false;
  for (size_t i = 0; i < std::size(kEndpoints); ++i) {
    if (kEndpoints[i] == name) {
      endpoint = i;
      known = true;
    }
  }
  if (!known) {
    for (char c : name) endpoint += static_cast<uint8_t>(c);
    endpoint %= std::size(kEndpoints);
  }
  auto doc = ts::ParseJsonBody(body);
  if (std::holds_alternative<ts::ApiError>(doc)) {
    (void)ts::ErrorBody(std::get<ts::ApiError>(doc));
    return 0;
  }
  const auto& json = std::get<nlohmann::ordered_json>(doc);
  const std::string model = "default-model";
  switch (endpoint) {
    case 0:
    case 1: {
      auto r = endpoint == 0 ? ts::ParseChatRequest(json, model)
                             : ts::ParseCompletionRequest(json, model);
      if (auto* g = std::get_if<ts::GenerationRequest>(&r)) MustRoundTrip(g->job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) {
        tessera::fuzz::Note("request", e->message);
        (void)ts::ErrorBody(*e);
      }
      break;
    }
    case 2:
    case 3: {
      auto r = endpoint == 2 ? ts::ParseTokenizeRequest(json, model)
                             : ts::ParseDetokenizeRequest(json, model);
      if (auto* j = std::get_if<tw::JobRequest>(&r)) MustRoundTrip(*j);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
    case 9: {
      // previous_response_id "resp_1" continues a stored user turn and a function call.
      static ts::ResponseStore store;
      static const bool filled = [] {
        ts::StoredResponse kept;
        kept.response = {{"id", "resp_1"}};
        kept.conversation = {{"user", "q", "", "", ""},
                             {"assistant", "",
                              R"([{"id":"call_1","type":"function","function":{"name":"f",)"
                              R"("arguments":"{}"}}])",
                              "", ""}};
        return store.Put("", "resp_1", std::move(kept));
      }();
      (void)filled;
      auto r = ts::ParseResponsesRequest(json, model, store, "");
      if (auto* p = std::get_if<ts::ParsedResponsesRequest>(&r)) MustRoundTrip(p->request.job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
    case 10: {
      auto r = ts::ParseAnthropicMessages(json);
      if (auto* g = std::get_if<ts::GenerationRequest>(&r)) MustRoundTrip(g->job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
    case 11: {
      auto r = ts::ParseAnthropicCountTokens(json);
      if (auto* j = std::get_if<tw::JobRequest>(&r)) MustRoundTrip(*j);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
    case kFirstOllama:
    case kFirstOllama + 1: {
      const ts::GenerationDefaults defaults{model, model};
      auto r = endpoint == kFirstOllama ? ts::ParseOllamaChat(json, defaults, Kinds)
                                        : ts::ParseOllamaGenerate(json, defaults, Kinds);
      if (auto* g = std::get_if<ts::ParsedGeneration>(&r)) MustRoundTrip(g->request.job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) {
        tessera::fuzz::Note("request", e->message);
        (void)ts::ErrorBody(*e);
      }
      break;
    }
    case kFirstOllama + 2:
    case kFirstOllama + 3: {
      auto r = ts::ParseOllamaEmbed(json, endpoint == kFirstOllama + 3, Kinds);
      if (auto* t = std::get_if<ts::TaskRequest>(&r)) MustRoundTrip(t->job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
    default: {
      static constexpr ts::TaskEndpoint kTasks[] = {
          ts::TaskEndpoint::kEmbeddings, ts::TaskEndpoint::kRerank, ts::TaskEndpoint::kModerations,
          ts::TaskEndpoint::kClassify, ts::TaskEndpoint::kSystemOne};
      auto r = ts::ParseTaskRequest(kTasks[endpoint - 4], json);
      if (auto* t = std::get_if<ts::TaskRequest>(&r)) MustRoundTrip(t->job);
      if (auto* e = std::get_if<ts::ApiError>(&r)) (void)ts::ErrorBody(*e);
      break;
    }
  }
  return 0;
}
