// Anthropic's Messages API beside OpenAI's: POST /v1/messages and /v1/messages/count_tokens.
// A request body is checked field by field (anything Anthropic defines that tessera does not
// implement is refused by name, never ignored) and becomes the same typed chat job OpenAI's
// chat completions make; its answer is shaped by the Anthropic wire: a `message` object, or
// the named SSE events (message_start, content_block_start/delta/stop, message_delta,
// message_stop, ping, error). Errors take Anthropic's shape (the endpoint rows' dialect).
//
//   for (Endpoint& e : AnthropicEndpoints()) table.push_back(std::move(e));
//
//   // Or the pieces, as the unit tests use them:
//   auto parsed = ParseAnthropicMessages(body);          // a GenerationRequest or an ApiError
//   auto wire = MakeAnthropicWire();
//   std::string frames = wire->StreamBegin(meta, outcome);   // event: message_start ...
#pragma once

#include <memory>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/endpoints.h"
#include "server/generation_wire.h"
#include "server/openai_api.h"
#include "worker/protocol.h"

namespace tessera::server {

// The two endpoint rows (dialect kAnthropic), for ApiService::BuiltinEndpoints.
std::vector<Endpoint> AnthropicEndpoints();

// POST /v1/messages: model and max_tokens are required, as Anthropic requires them. The job's
// payload is a ChatPayload.
std::variant<GenerationRequest, ApiError> ParseAnthropicMessages(
    const nlohmann::ordered_json& body);

// POST /v1/messages/count_tokens: the same conversation fields, no generation fields; the job
// is a ChatTokenizePayload (the prompt a generation would run, tools and system included).
std::variant<worker::JobRequest, ApiError> ParseAnthropicCountTokens(
    const nlohmann::ordered_json& body);

// The answer of /v1/messages, whole or streamed (anthropic_wire.cc).
std::unique_ptr<GenerationWire> MakeAnthropicWire();

// Anthropic's stop_reason for choice 0: end_turn, stop_sequence, max_tokens, tool_use; null
// for a job cut short.
nlohmann::json AnthropicStopReason(const JobOutcome& outcome);

// A tool call's id as Anthropic writes it: "toolu_" and the call's 24 characters.
std::string AnthropicToolUseId(const std::string& call_id);

}  // namespace tessera::server
