// Hostile and malformed schemas: every refusal is a clear error naming the keyword and its
// path, never a crash (these also run under ASan+UBSan).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar_test_util.h"

namespace tessera::test {
namespace {

using nlohmann::json;

Status Refusal(const std::string& schema_json) {
  auto g = CompileJsonSchema(json::parse(schema_json));
  return g.has_value() ? Status::Ok() : g.status();
}

TEST(GrammarMalformed, UnsupportedKeywordsAreNamedWithTheirPath) {
  for (const char* keyword : {"patternProperties",
                              "allOf",
                              "not",
                              "if",
                              "then",
                              "else",
                              "format",
                              "multipleOf",
                              "minProperties",
                              "maxProperties",
                              "uniqueItems",
                              "prefixItems",
                              "contains",
                              "propertyNames",
                              "dependentRequired",
                              "dependentSchemas",
                              "unevaluatedProperties",
                              "contentEncoding",
                              "$anchor",
                              "$dynamicRef",
                              "minContains",
                              "frobnicate"}) {
    json schema = {{"type", "object"},
                   {"properties", {{"a", {{"type", "string"}, {keyword, json::object()}}}}}};
    auto g = CompileJsonSchema(schema);
    ASSERT_FALSE(g.has_value()) << keyword;
    EXPECT_EQ(g.status().message(),
              std::string("schema: unsupported keyword '") + keyword + "' at /properties/a");
  }
  Status root = Refusal(R"({"type":"object","allOf":[]})");
  EXPECT_NE(root.message().find("'allOf' at /"), std::string::npos) << root.message();
}

TEST(GrammarMalformed, WrongKeywordValuesAreClearErrors) {
  struct Case {
    const char* schema;
    const char* needle;
  };
  const Case cases[] = {
      {R"({"type":"frog"})", "'type'"},
      {R"({"type":[]})", "'type'"},
      {R"({"type":"array","minItems":-1})", "'minItems'"},
      {R"({"type":"array","minItems":1.5})", "'minItems'"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "'minItems' is greater than 'maxItems'"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "'minLength'"},
      {R"({"type":"string","maxLength":"2"})", "'maxLength'"},
      {R"({"type":"integer","minimum":5,"maximum":1})", "'minimum' is greater than 'maximum'"},
      {R"({"type":"integer","minimum":1.2,"maximum":1.8})", "'minimum'/'maximum'"},
      {R"({"type":"number","exclusiveMinimum":true})", "'exclusiveMinimum'"},
      {R"({"type":"number","minimum":"0"})", "'minimum'"},
      {R"({"$ref":"#/$defs/missing"})", "unresolvable '$ref'"},
      {R"({"$ref":"http://example.com/s.json"})", "'$ref'"},
      {R"({"$ref":5})", "'$ref'"},
      {R"({"$ref":"#/$defs/a","type":"string","$defs":{"a":{}}})", "'type' alongside '$ref'"},
      {R"({"type":"object","properties":[]})", "'properties'"},
      {R"({"type":"object","required":[1]})", "'required'"},
      {R"({"type":"object","required":["x"]})", "required property 'x'"},
      {R"({"type":"object","additionalProperties":3})", "'additionalProperties'"},
      {R"({"type":"array","items":5})", "'items'"},
      {R"({"type":"array","items":[{}]})", "'items'"},
      {R"({"enum":[]})", "'enum'"},
      {R"({"enum":"a"})", "'enum'"},
      {R"({"enum":["a"],"minLength":1})", "'minLength' alongside 'enum'"},
      {R"({"anyOf":[]})", "'anyOf'"},
      {R"({"anyOf":{}})", "'anyOf'"},
      {R"({"anyOf":[{}],"type":"string"})", "'type' alongside 'anyOf'"},
      {R"({"type":"string","pattern":"("})", "'pattern'"},
      {R"({"type":"string","pattern":"(?=a)b"})", "'pattern'"},
      {R"({"type":"string","pattern":"a\\1"})", "'pattern'"},
      {R"({"type":"string","pattern":"é"})", "'pattern'"},
      {R"({"type":"string","pattern":"^\"$"})", "'pattern'"},
      {R"({"type":"string","pattern":"a{3}","maxLength":2})", "'pattern'"},
      {R"({"type":"string","pattern":"(a{256}){256}"})", "'pattern'"},
      {R"({"type":"string","pattern":"a","minLength":2})", "'minLength'"},
      {R"({"$defs":[]})", "'$defs'"},
      {R"(5)", "schema must be an object"},
      {R"({"type":"object","properties":{"a":{"type":"array","items":false,"minItems":1}},
          "required":["a"]})",
       "no JSON value"},
      {R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})", "no JSON value"},
      {R"({"$ref":"#"})", "no JSON value"},
      {R"({"type":"array","minItems":100000000})", "'minItems'"},
  };
  for (const Case& c : cases) {
    Status s = Refusal(c.schema);
    ASSERT_FALSE(s.ok()) << c.schema;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.schema << " -> " << s.message();
    EXPECT_EQ(s.message().rfind("schema: ", 0), 0u) << s.message();
  }
}

TEST(GrammarMalformed, DeepAndLargeSchemasAreRefused) {
  json deep = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  Status s = Refusal(deep.dump());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deeper than 32"), std::string::npos) << s.message();

  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 30000; ++i) wide["properties"]["p" + std::to_string(i)] = json::object();
  s = Refusal(wide.dump());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

TEST(GrammarMalformed, ResponseFormatShape) {
  EXPECT_FALSE(CompileResponseFormat(json::array()).has_value());
  EXPECT_FALSE(CompileResponseFormat(json{{"type", "text"}}).has_value());
  EXPECT_FALSE(CompileResponseFormat(json{{"type", 3}}).has_value());
  EXPECT_FALSE(CompileResponseFormat(json{{"type", "json_schema"}}).has_value());
  EXPECT_FALSE(
      CompileResponseFormat(json{{"type", "json_schema"}, {"json_schema", {{"schema", 1}}}})
          .has_value());
  EXPECT_FALSE(
      CompileResponseFormat(
          json{{"type", "json_schema"},
               {"json_schema", {{"name", "x"}, {"schema", json::object()}, {"strict", 1}}}})
          .has_value());
  auto ok = CompileResponseFormat(
      json{{"type", "json_schema"},
           {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", {{"type", "object"}}}}}});
  EXPECT_TRUE(ok.has_value()) << ok.status().message();
}

TEST(GrammarMalformed, MatcherRefusesBadTokensWithoutChangingState) {
  auto vocab = SmallVocabulary();
  GrammarMatcher m(JsonObjectGrammar(), vocab);
  EXPECT_FALSE(m.Accept(-1).ok());
  EXPECT_FALSE(m.Accept(vocab->size()).ok());
  EXPECT_FALSE(m.AcceptBytes("{\"a\":1}}").ok());
  EXPECT_TRUE(m.AcceptBytes("{").ok());  // the failed call above changed nothing
  std::vector<uint64_t> small(1);
  m.FillMask(small);  // too small: cleared, no overflow
  EXPECT_EQ(small[0], 0u);
  EXPECT_FALSE(TokenVocabulary::Create({}, {}, {}).has_value());
  const int32_t bad[] = {5};
  EXPECT_FALSE(TokenVocabulary::Create({"a"}, {}, bad).has_value());
  EXPECT_FALSE(TokenVocabulary::Create({"a"}, bad, {}).has_value());
}

}  // namespace
}  // namespace tessera::test
