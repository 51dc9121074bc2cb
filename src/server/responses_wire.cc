// The Responses API's wire (generation_wire.h): the `response` object, whole or as its typed
// event stream (response.created ... response.completed), kept in the store when asked.
#include <nlohmann/json.hpp>

#include "server/responses_api.h"

namespace tessera::server {
namespace {

using nlohmann::json;

// One output item: an assistant message's text, or a function call.
struct OutputItem {
  bool message = true;
  std::string id;
  std::string text;         // message
  std::string call_id;      // function call
  std::string name;         // function call
  std::string arguments;    // function call
  int32_t call_index = -1;  // the worker's index of the call
};

json ItemJson(const OutputItem& item, const std::string& status) {
  if (item.message) {
    return {{"id", item.id},
            {"type", "message"},
            {"role", "assistant"},
            {"status", status},
            {"content", item.text.empty() && status == "in_progress"
                            ? json::array()
                            : json::array({{{"type", "output_text"},
                                            {"text", item.text},
                                            {"annotations", json::array()},
                                            {"logprobs", json::array()}}})}};
  }
  return {{"id", item.id},           {"type", "function_call"}, {"status", status},
          {"call_id", item.call_id}, {"name", item.name},       {"arguments", item.arguments}};
}

json TextPart(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", json::array()},
          {"logprobs", json::array()}};
}

// "completed", or "incomplete" when the reply ran out of tokens.
bool RanOutOfTokens(const JobOutcome& outcome) {
  return outcome.done && outcome.done->finish_reason == worker::FinishReason::kLength;
}

json UsageOf(const JobOutcome& outcome) {
  const UsageCounts u = CountUsage(outcome);
  return {
      {"input_tokens", u.prompt_tokens},
      {"input_tokens_details", {{"cached_tokens", outcome.done ? outcome.done->cached_tokens : 0}}},
      {"output_tokens", u.completion_tokens},
      {"output_tokens_details", {{"reasoning_tokens", 0}}},
      {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The error code a failed response carries (OpenAI's ResponseError codes).
std::string FailedCode(const json& error) {
  const std::string code = error.value("code", json(nullptr)).is_string()
                               ? error["code"].get<std::string>()
                               : std::string();
  if (code == "rate_limit_exceeded" || code == "queue_full") return "rate_limit_exceeded";
  return error.value("type", "") == "server_error" ? "server_error" : "invalid_prompt";
}

class ResponsesWire final : public GenerationWire {
 public:
  ResponsesWire(ResponsesContext context, std::shared_ptr<ResponseStore> store, std::string tenant)
      : context_(std::move(context)), store_(std::move(store)), tenant_(std::move(tenant)) {}

  std::string id_prefix() const override { return "resp_"; }

  json Body(const ResponseMeta& meta, const JobOutcome& outcome, json stats) override {
    const ChoiceOutcome& choice = outcome.choices.front();
    if (!choice.text.empty() || choice.tool_calls.empty()) {
      OpenMessage(meta);  // the events are not sent: only the items are kept
      items_.back().text = choice.text;
    }
    for (const worker::ToolCallFragment& call : choice.tool_calls) OpenCall(meta, call);
    return Finish(meta, outcome, std::move(stats));
  }

  std::string StreamBegin(const ResponseMeta& meta, const JobOutcome&) override {
    // Each event takes the next sequence number: the frames are built one statement at a time.
    json snapshot = Object(meta, "in_progress", json::array(), nullptr);
    std::string frames = Event("response.created", {{"response", snapshot}});
    frames += Event("response.in_progress", {{"response", snapshot}});
    return frames;
  }

  std::string StreamDelta(const ResponseMeta& meta, const worker::DeltaMessage& delta) override {
    std::string frames;
    if (!delta.text.empty()) {
      if (items_.empty() || !items_.back().message) {
        frames += CloseOpenItem();
        frames += OpenMessage(meta);
      }
      items_.back().text += delta.text;
      frames += Event("response.output_text.delta", {{"item_id", items_.back().id},
                                                     {"output_index", items_.size() - 1},
                                                     {"content_index", 0},
                                                     {"delta", delta.text},
                                                     {"logprobs", json::array()}});
    }
    for (const worker::ToolCallFragment& f : delta.tool_calls) {
      size_t at = FindCall(f.index);
      if (at == items_.size()) {
        frames += CloseOpenItem();
        frames += OpenCall(meta, f);
        at = items_.size() - 1;
        items_[at].arguments.clear();  // sent as the delta below
      }
      OutputItem& call = items_[at];
      if (!f.id.empty()) call.call_id = f.id;
      if (!f.name.empty()) call.name = f.name;
      if (f.arguments.empty()) continue;
      call.arguments += f.arguments;
      frames += Event("response.function_call_arguments.delta",
                      {{"item_id", call.id}, {"output_index", at}, {"delta", f.arguments}});
    }
    return frames;
  }

  std::string StreamEnd(const ResponseMeta& meta, const JobOutcome& outcome,
                        const json& stats) override {
    std::string frames;
    if (items_.empty()) frames += OpenMessage(meta);
    final_status_ = RanOutOfTokens(outcome) ? "incomplete" : "completed";
    frames += CloseOpenItem();
    json response = Finish(meta, outcome, stats);
    frames += Event(RanOutOfTokens(outcome) ? "response.incomplete" : "response.completed",
                    {{"response", std::move(response)}});
    return frames;
  }

  // An error after the stream began: OpenAI's error event, then the response as failed.
  std::string StreamError(const json& body, const JobOutcome& outcome) override {
    const json error = body.value("error", json::object());
    std::string frames = Event("error", {{"code", error.value("code", json(nullptr))},
                                         {"message", error.value("message", "")},
                                         {"param", error.value("param", json(nullptr))}});
    json response = Object(meta_, "failed", OutputJson("incomplete"), UsageOf(outcome));
    response["error"] = {{"code", FailedCode(error)}, {"message", error.value("message", "")}};
    if (body.contains("x_tessera_stats")) response["x_tessera_stats"] = body["x_tessera_stats"];
    frames += Event("response.failed", {{"response", std::move(response)}});
    return frames;
  }

 private:
  // A typed event: its name and, in its data, its type and sequence number.
  std::string Event(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return SseEvent(type, data);
  }

  // The response object; `usage` may be null (not known yet).
  json Object(const ResponseMeta& meta, const std::string& status, json output, json usage) {
    meta_ = meta;
    json r = context_.echo;
    r["id"] = meta.id;
    r["object"] = "response";
    r["created_at"] = meta.created;
    r["model"] = meta.model;
    r["status"] = status;
    r["error"] = nullptr;
    r["incomplete_details"] = nullptr;
    r["output"] = std::move(output);
    r["usage"] = std::move(usage);
    r["background"] = false;
    r["reasoning"] = nullptr;
    return r;
  }

  json OutputJson(const std::string& last_status) const {
    json output = json::array();
    for (size_t i = 0; i < items_.size(); ++i)
      output.push_back(ItemJson(items_[i], i + 1 == items_.size() ? last_status : "completed"));
    return output;
  }

  size_t FindCall(int32_t index) const {
    for (size_t i = 0; i < items_.size(); ++i) {
      if (!items_[i].message && items_[i].call_index == index) return i;
    }
    return items_.size();
  }

  // Opens an output item: its added event (and a message's empty text part).
  std::string OpenMessage(const ResponseMeta& meta) {
    OutputItem item;
    item.id = "msg_" + Suffix(meta);
    items_.push_back(std::move(item));
    open_ = true;
    const size_t at = items_.size() - 1;
    std::string frames =
        Event("response.output_item.added",
              {{"output_index", at}, {"item", ItemJson(items_[at], "in_progress")}});
    frames += Event("response.content_part.added", {{"item_id", items_[at].id},
                                                    {"output_index", at},
                                                    {"content_index", 0},
                                                    {"part", TextPart("")}});
    return frames;
  }

  std::string OpenCall(const ResponseMeta& meta, const worker::ToolCallFragment& f) {
    OutputItem item;
    item.message = false;
    item.id = "fc_" + Suffix(meta);
    item.call_id = f.id;
    item.name = f.name;
    item.arguments = f.arguments;
    item.call_index = f.index;
    items_.push_back(std::move(item));
    open_ = true;
    json added = ItemJson(items_.back(), "in_progress");
    added["arguments"] = "";
    return Event("response.output_item.added",
                 {{"output_index", items_.size() - 1}, {"item", std::move(added)}});
  }

  // The done events of the last item, if it is still open. It ends with the response's status
  // when nothing follows it (from StreamEnd), else completed.
  std::string CloseOpenItem() {
    if (!open_ || items_.empty()) return "";
    open_ = false;
    const size_t at = items_.size() - 1;
    const OutputItem& item = items_[at];
    const std::string status = final_status_.empty() ? "completed" : final_status_;
    std::string frames;
    if (item.message) {
      frames += Event("response.output_text.done", {{"item_id", item.id},
                                                    {"output_index", at},
                                                    {"content_index", 0},
                                                    {"text", item.text},
                                                    {"logprobs", json::array()}});
      frames += Event("response.content_part.done", {{"item_id", item.id},
                                                     {"output_index", at},
                                                     {"content_index", 0},
                                                     {"part", TextPart(item.text)}});
    } else {
      frames += Event("response.function_call_arguments.done",
                      {{"item_id", item.id}, {"output_index", at}, {"arguments", item.arguments}});
    }
    frames += Event("response.output_item.done",
                    {{"output_index", at}, {"item", ItemJson(item, status)}});
    return frames;
  }

  // Item ids: the response's request id, and the item's place after the first.
  std::string Suffix(const ResponseMeta& meta) const {
    const std::string base = meta.id.substr(id_prefix().size());
    return items_.empty() ? base : base + "_" + std::to_string(items_.size());
  }

  // The finished response (kept when asked) from the items so far.
  json Finish(const ResponseMeta& meta, const JobOutcome& outcome, json stats) {
    const bool incomplete = RanOutOfTokens(outcome);
    json response = Object(meta, incomplete ? "incomplete" : "completed",
                           OutputJson(incomplete ? "incomplete" : "completed"), UsageOf(outcome));
    if (incomplete) response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    response["x_tessera_stats"] = std::move(stats);
    if (context_.store) Keep(response);
    return response;
  }

  void Keep(const json& response) {
    StoredResponse kept;
    kept.response = response;
    kept.conversation = std::move(context_.conversation);
    worker::ChatMessage reply;
    reply.role = "assistant";
    json calls = json::array();
    for (const OutputItem& item : items_) {
      if (item.message) {
        reply.content += item.text;
      } else {
        calls.push_back({{"id", item.call_id},
                         {"type", "function"},
                         {"function", {{"name", item.name}, {"arguments", item.arguments}}}});
      }
    }
    if (!calls.empty()) reply.tool_calls = calls.dump();
    kept.conversation.push_back(std::move(reply));
    store_->Put(tenant_, response["id"].get<std::string>(), std::move(kept));
  }

  ResponsesContext context_;
  std::shared_ptr<ResponseStore> store_;
  const std::string tenant_;
  std::vector<OutputItem> items_;
  bool open_ = false;  // the last item's done events are still to come
  std::string final_status_;
  int64_t sequence_ = 0;
  ResponseMeta meta_;  // the last seen (a failure's response repeats it)
};

}  // namespace

std::unique_ptr<GenerationWire> MakeResponsesWire(ResponsesContext context,
                                                  std::shared_ptr<ResponseStore> store,
                                                  std::string tenant) {
  return std::make_unique<ResponsesWire>(std::move(context), std::move(store), std::move(tenant));
}

}  // namespace tessera::server
