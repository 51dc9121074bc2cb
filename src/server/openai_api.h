// The OpenAI wire format: request bodies checked field by field and turned into worker jobs,
// and the response bodies, stream chunks and error objects built from what the worker sent.
// Only src/server speaks JSON; the worker receives typed JobRequests.
//
//   auto body = ParseJsonBody(req.body);                       // depth and syntax checked
//   if (auto* err = std::get_if<ApiError>(&body)) reply(err->status, ErrorBody(*err));
//   auto parsed = ParseChatRequest(std::get<nlohmann::ordered_json>(body), "default-model");
//   ...submit std::get<GenerationRequest>(parsed).job, collect a JobOutcome...
//   reply(200, ChatCompletionBody(meta, outcome));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/ordered_json.h"
#include "server/api_error.h"
#include "worker/protocol.h"

namespace tessera::server {

inline constexpr int kMaxJsonDepth = 32;
// A request body, and any JSON inside its strings (tool call arguments), parses in time linear
// in its size within these limits (docs/server.md, "Protections").
inline constexpr size_t kMaxJsonObjectMembers = 4096;
inline constexpr JsonParseLimits kRequestJsonLimits{kMaxJsonDepth, kMaxJsonObjectMembers};
inline constexpr size_t kMaxMessages = 2048;
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr int kMaxTopLogprobs = 20;

nlohmann::json ErrorBody(const ApiError& error);

// Request bodies keep their member order (a response_format schema's properties are generated
// in that order).
std::variant<nlohmann::ordered_json, ApiError> ParseJsonBody(const std::string& body);

struct GenerationRequest {
  worker::JobRequest job;  // its payload: a ChatPayload or a CompletionPayload
  bool stream = false;
  bool include_usage = false;
  // The request field the job's input was read from, as the client's API spells it, when it is
  // not the payload's own name (a chat's "messages", a completion's "prompt"): Responses'
  // "input", Ollama's /api/generate "prompt". Errors about the input name it.
  std::string input_field{};
  const worker::GenerationOptions& options() const;  // the payload's
};

// `model` may be omitted (the default model is used). Sampling ranges are validated here, so
// an out-of-range field never reaches the worker.
std::variant<GenerationRequest, ApiError> ParseChatRequest(const nlohmann::ordered_json& body,
                                                           const std::string& default_model);
std::variant<GenerationRequest, ApiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                                 const std::string& default_model);
// /tokenize {"model"?, "prompt" | "text", "add_special_tokens"?}; /detokenize {"model"?, "tokens"}.
std::variant<worker::JobRequest, ApiError> ParseTokenizeRequest(const nlohmann::ordered_json& body,
                                                                const std::string& default_model);
std::variant<worker::JobRequest, ApiError> ParseDetokenizeRequest(
    const nlohmann::ordered_json& body, const std::string& default_model);

// What the worker reported for one choice: its text, logprobs and tool calls (one entry per
// call, its arguments joined from the fragments).
struct ChoiceOutcome {
  std::string text;
  std::vector<worker::TokenLogprobEntry> logprobs;
  std::vector<worker::ToolCallFragment> tool_calls;
  void Add(const worker::DeltaMessage& delta);
};

// Everything the worker reported for one generation job.
struct JobOutcome {
  std::optional<worker::StartedMessage> started;
  std::vector<ChoiceOutcome> choices = std::vector<ChoiceOutcome>(1);  // n of them
  std::optional<worker::DoneMessage> done;
  // Until Done arrives (a job cut short by a timeout, crash or disconnect): the tokens the
  // worker reported so far, and the server's own clock on them.
  int64_t completion_tokens_so_far = 0;
  int64_t refused_prompt_tokens = 0;  // a prompt the worker refused as too long
  double ttft_ms_seen = -1;           // from submitting the job to its first token; -1: none
  double elapsed_ms_seen = 0;         // from submitting the job to its last message
};

struct ResponseMeta {
  std::string id;  // chatcmpl-... / cmpl-...
  std::string model;
  int64_t created = 0;  // unix seconds
  double queue_ms = 0;
  bool logprobs = false;
  int choices = 1;  // n
};

// Prompt and completion tokens so far: from Done, else Started and the running count.
struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};
UsageCounts CountUsage(const JobOutcome& outcome);
nlohmann::json UsageJson(const JobOutcome& outcome);
// Every stats field is present: from the worker's Done, or (a job cut short) the server's own
// measurements, with null where nothing was measured, and "partial": true.
nlohmann::json StatsJson(const JobOutcome& outcome, double queue_ms);
nlohmann::json LogprobsContentJson(const std::vector<worker::TokenLogprobEntry>& entries);

// The whole answers, without x_tessera_stats (the wire adds the full stats object).
nlohmann::json ChatCompletionBody(const ResponseMeta& meta, const JobOutcome& outcome);
nlohmann::json TextCompletionBody(const ResponseMeta& meta, const JobOutcome& outcome);

// Stream chunks of choice `index`. `delta` carries role/content/tool_calls; finish_reason may
// be empty (null).
nlohmann::json ChatChunk(const ResponseMeta& meta, const nlohmann::json& delta,
                         const std::string& finish_reason,
                         const std::vector<worker::TokenLogprobEntry>* logprobs, int index = 0);
nlohmann::json TextChunk(const ResponseMeta& meta, const std::string& text,
                         const std::string& finish_reason,
                         const std::vector<worker::TokenLogprobEntry>* logprobs, int index = 0);
// OpenAI's tool_calls entries: [{index, id?, type?, function: {name?, arguments}}]; id, type
// and name only where the fragment has them (a call's first).
nlohmann::json ToolCallsJson(const std::vector<worker::ToolCallFragment>& calls, bool stream);
// Choice i's finish reason from Done.
std::string ChoiceFinishReason(const JobOutcome& outcome, size_t i);

// The models list of GET /v1/models, and one model (GET /v1/models/{id}).
nlohmann::json ModelsListBody(const std::vector<std::string>& names, int64_t created);
nlohmann::json ModelBody(const std::string& name, int64_t created);

}  // namespace tessera::server
