// Anthropic's answers on the shared generation path (generation_wire.h): the `message` object
// and its named SSE events, and the two endpoint rows of the Messages API.
#include <nlohmann/json.hpp>

#include "server/anthropic_api.h"
#include "server/api_service.h"

namespace tessera::server {

using nlohmann::json;

std::string AnthropicToolUseId(const std::string& call_id) {
  constexpr std::string_view kCall = "call_";  // the worker's ids: call_ + 24 characters
  const std::string_view id(call_id);
  return "toolu_" + std::string(id.starts_with(kCall) ? id.substr(kCall.size()) : id);
}

json AnthropicStopReason(const JobOutcome& outcome) {
  if (!outcome.done) return nullptr;
  switch (outcome.done->finish_reason) {
    case worker::FinishReason::kToolCalls:
      return "tool_use";
    case worker::FinishReason::kLength:
      return "max_tokens";
    case worker::FinishReason::kStop:
      return outcome.done->stop_sequence.empty() ? "end_turn" : "stop_sequence";
    case worker::FinishReason::kCancelled:
      break;
  }
  return nullptr;
}

namespace {

json StopSequence(const JobOutcome& outcome) {
  if (!outcome.done || outcome.done->stop_sequence.empty()) return nullptr;
  return outcome.done->stop_sequence;
}

// A call's input: its arguments, which the worker's parser emits as one compact JSON object.
json ToolInput(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_discarded() ? json(arguments) : input;
}

json ToolUseBlock(const worker::ToolCallFragment& call, json input) {
  return {{"type", "tool_use"},
          {"id", AnthropicToolUseId(call.id)},
          {"name", call.name},
          {"input", std::move(input)}};
}

// A Done's whole prompt is input_tokens (the prefix cache's reuse is in x_tessera_stats).
json Usage(const JobOutcome& outcome) {
  const UsageCounts u = CountUsage(outcome);
  return {{"input_tokens", u.prompt_tokens}, {"output_tokens", u.completion_tokens}};
}

class AnthropicWire final : public GenerationWire {
 public:
  std::string id_prefix() const override { return "msg_"; }

  json Body(const ResponseMeta& meta, const JobOutcome& outcome, json stats) override {
    const ChoiceOutcome& c = outcome.choices.front();
    json content = json::array();
    if (!c.text.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
    for (const worker::ToolCallFragment& call : c.tool_calls) {
      content.push_back(ToolUseBlock(call, ToolInput(call.arguments)));
    }
    json body = Message(meta, std::move(content), AnthropicStopReason(outcome),
                        StopSequence(outcome), Usage(outcome));
    body["x_tessera_stats"] = std::move(stats);
    return body;
  }

  // message_start (the prompt's tokens known), then a ping, as Anthropic sends one early.
  std::string StreamBegin(const ResponseMeta& meta, const JobOutcome& outcome) override {
    const int64_t prompt = outcome.started ? outcome.started->prompt_tokens : 0;
    json start = {{"type", "message_start"},
                  {"message", Message(meta, json::array(), nullptr, nullptr,
                                      {{"input_tokens", prompt}, {"output_tokens", 0}})}};
    return SseEvent("message_start", start) + SseEvent("ping", {{"type", "ping"}});
  }

  // Text goes to an open text block, each tool call to a tool_use block of its own: a block
  // of the other kind is stopped before the next starts.
  std::string StreamDelta(const ResponseMeta&, const worker::DeltaMessage& delta) override {
    std::string frames;
    if (!delta.text.empty()) {
      if (open_ != Open::kText) frames += Start({{"type", "text"}, {"text", ""}}, Open::kText);
      frames += Delta({{"type", "text_delta"}, {"text", delta.text}});
    }
    for (const worker::ToolCallFragment& f : delta.tool_calls) {
      if (!f.id.empty()) frames += Start(ToolUseBlock(f, json::object()), Open::kToolUse);
      if (open_ == Open::kToolUse && !f.arguments.empty()) {
        frames += Delta({{"type", "input_json_delta"}, {"partial_json", f.arguments}});
      }
    }
    return frames;
  }

  std::string StreamEnd(const ResponseMeta&, const JobOutcome& outcome,
                        const json& stats) override {
    std::string frames = Stop();
    json delta = {
        {"type", "message_delta"},
        {"delta",
         {{"stop_reason", AnthropicStopReason(outcome)}, {"stop_sequence", StopSequence(outcome)}}},
        {"usage", Usage(outcome)},
        {"x_tessera_stats", stats}};
    frames += SseEvent("message_delta", delta);
    return frames + SseEvent("message_stop", {{"type", "message_stop"}});
  }

  std::string StreamError(const json& body, const JobOutcome&) override {
    return SseEvent("error", body);
  }

 private:
  enum class Open { kNone, kText, kToolUse };

  static json Message(const ResponseMeta& meta, json content, json stop_reason, json stop_sequence,
                      json usage) {
    return {{"id", meta.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", meta.model},
            {"content", std::move(content)},
            {"stop_reason", std::move(stop_reason)},
            {"stop_sequence", std::move(stop_sequence)},
            {"usage", std::move(usage)}};
  }

  std::string Start(const json& block, Open kind) {
    std::string frames = Stop();
    open_ = kind;
    return frames +
           SseEvent("content_block_start",
                    {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }

  std::string Delta(const json& delta) const {
    return SseEvent("content_block_delta",
                    {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }

  std::string Stop() {
    if (open_ == Open::kNone) return "";
    open_ = Open::kNone;
    return SseEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
  }

  Open open_ = Open::kNone;
  int index_ = 0;  // the open block's, else the next one's
};

}  // namespace

std::unique_ptr<GenerationWire> MakeAnthropicWire() {
  return std::make_unique<AnthropicWire>();
}

std::vector<Endpoint> AnthropicEndpoints() {
  Endpoint messages;
  messages.path = "/v1/messages";
  messages.dialect = ApiDialect::kAnthropic;
  messages.id_prefix = "msg_";
  messages.handler = [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
    s.Generation(std::move(call),
                 [](const nlohmann::ordered_json& body,
                    const GenerationDefaults&) -> std::variant<ParsedGeneration, ApiError> {
                   auto parsed = ParseAnthropicMessages(body);
                   if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
                   ParsedGeneration p;
                   p.request = std::move(std::get<GenerationRequest>(parsed));
                   p.wire = MakeAnthropicWire();
                   return p;
                 });
  };
  Endpoint count;
  count.path = "/v1/messages/count_tokens";
  count.dialect = ApiDialect::kAnthropic;
  count.handler = [](ApiService& s, std::shared_ptr<ApiCall> call, const Endpoint&) {
    s.ChatTokenCount(
        std::move(call),
        [](const nlohmann::ordered_json& body, const GenerationDefaults&) {
          return ParseAnthropicCountTokens(body);
        },
        [](size_t n) {
          return json{{"input_tokens", n}};
        });
  };
  std::vector<Endpoint> rows;
  rows.push_back(std::move(messages));
  rows.push_back(std::move(count));
  return rows;
}

}  // namespace tessera::server
