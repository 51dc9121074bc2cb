#include "server/openai_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_service_internal.h"

namespace tessera::server {
namespace {

using nlohmann::json;

std::variant<GenerationRequest, ApiError> Chat(const json& body) {
  return ParseChatRequest(body, "default");
}

TEST(OpenAiApi, ChatRequestFields) {
  auto r = Chat(
      {{"model", "m"},
       {"messages",
        {{{"role", "system"}, {"content", "s"}},
         {{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}},
       {"max_completion_tokens", 5},
       {"stop", "X"},
       {"temperature", 0.5},
       {"top_k", 3},
       {"seed", 9},
       {"logprobs", true},
       {"top_logprobs", 2},
       {"stream", true},
       {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const GenerationRequest& g = std::get<GenerationRequest>(r);
  EXPECT_EQ(g.job.model, "m");
  ASSERT_EQ(g.job.messages.size(), 2u);
  EXPECT_EQ(g.job.messages[1].content, "ab");
  EXPECT_EQ(g.job.max_tokens, 5);
  EXPECT_EQ(g.job.stop, std::vector<std::string>{"X"});
  EXPECT_EQ(g.job.sampling.temperature, 0.5);
  EXPECT_EQ(g.job.sampling.top_k, 3);
  EXPECT_EQ(g.job.top_logprobs, 2);
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
}

TEST(OpenAiApi, DefaultModelWhenOmitted) {
  auto r = Chat({{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  EXPECT_EQ(std::get<GenerationRequest>(r).job.model, "default");
}

// Each out-of-range or ill-typed field is a 400 naming that field.
TEST(OpenAiApi, BadFieldsNameTheField) {
  const json messages = {{{"role", "user"}, {"content", "x"}}};
  struct Case {
    const char* field;
    json value;
  };
  const Case cases[] = {{"temperature", 2.5},
                        {"temperature", "hot"},
                        {"top_p", 0.0},
                        {"top_p", 1.5},
                        {"top_k", -1},
                        {"top_k", 1.5},
                        {"min_p", 1.5},
                        {"repetition_penalty", 0.0},
                        {"presence_penalty", 3.0},
                        {"frequency_penalty", -2.5},
                        {"seed", -1},
                        {"top_logprobs", 21},
                        {"n", 17},
                        {"n", 0},
                        {"user", "u"},
                        {"logit_bias", json::array()},
                        {"logit_bias", json::object({{"abc", 1}})},
                        {"logit_bias", json::object({{"-3", 1}})},
                        {"logit_bias", json::object({{"5", 100.5}})},
                        {"logit_bias", json::object({{"5", "1"}})},
                        {"tool_choice", "required"},
                        {"response_format", json::object({{"type", "xml"}})},
                        {"max_tokens", 0},
                        {"stop", json::array({"a", "b", "c", "d", "e"})},
                        {"stream", "yes"}};
  for (const Case& c : cases) {
    json body = {{"messages", messages}, {c.field, c.value}};
    if (std::string(c.field) == "top_logprobs") body["logprobs"] = true;
    auto r = Chat(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << c.field << " " << c.value.dump();
    const ApiError& e = std::get<ApiError>(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.field) << e.message;
    EXPECT_NE(e.message.find(c.field), std::string::npos) << e.message;
  }
}

TEST(OpenAiApi, BadMessages) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(Chat({{"messages", json::array()}})));
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      Chat({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}})));
  auto r = Chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "messages[0].content");
}

TEST(OpenAiApi, JsonBodyLimits) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseJsonBody("{\"a\": ")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseJsonBody("[1]")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      ParseJsonBody(std::string(100, '[') + std::string(100, ']'))));
  EXPECT_TRUE(std::holds_alternative<nlohmann::ordered_json>(ParseJsonBody("{\"a\": [1]}")));
}

TEST(OpenAiApi, ErrorShape) {
  ApiError e = InvalidField("top_p", "top_p must be ...");
  json body = ErrorBody(e);
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "top_p");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_EQ(body["error"]["message"], "top_p must be ...");
}

TEST(OpenAiApi, CompletionAndTokenizeRequests) {
  auto c = ParseCompletionRequest({{"prompt", "Once"}, {"logprobs", 3}}, "d");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(c));
  EXPECT_EQ(std::get<GenerationRequest>(c).job.top_logprobs, 3);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseCompletionRequest({{"prompt", 5}}, "d")));
  auto t = ParseTokenizeRequest({{"prompt", "x"}, {"add_special_tokens", false}}, "d");
  ASSERT_TRUE(std::holds_alternative<worker::JobRequest>(t));
  EXPECT_FALSE(std::get<worker::JobRequest>(t).add_special_tokens);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseDetokenizeRequest({{"tokens", {1, -1}}}, "d")));
}

}  // namespace
}  // namespace tessera::server

