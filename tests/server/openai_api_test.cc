#include "server/openai_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_service_internal.h"
#include "server/decision_format.h"
#include "server/generation_wire.h"
#include "server/json_fields.h"

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
  const auto& chat = std::get<worker::ChatPayload>(g.job.payload);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[1].content, "ab");
  EXPECT_EQ(g.options().max_tokens, 5);
  EXPECT_EQ(g.options().stop, std::vector<std::string>{"X"});
  EXPECT_EQ(g.options().sampling.temperature, 0.5);
  EXPECT_EQ(g.options().sampling.top_k, 3);
  EXPECT_EQ(g.options().top_logprobs, 2);
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
}

TEST(OpenAiApi, DefaultModelWhenOmitted) {
  auto r = Chat({{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  EXPECT_EQ(std::get<GenerationRequest>(r).job.model, "default");
}

// cache_salt reaches the job's cache scope (the HTTP side adds the key's name at admission);
// an empty, non-string or over-long one is a 400 naming it.
TEST(OpenAiApi, CacheSaltReachesTheJobsScope) {
  const json messages = {{{"role", "user"}, {"content", "x"}}};
  auto r = Chat({{"messages", messages}, {"cache_salt", "tenant-7"}});
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  EXPECT_EQ(std::get<GenerationRequest>(r).job.cache_scope, (CacheScope{"", "tenant-7"}));
  auto c = ParseCompletionRequest({{"prompt", "x"}, {"cache_salt", "s"}}, "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(c));
  EXPECT_EQ(std::get<GenerationRequest>(c).job.cache_scope.salt, "s");
  EXPECT_EQ(std::get<GenerationRequest>(Chat({{"messages", messages}, {"cache_salt", nullptr}}))
                .job.cache_scope,
            CacheScope{});
  for (const json& bad : {json(""), json(5), json::array({"a"}), json(std::string(257, 's'))}) {
    for (auto parsed : {Chat({{"messages", messages}, {"cache_salt", bad}}),
                        ParseCompletionRequest({{"prompt", "x"}, {"cache_salt", bad}}, "m")}) {
      ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << bad.dump();
      EXPECT_EQ(std::get<ApiError>(parsed).status, 400);
      EXPECT_EQ(std::get<ApiError>(parsed).param, "cache_salt");
    }
  }
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

// One refusal of unknown fields for every API: the first non-null unknown member, named with
// its path in the body; null members are absent.
TEST(JsonFields, RefuseUnknownFieldsNamesTheMemberAndItsPath) {
  const nlohmann::ordered_json part = {{"type", "text"}, {"cache", 1}, {"x", nullptr}};
  EXPECT_FALSE(RefuseUnknownFields(part, {"type", "cache"}).has_value());
  std::optional<ApiError> e = RefuseUnknownFields(part, {"type"}, "input[2]", "in this item");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "input[2].cache");
  EXPECT_EQ(e->message, "input[2].cache is not supported in this item; remove it");
  e = RefuseUnknownFields(part, {"type"});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "cache");
  EXPECT_EQ(e->message, "cache is not supported by this server; remove it");
}

TEST(OpenAiApi, RefusesBothTokenLimits) {
  // max_tokens is max_completion_tokens' older name: with both, which one counts is a guess.
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"max_tokens", 5},
               {"max_completion_tokens", 6}};
  auto r = Chat(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "max_tokens");
  EXPECT_NE(std::get<ApiError>(r).message.find("not both"), std::string::npos);
  body.erase("max_completion_tokens");
  EXPECT_TRUE(std::holds_alternative<GenerationRequest>(Chat(body)));
}

TEST(OpenAiApi, ToolCallArgumentsWithinTheBodyLimits) {
  // Arguments are JSON inside a string, which the chat template parses: the body's limits hold
  // there too, and a text that is not JSON stays a string.
  auto with_arguments = [](const std::string& arguments) {
    json call = {{"id", "c1"},
                 {"type", "function"},
                 {"function", {{"name", "f"}, {"arguments", arguments}}}};
    return Chat({{"messages",
                  {{{"role", "user"}, {"content", "x"}},
                   {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}}}}});
  };
  EXPECT_TRUE(std::holds_alternative<GenerationRequest>(with_arguments("{\"a\": 1}")));
  EXPECT_TRUE(std::holds_alternative<GenerationRequest>(with_arguments("not json")));
  std::string wide = "{";
  for (size_t i = 0; i <= kMaxJsonObjectMembers; ++i)
    wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  auto r = with_arguments(wide + "}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "messages[1].tool_calls[0].function.arguments");
  auto deep = with_arguments(std::string(40, '[') + std::string(40, ']'));
  ASSERT_TRUE(std::holds_alternative<ApiError>(deep));
  EXPECT_NE(std::get<ApiError>(deep).message.find("nested deeper than 32"), std::string::npos);
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
  // Members per object: at the limit parsed, one more refused with the limit named.
  auto object_of = [](size_t members) {
    std::string text = "{\"messages\": [], \"metadata\": {";
    for (size_t i = 0; i < members; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    return text + "}}";
  };
  EXPECT_TRUE(std::holds_alternative<nlohmann::ordered_json>(
      ParseJsonBody(object_of(kMaxJsonObjectMembers))));
  auto wide = ParseJsonBody(object_of(kMaxJsonObjectMembers + 1));
  ASSERT_TRUE(std::holds_alternative<ApiError>(wide));
  EXPECT_EQ(
      std::get<ApiError>(wide).message,
      "the body has an object of more than " + std::to_string(kMaxJsonObjectMembers) + " members");
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
  EXPECT_EQ(std::get<GenerationRequest>(c).options().top_logprobs, 3);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseCompletionRequest({{"prompt", 5}}, "d")));
  auto t = ParseTokenizeRequest({{"prompt", "x"}, {"add_special_tokens", false}}, "d");
  ASSERT_TRUE(std::holds_alternative<worker::JobRequest>(t));
  EXPECT_FALSE(std::get<worker::TokenizePayload>(std::get<worker::JobRequest>(t).payload)
                   .add_special_tokens);
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
  const auto& job = std::get<worker::ChatPayload>(std::get<GenerationRequest>(r).job.payload);
  EXPECT_EQ(job.tool_choice.mode, worker::ToolChoiceMode::kFunction);
  EXPECT_EQ(job.tool_choice.function, "get_weather");
  ASSERT_EQ(job.tools.size(), 1u);
  EXPECT_EQ(job.tools[0].name, "get_weather");
  EXPECT_FALSE(job.tools[0].strict);
  EXPECT_EQ(json::parse(job.tools[0].definition), Weather());  // as the client wrote it
  auto plain = ParseChatRequest(json{{"messages", UserMessages()}}, "m");
  EXPECT_EQ(std::get<worker::ChatPayload>(std::get<GenerationRequest>(plain).job.payload)
                .tool_choice.mode,
            worker::ToolChoiceMode::kNone);
}

