// One test per supported keyword: what is accepted, what is refused, and that no accepted
// prefix is a dead end.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar_test_util.h"

namespace tessera::test {
namespace {

using nlohmann::json;

bool Complete(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Fed f = Feed(g, text);
  return f.accepted && f.complete;
}
bool Prefix(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  return Feed(g, text).accepted;
}

// Every prefix of `text` can still be finished (complete now, or some byte continues it).
void ExpectNoDeadEndAlong(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, SmallVocabulary());
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(m.IsComplete() || m.CanContinue())
        << "dead end after '" << text.substr(0, i) << "'";
    ASSERT_TRUE(m.AcceptBytes(text.substr(i, 1)).ok()) << text.substr(0, i + 1);
  }
}

TEST(GrammarJsonObject, AcceptsObjectsOnly) {
  auto g = JsonObjectGrammar();
  EXPECT_TRUE(Complete(g, R"({"a":[1,2.5,{"b":null}],"c":"x","d":true})"));
  EXPECT_TRUE(Complete(g, "{}"));
  EXPECT_TRUE(Complete(g, R"({"a": 1, "b": [1, 2]})"));
  EXPECT_FALSE(Prefix(g, "[1]"));
  EXPECT_FALSE(Prefix(g, "\"x\""));
  EXPECT_FALSE(Prefix(g, " {}"));
  EXPECT_FALSE(Prefix(g, R"({ "a":1})"));   // no space after '{'
  EXPECT_FALSE(Prefix(g, R"({"a":  1})"));  // at most one space after ':'
  EXPECT_FALSE(Prefix(g, R"({"a" :1})"));
  EXPECT_FALSE(Complete(g, R"({"a":1})"
                           " "));
  EXPECT_FALSE(Complete(g, R"({"a":1)"));
  auto rf = CompileResponseFormat(json{{"type", "json_object"}});
  ASSERT_TRUE(rf.has_value());
  EXPECT_TRUE(Complete(*rf, R"({"k":"v"})"));
}

TEST(GrammarObject, DeclaredPropertiesInNameOrderRequiredEnforced) {
  auto g = MustCompile(R"({"type":"object","properties":{"a":{"type":"integer"},
      "b":{"type":"string"},"c":{"type":"boolean"}},"required":["a","c"],
      "additionalProperties":false})");
  EXPECT_TRUE(Complete(g, R"({"a":1,"c":true})"));
  EXPECT_TRUE(Complete(g, R"({"a":1,"b":"x","c":false})"));
  EXPECT_TRUE(Complete(g, R"({"a": 1, "b": "x", "c": false})"));
  EXPECT_FALSE(Prefix(g, R"({"c":true)"));  // 'a' is required first
  EXPECT_FALSE(Prefix(g, R"({"a":1,"d")"));
  EXPECT_FALSE(Prefix(g, R"({"a":1})"));
  EXPECT_FALSE(Prefix(g, "{}"));
  EXPECT_FALSE(Prefix(g, R"({"a":1,"a")"));
  ExpectNoDeadEndAlong(g, R"({"a":1,"b":"x","c":false})");
}

TEST(GrammarObject, AdditionalPropertiesWithoutProperties) {
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"object","additionalProperties":false})"), "{}"));
  EXPECT_FALSE(Prefix(MustCompile(R"({"type":"object","additionalProperties":false})"), "{\""));
  auto typed = MustCompile(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(Complete(typed, R"({"x":1,"y":2})"));
  EXPECT_FALSE(Prefix(typed, R"({"x":"s")"));
  auto free = MustCompile(R"({"type":"object"})");
  EXPECT_TRUE(Complete(free, R"({"x":[{}],"y":"z"})"));
}

TEST(GrammarObject, PropertyKeysNeedingEscapes) {
  auto g = MustCompile(R"({"type":"object","properties":{"q\"uote":{"type":"null"},
      "é":{"type":"null"}},"required":["q\"uote"]})");
  EXPECT_TRUE(Complete(g, R"({"q\"uote":null})"));
  EXPECT_TRUE(Complete(g, "{\"q\\\"uote\":null,\"\xC3\xA9\":null}"));
}

