// Ollama's answers: /api/chat and /api/generate as NDJSON lines (one JSON object and "\n"
// each) or one object, the last with done: true, done_reason and the durations in
// nanoseconds; /api/embed and /api/embeddings bodies.
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "format/ordered_json.h"
#include "server/api_service_internal.h"
#include "server/ollama_api.h"
#include "server/openai_api.h"

namespace tessera::server {

using api_internal::Dump;
using nlohmann::json;

std::string OllamaTimestamp(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  const std::time_t seconds = static_cast<std::time_t>(us.count() / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(us.count() % 1000000));
  return buf;
}

int64_t OllamaNanoseconds(double ms) {
  return ms > 0 ? static_cast<int64_t>(std::llround(ms * 1e6)) : 0;
}

namespace {

// Ollama says "length" when the token limit ended the answer and "stop" otherwise (a tool
// call included).
std::string DoneReason(const JobOutcome& outcome) {
  return ChoiceFinishReason(outcome, 0) == "length" ? "length" : "stop";
}

// [{id, function: {index, name, arguments: {...}}}]: the arguments as an object (a text that
// is not a JSON object, which a constrained call never is, stays the string it was).
json OllamaToolCalls(const std::vector<worker::ToolCallFragment>& calls) {
  json out = json::array();
  for (const worker::ToolCallFragment& c : calls) {
    auto parsed = ParseOrderedJson(c.arguments, kRequestJsonLimits, "tool call arguments");
    json arguments =
        parsed && parsed->is_object() ? json::parse(parsed->dump()) : json(c.arguments);
    out.push_back({{"id", c.id},
                   {"function", {{"index", c.index}, {"name", c.name}, {"arguments", arguments}}}});
  }
  return out;
}

class OllamaWire final : public GenerationWire {
 public:
  explicit OllamaWire(bool chat) : chat_(chat) {}

  std::string id_prefix() const override { return "ollama-"; }
  std::string stream_content_type() const override { return "application/x-ndjson"; }

  json Body(const ResponseMeta& meta, const JobOutcome& outcome, json stats) override {
    const ChoiceOutcome& c = outcome.choices.at(0);
    json body = Line(meta, c.text, c.tool_calls, meta.logprobs ? &c.logprobs : nullptr);
    Finish(body, meta, outcome);
    body["x_tessera_stats"] = std::move(stats);
    return body;
  }

  std::string StreamBegin(const ResponseMeta&, const JobOutcome&) override { return ""; }

  std::string StreamDelta(const ResponseMeta& meta, const worker::DeltaMessage& delta) override {
    // Ollama sends each tool call whole: the fragments wait for the end of the answer.
    if (!delta.tool_calls.empty()) {
      worker::DeltaMessage calls;
      calls.tool_calls = delta.tool_calls;
      pending_calls_.Add(calls);
    }
    if (delta.text.empty() && delta.logprobs.empty()) return "";
    return Dump(Line(meta, delta.text, {}, meta.logprobs ? &delta.logprobs : nullptr)) + "\n";
  }

  std::string StreamEnd(const ResponseMeta& meta, const JobOutcome& outcome,
                        const json& stats) override {
    std::string lines;
    if (!pending_calls_.tool_calls.empty()) {
      lines += Dump(Line(meta, "", pending_calls_.tool_calls, nullptr)) + "\n";
    }
    json last = Line(meta, "", {}, nullptr);
    Finish(last, meta, outcome);
    last["x_tessera_stats"] = stats;
    return lines + Dump(last) + "\n";
  }

  std::string StreamError(const json& body, const JobOutcome&) override {
    return Dump(body) + "\n";
  }

 private:
  // {model, created_at, message: {role, content, tool_calls?} | response, logprobs?, done}.
  json Line(const ResponseMeta& meta, const std::string& text,
            const std::vector<worker::ToolCallFragment>& calls,
            const std::vector<worker::TokenLogprobEntry>* logprobs) const {
    json line = {{"model", meta.model},
                 {"created_at", OllamaTimestamp(std::chrono::system_clock::now())}};
    if (chat_) {
      json message = {{"role", "assistant"}, {"content", text}};
      if (!calls.empty()) message["tool_calls"] = OllamaToolCalls(calls);
      line["message"] = std::move(message);
    } else {
      line["response"] = text;
    }
    if (logprobs != nullptr) line["logprobs"] = LogprobsContentJson(*logprobs)["content"];
    line["done"] = false;
    return line;
  }

  static void Finish(json& line, const ResponseMeta& meta, const JobOutcome& outcome) {
    const UsageCounts usage = CountUsage(outcome);
    const worker::DoneMessage none;
    const worker::DoneMessage& done = outcome.done ? *outcome.done : none;
    line["done"] = true;
    line["done_reason"] = DoneReason(outcome);
    line["total_duration"] = OllamaNanoseconds(meta.queue_ms + outcome.elapsed_ms_seen);
    line["load_duration"] = OllamaNanoseconds(done.load_ms);
    line["prompt_eval_count"] = usage.prompt_tokens;
    line["prompt_eval_duration"] = OllamaNanoseconds(done.prefill_ms);
    line["eval_count"] = usage.completion_tokens;
    line["eval_duration"] = OllamaNanoseconds(done.decode_ms);
  }

  const bool chat_;
  ChoiceOutcome pending_calls_;
};

}  // namespace

std::unique_ptr<GenerationWire> MakeOllamaWire(bool chat) {
  return std::make_unique<OllamaWire>(chat);
}

nlohmann::ordered_json OllamaEmbedBody(const TaskRequest& request,
                                       const worker::TaskResultMessage& result, bool legacy,
                                       double queue_ms) {
  using ojson = nlohmann::ordered_json;
  if (legacy) {
    return {{"embedding", result.items.empty() ? ojson::array() : ojson(result.items[0].values)}};
  }
  ojson embeddings = ojson::array();
  for (const worker::TaskItem& item : result.items) embeddings.push_back(item.values);
  return {{"model", request.job.model},
          {"embeddings", std::move(embeddings)},
          {"total_duration",
           OllamaNanoseconds(queue_ms + result.queue_ms + result.load_ms + result.run_ms)},
          {"load_duration", OllamaNanoseconds(result.load_ms)},
          {"prompt_eval_count", result.prompt_tokens}};
}

}  // namespace tessera::server
