// Anthropic's Messages API: the request parser (every field reaches the typed chat job, every
// refusal names its field) and the wire (the message object, stop reasons, and the named SSE
// events in Anthropic's order with their block indices).
#include "server/anthropic_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sse_events.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

ojson Weather() {
  return {{"name", "get_weather"},
          {"description", "The weather in a city"},
          {"input_schema",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}}}}},
            {"required", {"city"}}}}};
}

// A valid request that touches every supported field.
ojson FullBody() {
  return {
      {"model", "m"},
      {"max_tokens", 2048},
      {"system",
       {{{"type", "text"}, {"text", "Be brief."}},
        {{"type", "text"}, {"text", "Use tools."}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "text"}, {"text", "Checking."}},
           {{"type", "tool_use"},
            {"id", "toolu_01"},
            {"name", "get_weather"},
            {"input", {{"city", "Paris"}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "toolu_01"}, {"content", "21 C"}},
           {{"type", "text"}, {"text", "And Rome?"}}}}}}},
      {"stop_sequences", {"END", "\n\nHuman:"}},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 40},
      {"metadata", {{"user_id", "u-1"}}},
      {"stream", true},
      {"tools", {Weather()}},
      {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}},
      {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
}

ApiError Refused(const ojson& body) {
  auto r = ParseAnthropicMessages(body);
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

const worker::ChatPayload& ChatOf(const GenerationRequest& g) {
  return std::get<worker::ChatPayload>(g.job.payload);
}

TEST(AnthropicApi, EveryFieldReachesTheChatJob) {
  auto r = ParseAnthropicMessages(FullBody());
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const GenerationRequest& g = std::get<GenerationRequest>(r);
  EXPECT_EQ(g.job.model, "m");
  EXPECT_TRUE(g.stream);
  const worker::ChatPayload& chat = ChatOf(g);
  ASSERT_EQ(chat.messages.size(), 5u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "Be brief.\n\nUse tools.");
  EXPECT_EQ(chat.messages[1].role, "user");
  EXPECT_EQ(chat.messages[2].role, "assistant");
  EXPECT_EQ(chat.messages[2].content, "Checking.");
  const json calls = json::parse(chat.messages[2].tool_calls);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["id"], "toolu_01");
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(chat.messages[3].role, "tool");
  EXPECT_EQ(chat.messages[3].tool_call_id, "toolu_01");
  EXPECT_EQ(chat.messages[3].name, "get_weather");
  EXPECT_EQ(chat.messages[3].content, "21 C");
  EXPECT_EQ(chat.messages[4].role, "user");
  EXPECT_EQ(chat.messages[4].content, "And Rome?");
  ASSERT_EQ(chat.tools.size(), 1u);
  const json tool = json::parse(chat.tools[0].definition);
  EXPECT_EQ(tool["type"], "function");
  EXPECT_EQ(tool["function"]["name"], "get_weather");
  EXPECT_EQ(tool["function"]["parameters"]["required"], json::array({"city"}));
  EXPECT_EQ(chat.tool_choice.mode, worker::ToolChoiceMode::kFunction);
  EXPECT_EQ(chat.tool_choice.function, "get_weather");
  EXPECT_EQ(chat.enable_thinking, std::optional<bool>(true));
  const worker::GenerationOptions& o = chat.options;
  EXPECT_EQ(o.max_tokens, 2048);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"END", "\n\nHuman:"}));
  EXPECT_EQ(o.sampling.temperature, 0.5);
  EXPECT_EQ(o.sampling.top_p, 0.9);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_EQ(o.n, 1);
}

