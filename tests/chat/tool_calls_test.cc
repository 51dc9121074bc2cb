// The tool-call parser on canned replies of each family (whole, byte by byte and in random
// splits), call ids, and the forced-call text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "test_support.h"
#include "tool_calls_test_util.h"

namespace tessera {
namespace {

using test::FeedPieces;
using test::FeedWhole;

struct Want {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

void Check(ToolCallSyntax syntax, const std::string& text, const Want& want) {
  SCOPED_TRACE(std::string(ToolCallSyntaxName(syntax)) + ": " + text);
  ParsedReply r = ParseToolCalls(syntax, text);
  EXPECT_EQ(r.content, want.content);
  ASSERT_EQ(r.calls.size(), want.calls.size());
  for (size_t i = 0; i < r.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, want.calls[i].first);
    EXPECT_EQ(r.calls[i].arguments, want.calls[i].second);
  }
  test::ExpectSplitInvariant(syntax, text);
}

constexpr ToolCallSyntax kHermes = ToolCallSyntax::kHermes;
constexpr ToolCallSyntax kLlama = ToolCallSyntax::kLlama3Json;
constexpr ToolCallSyntax kGemma = ToolCallSyntax::kGemmaJson;
constexpr ToolCallSyntax kXml = ToolCallSyntax::kQwen3Xml;

TEST(ToolCallsTest, HermesSingle) {
  Check(kHermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
        "3}}\n</tool_call>",
        {"", {{"get_weather", R"({"city":"Paris","days":3})"}}});
}

TEST(ToolCallsTest, HermesSeveral) {
  Check(kHermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": "
        "\"Tokyo\"}}\n</tool_call>",
        {"", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"city":"Tokyo"})"}}});
}

TEST(ToolCallsTest, HermesContentAndCalls) {
  Check(kHermes,
        "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone.",
        {"Let me check.\n\nDone.", {{"f", "{}"}}});
  Check(kHermes,
        "<think>\nweather needs a tool\n</think>\n\n<tool_call>\n{\"name\": \"f\", "
        "\"arguments\": {\"a\": [1, {\"b\": null}]}}\n</tool_call>\n",
        {"<think>\nweather needs a tool\n</think>\n\n", {{"f", R"({"a":[1,{"b":null}]})"}}});
}

TEST(ToolCallsTest, HermesArgumentVariants) {
  // "parameters" for "arguments", double-encoded arguments, no arguments, key order kept,
  // a string holding the closing marker, non-ASCII text.
  Check(kHermes, "<tool_call>{\"name\": \"f\", \"parameters\": {\"z\": 1, \"a\": 2}}</tool_call>",
        {"", {{"f", R"({"z":1,"a":2})"}}});
  Check(kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
        {"", {{"f", R"({"x":1})"}}});
  Check(kHermes, "<tool_call>{\"name\": \"f\"}</tool_call>", {"", {{"f", "{}"}}});
  Check(kHermes,
        "<tool_call>{\"name\": \"say\", \"arguments\": {\"text\": \"</tool_call> \\\"q\\\" "
        "caf\xC3\xA9\"}}</tool_call>",
        {"", {{"say", "{\"text\":\"</tool_call> \\\"q\\\" caf\xC3\xA9\"}"}}});
}

TEST(ToolCallsTest, HermesTextThatOnlyLooksLikeMarkup) {
  Check(kHermes, "Use a <tool> or <tool_c and </tool_call> tags.",
        {"Use a <tool> or <tool_c and </tool_call> tags.", {}});
  Check(kHermes, "ends with <tool_ca", {"ends with <tool_ca", {}});
}

TEST(ToolCallsTest, HoldsBackOnlyAPossibleMarker) {
  ToolCallParser parser(kHermes);
  ToolCallEvents a = parser.Feed("Hello <tool_c");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].content, "Hello ");
  ToolCallEvents b = parser.Feed("at> x");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].content, "<tool_cat> x");
  EXPECT_TRUE(parser.Feed("<").empty());
  ToolCallEvents c = parser.Finish();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].content, "<");
}

