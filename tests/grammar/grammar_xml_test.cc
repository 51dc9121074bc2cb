// The grammar of Qwen3.5's XML tool calls (CompileXmlToolCalls): exact texts accepted and
// refused, the parameters the format cannot write unambiguously refused with the reason, and
// random walks under 200 random parameter schemas whose calls, read back by the reply parser
// (chat/tool_calls.h) with the functions' declared types, validate against their schemas.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "grammar_test_util.h"
#include "random_schema.h"
#include "schema_validator.h"

namespace tessera::test {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ojson Function(const std::string& name, const std::string& parameters) {
  ojson fn = {{"name", name}};
  if (!parameters.empty()) fn["parameters"] = ojson::parse(parameters);
  return {{"type", "function"}, {"function", fn}};
}

constexpr const char* kWeather = R"({"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20},
    "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "units": {"enum": ["metric", "imperial"]}},
  "required": ["city", "days"]})";
constexpr const char* kTime = R"({"type": "object", "properties": {"zone": {"type": "string"}},
  "required": ["zone"]})";

std::string Param(const std::string& key, const std::string& value) {
  return "<parameter=" + key + ">\n" + value + "\n</parameter>\n";
}

TEST(GrammarXml, OneFunctionsParametersInOrder) {
  const ojson tools = ojson::array({Function("get_weather", kWeather)});
  auto compiled = CompileXmlToolCalls(tools, "get_weather", std::nullopt);
  ASSERT_TRUE(compiled) << compiled.status().message();
  const auto& g = *compiled;
  auto complete = [&](const std::string& text) {
    const Fed fed = Feed(g, text);
    return fed.accepted && fed.complete;
  };
  EXPECT_TRUE(complete(Param("city", "Paris") + Param("days", "3") + "</function>"));
  EXPECT_TRUE(complete(Param("city", "New \"York\" <b>") + Param("days", "7") +
                       Param("units", "imperial") + "</function>"));
  EXPECT_TRUE(complete(Param("city", "a\tb") + Param("days", "1") + "</function>"));
  EXPECT_TRUE(complete(Param("city", "") + Param("days", "1") + "</function>"));
  // Not yet closed: accepted, not complete.
  const Fed open = Feed(g, Param("city", "Paris") + Param("days", "3"));
  EXPECT_TRUE(open.accepted);
  EXPECT_FALSE(open.complete);
  for (const std::string& bad : std::vector<std::string>{
           Param("city", "Paris") + "</function>",                       // days is required
           Param("days", "3") + Param("city", "Paris") + "</function>",  // schema order
           Param("city", "Par\nis") + Param("days", "3") + "</function>",
           Param("city", "a</parameter>b") + Param("days", "3") + "</function>",
           Param("city", std::string(21, 'x')) + Param("days", "3") + "</function>",
           Param("city", "Paris") + Param("days", "8") + "</function>",
           Param("city", "Paris") + Param("days", "\"3\"") + "</function>",
           Param("city", "Paris") + Param("days", "3") + Param("units", "metric ") + "</function>",
           Param("city", "Paris") + Param("days", "3") + Param("other", "1") + "</function>",
           "<parameter=city>\nParis</parameter>\n",
           "{\"city\": \"Paris\"}",
       }) {
    EXPECT_FALSE(Feed(g, bad).accepted) << bad;
  }
}

