// OpenAI's Responses API (server/responses_api.h): the request parser (input items to chat
// messages, tools, text.format, previous_response_id, refusals by name) and the wire (the
// response object, and the order and numbering of its stream's typed events).
#include "server/responses_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sse_events.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

struct Parsed {
  std::variant<ParsedResponsesRequest, ApiError> result;
  const ParsedResponsesRequest& ok() const {
    if (const auto* e = std::get_if<ApiError>(&result))
      ADD_FAILURE() << e->param << ": " << e->message;
    return std::get<ParsedResponsesRequest>(result);
  }
  const worker::ChatPayload& chat() const {
    return std::get<worker::ChatPayload>(ok().request.job.payload);
  }
  ApiError error() const {
    EXPECT_TRUE(std::holds_alternative<ApiError>(result));
    return std::holds_alternative<ApiError>(result) ? std::get<ApiError>(result) : ApiError{};
  }
};

Parsed Parse(const std::string& body, ResponseStore& store, const std::string& tenant = "a") {
  return {ParseResponsesRequest(ojson::parse(body), "default", store, tenant)};
}

TEST(ResponsesRequest, StringInputInstructionsAndSampling) {
  ResponseStore store;
  Parsed p = Parse(R"({"model": "m", "input": "Hello", "instructions": "Be brief",
                       "max_output_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stream": true,
                       "metadata": {"k": "v"}, "user": "u1", "store": false})",
                   store);
  const ParsedResponsesRequest& r = p.ok();
  EXPECT_EQ(r.request.job.model, "m");
  EXPECT_TRUE(r.request.stream);
  EXPECT_FALSE(r.context.store);
  const worker::ChatPayload& chat = p.chat();
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "Be brief");
  EXPECT_EQ(chat.messages[1].role, "user");
  EXPECT_EQ(chat.messages[1].content, "Hello");
  EXPECT_EQ(chat.options.max_tokens, 7);
  EXPECT_EQ(chat.options.sampling.temperature, 0.5);
  EXPECT_EQ(chat.options.sampling.top_p, 0.9);
  // The instructions are not part of the conversation a later response continues.
  ASSERT_EQ(r.context.conversation.size(), 1u);
  EXPECT_EQ(r.context.conversation[0].content, "Hello");
  const json& echo = r.context.echo;
  EXPECT_EQ(echo["instructions"], "Be brief");
  EXPECT_EQ(echo["max_output_tokens"], 7);
  EXPECT_EQ(echo["temperature"], 0.5);
  EXPECT_EQ(echo["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(echo["user"], "u1");
  EXPECT_EQ(echo["store"], false);
  EXPECT_EQ(echo["tool_choice"], "auto");
  EXPECT_EQ(echo["text"], json({{"format", {{"type", "text"}}}}));
  // Without a model: the default one.
  EXPECT_EQ(Parse(R"({"input": "x"})", store).ok().request.job.model, "default");
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  ResponseStore store;
  Parsed p = Parse(R"({"input": [
      {"role": "developer", "content": "Rules"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                      {"type": "input_text", "text": "b"}]},
      {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{\"x\":1}"},
      {"type": "function_call_output", "call_id": "call_2", "output": "two"},
      {"type": "function_call_output", "call_id": "call_1", "output": "one"}]})",
                   store);
  const std::vector<worker::ChatMessage>& m = p.chat().messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content, "ab");
  // The calls join the assistant message before them.
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Let me look.");
  const json calls = json::parse(m[2].tool_calls);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "call_1");
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[1]["function"]["name"], "g");
  EXPECT_EQ(calls[1]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "call_2");
  EXPECT_EQ(m[3].name, "g");
  EXPECT_EQ(m[3].content, "two");
  EXPECT_EQ(m[4].name, "f");
  // A call without an assistant message before it gets one of its own.
  Parsed lone = Parse(R"({"input": [{"role": "user", "content": "q"},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})",
                      store);
  ASSERT_EQ(lone.chat().messages.size(), 2u);
  EXPECT_EQ(lone.chat().messages[1].role, "assistant");
  EXPECT_EQ(lone.chat().messages[1].content, "");
}

