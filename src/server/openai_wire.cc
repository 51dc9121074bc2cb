// OpenAI's wires for the shared generation path (generation_wire.h): chat.completion and
// text_completion answers and their chunk streams, and the error shapes of every dialect.
#include <nlohmann/json.hpp>

#include "server/api_service_internal.h"
#include "server/generation_wire.h"

namespace tessera::server {

using api_internal::Dump;
using nlohmann::json;

std::string AnthropicErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json ErrorBodyIn(ApiDialect dialect, const ApiError& error) {
  switch (dialect) {
    case ApiDialect::kAnthropic:
      return {{"type", "error"},
              {"error", {{"type", AnthropicErrorType(error.status)}, {"message", error.message}}}};
    case ApiDialect::kOllama:
      return {{"error", error.message}};
    case ApiDialect::kOpenAI:
      break;
  }
  return ErrorBody(error);
}

std::string SseData(const json& j) {
  return "data: " + Dump(j) + "\n\n";
}

std::string SseEvent(const std::string& name, const json& j) {
  return "event: " + name + "\ndata: " + Dump(j) + "\n\n";
}

namespace {

// chat.completion (chat) or text_completion, whole or as chunks ending in "data: [DONE]".
class OpenAIWire final : public GenerationWire {
 public:
  OpenAIWire(bool chat, bool include_usage) : chat_(chat), include_usage_(include_usage) {}

  std::string id_prefix() const override { return chat_ ? "chatcmpl-" : "cmpl-"; }
  bool errors_carry_usage() const override { return true; }

  json Body(const ResponseMeta& meta, const JobOutcome& outcome, json stats) override {
    json body = chat_ ? ChatCompletionBody(meta, outcome) : TextCompletionBody(meta, outcome);
    body["x_tessera_stats"] = std::move(stats);
    return body;
  }

  std::string StreamBegin(const ResponseMeta& meta, const JobOutcome&) override {
    std::string frames;
    for (int i = 0; chat_ && i < meta.choices; ++i) {
      frames += SseData(ChatChunk(meta, {{"role", "assistant"}, {"content", ""}}, "", nullptr, i));
    }
    return frames;
  }

  std::string StreamDelta(const ResponseMeta& meta, const worker::DeltaMessage& delta) override {
    const std::vector<worker::TokenLogprobEntry>* lp = meta.logprobs ? &delta.logprobs : nullptr;
    if (!chat_) return SseData(TextChunk(meta, delta.text, "", lp, delta.choice));
    json d = json::object();
    if (!delta.text.empty() || delta.tool_calls.empty()) d["content"] = delta.text;
    if (!delta.tool_calls.empty()) d["tool_calls"] = ToolCallsJson(delta.tool_calls, true);
    return SseData(ChatChunk(meta, d, "", lp, delta.choice));
  }

  std::string StreamEnd(const ResponseMeta& meta, const JobOutcome& outcome,
                        const json& stats) override {
    std::string frames;
    for (int i = 0; i < meta.choices; ++i) {
      const std::string finish = ChoiceFinishReason(outcome, static_cast<size_t>(i));
      json last = chat_ ? ChatChunk(meta, json::object(), finish, nullptr, i)
                        : TextChunk(meta, "", finish, nullptr, i);
      if (i + 1 == meta.choices) {
        last["usage"] = UsageJson(outcome);
        last["x_tessera_stats"] = stats;
      }
      frames += SseData(last);
    }
    if (include_usage_) {
      frames += SseData({{"id", meta.id},
                         {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                         {"created", meta.created},
                         {"model", meta.model},
                         {"choices", json::array()},
                         {"usage", UsageJson(outcome)},
                         {"x_tessera_stats", stats}});
    }
    return frames + "data: [DONE]\n\n";
  }

 private:
  const bool chat_;
  const bool include_usage_;
};

}  // namespace

std::unique_ptr<GenerationWire> MakeOpenAIChatWire(bool include_usage) {
  return std::make_unique<OpenAIWire>(true, include_usage);
}

std::unique_ptr<GenerationWire> MakeOpenAITextWire(bool include_usage) {
  return std::make_unique<OpenAIWire>(false, include_usage);
}

}  // namespace tessera::server