// The reply parser ends a parameter at the first "</parameter>" and the call at the first
// "</tool_call>", wherever they stand: no string of the call may hold them, raw or JSON, at
// any depth (JSON may write them escaped).
TEST(GrammarXml, NoStringHoldsWhatEndsAParameterOrTheCall) {
  auto compiled =
      CompileXmlToolCalls(ojson::array({Function("f", R"({"type": "object", "properties": {
          "s": {"type": "string"}, "o": {"type": "object", "properties": {
              "t": {"type": "string"}, "list": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": {"type": "integer"}}}})")}),
                          "f", std::nullopt);
  ASSERT_TRUE(compiled) << compiled.status().message();
  const auto& g = *compiled;
  for (const std::string& bad : std::vector<std::string>{
           Param("s", "a</tool_call>b"),
           Param("s", "</parameter>"),
           Param("o", R"({"t": "x</parameter>"})"),
           Param("o", R"({"list": ["</tool_call>"]})"),
           Param("o", R"({"</tool_call>": 1})"),
       }) {
    EXPECT_FALSE(Feed(g, bad).accepted) << bad;
  }
  EXPECT_TRUE(Feed(g, Param("s", "a</tool_cal b </parameter <x>") +
                          Param("o", R"({"t": "<\/parameter>", "list": ["</function>"]})") +
                          "</function>")
                  .complete);
  // Patterns lose '<' (so the guard never cuts a match short); one that needs it is refused,
  // and so are literals and keys holding the texts, and more functions than the matcher
  // follows at once.
  auto pattern =
      CompileXmlToolCalls(ojson::array({Function("f", R"({"type": "object", "properties": {
          "s": {"type": "string", "pattern": "^(x|<y)$"}}, "required": ["s"]})")}),
                          "f", std::nullopt);
  ASSERT_TRUE(pattern) << pattern.status().message();
  EXPECT_TRUE(Feed(*pattern, Param("s", "x") + "</function>").complete);
  EXPECT_FALSE(Feed(*pattern, Param("s", "<y")).accepted);
  for (
      const char* parameters : {
          R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a</parameter>$"}}})",
          R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a<", "maxLength": 5}}})",
          R"({"type": "object", "properties": {"o": {"type": "object", "properties": {"e": {"enum": ["</tool_call>"]}}}}})",
          R"({"type": "object", "properties": {"o": {"type": "object", "properties": {"a</parameter>": {"type": "integer"}}}}})",
      }) {
    auto g2 = CompileXmlToolCalls(ojson::array({Function("f", parameters)}), "f", std::nullopt);
    EXPECT_FALSE(g2) << parameters;
  }
  ojson many = ojson::array();
  for (int i = 0; i < 65; ++i) many.push_back(Function("f" + std::to_string(i), kTime));
  EXPECT_FALSE(CompileXmlToolCalls(many, "", std::string_view()));
  EXPECT_TRUE(CompileXmlToolCalls(many, "f64", std::nullopt));
  many.erase(64);
  EXPECT_TRUE(CompileXmlToolCalls(many, "", std::string_view()));
}

TEST(GrammarXml, NamesChooseTheFunction) {
  const ojson tools = ojson::array(
      {Function("get_weather", kWeather), Function("get_time", kTime), Function("ping", "")});
  auto forced = CompileXmlToolCalls(tools, "", std::string_view());
  ASSERT_TRUE(forced) << forced.status().message();
  EXPECT_TRUE(Feed(*forced, "get_time>\n" + Param("zone", "UTC") + "</function>").complete);
  EXPECT_TRUE(Feed(*forced, "ping>\n</function>").complete);
  EXPECT_FALSE(Feed(*forced, "get_time>\n</function>").accepted);  // zone is required
  EXPECT_FALSE(Feed(*forced, "get_nothing>\n").accepted);
  EXPECT_FALSE(Feed(*forced, "get_time>\n" + Param("city", "Paris")).accepted);
  // After the <tool_call> token of a reply that may call (strict functions, tool_choice auto).
  auto lazy = CompileXmlToolCalls(tools, "", std::string_view("\n<function="));
  ASSERT_TRUE(lazy) << lazy.status().message();
  EXPECT_TRUE(Feed(*lazy, "\n<function=ping>\n</function>").complete);
  EXPECT_FALSE(Feed(*lazy, "<function=ping>\n</function>").accepted);
  // A named function without its name in the grammar; several need names.
  EXPECT_TRUE(Feed(*CompileXmlToolCalls(tools, "ping", std::nullopt), "</function>").complete);
  EXPECT_FALSE(CompileXmlToolCalls(tools, "", std::nullopt));
  EXPECT_FALSE(CompileXmlToolCalls(tools, "nope", std::nullopt));
}

TEST(GrammarXml, RefusesWhatTheFormatCannotWriteUnambiguously) {
  const char* bad[] = {
      R"({"type": "object", "properties": {"x": {"type": ["string", "integer"]}}})",
      R"({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}}})",
      R"({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "string", "maxLength": 2}, {"type": "null"}]}}})",
      R"({"type": "object", "properties": {"x": {"type": ["string", "null", "boolean"]}}})",
      R"({"type": "object", "properties": {"x": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}})",
      R"({"type": "object", "properties": {"x": {}}})",
      R"({"type": "object", "properties": {"x": {"enum": ["a", 1]}}})",
      R"({"type": "object", "properties": {"x": {"enum": ["a\nb"]}}})",
      R"({"type": "object", "properties": {"x": {"const": "</parameter>"}}})",
      R"({"type": "object", "properties": {"a>b": {"type": "integer"}}})",
      R"({"anyOf": [{"type": "object"}, {"type": "integer"}]})",
      R"({"type": "object", "properties": {"x": {"type": "string", "format": "email"}}})",
  };
  for (const char* parameters : bad) {
    auto g = CompileXmlToolCalls(ojson::array({Function("f", parameters)}), "f", std::nullopt);
    ASSERT_FALSE(g) << parameters;
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument) << parameters;
    EXPECT_NE(g.status().message().find("tools: function 'f'"), std::string::npos)
        << g.status().message();
  }
  EXPECT_FALSE(CompileXmlToolCalls(ojson::array({Function("f>g", kTime)}), "", std::string_view()));
  // Strings nested in JSON values are JSON strings; no parameters at all is an empty call.
  auto nested = CompileXmlToolCalls(
      ojson::array({Function("f", R"({"type": "object", "properties": {"x": {"type": "object",
          "properties": {"s": {"type": "string"}}, "required": ["s"]}}})")}),
      "f", std::nullopt);
  ASSERT_TRUE(nested) << nested.status().message();
  EXPECT_TRUE(Feed(*nested, Param("x", "{\"s\": \"a\\nb\"}") + "</function>").complete);
  for (const char* parameters : {R"({"type": "object"})", ""}) {
    auto none = CompileXmlToolCalls(ojson::array({Function("f", parameters)}), "f", std::nullopt);
    ASSERT_TRUE(none) << none.status().message();
    EXPECT_TRUE(Feed(*none, "</function>").complete);
    EXPECT_FALSE(Feed(*none, Param("x", "1")).accepted);
  }
}