TEST(AnthropicApi, ContentShapesAndTurns) {
  // Consecutive turns of one role are one turn, as Anthropic combines them; a system message
  // in messages is a system turn; content may be text blocks.
  ojson body = {{"model", "m"},
                {"max_tokens", 8},
                {"system", "S"},
                {"messages",
                 {{{"role", "system"}, {"content", "also"}},
                  {{"role", "user"}, {"content", "a"}},
                  {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "b"}}}}}}}};
  auto r = ParseAnthropicMessages(body);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const worker::ChatPayload& chat = ChatOf(std::get<GenerationRequest>(r));
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].content, "S\n\nalso");
  EXPECT_EQ(chat.messages[1].content, "a\n\nb");
  EXPECT_FALSE(std::get<GenerationRequest>(r).stream);
  EXPECT_FALSE(chat.enable_thinking.has_value());  // the model's default
  EXPECT_TRUE(chat.tools.empty());
  EXPECT_EQ(chat.tool_choice.mode, worker::ToolChoiceMode::kNone);
}

TEST(AnthropicApi, ToolChoicesAndThinkingSwitch) {
  const std::vector<std::pair<ojson, worker::ToolChoiceMode>> choices = {
      {{{"type", "auto"}}, worker::ToolChoiceMode::kAuto},
      {{{"type", "auto"}, {"disable_parallel_tool_use", false}}, worker::ToolChoiceMode::kAuto},
      {{{"type", "any"}, {"disable_parallel_tool_use", true}}, worker::ToolChoiceMode::kRequired},
      {{{"type", "none"}}, worker::ToolChoiceMode::kNone},
  };
  for (const auto& [choice, mode] : choices) {
    ojson body = FullBody();
    body["tool_choice"] = choice;
    auto r = ParseAnthropicMessages(body);
    ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << choice.dump();
    EXPECT_EQ(ChatOf(std::get<GenerationRequest>(r)).tool_choice.mode, mode) << choice.dump();
  }
  ojson body = FullBody();
  body.erase("tool_choice");  // tools without a choice: auto
  EXPECT_EQ(ChatOf(std::get<GenerationRequest>(ParseAnthropicMessages(body))).tool_choice.mode,
            worker::ToolChoiceMode::kAuto);
  body["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(ChatOf(std::get<GenerationRequest>(ParseAnthropicMessages(body))).enable_thinking,
            std::optional<bool>(false));
  body["thinking"] = {{"type", "adaptive"}};
  EXPECT_EQ(ChatOf(std::get<GenerationRequest>(ParseAnthropicMessages(body))).enable_thinking,
            std::optional<bool>(true));
}