TEST(GrammarArray, ItemsAndCounts) {
  auto g = MustCompile(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(Complete(g, "[1]"));
  EXPECT_FALSE(Prefix(g, "[1]"));
  EXPECT_TRUE(Complete(g, "[1,2]"));
  EXPECT_TRUE(Complete(g, "[1, 2, 3]"));
  EXPECT_FALSE(Prefix(g, "[1,2,3,"));
  EXPECT_FALSE(Prefix(g, "[\"a\""));
  EXPECT_FALSE(Prefix(g, "[ 1"));
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"array","items":false})"), "[]"));
  EXPECT_FALSE(Prefix(MustCompile(R"({"type":"array","items":false})"), "[1"));
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"array"})"), R"([1,"a",[],{"b":null}])"));
  ExpectNoDeadEndAlong(g, "[1, 2, 3]");
}

TEST(GrammarString, LengthsCountCharactersAndEscapes) {
  auto g = MustCompile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(Prefix(g, "\"a\""));
  EXPECT_TRUE(Complete(g, "\"ab\""));
  EXPECT_TRUE(Complete(g, "\"\xC3\xA9\xC3\xA9\xC3\xA9\""));  // 3 characters, 6 bytes
  EXPECT_TRUE(Complete(g, R"("a\n\u00e9")"));
  EXPECT_FALSE(Prefix(g, "\"abcd"));
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"string"})"), R"("a\"\\\/\b\f\n\r\t\u0041")"));
}

TEST(GrammarString, RefusesControlsSurrogatesAndBadUtf8) {
  auto g = MustCompile(R"({"type":"string"})");
  EXPECT_FALSE(Prefix(g, "\"a\nb"));
  EXPECT_FALSE(Prefix(g, "\"\\ud800"));
  EXPECT_FALSE(Prefix(g, "\"\\uDC00"));
  EXPECT_TRUE(Prefix(g, "\"\\ud7ff"));
  EXPECT_FALSE(Prefix(g, "\"\\x"));
  EXPECT_FALSE(Prefix(g, "\"\xC0\xAF"));      // overlong
  EXPECT_FALSE(Prefix(g, "\"\xED\xA0\x80"));  // surrogate in UTF-8
  EXPECT_FALSE(Prefix(g, "\"\xF4\x90"));      // past U+10FFFF
  EXPECT_TRUE(Complete(g, "\"\xF0\x9F\x98\x80\""));
  EXPECT_FALSE(Complete(g, "\"\xE4\xB8\""));  // truncated character
}

TEST(GrammarString, Pattern) {
  auto g = MustCompile(R"({"type":"string","pattern":"^[a-z]{2,3}-\\d+$"})");
  EXPECT_TRUE(Complete(g, "\"ab-1\""));
  EXPECT_TRUE(Complete(g, "\"abc-123\""));
  EXPECT_FALSE(Prefix(g, "\"a-"));
  EXPECT_FALSE(Prefix(g, "\"abcd"));
  EXPECT_FALSE(Prefix(g, "\"ab-\""));
  auto unanchored = MustCompile(R"({"type":"string","pattern":"ab"})");
  EXPECT_TRUE(Complete(unanchored, "\"xxaby\""));
  EXPECT_FALSE(Prefix(unanchored, "\"x\""));
  auto bounded = MustCompile(R"({"type":"string","pattern":"^(ab|c)+$","maxLength":3})");
  EXPECT_TRUE(Complete(bounded, "\"abc\""));
  EXPECT_FALSE(Prefix(bounded, "\"cca"));  // a 4th character would be needed
}

