// The tokenizer rebuilt from GGUF metadata, checked against Hugging Face's own encodings.
//
// Each test writes the GGUF tokenizer metadata the way llama.cpp's converter
// (convert_hf_to_gguf.py: get_vocab_base / _set_vocab_gpt2 for byte-level BPE,
// _set_vocab_sentencepiece for SentencePiece, gguf-py SpecialVocab for the special ids and
// flags) writes it from a real tokenizer.json + tokenizer_config.json, builds tessera's
// tokenizer from that metadata only, and compares its encodings with the reference vectors
// Hugging Face's tokenizers produced from the original files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "support/hf_tokenizer_to_gguf.h"
#include "test_support.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/sentencepiece_merges.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using nlohmann::json;

constexpr int32_t kNormal = static_cast<int32_t>(GgufTokenType::kNormal);
constexpr int32_t kControl = static_cast<int32_t>(GgufTokenType::kControl);
constexpr int32_t kUserDefined = static_cast<int32_t>(GgufTokenType::kUserDefined);
constexpr int32_t kUnused = static_cast<int32_t>(GgufTokenType::kUnused);

json LoadJson(const std::string& path) {
  json j = json::parse(test::ReadFile(path), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

std::string Dir(const std::string& name) {
  if (name == "stories260k") return test::SharedDir() + "/models/stories260k";
  return test::SharedDir() + "/tokenizers/" + name;
}

std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to) {
  return test::ReplaceAllOf(s, from, to);
}

// _set_vocab_gpt2 / get_vocab_base: one token per id up to the config's vocab_size (ids the
// tokenizer lacks become "[PAD<id>]", UNUSED), added tokens CONTROL when special or
// special-looking, else USER_DEFINED; the tokenizer.json merges as "left right".
GgufTokenizerData ConvertByteLevel(const std::string& name, const std::string& pre) {
  json tj = LoadJson(Dir(name) + "/tokenizer.json");
  json tc = LoadJson(Dir(name) + "/tokenizer_config.json");
  std::map<int64_t, std::string> by_id;
  for (auto it = tj["model"]["vocab"].begin(); it != tj["model"]["vocab"].end(); ++it) {
    by_id[it.value().get<int64_t>()] = it.key();
  }
  std::map<std::string, const json*> added;
  for (const json& a : tj["added_tokens"]) {
    by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    added[a["content"].get<std::string>()] = &a;
  }
  // config.json's vocab_size is rounded up past the tokenizer (Qwen2.5: 151936 for 151665).
  int64_t vocab_size = (by_id.rbegin()->first + 1 + 127) / 128 * 128;
  GgufTokenizerData g;
  g.model = "gpt2";
  g.pre = pre;
  for (int64_t id = 0; id < vocab_size; ++id) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      g.tokens.push_back("[PAD" + std::to_string(id) + "]");
      g.token_types.push_back(kUnused);
      continue;
    }
    std::string token = it->second;
    auto a = added.find(token);
    if (a == added.end()) {
      g.token_types.push_back(kNormal);
    } else if ((*a->second)["special"].get<bool>() || test::ConverterLooksSpecial(token)) {
      g.token_types.push_back(kControl);
    } else {
      token = ReplaceAll(token, "\xe2\x96\x81", " ");
      g.token_types.push_back(kUserDefined);
    }
    g.tokens.push_back(token);
  }
  for (const json& m : tj["model"]["merges"]) {
    g.merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  test::SetConverterSpecialVocab(tj, tc, &g);
  return g;
}

// _set_vocab_sentencepiece, from the tokenizer.json these folders ship instead of
// tokenizer.model (support/hf_tokenizer_to_gguf.h).
GgufTokenizerData ConvertSentencePiece(const std::string& name, std::optional<bool> space_prefix) {
  auto g = test::SentencePieceVocab(Dir(name));
  EXPECT_TRUE(g) << g.status().ToString();
  if (!g) return {};
  g->add_space_prefix = space_prefix;
  return *g;
}

Tokenizer Build(const GgufTokenizerData& g) {
  auto start = std::chrono::steady_clock::now();
  auto tok = TokenizerFromGguf(g);
  std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  std::printf("built %s/%s tokenizer of %zu tokens in %.0f ms (information only)\n",
              g.model.c_str(), g.pre.c_str(), g.tokens.size(), took.count());
  if (!tok) {
    ADD_FAILURE() << tok.status().message();
    std::abort();
  }
  return std::move(tok).value();
}