TEST(ResponsesRequest, PreviousResponseIdPrependsTheStoredConversationOfItsTenant) {
  ResponseStore store;
  StoredResponse kept;
  kept.response = {{"id", "resp_1"}};
  kept.conversation = {
      {"user", "first", "", "", ""},
      {"assistant", "",
       R"([{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}])", "", ""}};
  ASSERT_TRUE(store.Put("a", "resp_1", kept));
  Parsed p = Parse(R"({"previous_response_id": "resp_1", "instructions": "New rules",
                       "input": [{"type": "function_call_output", "call_id": "call_9", "output": "42"}]})",
                   store);
  const std::vector<worker::ChatMessage>& m = p.chat().messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].content, "New rules");
  EXPECT_EQ(m[1].content, "first");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].name, "f");  // named from the stored call
  EXPECT_EQ(p.ok().context.conversation.size(), 3u);
  EXPECT_EQ(p.ok().context.echo["previous_response_id"], "resp_1");
  // Another key's id, or one never kept: 404 naming the field.
  for (const auto& [tenant, id] :
       std::vector<std::pair<std::string, std::string>>{{"b", "resp_1"}, {"a", "resp_2"}}) {
    ApiError e =
        Parse(R"({"input": "x", "previous_response_id": ")" + id + "\"}", store, tenant).error();
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.param, "previous_response_id");
    EXPECT_EQ(e.code, "previous_response_not_found");
    EXPECT_NE(e.message.find(id), std::string::npos);
  }
  // Continuing needs no new input.
  EXPECT_EQ(Parse(R"({"previous_response_id": "resp_1"})", store).chat().messages.size(), 2u);
}

TEST(ResponsesRequest, FunctionToolsAndToolChoiceBecomeTheChats) {
  ResponseStore store;
  Parsed p = Parse(R"({"input": "x", "tools": [{"type": "function", "name": "get_weather",
      "description": "d", "parameters": {"type": "object", "properties": {"c": {"type": "string"}}},
      "strict": true}], "tool_choice": {"type": "function", "name": "get_weather"}})",
                   store);
  const worker::ChatPayload& chat = p.chat();
  ASSERT_EQ(chat.tools.size(), 1u);
  EXPECT_EQ(chat.tools[0].name, "get_weather");
  EXPECT_TRUE(chat.tools[0].strict);
  // The template sees the chat's tool shape.
  const json def = json::parse(chat.tools[0].definition);
  EXPECT_EQ(def["type"], "function");
  EXPECT_EQ(def["function"]["name"], "get_weather");
  EXPECT_EQ(def["function"]["parameters"]["properties"]["c"]["type"], "string");
  EXPECT_EQ(chat.tool_choice.mode, worker::ToolChoiceMode::kFunction);
  EXPECT_EQ(chat.tool_choice.function, "get_weather");
  const json& echo = p.ok().context.echo;
  EXPECT_EQ(echo["tools"][0]["name"], "get_weather");
  EXPECT_EQ(echo["tools"][0]["strict"], true);
  EXPECT_EQ(echo["tool_choice"], json({{"type", "function"}, {"name", "get_weather"}}));
  EXPECT_EQ(Parse(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                      "tool_choice": "required"})",
                  store)
                .chat()
                .tool_choice.mode,
            worker::ToolChoiceMode::kRequired);
}

TEST(ResponsesRequest, TextFormatCompilesAsTheChatsResponseFormat) {
  ResponseStore store;
  Parsed schema = Parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}}})",
                        store);
  EXPECT_EQ(schema.chat().options.response_format.kind, worker::ResponseFormatKind::kJsonSchema);
  EXPECT_EQ(json::parse(schema.chat().options.response_format.schema)["properties"]["a"]["type"],
            "integer");
  EXPECT_EQ(schema.ok().context.echo["text"]["format"]["name"], "n");
  EXPECT_EQ(Parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})", store)
                .chat()
                .options.response_format.kind,
            worker::ResponseFormatKind::kJsonObject);
  EXPECT_EQ(Parse(R"({"input": "x", "text": {"format": {"type": "text"}}})", store)
                .chat()
                .options.response_format.kind,
            worker::ResponseFormatKind::kText);
}

TEST(ResponsesRequest, BadAndUnsupportedFieldsAreNamed) {
  ResponseStore store;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"input": "x", "reasoning": {"effort": "low"}})", "reasoning"},
      {R"({"input": "x", "conversation": "c"})", "conversation"},
      {R"({"input": "x", "frobnicate": 1})", "frobnicate"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "include": ["reasoning.encrypted_content"]})", "include"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"role": "user"}]})", "input[0].content"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "input[0].content[0].type"},
      {R"({"input": [{"role": "user", "content": "x", "name": "n"}]})", "input[0].name"},
      {R"({"input": [{"type": "reasoning", "summary": []}]})", "input[0].type"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0]"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": "o"}]})",
       "input[0].call_id"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "temperature": "hot"})", "temperature"},
      {R"({"input": "x", "temperature": 9})", "temperature"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"input": "x", "store": "yes"})", "store"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "bad name"}]})", "tools[0].name"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "extra": 1}]})",
       "tools[0].extra"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "strict": true,
          "parameters": {"type": "string", "format": "email"}}], "tool_choice": "required"})",
       "tools[0].parameters"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
          "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice"},
      {R"({"input": "x", "tool_choice": {"type": "allowed_tools", "tools": []}})", "tool_choice"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
          "parallel_tool_calls": false})",
       "parallel_tool_calls"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
          "text": {"format": {"type": "json_object"}}})",
       "text.format"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})",
       "text.format.name"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
          "schema": {"type": "string", "format": "email"}}}})",
       "text.format.schema"},
      {R"({"input": "x", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format"},
  };
  for (const auto& [body, param] : cases) {
    ApiError e = Parse(body, store).error();
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << " -> " << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(param.substr(0, param.find_first_of(".["))), std::string::npos)
        << body << " -> " << e.message;
  }
  // Their default values are accepted.
  Parse(R"({"input": "x", "background": false, "include": [], "truncation": "disabled",
            "parallel_tool_calls": true, "reasoning": null})",
        store)
      .ok();
}

