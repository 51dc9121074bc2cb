// One generation path, many wire shapes. Every API that generates text (OpenAI's chat and
// completions, and the others beside them) parses its body into the same GenerationRequest
// (a typed worker job) and gives ApiService a GenerationWire that shapes what the worker
// reports: the whole answer, or the stream's frames. Admission, the worker, retries,
// deadlines and cancellation are ApiService's, once, for all of them.
//
//   // An endpoint row whose handler runs the shared path with its own parser:
//   e.dialect = ApiDialect::kAnthropic;            // the shape of its errors
//   e.handler = [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
//     s.Generation(std::move(call), [](const nlohmann::ordered_json& body,
//                                      const GenerationDefaults& d)
//                                       -> std::variant<ParsedGeneration, ApiError> {
//       ParsedGeneration p;
//       ... fill p.request.job (a ChatPayload), p.request.stream ...
//       p.wire = std::make_unique<MyWire>();
//       return p;
//     });
//   };
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "format/ordered_json.h"
#include "server/endpoints.h"
#include "server/openai_api.h"

namespace tessera::server {

// An error in the shape of `dialect`: OpenAI's {"error": {message, type, param, code}},
// Anthropic's {"type": "error", "error": {type, message}}, Ollama's {"error": "message"}.
nlohmann::json ErrorBodyIn(ApiDialect dialect, const ApiError& error);
// Anthropic's error type for an HTTP status ("invalid_request_error", "not_found_error", ...).
std::string AnthropicErrorType(int status);

// Server-sent event frames: "data: {json}\n\n", and "event: name\ndata: {json}\n\n".
std::string SseData(const nlohmann::json& j);
std::string SseEvent(const std::string& name, const nlohmann::json& j);

// How one API shapes a generation's answer. One object per request: a stream's wire may keep
// state between frames (which content block is open). Frames are returned whole, possibly
// several concatenated; an empty string sends nothing.
class GenerationWire {
 public:
  virtual ~GenerationWire() = default;

  // The answer id's prefix ("chatcmpl-"); ApiService appends the request id.
  virtual std::string id_prefix() const = 0;
  // The stream's Content-Type.
  virtual std::string stream_content_type() const { return "text/event-stream"; }

  // The whole answer of a job run without streaming. `stats` is tessera's stats object
  // (x_tessera_stats) for wires that carry it.
  virtual nlohmann::json Body(const ResponseMeta& meta, const JobOutcome& outcome,
                              nlohmann::json stats) = 0;

  // A stream: its opening frames (sent once the worker started the job), one frame per
  // delta (text, logprobs or tool-call fragments of one choice), and its closing frames.
  virtual std::string StreamBegin(const ResponseMeta& meta, const JobOutcome& outcome) = 0;
  virtual std::string StreamDelta(const ResponseMeta& meta, const worker::DeltaMessage& delta) = 0;
  virtual std::string StreamEnd(const ResponseMeta& meta, const JobOutcome& outcome,
                                const nlohmann::json& stats) = 0;
  // A failure after the stream began; `body` is the error in this wire's dialect with the
  // stats so far (and the usage, when errors_carry_usage), `outcome` what the worker reported.
  virtual std::string StreamError(const nlohmann::json& body, const JobOutcome& outcome) {
    (void)outcome;
    return SseData(body);
  }
  // Whether an error once the worker had the job carries OpenAI's `usage` so far (chat and
  // completions do; Anthropic's, Ollama's and the Responses API's error shapes have none).
  virtual bool errors_carry_usage() const { return false; }
};

// What a request parser returns: the job and the wire that will answer it.
struct ParsedGeneration {
  GenerationRequest request;
  std::unique_ptr<GenerationWire> wire;
};

// The models a request without `model` runs on.
struct GenerationDefaults {
  std::string chat_model;        // the first chat (or decide) model, else the first
  std::string completion_model;  // the first that continues a prompt, else the first
};

// OpenAI's chat.completion / text_completion wires (openai_wire.cc).
std::unique_ptr<GenerationWire> MakeOpenAIChatWire(bool include_usage);
std::unique_ptr<GenerationWire> MakeOpenAITextWire(bool include_usage);

}  // namespace tessera::server