TEST(OpenAiFields, BadToolsNameTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  json bad_name = Weather();
  bad_name["function"]["name"] = "has space";
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

// tool_choice travels typed, so a function may be named like one of its values.
TEST(OpenAiFields, AFunctionNamedLikeAToolChoiceValueIsItsOwn) {
  json named_auto = Weather();
  named_auto["function"]["name"] = "auto";
  auto r = ParseChatRequest(
      json{{"messages", UserMessages()},
           {"tools", json::array({Weather(), named_auto})},
           {"tool_choice", {{"type", "function"}, {"function", {{"name", "auto"}}}}}},
      "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const auto& chat = std::get<worker::ChatPayload>(std::get<GenerationRequest>(r).job.payload);
  EXPECT_EQ(chat.tool_choice.mode, worker::ToolChoiceMode::kFunction);
  EXPECT_EQ(chat.tool_choice.function, "auto");
}

TEST(OpenAiFields, StrictToolsUnderAutoAndLogitBiasAreAccepted) {
  json body = {{"messages", UserMessages()},
               {"tools", json::array({Weather(true)})},
               {"logit_bias", {{"151657", 100}, {"3", -2.5}}}};
  auto r = ParseChatRequest(body, "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r));
  const auto& job = std::get<worker::ChatPayload>(std::get<GenerationRequest>(r).job.payload);
  EXPECT_EQ(job.tool_choice.mode, worker::ToolChoiceMode::kAuto);
  ASSERT_EQ(job.tools.size(), 1u);
  EXPECT_TRUE(job.tools[0].strict);
  ASSERT_EQ(job.options.logit_bias.size(), 2u);
  EXPECT_EQ(job.options.logit_bias[0], (std::pair<int32_t, double>{151657, 100.0}));
  EXPECT_EQ(job.options.logit_bias[1], (std::pair<int32_t, double>{3, -2.5}));
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
  const auto& job = std::get<worker::ChatPayload>(std::get<GenerationRequest>(r).job.payload);
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
  const api_internal::InputFieldNames chat = api_internal::InputFieldOf(worker::ChatPayload{}, "");
  const ApiError refused = api_internal::FromJobError(
      worker::JobErrorMessage{5, worker::JobErrorKind::kInvalidRequest, "tools: bad: worse", 0,
                              "tools[0].function"},
      chat);
  EXPECT_EQ(refused.param, "tools[0].function");
  EXPECT_EQ(api_internal::FromJobError(
                worker::JobErrorMessage{5, worker::JobErrorKind::kInvalidRequest, "n: no", 0}, chat)
                .param,
            "");
  // The engine being busy (the NPU queue full or timed out) is 503 engine_busy.
  const ApiError busy = api_internal::FromJobError(
      worker::JobErrorMessage{5, worker::JobErrorKind::kEngineBusy, "NPU queue: full", 0}, chat);
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.code, "engine_busy");
}

// OpenAI's chat and completion errors carry the usage so far (the other APIs' shapes do not).
TEST(OpenAiApi, ChatAndCompletionErrorsCarryUsage) {
  EXPECT_TRUE(MakeOpenAIChatWire(false)->errors_carry_usage());
  EXPECT_TRUE(MakeOpenAITextWire(true)->errors_carry_usage());
}

// A refusal of the job's input names the request field the client sent it in: the payload's
// own name unless the request was read from another (Responses' and the decisions API's input).
TEST(OpenAiApi, JobErrorNamesTheInputAsTheClientsApiDoes) {
  using api_internal::FromJobError;
  using api_internal::InputFieldOf;
  const worker::JobErrorMessage too_long{5, worker::JobErrorKind::kContextLength, "too long", 9};
  EXPECT_EQ(FromJobError(too_long, InputFieldOf(worker::ChatPayload{}, "")).param, "messages");
  EXPECT_EQ(FromJobError(too_long, InputFieldOf(worker::CompletionPayload{}, "")).param, "prompt");
  EXPECT_EQ(FromJobError(too_long, InputFieldOf(worker::ChatPayload{}, "input")).param, "input");
  EXPECT_EQ(FromJobError(too_long, InputFieldOf(worker::EmbedPayload{}, "prompt")).param, "prompt");
  // System One's state, as the decisions API calls it; other fields keep their names.
  const worker::JobErrorMessage state{5, worker::JobErrorKind::kContextLength, "state: long", 9,
                                      "state"};
  EXPECT_EQ(FromJobError(state, InputFieldOf(worker::SystemOnePayload{}, "")).param, "state");
  EXPECT_EQ(FromJobError(state, InputFieldOf(worker::SystemOnePayload{}, "input")).param, "input");
  const worker::JobErrorMessage questions{5, worker::JobErrorKind::kInvalidRequest, "none", 0,
                                          "questions"};
  EXPECT_EQ(FromJobError(questions, InputFieldOf(worker::SystemOnePayload{}, "input")).param,
            "questions");
}

// Which response_formats are decisions (scored by the worker) and which are generated.
TEST(OpenAiApi, DecisionShapesAreRecognisedInTheHttpProcess) {
  auto decision = [](const std::string& schema) {
    return DecisionFormat(nlohmann::ordered_json::parse(
        R"({"type": "json_schema", "json_schema": {"name": "d", "schema": )" + schema + "}}"));
  };
  auto d = decision(R"({"type": "string", "enum": ["a", 2], "description": "q"})");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, worker::ResponseFormatKind::kDecision);
  ASSERT_EQ(d->options.size(), 2u);
  EXPECT_EQ(d->options[0].value, "\"a\"");  // the value as JSON
  EXPECT_EQ(d->options[0].text, "a");       // what is scored
  EXPECT_EQ(d->options[1].value, "2");
  EXPECT_EQ(d->question, "q");
  d = decision(R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                   "required": ["ok"], "additionalProperties": false, "description": "fine?"})");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->property, "ok");
  EXPECT_EQ(d->question, "fine?");
  ASSERT_EQ(d->options.size(), 2u);
  EXPECT_EQ(d->options[0].text, "true");
  d = decision(R"({"anyOf": [{"const": "a", "description": "first"}, {"const": "b"}]})");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->options[0].description, "first");
  EXPECT_FALSE(decision(R"({"type": "string"})"));                    // free text: generated
  EXPECT_FALSE(decision(R"({"enum": ["a", "b"], "minLength": 1})"));  // more than a choice
  EXPECT_FALSE(decision(R"({"type": "object", "properties": {"a": {"type": "boolean"},
                                                          "b": {"type": "boolean"}}})"));
  EXPECT_FALSE(decision(R"({"enum": [{"x": 1}, "b"]})"));
  EXPECT_FALSE(DecisionFormat(nlohmann::ordered_json::parse(R"({"type": "json_object"})")));
}

// A chat's decision-shaped response_format crosses as a decision; a completion's is generated.
TEST(OpenAiApi, OnlyAChatAsksForADecision) {
  const json format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "d"}, {"schema", {{"enum", {"x", "y"}}}}}}};
  auto chat =
      Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"response_format", format}});
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(chat));
  EXPECT_EQ(std::get<GenerationRequest>(chat).options().response_format.kind,
            worker::ResponseFormatKind::kDecision);
  auto completion = ParseCompletionRequest(
      nlohmann::ordered_json::parse(json{{"prompt", "hi"}, {"response_format", format}}.dump()),
      "m");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(completion));
  const auto& rf = std::get<GenerationRequest>(completion).options().response_format;
  EXPECT_EQ(rf.kind, worker::ResponseFormatKind::kJsonSchema);
  EXPECT_EQ(nlohmann::json::parse(rf.schema), json({{"enum", {"x", "y"}}}));
}

}  // namespace
}  // namespace tessera::server
