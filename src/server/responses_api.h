// OpenAI's Responses API on the one generation path (generation_wire.h): POST /v1/responses
// parsed into the same chat job as /v1/chat/completions (input items become messages, function
// tools and text.format become the chat's tools and response_format), answered as a `response`
// object or its typed event stream, and kept in a bounded ResponseStore (response_store.h) that
// previous_response_id continues and GET / DELETE /v1/responses/{id} read and forget.
//
//   auto store = std::make_shared<ResponseStore>();
//   for (Endpoint& e : ResponsesEndpoints(store)) table.push_back(std::move(e));
//
//   // The parser alone (what the POST row runs on its job thread):
//   auto parsed = ParseResponsesRequest(body, "default-model", *store, "key-name");
//   auto& r = std::get<ParsedResponsesRequest>(parsed);  // r.request.job: a ChatPayload
//   auto wire = MakeResponsesWire(std::move(r.context), store, "key-name");
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/ordered_json.h"
#include "server/endpoints.h"
#include "server/generation_wire.h"
#include "server/openai_api.h"
#include "server/response_store.h"

namespace tessera::server {

// What a response object repeats of its request and what storing it needs.
struct ResponsesContext {
  // The request fields every response object echoes: instructions, metadata, tools,
  // tool_choice, temperature, top_p, max_output_tokens, previous_response_id,
  // parallel_tool_calls, store, text, truncation, user.
  nlohmann::json echo = nlohmann::json::object();
  // The stored conversation continued, then this request's input (without instructions).
  std::vector<worker::ChatMessage> conversation;
  bool store = true;
};

struct ParsedResponsesRequest {
  GenerationRequest request;  // a ChatPayload job
  ResponsesContext context;
};

// The body of POST /v1/responses. `tenant` (the API key's name) scopes previous_response_id.
std::variant<ParsedResponsesRequest, ApiError> ParseResponsesRequest(
    const nlohmann::ordered_json& body, const std::string& default_model, ResponseStore& store,
    const std::string& tenant);

// The response object and its event stream; on success a response with store true is kept
// in `store` under `tenant`.
std::unique_ptr<GenerationWire> MakeResponsesWire(ResponsesContext context,
                                                  std::shared_ptr<ResponseStore> store,
                                                  std::string tenant);

// The 404 for a response id the tenant has no stored response under; `param` names the
// field that gave it (empty: the path).
ApiError StoredResponseNotFound(const std::string& id, const ResponseStore& store,
                                const std::string& param);

// POST /v1/responses, GET and DELETE /v1/responses/{id}, sharing `store`.
std::vector<Endpoint> ResponsesEndpoints(std::shared_ptr<ResponseStore> store);

}  // namespace tessera::server
