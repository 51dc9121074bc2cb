// The schemas a JSON tool call is constrained by (grammar/tool_call_schema.h), checked by what
// their grammars accept and refuse, and against the independent validator.
#include "grammar/tool_call_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"
#include "grammar_test_util.h"
#include "schema_validator.h"

namespace tessera {
namespace {

using ojson = nlohmann::ordered_json;
using test::Feed;

ojson Tool(const std::string& name, ojson parameters, bool strict) {
  ojson fn = {{"name", name}, {"parameters", std::move(parameters)}};
  if (strict) fn["strict"] = true;
  return {{"type", "function"}, {"function", std::move(fn)}};
}

const ojson kCity = {{"type", "object"},
                     {"properties", {{"city", {{"$ref", "#/$defs/name"}}}}},
                     {"required", {"city"}},
                     {"$defs", {{"name", {{"type", "string"}, {"maxLength", 8}}}}}};

bool Valid(const ojson& schema, const std::string& text) {
  std::string why;
  const nlohmann::json s = nlohmann::json::parse(schema.dump());
  return test::ValidateJson(nlohmann::json::parse(text), s, s, &why);
}

TEST(ToolCallSchema, ForcedCallFollowsTheNamedFunctionWithReferencesRebased) {
  const ojson tools = {Tool("weather", kCity, true), Tool("time", {}, false)};
  ASSERT_TRUE(ToolsWellFormed(tools));
  const ojson schema = ForcedToolCallSchema(tools, "weather", "arguments");
  auto grammar = CompileJsonSchema(schema);
  ASSERT_TRUE(grammar) << grammar.status().message();
  const std::string good = R"({"name":"weather","arguments":{"city":"Oslo"}})";
  EXPECT_TRUE(Feed(*grammar, good).complete);
  EXPECT_TRUE(Valid(schema, good));
  // The $ref into $defs still reaches the string limit after the move.
  EXPECT_FALSE(Feed(*grammar, R"({"name":"weather","arguments":{"city":"Copenhagen"}})").accepted);
  EXPECT_FALSE(Feed(*grammar, R"({"name":"time","arguments":{}})").accepted);
}

TEST(ToolCallSchema, AnyForcedCallIsOneOfTheFunctionsUnderTheirKey) {
  const ojson tools = {Tool("weather", kCity, false), Tool("time", {}, false)};
  auto grammar = CompileJsonSchema(ForcedToolCallSchema(tools, "", "parameters"));
  ASSERT_TRUE(grammar) << grammar.status().message();
  EXPECT_TRUE(Feed(*grammar, R"({"name":"time","parameters":{}})").complete);
  EXPECT_TRUE(Feed(*grammar, R"({"name":"weather","parameters":{"city":"Rome"}})").complete);
  EXPECT_FALSE(Feed(*grammar, R"({"name":"time","arguments":{}})").accepted);
  EXPECT_FALSE(Feed(*grammar, R"({"name":"time","parameters":{"x":1}})").accepted);
}

TEST(ToolCallSchema, AutoCallKeepsStrictSchemasAndLetsUncompilableOnesBeAnyObject) {
  // "not" is a keyword the grammar does not support: that function's arguments are free.
  const ojson odd = {{"type", "object"}, {"not", {{"type", "string"}}}};
  const ojson tools = {Tool("weather", kCity, true), Tool("odd", odd, false)};
  auto schema = AutoToolCallSchema(tools, "arguments");
  ASSERT_TRUE(schema) << schema.status().message();
  auto grammar = CompileJsonSchema(*schema);
  ASSERT_TRUE(grammar) << grammar.status().message();
  EXPECT_TRUE(Feed(*grammar, R"({"name":"odd","arguments":{"anything":[1,2]}})").complete);
  EXPECT_FALSE(Feed(*grammar, R"({"name":"weather","arguments":{"town":"Oslo"}})").accepted);
}

TEST(ToolCallSchema, MoreStrictFunctionsThanAGrammarFollowsAreRefused) {
  ojson tools = ojson::array();
  for (size_t i = 0; i <= kMaxGrammarAlternatives; ++i) {
    tools.push_back(Tool("f" + std::to_string(i), kCity, true));
  }
  EXPECT_FALSE(AutoToolCallSchema(tools, "arguments"));
  tools.erase(tools.begin());
  EXPECT_TRUE(AutoToolCallSchema(tools, "arguments"));
}

TEST(ToolCallSchema, MalformedToolsAreNotWellFormed) {
  EXPECT_FALSE(ToolsWellFormed(ojson::object()));
  EXPECT_FALSE(ToolsWellFormed(ojson::array({1})));
  EXPECT_FALSE(ToolsWellFormed(ojson::array({{{"function", {{"name", 3}}}}})));
  EXPECT_TRUE(ToolsWellFormed(ojson::array({{{"function", {{"name", "f"}}}}})));
}

}  // namespace
}  // namespace tessera