TEST(ToolCallsTest, EventsHaveTheOpenAiShape) {
  ToolCallParserOptions opts;
  opts.seed = 7;
  test::FedReply r =
      FeedWhole(kHermes,
                "Hi<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>"
                "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
                opts);
  ASSERT_EQ(r.events.size(), 5u);
  EXPECT_EQ(r.events[0].content, "Hi");
  const ToolCallDelta& head = r.events[1].call;
  EXPECT_EQ(head.index, 0u);
  EXPECT_EQ(head.id, r.calls[0].id);
  EXPECT_EQ(head.name, "f");
  EXPECT_EQ(head.arguments, "");
  const ToolCallDelta& args = r.events[2].call;
  EXPECT_EQ(args.index, 0u);
  EXPECT_EQ(args.id, "");
  EXPECT_EQ(args.name, "");
  EXPECT_EQ(args.arguments, R"({"x":1})");
  EXPECT_EQ(r.events[3].call.index, 1u);
  EXPECT_EQ(r.events[3].call.name, "g");
  EXPECT_EQ(r.events[4].call.arguments, "{}");
}

TEST(ToolCallsTest, IdsAreDeterministicPerSeed) {
  const std::string text =
      "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>";
  ToolCallParserOptions a;
  a.seed = 42;
  ToolCallParserOptions b = a;
  b.seed = 43;
  ParsedReply r1 = ParseToolCalls(kHermes, text, a);
  ParsedReply r2 = ParseToolCalls(kHermes, text, a);
  ParsedReply r3 = ParseToolCalls(kHermes, text, b);
  ASSERT_EQ(r1.calls.size(), 2u);
  EXPECT_EQ(r1.calls[0].id, r2.calls[0].id);
  EXPECT_EQ(r1.calls[1].id, r2.calls[1].id);
  EXPECT_NE(r1.calls[0].id, r1.calls[1].id);
  EXPECT_NE(r1.calls[0].id, r3.calls[0].id);
  for (const ToolCall& c : r1.calls) {
    ASSERT_EQ(c.id.size(), 5u + 24u);
    EXPECT_EQ(c.id.substr(0, 5), "call_");
    for (char ch : c.id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  }
}

TEST(ToolCallsTest, Llama3Json) {
  Check(kLlama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  Check(kLlama, "\n  {\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}\n",
        {"", {{"f", "{}"}}});
  Check(kLlama, "<|python_tag|>{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}",
        {"", {{"f", R"({"q":"x"})"}}});
  Check(kLlama,
        "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
        {"", {{"a", "{}"}, {"b", R"({"x":1})"}}});
  Check(kLlama, "Sure. <|python_tag|>{\"name\": \"f\", \"parameters\": {}}",
        {"Sure. ", {{"f", "{}"}}});
  Check(kLlama, "{\"name\": \"f\", \"parameters\": {}}\nI called f.",
        {"\nI called f.", {{"f", "{}"}}});
}

TEST(ToolCallsTest, Llama3JsonThatIsNotACall) {
  Check(kLlama, "Hello {name}, here is {\"name\": \"f\"}",
        {"Hello {name}, here is {\"name\": \"f\"}", {}});
  Check(kLlama, "{\"city\": \"Paris\"}", {"{\"city\": \"Paris\"}", {}});
  Check(kLlama, "  \n", {"  \n", {}});
}

TEST(ToolCallsTest, GemmaJson) {
  Check(kGemma, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  Check(kGemma, "I'll look it up.\n```tool_call\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n```",
        {"I'll look it up.\n", {{"f", R"({"x":1})"}}});
  Check(kGemma,
        "```json\n{\"name\": \"f\", \"parameters\": {}}\n```\n```json\n{\"name\": \"g\"}\n```",
        {"", {{"f", "{}"}, {"g", "{}"}}});
}

TEST(ToolCallsTest, GemmaTextThatIsNotACall) {
  Check(kGemma, "```json\n{\"city\": \"Paris\"}\n```", {"```json\n{\"city\": \"Paris\"}\n```", {}});
  Check(kGemma, "```tool_code\nget_weather(city='Paris')\n```",
        {"```tool_code\nget_weather(city='Paris')\n```", {}});
  Check(kGemma, "```python\nprint(1)\n``` and ``", {"```python\nprint(1)\n``` and ``", {}});
}

// Qwen3.5 writes parameters as text; the function's declared types decide how each reads: a
// string parameter stays a string whatever it looks like, Python-style True/None (as the
// template itself renders history) read as booleans and null, a value that fits no declared
// type reads as an undeclared one.
TEST(ToolCallsTest, Qwen3XmlReadsParametersAsTheirDeclaredTypes) {
  const std::string tools = R"([{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {
        "code": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
        "flag": {"type": "boolean"}, "maybe": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "mode": {"enum": ["1", "2"]},
        "either": {"anyOf": [{"type": "boolean"}, {"type": "string"}]}, "free": {}}}}}])";
  ToolCallParserOptions options;
  options.xml_parameter_types = ParameterTypesOfTools(tools);
  ASSERT_EQ(options.xml_parameter_types.count("f"), 1u);
  EXPECT_EQ(options.xml_parameter_types["f"]["maybe"], kJsonInteger | kJsonNull);
  EXPECT_EQ(options.xml_parameter_types["f"]["either"], kJsonBoolean | kJsonString);
  EXPECT_EQ(options.xml_parameter_types["f"]["free"], 0);
  auto call = [&](const std::string& params) {
    ParsedReply r = ParseToolCalls(
        kXml, "<tool_call>\n<function=f>\n" + params + "</function>\n</tool_call>", options);
    EXPECT_EQ(r.content, "");
    return r.calls.size() == 1 ? r.calls[0].arguments : std::string("(no call)");
  };
  auto param = [](const std::string& name, const std::string& value) {
    return "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
  };
  EXPECT_EQ(
      call(param("code", "42") + param("n", "42") + param("x", "2.5") + param("flag", "True")),
      R"({"code":"42","n":42,"x":2.5,"flag":true})");
  EXPECT_EQ(call(param("code", "true") + param("maybe", "None") + param("tags", "[\"a\"]")),
            R"({"code":"true","maybe":null,"tags":["a"]})");
  EXPECT_EQ(call(param("mode", "1") + param("either", "False") + param("free", "7")),
            R"({"mode":"1","either":false,"free":7})");
  // Fits no declared type: read as undeclared.
  EXPECT_EQ(call(param("n", "many") + param("flag", "[1]")), R"({"n":"many","flag":[1]})");
  // Another function, or no declarations: the undeclared reading.
  EXPECT_EQ(
      ParseToolCalls(
          kXml, "<tool_call>\n<function=g>\n" + param("code", "42") + "</function>\n</tool_call>",
          options)
          .calls.at(0)
          .arguments,
      R"({"code":42})");
  EXPECT_TRUE(ParameterTypesOfTools("not json").empty());
  EXPECT_TRUE(ParameterTypesOfTools(R"([{"function": {"name": 3}}, 5])").empty());
}