EncodeOptions WithSpecial() {
  EncodeOptions o;
  o.add_special_tokens = true;
  return o;
}

struct Family {
  std::string name;
  std::string pre;                 // what the converter writes for this tokenizer
  std::vector<int32_t> bos_added;  // what add_special_tokens puts in front
};

// Names the parameter in test names (gtest would dump the struct's bytes).
void PrintTo(const Family& f, std::ostream* os) {
  *os << f.name << " (pre " << f.pre << ")";
}

// Compares against every reference vector; returns the number of cases whose ids differ.
int CompareWithReference(const std::string& name, const Tokenizer& tok,
                         const std::vector<int32_t>& bos_added, bool report) {
  json cases = LoadJson(test::SharedDir() + "/tokenizers/reference/" + name + ".encode.json");
  int ids_ok = 0, special_ok = 0, decoded_ok = 0, round_trip_ok = 0, differ = 0;
  for (const json& c : cases) {
    std::string text = c["text"].get<std::string>();
    auto want = c["ids"].get<std::vector<int32_t>>();
    auto ids = tok.Encode(text);
    if (!ids) {
      ADD_FAILURE() << ids.status().message();
      return -1;
    }
    if (*ids == want) {
      ++ids_ok;
    } else {
      ++differ;
      if (report) ADD_FAILURE() << name << ": ids differ for " << json(text).dump();
    }
    if (!report) continue;
    std::vector<int32_t> want_special = bos_added;
    want_special.insert(want_special.end(), want.begin(), want.end());
    auto with_special = tok.Encode(text, WithSpecial());
    if (with_special && *with_special == want_special) {
      ++special_ok;
    } else {
      ADD_FAILURE() << name << ": ids_with_special differ for " << json(text).dump();
    }
    auto decoded = tok.Decode(want, false);
    if (decoded && *decoded == c["decoded"].get<std::string>()) {
      ++decoded_ok;
    } else {
      ADD_FAILURE() << name << ": decode differs for " << json(text).dump();
    }
    auto back = tok.Decode(*ids, false);  // our own ids decode to Hugging Face's text
    if (back && *back == c["decoded"].get<std::string>()) {
      ++round_trip_ok;
    } else {
      ADD_FAILURE() << name << ": round trip differs for " << json(text).dump();
    }
  }
  if (report) {
    std::printf(
        "%s from GGUF metadata: ids %d/%zu, with special %d/%zu, decode %d/%zu, "
        "round trip %d/%zu\n",
        name.c_str(), ids_ok, cases.size(), special_ok, cases.size(), decoded_ok, cases.size(),
        round_trip_ok, cases.size());
  }
  return differ;
}

class GgufByteLevel : public ::testing::TestWithParam<Family> {};

TEST_P(GgufByteLevel, EncodesLikeHuggingFace) {
  const Family& f = GetParam();
  Tokenizer tok = Build(ConvertByteLevel(f.name, f.pre));
  EXPECT_EQ(CompareWithReference(f.name, tok, f.bos_added, true), 0);
}