// ---- the wire

using Frame = test::ParsedSseEvent;

std::vector<Frame> Frames(const std::string& sse) {
  return test::ParseSseEvents(sse);
}

ResponseMeta Meta() {
  ResponseMeta meta;
  meta.id = "resp_req-1";
  meta.model = "m";
  meta.created = 1700000000;
  return meta;
}

JobOutcome Outcome(worker::FinishReason finish, int64_t prompt, int64_t completion) {
  JobOutcome outcome;
  outcome.done = worker::DoneMessage{};
  outcome.done->finish_reason = finish;
  outcome.done->prompt_tokens = prompt;
  outcome.done->completion_tokens = completion;
  return outcome;
}

ResponsesContext Context(bool store) {
  ResponsesContext c;
  c.echo = {{"instructions", nullptr}, {"tools", json::array()}};
  c.conversation = {{"user", "Hi", "", "", ""}};
  c.store = store;
  return c;
}

TEST(ResponsesWire, StreamEventsInOrderWithSequenceNumbers) {
  auto store = std::make_shared<ResponseStore>();
  auto wire = MakeResponsesWire(Context(true), store, "a");
  const ResponseMeta meta = Meta();
  std::string sse = wire->StreamBegin(meta, JobOutcome{});
  worker::DeltaMessage text;
  text.text = "Hel";
  sse += wire->StreamDelta(meta, text);
  text.text = "lo";
  sse += wire->StreamDelta(meta, text);
  worker::DeltaMessage call;
  call.tool_calls = {{0, "call_1", "f", "{\"a\""}};
  sse += wire->StreamDelta(meta, call);
  call.tool_calls = {{0, "", "", ":1}"}};
  sse += wire->StreamDelta(meta, call);
  sse += wire->StreamEnd(meta, Outcome(worker::FinishReason::kToolCalls, 10, 5), json::object());
  const std::vector<Frame> frames = Frames(sse);
  std::vector<std::string> names;
  for (size_t i = 0; i < frames.size(); ++i) {
    names.push_back(frames[i].name);
    EXPECT_EQ(frames[i].data["type"], frames[i].name);
    EXPECT_EQ(frames[i].data["sequence_number"], i);
  }
  EXPECT_EQ(
      names,
      (std::vector<std::string>{
          "response.created", "response.in_progress", "response.output_item.added",
          "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
          "response.output_text.done", "response.content_part.done", "response.output_item.done",
          "response.output_item.added", "response.function_call_arguments.delta",
          "response.function_call_arguments.delta", "response.function_call_arguments.done",
          "response.output_item.done", "response.completed"}));
  EXPECT_EQ(frames[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(frames[0].data["response"]["output"], json::array());
  EXPECT_EQ(frames[2].data["item"]["content"], json::array());
  EXPECT_EQ(frames[6].data["text"], "Hello");
  EXPECT_EQ(frames[9].data["output_index"], 1);
  EXPECT_EQ(frames[9].data["item"]["arguments"], "");
  EXPECT_EQ(frames[12].data["arguments"], "{\"a\":1}");
  const json& done = frames.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["id"], "resp_req-1");
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["id"], "msg_req-1");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][1]["id"], "fc_req-1_1");
  EXPECT_EQ(done["output"][1]["call_id"], "call_1");
  EXPECT_EQ(done["output"][1]["status"], "completed");
  EXPECT_EQ(done["usage"]["input_tokens"], 10);
  EXPECT_EQ(done["usage"]["total_tokens"], 15);
  // Kept: the response as streamed, and the conversation with its reply (text and call).
  auto kept = store->Get("a", "resp_req-1");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->response, done);
  ASSERT_EQ(kept->conversation.size(), 2u);
  EXPECT_EQ(kept->conversation[1].role, "assistant");
  EXPECT_EQ(kept->conversation[1].content, "Hello");
  EXPECT_EQ(json::parse(kept->conversation[1].tool_calls)[0]["id"], "call_1");
}