// tool_result content as text blocks, is_error, cache_control everywhere, strict tools.
TEST(AnthropicApi, AcceptedExtras) {
  ojson body = FullBody();
  body["messages"][2]["content"][0]["content"] = {{{"type", "text"}, {"text", "x"}},
                                                  {{"type", "text"}, {"text", "y"}}};
  body["messages"][2]["content"][0]["is_error"] = true;
  body["messages"][2]["content"][0]["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
  body["tools"][0]["cache_control"] = {{"type", "ephemeral"}};
  body["tools"][0]["strict"] = true;
  body["cache_control"] = {{"type", "ephemeral"}};
  auto r = ParseAnthropicMessages(body);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const worker::ChatPayload& chat = ChatOf(std::get<GenerationRequest>(r));
  EXPECT_EQ(chat.messages[3].content, "x\n\ny");
  EXPECT_TRUE(chat.tools[0].strict);
}

// Every refusal is a 400 whose param names the field (and whose message says what to do).
TEST(AnthropicApi, EveryRefusalNamesItsField) {
  struct Case {
    std::function<void(ojson&)> change;
    std::string param;
  };
  auto set = [](const char* key, ojson v) { return [key, v](ojson& b) { b[key] = v; }; };
  auto image = ojson{{"type", "image"},
                     {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "x"}}}};
  ojson loose = Weather();
  loose["input_schema"]["properties"]["when"] = {{"type", "string"}, {"format", "date-time"}};
  const std::vector<Case> cases = {
      {set("foo", 1), "foo"},
      {set("container", "c"), "container"},
      {set("output_config", {{"effort", "low"}}), "output_config"},
      {set("service_tier", "auto"), "service_tier"},
      {[](ojson& b) { b.erase("model"); }, "model"},
      {set("model", 7), "model"},
      {[](ojson& b) { b.erase("max_tokens"); }, "max_tokens"},
      {set("max_tokens", 0), "max_tokens"},
      {set("max_tokens", 1.5), "max_tokens"},
      {set("messages", ojson::array()), "messages"},
      {[](ojson& b) { b["messages"][0]["role"] = "tool"; }, "messages[0].role"},
      {[](ojson& b) { b["messages"][0]["name"] = "n"; }, "messages[0].name"},
      {[](ojson& b) { b["messages"][0]["content"] = 5; }, "messages[0].content"},
      {[](ojson& b) { b["messages"][0]["content"] = ojson::array(); }, "messages[0].content"},
      {[&](ojson& b) { b["messages"][0]["content"] = {image}; }, "messages[0].content[0].type"},
      {[](ojson& b) {
         b["messages"][0]["content"] = {
             {{"type", "document"}, {"source", {{"type", "text"}, {"data", "d"}}}}};
       },
       "messages[0].content[0].type"},
      {[](ojson& b) {
         b["messages"][1]["content"][0] = {{"type", "thinking"}, {"thinking", "t"}};
       },
       "messages[1].content[0].type"},
      {[](ojson& b) { b["messages"][1]["content"][0]["text"] = 3; }, "messages[1].content[0].text"},
      {[](ojson& b) { b["messages"][1]["content"][0]["citations"] = ojson::array(); },
       "messages[1].content[0].citations"},
      {[](ojson& b) { b["messages"][1]["content"][1]["input"] = "{}"; },
       "messages[1].content[1].input"},
      {[](ojson& b) { b["messages"][1]["content"][1].erase("id"); }, "messages[1].content[1].id"},
      {[](ojson& b) {
         b["messages"][1]["content"][1]["caller"] = {{"type", "direct"}};
       },
       "messages[1].content[1].caller"},
      {[](ojson& b) { b["messages"][0]["content"] = {b["messages"][1]["content"][1]}; },
       "messages[0].content[0].type"},
      {[](ojson& b) { b["messages"][2]["content"][0]["tool_use_id"] = "toolu_nope"; },
       "messages[2].content[0].tool_use_id"},
      {[&](ojson& b) { b["messages"][2]["content"][0]["content"] = {image}; },
       "messages[2].content[0].content[0].type"},
      {[](ojson& b) { b["messages"][2]["content"][0]["is_error"] = "yes"; },
       "messages[2].content[0].is_error"},
      {[](ojson& b) {
         b["messages"][2]["content"][0]["cache_control"] = {{"type", "forever"}};
       },
       "messages[2].content[0].cache_control"},
      {[](ojson& b) { b["messages"].erase(2); }, "messages[1]"},  // ends on the assistant
      {set("system", 5), "system"},
      {[&](ojson& b) { b["system"] = {image}; }, "system[0].type"},
      {set("stop_sequences", "END"), "stop_sequences"},
      {set("stop_sequences", ojson(std::vector<std::string>(17, "x"))), "stop_sequences"},
      {set("stop_sequences", {""}), "stop_sequences"},
      {set("temperature", 1.5), "temperature"},
      {set("top_p", -0.1), "top_p"},
      {set("top_k", -1), "top_k"},
      {set("metadata", {{"foo", 1}}), "metadata.foo"},
      {set("metadata", {{"user_id", 5}}), "metadata.user_id"},
      {set("stream", "yes"), "stream"},
      {set("cache_control", {{"type", "persistent"}}), "cache_control"},
      {set("tools", {{{"type", "bash_20250124"}, {"name", "bash"}}}), "tools[0].type"},
      {[](ojson& b) { b["tools"][0].erase("input_schema"); }, "tools[0].input_schema"},
      {[](ojson& b) {
         b["tools"][0]["input_schema"] = {{"type", "string"}};
       },
       "tools[0].input_schema"},
      {[](ojson& b) { b["tools"][0]["name"] = "get weather"; }, "tools[0].name"},
      {[](ojson& b) { b["tools"][0]["description"] = 1; }, "tools[0].description"},
      {[](ojson& b) { b["tools"][0]["input_examples"] = ojson::array(); },
       "tools[0].input_examples"},
      {[](ojson& b) { b["tools"][0]["cache_control"] = 1; }, "tools[0].cache_control"},
      {[](ojson& b) { b["tools"].push_back(Weather()); }, "tools[1].name"},  // twice
      {[&](ojson& b) {
         b["tools"] = {loose};
         b["tool_choice"] = {{"type", "any"}};
       },
       "tools[0].input_schema"},  // a forced call's schema the decoder cannot enforce
      {set("tools", "x"), "tools"},
      {set("tool_choice", {{"type", "required"}}), "tool_choice"},
      {set("tool_choice", "auto"), "tool_choice"},
      {set("tool_choice", {{"type", "tool"}}), "tool_choice.name"},
      {set("tool_choice", {{"type", "any"}, {"name", "get_weather"}}), "tool_choice.name"},
      {set("tool_choice", {{"type", "tool"}, {"name", "nope"}}), "tool_choice"},
      {set("tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", true}}),
       "tool_choice.disable_parallel_tool_use"},
      {set("tool_choice", {{"type", "auto"}, {"extra", 1}}), "tool_choice.extra"},
      {[](ojson& b) {
         b.erase("tools");
         b["tool_choice"] = {{"type", "any"}};
       },
       "tool_choice"},
      {set("thinking", {{"type", "enabled"}}), "thinking.budget_tokens"},
      {set("thinking", {{"type", "enabled"}, {"budget_tokens", 1000}}), "thinking.budget_tokens"},
      {set("thinking", {{"type", "enabled"}, {"budget_tokens", 4096}}), "thinking.budget_tokens"},
      {set("thinking", {{"type", "between_tools"}}), "thinking.type"},
      {set("thinking", {{"type", "adaptive"}, {"display", "omitted"}}), "thinking.display"},
      {set("thinking", {{"type", "adaptive"}, {"budget_tokens", 2000}}), "thinking.budget_tokens"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ojson body = FullBody();
    cases[i].change(body);
    const ApiError e = Refused(body);
    EXPECT_EQ(e.status, 400) << i;
    EXPECT_EQ(e.param, cases[i].param) << i << ": " << e.message << " in " << body.dump();
    EXPECT_FALSE(e.message.empty()) << i;
  }
  // Refusals say what was wrong: an image by its name, an unknown field by its.
  ojson body = FullBody();
  body["messages"][0]["content"] = {image};
  EXPECT_NE(Refused(body).message.find("image blocks are not supported"), std::string::npos);
  body = FullBody();
  body["container"] = "c";
  EXPECT_NE(Refused(body).message.find("container is not supported"), std::string::npos);
}