namespace tessera::server {
namespace {

json Weather(bool strict = false) {
  json params = {{"type", "object"},
                 {"properties", {{"city", {{"type", "string"}}}}},
                 {"required", json::array({"city"})}};
  json fn = {{"name", "get_weather"}, {"parameters", params}};
  if (strict) fn["strict"] = true;
  return {{"type", "function"}, {"function", fn}};
}

json UserMessages() {
  return json::array({{{"role", "user"}, {"content", "hi"}}});
}

TEST(OpenAiFields, ToolsAndToolChoiceReachTheJob) {
  auto r = ParseChatRequest(
      json{{"messages", UserMessages()},
           {"tools", json::array({Weather()})},
           {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
      "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const worker::JobRequest& job = std::get<GenerationRequest>(r).job;
  EXPECT_EQ(job.tool_choice, "get_weather");
  EXPECT_NE(job.tools.find("get_weather"), std::string::npos);
  auto plain = ParseChatRequest(json{{"messages", UserMessages()}}, "m");
  EXPECT_EQ(std::get<GenerationRequest>(plain).job.tool_choice, "none");
}

TEST(OpenAiFields, BadToolsNameTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  json bad_name = Weather();
  bad_name["function"]["name"] = "has space";
  // A function named like a tool_choice value could not be told from it.
  auto log_event_named = [](const char* name) {
    json t = Weather();
    t["function"]["name"] = name;
    return t;
  };
  // A schema the constrained decoder cannot enforce, named where it would have to be:
  // strict, or a candidate under required or a named choice.
  json bad_schema = Weather();
  bad_schema["function"]["name"] = "log_event";
  bad_schema["function"]["parameters"] = {{"type", "object"},
                                          {"patternProperties", json::object()}};
  json bad_strict = bad_schema;
  bad_strict["function"]["strict"] = true;
  const json log_event = {{"type", "function"}, {"function", {{"name", "log_event"}}}};
  const std::vector<Case> cases = {
      {{{"tools", "x"}}, "tools"},
      {{{"tools", json::array({bad_name})}}, "tools[0].function.name"},
      {{{"tools", json::array({Weather(), log_event_named("auto")})}}, "tools[1].function.name"},
      {{{"tools", json::array({log_event_named("required")})}}, "tools[0].function.name"},
      {{{"tools", json::array({Weather(), Weather()})}}, "tools[1].function.name"},
      {{{"tools", json::array({bad_strict})}}, "tools[0].function.parameters"},
      {{{"tools", json::array({Weather(), bad_schema})}, {"tool_choice", "required"}},
       "tools[1].function.parameters"},
      {{{"tools", json::array({Weather(), bad_schema})}, {"tool_choice", log_event}},
       "tools[1].function.parameters"},
      {{{"tools", json::array({Weather(true)})}, {"tools_extra", 1}}, "tools_extra"},
      {{{"tools", json::array({Weather()})}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tools", json::array({Weather()})},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}}},
       "tool_choice"},
      {{{"tool_choice", "auto"}}, "tool_choice"},  // no tools
      {{{"parallel_tool_calls", false}}, "parallel_tool_calls"},
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema",
           {{"name", "x"}, {"schema", {{"type", "object"}, {"allOf", json::array()}}}}}}}},
       "response_format.json_schema.schema"},
  };
  for (const Case& c : cases) {
    json body = {{"messages", UserMessages()}};
    body.update(c.extra);
    auto r = ParseChatRequest(body, "m");
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
    EXPECT_EQ(std::get<ApiError>(r).param, c.param) << body.dump();
  }
}

// Under auto a non-strict function's schema is rendered for the model and promises nothing,
// so a keyword the constrained decoder does not support is no reason for a 400 ("format" is
// common in real tools); nor is it under a named choice of another function.
TEST(OpenAiFields, UnenforceableSchemasOfUnconstrainedFunctionsAreAccepted) {
  json loose = Weather();
  loose["function"]["name"] = "log_event";
  loose["function"]["parameters"]["properties"]["when"] = {{"type", "string"},
                                                           {"format", "date-time"}};
  const json choose_weather = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  for (const json& extra :
       {json{{"tools", json::array({loose})}}, json{{"tools", json::array({Weather(true), loose})}},
        json{{"tools", json::array({Weather(), loose})}, {"tool_choice", choose_weather}},
        json{{"tools", json::array({loose})}, {"tool_choice", "none"}}}) {
    json body = {{"messages", UserMessages()}};
    body.update(extra);
    auto r = ParseChatRequest(body, "m");
    ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r))
        << body.dump() << ": " << std::get<ApiError>(r).message;
  }
}