TEST(GrammarInteger, Bounds) {
  auto g = MustCompile(R"({"type":"integer","minimum":10,"maximum":20})");
  EXPECT_TRUE(Complete(g, "10"));
  EXPECT_TRUE(Complete(g, "20"));
  EXPECT_FALSE(Prefix(g, "3"));
  EXPECT_FALSE(Prefix(g, "21"));
  EXPECT_FALSE(Prefix(g, "-"));
  EXPECT_FALSE(Prefix(g, "1."));
  EXPECT_FALSE(Complete(g, "1"));
  auto ex = MustCompile(R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":0})");
  EXPECT_TRUE(Complete(ex, "-2"));
  EXPECT_TRUE(Complete(ex, "-1"));
  EXPECT_FALSE(Prefix(ex, "-3"));
  EXPECT_FALSE(Prefix(ex, "0"));
  auto any = MustCompile(R"({"type":"integer"})");
  EXPECT_FALSE(Prefix(any, "01"));
  EXPECT_FALSE(Prefix(any, "-0"));
  EXPECT_TRUE(Complete(any, "-123"));
  EXPECT_FALSE(Prefix(any, "1234567890123456789"));  // 19 digits
  ExpectNoDeadEndAlong(g, "15");
}

TEST(GrammarNumber, FreeAndBounded) {
  auto free = MustCompile(R"({"type":"number"})");
  EXPECT_TRUE(Complete(free, "-1.5e+10"));
  EXPECT_TRUE(Complete(free, "0.25"));
  EXPECT_FALSE(Prefix(free, "1.e"));
  EXPECT_FALSE(Complete(free, "1."));
  auto g = MustCompile(R"({"type":"number","minimum":0,"maximum":1})");
  EXPECT_TRUE(Complete(g, "0.5"));
  EXPECT_TRUE(Complete(g, "1"));
  EXPECT_FALSE(Prefix(g, "1."));
  EXPECT_FALSE(Prefix(g, "0.5e"));
  EXPECT_FALSE(Prefix(g, "-"));
  auto neg = MustCompile(R"({"type":"number","minimum":-2.5,"exclusiveMaximum":0})");
  EXPECT_TRUE(Complete(neg, "-1.75"));
  EXPECT_TRUE(Complete(neg, "-2"));
  EXPECT_FALSE(Prefix(neg, "-2."));  // -2.x could pass -2.5
  EXPECT_FALSE(Prefix(neg, "0"));
}

TEST(GrammarLiterals, EnumConstBooleanNull) {
  auto g = MustCompile(R"({"enum":["a",1,12,null,{"x":[1]},true]})");
  for (const char* ok : {"\"a\"", "1", "12", "null", R"({"x":[1]})", "true"}) {
    EXPECT_TRUE(Complete(g, ok)) << ok;
  }
  EXPECT_FALSE(Prefix(g, "13"));
  EXPECT_FALSE(Prefix(g, "\"b"));
  EXPECT_TRUE(Complete(MustCompile(R"({"const":"only"})"), "\"only\""));
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"boolean"})"), "false"));
  EXPECT_TRUE(Complete(MustCompile(R"({"type":"null"})"), "null"));
  auto typed = MustCompile(R"({"type":"string","enum":["x",2]})");
  EXPECT_FALSE(Prefix(typed, "2"));
  EXPECT_TRUE(Complete(typed, "\"x\""));
}

TEST(GrammarUnion, AnyOfOneOfAndTypeLists) {
  auto g = MustCompile(R"({"anyOf":[{"type":"string","maxLength":1},{"type":"integer"},
      {"type":"object","properties":{"a":{"type":"null"}},"required":["a"]},
      {"type":"object","properties":{"b":{"type":"null"}},"required":["b"]}]})");
  EXPECT_TRUE(Complete(g, "\"x\""));
  EXPECT_TRUE(Complete(g, "42"));
  EXPECT_TRUE(Complete(g, R"({"a":null})"));
  EXPECT_TRUE(Complete(g, R"({"b":null})"));
  EXPECT_FALSE(Prefix(g, "\"xy"));
  auto list = MustCompile(R"({"type":["string","null"],"maxLength":2})");
  EXPECT_TRUE(Complete(list, "null"));
  EXPECT_TRUE(Complete(list, "\"ab\""));
  EXPECT_FALSE(Prefix(list, "1"));
  auto one = MustCompile(R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})");
  EXPECT_TRUE(Complete(one, "true"));
}