// Qwen and MiniCPM-V 4.5: the converter writes "qwen2" and add_bos_token false. Llama 3: this
// copy's tokenizer_config has no add_bos_token and its post-processor adds nothing, so the
// file has no add_bos_token key and llama.cpp's default for "llama-bpe" (add BOS) applies;
// Hugging Face's own encode adds nothing here (its reference ids_with_special == ids).
INSTANTIATE_TEST_SUITE_P(Families, GgufByteLevel,
                         ::testing::Values(Family{"Qwen2.5-1.5B-Instruct", "qwen2", {}},
                                           Family{"Qwen3-4B", "qwen2", {}},
                                           Family{"MiniCPM-V-4_5", "qwen2", {}},
                                           Family{"Meta-Llama-3-8B", "llama-bpe", {128000}}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(GgufSentencePiece, Gemma3EncodesLikeHuggingFace) {
  GgufTokenizerData g = ConvertSentencePiece("gemma-3-1b-it", false);  // Gemma3Model writes false
  Tokenizer tok = Build(g);
  EXPECT_EQ(CompareWithReference("gemma-3-1b-it", tok, {2}, true), 0);
  EXPECT_EQ(tok.TokenToId("<start_of_turn>"), 105);
  EXPECT_TRUE(tok.IsSpecial(106));
}

TEST(GgufSentencePiece, Gemma3MatchesItsTokenizerJsonOnSpaceRuns) {
  // Gemma's user-defined pieces include runs of "▁" that the converter writes as spaces; they
  // must get their "▁" back (as vocabulary entries and as merges) to tokenize like Hugging
  // Face. The reference is tessera's tokenizer.json path, which the reference vectors check.
  Tokenizer gguf = Build(ConvertSentencePiece("gemma-3-1b-it", false));
  auto hf = Tokenizer::FromFile(Dir("gemma-3-1b-it") + "/tokenizer.json");
  ASSERT_TRUE(hf.has_value()) << hf.status().message();
  std::string spaces40(40, ' ');
  const std::vector<std::string> texts = {"a  b",
                                          "  the",
                                          "x   y",
                                          "\t\tz",
                                          "if  (x)  {\n    return  1;\n  }",
                                          spaces40 + "end",
                                          "\xe2\x96\x81\xe2\x96\x81 literal",
                                          "end   ",
                                          "a \n  b",
                                          "<unused5>  <start_of_turn>  x"};
  for (const std::string& text : texts) {
    auto a = gguf.Encode(text);
    auto b = hf->Encode(text);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_EQ(*a, *b) << json(text).dump();
    EXPECT_EQ(*gguf.Decode(*a, false), *hf->Decode(*b, false)) << json(text).dump();
  }
}

TEST(GgufSentencePiece, DerivedMergesAreGemma3sTokenizerJsonMerges) {
  GgufTokenizerData g = ConvertSentencePiece("gemma-3-1b-it", false);
  // What the builder does with the metadata: control / user-defined pieces score 0 and get
  // their "▁" back.
  std::vector<float> scores = g.scores;
  std::vector<std::string> pieces = g.tokens;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (g.token_types[i] == kControl || g.token_types[i] == kUserDefined) scores[i] = 0.0f;
    if (g.token_types[i] == kUserDefined) pieces[i] = ReplaceAll(pieces[i], " ", "\xe2\x96\x81");
  }
  auto merges = tok::DeriveSentencePieceMerges(pieces, scores);
  json tj = LoadJson(Dir("gemma-3-1b-it") + "/tokenizer.json");
  const json& want = tj["model"]["merges"];
  ASSERT_EQ(merges.size(), want.size());
  size_t same = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    same += pieces[merges[i].first] == want[i][0].get<std::string>() &&
            pieces[merges[i].second] == want[i][1].get<std::string>();
  }
  EXPECT_EQ(same, merges.size());
}

TEST(GgufSentencePiece, Stories260kEncodesLikeItsTokenizerJson) {
  // A Llama-2 style tokenizer (add_space_prefix absent: llama.cpp's default, true). No
  // Hugging Face vectors exist for it, so the reference is tessera's tokenizer.json path,
  // which the reference-vector tests check, over the same 388 strings, plus llama2.c's ids.
  Tokenizer gguf = Build(ConvertSentencePiece("stories260k", std::nullopt));
  auto hf = Tokenizer::FromFile(Dir("stories260k") + "/tokenizer.json");
  ASSERT_TRUE(hf.has_value()) << hf.status().message();
  json cases = LoadJson(test::SharedDir() + "/tokenizers/reference/Qwen3-4B.encode.json");
  int same = 0;
  for (const json& c : cases) {
    std::string text = c["text"].get<std::string>();
    auto a = gguf.Encode(text, WithSpecial());
    auto b = hf->Encode(text, WithSpecial());
    ASSERT_TRUE(a.has_value() && b.has_value());
    if (*a == *b) {
      ++same;
    } else {
      ADD_FAILURE() << "stories260k differs for " << json(text).dump();
    }
    auto back = gguf.Decode(*a, true);
    auto want = hf->Decode(*b, true);
    ASSERT_TRUE(back.has_value() && want.has_value());
    EXPECT_EQ(*back, *want) << json(text).dump();
  }
  std::printf("stories260k from GGUF metadata: %d/%zu like tokenizer.json\n", same, cases.size());
  json ref = LoadJson(Dir("stories260k") + "/reference_greedy.json");
  for (const json& c : ref["cases"]) {
    auto ids = gguf.Encode(c["prompt"].get<std::string>(), WithSpecial());
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["prompt"];
  }
}