TEST(AnthropicApi, CountTokensTakesTheConversationOnly) {
  ojson body = FullBody();
  for (const char* generation_only :
       {"max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "metadata", "stream"}) {
    body.erase(generation_only);
  }
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 4096}};  // no max_tokens to be under
  auto r = ParseAnthropicCountTokens(body);
  ASSERT_TRUE(std::holds_alternative<worker::JobRequest>(r)) << std::get<ApiError>(r).message;
  const auto& count =
      std::get<worker::ChatTokenizePayload>(std::get<worker::JobRequest>(r).payload);
  EXPECT_EQ(count.chat.messages.size(), 5u);
  EXPECT_EQ(count.chat.messages[0].role, "system");
  EXPECT_EQ(count.chat.tools.size(), 1u);
  EXPECT_EQ(count.chat.tool_choice.mode, worker::ToolChoiceMode::kFunction);
  EXPECT_EQ(count.chat.enable_thinking, std::optional<bool>(true));
  body["max_tokens"] = 10;
  auto refused = ParseAnthropicCountTokens(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "max_tokens");
  body.erase("max_tokens");
  body.erase("model");
  EXPECT_EQ(std::get<ApiError>(ParseAnthropicCountTokens(body)).param, "model");
}

// ---- the wire

JobOutcome Finished(worker::FinishReason reason, std::string stop_sequence = "") {
  JobOutcome o;
  o.started = worker::StartedMessage{};
  o.started->prompt_tokens = 12;
  o.done = worker::DoneMessage{};
  o.done->finish_reason = reason;
  o.done->prompt_tokens = 12;
  o.done->completion_tokens = 5;
  o.done->stop_sequence = std::move(stop_sequence);
  return o;
}

