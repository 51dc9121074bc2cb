// 200 seeded random schemas; random "model" walks over a synthetic byte vocabulary and over
// the real Qwen2.5 vocabulary. Every walk must end in a document that parses and validates
// (with the independent validator), and no reachable state may be a dead end.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
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

std::shared_ptr<const TokenVocabulary> QwenVocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocab =
      []() -> std::shared_ptr<const TokenVocabulary> {
    auto tok =
        Tokenizer::FromFile(SharedDir() + "/tokenizers/Qwen2.5-1.5B-Instruct/tokenizer.json");
    if (!tok) return nullptr;
    std::vector<int32_t> eos;
    for (const char* name : {"<|im_end|>", "<|endoftext|>"}) {
      if (auto id = tok->TokenToId(name)) eos.push_back(*id);
    }
    auto v = VocabularyFromTokenizer(*tok, eos);
    return v ? *v : nullptr;
  }();
  return vocab;
}

// Single-byte tokens in the order a completion-seeking model prefers them: closers first,
// openers last.
std::vector<int32_t> ClosingPreference(const TokenVocabulary& vocab) {
  const std::string order =
      "\"}]0123456789ntfaeulrsbcdghijkmopqvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:,-. _@\\/u+E[{";
  std::vector<int32_t> single(256, -1);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string& b = vocab.bytes(id);
    if (b.size() == 1 && single[static_cast<unsigned char>(b[0])] < 0) {
      single[static_cast<unsigned char>(b[0])] = id;
    }
  }
  std::vector<int32_t> out;
  for (char c : order) {
    if (single[static_cast<unsigned char>(c)] >= 0)
      out.push_back(single[static_cast<unsigned char>(c)]);
  }
  return out;
}

bool Allowed(const std::vector<uint64_t>& mask, int32_t id) {
  return (mask[id / 64] >> (id % 64)) & 1;
}

struct WalkResult {
  bool finished = false;
  std::string text;
  std::string problem;
};

// Free random steps, then (past the budget) mostly the most closing allowed byte until an eos
// is allowed.
WalkResult Walk(const std::shared_ptr<const Grammar>& grammar,
                const std::shared_ptr<const TokenVocabulary>& vocab,
                const std::vector<int32_t>& preference, std::mt19937& rng, int free_steps) {
  GrammarMatcher m(grammar, vocab);
  std::vector<uint64_t> mask(vocab->mask_words());
  std::vector<int32_t> allowed;
  WalkResult r;
  for (int step = 0; step < free_steps + 4000; ++step) {
    m.FillMask(mask);
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i) {
      for (uint64_t w = mask[i]; w != 0; w &= w - 1) {
        allowed.push_back(static_cast<int32_t>(i * 64 + __builtin_ctzll(w)));
      }
    }
    if (allowed.empty()) {
      r.problem = "dead end (empty mask) after: " + r.text;
      return r;
    }
    if (!m.IsComplete() && !m.CanContinue()) {
      r.problem = "dead end after: " + r.text;
      return r;
    }
    int32_t token = -1;
    bool eos_ok = false;
    for (int32_t id : allowed) eos_ok = eos_ok || vocab->is_eos(id);
    if (eos_ok && (step >= free_steps || std::bernoulli_distribution(0.3)(rng))) {
      for (int32_t id : allowed) {
        if (vocab->is_eos(id)) token = id;
      }
    } else if (step >= free_steps) {
      // Mostly the most closing byte; otherwise any allowed byte, which gets patterns such
      // as [^@]+@ past the preferred bytes that merely loop.
      std::vector<int32_t> bytes;
      for (int32_t id : preference) {
        if (Allowed(mask, id)) bytes.push_back(id);
      }
      if (!bytes.empty()) {
        token = std::bernoulli_distribution(0.6)(rng)
                    ? bytes[0]
                    : bytes[std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng)];
      }
    }
    if (token < 0) {
      token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    }
    Status st = m.Accept(token);
    if (!st.ok()) {
      r.problem = "allowed token " + std::to_string(token) + " refused: " + st.message();
      return r;
    }
    if (m.IsTerminated()) {
      r.finished = true;
      return r;
    }
    r.text += vocab->bytes(token);
  }
  r.problem = "did not finish: " + r.text;
  return r;
}

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
  const auto preference = ClosingPreference(*vocab);
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
  const auto preference = ClosingPreference(*vocab);
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
  const auto preference = ClosingPreference(*vocab);
  for (int w = 0; w < 20; ++w) {
    WalkResult r = Walk(JsonObjectGrammar(), vocab, preference, rng, 40);
    ASSERT_TRUE(r.finished) << r.problem;
    json value = json::parse(r.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << r.text;
  }
}

}  // namespace
}  // namespace tessera::test