TEST(GrammarRef, DefsAndRecursionAreDepthLimitedWithoutDeadEnds) {
  auto g = MustCompile(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}},
      "name":{"type":"string"}},"required":["name"]}}})");
  EXPECT_TRUE(Complete(g, R"({"children":[{"name":"leaf"}],"name":"root"})"));
  // Nest as deep as the grammar lets us, then check we can still finish.
  GrammarMatcher m(g, SmallVocabulary());
  int levels = 0;
  while (m.AcceptBytes(R"({"children":[)").ok()) ++levels;
  EXPECT_GT(levels, 5);
  EXPECT_LT(levels, 40);
  EXPECT_TRUE(m.CanContinue() || m.IsComplete());
  auto self = MustCompile(R"({"type":"array","items":{"$ref":"#"}})");
  EXPECT_TRUE(Complete(self, "[[],[[]]]"));
}

TEST(GrammarAnnotations, AreIgnored) {
  auto g = MustCompile(R"({"title":"t","description":"d","$schema":"x","default":1,
      "examples":[1],"$id":"i","$comment":"c","type":"integer"})");
  EXPECT_TRUE(Complete(g, "7"));
}

TEST(GrammarMask, AgreesWithAcceptOnEveryToken) {
  auto g = MustCompile(R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},
      "n":{"type":"number","minimum":-1,"maximum":5},"t":{"enum":[true,"ab"]}},
      "required":["n"]})");
  auto vocab = SmallVocabulary();
  GrammarMatcher m(g, vocab);
  const std::string text = R"({"n": 2.5,"name":"h\u00e9",)";
  std::vector<uint64_t> mask(vocab->mask_words());
  for (size_t i = 0; i <= text.size(); ++i) {
    m.FillMask(mask);
    for (int32_t t = 0; t < vocab->size(); ++t) {
      GrammarMatcher copy = m;
      bool allowed = (mask[t / 64] >> (t % 64)) & 1;
      ASSERT_EQ(allowed, copy.Accept(t).ok()) << "token " << t << " after " << text.substr(0, i);
    }
    if (i < text.size()) {
      ASSERT_TRUE(m.AcceptBytes(text.substr(i, 1)).ok());
    }
  }
}

TEST(GrammarMatcher, EosOnlyWhenCompleteAndTerminates) {
  auto vocab = SmallVocabulary();
  GrammarMatcher m(MustCompile(R"({"type":"integer"})"), vocab);
  EXPECT_FALSE(m.Accept(SmallVocabularyEos()).ok());
  ASSERT_TRUE(m.AcceptBytes("7").ok());
  std::vector<uint64_t> mask(vocab->mask_words());
  m.FillMask(mask);
  const int32_t eos = SmallVocabularyEos();
  EXPECT_TRUE((mask[eos / 64] >> (eos % 64)) & 1);
  ASSERT_TRUE(m.Accept(eos).ok());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.Accept('1').ok());
  m.FillMask(mask);
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
}

TEST(TokenVocabularyTextOpeners, TokensWhoseFirstNonSpaceByteIsNotTheOpenerAndEos) {
  // 0 "{", 1 " {", 2 "  " (space only), 3 "hi", 4 " hello", 5 "\n{\"", 6 "}" , 7 special,
  // 8 eos, 9 "\t[".
  auto v =
      TokenVocabulary::Create({"{", " {", "  ", "hi", " hello", "\n{\"", "}", "<s>", "</s>", "\t["},
                              std::vector<int32_t>{7}, std::vector<int32_t>{8});
  ASSERT_TRUE(v) << v.status().message();
  std::vector<uint64_t> mask((*v)->mask_words(), 0);
  (*v)->MarkTextOpeners('{', mask);
  EXPECT_EQ(mask[0], (1u << 3) | (1u << 4) | (1u << 6) | (1u << 8) | (1u << 9));
  // It adds to what the mask holds (the grammar's own first tokens) and clears nothing.
  std::vector<uint64_t> grammar_first((*v)->mask_words(), 1u);
  (*v)->MarkTextOpeners('[', grammar_first);
  EXPECT_EQ(grammar_first[0],
            1u | (1u << 1) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 6) | (1u << 8));
}

}  // namespace
}  // namespace tessera::test
