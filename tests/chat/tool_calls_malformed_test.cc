// Hostile and broken model output for the tool-call parser: malformed markup is content, never
// a crash; memory stays bounded; any split gives the same events.
#include <gtest/gtest.h>

#include <random>

#include "tool_calls_test_util.h"

namespace tessera {
namespace {

using test::FeedPieces;
using test::FeedWhole;

constexpr ToolCallSyntax kAll[] = {ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3Json,
                                   ToolCallSyntax::kGemmaJson, ToolCallSyntax::kQwen3Xml};

std::string OpenMarker(ToolCallSyntax s) {
  if (s == ToolCallSyntax::kGemmaJson) return "```json\n";
  if (s == ToolCallSyntax::kLlama3Json) return "<|python_tag|>";
  return "<tool_call>";
}

// `text` is all content, no call, for every split.
void ExpectContent(ToolCallSyntax syntax, const std::string& text) {
  SCOPED_TRACE(std::string(ToolCallSyntaxName(syntax)) + ": " + text.substr(0, 200));
  ParsedReply r = ParseToolCalls(syntax, text);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, text);
  test::ExpectSplitInvariant(syntax, text, 10);
}

TEST(ToolCallsMalformedTest, HermesBrokenCallsAreContent) {
  for (const std::string& text : {
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {"),  // unterminated
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}"),
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_cal>"),
           std::string("<tool_call>\n{\"name\": f}\n</tool_call>"),        // invalid JSON
           std::string("<tool_call>\n{\"arguments\": {}}\n</tool_call>"),  // no name
           std::string("<tool_call>\n{\"name\": 3}\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": \"\"}\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": \"nope\"}\n</tool_call>"),
           std::string("<tool_call>\nget_weather(city='Paris')\n</tool_call>"),
           std::string("<tool_call></tool_call>"),
           std::string("</tool_call><tool_call>"),
           std::string("<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>"),
           std::string("<tool_call>{\"name\": \"f\", \"a\": \"unterminated string}</tool_call>"),
           std::string("<tool_call>{\"name\": \"f\"}}}}</tool_call>"),
       }) {
    ExpectContent(ToolCallSyntax::kHermes, text);
  }
}

TEST(ToolCallsMalformedTest, ScanningResumesAfterABrokenCall) {
  const std::string good = "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\": 1}}</tool_call>";
  for (const std::string& bad : {std::string("<tool_call>nope"), std::string("<tool_call>{bad}"),
                                 std::string("<tool_call>{\"name\": \"f\"} x")}) {
    const std::string text = bad + good;
    SCOPED_TRACE(text);
    ParsedReply r = ParseToolCalls(ToolCallSyntax::kHermes, text);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "g");
    EXPECT_EQ(r.content, bad);
    test::ExpectSplitInvariant(ToolCallSyntax::kHermes, text, 10);
  }
}

TEST(ToolCallsMalformedTest, OtherFamiliesBrokenCallsAreContent) {
  struct Case {
    std::string text;
    size_t calls;
    std::string content;
  };
  // The complete first call of a ';' chain stands; what follows it is content.
  for (const Case& c :
       {Case{"{\"name\": \"f\", \"parameters\": {}", 0, "{\"name\": \"f\", \"parameters\": {}"},
        Case{"{\"name\": \"f\", \"parameters\": {}}}}", 1, "}}"},
        Case{"{\"name\": \"f\", \"parameters\": {}};", 1, ";"},
        Case{"{\"name\": \"f\", \"parameters\": {}}; nope", 1, "; nope"},
        Case{"<|python_tag|>", 0, "<|python_tag|>"},
        Case{"<|python_tag|>x", 0, "<|python_tag|>x"}}) {
    SCOPED_TRACE(c.text);
    ParsedReply r = ParseToolCalls(ToolCallSyntax::kLlama3Json, c.text);
    EXPECT_EQ(r.calls.size(), c.calls);
    EXPECT_EQ(r.content, c.content);
    test::ExpectSplitInvariant(ToolCallSyntax::kLlama3Json, c.text, 10);
  }
  ExpectContent(ToolCallSyntax::kGemmaJson, "```tool_call\n{\"name\": \"f\"}\n``");
  ExpectContent(ToolCallSyntax::kGemmaJson, "```json\n[1, 2]\n```");
  ExpectContent(ToolCallSyntax::kGemmaJson, "```json");
  ExpectContent(ToolCallSyntax::kQwen3Xml, "<tool_call>\n<function=f>\n</tool_call>");
  ExpectContent(ToolCallSyntax::kQwen3Xml, "<tool_call>\n<function=>\n</function></tool_call>");
  ExpectContent(ToolCallSyntax::kQwen3Xml,
                "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>");
  ExpectContent(ToolCallSyntax::kQwen3Xml, "<tool_call>\n<function=f>\n</function>\nx</tool_call>");
  ExpectContent(ToolCallSyntax::kQwen3Xml, "<tool_call>\n<function=f\n>\n</function></tool_call>");
  ExpectContent(ToolCallSyntax::kQwen3Xml, "<tool_call>\n<function=f>\n</function>");
}