ResponseMeta Meta() {
  ResponseMeta m;
  m.id = "msg_abc";
  m.model = "m";
  return m;
}

TEST(AnthropicWire, MessageBodyWithTextAndToolUse) {
  JobOutcome o = Finished(worker::FinishReason::kToolCalls);
  worker::DeltaMessage d;
  d.text = "Let me check.";
  d.tool_calls = {{0, "call_ABCDEFGHIJKLMNOPQRSTUVWX", "get_weather", ""},
                  {0, "", "", R"({"city":"Paris"})"}};
  o.choices[0].Add(d);
  const json body = MakeAnthropicWire()->Body(Meta(), o, {{"ttft_ms", 1}});
  EXPECT_EQ(body["id"], "msg_abc");
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["role"], "assistant");
  EXPECT_EQ(body["model"], "m");
  ASSERT_EQ(body["content"].size(), 2u);
  EXPECT_EQ(body["content"][0], json({{"type", "text"}, {"text", "Let me check."}}));
  EXPECT_EQ(body["content"][1]["type"], "tool_use");
  EXPECT_EQ(body["content"][1]["id"], "toolu_ABCDEFGHIJKLMNOPQRSTUVWX");
  EXPECT_EQ(body["content"][1]["name"], "get_weather");
  EXPECT_EQ(body["content"][1]["input"], json({{"city", "Paris"}}));  // an object, not text
  EXPECT_EQ(body["stop_reason"], "tool_use");
  EXPECT_TRUE(body["stop_sequence"].is_null());
  EXPECT_EQ(body["usage"], json({{"input_tokens", 12}, {"output_tokens", 5}}));
  EXPECT_EQ(body["x_tessera_stats"]["ttft_ms"], 1);
}

TEST(AnthropicWire, StopReasons) {
  using worker::FinishReason;
  auto body = [](const JobOutcome& o) { return MakeAnthropicWire()->Body(Meta(), o, {}); };
  EXPECT_EQ(body(Finished(FinishReason::kStop))["stop_reason"], "end_turn");
  EXPECT_TRUE(body(Finished(FinishReason::kStop))["stop_sequence"].is_null());
  const json stopped = body(Finished(FinishReason::kStop, "END"));
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], "END");
  EXPECT_EQ(body(Finished(FinishReason::kLength))["stop_reason"], "max_tokens");
  EXPECT_EQ(body(Finished(FinishReason::kToolCalls))["stop_reason"], "tool_use");
  EXPECT_TRUE(AnthropicStopReason(JobOutcome{}).is_null());  // cut short: no reason
  EXPECT_TRUE(body(JobOutcome{})["content"].empty());
}

using Event = test::ParsedSseEvent;

std::vector<Event> Events(const std::string& frames) {
  return test::ParseSseEvents(frames);
}