// A nullable string is written as its string's raw text: the reply parser reads null or None
// as null, which the schema allows too, and any other text as the string.
TEST(GrammarXml, NullableStringsAreRawText) {
  const char* parameters = R"({"type": "object", "properties": {
      "a": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
      "b": {"type": ["null", "string"]},
      "c": {"enum": ["x", "y", null]}}, "required": ["a", "b", "c"]})";
  const ojson tools = ojson::array({Function("f", parameters)});
  auto g = CompileXmlToolCalls(tools, "f", std::nullopt);
  ASSERT_TRUE(g) << g.status().message();
  auto call = [](const std::string& a, const std::string& b, const std::string& c) {
    return Param("a", a) + Param("b", b) + Param("c", c) + "</function>";
  };
  auto complete = [&](const std::string& text) {
    const Fed fed = Feed(*g, text);
    return fed.accepted && fed.complete;
  };
  EXPECT_TRUE(complete(call("hello", "any text", "x")));
  EXPECT_TRUE(complete(call("None", "null", "y")));
  EXPECT_FALSE(complete(call("toolong", "b", "x")));  // the string branch's maxLength
  EXPECT_FALSE(complete(call("a", "b", "z")));
  EXPECT_FALSE(complete(call("a", "b", "null")));  // null is the string's absence, not its text
  const json schema = json::parse(parameters);
  ToolCallParserOptions options;
  options.xml_parameter_types = ParameterTypesOfTools(tools.dump());
  for (const auto& [text, want] :
       {std::pair{call("None", "null", "y"), json{{"a", nullptr}, {"b", nullptr}, {"c", "y"}}},
        std::pair{call("42", "true", "x"), json{{"a", "42"}, {"b", "true"}, {"c", "x"}}}}) {
    const ParsedReply reply =
        ParseToolCalls(ToolCallSyntax::kQwen3Xml,
                       "<tool_call>\n<function=f>\n" + text + "\n</tool_call>", options);
    ASSERT_EQ(reply.calls.size(), 1u) << text;
    const json args = json::parse(reply.calls[0].arguments);
    EXPECT_EQ(args, want) << text;
    std::string why;
    EXPECT_TRUE(ValidateJson(args, schema, schema, &why)) << why;
  }
}

