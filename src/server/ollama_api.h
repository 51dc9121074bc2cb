// Ollama's HTTP API (/api/*) beside OpenAI's on the same port: /api/chat and /api/generate
// parsed into the same GenerationRequest as /v1/chat/completions (generation_wire.h) and
// answered as NDJSON lines (or one object with stream: false), /api/embed and /api/embeddings
// through the task path, /api/tags, /api/show, /api/ps and /api/version from what the server
// knows of its models (ollama_models.cc), /api/pull through tessera's own pull (ollama_pull.h),
// and 501 for the other store-changing calls. Errors take
// Ollama's shape, {"error": "..."} (ApiDialect::kOllama). Every field of Ollama's requests is
// either mapped or refused by name; docs/server.md ("Ollama API") lists which.
//
//   std::vector<Endpoint> table = ...;
//   for (Endpoint& e : OllamaEndpoints()) table.push_back(std::move(e));
//
//   // The parsers alone (tests): a chat body becomes a ChatPayload job and Ollama's wire.
//   auto parsed = ParseOllamaChat(body, defaults, [](const std::string&) {
//     return std::optional<ModelKind>(ModelKind::kChat);
//   });
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/model_kind.h"
#include "server/endpoints.h"
#include "server/generation_wire.h"
#include "server/task_api.h"
#include "worker/protocol.h"
#include "worker/worker.h"

namespace tessera::server {

// The kind of a served model, or nullopt when no model of that name is served.
using ModelKindLookup = std::function<std::optional<ModelKind>(const std::string& name)>;

// Ollama's names carry a tag, ":latest" when none is given: "tiny:latest" is the served
// "tiny" when no model is served under the whole name. Any other name is returned as given.
std::string OllamaServedName(const std::string& name, const ModelKindLookup& kind_of);

// A non-null member of `body` not in `known` is a 400 naming it and `endpoint` ("/api/chat"):
// json_fields.h's RefuseUnknownFields in Ollama's words.
std::optional<ApiError> RefuseUnknownOllamaFields(const nlohmann::ordered_json& body,
                                                  std::span<const std::string_view> known,
                                                  std::string_view endpoint);

// options: temperature, top_p, top_k, min_p, seed, num_predict, stop, repeat_penalty,
// presence_penalty, frequency_penalty into `out`; any other option is a 400 naming it
// ("options.num_ctx"), with the reason.
std::optional<ApiError> ReadOllamaOptions(const nlohmann::ordered_json& body,
                                          worker::GenerationOptions* out);

// POST /api/chat and POST /api/generate. stream defaults to true (Ollama's default).
std::variant<ParsedGeneration, ApiError> ParseOllamaChat(const nlohmann::ordered_json& body,
                                                         const GenerationDefaults& defaults,
                                                         const ModelKindLookup& kind_of);
// A chat model's prompt goes through its chat template as a user message (after `system`);
// with raw: true, or on a completion model, the prompt is continued as given.
std::variant<ParsedGeneration, ApiError> ParseOllamaGenerate(const nlohmann::ordered_json& body,
                                                             const GenerationDefaults& defaults,
                                                             const ModelKindLookup& kind_of);

// Ollama's answer lines: /api/chat's {model, created_at, message, done} (`chat`) or
// /api/generate's {model, created_at, response, done}; the last line (or the whole answer)
// has done: true, done_reason and the durations in nanoseconds.
std::unique_ptr<GenerationWire> MakeOllamaWire(bool chat);

// POST /api/embed {model, input: string | [string], dimensions?, truncate?, keep_alive?}, and
// the older POST /api/embeddings {model, prompt} (`legacy`), as embedding task requests.
std::variant<TaskRequest, ApiError> ParseOllamaEmbed(const nlohmann::ordered_json& body,
                                                     bool legacy, const ModelKindLookup& kind_of);
// {model, embeddings, total_duration, load_duration, prompt_eval_count}, or {embedding}.
nlohmann::ordered_json OllamaEmbedBody(const TaskRequest& request,
                                       const worker::TaskResultMessage& result, bool legacy,
                                       double queue_ms);

// RFC 3339 in UTC with microseconds ("2026-12-07T19:22:45.499127Z"), as Ollama's created_at.
std::string OllamaTimestamp(std::chrono::system_clock::time_point t);
// Milliseconds as Ollama's durations: integer nanoseconds.
int64_t OllamaNanoseconds(double ms);

// What /api/tags, /api/show and /api/ps say of one served model, read from its checkpoint
// folder (ollama_models.cc). Unknown facts stay empty.
struct OllamaModelFacts {
  std::string name{};
  ModelKind kind = ModelKind::kChat;
  std::string format{};              // "safetensors" (a Hugging Face checkpoint) or "gguf"
  std::string family{};              // config.json model_type
  uint64_t parameter_count = 0;      // the checkpoint's tensors' elements; 0: unknown
  std::string quantization_level{};  // config.json torch_dtype as Ollama names it ("BF16")
  uint64_t size_bytes = 0;           // the files in the checkpoint folder
  int64_t modified_unix = 0;         // the newest of them
  std::string digest{};              // sha256 of tessera-lock.json, else of config.json
  nlohmann::ordered_json config = nlohmann::ordered_json::object();  // config.json
  nlohmann::ordered_json generation_config = nlohmann::ordered_json::object();
  std::string chat_template{};  // Jinja, as the checkpoint has it
};
OllamaModelFacts DescribeServedModel(const worker::ModelEntry& model);
// "134.52M", "1.5B", as Ollama prints parameter counts.
std::string OllamaParameterSize(uint64_t count);
// One entry of /api/tags ({name, model, modified_at, size, digest, details}).
nlohmann::json OllamaTagsEntry(const OllamaModelFacts& facts);
// /api/show's body: modelfile, parameters, template, details, model_info, capabilities.
nlohmann::json OllamaShowBody(const OllamaModelFacts& facts);

// The /api/* rows of the endpoint table.
std::vector<Endpoint> OllamaEndpoints();

}  // namespace tessera::server