TEST(ResponsesWire, ACutShortStreamEndsIncompleteAndAnEmptyOneHasAMessage) {
  auto store = std::make_shared<ResponseStore>();
  auto wire = MakeResponsesWire(Context(false), store, "a");
  const ResponseMeta meta = Meta();
  std::string sse = wire->StreamBegin(meta, JobOutcome{});
  sse += wire->StreamEnd(meta, Outcome(worker::FinishReason::kLength, 3, 0), json::object());
  const std::vector<Frame> frames = Frames(sse);
  ASSERT_EQ(frames.size(), 8u);
  EXPECT_EQ(frames[2].name, "response.output_item.added");
  EXPECT_EQ(frames[6].data["item"]["status"], "incomplete");
  EXPECT_EQ(frames[7].name, "response.incomplete");
  EXPECT_EQ(frames[7].data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(store->size(), 0u);  // store: false
}

TEST(ResponsesWire, AFailureAfterTheStartIsAnErrorThenResponseFailed) {
  auto wire = MakeResponsesWire(Context(true), std::make_shared<ResponseStore>(), "a");
  const ResponseMeta meta = Meta();
  std::string sse = wire->StreamBegin(meta, JobOutcome{});
  worker::DeltaMessage text;
  text.text = "x";
  sse += wire->StreamDelta(meta, text);
  JobOutcome so_far;
  so_far.started = worker::StartedMessage{};
  so_far.started->prompt_tokens = 4;
  so_far.completion_tokens_so_far = 1;
  sse += wire->StreamError({{"error",
                             {{"message", "the worker stopped"},
                              {"type", "server_error"},
                              {"param", nullptr},
                              {"code", "worker_crashed"}}}},
                           so_far);
  const std::vector<Frame> frames = Frames(sse);
  ASSERT_GE(frames.size(), 2u);
  const Frame& error = frames[frames.size() - 2];
  const Frame& failed = frames.back();
  EXPECT_EQ(error.name, "error");
  EXPECT_EQ(error.data["code"], "worker_crashed");
  EXPECT_EQ(error.data["message"], "the worker stopped");
  EXPECT_EQ(failed.name, "response.failed");
  EXPECT_EQ(failed.data["sequence_number"], frames.size() - 1);
  EXPECT_EQ(failed.data["response"]["status"], "failed");
  EXPECT_EQ(failed.data["response"]["error"]["code"], "server_error");
  EXPECT_EQ(failed.data["response"]["usage"]["input_tokens"], 4);
  EXPECT_EQ(failed.data["response"]["usage"]["output_tokens"], 1);
  EXPECT_FALSE(MakeResponsesWire(Context(true), std::make_shared<ResponseStore>(), "a")
                   ->errors_carry_usage());
  EXPECT_EQ(failed.data["response"]["output"][0]["content"][0]["text"], "x");
}

TEST(ResponsesWire, WholeAnswerItemsAndStatus) {
  auto store = std::make_shared<ResponseStore>();
  JobOutcome outcome = Outcome(worker::FinishReason::kToolCalls, 8, 4);
  outcome.choices[0].text = "";
  outcome.choices[0].tool_calls = {{0, "call_a", "f", "{}"}, {1, "call_b", "g", "{\"x\":2}"}};
  json body = MakeResponsesWire(Context(true), store, "a")->Body(Meta(), outcome, json::object());
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["incomplete_details"], nullptr);
  ASSERT_EQ(body["output"].size(), 2u);  // no empty message beside the calls
  EXPECT_EQ(body["output"][0]["type"], "function_call");
  EXPECT_EQ(body["output"][1]["call_id"], "call_b");
  EXPECT_EQ(body["output"][1]["arguments"], "{\"x\":2}");
  EXPECT_NE(store->Get("a", "resp_req-1"), nullptr);
  JobOutcome cut = Outcome(worker::FinishReason::kLength, 8, 4);
  cut.choices[0].text = "abcd";
  json partial = MakeResponsesWire(Context(true), store, "a")->Body(Meta(), cut, json::object());
  EXPECT_EQ(partial["status"], "incomplete");
  EXPECT_EQ(partial["output"][0]["status"], "incomplete");
  EXPECT_EQ(partial["output"][0]["content"][0]["text"], "abcd");
  EXPECT_EQ(partial["incomplete_details"]["reason"], "max_output_tokens");
}

}  // namespace
}  // namespace tessera::server