// Under auto (relax_non_strict) a non-strict function whose schema the format refuses takes
// its declared parameters, each optional, as raw text; a strict one is still refused.
TEST(GrammarXml, NonStrictFunctionsRelaxUnderAuto) {
  ojson tools = ojson::array(
      {Function("get_time", kTime), Function("log", R"({"type": "object", "properties": {
           "when": {"type": "string", "format": "date-time"}, "n": {"type": "integer"},
           "bad>key": {"type": "integer"}}, "required": ["when"]})")});
  tools[0]["function"]["strict"] = true;
  const std::string_view opening = "\n<function=";
  EXPECT_FALSE(CompileXmlToolCalls(tools, "", opening));
  auto g = CompileXmlToolCalls(tools, "", opening, /*relax_non_strict=*/true);
  ASSERT_TRUE(g) << g.status().message();
  auto complete = [&](const std::string& text) {
    const Fed fed = Feed(*g, text);
    return fed.accepted && fed.complete;
  };
  EXPECT_TRUE(
      complete("\n<function=log>\n" + Param("when", "tomorrow") + Param("n", "5") + "</function>"));
  EXPECT_TRUE(complete("\n<function=log>\n" + Param("n", "many") + "</function>"));
  EXPECT_TRUE(complete("\n<function=log>\n</function>"));
  EXPECT_FALSE(complete("\n<function=log>\n" + Param("other", "1") + "</function>"));
  EXPECT_FALSE(complete("\n<function=get_time>\n</function>"));  // zone is required
  EXPECT_TRUE(complete("\n<function=get_time>\n" + Param("zone", "UTC") + "</function>"));
  tools[1]["function"]["strict"] = true;
  EXPECT_FALSE(CompileXmlToolCalls(tools, "", opening, /*relax_non_strict=*/true));
  // Parameters behind a top-level $ref or in anyOf branches are found; a refused function
  // first leaves nothing behind for the next one (here, a JSON object with free keys).
  const ojson relaxed = ojson::array(
      {Function("lookup", R"({"$ref": "#/definitions/Q", "definitions": {"Q": {"type": "object",
           "properties": {"q": {"type": ["string", "integer"]}}}}})"),
       Function("either",
                R"({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
           {"type": "object", "properties": {"b": {"type": "string", "format": "uri"}}}]})"),
       Function("meta", R"({"type": "object", "properties": {"o": {"type": "object"}},
           "required": ["o"]})")});
  auto r = CompileXmlToolCalls(relaxed, "", opening, /*relax_non_strict=*/true);
  ASSERT_TRUE(r) << r.status().message();
  auto fits = [&](const std::string& text) {
    const Fed fed = Feed(*r, text);
    return fed.accepted && fed.complete;
  };
  EXPECT_TRUE(fits("\n<function=lookup>\n" + Param("q", "what") + "</function>"));
  EXPECT_TRUE(fits("\n<function=either>\n" + Param("a", "1") + Param("b", "x") + "</function>"));
  EXPECT_TRUE(fits("\n<function=meta>\n" + Param("o", R"({"any": [1]})") + "</function>"));
  EXPECT_FALSE(fits("\n<function=meta>\n" + Param("o", "[1]") + "</function>"));
}

// The mask (with its shortcuts for plain text inside JSON and raw strings) allows exactly the
// tokens the matcher accepts, checked token by token along random walks: every token of the
// small vocabulary at every step, and of the Qwen vocabulary at a few steps inside raw strings.
void ExpectMaskIsExact(const GrammarMatcher& m, const std::shared_ptr<const TokenVocabulary>& vocab,
                       const std::string& where) {
  GrammarMatcher probe = m;
  std::vector<uint64_t> mask(vocab->mask_words());
  probe.FillMask(mask);
  for (int32_t id = 0; id < vocab->size(); ++id) {
    GrammarMatcher copy = m;
    const bool accepted = copy.Accept(id).ok();
    ASSERT_EQ(Allowed(mask, id), accepted)
        << "token " << id << " '" << vocab->bytes(id) << "' after: " << where;
  }
}