TEST(ToolCallsMalformedTest, DeepNestingIsRefusedNotRecursed) {
  const std::string deep(200000, '[');
  for (ToolCallSyntax s : kAll) {
    SCOPED_TRACE(ToolCallSyntaxName(s));
    const std::string open = OpenMarker(s);
    ParsedReply r = ParseToolCalls(s, open + "{\"name\": \"f\", \"arguments\": " + deep);
    EXPECT_TRUE(r.calls.empty());
  }
  // Deep JSON inside a string: double-encoded arguments and an XML parameter value.
  std::string nested = std::string(5000, '[') + std::string(5000, ']');
  ParsedReply a =
      ParseToolCalls(ToolCallSyntax::kHermes,
                     "<tool_call>{\"name\": \"f\", \"arguments\": \"" + nested + "\"}</tool_call>");
  EXPECT_TRUE(a.calls.empty());
  ParsedReply b = ParseToolCalls(ToolCallSyntax::kQwen3Xml,
                                 "<tool_call>\n<function=f>\n<parameter=x>\n" + nested +
                                     "\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(b.calls.size(), 1u);  // not JSON within the depth limit: a string
  EXPECT_EQ(b.calls[0].arguments, "{\"x\":\"" + nested + "\"}");
}

TEST(ToolCallsMalformedTest, LongCallsAreReleasedAsTheyStream) {
  ToolCallParserOptions opts;
  opts.max_call_bytes = 256;
  for (ToolCallSyntax s : kAll) {
    SCOPED_TRACE(ToolCallSyntaxName(s));
    const std::string open = OpenMarker(s);
    ToolCallParser parser(s, opts);
    size_t released = parser.Feed(open + "{\"name\": \"f\", \"arguments\": {\"x\": \"").size();
    EXPECT_EQ(released, 0u);
    std::string content;
    for (int i = 0; i < 100; ++i) {
      for (const ToolCallEvent& e : parser.Feed(std::string(100, 'a'))) content += e.content;
    }
    // The held part never exceeds the bound: nearly everything came out already.
    EXPECT_GE(content.size(), 100u * 100u - 256u);
    EXPECT_TRUE(parser.calls().empty());
  }
  // The same long call whole and split: same events.
  std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"" +
                     std::string(600, 'b') +
                     "\"}}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>";
  test::ExpectSplitInvariant(ToolCallSyntax::kHermes, text, 5, opts);
  ParsedReply r = ParseToolCalls(ToolCallSyntax::kHermes, text, opts);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
}

TEST(ToolCallsMalformedTest, InvalidUtf8AndNulBytes) {
  ExpectContent(ToolCallSyntax::kHermes, "<tool_call>{\"name\": \"f\xff\"}</tool_call>");
  ExpectContent(ToolCallSyntax::kHermes,
                std::string("<tool_call>{\"name\": \"f\", \"a\": \"\0\"}</tool_call>", 41));
  ParsedReply r = ParseToolCalls(
      ToolCallSyntax::kQwen3Xml,
      "<tool_call>\n<function=f>\n<parameter=x>\n\xC3\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);  // the bad byte is replaced in the arguments JSON
  EXPECT_EQ(r.calls[0].arguments, "{\"x\":\"\xEF\xBF\xBD\"}");
  std::string nul_text("a\0<tool_call>{\"name\": \"f\"}</tool_call>\0b", 40);
  ParsedReply n = ParseToolCalls(ToolCallSyntax::kHermes, nul_text);
  ASSERT_EQ(n.calls.size(), 1u);
  EXPECT_EQ(n.content, std::string("a\0\0b", 4));
}

// Random soup of marker pieces: never a crash, the same events for every split, and every
// byte is either content or part of a call.
TEST(ToolCallsMalformedTest, RandomMarkupSoup) {
  const std::vector<std::string> pieces = {"<tool_call>",
                                           "</tool_call>",
                                           "<tool_c",
                                           "{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           "\\",
                                           ":",
                                           ",",
                                           ";",
                                           "\"name\"",
                                           "\"arguments\"",
                                           "\"parameters\"",
                                           "\"f\"",
                                           " ",
                                           "\n",
                                           "```",
                                           "```json",
                                           "```tool_call",
                                           "<|python_tag|>",
                                           "<function=f>",
                                           "</function>",
                                           "<parameter=x>",
                                           "</parameter>",
                                           "x",
                                           "1",
                                           "\xff",
                                           "{\"name\": \"f\", \"arguments\": {}}"};
  std::mt19937 rng(99);
  for (ToolCallSyntax s : kAll) {
    for (int round = 0; round < 150; ++round) {
      std::string text;
      size_t n = std::uniform_int_distribution<size_t>(1, 40)(rng);
      for (size_t i = 0; i < n; ++i) {
        text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
      }
      SCOPED_TRACE(text);
      test::FedReply whole = FeedWhole(s, text);
      size_t call_bytes = 0;
      for (const ToolCall& c : whole.calls) call_bytes += c.name.size();
      EXPECT_LE(whole.content.size() + call_bytes, text.size());
      if (whole.calls.empty()) {
        EXPECT_EQ(whole.content, text);
      }
      test::ExpectSplitInvariant(s, text, 3);
    }
  }
}

}  // namespace
}  // namespace tessera
