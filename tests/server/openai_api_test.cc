#include "server/openai_api.h"

#include <gtest/gtest.h>

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
                        {"n", 2},
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
  ASSERT_TRUE(std::holds_alternative<JobRequest>(t));
  EXPECT_FALSE(std::get<JobRequest>(t).add_special_tokens);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseDetokenizeRequest({{"tokens", {1, -1}}}, "d")));
}

}  // namespace
}  // namespace tessera::server
