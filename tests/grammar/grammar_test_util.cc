#include "grammar_test_util.h"

#include <random>

#include "grammar/tokenizer_vocabulary.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
std::vector<int32_t> ClosingPreference(const TokenVocabulary& vocab, const std::string& order) {
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

WalkResult Walk(const std::shared_ptr<const Grammar>& grammar,
                const std::shared_ptr<const TokenVocabulary>& vocab,
                const std::vector<int32_t>& preference, std::mt19937& rng, int free_steps,
                double any_token_share) {
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
    } else if (step >= free_steps &&
               !(any_token_share > 0 && std::bernoulli_distribution(any_token_share)(rng))) {
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

}  // namespace tessera::test