TEST(AnthropicWire, StreamEventsInOrderWithBlockIndices) {
  auto wire = MakeAnthropicWire();
  const ResponseMeta meta = Meta();
  JobOutcome o = Finished(worker::FinishReason::kToolCalls);
  std::string frames = wire->StreamBegin(meta, o);
  auto delta = [&](std::string text, std::vector<worker::ToolCallFragment> calls) {
    worker::DeltaMessage d;
    d.text = std::move(text);
    d.tool_calls = std::move(calls);
    frames += wire->StreamDelta(meta, d);
  };
  delta("He", {});
  delta("llo", {});
  delta("", {{0, "call_111111111111111111111111", "a", ""}, {0, "", "", R"({"x":1})"}});
  delta("", {{1, "call_222222222222222222222222", "b", ""}});
  delta("", {{1, "", "", "{}"}});
  delta("bye", {});
  frames += wire->StreamEnd(meta, o, {{"ttft_ms", 2}});
  const std::vector<Event> events = Events(frames);
  std::vector<std::string> names;
  for (const Event& e : events) {
    names.push_back(e.name +
                    (e.data.contains("index") ? std::to_string(e.data["index"].get<int>()) : ""));
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "message_start", "ping", "content_block_start0", "content_block_delta0",
                "content_block_delta0", "content_block_stop0", "content_block_start1",
                "content_block_delta1", "content_block_stop1", "content_block_start2",
                "content_block_delta2", "content_block_stop2", "content_block_start3",
                "content_block_delta3", "content_block_stop3", "message_delta", "message_stop"}));
  const json& message = events[0].data["message"];
  EXPECT_EQ(message["id"], "msg_abc");
  EXPECT_EQ(message["content"], json::array());
  EXPECT_TRUE(message["stop_reason"].is_null());
  EXPECT_EQ(message["usage"]["input_tokens"], 12);
  EXPECT_EQ(events[2].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[3].data["delta"], json({{"type", "text_delta"}, {"text", "He"}}));
  EXPECT_EQ(events[6].data["content_block"], json({{"type", "tool_use"},
                                                   {"id", "toolu_111111111111111111111111"},
                                                   {"name", "a"},
                                                   {"input", json::object()}}));
  EXPECT_EQ(events[7].data["delta"],
            json({{"type", "input_json_delta"}, {"partial_json", R"({"x":1})"}}));
  EXPECT_EQ(events[10].data["delta"]["partial_json"], "{}");
  EXPECT_EQ(events[13].data["delta"]["text"], "bye");
  EXPECT_EQ(events[15].data["delta"],
            json({{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}}));
  EXPECT_EQ(events[15].data["usage"]["output_tokens"], 5);
}

TEST(AnthropicWire, EmptyStreamAndStopSequence) {
  auto wire = MakeAnthropicWire();
  JobOutcome o = Finished(worker::FinishReason::kStop, "END");
  const std::vector<Event> events =
      Events(wire->StreamBegin(Meta(), o) + wire->StreamEnd(Meta(), o, json::object()));
  ASSERT_EQ(events.size(), 4u);  // no content: no block
  EXPECT_EQ(events[2].name, "message_delta");
  EXPECT_EQ(events[2].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(events[2].data["delta"]["stop_sequence"], "END");
  EXPECT_EQ(events[3].name, "message_stop");
}

TEST(AnthropicWire, ErrorsTakeAnthropicsShape) {
  ApiError e = InvalidField("model", "no such model");
  e.status = 404;
  const json body = ErrorBodyIn(ApiDialect::kAnthropic, e);
  EXPECT_EQ(body, json({{"type", "error"},
                        {"error", {{"type", "not_found_error"}, {"message", "no such model"}}}}));
  const std::vector<Event> events = Events(MakeAnthropicWire()->StreamError(body, JobOutcome{}));
  EXPECT_FALSE(MakeAnthropicWire()->errors_carry_usage());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "error");
  EXPECT_EQ(events[0].data["error"]["type"], "not_found_error");
}

TEST(AnthropicWire, EndpointRowsSpeakAnthropic) {
  const std::vector<Endpoint> rows = AnthropicEndpoints();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].path, "/v1/messages");
  EXPECT_EQ(rows[1].path, "/v1/messages/count_tokens");
  for (const Endpoint& e : rows) {
    EXPECT_EQ(e.dialect, ApiDialect::kAnthropic);
    EXPECT_EQ(e.method, EndpointMethod::kPost);
    EXPECT_EQ(e.access, EndpointAccess::kApiKey);
  }
  EXPECT_EQ(AnthropicToolUseId("call_abc"), "toolu_abc");
}

}  // namespace
}  // namespace tessera::server
