// The parts of an OpenAI request beyond plain text generation, checked on the HTTP side so a
// bad one is a 400 naming its field before any work is queued: the list of fields each
// endpoint implements (anything else is refused, never silently ignored), response_format
// (compiled here too, so an unsupported schema keyword is named), and tools / tool_choice.
// The worker receives them as JSON text in the JobRequest and compiles them again for the
// model's vocabulary and template.
//
//   if (auto e = RefuseUnknownFields(body, kChatFields)) return *e;
//   if (auto e = ReadResponseFormat(body, &job)) return *e;
//   if (auto e = ReadTools(body, &job)) return *e;
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"
#include "worker/protocol.h"

namespace tessera::server {

// The fields only /v1/chat/completions, or only /v1/completions, implement (beside the
// generation fields both do).
extern const std::span<const std::string_view> kChatFields;
extern const std::span<const std::string_view> kCompletionFields;

// A non-null member of `body` that neither endpoint_fields nor the generation fields both
// endpoints share name is a 400 naming it.
std::optional<ApiError> RefuseUnknownFields(const nlohmann::ordered_json& body,
                                            std::span<const std::string_view> endpoint_fields);

// response_format: {"type": "text"} (nothing to enforce), {"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"?, "description"?}}.
std::optional<ApiError> ReadResponseFormat(const nlohmann::ordered_json& body,
                                           worker::JobRequest* job);

// tools (function tools: name, description?, parameters?, strict?), tool_choice ("none",
// "auto", "required" or {"type": "function", "function": {"name"}}), parallel_tool_calls
// (true only). A function with strict: true needs tool_choice "required" or its name here:
// only forced calls are constrained to their schema.
std::optional<ApiError> ReadTools(const nlohmann::ordered_json& body, worker::JobRequest* job);

// A chat message's tool fields: assistant tool_calls, tool tool_call_id and name.
std::optional<ApiError> ReadMessageToolFields(const nlohmann::ordered_json& message,
                                              const std::string& where, worker::ChatMessage* out);

}  // namespace tessera::server