TEST(OpenAiFields, StrictToolsUnderAutoAndLogitBiasAreAccepted) {
  json body = {{"messages", UserMessages()},
               {"tools", json::array({Weather(true)})},
               {"logit_bias", {{"151657", 100}, {"3", -2.5}}}};
  auto r = ParseChatRequest(body, "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  const worker::JobRequest& job = std::get<GenerationRequest>(r).job;
  EXPECT_EQ(job.tool_choice, "auto");
  ASSERT_EQ(job.logit_bias.size(), 2u);
  EXPECT_EQ(job.logit_bias[0], (std::pair<int32_t, double>{151657, 100.0}));
  EXPECT_EQ(job.logit_bias[1], (std::pair<int32_t, double>{3, -2.5}));
}

TEST(OpenAiFields, ToolMessagesAndAssistantCalls) {
  json messages = json::array(
      {{{"role", "user"}, {"content", "weather?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         json::array(
             {{{"id", "call_1"},
               {"type", "function"},
               {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"P\"}"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21C"}}});
  auto r = ParseChatRequest(json{{"messages", messages}, {"tools", json::array({Weather()})}}, "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const worker::JobRequest& job = std::get<GenerationRequest>(r).job;
  ASSERT_EQ(job.messages.size(), 3u);
  EXPECT_NE(job.messages[1].tool_calls.find("call_1"), std::string::npos);
  EXPECT_EQ(job.messages[2].tool_call_id, "call_1");
  // A tool message without its call id, and an unknown message field.
  messages[2].erase("tool_call_id");
  auto missing = ParseChatRequest(json{{"messages", messages}}, "m");
  ASSERT_TRUE(std::holds_alternative<ApiError>(missing));
  EXPECT_EQ(std::get<ApiError>(missing).param, "messages[2].tool_call_id");
  auto unknown = ParseChatRequest(
      json{{"messages", json::array({{{"role", "user"}, {"content", "x"}, {"audio", 1}}})}}, "m");
  ASSERT_TRUE(std::holds_alternative<ApiError>(unknown));
  EXPECT_EQ(std::get<ApiError>(unknown).param, "messages[0].audio");
  // Arguments whose JSON nests past the body's own limit (which does not look inside strings).
  messages[2]["tool_call_id"] = "call_1";
  messages[1]["tool_calls"][0]["function"]["arguments"] =
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto deep = ParseChatRequest(json{{"messages", messages}}, "m");
  ASSERT_TRUE(std::holds_alternative<ApiError>(deep));
  EXPECT_EQ(std::get<ApiError>(deep).param, "messages[1].tool_calls[0].function.arguments");
  EXPECT_NE(std::get<ApiError>(deep).message.find("deeper than"), std::string::npos);
}

// A worker refusal's param is the field it travels with, whatever its message says.
TEST(OpenAiApi, JobErrorParamIsItsFieldNotItsMessage) {
  const ApiError refused = api_internal::FromJobError(
      worker::JobErrorMessage{5, worker::JobErrorKind::kInvalidRequest, "tools: bad: worse", 0,
                              "tools[0].function"},
      true);
  EXPECT_EQ(refused.param, "tools[0].function");
  EXPECT_EQ(api_internal::FromJobError(
                worker::JobErrorMessage{5, worker::JobErrorKind::kInvalidRequest, "n: no", 0}, true)
                .param,
            "");
  // The engine being busy (the NPU queue full or timed out) is 503 engine_busy.
  const ApiError busy = api_internal::FromJobError(
      worker::JobErrorMessage{5, worker::JobErrorKind::kEngineBusy, "NPU queue: full", 0}, false);
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.code, "engine_busy");
}

}  // namespace
}  // namespace tessera::server
