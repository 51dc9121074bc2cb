#include "grammar_test_util.h"

#include <gtest/gtest.h>

namespace tessera::test {

std::shared_ptr<const TokenVocabulary> SmallVocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* piece : {"\":",
                              "\": ",
                              "\",\"",
                              "\", \"",
                              "{\"",
                              "\"}",
                              "\"]",
                              "[\"",
                              "true",
                              "false",
                              "null",
                              " the",
                              "hello",
                              "ab",
                              "abc",
                              "12",
                              "0.",
                              "-1",
                              "e+",
                              "\\u00",
                              "\\n",
                              "\\\"",
                              "},{",
                              "]}",
                              "}}",
                              ":[",
                              ":{",
                              "\xC3\xA9",
                              "\xE4\xB8",
                              "\xAD",
                              "\xF0\x9F\x98\x80",
                              "  ",
                              "\"a\"",
                              "\"b\":",
                              "name",
                              "\"name\":\""}) {
      tokens.emplace_back(piece);
    }
    tokens.emplace_back("<eos>");
    const int32_t eos[] = {static_cast<int32_t>(tokens.size() - 1)};
    auto v = TokenVocabulary::Create(std::move(tokens), {}, eos);
    EXPECT_TRUE(v.has_value()) << v.status().message();
    return *v;
  }();
  return vocab;
}

int32_t SmallVocabularyEos() {
  return SmallVocabulary()->size() - 1;
}

Fed Feed(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarMatcher m(grammar, SmallVocabulary());
  Fed fed;
  fed.accepted = m.AcceptBytes(text).ok();
  fed.complete = fed.accepted && m.IsComplete();
  return fed;
}

std::shared_ptr<const Grammar> MustCompile(const std::string& schema_json) {
  auto g = CompileJsonSchema(nlohmann::json::parse(schema_json));
  EXPECT_TRUE(g.has_value()) << schema_json << ": " << g.status().message();
  return g.has_value() ? *g : JsonObjectGrammar();
}

}  // namespace tessera::test