// The pre name decides the pre-tokenizer: a wrong one must change the encodings.
TEST(GgufPreTokenizer, AWrongPreNameChangesTheEncodings) {
  GgufTokenizerData g = ConvertByteLevel("Qwen2.5-1.5B-Instruct", "qwen2");
  g.pre = "llama-bpe";  // \p{N}{1,3} digit groups, no NFC, ignore_merges
  int llama_bpe = CompareWithReference("Qwen2.5-1.5B-Instruct", Build(g), {}, false);
  g.pre = "smollm";  // single digits, GPT-2's split, no NFC
  int smollm = CompareWithReference("Qwen2.5-1.5B-Instruct", Build(g), {}, false);
  std::printf("Qwen2.5 metadata with a wrong pre: llama-bpe %d, smollm %d strings differ\n",
              llama_bpe, smollm);
  EXPECT_GE(llama_bpe, 5);
  EXPECT_GE(smollm, 5);
}

TEST(GgufPreTokenizer, SmolLmSplitsDigitsOneByOne) {
  Tokenizer smollm = Build(test::TinyByteLevel("smollm"));
  GgufTokenizerData llama3_data = test::TinyByteLevel("llama-bpe");
  llama3_data.add_bos_token = false;
  Tokenizer llama3 = Build(llama3_data);
  EXPECT_EQ(*smollm.Encode("12"), (std::vector<int32_t>{'1', '2'}));
  EXPECT_EQ(*llama3.Encode("12"), (std::vector<int32_t>{256}));
  EXPECT_EQ(*smollm.Decode(*smollm.Encode("a 12<|endoftext|>"), false), "a 12<|endoftext|>");
  EXPECT_EQ(smollm.Encode("x<|endoftext|>")->back(), 257);
  EXPECT_TRUE(smollm.IsSpecial(257));
}

// StarCoder's and Refact's files split like SmolLM's (one llama.cpp pre-tokenizer type; the
// full check is llama.cpp's ggml-vocab-{starcoder,refact}.gguf vectors, bench/results/gguf.md).
TEST(GgufPreTokenizer, StarCoderAndRefactSplitLikeSmolLm) {
  Tokenizer smollm = Build(test::TinyByteLevel("smollm"));
  for (const char* pre : {"starcoder", "refact"}) {
    Tokenizer other = Build(test::TinyByteLevel(pre));
    for (const char* text : {"12", "a 12<|endoftext|>", "x  y\n\n 3.5", "I've 42 \t!"}) {
      EXPECT_EQ(*other.Encode(text), *smollm.Encode(text)) << pre << ": " << text;
    }
    EXPECT_EQ(*other.Encode("12"), (std::vector<int32_t>{'1', '2'})) << pre;
  }
}

TEST(GgufPreTokenizer, Qwen35KeepsCombiningMarksWithTheirLetter) {
  // "x" + U+0301 (no precomposed form, so NFC keeps it): qwen2's split isolates the mark,
  // qwen35's keeps it in the word, so only qwen35 can reach the merged token.
  GgufTokenizerData g = test::TinyByteLevel("qwen35");
  std::string acute = g.tokens[0xCC] + g.tokens[0x81];  // the byte-level text of U+0301
  g.tokens.push_back(acute);
  g.token_types.push_back(kNormal);
  g.tokens.push_back("x" + acute);
  g.token_types.push_back(kNormal);
  g.merges.push_back(g.tokens[0xCC] + " " + g.tokens[0x81]);
  g.merges.push_back("x " + acute);
  Tokenizer qwen35 = Build(g);
  g.pre = "qwen2";
  Tokenizer qwen2 = Build(g);
  EXPECT_EQ(*qwen35.Encode("x\xcc\x81"), (std::vector<int32_t>{259}));
  EXPECT_EQ(*qwen2.Encode("x\xcc\x81"), (std::vector<int32_t>{'x', 258}));
}

}  // namespace
}  // namespace tessera