TEST(ToolCallsTest, Qwen3Xml) {
  Check(kXml,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        {"", {{"get_weather", R"({"city":"Paris","days":3})"}}});
  Check(kXml,
        "Writing it.\n\n<tool_call>\n<function=write>\n<parameter=text>\nline one\nline two\n"
        "</parameter>\n<parameter=opts>\n{\"a\": [true]}\n</parameter>\n<parameter=q>\n\"x\"\n"
        "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=noop>\n</function>\n"
        "</tool_call>",
        {"Writing it.\n\n",
         {{"write", R"({"text":"line one\nline two","opts":{"a":[true]},"q":"\"x\""})"},
          {"noop", "{}"}}});
}

TEST(ToolCallsTest, NoneIsAllContent) {
  Check(ToolCallSyntax::kNone, "<tool_call>{\"name\": \"f\"}</tool_call>",
        {"<tool_call>{\"name\": \"f\"}</tool_call>", {}});
}

// A call rendered by the model's own template parses back to the same call.
TEST(ToolCallsTest, TemplateRenderedCallsParseBack) {
  for (const char* folder : {"Qwen2.5-1.5B-Instruct", "Qwen3-4B", "Qwen3.5-4B"}) {
    SCOPED_TRACE(folder);
    auto config = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/" + folder);
    ASSERT_TRUE(config.has_value());
    nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}},
        {"type": "function", "function": {"name": "g", "arguments": "{}"}}]}])");
    auto ctx = MakeToolChatContext(*config, messages, false, nullptr, {});
    ASSERT_TRUE(ctx.has_value());
    auto tmpl = jinja::Template::Parse(config->source);
    ASSERT_TRUE(tmpl.has_value());
    auto text = tmpl->Render(*ctx);
    ASSERT_TRUE(text.has_value()) << text.status().message();
    const std::string open = "<|im_start|>assistant\n";
    size_t begin = text->rfind(open) + open.size();
    std::string reply = text->substr(begin, text->rfind("<|im_end|>") - begin);
    ParsedReply r = ParseToolCalls(DetectToolCallSyntax(config->source), reply);
    ASSERT_EQ(r.calls.size(), 2u) << reply;
    EXPECT_EQ(r.calls[0].name, "f");
    EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","n":2})");
    EXPECT_EQ(r.calls[1].name, "g");
    EXPECT_EQ(r.calls[1].arguments, "{}");
    EXPECT_NE(r.content.find("Checking."), std::string::npos) << r.content;
  }
}