TEST(GrammarXml, MasksAreExactlyTheAcceptedTokens) {
  const ojson tools = ojson::array({Function("write", R"({"type": "object", "properties": {
          "title": {"type": "string", "maxLength": 6}, "body": {"type": "string"},
          "n": {"type": "integer"}, "meta": {"type": "object", "properties": {
              "s": {"type": "string"}}, "required": ["s"]}},
        "required": ["title", "body", "n", "meta"]})")});
  auto g = CompileXmlToolCalls(tools, "", std::string_view());
  ASSERT_TRUE(g) << g.status().message();
  std::mt19937 rng(3);
  auto small = SmallVocabulary();
  // Bytes that build the markup, so walks get through it.
  const std::string markup = "write>\n<parameter=titlebodynmeta>\n</function>\"s:{} x<";
  for (int w = 0; w < 6; ++w) {
    GrammarMatcher m(*g, small);
    std::string text;
    std::vector<uint64_t> mask(small->mask_words());
    for (int step = 0; step < 150 && !m.IsTerminated(); ++step) {
      ExpectMaskIsExact(m, small, text);
      if (::testing::Test::HasFailure()) return;
      m.FillMask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < small->size(); ++id) {
        if (Allowed(mask, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty()) << text;
      // Mostly the markup's bytes (in order of preference), else any allowed token.
      int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (std::bernoulli_distribution(0.7)(rng)) {
        for (char c : markup) {
          const int32_t id = static_cast<unsigned char>(c);
          if (Allowed(mask, id)) {
            token = id;
            break;
          }
        }
      }
      ASSERT_TRUE(m.Accept(token).ok());
      text += small->bytes(token);
    }
  }
  auto qwen = QwenVocabulary();
  if (!qwen) GTEST_SKIP() << "Qwen2.5 tokenizer not found";
  GrammarMatcher m(*g, qwen);
  const std::pair<const char*, const char*> states[] = {
      {"write>\n<parameter=title>\n", "a parameter's opening"},
      {"ab", "a short raw string"},
      {"\n</parameter>\n<parameter=body>\nsome <b>text</",
       "a raw string with a partial </parameter>"},
      {"b> \"q\" \\", "a raw string"},
      {" <", "a raw string with < pending"},
      {"\n</parameter>\n<parameter=n>\n1", "an integer"},
      {"\n</parameter>\n<parameter=meta>\n{\"s\": \"x", "a JSON string inside a parameter"},
      {"</tool", "a JSON string with a partial </tool_call>"},
  };
  for (const auto& [bytes, where] : states) {
    ASSERT_TRUE(m.AcceptBytes(bytes).ok()) << where;
    ExpectMaskIsExact(m, qwen, where);
  }
}

// The walk's text as the whole reply of a forced call, read back by the reply parser with the
// declared types; its arguments must validate against the schema.
void CheckCall(const WalkResult& r, const json& schema, const std::string& label) {
  ASSERT_TRUE(r.finished) << label << ": " << r.problem << "\nschema: " << schema.dump();
  const ojson tools = ojson::array({Function("f", schema.dump())});
  ToolCallParserOptions options;
  options.xml_parameter_types = ParameterTypesOfTools(tools.dump());
  const ParsedReply reply =
      ParseToolCalls(ToolCallSyntax::kQwen3Xml,
                     "<tool_call>\n<function=f>\n" + r.text + "\n</tool_call>", options);
  ASSERT_EQ(reply.calls.size(), 1u) << label << ": " << r.text << "\nschema: " << schema.dump();
  EXPECT_EQ(reply.content, "");
  const json args = json::parse(reply.calls[0].arguments);
  std::string why;
  EXPECT_TRUE(ValidateJson(args, schema, schema, &why))
      << label << ": " << why << "\ncall: " << r.text << "\narguments: " << args.dump()
      << "\nschema: " << schema.dump();
}

TEST(GrammarXml, RandomParameterSchemasRoundTripThroughTheParser) {
  std::mt19937 rng(31);
  // A value ends at its newline; '/' after '<' closes the call.
  const std::string order = std::string("\n/") + kJsonClosingOrder + "<>";
  auto small = SmallVocabulary();
  const auto small_preference = ClosingPreference(*small, order);
  auto qwen = QwenVocabulary();
  const auto qwen_preference = qwen ? ClosingPreference(*qwen, order) : std::vector<int32_t>();
  int accepted = 0, refused = 0;
  for (int tries = 0; tries < 100000 && accepted < 200; ++tries) {
    const json schema = RandomSchema(rng);
    if (!schema.is_object() || schema.value("type", json()) != "object" ||
        !schema.contains("properties")) {
      continue;
    }
    auto g = CompileXmlToolCalls(ojson::array({Function("f", schema.dump())}), "f", std::nullopt);
    if (!g) {
      EXPECT_NE(g.status().message().find("tools: function 'f'"), std::string::npos);
      ++refused;
      continue;
    }
    const std::string label = "schema " + std::to_string(accepted);
    ++accepted;
    for (int w = 0; w < 2; ++w) {
      CheckCall(Walk(*g, small, small_preference, rng, 60, 0.2), schema, label + " small walk");
    }
    if (qwen)
      CheckCall(Walk(*g, qwen, qwen_preference, rng, 25, 0.2), schema, label + " qwen walk");
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(accepted, 200);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tessera::test
