// 200 seeded random schemas; random "model" walks over a synthetic byte vocabulary and over
// the real Qwen2.5 vocabulary. Every walk must end in a document that parses and validates
// (with the independent validator), and no reachable state may be a dead end.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "grammar/grammar.h"
#include "grammar/tokenizer_vocabulary.h"
#include "grammar_test_util.h"
#include "random_schema.h"
#include "schema_validator.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace tessera::test {
namespace {

using nlohmann::json;

constexpr int kSchemas = 200;

void CheckOutput(const WalkResult& r, const json& schema, const std::string& label) {
  ASSERT_TRUE(r.finished) << label << ": " << r.problem << "\nschema: " << schema.dump();
  json value = json::parse(r.text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(value.is_discarded())
      << label << ": does not parse: " << r.text << "\nschema: " << schema.dump();
  if (std::getenv("TESSERA_GRAMMAR_TEST_PRINT")) std::printf("%s\n", r.text.c_str());
  std::string why;
  EXPECT_TRUE(ValidateJson(value, schema, schema, &why))
      << label << ": " << why << "\noutput: " << r.text << "\nschema: " << schema.dump();
}

TEST(GrammarRandomSchemas, SmallVocabularyWalksValidate) {
  std::mt19937 rng(20240601);
  auto vocab = SmallVocabulary();
  const auto preference = ClosingPreference(*vocab, kJsonClosingOrder);
  int finished = 0;
  for (int i = 0; i < kSchemas; ++i) {
    json schema = RandomSchema(rng);
    auto grammar = CompileJsonSchema(schema);
    ASSERT_TRUE(grammar.has_value()) << grammar.status().message() << "\n" << schema.dump();
    for (int w = 0; w < 4; ++w) {
      WalkResult r = Walk(*grammar, vocab, preference, rng, 60);
      CheckOutput(r, schema, "schema " + std::to_string(i) + " walk " + std::to_string(w));
      if (::testing::Test::HasFailure()) return;
      ++finished;
    }
  }
  EXPECT_EQ(finished, kSchemas * 4);
}

TEST(GrammarRandomSchemas, QwenVocabularyWalksValidate) {
  auto vocab = QwenVocabulary();
  if (!vocab) GTEST_SKIP() << "Qwen2.5 tokenizer not found under " << SharedDir();
  std::mt19937 rng(7);
  const auto preference = ClosingPreference(*vocab, kJsonClosingOrder);
  for (int i = 0; i < kSchemas; ++i) {
    json schema = RandomSchema(rng);
    auto grammar = CompileJsonSchema(schema);
    ASSERT_TRUE(grammar.has_value()) << grammar.status().message() << "\n" << schema.dump();
    WalkResult r = Walk(*grammar, vocab, preference, rng, 25);
    CheckOutput(r, schema, "schema " + std::to_string(i));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(GrammarRandomSchemas, JsonObjectOverQwenVocabulary) {
  auto vocab = QwenVocabulary();
  if (!vocab) GTEST_SKIP() << "Qwen2.5 tokenizer not found under " << SharedDir();
  std::mt19937 rng(11);
  const auto preference = ClosingPreference(*vocab, kJsonClosingOrder);
  for (int w = 0; w < 20; ++w) {
    WalkResult r = Walk(JsonObjectGrammar(), vocab, preference, rng, 40);
    ASSERT_TRUE(r.finished) << r.problem;
    json value = json::parse(r.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << r.text;
  }
}

}  // namespace
}  // namespace tessera::test