TEST(ToolCallsTest, ForcedCallText) {
  struct Case {
    ToolCallSyntax syntax;
    const char* name;
    ForcedToolCall want;
  };
  for (const Case& c : {
           Case{
               kHermes,
               "get_weather",
               {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "", "}\n</tool_call>"}},
           Case{kHermes,
                "",
                {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>"}},
           Case{kHermes,
                "a\"b",
                {"<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ", "", "}\n</tool_call>"}},
           Case{kLlama, "f", {"{\"name\": \"f\", \"parameters\": ", "", "}"}},
           Case{kLlama, "", {"{\"name\": \"", "\", \"parameters\": ", "}"}},
           Case{kGemma, "f", {"{\"name\": \"f\", \"arguments\": ", "", "}"}},
           Case{kXml, "f", {"<tool_call>\n<function=f>\n", "", "</function>\n</tool_call>"}},
           Case{kXml, "", {"<tool_call>\n<function=", ">\n", "</function>\n</tool_call>"}},
       }) {
    SCOPED_TRACE(std::string(ToolCallSyntaxName(c.syntax)) + " " + c.name);
    auto f = ForcedToolCallText(c.syntax, c.name);
    ASSERT_TRUE(f.has_value()) << f.status().message();
    EXPECT_EQ(f->prefix, c.want.prefix);
    EXPECT_EQ(f->after_name, c.want.after_name);
    EXPECT_EQ(f->suffix, c.want.suffix);
  }
  auto none = ForcedToolCallText(ToolCallSyntax::kNone, "f");
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.status().code(), ErrorCode::kUnsupported);
  EXPECT_FALSE(ForcedToolCallText(kXml, "a>b").has_value());
}

// Forced text plus what a grammar would produce parses to the forced call, in every syntax.
TEST(ToolCallsTest, ForcedCallParsesBack) {
  for (ToolCallSyntax s : {kHermes, kLlama, kGemma, kXml}) {
    SCOPED_TRACE(ToolCallSyntaxName(s));
    const std::string args =
        s == kXml ? "<parameter=city>\nParis\n</parameter>\n" : "{\"city\": \"Paris\"}";
    auto named = ForcedToolCallText(s, "get_weather");
    ASSERT_TRUE(named.has_value());
    auto any = ForcedToolCallText(s);
    ASSERT_TRUE(any.has_value());
    for (const std::string& text :
         {named->prefix + args + named->suffix,
          any->prefix + "get_weather" + any->after_name + args + any->suffix}) {
      ParsedReply r = ParseToolCalls(s, text);
      EXPECT_EQ(r.content, "") << text;
      ASSERT_EQ(r.calls.size(), 1u) << text;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
    }
  }
}

}  // namespace
}  // namespace tessera
