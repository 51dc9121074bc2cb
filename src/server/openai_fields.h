// The parts of an OpenAI request beyond plain text generation, checked on the HTTP side so a
// bad one is a 400 naming its field before any work is queued: the list of fields each
// endpoint implements (anything else is refused, never silently ignored), response_format
// (compiled here, so an unsupported schema keyword is named; a chat's choice among values
// becomes a decision), and tools / tool_choice. The worker receives them typed: a schema as
// its JSON text (it builds the grammar for the model's vocabulary, and the tool-call grammar
// for the model's tool-call syntax, which only it knows), each tool's definition as the client
// wrote it (the chat template renders it).
//
//   if (auto e = RefuseUnknownFields(body, kChatFields)) return *e;
//   if (auto e = ReadResponseFormat(body, /*chat=*/true, &chat.options.response_format)) ...
//   if (auto e = ReadTools(body, &chat)) return *e;   // after the response_format
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"
#include "worker/protocol.h"

namespace tessera::server {

// The fields /v1/chat/completions, and /v1/completions, implement: the generation fields both
// do and each one's own (anything else is refused: json_fields.h, RefuseUnknownFields).
extern const std::span<const std::string_view> kChatFields;
extern const std::span<const std::string_view> kCompletionFields;

// response_format: {"type": "text"} (nothing to enforce), {"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"?, "description"?}}. For
// a chat (`chat`), a schema that chooses among a few values is a decision (decision_format.h).
std::optional<ApiError> ReadResponseFormat(const nlohmann::ordered_json& body, bool chat,
                                           worker::ResponseFormat* out);

// Function (tool) names as OpenAI and Anthropic define them: 1-64 of [a-zA-Z0-9_-].
bool ValidFunctionName(const std::string& name);

// tools (function tools: name, description?, parameters?, strict?), tool_choice ("none",
// "auto", "required" or {"type": "function", "function": {"name"}}), parallel_tool_calls
// (true only). A function with strict: true needs tool_choice "required" or its name here:
// only forced calls are constrained to their schema.
// Reads them into `chat`, whose options.response_format is already read.
std::optional<ApiError> ReadTools(const nlohmann::ordered_json& body, worker::ChatPayload* chat);

// `messages` (may be null: absent) is a non-empty array of at most kMaxMessages entries.
std::optional<ApiError> CheckMessageList(const nlohmann::ordered_json* messages);

// A chat message's tool fields: assistant tool_calls, tool tool_call_id and name.
std::optional<ApiError> ReadMessageToolFields(const nlohmann::ordered_json& message,
                                              const std::string& where, worker::ChatMessage* out);

}  // namespace tessera::server
